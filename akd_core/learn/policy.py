"""The tracking policy: a small MLP from observations (:mod:`akd_core.learn.observation`) to PD targets, its
normalisation, the ``.pt`` policy file and the supervised fit that both behaviour cloning and DAgger use.

Timing convention (as :func:`akd_core.physics.engines.base.substep_targets`, which every engine uses): the data's
state k evolves to state k+1 while the PD target moves linearly from ``actions[k]`` to ``actions[k+1]``. So the
policy, observing state k and the target it last sent (``actions[k]``), predicts ``actions[k+1]``; a perfect policy
reproduces the data transition for transition.

Actions (``action_mode``): ``"reference"`` (default): the network predicts the PD target's offset from the reference
joint angles one control period ahead (``ref_joint_pos_1`` of the observation), so one network serves clips of
different speeds and the offset it learns is the feedforward the tracker added (damping lead, gravity, the MPC's
corrections); ``"absolute"``: the PD target itself; ``"residual"`` (velocity-command policies): a bounded residual
``bound * tanh(action)`` on the library feedforward for the observation's command and gait clock
(:class:`~akd_core.learn.velocity_feedforward.LibraryFeedforward`, whose table is a buffer of the module). Either way
the module's output is the absolute PD target (N, J), and the normalisation (per-column mean/std of observations and
actions, stds floored) lives in its buffers, so the ONNX export is one self-contained graph.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from akd_core.io.errors import ConfigError, MotionError
from akd_core.io.fileio import atomic_path
from akd_core.learn.observation import TASKS, history_frames, observation_slices, task_layout
from akd_core.learn.reference import ReferenceClip
from akd_core.learn.velocity_feedforward import LibraryFeedforward
from akd_core.model.robot import Robot

log = logging.getLogger(__name__)

POLICY_FORMAT = "akd-policy"
POLICY_VERSION = 2
ACTION_MODES = ("reference", "absolute", "residual")
DEFAULT_HIDDEN = (256, 256)
DEFAULT_STD_FLOOR = 0.05  # lower bound of normalisation stds (rad, rad/s, m/s)


class TrackingPolicy(nn.Module):
    """MLP (ELU) from raw observations (N, D) to absolute PD targets (N, J); normalisation lives in buffers."""

    def __init__(self, obs_dim: int, num_joints: int, hidden: tuple[int, ...] = DEFAULT_HIDDEN,
                 action_mode: str = "reference", task: str = "reference",
                 feedforward: LibraryFeedforward | None = None):
        super().__init__()
        if action_mode not in ACTION_MODES:
            raise ConfigError(f"action mode must be one of {ACTION_MODES}, got {action_mode!r}")
        if action_mode == "reference" and task != "reference":
            raise ConfigError(f"a {task} policy has no reference to offset its targets from; use action mode "
                              "'absolute'")
        if (action_mode == "residual") != (feedforward is not None):
            raise ConfigError("action mode 'residual' (and only it) needs a library feedforward (a velocity policy)")
        self.feedforward = feedforward
        self.action_mode = action_mode
        layers: list[nn.Module] = []
        width = obs_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ELU()]
            width = h
        # a steering residual policy's action ends with the feedforward's steering components
        self.num_joints = num_joints
        self.action_dim = num_joints + (feedforward.steer_dims if feedforward is not None else 0)
        layers.append(nn.Linear(width, self.action_dim))
        self.net = nn.Sequential(*layers)
        self.hidden = tuple(int(h) for h in hidden)
        self.task = task
        self.ref_slice = observation_slices(task_layout(task, num_joints)).get("ref_joint_pos_1")
        self.register_buffer("obs_mean", torch.zeros(obs_dim))
        self.register_buffer("obs_std", torch.ones(obs_dim))
        self.register_buffer("act_mean", torch.zeros(self.action_dim))
        self.register_buffer("act_std", torch.ones(self.action_dim))

    def actions(self, obs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """What the network regresses (N, J), from observations (N, D) and PD targets (N, J)."""
        if self.action_mode == "residual":  # the pre-tanh residual on the library feedforward
            with torch.no_grad():
                ff = self.feedforward(torch.as_tensor(obs, dtype=torch.float32)).numpy()
            return self.residual_actions(ff, targets)
        return targets - obs[:, self.ref_slice] if self.action_mode == "reference" else targets

    def residual_actions(self, feedforward: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """The pre-tanh residual (N, J) that takes the library feedforward's targets (N, J) to ``targets`` (N, J)
        (followed by zero steering (N, 3) for a steering policy: the feedforward at the command itself)."""
        bound = self.feedforward.bound.numpy()
        residual = np.arctanh(np.clip((targets - feedforward) / bound, -0.95, 0.95))
        steer = np.zeros((len(residual), self.feedforward.steer_dims), residual.dtype)
        return np.concatenate([residual, steer], axis=1) if steer.shape[1] else residual

    def set_normalisation(self, obs: np.ndarray, actions: np.ndarray, floor: float = DEFAULT_STD_FLOOR) -> None:
        """Mean/std from training observations (N, D) and actions (N, J); stds floored at ``floor`` so a nearly
        constant column does not turn tiny off-data deviations into huge inputs."""
        self.obs_mean.copy_(torch.as_tensor(obs.mean(0), dtype=torch.float32))
        self.obs_std.copy_(torch.as_tensor(np.maximum(obs.std(0), floor), dtype=torch.float32))
        self.act_mean.copy_(torch.as_tensor(actions.mean(0), dtype=torch.float32))
        self.act_std.copy_(torch.as_tensor(np.maximum(actions.std(0), floor), dtype=torch.float32))

    def normalised(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalised action prediction (N, A): A = J, or J + 3 for a steering policy, from raw observations (N, D)."""
        return self.net((obs - self.obs_mean) / self.obs_std)

    def decode(self, obs: torch.Tensor, normalised: torch.Tensor) -> torch.Tensor:
        """Absolute PD targets (N, J) from raw observations (N, D) and a normalised action (N, A)."""
        action = self.act_mean + self.act_std * normalised
        if self.action_mode == "reference":
            return obs[:, self.ref_slice] + action
        if self.action_mode == "residual":
            return sum(self.residual_parts(obs, normalised))
        return action

    def residual_parts(self, obs: torch.Tensor, normalised: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A residual policy's PD targets (:meth:`decode`) in their two parts (N, J) each: the library feedforward
        (steered) and the bounded residual on it."""
        action = self.act_mean + self.act_std * normalised
        j, ff = self.num_joints, self.feedforward
        offset = ff.steering(action[:, j:]) if ff.steer_dims else None
        return ff(obs, offset), ff.bound * torch.tanh(action[:, :j])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Absolute PD targets (N, J) from raw observations (N, D)."""
        return self.decode(obs, self.normalised(obs))

    def act(self, obs: np.ndarray) -> np.ndarray:
        """numpy in (N, D), float64 PD targets out (N, J)."""
        with torch.no_grad():
            return self(torch.as_tensor(obs, dtype=torch.float32)).numpy().astype(np.float64)


@dataclass
class PolicyMeta:
    """Everything besides the weights: robot, physics, the clips it tracks and the demos' start states."""

    robot: str
    joint_names: list[str]
    dt: float  # control period, s
    kp: np.ndarray  # (J,)
    kd: np.ndarray  # (J,)
    obs_layout: list[tuple[str, int]]
    hidden: tuple[int, ...]
    action_mode: str
    clips: list[ReferenceClip]
    starts: list[dict[str, np.ndarray]]  # per clip: the demo's simulated states (T, .) and actions (T, J)
    physics: dict[str, Any] = field(default_factory=dict)  # armature (J,), sim_dt, contact {mu, impratio, ...}
    limits: dict[str, np.ndarray] = field(default_factory=dict)  # lower, upper, velocity (J,) of the URDF
    method: str = "bc"
    train: dict[str, Any] = field(default_factory=dict)
    task: str = "reference"  # what the policy is conditioned on: "reference" (a clip) or "velocity" (a command)
    command: dict[str, Any] = field(default_factory=dict)  # velocity task: indices, units, box, gait clock
    library: dict[str, Any] = field(default_factory=dict)  # velocity task: the library's gait per command (style)


def save_policy(path: str | Path, policy: TrackingPolicy, meta: PolicyMeta) -> Path:
    """Write the policy (weights, normalisation buffers, metadata) to ``path`` atomically."""
    payload = {"format": POLICY_FORMAT, "version": POLICY_VERSION, "state_dict": policy.state_dict(),
               "action_mode": policy.action_mode, "robot": meta.robot, "joint_names": list(meta.joint_names),
               "dt": meta.dt, "kp": np.asarray(meta.kp, np.float64), "kd": np.asarray(meta.kd, np.float64),
               "obs_layout": [list(x) for x in meta.obs_layout], "hidden": list(meta.hidden),
               "clips": [c.to_dict() for c in meta.clips], "starts": meta.starts, "physics": meta.physics,
               "limits": meta.limits, "method": meta.method, "train": meta.train, "task": meta.task,
               "command": meta.command, "library": meta.library}
    path = Path(path)
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return path


def load_policy(path: str | Path) -> tuple[TrackingPolicy, PolicyMeta]:
    """Read a policy written by :func:`save_policy` (``akd train-policy``)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"policy file {path} does not exist; train one with "
                          "`akd train-policy DATASET --robot ROBOT --method bc|dagger -o POLICY.pt`")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # torch raises many types for a corrupt file
        raise ConfigError(f"{path} is not a readable policy file ({type(exc).__name__}: {exc})") from exc
    if not isinstance(payload, dict) or payload.get("format") != POLICY_FORMAT:
        raise ConfigError(f"{path} is not an AKD policy file (format '{POLICY_FORMAT}' expected); train one with "
                          "`akd train-policy DATASET --robot ROBOT -o POLICY.pt`")
    if payload.get("version") != POLICY_VERSION:
        raise ConfigError(f"{path}: policy file version {payload.get('version')} is not supported (expected "
                          f"{POLICY_VERSION}); retrain with `akd train-policy`")
    layout = [(str(n), int(s)) for n, s in payload["obs_layout"]]
    joint_names = [str(n) for n in payload["joint_names"]]
    task = str(payload.get("task", "reference"))
    history = history_frames(layout, len(joint_names)) if task == "velocity" else 0
    if task not in TASKS or history < 0 or layout != task_layout(task, len(joint_names), history):
        raise ConfigError(f"{path}: the policy's observation layout is not this AKD's; retrain with "
                          "`akd train-policy`")
    feedforward = None
    if payload["action_mode"] == "residual":  # the library table's size from its buffers
        feedforward = LibraryFeedforward(len(joint_names), int(payload["state_dict"]["feedforward.keys"].shape[0]),
                                         steer="feedforward.steer_bound" in payload["state_dict"])
    policy = TrackingPolicy(sum(s for _, s in layout), len(joint_names), tuple(payload["hidden"]),
                            str(payload["action_mode"]), task=task, feedforward=feedforward)
    policy.load_state_dict(payload["state_dict"])
    policy.eval()
    meta = PolicyMeta(robot=payload["robot"], joint_names=joint_names, dt=float(payload["dt"]),
                      kp=np.asarray(payload["kp"]), kd=np.asarray(payload["kd"]), obs_layout=layout,
                      hidden=tuple(payload["hidden"]), action_mode=str(payload["action_mode"]),
                      clips=[ReferenceClip.from_dict(c) for c in payload["clips"]], starts=payload["starts"],
                      physics=payload.get("physics", {}), limits=payload.get("limits", {}),
                      method=str(payload.get("method", "bc")),
                      train=payload.get("train", {}), task=task, command=payload.get("command") or {},
                      library=payload.get("library") or {})
    return policy, meta


def check_robot_matches(joint_names: list[str], robot: Robot, source: str) -> None:
    """Refuse a robot whose actuated joints (names, order, count) differ from ``joint_names`` of ``source``."""
    if list(robot.joint_names) == list(joint_names):
        return
    missing = [n for n in joint_names if n not in robot.joint_names]
    extra = [n for n in robot.joint_names if n not in joint_names]
    detail = (f"{len(joint_names)} joints in {source} vs {robot.num_dofs} in robot '{robot.name}'"
              + (f"; missing from the robot: {missing[:6]}{' ...' if len(missing) > 6 else ''}" if missing else "")
              + (f"; not in {source}: {extra[:6]}{' ...' if len(extra) > 6 else ''}" if extra else "")
              + ("; same joints in a different order" if not missing and not extra else ""))
    raise MotionError(f"{source} was made for a different robot ({detail}). Use the robot it was trained on, or "
                      f"train a policy for '{robot.name}' with `akd train-policy DATASET --robot {robot.name}`")


# ----------------------------------------------------------------------------- supervised fit
@dataclass
class FitConfig:
    """Regression of normalised actions (MSE), Adam with cosine decay; Gaussian noise of ``obs_noise`` std (in
    normalised units) on every batch's observations (a cheap stand-in for DART-style perturbations)."""

    epochs: int = 300
    lr: float = 1e-3
    batch_size: int = 256
    obs_noise: float = 0.2
    weight_decay: float = 0.0


def fit(policy: TrackingPolicy, obs: np.ndarray, targets: np.ndarray, cfg: FitConfig, generator: torch.Generator,
        weights: np.ndarray | None = None, progress: bool = True, desc: str = "fit",
        normalise: bool = True) -> dict[str, float]:
    """Fit ``policy`` to (observation (N, D) -> PD target (N, J)) pairs, sample weights (N,) optional. With
    ``normalise`` the normalisation is set from these data first (else the policy's is kept: DAgger continues
    training the BC network). Returns ``final_loss``, ``target_rmse_rad``, ``seconds`` and ``num_samples``."""
    if cfg.epochs < 1:
        raise ConfigError(f"--epochs must be at least 1, got {cfg.epochs}")
    start = time.perf_counter()
    actions = policy.actions(obs, targets)
    if normalise:
        policy.set_normalisation(obs, actions)
    obs_t = torch.as_tensor(obs, dtype=torch.float32)
    label = (torch.as_tensor(actions, dtype=torch.float32) - policy.act_mean) / policy.act_std  # (N, J)
    w = torch.ones(len(obs)) if weights is None else torch.as_tensor(weights, dtype=torch.float32)
    w = w / w.mean()
    optimiser = torch.optim.Adam(policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, cfg.epochs)
    n = obs_t.shape[0]
    policy.train()
    bar = tqdm(range(cfg.epochs), desc=desc, disable=not progress, leave=False)
    loss_value = float("nan")
    for _ in bar:
        order = torch.randperm(n, generator=generator)
        total = 0.0
        for begin in range(0, n, cfg.batch_size):
            idx = order[begin:begin + cfg.batch_size]
            noisy = obs_t[idx] + cfg.obs_noise * policy.obs_std * torch.randn(len(idx), obs_t.shape[1],
                                                                              generator=generator)
            loss = torch.mean(w[idx, None] * (policy.normalised(noisy) - label[idx]) ** 2)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(idx)
        scheduler.step()
        loss_value = total / n
        bar.set_postfix(loss=f"{loss_value:.4f}")
    policy.eval()
    pred = policy.act(obs)
    return {"final_loss": loss_value, "target_rmse_rad": float(np.sqrt(np.mean((pred - targets) ** 2))),
            "seconds": time.perf_counter() - start, "num_samples": int(n)}


def robot_limits(robot: Robot) -> dict[str, np.ndarray]:
    """The URDF limits a deployed policy's targets must respect: lower, upper (rad), velocity (rad/s), (J,)."""
    return {"lower": np.asarray(robot.lower, np.float64), "upper": np.asarray(robot.upper, np.float64),
            "velocity": np.asarray(robot.velocity_limit, np.float64)}


def clip_to_limits(robot: Robot, targets: np.ndarray, previous: np.ndarray, max_step: np.ndarray) -> np.ndarray:
    """PD targets (J,) within the joint limits and at most ``max_step`` (J,) from the previous target: what every
    AKD controller sends (the simulator node drops anything else)."""
    out = np.clip(targets, robot.lower, robot.upper)
    return np.clip(out, previous - max_step, previous + max_step)
