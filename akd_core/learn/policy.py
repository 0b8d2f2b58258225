"""Behaviour cloning on an exported AKD dataset, and closed-loop evaluation of the policy in MuJoCo.

The room owns: reading the robomimic / Isaac Lab HDF5 layout written by ``akd export`` into demos, the observation
builder, the gait-phase clock, a small torch MLP policy with its normalisation, the ``.pt`` policy file, the MuJoCo
environment (same MJCF, PD gains, effort limits, armature and timestep as the cross-check of the data), the closed-loop
evaluation metrics, and the ``akd train-bc`` / ``akd eval-policy`` commands.

Timing convention (matches :func:`akd_core.physics.engines.base.substep_targets`, which every engine uses): the
data's state k evolves to state k+1 while the PD target moves linearly from ``actions[k]`` to ``actions[k+1]``. So
the policy, observing state k and the target it last sent (``actions[k]``), predicts ``actions[k+1]``; the environment
interpolates from the previous target to the new one over the control period. With this choice a perfect policy
reproduces the data exactly (same transitions), and there is no extra latency.

Observations (all in the root's body frame, so the policy is invariant to world position and heading):
joint positions (J), joint velocities (J), last PD target (J), gravity direction in the body frame (3), root linear
velocity (3) and angular velocity (3) in the body frame, the gait clock (sin, cos of 2 pi f t - phi0), and the
command speed (m/s, the demo's mean forward speed). Actions are the absolute PD targets (J,) (or, with
``action_mode="residual"``, ``target - joint_pos``), normalised by their dataset mean/std.
Quaternions are xyzw here; MuJoCo's wxyz appears only inside :class:`MujocoEnv`.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from akd_core.io.errors import ConfigError, DependencyError, MotionError
from akd_core.io.fileio import atomic_path
from akd_core.model.robot import Robot
from akd_core.model.spatial import quat_to_matrix
from akd_core.motion.clip import Motion
from akd_core.physics.engines.mujoco import build_mujoco
from akd_core.physics.metrics import FALL_HEIGHT_FRACTION, FALL_TILT_DEG
from akd_core.physics.params import REFERENCE_MASS_KG
from akd_core.physics.params import default_physics as tracking_physics
from akd_core.render.video import write_mp4

log = logging.getLogger(__name__)

POLICY_FORMAT = "akd-bc-policy"
POLICY_VERSION = 1
GAIT_HZ_RANGE = (0.3, 8.0)  # plausible stride frequencies searched for the gait clock
DEFAULT_EPOCHS = 300
DEFAULT_HIDDEN = (256, 256)
DEFAULT_OBS_NOISE = 0.2  # std of Gaussian noise on normalised observations during training (measured: 0.2-0.3 walk)
DEFAULT_STD_FLOOR = 0.05  # lower bound of normalisation stds (rad, rad/s, m/s)
ACTION_MODES = ("absolute", "residual")
DEFAULT_SIM_DT = 1e-3  # s, upper bound of the MuJoCo step (tracking's default)
OBS_KEYS = ("joint_pos", "joint_vel", "root_pos", "root_quat", "root_lin_vel", "root_ang_vel")


# ----------------------------------------------------------------------------- dataset
@dataclass
class Demo:
    """One demonstration at the control rate (T frames). Velocities are world-frame, quaternions xyzw."""

    name: str
    joint_pos: np.ndarray  # (T, J)
    joint_vel: np.ndarray  # (T, J)
    root_pos: np.ndarray  # (T, 3)
    root_quat: np.ndarray  # (T, 4) xyzw
    root_lin_vel: np.ndarray  # (T, 3) world frame, root origin
    root_ang_vel: np.ndarray  # (T, 3) world frame
    actions: np.ndarray  # (T, J) PD targets
    foot_contacts: np.ndarray | None = None  # (T, K) bool
    gait_hz: float = 0.0
    phase0: float = 0.0  # rad; clock = 2 pi gait_hz t - phase0
    speed_mps: float = 0.0  # mean forward speed along the initial heading

    @property
    def num_frames(self) -> int:
        return int(self.actions.shape[0])


@dataclass
class BCDataset:
    """Demos of one robot, with the physics the data was made with."""

    path: Path
    robot: str
    joint_names: list[str]
    dt: float  # control period, s
    kp: np.ndarray  # (J,)
    kd: np.ndarray  # (J,)
    demos: list[Demo]
    env_args: dict[str, Any] = field(default_factory=dict)

    @property
    def num_samples(self) -> int:
        return sum(d.num_frames - 1 for d in self.demos)


def _h5py():
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover
        raise DependencyError("reading HDF5 datasets needs h5py: pip install h5py") from exc
    return h5py


def _decode_attr(value: Any) -> Any:
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _demo_order(name: str) -> tuple[int, str]:
    tail = name.rsplit("_", 1)[-1]
    return (int(tail), name) if tail.isdigit() else (1 << 30, name)


def load_dataset(path: str | Path) -> BCDataset:
    """Read an ``akd export --format hdf5`` file (robomimic / Isaac Lab ``data/demo_N`` layout) into demos.

    Needs ``data`` attrs ``env_args`` (JSON with ``robot``, ``fps`` or ``dt``, ``joint_names``, ``kp``, ``kd``) and per
    demo ``actions`` (T, J) plus ``obs/{joint_pos, joint_vel, root_pos, root_quat, root_lin_vel, root_ang_vel}``;
    ``obs/foot_contacts`` (T, K) is used for the gait clock when present."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"dataset {path} does not exist; write one with `akd export RUN [RUN...] --format hdf5`")
    h5py = _h5py()
    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise MotionError(f"{path} is not a readable HDF5 file ({exc}); re-export it with `akd export`") from exc
    with handle as f:
        if "data" not in f:
            raise MotionError(f"{path}: no 'data' group; expected the robomimic layout written by `akd export`")
        data = f["data"]
        env_args = _decode_attr(data.attrs.get("env_args", "{}"))
        if not isinstance(env_args, dict):
            raise MotionError(f"{path}: data.attrs['env_args'] is not a JSON object")
        env_kwargs = env_args.get("env_kwargs", {}) if isinstance(env_args.get("env_kwargs"), dict) else {}
        meta = {**env_kwargs, **env_args}
        for key in ("joint_names", "kp", "kd"):
            if key not in meta:
                raise MotionError(f"{path}: env_args has no '{key}'; re-export with a current `akd export`")
        if "dt" in meta:
            dt = float(meta["dt"])
        elif "fps" in meta or "fps" in f.attrs:
            dt = 1.0 / float(meta.get("fps", f.attrs.get("fps")))
        else:
            raise MotionError(f"{path}: env_args has neither 'fps' nor 'dt'; re-export with a current `akd export`")
        joint_names = [str(n) for n in meta["joint_names"]]
        names = sorted((k for k in data.keys() if k.startswith("demo")), key=_demo_order)
        if not names:
            raise MotionError(f"{path}: 'data' holds no demo_N groups")
        demos = [_read_demo(path, data[name], name, len(joint_names)) for name in names]
    kp = np.broadcast_to(np.asarray(meta["kp"], dtype=np.float64), (len(joint_names),)).copy()
    kd = np.broadcast_to(np.asarray(meta["kd"], dtype=np.float64), (len(joint_names),)).copy()
    gait_hz = meta.get("gait_hz", meta.get("gait_frequency_hz"))
    for demo in demos:
        annotate_demo(demo, dt, float(gait_hz) if gait_hz else None)
    return BCDataset(path=path, robot=str(meta.get("robot", "")), joint_names=joint_names, dt=dt, kp=kp, kd=kd,
                     demos=demos, env_args=meta)


