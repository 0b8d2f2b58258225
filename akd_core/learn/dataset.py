"""Demonstrations for policy learning, read from an ``akd export --format hdf5`` file by the export stage's own
reader (:func:`akd_core.export.hdf5.read_hdf5`).

A :class:`Demo` is one tracked clip at the control rate (simulated states and the PD targets that produced them)
plus the kinematic reference it tracked (:class:`~akd_core.learn.reference.ReferenceClip`): from the demo's
``reference/`` group, else from ``reference.npz`` of the run named in its ``run`` attribute, else (old or hand-made
files) the demo's own simulated motion stands in for it. Tracked frame k was simulated while tracking reference frame k.
A demo of an ``akd library`` dataset also carries the velocity command it followed (``obs/command``, ``command``)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from akd_core.export.hdf5 import read_hdf5
from akd_core.io.errors import ConfigError, MotionError
from akd_core.learn.reference import ReferenceClip
from akd_core.motion.clip import Motion

log = logging.getLogger(__name__)

OBS_KEYS = ("joint_pos", "joint_vel", "root_pos", "root_quat", "root_lin_vel", "root_ang_vel")


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
    reference: ReferenceClip
    reference_source: str = "reference"  # "reference" (the dataset's), "run" (RUN/reference.npz), "tracked"
    command: np.ndarray | None = None  # (T, 3) the velocity command followed (vx, vy, yaw rate; heading frame)

    @property
    def num_frames(self) -> int:
        return int(self.actions.shape[0])

    def state(self, k: int) -> dict[str, np.ndarray]:
        """The simulated state at frame k (float64)."""
        return {key: np.asarray(getattr(self, key)[k], dtype=np.float64) for key in OBS_KEYS}


@dataclass
class PolicyDataset:
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


def load_dataset(path: str | Path) -> PolicyDataset:
    """Read an ``akd export --format hdf5`` file (robomimic / Isaac Lab ``data/demo_N`` layout) into demos.

    Needs ``data`` attrs ``env_args`` (JSON with ``robot``, ``fps`` or ``dt``, ``joint_names``, ``kp``, ``kd``) and per
    demo ``actions`` (T, J) plus ``obs/{joint_pos, joint_vel, root_pos, root_quat, root_lin_vel, root_ang_vel}``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"dataset {path} does not exist; write one with `akd export RUN [RUN...] --format hdf5`")
    raw = read_hdf5(path)
    env_kwargs = raw.env_args.get("env_kwargs", {}) if isinstance(raw.env_args.get("env_kwargs"), dict) else {}
    meta = {**env_kwargs, **raw.env_args}
    for key in ("joint_names", "kp", "kd"):
        if key not in meta:
            raise MotionError(f"{path}: env_args has no '{key}'; re-export with a current `akd export`")
    if "dt" in meta:
        dt = float(meta["dt"])
    elif "fps" in meta or "fps" in raw.attrs:
        dt = 1.0 / float(meta.get("fps", raw.attrs.get("fps")))
    else:
        raise MotionError(f"{path}: env_args has neither 'fps' nor 'dt'; re-export with a current `akd export`")
    joint_names = [str(n) for n in meta["joint_names"]]
    if not raw.demos:
        raise MotionError(f"{path}: 'data' holds no demo_N groups")
    gait_hz = meta.get("gait_hz", meta.get("gait_frequency_hz"))
    demos = [_demo(path, d, joint_names, dt, float(gait_hz) if gait_hz else None) for d in raw.demos]
    kp = np.broadcast_to(np.asarray(meta["kp"], dtype=np.float64), (len(joint_names),)).copy()
    kd = np.broadcast_to(np.asarray(meta["kd"], dtype=np.float64), (len(joint_names),)).copy()
    return PolicyDataset(path=path, robot=str(meta.get("robot", "")), joint_names=joint_names, dt=dt, kp=kp, kd=kd,
                         demos=demos, env_args=meta)


