"""A motion library as frames a velocity-command policy learns from and is judged against.

:class:`LibraryFrames` holds every control frame of a library's tracked demos (``akd library``'s dataset) with the
command it followed: joint angles and velocities, base height, the height of each foot's contact point above the
ground and whether it is down (:data:`FOOT_CONTACT_HEIGHT_M`), the stride frequency there, and the gait phase
(:func:`gait_phase`: from the touch-downs of the reference's first foot, held through stands). Foot heights come
from forward kinematics of the tracked states, so the library and a policy's rollouts are measured the same way.
The library's stride frequency per command is what the policy's gait clock runs at
(:meth:`LibraryFrames.gait_clock`).

:class:`MotionMatcher` is the imitation reward's half of motion matching: for a robot's command and gait-clock phase
it finds the library frame nearest in (command, phase), joint angles breaking ties between clips; that frame's pose
and feet are what the robot is asked to match.

:func:`style_segments` compares a rollout's feet with the library's at the same commands (duty factor, contact pattern,
stride frequency): the evaluation's style figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from akd_core.io.errors import MotionError
from akd_core.learn.command import GaitClock, heading_velocity, is_moving
from akd_core.learn.dataset import PolicyDataset
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.robot import Robot

FOOT_CONTACT_HEIGHT_M = 0.02  # a foot whose contact point is lower than this is down
# motion matching: a command this far off (vx, vy m/s; yaw rate rad/s) weighs as much as a phase this far off (rad)
# or this RMS joint-angle error (rad)
MATCH_COMMAND_SCALE = (0.1, 0.1, 0.2)
MATCH_PHASE_SCALE = 0.3
MATCH_JOINT_SCALE = 0.3
STYLE_NEIGHBOURS_S = 1.0  # library seconds pooled per command for its duty factor, patterns and stride
DEBOUNCE_FRAMES = 2  # contact runs shorter than this many control frames do not count as steps
STYLE_PATTERN_SHARE = 0.05  # a contact pattern belongs to the library's gait at a command above this share of frames


def foot_heights(robot: Robot, foot_names: list[str], foot_points: np.ndarray, root_pos: np.ndarray,
                 root_quat: np.ndarray, joint_pos: np.ndarray) -> np.ndarray:
    """(T, K) world height (m) of each foot's contact point for states (T, .) (flat ground at z = 0)."""
    if not foot_names:
        return np.zeros((len(joint_pos), 0))
    fk = ForwardKinematics(robot)
    links = torch.as_tensor([robot.link_names.index(n) for n in foot_names])
    with torch.no_grad():
        points = fk.link_points(*(torch.as_tensor(np.asarray(x, np.float64)) for x in (root_pos, root_quat,
                                                                                       joint_pos)),
                                links, torch.as_tensor(np.asarray(foot_points, np.float64)))
    return points[..., 2].numpy()


def gait_phase(down: np.ndarray, moving: np.ndarray) -> np.ndarray:
    """(T,) gait phase (rad, [0, 2 pi)) of a clip from its first foot's intended contact (T,) bool: 0 at each
    touch-down, rising linearly to the next; before the first and after the last touch-down it runs on at the
    neighbouring stride's rate; over stands (``moving`` (T,) False) it holds (a clip's first stand holds the phase
    its walk starts with)."""
    down = np.asarray(down, dtype=bool)
    frames = np.arange(len(down), dtype=np.float64)
    touch = np.flatnonzero(down[1:] & ~down[:-1]) + 1
    if len(touch) < 2:
        return np.zeros(len(down))
    phase = np.interp(frames, touch, np.arange(len(touch), dtype=np.float64))  # strides since the first touch-down
    first, last = touch[1] - touch[0], touch[-1] - touch[-2]
    phase = np.where(frames < touch[0], (frames - touch[0]) / first, phase)
    phase = np.where(frames > touch[-1], len(touch) - 1 + (frames - touch[-1]) / last, phase)
    moving = np.asarray(moving, dtype=bool)
    if moving.any():  # hold through stands: the value of the frame before, or of the first moving frame
        held = phase.copy()
        start = int(np.argmax(moving))
        held[:start] = phase[start]
        for k in range(start + 1, len(held)):
            if not moving[k]:
                held[k] = held[k - 1]
        phase = held
    return np.mod(2.0 * np.pi * phase, 2.0 * np.pi)


def debounce(signal: np.ndarray, frames: int = DEBOUNCE_FRAMES) -> np.ndarray:
    """(T,) bool with every run (of True or of False) shorter than ``frames`` merged into its neighbours: a foot
    that grazes the ground for a frame or lifts for a frame has not stepped."""
    out = np.asarray(signal, dtype=bool).copy()
    for value in (False, True):  # fill short lifts first, then remove short touches
        edges = np.flatnonzero(np.diff(np.r_[False, out == value, False].astype(np.int8)))
        for start, stop in zip(edges[::2], edges[1::2]):
            if stop - start < frames and start > 0 and stop < len(out):
                out[start:stop] = not value
    return out


