"""The tracking task: residuals of simulated rollouts against the reference, as weighted norms (MuJoCo MPC's
"task"). It reads only :class:`RolloutBatch` and the reference arrays; it knows no engine and no planner.

Terms (all per rollout, averaged over the frames/substeps of the horizon):
  link        mean distance between simulated and reference positions of the mass-carrying links (m)
  orientation angle between the simulated and reference root orientation (rad; heading included, so the
              body cannot turn away from its path)
  joint       mean |joint angle - reference angle| (rad): keeps the body's shape, not only its links' places
  height      |root height - reference root height| (m)
  velocity    |root velocity - reference root velocity| (m/s)
  yaw_rate    |root yaw rate - reference yaw rate| (rad/s; weight 0 unless asked: ``TrackingConfig.yaw_rate_weight``,
              on by default for ``akd library`` clips). The other terms hold the heading over the horizon but not
              its rate within a stride: a trot tracked without it swings its heading 0.2 rad/s RMS about the
              reference's steady turn (a1), and a velocity-command policy trained on such clips inherits the swing
  slip        horizontal speed of feet the engine reports in contact (force above ``contact_force_n``) (m/s), at the
              lowest of a foot's contact points when it has several (``foot_of``: a sole rolling on its toe)
  offset      mean |PD-target offset| over the knots (rad): a restoring pull toward the feedforward targets, so
              joints the other terms barely see (a tail, a neck) do not random-walk from re-plan to re-plan
  smooth      mean |second difference| of the PD-target offsets over the plan's knots (rad)
  effort      mean squared excess of |torque| / effort limit over ``effort_margin`` (keeps headroom)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from akd_core.physics.engines.base import RolloutBatch


@dataclass
class CostWeights:
    link: float = 1.0
    orientation: float = 0.3
    joint: float = 0.1
    height: float = 1.0
    velocity: float = 0.05
    slip: float = 0.5
    smooth: float = 0.05
    offset: float = 0.0  # off: 0.1 made the demo trot fall in one measured run (docs/tracking.md)
    effort: float = 0.1
    effort_margin: float = 0.8  # fraction of the effort limit torque may use for free
    drift_time_s: float = 0.0  # > 0: the velocity term asks to close the horizontal root-position gap in this time
    yaw_rate: float = 0.0  # |root yaw rate - the reference's| (rad/s); 0: off


@dataclass
class Reference:
    """Reference at the control rate, already shifted to the simulated start height."""

    link_pos: np.ndarray  # (T, L, 3) positions of the engine's link_names
    root_pos: np.ndarray  # (T, 3)
    root_quat: np.ndarray  # (T, 4) xyzw
    root_lin_vel: np.ndarray  # (T, 3)
    joint_pos: np.ndarray  # (T, J)
    root_ang_vel: np.ndarray | None = None  # (T, 3) world frame (the yaw_rate term)


def quat_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotation angle (rad) between unit quaternions a (..., 4) and b (..., 4), either order convention."""
    dot = np.abs(np.sum(a * b, axis=-1)) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    return 2.0 * np.arccos(np.clip(dot, 0.0, 1.0))


