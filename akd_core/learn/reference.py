"""The kinematic reference a policy (or the MPC expert) tracks, at the control rate, continued past its end.

A clip is a few seconds long; an evaluation episode is 20 s. Past the clip's last frame the reference continues as its
steady cycle looped by phase: the last ``loop_frames`` frames (one gait period, chosen where the joint angles of the
last frame come back closest to an earlier frame near one period before it) repeat, and the root continues with the
planar motion (yaw and horizontal translation) the body made over one period, so a straight trot keeps going
straight at its speed and a turn keeps turning. The gait clock (phase) of a looped frame is the clock of the frame it
repeats, so observations stay periodic.

Quaternions are xyzw; root positions are those of ``reference.npz`` (not raised to the simulated start height).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from akd_core.io.errors import MotionError
from akd_core.model.spatial import quat_to_matrix
from akd_core.motion.clip import Motion

GAIT_HZ_RANGE = (0.3, 8.0)  # plausible stride frequencies searched for the gait clock
LOOP_SEARCH = (0.8, 1.25)  # loop length searched within this fraction of one gait period


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


def clock_signal(joint_pos: np.ndarray, foot_contacts: np.ndarray | None) -> np.ndarray:
    """(F,) the signal the gait clock follows: the first foot's contact signal, else the first principal component
    of the joint angles (sign fixed by its largest loading)."""
    if foot_contacts is not None and foot_contacts.size and foot_contacts[:, 0].std() > 0:
        return foot_contacts[:, 0].astype(np.float64)
    centred = joint_pos - joint_pos.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return (centred @ vt[0]) * np.sign(vt[0][np.argmax(np.abs(vt[0]))])


def yaw_of(root_quat: np.ndarray) -> np.ndarray:
    """Heading angle (rad) of the body x axis projected on the ground, for xyzw quaternions (..., 4)."""
    fwd = quat_to_matrix(np.asarray(root_quat, dtype=np.float64))[..., :, 0]
    return np.arctan2(fwd[..., 1], fwd[..., 0])


def _yaw_quat(yaw: np.ndarray) -> np.ndarray:
    half = 0.5 * np.asarray(yaw, dtype=np.float64)
    return np.stack([np.zeros_like(half), np.zeros_like(half), np.sin(half), np.cos(half)], -1)


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of xyzw quaternions (..., 4)."""
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz], -1)


def choose_loop(joint_pos: np.ndarray, period_frames: float) -> int:
    """Frames P of the steady cycle: the P within :data:`LOOP_SEARCH` of one period for which the last frame's joint
    angles are closest to those P frames earlier (1 when the clip has no periodic motion or is too short)."""
    frames = joint_pos.shape[0]
    if not np.isfinite(period_frames) or period_frames < 2 or frames < 3:
        return 1
    lo = max(2, int(np.floor(LOOP_SEARCH[0] * period_frames)))
    hi = min(frames - 1, int(np.ceil(LOOP_SEARCH[1] * period_frames)))
    if hi < lo:
        return 1
    candidates = np.arange(lo, hi + 1)
    gaps = np.linalg.norm(joint_pos[-1 - candidates] - joint_pos[-1], axis=-1)
    return int(candidates[np.argmin(gaps)])