def _read_demo(path: Path, group, name: str, num_joints: int) -> Demo:
    if "actions" not in group or "obs" not in group:
        raise MotionError(f"{path}: data/{name} lacks 'actions' or 'obs'")
    obs = group["obs"]
    missing = [k for k in OBS_KEYS if k not in obs]
    if missing:
        raise MotionError(f"{path}: data/{name}/obs lacks {missing}; the policy needs {list(OBS_KEYS)}")
    arrays = {k: np.asarray(obs[k], dtype=np.float64) for k in OBS_KEYS}
    actions = np.asarray(group["actions"], dtype=np.float64)
    frames = actions.shape[0]
    shapes = {"joint_pos": num_joints, "joint_vel": num_joints, "root_pos": 3, "root_quat": 4, "root_lin_vel": 3,
              "root_ang_vel": 3}
    if actions.ndim != 2 or actions.shape[1] != num_joints:
        raise MotionError(f"{path}: data/{name}/actions has shape {actions.shape}, expected (T, {num_joints})")
    for key, width in shapes.items():
        if arrays[key].shape != (frames, width):
            raise MotionError(f"{path}: data/{name}/obs/{key} has shape {arrays[key].shape}, "
                              f"expected ({frames}, {width}) to match actions")
    if frames < 3:
        raise MotionError(f"{path}: data/{name} has {frames} frames; behaviour cloning needs at least 3")
    contacts = np.asarray(obs["foot_contacts"]).astype(bool) if "foot_contacts" in obs else None
    if contacts is not None and contacts.shape[0] != frames:
        contacts = None
    return Demo(name=name, actions=actions, foot_contacts=contacts, **arrays)