class TrackingCost:
    """Weighted residuals of a batch of rollouts starting at control frame ``t0``."""

    def __init__(self, reference: Reference, weights: CostWeights, effort: np.ndarray, contact_force_n: float,
                 foot_of: np.ndarray | None = None):
        self.ref, self.w = reference, weights
        self.effort = np.asarray(effort, dtype=np.float64)
        self.contact_force_n = float(contact_force_n)
        # (P,) foot of each contact point; None or one point per foot: every point counts
        self.foot_of = None if foot_of is None or len(np.unique(foot_of)) == len(foot_of) else np.asarray(foot_of)

    def terms(self, batch: RolloutBatch, t0: int, offsets: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Each term (N,) for rollouts whose frame 0 is control frame ``t0``; ``offsets`` (N, K, J) knot values."""
        ref, h = self.ref, batch.torques.shape[1]
        frames = slice(t0 + 1, t0 + h + 1)
        link = np.zeros(len(batch.diverged))  # link positions exist at frames 0..h-1: none inside a 1-period plan
        if h > 1:
            link = np.linalg.norm(batch.link_pos[:, 1:] - ref.link_pos[t0 + 1:t0 + h][None], axis=-1).mean((1, 2))
        states = batch.states
        orient = quat_angle(states.root_quat[:, 1:], ref.root_quat[frames][None]).mean(1)
        joint = np.abs(states.joint_pos[:, 1:] - ref.joint_pos[frames][None]).mean((1, 2))
        height = np.abs(states.root_pos[:, 1:, 2] - ref.root_pos[frames, 2][None]).mean(1)
        wanted = np.broadcast_to(ref.root_lin_vel[frames][None], states.root_lin_vel[:, 1:].shape).copy()
        if self.w.drift_time_s > 0:  # a slow drift of the body is corrected by walking back to the path
            wanted[..., :2] += (ref.root_pos[frames, :2][None] - states.root_pos[:, 1:, :2]) / self.w.drift_time_s
        velocity = np.linalg.norm(states.root_lin_vel[:, 1:] - wanted, axis=-1).mean(1)
        yaw_rate = np.zeros(len(velocity)) if ref.root_ang_vel is None else \
            np.abs(states.root_ang_vel[:, 1:, 2] - ref.root_ang_vel[frames, 2][None]).mean(1)
        stance = batch.foot_force > self.contact_force_n  # (N, S, K)
        if self.foot_of is not None:  # only the lowest point of each foot touches (the toe of a rolling sole)
            for foot in np.unique(self.foot_of):
                cols = np.flatnonzero(self.foot_of == foot)
                lowest = batch.foot_height[..., cols].argmin(-1)  # (N, S)
                stance[..., cols] &= (np.arange(len(cols)) == lowest[..., None])
        sliding = np.linalg.norm(batch.foot_vel[..., :2], axis=-1) * stance  # (N, S, K)
        slip = sliding.sum((1, 2)) / max(batch.foot_force.shape[1], 1)
        # the mean speed of the feet in contact (not weighted: read by the tracker's event-triggered re-planning).
        # Unlike metrics.stance_slip, which pairs a step's contact with the speed after it, it also counts the speed
        # a foot lands with at its first contact step, so the planner prefers landings that match the ground's speed
        slip_mps = sliding.sum((1, 2)) / np.maximum(stance.sum((1, 2)), 1)
        excess = np.maximum(np.abs(batch.torque_peak) / self.effort - self.w.effort_margin, 0.0)
        effort = (excess ** 2).mean((1, 2))
        smooth, offset = np.zeros(len(link)), np.zeros(len(link))
        if offsets is not None:
            offset = np.abs(offsets).mean((1, 2))
        if offsets is not None and offsets.shape[1] >= 3:
            smooth = np.abs(offsets[:, :-2] - 2 * offsets[:, 1:-1] + offsets[:, 2:]).mean((1, 2))
        diverged = np.where(batch.diverged, 1e3, 0.0)
        return {"link": link, "orientation": orient, "joint": joint, "height": height, "velocity": velocity,
                "yaw_rate": yaw_rate, "slip": slip, "slip_mps": slip_mps, "smooth": smooth, "offset": offset,
                "effort": effort, "diverged": diverged}

    def total(self, terms: dict[str, np.ndarray]) -> np.ndarray:
        """The cost (N,) of :meth:`terms`: their weighted sum, plus the divergence penalty."""
        weights = dataclasses.asdict(self.w)
        return sum(weights[name] * value for name, value in terms.items() if name in weights) + terms["diverged"]

    def __call__(self, batch: RolloutBatch, t0: int, offsets: np.ndarray | None = None) -> np.ndarray:
        return self.total(self.terms(batch, t0, offsets))
