"""The rules every PD-target sequence obeys, shared by the sampling tracker, the gradient method and the engines.

- :func:`control_rate`: the control period and the simulation substeps inside it;
- :func:`start_pose`: the first reference frame set down on the ground (or the terrain);
- :func:`max_target_step` / :func:`rate_limited`: targets never ask for more than ``VELOCITY_LIMIT_FRACTION`` of a
  joint's URDF velocity limit (the ROS nodes refuse commands beyond the limits);
- :func:`substep_targets`: targets interpolated linearly between control frames, as every engine applies them.

numpy arrays and torch tensors alike (the gradient method differentiates through :func:`rate_limited` and
:func:`substep_targets`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from akd_core.io.errors import ConfigError, MotionError
from akd_core.model.kinematics import ForwardKinematics, geometry_corners
from akd_core.model.robot import Robot
from akd_core.model.terrain import Terrain
from akd_core.motion.clip import Motion

VELOCITY_LIMIT_FRACTION = 0.98  # PD targets never ask for more than this fraction of the URDF velocity limit


# ----------------------------------------------------------------------------- building


def control_rate(motion: Motion, control_hz: float | None, sim_dt: float) -> tuple[float, int, float]:
    """(control_hz, substeps per control period, sim_dt) with sim_dt <= the bound."""
    hz = control_hz if control_hz is not None else min(max(motion.fps, 25.0), 100.0)
    if hz <= 0 or sim_dt <= 0:
        raise ConfigError(f"control_hz and sim_dt must be positive (got {hz}, {sim_dt})")
    steps = max(1, int(math.ceil(1.0 / (hz * sim_dt) - 1e-9)))
    return hz, steps, 1.0 / (hz * steps)


def start_pose(robot: Robot, motion: Motion, terrain: Terrain | None = None) -> tuple[np.ndarray, float]:
    """First reference frame lowered (or raised) until the lowest geometry point touches z = 0, or, on ``terrain``
    (an :class:`akd_core.model.terrain.Terrain`), the surface straight under it: the shift is the least height of
    the geometry points above the terrain. Returns root_pos (3,) and the applied vertical shift (m)."""
    link_idx, points = geometry_corners(robot)
    if len(points) == 0:
        raise MotionError(f"robot '{robot.name}' has no collision or visual geometry to stand on")
    fk = ForwardKinematics(robot)
    world = fk.link_points(torch.as_tensor(motion.root_pos[:1], dtype=torch.float64),
                           torch.as_tensor(motion.root_quat[:1], dtype=torch.float64),
                           torch.as_tensor(motion.joint_pos[:1], dtype=torch.float64),
                           torch.as_tensor(link_idx), torch.as_tensor(points))
    points = world[0].detach().numpy()
    ground = 0.0 if terrain is None or terrain.is_flat else terrain.height(points[:, 0], points[:, 1])
    shift = -float((points[:, 2] - ground).min())
    return motion.root_pos[0].astype(np.float64) + np.array([0.0, 0.0, shift]), shift


def max_target_step(robot: Robot, hz: float) -> np.ndarray:
    """(J,) largest PD-target change per control period at ``hz``: VELOCITY_LIMIT_FRACTION of the URDF velocity
    limit times the period."""
    return VELOCITY_LIMIT_FRACTION * np.asarray(robot.velocity_limit, dtype=np.float64) / hz


def rate_limited(targets, max_step, previous=None):
    """targets (..., T, J) with every frame-to-frame change clamped to +-max_step (J,), starting from ``previous``
    (..., J) when given; the identity on sequences already within the limit.

    numpy in (float64 out) or torch in (same dtype out, differentiable almost everywhere)."""
    if isinstance(targets, torch.Tensor):
        max_step = torch.as_tensor(max_step, dtype=targets.dtype)
        clip = lambda d: torch.maximum(torch.minimum(d, max_step), -max_step)  # noqa: E731
        stack = torch.stack
    else:
        targets = np.asarray(targets, dtype=np.float64)
        previous = None if previous is None else np.asarray(previous, dtype=np.float64)
        clip = lambda d: np.clip(d, -max_step, max_step)  # noqa: E731
        stack = np.stack
    rows, prev = [], previous
    for t in range(targets.shape[-2]):
        row = targets[..., t, :]
        if prev is not None:
            row = prev + clip(row - prev)
        rows.append(row)
        prev = row
    return stack(rows, -2)


def substep_targets(pd_targets, steps: int):
    """Control-rate targets (..., H+1, J) -> per-substep targets (..., H*steps, J), linear between control frames
    (the substep at the start of period k uses exactly target k). numpy or torch."""
    if isinstance(pd_targets, torch.Tensor):
        frac = torch.arange(steps, dtype=pd_targets.dtype, device=pd_targets.device) / steps  # (S,)
    else:
        frac = np.arange(steps, dtype=np.float64) / steps
    start, end = pd_targets[..., :-1, None, :], pd_targets[..., 1:, None, :]  # (..., H, 1, J)
    sub = start + (end - start) * frac[:, None]  # (..., H, S, J)
    return sub.reshape(*pd_targets.shape[:-2], -1, pd_targets.shape[-1])
