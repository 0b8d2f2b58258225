"""`akd library`: a motion library that covers a robot's velocity-command box, for velocity-command policies.

A library is planned, run and reported in one folder ``DIR`` (docs/library.md):

1. **The box and its grid.** The commands (vx, vy, yaw rate; m/s, m/s, rad/s in the heading frame) span a box: by
   default vx from -0.5 m/s to the fastest speed the robot's gait keeps within its joint limits (the gait library's
   own answer at the top of the gait's Froude range, :func:`robot_speeds`), vy +-0.3 m/s, yaw rate +-1 rad/s. The box
   is cut into cells of 0.2 m/s x 0.3 m/s x 0.4 rad/s centred on zero (:class:`CommandGrid`), so "stand", "straight
   ahead" and "no turn" are cell centres, not cell edges. A cell's command is its centre, moved to the nearest point
   inside the box and the speed disk hypot(vx, vy) <= top speed (kept a little inside the cell); the disk shrinks
   with the yaw rate, linearly to what the gait keeps of its top speed while turning at the box's largest yaw rate
   (a second probe). A cell with no such point is outside the feasible box and is not planned.
2. **Planning** (:func:`plan_library`, pure: no simulation). Cells are visited in rounds. Round 0 takes every feasible
   cell once, in boustrophedon order over the grid (consecutive cells are neighbours, so each transition changes one
   command by one cell), with vx varying fastest; each later round takes the least-visited cells again with another
   axis varying fastest (vy, then yaw rate, then vx reversed, ...), so transitions along every axis are covered.
   Each round's sequence is cut into clips of ``seconds``: every clip starts from a stand (START_S), holds each cell
   for at least HOLD_S and at least STEADY_S after the transition into it (the program's smoothstep ramp within its
   acceleration limits, or one stride of gait blend), and every STOP_EVERY-th clip ends with a stop (every
   SPARSE_STOP_EVERY-th when the clips cannot hold every feasible cell once: a stop costs a ramp down, a stride and
   a second of standing, the time of one or two cells, and the starts already hold the stand). A clip is
   walked from whichever of its two ends is nearer the stand. When the clips cannot hold a round's cells, the round
   takes cells spread evenly over the round's (farthest-point sampling from the gentlest command) and visits them in
   a nearest-neighbour chain. Clips are written as command timelines (DIR/commands/*.csv) that
   :func:`akd_core.motion.program.read_commands` reads.
3. **Running.** Each clip is one `akd run --commands` in DIR/runs/<clip>/, run by :mod:`akd_core.batch` (local
   process pool or Ray), resumable (a finished clip is never run again; a killed library continues), a failing clip
   recorded and never fatal; a clip whose tracking fails its verdict is a finished run that the quality gates leave
   out.
4. **Curation and export.** The quality gates (:mod:`akd_core.export.quality`) judge every clip; the kept ones become
   one dataset per format under DIR/dataset/ (default: HDF5, LeRobot, amp-rsl-rl motion library, mjlab npz per clip),
   each episode carrying the commanded (vx, vy, yaw rate) per frame (:func:`akd_core.export.common.commanded_velocity`).
5. **Coverage** (:func:`coverage_report`): from the tracked states of the kept clips (base velocity in the heading
   frame and yaw rate, smoothed over SMOOTH_S), seconds per cell -> DIR/coverage.json and DIR/coverage.png; and how
   well those clips follow their commands on the velocity evaluation's metric (:func:`command_tracking`, unsmoothed)
   -> summary.json ``library.command_tracking``.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from akd_core.batch import Job, Sweep, aggregate, execute_jobs, job_done, robot_label
from akd_core.export.common import FORMATS, commanded_velocity
from akd_core.export.quality import QualityGates
from akd_core.io.errors import AKDError, ConfigError
from akd_core.io.fileio import write_json_atomic, write_text_atomic
from akd_core.io.rundir import TRACKED, RunDir
from akd_core.learn.command import heading_velocity
from akd_core.learn.velocity_eval import SETTLE_S, YAW_SPLIT_S, yaw_rate_mean
from akd_core.model.spatial import quat_yaw
from akd_core.motion.program import ACCEL_MAX, RAMP_S, SMOOTHSTEP_PEAK, YAW_ACCEL_MAX, read_commands

log = logging.getLogger("akd.library")

PLAN_SCHEMA = 1
CELL = (0.2, 0.3, 0.4)  # cell size: vx m/s, vy m/s, yaw rate rad/s
AXES = ("vx", "vy", "yaw_rate")
DEFAULT_BACKWARD = 0.5  # m/s, the default box reaches this fast backward (at most the forward top speed)
DEFAULT_LATERAL = 0.3  # m/s, +- vy of the default box (at most the forward top speed)
DEFAULT_YAW_RATE = 1.0  # rad/s, +- yaw rate of the default box
INSET = 0.15  # of a cell: a planned command lies at least this far inside its cell (never on an edge)
START_S = 1.0  # s, the stand every clip starts from
HOLD_S = 2.0  # s, the least time a cell is held
STEADY_S = 1.0  # s, the least steady time of a cell after the transition into it
RAMP_SLACK_S = 0.25  # s, added to each estimated transition (the program may lengthen a ramp to spare the joints)
STOP_EVERY = 2  # every second clip ends with a stop ...
SPARSE_STOP_EVERY = 4  # ... or every fourth when the clips cannot hold every feasible cell once
STOP_STEADY_S = 1.0  # s of standing after a stop's ramp and the stride that brings the feet down
DEFAULT_STRIDE_S = 1.0  # s, the stride a gait blend lasts when the robot's is not known
SMOOTH_S = 0.2  # s, the window the tracked velocities are averaged over before binning
MIN_CELL_S = 1.0  # s: a cell holding this much tracked motion is covered
# the tracking cost's yaw-rate term for library clips (akd_core.physics.cost): a policy learns the library's way of
# turning, and without it a1's tracked trots swing their heading 0.22 rad/s RMS about the reference's rate
LIBRARY_YAW_RATE_WEIGHT = 0.3
PROBE_S = 2.0  # s, the steady clip the gait library's top speed is found on
PROMPT = "follow the velocity command"  # the prompt (LeRobot task) of every clip
DEFAULT_EXPORTS = ("hdf5", "lerobot", "amp-rsl-rl", "mjlab")
MIN_SECONDS = START_S + HOLD_S


# ----------------------------------------------------------------------------- the box and its grid
def parse_range(text: str | Sequence[float] | None, option: str) -> tuple[float, float] | None:
    """"LO,HI" (or a pair) -> (lo, hi) with lo < hi, both finite; None passes through. ConfigError naming the option
    and the form to use otherwise."""
    if text is None:
        return None
    if isinstance(text, str):
        parts = [p.strip() for p in text.split(",")]
    else:
        parts = list(text)
    try:
        lo, hi = (float(p) for p in parts)
    except (TypeError, ValueError):
        raise ConfigError(f"{option}={text!r}: give two numbers LO,HI, e.g. {option}=-0.5,1.0 (with '=': a value "
                          "that starts with '-' is otherwise read as an option)") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ConfigError(f"{option}={text!r}: LO and HI must be finite numbers")
    if lo >= hi:
        raise ConfigError(f"{option}={text!r}: LO ({lo:g}) must be below HI ({hi:g}), e.g. {option}={hi:g},{lo:g}"
                          if lo > hi else f"{option}={text!r}: LO and HI are equal; give a range, e.g. "
                          f"{option}={lo - 0.1:g},{hi + 0.1:g}")
    return lo, hi


@dataclass(frozen=True)
class CommandBox:
    """The commands a library covers: ranges of vx, vy (m/s) and yaw rate (rad/s) in the heading frame, the planar
    speed hypot(vx, vy) the robot's gaits reach (less while turning: :meth:`speed_limit`), and the gaits with their
    top speeds (slowest first): a command uses the slowest gait that reaches its speed."""

    vx: tuple[float, float]
    vy: tuple[float, float]
    yaw_rate: tuple[float, float]
    speed_max: float = math.inf  # m/s
    gaits: tuple[tuple[str, float], ...] = (("trot", math.inf),)
    # (yaw rate rad/s, planar speed m/s) the fastest gait keeps when asked for its top speed and the box's largest yaw
    # rate together (the stance feet sweep faster when the body turns too); None: turning costs no speed
    turning: tuple[float, float] | None = None

    def speed_limit(self, yaw_rate: float) -> float:
        """The planar speed reachable at ``yaw_rate``: from ``speed_max`` straight ahead, down a line to the
        turning probe's speed at its yaw rate (and that speed beyond it)."""
        if self.turning is None or not math.isfinite(self.speed_max) or self.turning[0] <= 0:
            return self.speed_max
        rate, speed = self.turning
        return self.speed_max - (self.speed_max - min(speed, self.speed_max)) * min(abs(yaw_rate) / rate, 1.0)

    @property
    def ranges(self) -> tuple[tuple[float, float], ...]:
        return (self.vx, self.vy, self.yaw_rate)

    def gait_for(self, speed: float) -> str:
        """The gait of a command of planar ``speed`` m/s."""
        for pattern, top in self.gaits:
            if speed <= top + 1e-9:
                return pattern
        return self.gaits[-1][0]

    def to_dict(self) -> dict[str, Any]:
        return {"vx_mps": list(self.vx), "vy_mps": list(self.vy), "yaw_rate_radps": list(self.yaw_rate),
                "speed_max_mps": None if not math.isfinite(self.speed_max) else self.speed_max,
                "gaits": [[g, None if not math.isfinite(v) else v] for g, v in self.gaits],
                "turning": None if self.turning is None else {"yaw_rate_radps": self.turning[0],
                                                              "speed_mps": self.turning[1]}}