@dataclass
class ReferenceClip:
    """One kinematic reference clip at the control rate (F frames), continued past its end (module docstring)."""

    name: str
    dt: float  # control period, s
    joint_names: list[str]
    joint_pos: np.ndarray  # (F, J) rad
    root_pos: np.ndarray  # (F, 3) m
    root_quat: np.ndarray  # (F, 4) xyzw
    foot_names: list[str]
    foot_offsets: np.ndarray  # (K, 3)
    foot_contacts: np.ndarray | None  # (F, K) bool
    gait_hz: float
    phase0: float  # rad: clock = 2 pi gait_hz t - phase0
    loop_frames: int  # P: the last P frames repeat
    prompt: str = ""

    @classmethod
    def from_motion(cls, motion: Motion, dt: float, name: str = "", gait_hz: float | None = None) -> ReferenceClip:
        """The clip of a reference Motion resampled to the control period ``dt``."""
        clip = motion if abs(motion.fps * dt - 1.0) < 1e-9 else motion.resample(1.0 / dt)
        if clip.num_frames < 2:
            raise MotionError(f"reference clip {name!r} has {clip.num_frames} frame(s) at {1.0 / dt:g} Hz; "
                              "a policy needs at least 2")
        contacts = None if clip.foot_contacts is None else np.asarray(clip.foot_contacts, dtype=bool)
        hz, phase0 = gait_clock(clock_signal(clip.joint_pos, contacts), dt, gait_hz)
        loop = choose_loop(clip.joint_pos, 1.0 / (hz * dt) if hz > 0 else np.inf)
        return cls(name=name, dt=float(dt), joint_names=list(clip.joint_names),
                   joint_pos=clip.joint_pos.astype(np.float64), root_pos=clip.root_pos.astype(np.float64),
                   root_quat=clip.root_quat.astype(np.float64), foot_names=list(clip.foot_names),
                   foot_offsets=np.asarray(clip.foot_offsets, dtype=np.float64).reshape(-1, 3),
                   foot_contacts=contacts, gait_hz=hz, phase0=phase0, loop_frames=loop, prompt=clip.prompt)

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])

    # -- the continued reference --------------------------------------------------
    def source_frames(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For absolute frames (N,) >= 0: the clip frame each repeats (N,) and how many loops it is past it (N,)."""
        frames = np.asarray(frames, dtype=np.int64)
        last, period = self.num_frames - 1, self.loop_frames
        start = last - period
        past = np.maximum(frames - start - 1, 0)  # frames past the loop's first repeated frame, start + 1
        loops = np.where(frames > last, past // period, 0)
        source = np.where(frames > last, start + 1 + past % period, frames)
        return source, loops

    def _loop_transform(self) -> tuple[float, np.ndarray]:
        """(yaw change, xy translation) the body makes over one loop, as a planar rigid motion D with
        pose(last) = D pose(last - P)."""
        last, start = self.num_frames - 1, self.num_frames - 1 - self.loop_frames
        yaw = yaw_of(self.root_quat[[start, last]])
        dyaw = float(yaw[1] - yaw[0])
        c, s = np.cos(dyaw), np.sin(dyaw)
        rot = np.array([[c, -s], [s, c]])
        return dyaw, self.root_pos[last, :2] - rot @ self.root_pos[start, :2]

    def frames(self, count: int, first: int = 0) -> dict[str, np.ndarray]:
        """Frames first..first+count-1 of the continued reference: joint_pos (N, J), root_pos (N, 3),
        root_quat (N, 4) xyzw, clock (N,) rad, source (N,) the clip frame each repeats."""
        index = np.arange(first, first + count)
        source, loops = self.source_frames(index)
        joint_pos = self.joint_pos[source]
        root_pos = self.root_pos[source].copy()
        root_quat = self.root_quat[source].copy()
        if loops.max(initial=0) > 0:
            dyaw, shift = self._loop_transform()
            c, s = np.cos(dyaw), np.sin(dyaw)
            step = np.array([[c, -s], [s, c]])
            turns, offsets = [np.eye(2)], [np.zeros(2)]
            for _ in range(int(loops.max())):  # D^n = (R^n, R t_{n-1} + t)
                offsets.append(step @ offsets[-1] + shift)
                turns.append(step @ turns[-1])
            turns_n, offsets_n = np.stack(turns)[loops], np.stack(offsets)[loops]  # (N, 2, 2), (N, 2)
            root_pos[:, :2] = np.einsum("nij,nj->ni", turns_n, root_pos[:, :2]) + offsets_n
            root_quat = _quat_mul(_yaw_quat(loops * dyaw), root_quat)
        clock = 2.0 * np.pi * self.gait_hz * source * self.dt - self.phase0
        return {"joint_pos": joint_pos, "root_pos": root_pos, "root_quat": root_quat, "clock": clock,
                "source": source}

    def motion(self, count: int) -> Motion:
        """The first ``count`` frames of the continued reference as a Motion (what the MPC expert tracks)."""
        f = self.frames(count)
        source = f["source"]
        contacts = None if self.foot_contacts is None else self.foot_contacts[source]
        return Motion(fps=1.0 / self.dt, joint_names=list(self.joint_names), joint_pos=f["joint_pos"],
                      root_pos=f["root_pos"], root_quat=f["root_quat"], foot_names=list(self.foot_names),
                      foot_offsets=self.foot_offsets, foot_contacts=contacts, prompt=self.prompt)

    def speed_mps(self) -> float:
        """Mean horizontal speed (m/s) over the steady cycle (path length of one loop / its duration)."""
        f = self.frames(self.loop_frames + 1, self.num_frames - 1 - self.loop_frames)
        path = np.linalg.norm(np.diff(f["root_pos"][:, :2], axis=0), axis=-1).sum()
        return float(path / (self.loop_frames * self.dt))

    # -- files --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain arrays and numbers (for the policy file; float32 arrays)."""
        return {"name": self.name, "dt": self.dt, "joint_names": list(self.joint_names),
                "joint_pos": self.joint_pos.astype(np.float32), "root_pos": self.root_pos.astype(np.float32),
                "root_quat": self.root_quat.astype(np.float32), "foot_names": list(self.foot_names),
                "foot_offsets": self.foot_offsets.astype(np.float32),
                "foot_contacts": None if self.foot_contacts is None else self.foot_contacts.astype(np.uint8),
                "gait_hz": self.gait_hz, "phase0": self.phase0, "loop_frames": self.loop_frames,
                "prompt": self.prompt}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReferenceClip:
        contacts = d.get("foot_contacts")
        return cls(name=str(d["name"]), dt=float(d["dt"]), joint_names=[str(n) for n in d["joint_names"]],
                   joint_pos=np.asarray(d["joint_pos"], np.float64), root_pos=np.asarray(d["root_pos"], np.float64),
                   root_quat=np.asarray(d["root_quat"], np.float64), foot_names=[str(n) for n in d["foot_names"]],
                   foot_offsets=np.asarray(d["foot_offsets"], np.float64).reshape(-1, 3),
                   foot_contacts=None if contacts is None else np.asarray(contacts).astype(bool),
                   gait_hz=float(d["gait_hz"]), phase0=float(d["phase0"]), loop_frames=int(d["loop_frames"]),
                   prompt=str(d.get("prompt", "")))


PROGRESS_WINDOW_M = 0.5  # how far along the path (either way) the closest point may move between two frames


def path_progress(path_xy: np.ndarray, point_xy: np.ndarray, near_m: float | None = None,
                  window_m: float = PROGRESS_WINDOW_M) -> float:
    """Arc length (m) along a polyline path (N, 2) of the point on it closest to ``point_xy`` (2,); with ``near_m``
    only among the path's points within ``window_m`` of arc length ``near_m`` (a path that loops passes near the
    same place twice: see :func:`track_progress`)."""
    seg = np.diff(path_xy, axis=0)  # (N-1, 2)
    length = np.linalg.norm(seg, axis=-1)
    if len(seg) == 0:
        return 0.0
    arc = np.r_[0.0, np.cumsum(length)]
    along = np.clip(np.einsum("ni,ni->n", point_xy - path_xy[:-1], seg) / np.maximum(length ** 2, 1e-18), 0.0, 1.0)
    if near_m is not None:  # the window's ends fall inside segments: clamp each segment's point to the window
        lo = np.clip((near_m - window_m - arc[:-1]) / np.maximum(length, 1e-18), 0.0, 1.0)
        hi = np.clip((near_m + window_m - arc[:-1]) / np.maximum(length, 1e-18), 0.0, 1.0)
        inside = (arc[1:] >= near_m - window_m) & (arc[:-1] <= near_m + window_m)
        along = np.clip(along, lo, hi)
    else:
        inside = np.ones(len(seg), dtype=bool)
    closest = path_xy[:-1] + along[:, None] * seg
    dist = np.where(inside, np.linalg.norm(closest - point_xy, axis=-1), np.inf)
    best = int(np.argmin(dist))
    return float(arc[best] + along[best] * length[best])


def track_progress(path_xy: np.ndarray, track_xy: np.ndarray, window_m: float = PROGRESS_WINDOW_M) -> float:
    """Arc length (m) along a path (N, 2) reached by a trajectory (T, 2) that starts at the path's start: the
    closest point followed frame by frame, each within ``window_m`` of the last. Unlike the closest point of the end
    alone, this counts a path that circles (a turning clip looped for 20 s) by the laps actually walked."""
    progress = 0.0
    for point in np.asarray(track_xy, dtype=np.float64):
        progress = path_progress(path_xy, point, near_m=progress, window_m=window_m)
    return progress