def stride_frequency(contacts: np.ndarray, dt: float) -> np.ndarray:
    """(T,) stride frequency (Hz) of the first foot at each frame: 1 / the time between the touch-downs around it
    (contact debounced: :func:`debounce`); 0 where the foot stays down (a stand) or no stride is complete around the
    frame."""
    out = np.zeros(len(contacts))
    if contacts.ndim != 2 or contacts.shape[1] == 0:
        return out
    down = debounce(contacts[:, 0])
    touch = np.flatnonzero(down[1:] & ~down[:-1]) + 1
    for a, b in zip(touch[:-1], touch[1:]):
        out[a:b] = 1.0 / ((b - a) * dt)
    return out


@dataclass
class LibraryFrames:
    """Every control frame of a library's demos (module docstring); M frames, J joints, K feet."""

    dt: float
    command: np.ndarray  # (M, 3) vx, vy, yaw rate followed
    joint_pos: np.ndarray  # (M, J)
    joint_vel: np.ndarray  # (M, J)
    base_height: np.ndarray  # (M,) m
    velocity: np.ndarray  # (M, 3) measured vx, vy (heading frame), yaw rate
    foot_height: np.ndarray  # (M, K) m
    contacts: np.ndarray  # (M, K) bool
    stride_hz: np.ndarray  # (M,)
    phase: np.ndarray  # (M,) rad, the gait phase
    reference_stride_hz: np.ndarray  # (M,) of the reference's first foot (what the gait clock is fitted to)
    demo: np.ndarray  # (M,) demo index
    frame: np.ndarray  # (M,) frame within the demo
    foot_names: list[str]
    foot_points: np.ndarray  # (K, 3) contact point in each foot link's frame

    @property
    def size(self) -> int:
        return int(len(self.command))

    @classmethod
    def from_dataset(cls, dataset: PolicyDataset, robot: Robot) -> LibraryFrames:
        """The frames of every demo; demos need their ``command`` (``akd library`` datasets have it)."""
        missing = [d.name for d in dataset.demos if d.command is None]
        if missing:
            raise MotionError(f"{dataset.path}: demos {missing[:5]} carry no velocity command (obs/command); a "
                              "velocity-command policy learns from a motion library: `akd library --robot ROBOT "
                              "--out DIR`, then `akd train-policy DIR --task velocity`")
        ref = dataset.demos[0].reference
        names, points = list(ref.foot_names), np.asarray(ref.foot_offsets, np.float64).reshape(-1, 3)
        parts: dict[str, list[np.ndarray]] = {k: [] for k in ("command", "joint_pos", "joint_vel", "base_height",
                                                               "velocity", "foot_height", "contacts", "stride_hz",
                                                               "phase", "reference_stride_hz", "demo", "frame")}
        for i, d in enumerate(dataset.demos):
            heights = foot_heights(robot, names, points, d.root_pos, d.root_quat, d.joint_pos)
            contacts = heights < FOOT_CONTACT_HEIGHT_M
            parts["command"].append(d.command)
            parts["joint_pos"].append(d.joint_pos)
            parts["joint_vel"].append(d.joint_vel)
            parts["base_height"].append(d.root_pos[:, 2])
            parts["velocity"].append(heading_velocity(d.root_lin_vel, d.root_quat, d.root_ang_vel))
            parts["foot_height"].append(heights)
            parts["contacts"].append(contacts)
            parts["stride_hz"].append(stride_frequency(contacts, dataset.dt))
            intended = _reference_contacts(d.reference.foot_contacts, contacts)
            parts["phase"].append(gait_phase(intended[:, 0], is_moving(d.command)))
            parts["reference_stride_hz"].append(stride_frequency(intended, dataset.dt))
            parts["demo"].append(np.full(d.num_frames, i))
            parts["frame"].append(np.arange(d.num_frames))
        return cls(dt=dataset.dt, foot_names=names, foot_points=points,
                   **{k: np.concatenate(v) for k, v in parts.items()})

    def gait_clock(self) -> GaitClock:
        """The gait clock fitted to the library's strides per command."""
        return GaitClock.fit(self.command, self.reference_stride_hz)

    def style_table(self) -> dict[str, Any]:
        """What the evaluation compares a rollout's gait with (stored in the policy file): command, contacts and
        stride frequency per frame, the feet."""
        return {"dt": self.dt, "command": self.command.astype(np.float32),
                "contacts": self.contacts.astype(np.uint8), "stride_hz": self.stride_hz.astype(np.float32),
                "foot_names": list(self.foot_names), "foot_points": self.foot_points.astype(np.float32)}


def _reference_contacts(reference: np.ndarray | None, tracked: np.ndarray) -> np.ndarray:
    """(T, K) the reference's intended contacts at the demo's T frames (the tracked ones where it has none)."""
    if reference is None or reference.shape[1] != tracked.shape[1]:
        return tracked
    out = tracked.copy()
    n = min(len(reference), len(tracked))
    out[:n] = reference[:n]
    return out