def _axis_centres(lo: float, hi: float, size: float) -> np.ndarray:
    """Centres k * size of the cells of one axis that overlap [lo, hi] by more than their inset."""
    inset = INSET * size
    ks = range(math.floor(lo / size) - 1, math.ceil(hi / size) + 2)
    return np.array([k * size for k in ks if max(k * size - size / 2 + inset, lo) <= min(k * size + size / 2 - inset,
                                                                                          hi) + 1e-12])


class CommandGrid:
    """Cells of ``cell`` = (vx, vy, yaw rate) size centred on multiples of the size (zero is a centre), over the
    cells that overlap ``box``. Index (i, j, k) = the cell's position along vx, vy, yaw rate."""

    def __init__(self, box: CommandBox, cell: Sequence[float] = CELL):
        self.box = box
        self.cell = tuple(float(c) for c in cell)
        if len(self.cell) != 3 or not all(math.isfinite(c) and c > 0 for c in self.cell):
            raise ConfigError(f"cell size {cell!r}: give three positive numbers (vx m/s, vy m/s, yaw rate rad/s)")
        self.axes = [_axis_centres(lo, hi, size) for (lo, hi), size in zip(box.ranges, self.cell)]
        self.shape = tuple(len(a) for a in self.axes)
        if min(self.shape) == 0:
            raise ConfigError(f"the command box {box.to_dict()} holds no cell of size {self.cell}")

    def cells(self) -> list[tuple[int, int, int]]:
        return [tuple(int(x) for x in idx) for idx in np.ndindex(*self.shape)]

    def centre(self, idx: Sequence[int]) -> np.ndarray:
        return np.array([self.axes[a][idx[a]] for a in range(3)])

    def index(self, values: np.ndarray) -> np.ndarray:
        """(N, 3) commands -> (N, 3) cell indices, -1 along an axis where the value lies in no cell."""
        values = np.atleast_2d(np.asarray(values, dtype=np.float64))
        out = np.full(values.shape, -1, dtype=np.int64)
        for a in range(3):
            k = np.floor((values[:, a] - self.axes[a][0]) / self.cell[a] + 0.5).astype(np.int64)
            inside = (k >= 0) & (k < self.shape[a]) & np.isfinite(values[:, a])
            out[inside, a] = k[inside]
        return out

    def target(self, idx: Sequence[int]) -> np.ndarray | None:
        """The command planned for cell ``idx``: its centre moved to the nearest point inside the box, the speed disk
        and the cell less its inset; None when the cell holds no such point."""
        lows, highs = [], []
        for a, ((lo, hi), size) in enumerate(zip(self.box.ranges, self.cell)):
            c = self.axes[a][idx[a]]
            lows.append(max(c - size / 2 + INSET * size, lo))
            highs.append(min(c + size / 2 - INSET * size, hi))
        centre = self.centre(idx)
        yaw = float(np.clip(centre[2], lows[2], highs[2]))
        xs = np.unique(np.r_[np.linspace(lows[0], highs[0], 21), np.clip(centre[0], lows[0], highs[0])])
        ys = np.unique(np.r_[np.linspace(lows[1], highs[1], 21), np.clip(centre[1], lows[1], highs[1])])
        gx, gy = np.meshgrid(xs, ys, indexing="ij")
        ok = np.hypot(gx, gy) <= self.box.speed_limit(yaw) + 1e-9
        if not ok.any():
            return None
        cost = ((gx - centre[0]) / self.cell[0]) ** 2 + ((gy - centre[1]) / self.cell[1]) ** 2
        best = np.unravel_index(np.argmin(np.where(ok, cost, np.inf)), cost.shape)
        return np.round(np.array([gx[best], gy[best], yaw]), 4) + 0.0  # + 0.0: no -0.0 in the timelines

    def to_dict(self) -> dict[str, Any]:
        return {"cell": list(self.cell), "shape": list(self.shape),
                "centres": {name: [round(float(c), 6) for c in axis] for name, axis in zip(AXES, self.axes)}}


# ----------------------------------------------------------------------------- planning
@dataclass
class CommandRow:
    """One row of a clip's command timeline: from ``t`` s, hold (vx, vy, yaw rate) with ``gait`` (None: a stand) for
    ``hold`` s, of which ``ramp`` s are the (estimated) transition into it; ``cell``: the grid cell it plans to fill
    (None for the stands and stops)."""

    t: float
    command: tuple[float, float, float]
    gait: str | None
    hold: float
    ramp: float
    cell: tuple[int, int, int] | None = None
    kind: str = "move"  # "move" | "start" (the stand a clip starts from) | "stop"


@dataclass
class PlannedClip:
    name: str
    rows: list[CommandRow]
    seconds: float
    round: int = 0

    @property
    def cells(self) -> list[tuple[int, int, int]]:
        return [r.cell for r in self.rows if r.cell is not None]

    def csv_text(self) -> str:
        """The clip's command timeline (header t,vx,vy,yaw_rate,gait; a stand row leaves the gait empty)."""
        handle = io.StringIO()
        handle.write(f"# akd library: clip {self.name}, {self.seconds:g} s, round {self.round}; cells (vx, vy, yaw) "
                     f"{[list(c) for c in self.cells]}\n")
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["t", "vx", "vy", "yaw_rate", "gait"])
        for row in self.rows:
            writer.writerow([f"{row.t:.3f}", *(f"{v:.4f}" for v in row.command), row.gait or ""])
        return handle.getvalue()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "seconds": self.seconds, "round": self.round,
                "rows": [{**asdict(r), "cell": None if r.cell is None else list(r.cell),
                          "command": [round(v, 4) for v in r.command]} for r in self.rows]}


