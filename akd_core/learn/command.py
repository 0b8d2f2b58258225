"""The velocity command a velocity-command policy follows: its box, how training and evaluation draw it, and how the
robot's velocity is measured against it.

A command is (vx, vy, yaw_rate): m/s, m/s, rad/s in the robot's **heading frame** (x along the base's heading
projected on the ground, z up; the yaw rate about world z), the frame of ``obs/command`` in an ``akd library``
dataset (docs/formats.md, "The velocity command") and, for a robot standing level, of a ROS ``geometry_msgs/Twist``
in ``base_link`` (REP 103: x forward, y left, z up).

The :class:`CommandBox` is what a policy was trained on: the library's box (``coverage.json`` ``box``: ranges, the
planar speed limit straight ahead and its fall while turning) or, for a plain dataset, the range of its commands.
Commands outside it are clipped into it (:meth:`CommandBox.clip`) wherever a policy receives them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from akd_core.io.errors import ConfigError
from akd_core.learn.reference import yaw_of

COMMAND_NAMES = ("vx", "vy", "yaw_rate")
COMMAND_UNITS = ("m/s", "m/s", "rad/s")
EVAL_BOX = ((-0.5, 1.0), (-0.3, 0.3), (-0.8, 0.8))  # the evaluation's default draws (vx, vy, yaw rate)
EVAL_RESAMPLE_S = 4.0
MOVING = 0.02  # a command with every component below this (m/s, rad/s) asks to stand: the gait clock stops


@dataclass(frozen=True)
class CommandBox:
    """Ranges of vx, vy (m/s) and yaw rate (rad/s), and the planar speed hypot(vx, vy) reachable: ``speed_max``
    straight ahead, falling linearly to ``turning[1]`` at yaw rate ``turning[0]`` (``akd library``'s probes)."""

    vx: tuple[float, float]
    vy: tuple[float, float]
    yaw_rate: tuple[float, float]
    speed_max: float = math.inf
    turning: tuple[float, float] | None = None  # (yaw rate rad/s, planar speed m/s)
    gaits: tuple[tuple[str, float], ...] = ()  # the library's gaits and their top speeds (m/s), slowest first

    def __post_init__(self) -> None:
        for name, (lo, hi) in zip(COMMAND_NAMES, self.ranges):
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ConfigError(f"command box: {name} range [{lo}, {hi}] is not LO <= HI")

    @property
    def ranges(self) -> tuple[tuple[float, float], ...]:
        return (self.vx, self.vy, self.yaw_rate)

    @property
    def low(self) -> np.ndarray:
        return np.array([r[0] for r in self.ranges])

    @property
    def high(self) -> np.ndarray:
        return np.array([r[1] for r in self.ranges])

    def speed_limit(self, yaw_rate: np.ndarray) -> np.ndarray:
        """Planar speed (m/s) reachable at each yaw rate (N,)."""
        yaw_rate = np.abs(np.asarray(yaw_rate, dtype=np.float64))
        if self.turning is None or not math.isfinite(self.speed_max) or self.turning[0] <= 0:
            return np.full(yaw_rate.shape, self.speed_max)
        rate, speed = self.turning
        return self.speed_max - (self.speed_max - min(speed, self.speed_max)) * np.minimum(yaw_rate / rate, 1.0)

    def clip(self, commands: np.ndarray) -> np.ndarray:
        """Commands (..., 3) moved into the box: each axis clipped to its range, then the planar velocity scaled
        down to the speed limit at its yaw rate."""
        c = np.clip(np.asarray(commands, dtype=np.float64), self.low, self.high)
        speed = np.hypot(c[..., 0], c[..., 1])
        limit = self.speed_limit(c[..., 2])
        scale = np.where(speed > limit, limit / np.maximum(speed, 1e-12), 1.0)
        c[..., :2] *= scale[..., None]
        return c

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` commands (count, 3) uniform in the box, then clipped to the speed limit."""
        return self.clip(rng.uniform(self.low, self.high, size=(count, 3)))

    def gait_for(self, speed: float) -> str | None:
        """The library's gait at planar ``speed`` (m/s): the slowest that reaches it (the fastest beyond them all);
        None when the box does not know its gaits (a plain dataset's)."""
        for gait, top in self.gaits:
            if speed <= top + 1e-9:
                return gait
        return self.gaits[-1][0] if self.gaits else None

    def to_dict(self) -> dict[str, Any]:
        return {"vx_mps": list(self.vx), "vy_mps": list(self.vy), "yaw_rate_radps": list(self.yaw_rate),
                "speed_max_mps": self.speed_max if math.isfinite(self.speed_max) else None,
                "turning": None if self.turning is None else {"yaw_rate_radps": self.turning[0],
                                                              "speed_mps": self.turning[1]},
                "gaits": [[g, v] for g, v in self.gaits]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CommandBox:
        """From :meth:`to_dict` or ``coverage.json``'s / ``plan.json``'s ``box``."""
        turning = d.get("turning")
        speed = d.get("speed_max_mps")
        return cls(vx=tuple(map(float, d["vx_mps"])), vy=tuple(map(float, d["vy_mps"])),
                   yaw_rate=tuple(map(float, d["yaw_rate_radps"])),
                   speed_max=math.inf if speed is None else float(speed),
                   turning=None if not turning else (float(turning["yaw_rate_radps"]), float(turning["speed_mps"])),
                   gaits=tuple(sorted(((str(g), float(v)) for g, v in d.get("gaits") or ()), key=lambda g: g[1])))

    @classmethod
    def from_commands(cls, commands: np.ndarray) -> CommandBox:
        """The range of a dataset's commands (M, 3) per axis, and their largest planar speed."""
        c = np.asarray(commands, dtype=np.float64).reshape(-1, 3)
        lo, hi = c.min(0), c.max(0)
        return cls(vx=(float(lo[0]), float(hi[0])), vy=(float(lo[1]), float(hi[1])),
                   yaw_rate=(float(lo[2]), float(hi[2])), speed_max=float(np.hypot(c[:, 0], c[:, 1]).max()))


def is_moving(commands: np.ndarray) -> np.ndarray:
    """(...,) whether each command (..., 3) asks to move (any component at least :data:`MOVING`)."""
    return np.abs(np.asarray(commands, dtype=np.float64)).max(-1) >= MOVING


@dataclass(frozen=True)
class GaitClock:
    """The gait clock a velocity-command policy observes: a phase that advances at the stride frequency the library
    shows at the command, ``hz = clip(hz0 + per_mps * hypot(vx, vy) + per_radps * |yaw rate|, low, high)``, and
    stops while the command asks to stand (:func:`is_moving`). It tells the policy when to lift which foot, so a
    policy standing still sets off as soon as the command moves (the library's stands look the same at every
    command). The observation holds sin and cos of the phase."""

    hz0: float
    per_mps: float
    per_radps: float
    low: float
    high: float

    def frequency(self, commands: np.ndarray) -> np.ndarray:
        """(...,) stride frequency (Hz) at each command (..., 3); 0 where it asks to stand."""
        c = np.asarray(commands, dtype=np.float64)
        hz = np.clip(self.hz0 + self.per_mps * np.hypot(c[..., 0], c[..., 1]) + self.per_radps * np.abs(c[..., 2]),
                     self.low, self.high)
        return np.where(is_moving(c), hz, 0.0)

    def advance(self, phase: np.ndarray, commands: np.ndarray, dt: float) -> np.ndarray:
        """The phase (rad, in [0, 2 pi)) one control period ``dt`` later under ``commands``."""
        return np.mod(np.asarray(phase, dtype=np.float64) + 2.0 * np.pi * self.frequency(commands) * dt, 2.0 * np.pi)

    @staticmethod
    def features(phase: np.ndarray) -> np.ndarray:
        """(..., 2) sin and cos of the phase: the observation's ``clock``."""
        phase = np.asarray(phase, dtype=np.float64)
        return np.stack([np.sin(phase), np.cos(phase)], -1)

    @classmethod
    def fit(cls, commands: np.ndarray, stride_hz: np.ndarray) -> GaitClock:
        """Least squares over the frames (M, 3) that move and have a stride (``stride_hz`` (M,) > 0)."""
        c = np.asarray(commands, dtype=np.float64)
        use = is_moving(c) & (np.asarray(stride_hz) > 0)
        if use.sum() < 3:
            hz = float(np.median(stride_hz[stride_hz > 0])) if (np.asarray(stride_hz) > 0).any() else 1.0
            return cls(hz0=hz, per_mps=0.0, per_radps=0.0, low=hz, high=hz)
        a = np.stack([np.ones(use.sum()), np.hypot(c[use, 0], c[use, 1]), np.abs(c[use, 2])], 1)
        coef, *_ = np.linalg.lstsq(a, np.asarray(stride_hz, np.float64)[use], rcond=None)
        return cls(hz0=float(coef[0]), per_mps=float(coef[1]), per_radps=float(coef[2]),
                   low=float(stride_hz[use].min()), high=float(stride_hz[use].max()))

    def to_dict(self) -> dict[str, Any]:
        return {"hz0": self.hz0, "per_mps": self.per_mps, "per_radps": self.per_radps, "low_hz": self.low,
                "high_hz": self.high, "moving": MOVING,
                "rule": "hz = clip(hz0 + per_mps * hypot(vx, vy) + per_radps * |yaw_rate|, low_hz, high_hz), 0 when "
                        "every |command component| < moving; phase += 2 pi hz dt each control period; "
                        "clock = (sin phase, cos phase)"}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GaitClock:
        return cls(hz0=float(d["hz0"]), per_mps=float(d["per_mps"]), per_radps=float(d["per_radps"]),
                   low=float(d["low_hz"]), high=float(d["high_hz"]))


def library_box(path: str | Path) -> CommandBox | None:
    """The box of an ``akd library`` folder (its ``coverage.json``, else ``plan.json``), or None."""
    path = Path(path)
    for name in ("coverage.json", "plan.json"):
        file = path / name
        if file.is_file():
            try:
                box = json.loads(file.read_text()).get("box")
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{file} is not JSON ({exc}); re-run `akd library` on {path}") from exc
            if isinstance(box, dict):
                return CommandBox.from_dict(box)
    return None


def heading_velocity(root_lin_vel: np.ndarray, root_quat: np.ndarray, root_ang_vel: np.ndarray) -> np.ndarray:
    """(N, 3) vx, vy (m/s) in the heading frame and the yaw rate (rad/s, about world z) from world-frame base
    velocities (N, 3), orientations (N, 4) xyzw and world angular velocities (N, 3): what the command asks for."""
    yaw = yaw_of(np.asarray(root_quat, dtype=np.float64))
    c, s = np.cos(yaw), np.sin(yaw)
    v = np.asarray(root_lin_vel, dtype=np.float64)
    return np.stack([c * v[..., 0] + s * v[..., 1], -s * v[..., 0] + c * v[..., 1],
                     np.asarray(root_ang_vel, dtype=np.float64)[..., 2]], -1)


@dataclass
class CommandSchedule:
    """A piecewise-constant command over an episode: ``commands[i]`` from ``times[i]`` (s) on."""

    times: np.ndarray  # (S,) s, increasing, times[0] = 0
    commands: np.ndarray  # (S, 3)

    def at(self, t: float) -> np.ndarray:
        i = int(np.searchsorted(self.times, t + 1e-9, side="right") - 1)
        return self.commands[max(i, 0)].copy()

    def changes(self) -> np.ndarray:
        """Times (s) at which the command changes (the first command's start excluded)."""
        return self.times[1:].copy()

    @classmethod
    def uniform(cls, rng: np.random.Generator, seconds: float, every_s: float = EVAL_RESAMPLE_S,
                ranges: tuple[tuple[float, float], ...] = EVAL_BOX) -> CommandSchedule:
        """Commands drawn uniformly from ``ranges`` every ``every_s`` s."""
        count = max(1, int(math.ceil(seconds / every_s - 1e-9)))
        low, high = np.array([r[0] for r in ranges]), np.array([r[1] for r in ranges])
        return cls(times=np.arange(count) * every_s, commands=rng.uniform(low, high, size=(count, 3)))

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]]) -> CommandSchedule:
        """From :func:`akd_core.motion.program.read_commands` rows (t, vx, vy, yaw_rate; held from t on)."""
        times = np.array([float(r["t"]) for r in rows])
        commands = np.array([[float(r["vx"]), float(r["vy"]), float(r["yaw_rate"])] for r in rows])
        if times[0] > 0:  # standing still until the first row
            times, commands = np.r_[0.0, times], np.vstack([np.zeros(3), commands])
        return cls(times=times, commands=commands)