def _demo(path: Path, raw, joint_names: list[str], dt: float, gait_hz: float | None) -> Demo:
    name, obs = raw.name, raw.obs
    missing = [k for k in OBS_KEYS if k not in obs]
    if missing:
        raise MotionError(f"{path}: data/{name}/obs lacks {missing}; a policy needs {list(OBS_KEYS)}")
    actions = np.asarray(raw.actions, dtype=np.float64)
    num_joints = len(joint_names)
    if actions.ndim != 2 or actions.shape[1] != num_joints:
        raise MotionError(f"{path}: data/{name}/actions has shape {actions.shape}, expected (T, {num_joints})")
    frames = actions.shape[0]
    widths = {"joint_pos": num_joints, "joint_vel": num_joints, "root_pos": 3, "root_quat": 4, "root_lin_vel": 3,
              "root_ang_vel": 3}
    arrays = {k: np.asarray(obs[k], dtype=np.float64) for k in OBS_KEYS}
    for key, width in widths.items():
        if arrays[key].shape != (frames, width):
            raise MotionError(f"{path}: data/{name}/obs/{key} has shape {arrays[key].shape}, expected "
                              f"({frames}, {width}) to match actions")
    if frames < 3:
        raise MotionError(f"{path}: data/{name} has {frames} frames; a policy needs at least 3")
    contacts = np.asarray(obs["foot_contacts"]).astype(bool) if "foot_contacts" in obs else None
    motion, source = _reference_motion(path, raw, joint_names, dt, arrays, contacts)
    clip = ReferenceClip.from_motion(motion, dt, name=name, gait_hz=gait_hz)
    command = None
    if "command" in obs:
        command = np.asarray(obs["command"], dtype=np.float64)
        if command.shape != (frames, 3):
            raise MotionError(f"{path}: data/{name}/obs/command has shape {command.shape}, expected ({frames}, 3): "
                              "vx, vy, yaw rate per frame")
    return Demo(name=name, actions=actions, reference=clip, reference_source=source, command=command, **arrays)


def _reference_motion(path: Path, raw, joint_names: list[str], dt: float, arrays: dict[str, np.ndarray],
                      contacts: np.ndarray | None) -> tuple[Motion, str]:
    ref = raw.reference
    if ref is not None:
        contacts_ref = ref.get("foot_contacts")
        return Motion(fps=ref["fps"], joint_names=joint_names, joint_pos=np.asarray(ref["joint_pos"], np.float64),
                      root_pos=np.asarray(ref["root_pos"], np.float64),
                      root_quat=np.asarray(ref["root_quat"], np.float64), foot_names=list(ref["foot_names"]),
                      foot_offsets=np.asarray(ref.get("foot_offsets", np.zeros((0, 3))), np.float64).reshape(-1, 3),
                      foot_contacts=None if contacts_ref is None else np.asarray(contacts_ref).astype(bool),
                      prompt=ref.get("prompt", "")), "reference"
    run = raw.attrs.get("run")
    if run and (Path(str(run)) / "reference.npz").is_file():
        return Motion.load(Path(str(run)) / "reference.npz"), "run"
    log.warning("%s: data/%s carries no reference/ group and its run's reference.npz is not at hand; the tracked "
                "motion stands in for the reference (re-export with a current `akd export` to carry it)", path,
                raw.name)
    foot_names = raw.attrs.get("foot_names")
    names = [] if contacts is None else ([str(n) for n in _json_list(foot_names)] or
                                         [f"foot{k}" for k in range(contacts.shape[1])])
    if contacts is not None and len(names) != contacts.shape[1]:
        names = [f"foot{k}" for k in range(contacts.shape[1])]
    return Motion(fps=1.0 / dt, joint_names=joint_names, joint_pos=arrays["joint_pos"], root_pos=arrays["root_pos"],
                  root_quat=arrays["root_quat"], foot_names=names, foot_offsets=np.zeros((len(names), 3)),
                  foot_contacts=contacts), "tracked"


def _json_list(value: Any) -> list:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return []
    return list(value) if isinstance(value, (list, tuple)) else []