@dataclass
class LibraryPlan:
    """Clips planned over a grid (:func:`plan_library`), each cell's planned command, and what planning noted."""

    grid: CommandGrid
    clips: list[PlannedClip]
    targets: dict[tuple[int, int, int], np.ndarray]  # feasible cell -> its command
    stand_cell: tuple[int, int, int] | None
    seconds: float
    stride_s: float
    notes: list[str] = field(default_factory=list)
    speeds: RobotSpeeds | None = None  # the robot's gaits, when planned for one (make_plan)

    def planned_seconds(self) -> np.ndarray:
        """(nvx, nvy, nyaw) seconds of steady command planned per cell (a row's hold less its transition)."""
        out = np.zeros(self.grid.shape)
        for clip in self.clips:
            for row in clip.rows:
                cell = row.cell if row.cell is not None else (self.stand_cell if row.kind != "move" else None)
                if cell is not None:
                    out[cell] += max(row.hold - row.ramp, 0.0)
        return out

    def feasible(self) -> np.ndarray:
        mask = np.zeros(self.grid.shape, bool)
        for cell in self.targets:
            mask[cell] = True
        return mask

    def transitions(self) -> dict[str, int]:
        """Neighbouring cells (one step along one axis) that some clip moves between, of all such pairs."""
        seen = set()
        for clip in self.clips:
            cells = clip.cells
            for a, b in zip(cells, cells[1:]):
                if sum(abs(x - y) for x, y in zip(a, b)) == 1:
                    seen.add(tuple(sorted((a, b))))
        pairs = sum(1 for a in self.targets for d in range(3)
                    if (b := tuple(a[i] + (i == d) for i in range(3))) in self.targets
                    and self.stand_cell not in (a, b))
        return {"neighbour_pairs_planned": len(seen), "neighbour_pairs": pairs}

    def to_dict(self) -> dict[str, Any]:
        planned = self.planned_seconds()
        visited = {c for clip in self.clips for c in clip.cells}
        tour = [c for c in self.targets if c != self.stand_cell]
        return {"schema": PLAN_SCHEMA, "box": self.grid.box.to_dict(), "grid": self.grid.to_dict(),
                "seconds": self.seconds, "stride_s": self.stride_s, "clips": [c.to_dict() for c in self.clips],
                "cells": len(self.grid.cells()), "feasible_cells": len(self.targets),
                "stand_cell": None if self.stand_cell is None else list(self.stand_cell),
                "cells_planned": len(visited) + (self.stand_cell is not None),
                "cells_unplanned": [list(c) for c in tour if c not in visited],
                "planned_seconds_min": float(min((planned[c] for c in self.targets), default=0.0)),
                **self.transitions(), "notes": self.notes}


def transition_s(before: np.ndarray, after: np.ndarray, blend: bool, stride_s: float) -> float:
    """How long the program takes to go from command ``before`` to ``after`` (s): its smoothstep ramp within
    ACCEL_MAX and YAW_ACCEL_MAX (at least RAMP_S), and when the gait's cadence may change (a gait change, or a moving
    command to another) one stride of gait blend."""
    change = np.asarray(after, dtype=np.float64) - np.asarray(before, dtype=np.float64)
    ramp = max(RAMP_S, SMOOTHSTEP_PEAK * float(np.hypot(change[0], change[1])) / ACCEL_MAX,
               SMOOTHSTEP_PEAK * abs(float(change[2])) / YAW_ACCEL_MAX)
    return max(ramp, stride_s) if blend else ramp


def _boustrophedon(cells: Sequence[tuple[int, int, int]], order: Sequence[int], shape: Sequence[int],
                   reverse: bool = False) -> list[tuple[int, int, int]]:
    """``cells`` in snake order: ``order`` = axes from the slowest-varying to the fastest; each line along the
    fastest axis runs the other way from the one before, so consecutive cells of a full box are neighbours."""
    outer, middle, inner = order

    def key(c: tuple[int, int, int]) -> tuple[int, int, int]:
        b = c[middle] if c[outer] % 2 == 0 else shape[middle] - 1 - c[middle]
        line = c[outer] * shape[middle] + b
        return (c[outer], b, c[inner] if line % 2 == 0 else shape[inner] - 1 - c[inner])

    ordered = sorted(cells, key=key)
    return ordered[::-1] if reverse else ordered


def _spread(cells: Sequence[tuple[int, int, int]], keep: int, first: tuple[int, int, int], scatter: bool = False
            ) -> list[tuple[int, int, int]]:
    """``keep`` of ``cells`` spread evenly over them: ``first``, then again and again the cell farthest (in cells)
    from those picked (farthest-point sampling), the first in ``cells``' order among cells as far; with ``scatter``
    the one farthest from all picked together (the sum of distances), so that the cells left out scatter over the box
    instead of gathering at the end of the order (for a1's first round: the whole +0.8 rad/s column)."""
    points = np.asarray(cells, dtype=np.float64)
    picked = [cells.index(first)]
    distance = np.linalg.norm(points - points[picked[0]], axis=1)
    total = distance.copy()
    while len(picked) < min(keep, len(cells)):
        far = np.flatnonzero(distance >= distance.max() - 1e-9)
        nxt = int(far[np.argmax(total[far])]) if scatter else int(far[0])
        picked.append(nxt)
        step = np.linalg.norm(points - points[nxt], axis=1)
        distance = np.minimum(distance, step)
        total += step
    return [cells[i] for i in picked]


