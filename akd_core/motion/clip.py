"""Motion clips: the kinematic reference (:class:`Motion`) and the physics result
(:class:`TrackedMotion`), with their npz files (docs/formats.md, "The run's motion files";
docs/architecture.md, "Outputs and the commands are a contract").

Quaternions are (x, y, z, w). Joint order is recorded by name in every file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from akd_core.io.errors import JointLimitError, MotionError
from akd_core.io.fileio import save_npz_atomic
from akd_core.model.spatial import angular_velocity, quat_slerp

if TYPE_CHECKING:  # pragma: no cover
    from akd_core.model.robot import Robot

MOTION_SCHEMA = 2  # 2: foot_contact_points / foot_contact_parts / foot_contact_labels (which part of a foot is down)
TRACKED_SCHEMA = 1
SOLE_LABEL = "sole"  # the one contact part of a foot without heel/toe parts
LIMIT_TOLERANCE = 1e-6
# simulated joint positions may sit this far past a limit the joint is pressed against: a simulator's limit is a
# stiff but finite constraint (MuJoCo at the contact time constant: 1.2 mrad under the humanoid's ankle load). Commands
# (PD targets, references) get no such allowance.
STATE_LIMIT_TOLERANCE = 5e-3  # rad (m for prismatic joints)


# ----------------------------------------------------------------------------- Motion
@dataclass
class Motion:
    """A kinematic reference clip: root pose + joint angles per frame."""

    fps: float
    joint_names: list[str]
    joint_pos: np.ndarray  # (F, J) rad (m for prismatic)
    root_pos: np.ndarray  # (F, 3) m, world, z up
    root_quat: np.ndarray  # (F, 4) xyzw
    foot_names: list[str] = field(default_factory=list)  # (K,) URDF link names
    foot_offsets: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))  # (K, 3) contact point in link frame
    foot_contacts: np.ndarray | None = None  # (F, K) bool, intended stance (any part of the foot down)
    prompt: str = ""
    schema: int = MOTION_SCHEMA
    # the parts of each foot that touch the ground: P points per foot in its link frame (e.g. heel and toe lines of
    # a flat sole) and which of them are down per frame; default one part per foot: its contact point, down in stance
    foot_contact_points: np.ndarray | None = None  # (K, P, 3) m, link frames
    foot_contact_parts: np.ndarray | None = None  # (F, K, P) bool, intended contact of each part
    foot_contact_labels: list[str] = field(default_factory=list)  # (P,) e.g. ["heel", "toe"]; ["sole"] by default

    def __post_init__(self) -> None:
        self.fps = float(self.fps)
        self.joint_names = [str(n) for n in self.joint_names]
        self.foot_names = [str(n) for n in self.foot_names]
        self.joint_pos = np.asarray(self.joint_pos, dtype=np.float32).reshape(len(self.joint_pos), -1)
        self.root_pos = np.asarray(self.root_pos, dtype=np.float32)
        self.root_quat = np.asarray(self.root_quat, dtype=np.float32)
        self.foot_offsets = np.asarray(self.foot_offsets, dtype=np.float32).reshape(-1, 3)
        if self.foot_contacts is None:
            self.foot_contacts = np.zeros((self.num_frames, len(self.foot_names)), dtype=bool)
        self.foot_contacts = np.asarray(self.foot_contacts, dtype=bool).reshape(self.num_frames, len(self.foot_names))
        labels = [str(n) for n in self.foot_contact_labels]
        if self.foot_contact_points is not None and labels == [SOLE_LABEL]:
            self.foot_contact_points = self.foot_contact_parts = None  # the default part, as written by save()
        if self.foot_contact_points is None:  # one part per foot (contact_points / contact_parts derive it)
            self.foot_contact_parts, labels = None, []
        else:
            self.foot_contact_points = np.asarray(self.foot_contact_points, dtype=np.float32)
            if self.foot_contact_points.ndim != 3:
                raise MotionError(f"foot_contact_points must be (K, P, 3), got shape {self.foot_contact_points.shape}")
            parts = self.foot_contact_points.shape[1]
            if self.foot_contact_parts is None:
                self.foot_contact_parts = np.repeat(self.foot_contacts[:, :, None], parts, axis=2)
            self.foot_contact_parts = np.asarray(self.foot_contact_parts, dtype=bool)
            labels = labels or [f"part{p}" for p in range(parts)]
        self.foot_contact_labels = labels

    # -- sizes --------------------------------------------------------------
    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])

    @property
    def dt(self) -> float:
        return 1.0 / self.fps

    @property
    def duration(self) -> float:
        return (self.num_frames - 1) / self.fps

    # -- contact parts (schema 2) --------------------------------------------
    def contact_points(self) -> np.ndarray:
        """(K, P, 3) the parts of each foot that touch the ground, in its link frame; without parts (a point foot,
        a schema-1 file) P = 1: the foot's contact point ``foot_offsets``."""
        return self.foot_offsets[:, None, :] if self.foot_contact_points is None else self.foot_contact_points

    def contact_parts(self) -> np.ndarray:
        """(F, K, P) bool: which parts are down; without parts the foot's intended stance."""
        return self.foot_contacts[:, :, None] if self.foot_contact_parts is None else self.foot_contact_parts

    def contact_labels(self) -> list[str]:
        """(P,) names of the parts (``["heel", "toe"]``), ``["sole"]`` without parts."""
        return list(self.foot_contact_labels) if self.foot_contact_points is not None else [SOLE_LABEL]

    def contact_points_flat(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """Every contact part as a point of its own: foot link names (K*P,), points (K*P, 3) in the link frames,
        intended contact (F, K*P) and the index of each part's foot (K*P,); feet in order, parts within a foot."""
        points, parts = self.contact_points(), self.contact_parts()
        k, p = points.shape[:2]
        names = [name for name in self.foot_names for _ in range(p)]
        return (names, points.reshape(k * p, 3).astype(np.float64), parts.reshape(self.num_frames, k * p),
                np.repeat(np.arange(k), p))

    # -- derived ------------------------------------------------------------
    def joint_vel(self) -> np.ndarray:
        """(F, J) finite-difference joint velocities (central inside, one-sided at the ends)."""
        if self.num_frames < 2:
            return np.zeros_like(self.joint_pos)
        return np.gradient(self.joint_pos.astype(np.float64), self.dt, axis=0).astype(np.float32)

    def root_lin_vel(self) -> np.ndarray:
        if self.num_frames < 2:
            return np.zeros_like(self.root_pos)
        return np.gradient(self.root_pos.astype(np.float64), self.dt, axis=0).astype(np.float32)

    def root_ang_vel(self) -> np.ndarray:
        if self.num_frames < 2:
            return np.zeros((self.num_frames, 3), dtype=np.float32)
        return angular_velocity(self.root_quat.astype(np.float64), self.dt).astype(np.float32)

    def resample(self, fps: float) -> Motion:
        """The same clip at another frame rate (linear joints/positions, slerp rotations, nearest contacts)."""
        if fps <= 0:
            raise MotionError(f"fps must be positive, got {fps}")
        times = np.arange(self.num_frames) / self.fps
        n_new = int(np.floor(self.duration * fps + 1e-9)) + 1
        new_t = np.arange(n_new) / fps
        idx = np.clip(np.searchsorted(times, new_t, side="right") - 1, 0, max(self.num_frames - 2, 0))
        if self.num_frames == 1:
            return dataclasses.replace(self, fps=fps)
        frac = ((new_t - times[idx]) * self.fps).clip(0.0, 1.0)
        lerp = lambda a: (a[idx] * (1 - frac)[:, None] + a[idx + 1] * frac[:, None])  # noqa: E731
        nearest = np.clip(np.rint(new_t * self.fps).astype(int), 0, self.num_frames - 1)
        return dataclasses.replace(
            self,
            fps=float(fps),
            joint_pos=lerp(self.joint_pos),
            root_pos=lerp(self.root_pos),
            root_quat=quat_slerp(self.root_quat[idx], self.root_quat[idx + 1], frac),
            foot_contacts=self.foot_contacts[nearest],
            foot_contact_parts=None if self.foot_contact_parts is None else self.foot_contact_parts[nearest],
        )

    # -- checks -------------------------------------------------------------
    def validate(self, robot: Robot | None = None, source: str = "motion") -> None:
        """Raise MotionError / JointLimitError if the clip is malformed or leaves the robot's limits."""
        f, j = self.joint_pos.shape
        k, p = len(self.foot_names), self.contact_points().shape[1]
        expect = {"root_pos": (f, 3), "root_quat": (f, 4), "foot_contacts": (f, k), "foot_offsets": (k, 3)}
        if self.foot_contact_points is not None:
            expect.update(foot_contact_points=(k, p, 3), foot_contact_parts=(f, k, p))
        for name, shape in expect.items():
            if getattr(self, name).shape != shape:
                raise MotionError(f"{source}: field '{name}' has shape {getattr(self, name).shape}, expected {shape}")
        if len(self.joint_names) != j:
            raise MotionError(f"{source}: 'joint_names' lists {len(self.joint_names)} joints "
                              f"but joint_pos has {j} columns")
        if len(self.contact_labels()) != p:
            raise MotionError(f"{source}: 'foot_contact_labels' names {len(self.contact_labels())} parts but "
                              f"'foot_contact_points' has {p} per foot")
        if k and (self.contact_parts().any(-1) != self.foot_contacts).any():
            raise MotionError(f"{source}: 'foot_contacts' must be True exactly where some part of the foot is down "
                              "('foot_contact_parts'); re-create the clip")
        if f < 1:
            raise MotionError(f"{source}: the clip has no frames")
        if not np.isfinite(self.fps) or self.fps <= 0:
            raise MotionError(f"{source}: 'fps' must be a positive number, got {self.fps}")
        for name in ("joint_pos", "root_pos", "root_quat"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise MotionError(f"{source}: field '{name}' contains NaN or inf values")
        norms = np.linalg.norm(self.root_quat, axis=-1)
        if np.max(np.abs(norms - 1.0)) > 1e-3:
            raise MotionError(f"{source}: 'root_quat' must hold unit quaternions (x, y, z, w); "
                              f"norms range {norms.min():.4f}..{norms.max():.4f}")
        if robot is not None:
            self.check_robot(robot, source)

    def check_robot(self, robot: Robot, source: str = "motion") -> None:
        if list(self.joint_names) != list(robot.joint_names):
            missing = sorted(set(robot.joint_names) - set(self.joint_names))
            extra = sorted(set(self.joint_names) - set(robot.joint_names))
            raise MotionError(
                f"{source}: joint names do not match robot '{robot.name}' "
                f"(missing {missing}, unknown {extra}, or a different order); "
                "re-create the clip for this robot")
        check_joint_limits(self.joint_pos, robot, source, "joint_pos")

    # -- I/O ----------------------------------------------------------------
    def to_arrays(self) -> dict[str, Any]:
        return {
            "fps": np.float64(self.fps),
            "joint_names": np.array(self.joint_names, dtype=str),
            "joint_pos": self.joint_pos,
            "root_pos": self.root_pos,
            "root_quat": self.root_quat,
            "foot_names": np.array(self.foot_names, dtype=str),
            "foot_offsets": self.foot_offsets,
            "foot_contacts": self.foot_contacts,
            "foot_contact_points": self.contact_points(),
            "foot_contact_parts": self.contact_parts(),
            "foot_contact_labels": np.array(self.contact_labels(), dtype=str),
            "prompt": np.array(self.prompt),
            "schema": np.int64(MOTION_SCHEMA),  # written in today's layout, whatever file it was read from
        }

    def save(self, path: str | Path) -> Path:
        self.validate(source=str(path))
        return save_npz_atomic(path, **self.to_arrays())

    @classmethod
    def load(cls, path: str | Path, robot: Robot | None = None) -> Motion:
        data = _load_npz(path, MOTION_SCHEMA, ("fps", "joint_names", "joint_pos", "root_pos", "root_quat"))
        motion = cls(
            fps=float(data["fps"]),
            joint_names=list(data["joint_names"]),
            joint_pos=data["joint_pos"],
            root_pos=data["root_pos"],
            root_quat=data["root_quat"],
            foot_names=list(data.get("foot_names", [])),
            foot_offsets=data.get("foot_offsets", np.zeros((0, 3))),
            foot_contacts=data.get("foot_contacts"),
            prompt=str(data.get("prompt", "")),
            schema=int(data["schema"]),
            # schema 1 files have no parts: one per foot, its contact point (Motion.__post_init__)
            foot_contact_points=data.get("foot_contact_points"),
            foot_contact_parts=data.get("foot_contact_parts"),
            foot_contact_labels=list(data.get("foot_contact_labels", [])),
        )
        motion.validate(robot, source=str(path))
        return motion


# ----------------------------------------------------------------------------- TrackedMotion
_TRACK_ARRAYS = ("pd_targets", "joint_torques", "joint_pos", "joint_vel", "root_pos", "root_quat",
                 "root_lin_vel", "root_ang_vel")


@dataclass
class TrackedMotion:
    """Result of physics tracking at the control rate: PD targets, torques and simulated states.

    ``naive`` holds the same record for the baseline (PD targets = reference angles).
    """

    dt: float  # control period, s
    joint_names: list[str]
    pd_targets: np.ndarray  # (T, J)
    joint_torques: np.ndarray  # (T, J) N m, after effort clamping
    joint_pos: np.ndarray  # (T, J)
    joint_vel: np.ndarray  # (T, J)
    root_pos: np.ndarray  # (T, 3)
    root_quat: np.ndarray  # (T, 4) xyzw
    root_lin_vel: np.ndarray  # (T, 3)
    root_ang_vel: np.ndarray  # (T, 3)
    kp: np.ndarray  # (J,)
    kd: np.ndarray  # (J,)
    naive: TrackedMotion | None = None
    schema: int = TRACKED_SCHEMA

    def __post_init__(self) -> None:
        self.dt = float(self.dt)
        self.joint_names = [str(n) for n in self.joint_names]
        for name in _TRACK_ARRAYS + ("kp", "kd"):
            setattr(self, name, np.asarray(getattr(self, name), dtype=np.float32))

    @property
    def num_steps(self) -> int:
        return int(self.pd_targets.shape[0])

    def validate(self, source: str = "tracked") -> None:
        t, j = self.pd_targets.shape
        shapes = {"joint_torques": (t, j), "joint_pos": (t, j), "joint_vel": (t, j), "root_pos": (t, 3),
                  "root_quat": (t, 4), "root_lin_vel": (t, 3), "root_ang_vel": (t, 3), "kp": (j,), "kd": (j,)}
        for name, shape in shapes.items():
            arr = getattr(self, name)
            if arr.shape != shape:
                raise MotionError(f"{source}: field '{name}' has shape {arr.shape}, expected {shape}")
            if not np.all(np.isfinite(arr)):
                raise MotionError(f"{source}: field '{name}' contains NaN or inf values")
        if len(self.joint_names) != j:
            raise MotionError(f"{source}: 'joint_names' has {len(self.joint_names)} names for {j} joints")

    def to_arrays(self) -> dict[str, Any]:
        arrays: dict[str, Any] = {"dt": np.float64(self.dt), "joint_names": np.array(self.joint_names, dtype=str),
                                  "schema": np.int64(self.schema), "kp": self.kp, "kd": self.kd}
        for name in _TRACK_ARRAYS:
            arrays[name] = getattr(self, name)
        if self.naive is not None:
            for name in _TRACK_ARRAYS:
                arrays[f"naive_{name}"] = getattr(self.naive, name)
        return arrays

    def save(self, path: str | Path) -> Path:
        self.validate(str(path))
        if self.naive is not None:
            self.naive.validate(f"{path} (naive_)")
        return save_npz_atomic(path, **self.to_arrays())

    @classmethod
    def load(cls, path: str | Path) -> TrackedMotion:
        data = _load_npz(path, TRACKED_SCHEMA, ("dt", "joint_names", "kp", "kd") + _TRACK_ARRAYS)
        common = dict(dt=float(data["dt"]), joint_names=list(data["joint_names"]), kp=data["kp"], kd=data["kd"])
        naive = None
        if all(f"naive_{n}" in data for n in _TRACK_ARRAYS):
            naive = cls(**common, **{n: data[f"naive_{n}"] for n in _TRACK_ARRAYS})
        tracked = cls(**common, **{n: data[n] for n in _TRACK_ARRAYS}, naive=naive, schema=int(data["schema"]))
        tracked.validate(str(path))
        return tracked


# ----------------------------------------------------------------------------- helpers
def check_joint_limits(joint_pos: np.ndarray, robot: Robot, source: str, field_name: str,
                       tolerance: float = LIMIT_TOLERANCE) -> None:
    """Raise JointLimitError naming the worst joint if any value leaves [lower, upper] by more than ``tolerance``."""
    lower = np.asarray(robot.lower, dtype=np.float64)
    upper = np.asarray(robot.upper, dtype=np.float64)
    q = np.asarray(joint_pos, dtype=np.float64)
    below = lower - q
    above = q - upper
    excess = np.maximum(below, above)
    worst = np.unravel_index(np.argmax(excess), excess.shape) if excess.size else None
    if worst is not None and excess[worst] > tolerance:
        frame, joint = worst
        name = robot.joint_names[joint]
        raise JointLimitError(
            f"{source}: '{field_name}' of joint '{name}' is {q[worst]:.4f} at frame {frame}, outside the URDF "
            f"limits [{lower[joint]:.4f}, {upper[joint]:.4f}]; clip the motion or widen the limit in the URDF")


def _load_npz(path: str | Path, schema: int, required: tuple[str, ...]) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise MotionError(f"{path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    except Exception as exc:  # zipfile / ValueError: not an npz
        raise MotionError(f"{path} is not a readable .npz file ({exc})") from exc
    missing = [k for k in required if k not in data]
    if missing:
        raise MotionError(f"{path} lacks required fields {missing}; it was not written by AKD or is truncated")
    file_schema = int(data.get("schema", -1))
    if file_schema > schema:
        raise MotionError(f"{path} has schema {file_schema}, newer than this AKD understands ({schema}); upgrade akd")
    return data