def gait_clock(signal: np.ndarray, dt: float, gait_hz: float | None = None) -> tuple[float, float]:
    """Stride frequency (Hz) and phase (rad) of a periodic signal (T,) sampled every ``dt`` s.

    The frequency is the peak of the zero-padded spectrum within :data:`GAIT_HZ_RANGE` (unless given); the phase is
    that of the signal's Fourier component at this frequency, so ``cos(2 pi f t - phase)`` peaks where the signal
    does. A constant signal (e.g. standing still) gives (0, 0)."""
    x = np.asarray(signal, dtype=np.float64)
    x = x - x.mean()
    if x.size < 4 or np.allclose(x, 0.0):
        return float(gait_hz or 0.0), 0.0
    if gait_hz is None:
        n = max(4096, 1 << int(np.ceil(np.log2(x.size * 8))))
        spectrum = np.abs(np.fft.rfft(x * np.hanning(x.size), n))
        freqs = np.fft.rfftfreq(n, dt)
        band = (freqs >= GAIT_HZ_RANGE[0]) & (freqs <= GAIT_HZ_RANGE[1])
        if not band.any():
            return 0.0, 0.0
        gait_hz = float(freqs[band][np.argmax(spectrum[band])])
    t = np.arange(x.size) * dt
    component = np.sum(x * np.exp(-2j * np.pi * gait_hz * t))  # ~ (T/2) exp(-i phase) for x = cos(2 pi f t - phase)
    return float(gait_hz), float(-np.angle(component))