def _scaled_command(command: np.ndarray) -> np.ndarray:
    return np.asarray(command, np.float64) / np.asarray(MATCH_COMMAND_SCALE)


class MotionMatcher:
    """Nearest library frame in (command, gait phase, joint angles) (module docstring)."""

    def __init__(self, frames: LibraryFrames):
        self.frames = frames
        self.joint_weight = 1.0 / (MATCH_JOINT_SCALE * np.sqrt(frames.joint_pos.shape[1]))
        self.table = torch.as_tensor(self.features(frames.command, frames.phase, frames.joint_pos))  # (M, F)
        self.table_sq = (self.table ** 2).sum(1)

    def features(self, command: np.ndarray, phase: np.ndarray, joint_pos: np.ndarray) -> np.ndarray:
        """(N, 5 + J) the matching features: squared distances between them are the matching cost (the phase as a
        point on the unit circle, so a small phase error costs about its angle)."""
        return np.concatenate([_scaled_command(command), GaitClock.features(phase) / MATCH_PHASE_SCALE,
                               np.asarray(joint_pos) * self.joint_weight], axis=1).astype(np.float32)

    def match(self, command: np.ndarray, phase: np.ndarray, joint_pos: np.ndarray) -> np.ndarray:
        """Index (N,) of the nearest library frame for each row."""
        query = torch.as_tensor(self.features(command, phase, joint_pos))
        cost = self.table_sq[None, :] - 2.0 * query @ self.table.T  # + |query|^2, the same for every frame
        return cost.argmin(1).numpy()


def _neighbours(library_command: np.ndarray, command: np.ndarray, count: int) -> np.ndarray:
    """Indices (count,) of the library frames whose commands are nearest ``command`` (3,)."""
    d = ((_scaled_command(library_command) - _scaled_command(command)) ** 2).sum(1)
    count = min(count, len(d))
    return np.argpartition(d, count - 1)[:count]


def style_segments(table: dict[str, Any], segments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A rollout's gait against the library's, per steady command (module docstring).

    ``table``: :meth:`LibraryFrames.style_table`; ``segments``: ``command`` (3,), ``contacts`` (T, K) bool and
    ``dt`` each. Per segment: the duty factor per foot (share of frames down) of the rollout and of the library's
    frames at the nearest commands (``STYLE_NEIGHBOURS_S`` of them), the share of the rollout's frames whose contact
    pattern (which feet are down) is one the library shows there (above ``STYLE_PATTERN_SHARE`` of its frames), and
    both stride frequencies (first foot)."""
    lib_cmd = np.asarray(table["command"], np.float64)
    lib_contacts = np.asarray(table["contacts"]).astype(bool)
    lib_stride = np.asarray(table["stride_hz"], np.float64)
    count = max(1, int(round(STYLE_NEIGHBOURS_S / float(table["dt"]))))
    weights = 1 << np.arange(lib_contacts.shape[1])
    rows = []
    for seg in segments:
        contacts = np.asarray(seg["contacts"]).astype(bool)
        if len(contacts) < 2 or contacts.shape[1] != lib_contacts.shape[1]:
            continue
        near = _neighbours(lib_cmd, np.asarray(seg["command"]), count)
        codes, counts = np.unique(lib_contacts[near] @ weights, return_counts=True)
        patterns = codes[counts >= STYLE_PATTERN_SHARE * len(near)]
        duty = contacts.mean(0)
        lib_duty = lib_contacts[near].mean(0)
        stride = stride_frequency(contacts, float(seg["dt"]))
        rows.append({"command": [float(v) for v in seg["command"]], "frames": int(len(contacts)),
                     "duty_factor": [float(v) for v in duty], "library_duty_factor": [float(v) for v in lib_duty],
                     "duty_factor_error": float(np.abs(duty - lib_duty).mean()),
                     "pattern_match": float(np.isin(contacts @ weights, patterns).mean()),
                     "stride_hz": float(np.median(stride[stride > 0])) if (stride > 0).any() else 0.0,
                     "library_stride_hz": float(np.median(lib_stride[near]))})
    return rows


def style_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Frame-weighted means over :func:`style_segments` rows: ``duty_factor_error`` (mean |duty - library's| over
    the feet), ``pattern_match`` (share of frames in one of the library's contact patterns), ``stride_hz_error``
    (|stride frequency - library's|, Hz); None without rows."""
    if not rows:
        return {"duty_factor_error": None, "pattern_match": None, "stride_hz_error": None, "segments": 0}
    w = np.array([r["frames"] for r in rows], np.float64)
    mean = lambda values: float(np.average(values, weights=w))  # noqa: E731
    return {"duty_factor_error": mean([r["duty_factor_error"] for r in rows]),
            "pattern_match": mean([r["pattern_match"] for r in rows]),
            "stride_hz_error": mean([abs(r["stride_hz"] - r["library_stride_hz"]) for r in rows]),
            "segments": len(rows)}