def _chain(cells: Sequence[tuple[int, int, int]], first: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """``cells`` in a nearest-neighbour chain from ``first``: each next cell the nearest (in cells) not yet taken,
    so consecutive commands of cells picked apart still change as little as they can."""
    left = list(cells)
    chain = [left.pop(left.index(first))]
    while left:
        here = np.asarray(chain[-1], dtype=np.float64)
        nearest = min(range(len(left)), key=lambda i: (float(np.sum((np.asarray(left[i]) - here) ** 2)), i))
        chain.append(left.pop(nearest))
    return chain


# the axis orders of successive rounds (slowest to fastest): vx, then vy, then yaw rate varies fastest
ROUND_ORDERS = ((2, 1, 0), (0, 2, 1), (1, 0, 2))


class _Planner:
    """Cuts sequences of cells into clips (module docstring, step 2)."""

    def __init__(self, grid: CommandGrid, targets: dict, seconds: float, stride_s: float,
                 stop_every: int = STOP_EVERY):
        self.grid, self.targets, self.seconds, self.stride_s = grid, targets, seconds, stride_s
        self.stop_every = stop_every

    def rows(self, cells: Sequence[tuple[int, int, int]], stop: bool) -> list[CommandRow]:
        """The clip's rows (times unset): a stand, the cells, a stop when asked."""
        zero = np.zeros(3)
        rows = [CommandRow(0.0, (0.0, 0.0, 0.0), None, START_S, 0.0, kind="start")]  # at rest already
        previous, previous_gait = zero, None
        for cell in cells:
            command = self.targets[cell]
            gait = self.grid.box.gait_for(float(np.hypot(command[0], command[1])))
            # between two moving commands the cadence may change (it grows with the speed and the turn): a blend
            blend = previous_gait is not None
            ramp = transition_s(previous, command, blend, self.stride_s) + RAMP_SLACK_S
            rows.append(CommandRow(0.0, tuple(float(v) for v in command), gait, max(HOLD_S, ramp + STEADY_S), ramp,
                                   cell=cell))
            previous, previous_gait = command, gait
        if stop:
            ramp = transition_s(previous, zero, False, self.stride_s) + RAMP_SLACK_S
            rows.append(CommandRow(0.0, (0.0, 0.0, 0.0), None, max(HOLD_S, ramp + self.stride_s + STOP_STEADY_S),
                                   ramp, kind="stop"))
        return rows

    def length(self, cells: Sequence[tuple[int, int, int]], stop: bool) -> float:
        return sum(r.hold for r in self.rows(cells, stop))

    def fill(self, sequence: Sequence[tuple[int, int, int]], first_clip: int, clips_left: int
             ) -> list[tuple[list[tuple[int, int, int]], bool]]:
        """Consecutive pieces of ``sequence``, each as many cells as a clip holds, for at most ``clips_left`` clips;
        (cells, ends with a stop) per clip."""
        out: list[tuple[list[tuple[int, int, int]], bool]] = []
        i = 0
        while i < len(sequence) and len(out) < clips_left:
            stop = (first_clip + len(out)) % self.stop_every == self.stop_every - 1
            if stop and self.length(sequence[i:i + 1], True) > self.seconds:
                stop = False  # too short a clip for a stop after its one cell
            cells = [sequence[i]]
            i += 1
            while i < len(sequence) and self.length(cells + [sequence[i]], stop) <= self.seconds + 1e-9:
                cells.append(sequence[i])
                i += 1
            out.append((cells, stop))
        return out

    def clip(self, name: str, cells: list[tuple[int, int, int]], stop: bool, round_: int) -> PlannedClip:
        """A clip of ``cells`` walked from the end nearer the stand (when it fits), its spare time spread over the
        cells and the rows timed."""
        forward = self.rows(cells, stop)
        backward = self.rows(cells[::-1], stop)

        def effort(cell: tuple[int, int, int]) -> float:
            return float(np.sum((self.targets[cell] / np.asarray(self.grid.cell)) ** 2))

        rows = forward
        if effort(cells[-1]) < effort(cells[0]) and sum(r.hold for r in backward) <= self.seconds + 1e-9:
            rows = backward
        spare = self.seconds - sum(r.hold for r in rows)
        moving = [r for r in rows if r.kind == "move"]
        if spare > 0 and moving:
            for r in moving:
                r.hold += spare / len(moving)
        elif spare < 0 and moving:  # one cell longer than the clip (a very short --seconds): it is cut
            moving[-1].hold = max(moving[-1].hold + spare, 0.0)
        t = 0.0
        for r in rows:
            r.t = round(t, 3)
            t += r.hold
        return PlannedClip(name=name, rows=rows, seconds=self.seconds, round=round_)


def plan_library(grid: CommandGrid, clips: int, seconds: float, seed: int = 0,
                 stride_s: float = DEFAULT_STRIDE_S) -> LibraryPlan:
    """Plan ``clips`` clips of ``seconds`` s over the feasible cells of ``grid`` (module docstring, step 2).
    ``stride_s``: the robot's slowest stride (s), the length of a gait blend. ``seed`` turns each later round's
    sequence so its clips break at other cells."""
    if clips < 1:
        raise ConfigError(f"--clips {clips}: give at least 1 clip")
    if not math.isfinite(seconds) or seconds < MIN_SECONDS:
        raise ConfigError(f"--seconds {seconds:g}: a clip needs at least {MIN_SECONDS:g} s (a {START_S:g} s stand "
                          f"and one cell held {HOLD_S:g} s); give --seconds {MIN_SECONDS:g} or more (10 is usual)")
    targets = {}
    for cell in grid.cells():
        target = grid.target(cell)
        if target is not None:
            targets[cell] = target
    zero = grid.index(np.zeros((1, 3)))[0]
    stand_cell = tuple(int(v) for v in zero) if (zero >= 0).all() else None
    if stand_cell is not None:
        targets[stand_cell] = np.zeros(3)  # the stands and stops fill it
    tour = [c for c in targets if c != stand_cell]
    turning = grid.box.turning
    notes = [f"{len(grid.cells())} cells, {len(targets)} feasible (speed <= {grid.box.speed_max:.2f} m/s"
             + (f", {turning[1]:.2f} m/s at {turning[0]:.2f} rad/s)" if turning else ")")]
    planner = _Planner(grid, targets, seconds, stride_s)
    first_round = _boustrophedon(tour, ROUND_ORDERS[0], grid.shape)
    needed = len(planner.fill(first_round, 0, len(first_round)))  # clips that hold every cell, stops as usual
    if tour and needed > clips:
        planner.stop_every = SPARSE_STOP_EVERY  # the time of the stops goes to cells
        notes.append(f"every {SPARSE_STOP_EVERY}th clip ends with a stop (every {STOP_EVERY}nd when the clips hold "
                     "every cell): the clips cannot hold every feasible cell once")
    rng = np.random.default_rng(seed)
    visits: Counter = Counter()
    planned: list[PlannedClip] = []
    width = max(3, len(str(clips - 1)))
    round_ = 0
    while len(planned) < clips and tour:
        least = min(visits[c] for c in tour)
        pool = [c for c in tour if visits[c] == least]
        sequence = _boustrophedon(pool, ROUND_ORDERS[round_ % 3], grid.shape, reverse=(round_ // 3) % 2 == 1)
        if round_ > 0 and len(sequence) > 1:  # later rounds start elsewhere: their clips break at other cells
            shift = int(rng.integers(len(sequence)))
            sequence = sequence[shift:] + sequence[:shift]
        left = clips - len(planned)
        pieces = planner.fill(sequence, len(planned), len(sequence))
        if len(pieces) > left:  # the clips cannot hold the round: cells spread over it, chained
            gentlest = min(sequence, key=lambda c: (float(np.sum((targets[c] / np.asarray(grid.cell)) ** 2)),
                                                    -float(targets[c][0]), c))  # forward before backward
            keep = max(len(sequence) * left // len(pieces), 1)
            while True:
                # round 0 leaves cells out altogether: scattered, so that each has covered neighbours
                picked = _chain(_spread(sequence, keep, gentlest, scatter=round_ == 0), gentlest)
                if keep == 1 or len(planner.fill(picked, len(planned), len(picked))) <= left:
                    break
                keep -= 1
            if round_ == 0:
                notes.append(f"{clips} clips of {seconds:g} s hold {len(picked)} of the {len(sequence)} feasible "
                             f"moving cells; about {needed} clips would hold them all")
            pieces = planner.fill(picked, len(planned), left)
        for cells, stop in pieces:
            planned.append(planner.clip(f"clip_{len(planned):0{width}d}", cells, stop, round_))
            visits.update(cells)
        round_ += 1
    if not tour:
        notes.append("no moving cell is feasible: the clips only stand")
        for n in range(clips):
            planned.append(PlannedClip(f"clip_{n:0{width}d}", [CommandRow(0.0, (0.0, 0.0, 0.0), None, seconds, 0.0,
                                                                           kind="start")], seconds))
    return LibraryPlan(grid=grid, clips=planned, targets=targets, stand_cell=stand_cell, seconds=float(seconds),
                       stride_s=float(stride_s), notes=notes)


# ----------------------------------------------------------------------------- the robot's speeds
@dataclass(frozen=True)
class RobotSpeeds:
    """What the library needs of the robot: its gaits' top speeds (m/s, within the joint limits with the tracking
    margin), what the fastest keeps of its top speed and a yaw rate together ((yaw rate, speed), as
    :attr:`CommandBox.turning`), its default gait and its slowest stride (s)."""

    gaits: tuple[tuple[str, float], ...]
    default_gait: str
    stride_s: float
    legs: int
    turning: tuple[float, float] | None = None


def robot_speeds(robot_spec: str, package_paths: Sequence[str] = (), feet: Sequence[str] | None = None,
                 gaits: Sequence[str] | None = None, fps: float = 50.0, yaw_rate: float = DEFAULT_YAW_RATE,
                 echo: Callable[[str], None] = print) -> RobotSpeeds:
    """Each gait's top speed: the speed the gait library keeps within the joint limits (with the tracking margin,
    ``TRACKING_VELOCITY_RATIO``) when asked for the top of the gait's Froude range, on a PROBE_S s steady clip; then
    what the fastest gait keeps of that speed while turning at ``yaw_rate`` rad/s (it lowers speed and turn rate
    together)."""
    from akd_core.model.legs import find_legs, leg_length
    from akd_core.model.load import load_robot
    from akd_core.motion.gait import (
        GRAVITY,
        TRACKING_VELOCITY_RATIO,
        GaitSpec,
        generate_gait_result,
        pattern_key,
        speed_for_level,
    )
    from akd_core.motion.prompt import DEFAULT_PATTERN, PATTERNS_BY_LEGS

    robot = load_robot(robot_spec, package_paths)
    legs = find_legs(robot, list(feet) if feet else None)
    num = len(legs)
    default = DEFAULT_PATTERN.get(num, PATTERNS_BY_LEGS.get(num, ("wave",))[0])
    wanted = list(gaits) if gaits else [default]
    for gait in wanted:
        try:
            pattern_key(gait, num)
        except ConfigError as exc:
            raise ConfigError(f"--gaits {','.join(wanted)}: {exc}") from None
    length = leg_length(robot, legs)
    tops = []
    for gait in wanted:
        asked = speed_for_level(gait, legs, length, 1.0)
        echo(f"library: the top {gait} speed of {robot.name} (asked {asked:.2f} m/s, the top of its Froude range) ...")
        result = generate_gait_result(robot, GaitSpec(pattern=gait, speed=asked), PROBE_S, fps, legs, slow_down=True,
                                      max_velocity_ratio=TRACKING_VELOCITY_RATIO)
        top = math.floor(float(result.spec.speed) * 100.0) / 100.0
        echo(f"library: {gait} keeps {top:.2f} m/s" + (f" (limited by joint '{result.limit.joint}', "
                                                      f"{result.limit.kind})" if result.limit is not None else ""))
        tops.append((gait, top))
    fastest, top = max(tops, key=lambda g: g[1])
    turning = None
    if top > 0 and yaw_rate > 0:
        echo(f"library: what {fastest} keeps of {top:.2f} m/s while turning at {yaw_rate:.2f} rad/s ...")
        result = generate_gait_result(robot, GaitSpec(pattern=fastest, speed=top, turn_rate=yaw_rate), PROBE_S, fps,
                                      legs, slow_down=True, max_velocity_ratio=TRACKING_VELOCITY_RATIO)
        turning = (round(abs(float(result.spec.turn_rate)), 4), math.floor(float(result.spec.speed) * 100.0) / 100.0)
        echo(f"library: {fastest} keeps {turning[1]:.2f} m/s at {turning[0]:.2f} rad/s")
    natural = 0.25 * math.sqrt(GRAVITY / max(length, 1e-3))  # the gait library's slowest cadence, Hz
    return RobotSpeeds(gaits=tuple(sorted(tops, key=lambda g: g[1])), default_gait=default, stride_s=1.0 / natural,
                       legs=num, turning=turning)


def default_box(speeds: RobotSpeeds, vx: tuple[float, float] | None = None, vy: tuple[float, float] | None = None,
                yaw_rate: tuple[float, float] | None = None) -> CommandBox:
    """The box of a robot (module docstring, step 1), each range overridden where given."""
    top = max(v for _, v in speeds.gaits)
    if top <= 0:
        raise ConfigError(f"the robot's gaits {[g for g, _ in speeds.gaits]} keep no speed within its joint limits; "
                          "check the URDF's velocity and effort limits (`akd robots info ROBOT`)")
    return CommandBox(vx=vx or (-min(DEFAULT_BACKWARD, top), top), vy=vy or (-min(DEFAULT_LATERAL, top),
                                                                               min(DEFAULT_LATERAL, top)),
                      yaw_rate=yaw_rate or (-DEFAULT_YAW_RATE, DEFAULT_YAW_RATE), speed_max=top, gaits=speeds.gaits,
                      turning=speeds.turning)


# ----------------------------------------------------------------------------- coverage
def heading_velocities(root_lin_vel: np.ndarray, root_quat: np.ndarray, dt: float,
                       smooth_s: float = SMOOTH_S) -> np.ndarray:
    """Tracked (T, 3) world root velocity and (T, 4) xyzw orientation -> (T, 3) vx, vy in the heading frame and yaw
    rate (the derivative of the unwrapped heading), each averaged over ``smooth_s`` s (centred)."""
    vel = np.asarray(root_lin_vel, dtype=np.float64)
    yaw = np.unwrap(np.asarray(quat_yaw(np.asarray(root_quat, dtype=np.float64))).reshape(-1))
    c, s = np.cos(yaw), np.sin(yaw)
    out = np.stack([c * vel[:, 0] + s * vel[:, 1], -s * vel[:, 0] + c * vel[:, 1],
                    np.gradient(yaw, dt) if len(yaw) > 1 else np.zeros_like(yaw)], -1)
    window = max(1, int(round(smooth_s / dt)))
    if window > 1 and len(out) > 1:
        kernel = np.ones(window)
        counts = np.convolve(np.ones(len(out)), kernel, mode="same")
        out = np.stack([np.convolve(out[:, a], kernel, mode="same") / counts for a in range(3)], -1)
    return out


def coverage_seconds(grid: CommandGrid, velocities: Sequence[np.ndarray], dts: Sequence[float]
                     ) -> tuple[np.ndarray, float]:
    """Seconds per cell (nvx, nvy, nyaw) of (T, 3) heading-frame velocities sampled every ``dt`` s, and the seconds
    that fall in no cell."""
    seconds = np.zeros(grid.shape)
    outside = 0.0
    for values, dt in zip(velocities, dts):
        idx = grid.index(values)
        inside = (idx >= 0).all(1)
        np.add.at(seconds, tuple(idx[inside].T), float(dt))
        outside += float(dt) * int((~inside).sum())
    return seconds, outside


def coverage_report(plan: LibraryPlan, clips: dict[str, tuple[np.ndarray, float]],
                    lowered: dict[str, list[dict[str, Any]]] | None = None, min_seconds: float = MIN_CELL_S
                    ) -> dict[str, Any]:
    """Coverage of the kept clips' tracked motion: ``clips`` = {name: ((T, 3) heading-frame velocities, dt)}.
    ``lowered``: per clip, the commands the gait library played slower than planned (from the gait stage)."""
    grid = plan.grid
    names = sorted(clips)
    seconds, outside = coverage_seconds(grid, [clips[n][0] for n in names], [clips[n][1] for n in names])
    planned = plan.planned_seconds()
    feasible = plan.feasible()
    covered = seconds >= min_seconds
    cells = []
    for idx in grid.cells():
        target = plan.targets.get(idx)
        cells.append({"index": list(idx), "centre": [round(float(v), 4) for v in grid.centre(idx)],
                      "command": None if target is None else [round(float(v), 4) for v in target],
                      "feasible": bool(feasible[idx]), "planned_s": round(float(planned[idx]), 3),
                      "seconds": round(float(seconds[idx]), 3), "covered": bool(covered[idx])})
    n_feasible = int(feasible.sum())
    return {
        "schema": PLAN_SCHEMA, "source": "tracked states of the clips the quality gates kept",
        "box": grid.box.to_dict(), "grid": grid.to_dict(), "smooth_s": SMOOTH_S, "min_seconds": min_seconds,
        "clips": names, "seconds_total": round(float(seconds.sum() + outside), 3),
        "seconds_outside": round(outside, 3),
        "cells": len(cells), "feasible_cells": n_feasible,
        "covered_cells": int((covered & feasible).sum()),
        "covered_fraction": round(float((covered & feasible).sum()) / max(n_feasible, 1), 4),
        "covered_fraction_all": round(float(covered.sum()) / max(len(cells), 1), 4),
        "seconds_per_cell": seconds.round(3).tolist(), "planned_seconds_per_cell": planned.round(3).tolist(),
        "feasible_per_cell": feasible.tolist(), "lowered": lowered or {}, "per_cell": cells,
    }


def steady_steps(command: np.ndarray, dt: float, settle_s: float = SETTLE_S) -> np.ndarray:
    """(T,) bool: the frames whose command (T, 3) has held for ``settle_s`` (a ramp counts as changing)."""
    changed = np.r_[True, np.abs(np.diff(command, axis=0)).max(1) > 1e-6] if len(command) else np.zeros(0, bool)
    last = np.maximum.accumulate(np.where(changed, np.arange(len(command)), 0))
    return (np.arange(len(command)) - last) * dt >= settle_s - 1e-9


def command_tracking(clips: Sequence[tuple[np.ndarray, np.ndarray, float]]) -> dict[str, Any]:
    """How well the library's own clips follow their commands, scored as ``akd eval-policy --task velocity`` scores
    a policy: ``clips`` = [(measured (T, 3) heading-frame vx, vy and yaw rate, unfiltered; played command (T, 3);
    dt)], RMSEs over the frames whose command has held for SETTLE_S, the yaw rate split into the turn (its centred
    YAW_SPLIT_S mean against the command) and the swing within strides. A policy imitating the library starts
    from this floor: its clips swing as they do."""
    sq, split, steps = np.zeros(3), np.zeros(2), 0
    for measured, command, dt in clips:
        keep = steady_steps(command, dt)
        turn = yaw_rate_mean(measured[:, 2], dt)
        sq += ((measured - command)[keep] ** 2).sum(0)
        split += [((turn - command[:, 2])[keep] ** 2).sum(), ((measured[:, 2] - turn)[keep] ** 2).sum()]
        steps += int(keep.sum())
    rmse = np.sqrt(sq / steps) if steps else np.full(3, np.nan)
    parts = np.sqrt(split / steps) if steps else np.full(2, np.nan)

    def num(v: float) -> float | None:
        return round(float(v), 4) if np.isfinite(v) else None

    return {"steps": steps, "settle_s": SETTLE_S, "vx_rmse_mps": num(rmse[0]), "vy_rmse_mps": num(rmse[1]),
            "yaw_rate_rmse_radps": num(rmse[2]),
            "yaw_rate_split": {"turn_rmse_radps": num(parts[0]), "stride_rmse_radps": num(parts[1]),
                               "window_s": YAW_SPLIT_S}}


def _colour(fraction: float) -> tuple[int, int, int]:
    """0 (light) .. 1 (dark blue) for seconds / the colour scale's top."""
    t = min(max(fraction, 0.0), 1.0)
    stops = [(0.0, (247, 251, 255)), (0.5, (107, 174, 214)), (1.0, (8, 48, 107))]
    for (t0, c0), (t1, c1) in zip(stops, stops[1:]):
        if t <= t1:
            a = (t - t0) / (t1 - t0)
            return tuple(int(round(x + a * (y - x))) for x, y in zip(c0, c1))  # type: ignore[return-value]
    return stops[-1][1]


def coverage_png(report: dict[str, Any], path: Path, title: str = "") -> Path:
    """A heatmap of ``report``: one vx x yaw-rate panel per vy slice, seconds of tracked motion in each cell (number
    written in it), a red frame around a feasible cell under ``min_seconds``, hatched grey where not feasible."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=12)
    small = ImageFont.load_default(size=10)
    centres = report["grid"]["centres"]
    vx, vy, yaw = centres["vx"], centres["vy"], centres["yaw_rate"]
    seconds = np.asarray(report["seconds_per_cell"], dtype=np.float64)
    feasible = np.asarray(report["feasible_per_cell"], dtype=bool)
    top = max(float(np.percentile(seconds[feasible], 95)) if feasible.any() else 0.0, 2.0 * report["min_seconds"])
    cw, ch, left, head, gap = 40, 26, 56, 84, 26
    panel_w = left + len(yaw) * cw
    width = max(len(vy) * (panel_w + gap) + 20, 520)
    height = head + len(vx) * ch + 120
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    draw.text((10, 8), title or "seconds of tracked motion per command cell", fill="black", font=font)
    draw.text((10, 26), f"covered (>= {report['min_seconds']:g} s): {report['covered_cells']} of "
                        f"{report['feasible_cells']} feasible cells ({100 * report['covered_fraction']:.0f} %), "
                        f"{len(report['clips'])} clips, {report['seconds_total']:.0f} s", fill="black", font=font)
    for j, vy_c in enumerate(vy):
        x0 = 10 + j * (panel_w + gap)
        draw.text((x0 + left, head - 34), f"vy {vy_c:+.2f} m/s", fill="black", font=font)
        for k, yaw_c in enumerate(yaw):
            draw.text((x0 + left + k * cw + 4, head - 16), f"{yaw_c:+.1f}", fill="black", font=small)
        for i, vx_c in enumerate(vx):
            y0 = head + (len(vx) - 1 - i) * ch  # vx grows upward
            draw.text((x0 + 2, y0 + 7), f"{vx_c:+.1f}", fill="black", font=small)
            for k in range(len(yaw)):
                box = (x0 + left + k * cw, y0, x0 + left + (k + 1) * cw - 2, y0 + ch - 2)
                if not feasible[i, j, k]:
                    draw.rectangle(box, fill=(215, 215, 215))
                    draw.line((box[0], box[3], box[2], box[1]), fill=(170, 170, 170))
                    continue
                value = float(seconds[i, j, k])
                draw.rectangle(box, fill=_colour(value / top))
                draw.text((box[0] + 4, box[1] + 6), f"{value:.1f}", font=small,
                          fill="white" if value / top > 0.55 else "black")
                if value < report["min_seconds"]:
                    draw.rectangle(box, outline=(215, 25, 28), width=2)
    y = head + len(vx) * ch + 10
    draw.text((10, y), "rows: vx (m/s); columns: yaw rate (rad/s); one panel per vy", fill="black", font=small)
    y += 20
    for n in range(200):
        draw.line((60 + n, y, 60 + n, y + 12), fill=_colour(n / 199))
    for value in (0.0, 0.5, 1.0):
        draw.text((56 + int(value * 199), y + 15), f"{value * top:.1f} s", fill="black", font=small)
    draw.text((10, y + 34), f"red frame: under {report['min_seconds']:g} s; grey: outside the feasible box",
              fill="black", font=small)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.png")
    image.save(tmp)
    tmp.replace(path)
    return path


# ----------------------------------------------------------------------------- the library
@dataclass
class LibraryConfig:
    """`akd library`'s options (docs/library.md)."""

    robot: str
    out: Path
    clips: int = 40
    seconds: float = 10.0
    vx: tuple[float, float] | None = None
    vy: tuple[float, float] | None = None
    yaw_rate: tuple[float, float] | None = None
    gaits: list[str] | None = None
    cell: tuple[float, float, float] = CELL
    backend: str = "local"
    address: str | None = None
    max_parallel: int = 1
    seed: int = 0
    fps: float = 50.0
    package_paths: list[str] = field(default_factory=list)
    feet: list[str] | None = None
    iterations: int | None = None
    fast: bool = False
    yaw_rate_weight: float = LIBRARY_YAW_RATE_WEIGHT  # the tracking cost's yaw-rate term for every clip
    device: str | None = None
    exports: tuple[str, ...] = DEFAULT_EXPORTS
    quality: QualityGates = field(default_factory=QualityGates)
    include_rejected: bool = False
    plan_only: bool = False


def _plan_inputs(cfg: LibraryConfig) -> dict[str, Any]:
    """What the plan depends on besides the robot's speeds (a re-run with the same inputs reuses plan.json)."""
    return {"robot": cfg.robot, "clips": cfg.clips, "seconds": cfg.seconds, "vx": cfg.vx, "vy": cfg.vy,
            "yaw_rate": cfg.yaw_rate, "gaits": cfg.gaits, "cell": list(cfg.cell), "seed": cfg.seed, "fps": cfg.fps,
            "feet": cfg.feet}


def _check_config(cfg: LibraryConfig) -> None:
    if cfg.backend not in ("local", "ray"):
        raise ConfigError(f"--backend {cfg.backend!r}: choose local or ray")
    if cfg.max_parallel < 1:
        raise ConfigError(f"--max-parallel {cfg.max_parallel}: give at least 1")
    if not math.isfinite(cfg.fps) or cfg.fps <= 0:
        raise ConfigError(f"--fps {cfg.fps}: give a positive frame rate")
    unknown = [f for f in cfg.exports if f not in FORMATS]
    if unknown:
        raise ConfigError(f"--export {','.join(cfg.exports)}: unknown format(s) {unknown}; choose from "
                          f"{', '.join(FORMATS)}")
    if cfg.clips < 1:
        raise ConfigError(f"--clips {cfg.clips}: give at least 1 clip")
    if not math.isfinite(cfg.seconds) or cfg.seconds < MIN_SECONDS:
        raise ConfigError(f"--seconds {cfg.seconds:g}: a clip needs at least {MIN_SECONDS:g} s (a {START_S:g} s stand "
                          f"and one cell held {HOLD_S:g} s); give --seconds {MIN_SECONDS:g} or more (10 is usual)")


def make_plan(cfg: LibraryConfig, echo: Callable[[str], None] = print) -> LibraryPlan:
    """The library's plan: the robot's speeds from DIR/plan.json when it was planned with the same inputs (no
    re-probing on a resume), else from the gait library."""
    path = Path(cfg.out) / "plan.json"
    speeds = None
    if path.is_file():
        try:
            saved = json.loads(path.read_text())
        except json.JSONDecodeError:
            saved = {}
        inputs, current = saved.get("inputs", {}), json.loads(json.dumps(_plan_inputs(cfg)))  # lists, as saved
        if all(inputs.get(k) == current[k] for k in ("robot", "gaits", "feet", "yaw_rate", "fps")) and \
                saved.get("speeds"):
            s = saved["speeds"]
            speeds = RobotSpeeds(gaits=tuple((g, float(v)) for g, v in s["gaits"]), default_gait=s["default_gait"],
                                 stride_s=float(s["stride_s"]), legs=int(s["legs"]),
                                 turning=None if s.get("turning") is None else tuple(s["turning"]))
    if speeds is None:
        yaw = DEFAULT_YAW_RATE if cfg.yaw_rate is None else max(abs(cfg.yaw_rate[0]), abs(cfg.yaw_rate[1]))
        speeds = robot_speeds(cfg.robot, cfg.package_paths, cfg.feet, cfg.gaits, cfg.fps, yaw, echo)
    box = default_box(speeds, cfg.vx, cfg.vy, cfg.yaw_rate)
    plan = plan_library(CommandGrid(box, cfg.cell), cfg.clips, cfg.seconds, cfg.seed, speeds.stride_s)
    plan.notes.insert(0, f"gaits {', '.join(f'{g} up to {v:.2f} m/s' for g, v in speeds.gaits)}"
                         + (f" ({speeds.turning[1]:.2f} m/s turning at {speeds.turning[0]:.2f} rad/s)"
                            if speeds.turning else "") + f"; stride {speeds.stride_s:.2f} s")
    plan.speeds = speeds
    return plan


def write_plan(cfg: LibraryConfig, plan: LibraryPlan) -> dict[str, Path]:
    """DIR/commands/<clip>.csv and DIR/plan.json. A clip whose run already exists must keep its timeline: a changed
    one is a ConfigError naming the clip (another --out, or delete that run to redo it)."""
    out = Path(cfg.out)
    folder = out / "commands"
    paths = {}
    for clip in plan.clips:
        path = folder / f"{clip.name}.csv"
        text = clip.csv_text()
        run = out / "runs" / clip.name
        if path.is_file() and path.read_text() != text and (run / "manifest.json").exists():
            raise ConfigError(f"{run} was run from another plan ({path} differs from the new plan for "
                              f"{clip.name}: options changed since). Use another --out, re-run with the earlier "
                              f"options, or delete {run} to redo that clip")
        paths[clip.name] = path
    folder.mkdir(parents=True, exist_ok=True)  # DIR too: only once the plan is made (no folder on a bad option)
    for clip in plan.clips:
        if not paths[clip.name].is_file() or paths[clip.name].read_text() != clip.csv_text():
            write_text_atomic(paths[clip.name], clip.csv_text())
        read_commands(paths[clip.name])  # the pipeline will read it: a plan it cannot read fails here
    write_json_atomic(out / "plan.json", {"inputs": _plan_inputs(cfg),
                                          "speeds": None if plan.speeds is None else asdict(plan.speeds),
                                          **plan.to_dict()})
    return paths


def library_jobs(cfg: LibraryConfig, plan: LibraryPlan, paths: dict[str, Path]) -> tuple[list[Job], Sweep]:
    """One batch job per clip (DIR/runs/<clip>), and the sweep :func:`akd_core.batch.aggregate` judges them by."""
    out = Path(cfg.out)
    sweep = Sweep(out=out, robots=[cfg.robot], prompts=[PROMPT], seeds=[cfg.seed],
                  package_paths=list(cfg.package_paths), source="gait", duration=float(cfg.seconds),
                  fps=float(cfg.fps), export=list(cfg.exports),
                  iterations=cfg.iterations, fast=cfg.fast, device=cfg.device, feet=cfg.feet, quality=cfg.quality,
                  yaw_rate_weight=cfg.yaw_rate_weight)
    common = {k: v for k, v in asdict(sweep).items() if k not in ("robots", "prompts", "seeds", "out", "quality")}
    jobs = [Job(name=clip.name, run_dir=str(out / "runs" / clip.name), robot=cfg.robot, prompt=PROMPT,
                seed=cfg.seed + n, sweep=common, commands=str(paths[clip.name].resolve()), keep_failed=True)
            for n, clip in enumerate(plan.clips)]
    return jobs, sweep


def _lowered(run_dir: Path) -> list[dict[str, Any]]:
    """The segments of a clip that the gait library played slower than planned (asked vs played command)."""
    config = RunDir(run_dir).stage("gait").get("config") or {}
    out = []
    for seg in config.get("segments") or []:
        asked, played = seg.get("asked") or {}, seg.get("command") or {}
        keys = ("vx_mps", "vy_mps", "yaw_rate_radps")
        if any(abs(float(asked.get(k, 0.0)) - float(played.get(k, 0.0))) > 1e-3 for k in keys):
            out.append({"start_s": seg.get("start_s"), "asked": [asked.get(k) for k in keys],
                        "played": [played.get(k) for k in keys], "limited_by": seg.get("speed_limited_by")})
    return out


def _clip_seconds(run_dir: Path) -> float | None:
    """Seconds the clip's stages took (gait, track, crosscheck, preview), from its manifest."""
    try:
        stages = RunDir(run_dir).manifest().get("stages") or {}
    except AKDError:
        return None
    values = [float((stages.get(k) or {}).get("seconds") or 0.0) for k in ("gait", "track", "crosscheck", "preview")]
    return sum(values) if any(values) else None


def run_library(cfg: LibraryConfig, progress: bool = True, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """`akd library` (module docstring): plan, run, curate, export, report. Returns the summary (also under the
    "library" key of DIR/summary.json)."""
    _check_config(cfg)
    out = Path(cfg.out)
    start = time.perf_counter()
    plan = make_plan(cfg, echo)
    paths = write_plan(cfg, plan)
    for note in plan.notes:
        echo(f"library: {note}")
    facts = plan.to_dict()
    echo(f"library: {len(plan.clips)} clips of {cfg.seconds:g} s over {facts['cells_planned']} of "
         f"{facts['feasible_cells']} feasible cells; {facts['neighbour_pairs_planned']} of "
         f"{facts['neighbour_pairs']} neighbouring-cell transitions; timelines in {out / 'commands'}")
    if cfg.plan_only:
        return {"plan": str(out / "plan.json"), "clips": len(plan.clips), "planned_only": True}
    jobs, sweep = library_jobs(cfg, plan, paths)
    todo = [j for j in jobs if not job_done(j)]
    pending = {j.name for j in todo}
    results: list[dict[str, Any]] = [{"name": j.name, "run_dir": j.run_dir, "robot": j.robot, "prompt": j.prompt,
                                      "seed": j.seed, "status": "skipped", "seconds": 0.0}
                                     for j in jobs if j.name not in pending]
    if results:
        echo(f"library: {len(results)} clips finished already (kept as they are), {len(todo)} to run")
    try:
        with tqdm(total=len(jobs), initial=len(results), desc="library", unit="clip", disable=not progress) as bar:
            execute_jobs(todo, results, cfg.backend, cfg.address, cfg.max_parallel, 1.0, 0.0, bar)
    except KeyboardInterrupt:
        finished = {r["name"] for r in results}
        results += [{"name": j.name, "run_dir": j.run_dir, "robot": j.robot, "prompt": j.prompt, "seed": j.seed,
                     "status": "interrupted", "error": "the library was interrupted before this clip finished"}
                    for j in todo if j.name not in finished]
        aggregate(sweep, results, cfg.include_rejected, export=False,
                  executed=sum(r["status"] not in ("skipped", "interrupted") for r in results))
        raise
    summary = aggregate(sweep, results, cfg.include_rejected, executed=len(todo))
    kept = [r for r in summary["runs"] if r["included"]]
    states, lowered, followed = {}, {}, []
    for row in kept:
        run_dir = Path(row["run_dir"])
        with np.load(run_dir / TRACKED) as tracked:
            dt = float(tracked["dt"])
            states[row["name"]] = (heading_velocities(tracked["root_lin_vel"], tracked["root_quat"], dt), dt)
            command = commanded_velocity(RunDir(run_dir).manifest(), np.arange(len(tracked["root_quat"])) * dt)
            if command is not None:
                followed.append((heading_velocity(tracked["root_lin_vel"], tracked["root_quat"],
                                                  tracked["root_ang_vel"]), command, dt))
        lowered_here = _lowered(run_dir)
        if lowered_here:
            lowered[row["name"]] = lowered_here
    report = coverage_report(plan, states, lowered)
    write_json_atomic(out / "coverage.json", report)
    coverage_png(report, out / "coverage.png", f"{robot_label(cfg.robot)}: seconds of tracked motion per command "
                                               f"cell (vx x yaw rate, one panel per vy)")
    per_clip = [s for s in (_clip_seconds(Path(j.run_dir)) for j in jobs) if s is not None]
    ran = [r for r in results if r["status"] not in ("skipped", "interrupted")]
    excluded = [r for r in summary["runs"] if not r["included"]]
    library = {
        "robot": cfg.robot, "clips": len(jobs), "clips_run_now": len(ran),
        "clips_kept": len(kept), "clips_excluded": len(excluded),
        "clips_failed": sum(r["status"] == "failed" for r in summary["runs"]),
        "clips_failed_tracking": sum(any("tracking" in reason for reason in r["reasons"]) for r in excluded),
        "covered_fraction": report["covered_fraction"], "covered_cells": report["covered_cells"],
        "feasible_cells": report["feasible_cells"], "seconds_per_clip": cfg.seconds,
        "compute_seconds_per_clip": round(float(np.mean(per_clip)), 2) if per_clip else None,
        "wall_seconds": round(time.perf_counter() - start, 1),
        "datasets": summary["datasets"], "coverage": str(out / "coverage.json"),
        "coverage_png": str(out / "coverage.png"), "plan": str(out / "plan.json"),
        "lowered_clips": len(lowered), "command_tracking": command_tracking(followed),
    }
    summary["library"] = library
    summary["exit_code"] = 0 if kept and summary["in_dataset"] else 1
    write_json_atomic(out / "summary.json", summary)
    return summary


def library_table(summary: dict[str, Any]) -> str:
    """The lines `akd library` prints at the end."""
    lib = summary["library"]
    lines = [f"library {summary['sweep_out']}: {lib['clips']} clips ({lib['clips_run_now']} run now), "
             f"{lib['clips_kept']} kept, {lib['clips_excluded']} left out ({lib['clips_failed']} failed to run, "
             f"{lib['clips_failed_tracking']} failed tracking)",
             f"coverage: {lib['covered_cells']} of {lib['feasible_cells']} feasible cells hold >= {MIN_CELL_S:g} s of "
             f"tracked motion ({100 * lib['covered_fraction']:.0f} %): {lib['coverage']}, {lib['coverage_png']}",
             "time per clip: " + (f"{lib['compute_seconds_per_clip']:.1f} s of stage time per "
                                  f"{lib['seconds_per_clip']:g} s clip" if lib["compute_seconds_per_clip"] is not None
                                  else "-") + f"; this invocation {lib['wall_seconds']:.0f} s"]
    followed = lib.get("command_tracking") or {}
    if followed.get("steps"):
        split = followed["yaw_rate_split"]
        lines.append(f"the clips' own command tracking (the floor under a policy imitating them; "
                     f"{followed['settle_s']:g} s after each change left out): RMSE vx "
                     f"{followed['vx_rmse_mps']:.3f} m/s, vy {followed['vy_rmse_mps']:.3f} m/s, yaw rate "
                     f"{followed['yaw_rate_rmse_radps']:.3f} rad/s (turn {split['turn_rmse_radps']:.3f}, within "
                     f"strides {split['stride_rmse_radps']:.3f})")
    if lib["lowered_clips"]:
        lines.append(f"{lib['lowered_clips']} clips have commands the gait library played slower than planned "
                     "(joint limits): coverage.json 'lowered'")
    left_out = [r for r in summary["runs"] if not r["included"]]
    for row in left_out[:10]:
        lines.append(f"  left out {row['name']}: {'; '.join(row['reasons'])[:200]}")
    if len(left_out) > 10:
        lines.append(f"  ... and {len(left_out) - 10} more (summary.json)")
    if summary.get("export_error"):
        lines.append(f"the dataset could not be written: {summary['export_error']}")
    if summary["datasets"]:
        lines.append("datasets: " + ", ".join(f"{k}: {v[0] if len(v) == 1 else Path(v[0]).parent if v else '-'}"
                                              for k, v in summary["datasets"].items()))
    lines.append(f"summary: {Path(summary['sweep_out']) / 'summary.json'}")
    return "\n".join(lines)


__all__ = ["CommandBox", "CommandGrid", "CommandRow", "PlannedClip", "LibraryPlan", "LibraryConfig", "RobotSpeeds",
           "parse_range", "plan_library", "transition_s", "robot_speeds", "default_box", "heading_velocities",
           "coverage_seconds", "coverage_report", "coverage_png", "make_plan", "write_plan", "library_jobs",
           "run_library", "library_table", "steady_steps", "command_tracking"]