def annotate_demo(demo: Demo, dt: float, gait_hz: float | None = None) -> None:
    """Fill the demo's gait frequency, clock phase and forward speed in place.

    The clock follows the first foot's contact signal when the demo has foot contacts, else the first principal
    component of the joint angles."""
    if demo.foot_contacts is not None and demo.foot_contacts.size and demo.foot_contacts[:, 0].std() > 0:
        signal = demo.foot_contacts[:, 0].astype(np.float64)
    else:
        centred = demo.joint_pos - demo.joint_pos.mean(0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        signal = centred @ vt[0]
        signal = signal * np.sign(vt[0][np.argmax(np.abs(vt[0]))])  # sign fixed by the largest loading
    demo.gait_hz, demo.phase0 = gait_clock(signal, dt, gait_hz)
    demo.speed_mps = forward_speed(demo.root_pos, demo.root_quat, dt)


def heading(root_quat: np.ndarray) -> np.ndarray:
    """Unit horizontal forward (body x) direction (..., 2) of xyzw quaternions (..., 4)."""
    fwd = quat_to_matrix(root_quat)[..., :2, 0]
    return fwd / np.maximum(np.linalg.norm(fwd, axis=-1, keepdims=True), 1e-9)


def forward_speed(root_pos: np.ndarray, root_quat: np.ndarray, dt: float) -> float:
    """Mean speed (m/s) along the initial heading of a root trajectory (T, 3), (T, 4)."""
    if root_pos.shape[0] < 2:
        return 0.0
    return float((root_pos[-1, :2] - root_pos[0, :2]) @ heading(root_quat[0]) / ((root_pos.shape[0] - 1) * dt))


# ----------------------------------------------------------------------------- observations
def observation_layout(num_joints: int) -> list[tuple[str, int]]:
    """Names and sizes of the observation terms, in order."""
    return [("joint_pos", num_joints), ("joint_vel", num_joints), ("last_target", num_joints),
            ("gravity_body", 3), ("root_lin_vel_body", 3), ("root_ang_vel_body", 3), ("gait_clock", 2),
            ("command_speed", 1)]


def build_observations(joint_pos: np.ndarray, joint_vel: np.ndarray, last_target: np.ndarray,
                       root_quat: np.ndarray, root_lin_vel: np.ndarray, root_ang_vel: np.ndarray,
                       clock: np.ndarray, command_speed: np.ndarray | float) -> np.ndarray:
    """Observation rows (N, 3J + 12) in the order of :func:`observation_layout`.

    joint_pos, joint_vel, last_target: (N, J); root_quat: (N, 4) xyzw; root_lin_vel, root_ang_vel: (N, 3) world frame;
    clock: (N,) rad (2 pi f t - phase0); command_speed: (N,) or scalar m/s."""
    rot_t = np.swapaxes(quat_to_matrix(root_quat), -1, -2)  # (N, 3, 3) world -> body
    gravity = rot_t @ np.array([0.0, 0.0, -1.0])
    lin = np.einsum("nij,nj->ni", rot_t, root_lin_vel)
    ang = np.einsum("nij,nj->ni", rot_t, root_ang_vel)
    clock = np.asarray(clock, dtype=np.float64).reshape(-1)
    speed = np.broadcast_to(np.asarray(command_speed, dtype=np.float64).reshape(-1, 1), (clock.size, 1))
    parts = [joint_pos, joint_vel, last_target, gravity, lin, ang, np.sin(clock)[:, None], np.cos(clock)[:, None],
             speed]
    return np.concatenate([np.asarray(p, dtype=np.float64) for p in parts], axis=1).astype(np.float32)


def demo_samples(demo: Demo, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training pairs of one demo: observations (T-1, D) of states 0..T-2, the joint positions (T-1, J) they hold,
    and the targets (T-1, J) = actions[1..T-1] (see the module docstring for the timing)."""
    k = np.arange(demo.num_frames - 1)
    clock = 2.0 * np.pi * demo.gait_hz * k * dt - demo.phase0
    obs = build_observations(demo.joint_pos[k], demo.joint_vel[k], demo.actions[k], demo.root_quat[k],
                             demo.root_lin_vel[k], demo.root_ang_vel[k], clock, demo.speed_mps)
    return obs, demo.joint_pos[k].astype(np.float32), demo.actions[k + 1].astype(np.float32)


# ----------------------------------------------------------------------------- policy
class BCPolicy(nn.Module):
    """MLP from raw observations (N, D) to absolute PD targets (N, J); normalisation lives in buffers.

    The network predicts the normalised action ``(action - act_mean) / act_std`` where action = target
    (``action_mode="absolute"``) or target - joint_pos (``"residual"``). Absolute targets measured more robust
    closed-loop: joints whose target barely moves (spine, neck, tail) keep a constant output off the data."""

    def __init__(self, obs_dim: int, num_joints: int, hidden: tuple[int, ...] = DEFAULT_HIDDEN,
                 action_mode: str = "absolute"):
        super().__init__()
        if action_mode not in ACTION_MODES:
            raise ConfigError(f"action mode must be one of {ACTION_MODES}, got {action_mode!r}")
        self.action_mode = action_mode
        layers: list[nn.Module] = []
        width = obs_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ELU()]
            width = h
        layers.append(nn.Linear(width, num_joints))
        self.net = nn.Sequential(*layers)
        self.hidden = tuple(int(h) for h in hidden)
        self.register_buffer("obs_mean", torch.zeros(obs_dim))
        self.register_buffer("obs_std", torch.ones(obs_dim))
        self.register_buffer("act_mean", torch.zeros(num_joints))
        self.register_buffer("act_std", torch.ones(num_joints))

    def actions(self, targets: np.ndarray, joint_pos: np.ndarray) -> np.ndarray:
        """What the network regresses (N, J), from PD targets (N, J) and joint positions (N, J)."""
        return targets - joint_pos if self.action_mode == "residual" else targets

    def set_normalisation(self, obs: np.ndarray, actions: np.ndarray, floor: float = DEFAULT_STD_FLOOR) -> None:
        """Mean/std from training observations (N, D) and actions (N, J). Stds are floored at ``floor`` so a nearly
        constant column (a joint that hardly moves) does not turn tiny off-data deviations into huge inputs."""
        self.obs_mean.copy_(torch.as_tensor(obs.mean(0)))
        self.obs_std.copy_(torch.as_tensor(np.maximum(obs.std(0), floor)))
        self.act_mean.copy_(torch.as_tensor(actions.mean(0)))
        self.act_std.copy_(torch.as_tensor(np.maximum(actions.std(0), floor)))

    def normalised(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalised action prediction (N, J) from raw observations (N, D)."""
        return self.net((obs - self.obs_mean) / self.obs_std)

    def forward(self, obs: torch.Tensor, joint_pos: torch.Tensor) -> torch.Tensor:
        """Absolute PD targets (N, J) from raw observations (N, D) and current joint positions (N, J)."""
        action = self.act_mean + self.act_std * self.normalised(obs)
        return joint_pos + action if self.action_mode == "residual" else action


@dataclass
class PolicyMeta:
    """Everything the evaluation needs besides the weights: robot, physics and reference clips."""

    robot: str
    joint_names: list[str]
    dt: float
    kp: np.ndarray  # (J,)
    kd: np.ndarray  # (J,)
    obs_layout: list[tuple[str, int]]
    hidden: tuple[int, ...]
    references: list[dict[str, Any]]  # per demo: name, gait_hz, phase0, speed_mps and its arrays
    physics: dict[str, Any] = field(default_factory=dict)  # armature (J,), sim_dt, friction
    train: dict[str, Any] = field(default_factory=dict)


def _reference_record(demo: Demo) -> dict[str, Any]:
    return {"name": demo.name, "gait_hz": demo.gait_hz, "phase0": demo.phase0, "speed_mps": demo.speed_mps,
            **{k: getattr(demo, k).astype(np.float32) for k in (*OBS_KEYS, "actions")}}


def save_policy(path: str | Path, policy: BCPolicy, meta: PolicyMeta) -> Path:
    """Write the policy (weights, normalisation buffers, metadata) to ``path`` atomically."""
    payload = {"format": POLICY_FORMAT, "version": POLICY_VERSION, "state_dict": policy.state_dict(),
               "action_mode": policy.action_mode,
               "robot": meta.robot, "joint_names": list(meta.joint_names), "dt": meta.dt,
               "kp": np.asarray(meta.kp, np.float64), "kd": np.asarray(meta.kd, np.float64),
               "obs_layout": [list(x) for x in meta.obs_layout], "hidden": list(meta.hidden),
               "references": meta.references, "physics": meta.physics, "train": meta.train}
    path = Path(path)
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return path


def load_policy(path: str | Path) -> tuple[BCPolicy, PolicyMeta]:
    """Read a policy written by :func:`save_policy` (``akd train-bc``)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"policy file {path} does not exist; train one with `akd train-bc DATASET --robot ROBOT`")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # torch raises many types for a corrupt file
        raise ConfigError(f"{path} is not a readable policy file ({type(exc).__name__}: {exc})") from exc
    if not isinstance(payload, dict) or payload.get("format") != POLICY_FORMAT:
        raise ConfigError(f"{path} is not an AKD behaviour-cloning policy (format '{POLICY_FORMAT}' expected); "
                          "train one with `akd train-bc`")
    if payload.get("version") != POLICY_VERSION:
        raise ConfigError(f"{path}: policy file version {payload.get('version')} is not supported "
                          f"(expected {POLICY_VERSION}); retrain with `akd train-bc`")
    layout = [(str(n), int(s)) for n, s in payload["obs_layout"]]
    joint_names = [str(n) for n in payload["joint_names"]]
    policy = BCPolicy(sum(s for _, s in layout), len(joint_names), tuple(payload["hidden"]),
                      str(payload.get("action_mode", "absolute")))
    policy.load_state_dict(payload["state_dict"])
    policy.eval()
    meta = PolicyMeta(robot=payload["robot"], joint_names=joint_names, dt=float(payload["dt"]),
                      kp=np.asarray(payload["kp"]), kd=np.asarray(payload["kd"]), obs_layout=layout,
                      hidden=tuple(payload["hidden"]), references=payload["references"],
                      physics=payload.get("physics", {}), train=payload.get("train", {}))
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
                      f"train a policy for '{robot.name}' with `akd train-bc DATASET --robot {robot.name}`")


# ----------------------------------------------------------------------------- physics of the data
def default_physics(robot: Robot, dt: float, env_args: dict[str, Any] | None = None) -> dict[str, Any]:
    """MuJoCo settings of the data: armature (J,), sim_dt (s) and friction, from the dataset's env_args when it has
    them, else the defaults :mod:`akd_core.physics` used for this robot (mass-scaled armature, 1 ms step, mu 1)."""
    env_args = env_args or {}
    armature = env_args.get("armature")
    if armature is None:

        armature = 0.01 * robot.total_mass / REFERENCE_MASS_KG
    armature = np.broadcast_to(np.asarray(armature, dtype=np.float64), (robot.num_dofs,)).copy()
    sim_dt = float(env_args.get("sim_dt_s", env_args.get("sim_dt", 0.0)) or 0.0)
    if sim_dt <= 0:
        steps = max(1, int(math.ceil(dt / DEFAULT_SIM_DT - 1e-9)))
        sim_dt = dt / steps
    contact = env_args.get("contact", {})
    friction = float(env_args.get("friction", contact.get("mu", 1.0) if isinstance(contact, dict) else 1.0))
    return {"armature": armature, "sim_dt": sim_dt, "friction": friction}


# ----------------------------------------------------------------------------- training
def training_arrays(dataset: BCDataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stacked observations (N, D), joint positions (N, J) and next targets (N, J) over all demos."""
    parts = [demo_samples(d, dataset.dt) for d in dataset.demos]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]


def train_bc(dataset: BCDataset, robot: Robot, epochs: int = DEFAULT_EPOCHS, hidden: tuple[int, ...] = DEFAULT_HIDDEN,
             lr: float = 1e-3, batch_size: int = 256, obs_noise: float = DEFAULT_OBS_NOISE, seed: int = 0,
             action_mode: str = "absolute", std_floor: float = DEFAULT_STD_FLOOR,
             progress: bool = True) -> tuple[BCPolicy, PolicyMeta, dict[str, Any]]:
    """Fit a :class:`BCPolicy` to the dataset's (state k -> PD target k+1) pairs with an MSE loss on normalised
    residuals. Gaussian noise of std ``obs_noise`` (in normalised units) is added to the observations of every batch,
    so the policy sees states slightly off the demonstrations (a cheap stand-in for DART-style perturbations).

    Returns the policy, its metadata and training metrics (``train_seconds``, ``final_loss``, ``num_samples``)."""
    check_robot_matches(dataset.joint_names, robot, f"dataset {dataset.path}")
    if epochs < 1:
        raise ConfigError(f"--epochs must be at least 1, got {epochs}")
    start = time.perf_counter()
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    obs, joint_pos, targets = training_arrays(dataset)
    layout = observation_layout(robot.num_dofs)
    policy = BCPolicy(obs.shape[1], robot.num_dofs, hidden, action_mode)
    actions = policy.actions(targets, joint_pos)
    policy.set_normalisation(obs, actions, std_floor)
    obs_t = torch.as_tensor(obs)
    label = (torch.as_tensor(actions) - policy.act_mean) / policy.act_std  # (N, J)
    optimiser = torch.optim.Adam(policy.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, epochs)
    n = obs_t.shape[0]
    history: list[float] = []
    bar = tqdm(range(epochs), desc="train-bc", disable=not progress)
    for _ in bar:
        order = torch.randperm(n, generator=generator)
        total = 0.0
        for begin in range(0, n, batch_size):
            idx = order[begin:begin + batch_size]
            noisy = obs_t[idx] + obs_noise * policy.obs_std * torch.randn(len(idx), obs_t.shape[1],
                                                                          generator=generator)
            loss = torch.mean((policy.normalised(noisy) - label[idx]) ** 2)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(idx)
        scheduler.step()
        history.append(total / n)
        bar.set_postfix(loss=f"{history[-1]:.4f}")
    policy.eval()
    with torch.no_grad():
        pred = policy(obs_t, torch.as_tensor(joint_pos)).numpy()
    metrics = {"train_seconds": time.perf_counter() - start, "epochs": epochs, "num_samples": int(n),
               "num_demos": len(dataset.demos), "final_loss": history[-1],
               "target_rmse_rad": float(np.sqrt(np.mean((pred - targets) ** 2))), "obs_noise": obs_noise,
               "action_mode": action_mode, "std_floor": std_floor,
               "seed": seed, "dataset": str(dataset.path)}
    meta = PolicyMeta(robot=dataset.robot or robot.name, joint_names=list(robot.joint_names), dt=dataset.dt,
                      kp=dataset.kp, kd=dataset.kd, obs_layout=layout, hidden=tuple(hidden),
                      references=[_reference_record(d) for d in dataset.demos],
                      physics=default_physics(robot, dataset.dt, dataset.env_args), train=metrics)
    return policy, meta, metrics


# ----------------------------------------------------------------------------- MuJoCo environment
class MujocoEnv:
    """The robot on a plane in MuJoCo with the data's PD actuators; one :meth:`step` = one control period, during
    which the actuator targets move linearly from the previous target to the new one (as in tracking)."""

    def __init__(self, robot: Robot, kp: np.ndarray, kd: np.ndarray, dt: float, physics: dict[str, Any]):
        import mujoco

        self.mujoco = mujoco
        params = tracking_physics(robot, kp=kp, kd=kd, armature=physics["armature"],
                                  contact_mu=physics.get("friction", 1.0))
        self.model, self.data = build_mujoco(robot, params, physics["sim_dt"])
        self.dt = float(dt)
        self.substeps = max(1, int(round(self.dt / self.model.opt.timestep)))
        obj = mujoco.mjtObj
        joints = [mujoco.mj_name2id(self.model, obj.mjOBJ_JOINT, n) for n in robot.joint_names]
        actuators = [mujoco.mj_name2id(self.model, obj.mjOBJ_ACTUATOR, n) for n in robot.joint_names]
        if min(joints) < 0 or min(actuators) < 0:
            raise MotionError(f"the MuJoCo model of '{robot.name}' lacks some joints of {robot.joint_names}")
        self.qpos_adr = np.array([self.model.jnt_qposadr[i] for i in joints])
        self.dof_adr = np.array([self.model.jnt_dofadr[i] for i in joints])
        self.actuators = np.array(actuators)
        root = mujoco.mj_name2id(self.model, obj.mjOBJ_JOINT, "root")
        self.root_q, self.root_v = int(self.model.jnt_qposadr[root]), int(self.model.jnt_dofadr[root])
        self.last_target = np.zeros(robot.num_dofs)

    def reset(self, joint_pos: np.ndarray, joint_vel: np.ndarray, root_pos: np.ndarray, root_quat: np.ndarray,
              root_lin_vel: np.ndarray, root_ang_vel: np.ndarray, target: np.ndarray) -> dict[str, np.ndarray]:
        """Set the state (xyzw quaternion, world-frame velocities) and the current PD target; returns the state."""
        self.mujoco.mj_resetData(self.model, self.data)
        q, v = self.root_q, self.root_v
        self.data.qpos[q:q + 3] = root_pos
        self.data.qpos[q + 3:q + 7] = np.roll(root_quat, 1)  # xyzw -> MuJoCo wxyz
        self.data.qpos[self.qpos_adr] = joint_pos
        rot = quat_to_matrix(np.asarray(root_quat, dtype=np.float64))
        self.data.qvel[v:v + 3] = root_lin_vel  # free joint: origin velocity, world frame
        self.data.qvel[v + 3:v + 6] = rot.T @ np.asarray(root_ang_vel)  # free joint: angular velocity, body frame
        self.data.qvel[self.dof_adr] = joint_vel
        self.last_target = np.asarray(target, dtype=np.float64).copy()
        self.data.ctrl[self.actuators] = self.last_target
        self.mujoco.mj_forward(self.model, self.data)
        return self.state()

    def state(self) -> dict[str, np.ndarray]:
        """joint_pos, joint_vel (J,), root_pos (3,), root_quat (4,) xyzw, root_lin_vel, root_ang_vel (3,) world."""
        q, v = self.root_q, self.root_v
        quat = np.roll(self.data.qpos[q + 3:q + 7], -1)  # MuJoCo wxyz -> xyzw
        rot = quat_to_matrix(quat)
        return {"joint_pos": self.data.qpos[self.qpos_adr].copy(), "joint_vel": self.data.qvel[self.dof_adr].copy(),
                "root_pos": self.data.qpos[q:q + 3].copy(), "root_quat": quat / np.linalg.norm(quat),
                "root_lin_vel": self.data.qvel[v:v + 3].copy(), "root_ang_vel": rot @ self.data.qvel[v + 3:v + 6]}

    def step(self, target: np.ndarray) -> dict[str, np.ndarray]:
        """Advance one control period towards PD target (J,); returns the new state."""
        target = np.asarray(target, dtype=np.float64)
        start = self.last_target
        for s in range(self.substeps):
            self.data.ctrl[self.actuators] = start + (target - start) * (s / self.substeps)
            self.mujoco.mj_step(self.model, self.data)
        self.last_target = target.copy()
        return self.state()


# ----------------------------------------------------------------------------- evaluation
def pick_reference(meta: PolicyMeta, demo: int | None = None, speed: float | None = None) -> dict[str, Any]:
    """The reference clip to start from and compare against: index ``demo``, else the one closest to ``speed``,
    else the fastest demo."""
    refs = meta.references
    if demo is not None:
        if not 0 <= demo < len(refs):
            raise ConfigError(f"--demo {demo} is out of range: the policy holds {len(refs)} reference demos")
        return refs[demo]
    if speed is not None:
        return min(refs, key=lambda r: abs(r["speed_mps"] - speed))
    return max(refs, key=lambda r: r["speed_mps"])


def evaluate_policy(policy: BCPolicy, meta: PolicyMeta, robot: Robot, seconds: float = 10.0,
                    demo: int | None = None, speed: float | None = None,
                    progress: bool = True) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Closed-loop rollout of ``policy`` in MuJoCo from the reference demo's first state.

    Returns metrics (upright_seconds, fell, distance_m, forward_speed_mps, reference_speed_mps, distance_ratio,
    joint_rmse_rad over the reference's duration) and the trajectory arrays at the control rate."""
    check_robot_matches(meta.joint_names, robot, "the policy")
    if seconds <= 0:
        raise ConfigError(f"--seconds must be positive, got {seconds}")
    ref = pick_reference(meta, demo, speed)
    command = float(ref["speed_mps"] if speed is None else speed)
    physics = {**meta.physics, "armature": np.asarray(meta.physics["armature"])}
    env = MujocoEnv(robot, meta.kp, meta.kd, meta.dt, physics)
    state = env.reset(
        ref["joint_pos"][0], ref["joint_vel"][0], ref["root_pos"][0], ref["root_quat"][0], ref["root_lin_vel"][0],
        ref["root_ang_vel"][0], ref["actions"][0])
    steps = int(round(seconds / meta.dt))
    height0 = float(state["root_pos"][2])
    traj: dict[str, list[np.ndarray]] = {k: [v] for k, v in state.items()}
    traj["pd_targets"] = [np.asarray(ref["actions"][0], np.float64)]
    upright_steps, fell = steps, False
    for k in tqdm(range(steps), desc="eval-policy", disable=not progress, leave=False):
        clock = 2.0 * np.pi * ref["gait_hz"] * k * meta.dt - ref["phase0"]
        obs = build_observations(state["joint_pos"][None], state["joint_vel"][None], env.last_target[None],
                                 state["root_quat"][None], state["root_lin_vel"][None], state["root_ang_vel"][None],
                                 np.array([clock]), command)
        with torch.no_grad():
            target = policy(torch.as_tensor(obs), torch.as_tensor(state["joint_pos"][None], dtype=torch.float32))
        target = np.clip(target[0].numpy().astype(np.float64), robot.lower, robot.upper)
        state = env.step(target)
        for key, value in state.items():
            traj[key].append(value)
        traj["pd_targets"].append(target)
        if not fell and _fallen(state, height0):
            fell, upright_steps = True, k + 1
            break
    arrays = {k: np.asarray(v) for k, v in traj.items()}
    return rollout_metrics(arrays, ref, meta.dt, upright_steps * meta.dt, fell, seconds, command), arrays


def _fallen(state: dict[str, np.ndarray], height0: float) -> bool:
    up_z = quat_to_matrix(state["root_quat"])[2, 2]
    tilt = math.degrees(math.acos(float(np.clip(up_z, -1.0, 1.0))))
    return tilt > FALL_TILT_DEG or state["root_pos"][2] < FALL_HEIGHT_FRACTION * height0


def rollout_metrics(traj: dict[str, np.ndarray], ref: dict[str, Any], dt: float, upright_seconds: float, fell: bool,
                    seconds: float, command: float) -> dict[str, Any]:
    """Distance along the start heading, speeds, and joint RMSE vs the reference over their common frames."""
    start_heading = heading(traj["root_quat"][0])
    distance = float((traj["root_pos"][-1, :2] - traj["root_pos"][0, :2]) @ start_heading)
    elapsed = (len(traj["root_pos"]) - 1) * dt
    speed = distance / elapsed if elapsed > 0 else 0.0
    ref_speed = float(ref["speed_mps"])
    ref_distance = ref_speed * seconds
    n = min(len(traj["joint_pos"]), len(ref["joint_pos"]))
    dq = traj["joint_pos"][:n] - np.asarray(ref["joint_pos"][:n], np.float64)
    return {"seconds": seconds, "upright_seconds": float(upright_seconds), "fell": bool(fell), "distance_m": distance,
            "reference_distance_m": ref_distance,
            "distance_ratio": distance / ref_distance if abs(ref_distance) > 1e-9 else float("nan"),
            "forward_speed_mps": speed, "reference_speed_mps": ref_speed, "command_speed_mps": command,
            "joint_rmse_rad": float(np.sqrt(np.mean(dq ** 2))), "joint_rmse_seconds": (n - 1) * dt,
            "reference_demo": str(ref["name"]), "gait_hz": float(ref["gait_hz"])}


# ----------------------------------------------------------------------------- video
def write_rollout_video(robot: Robot, meta: PolicyMeta, traj: dict[str, np.ndarray], path: str | Path,
                        fps: float = 25.0, width: int = 480, height: int = 360) -> Path:
    """MP4 of a rollout (states at the control rate) with a camera following the root.

    Uses :func:`akd_core.render.preview.render_preview` when that module exists, else MuJoCo's offscreen renderer (needs
    an OpenGL backend: ``MUJOCO_GL=egl`` or ``osmesa`` on a headless machine)."""
    try:
        from akd_core.render.preview import render_preview  # type: ignore[attr-defined]
    except ImportError:
        render_preview = None
    if render_preview is not None:

        clip = Motion(fps=1.0 / meta.dt, joint_names=list(meta.joint_names), joint_pos=traj["joint_pos"],
                      root_pos=traj["root_pos"], root_quat=traj["root_quat"], foot_names=[],
                      foot_offsets=np.zeros((0, 3)), foot_contacts=np.zeros((len(traj["joint_pos"]), 0), bool),
                      prompt="bc policy rollout")
        return Path(render_preview(robot, [clip], path))
    return _mujoco_video(robot, meta, traj, Path(path), fps, width, height)


def _mujoco_video(robot: Robot, meta: PolicyMeta, traj: dict[str, np.ndarray], path: Path, fps: float, width: int,
                  height: int) -> Path:
    import mujoco

    xml = robot.to_mjcf(kp=meta.kp, kd=meta.kd, timestep=meta.physics["sim_dt"], visuals=True)
    model = mujoco.MjModel.from_xml_string(xml)
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
    model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    data = mujoco.MjData(model)
    try:
        renderer = mujoco.Renderer(model, height, width)
    except Exception as exc:  # no OpenGL context on this machine
        raise DependencyError(f"cannot render {path}: MuJoCo has no OpenGL context ({exc}); set MUJOCO_GL=egl "
                              "(GPU/EGL) or MUJOCO_GL=osmesa (software), or leave out --video") from exc
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in meta.joint_names]
    qpos_adr = np.array([model.jnt_qposadr[i] for i in ids])
    root = int(model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "root")])
    camera = mujoco.MjvCamera()
    camera.distance, camera.elevation, camera.azimuth = 2.5, -20.0, 120.0
    option = mujoco.MjvOption()
    option.geomgroup[:] = 0
    option.geomgroup[1] = 1  # visual geoms only (collision geoms are group 3)
    option.geomgroup[0] = 1  # the ground
    stride = max(1, int(round(1.0 / (fps * meta.dt))))
    frames = []
    for k in range(0, len(traj["joint_pos"]), stride):
        data.qpos[root:root + 3] = traj["root_pos"][k]
        data.qpos[root + 3:root + 7] = np.roll(traj["root_quat"][k], 1)  # xyzw -> MuJoCo wxyz
        data.qpos[qpos_adr] = traj["joint_pos"][k]
        mujoco.mj_forward(model, data)
        camera.lookat[:] = traj["root_pos"][k]
        renderer.update_scene(data, camera, option)
        frames.append(renderer.render().copy())
    renderer.close()
    return write_mp4(np.stack(frames), path, fps=1.0 / (stride * meta.dt))


__all__ = ["Demo", "BCDataset", "BCPolicy", "PolicyMeta", "MujocoEnv", "load_dataset", "gait_clock", "annotate_demo",
           "observation_layout", "build_observations", "demo_samples", "training_arrays", "train_bc", "save_policy",
           "load_policy", "check_robot_matches", "default_physics", "evaluate_policy", "rollout_metrics",
           "write_rollout_video"]
