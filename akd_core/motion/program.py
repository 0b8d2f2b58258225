"""Motion programs: a clip that changes its command (start, stop, speed, gait, turn) from a prompt or a timeline.

A :class:`MotionProgram` is a list of :class:`Segment`\\ s, each a steady command: a gait pattern at a speed, direction
and yaw rate, or a stand. It comes from a prompt that describes a sequence (:func:`program_from_prompt`: "a dog
walks, then trots forward quickly, then stops") or from a command timeline file (:func:`program_from_commands`,
CSV or YAML with ``t,vx,vy,yaw_rate[,gait,height]``). :func:`generate_program` makes one reference clip of it:

1. **Segments are resolved one by one** with the gait library (:func:`akd_core.motion.gait.generate_gait_result` on
   a short steady clip): the speed, cadence, duty factor and step height each gait can have on this robot within its
   velocity and effort limits, lowered and noted where the asked command needs more.
2. **Transitions.** The root velocity (heading frame) and yaw rate ramp from one segment's command to the next by a
   smoothstep whose length keeps the peak acceleration within ``ACCEL_MAX`` (m/s^2) and ``YAW_ACCEL_MAX`` (rad/s^2),
   at least ``RAMP_S``. A gait change blends frequency, duty factor, step height, bounce and the legs' phase offsets
   over one stride of the slower gait (offsets aligned first by the common shift that moves them least): the gait
   clock is the integral of the frequency, so phases never jump.
3. **Footfalls.** Leg k is in stance while ``frac(clock + offset_k) < duty``, read on a fine grid. Each stance holds
   its foot at the Raibert-like foothold (the body pose at mid-stance composed with the leg's nominal position);
   swings follow the gait library's Hermite curve from one foothold to the next. In a stand the feet stop stepping:
   a swing whose foothold would move less than ``STAND_TOLERANCE`` leg lengths is skipped, so every foot comes down
   within a stride of the body coming to rest and stays down.
4. The joint angles come from the gait library's solver (:func:`akd_core.motion.gait.solve_clip`), with the body
   made dynamically consistent as for single gaits (flight phases carried, biped walks balanced by preview control).

Human-like bipeds (:func:`akd_core.motion.humanoid.humanoid_body`) walk with :mod:`akd_core.motion.humanoid` along
the program's body path; their speed and turn changes and stops follow the program, and wherever the body is at rest
(a stand, the end of a stop) they stand with both feet flat and the arms hanging.

Segment lengths (the clip's length is their sum unless a duration is given): a moving segment lasts its ramp plus
``MOVE_STRIDES`` strides; a stop its ramp plus one stride plus ``STOP_HOLD_S`` of standing; a stand ``STAND_S``.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from akd_core.io.errors import ConfigError
from akd_core.model.legs import Leg, find_legs, leg_length
from akd_core.model.robot import Robot
from akd_core.motion.clip import Motion
from akd_core.motion.gait import (
    PATTERNS,
    PATTERNS_BY_LEGS,
    GaitSpec,
    Stance,
    _bounce_profile,
    _check_spec,
    froude_speed,
    generate_gait_result,
    on_terrain,
    pattern_key,
    solve_clip,
    stance_pose,
)
from akd_core.motion.humanoid import SpeedLimit
from akd_core.motion.prompt import (
    DEFAULT_PATTERN,
    DIRECTION_WORDS,
    GAIT_WORDS,
    SPEED_WORDS,
    SUBJECT_WORDS,
    _direction,
    _speed_level,
    _stem,
)

log = logging.getLogger("akd.program")

GRAVITY = 9.81
RAMP_S = 0.5  # shortest velocity ramp between two commands (the single-gait clip's ramp from rest)
ACCEL_MAX = 0.2 * GRAVITY  # m/s^2, peak root acceleration of a transition (horizontal, heading frame)
YAW_ACCEL_MAX = 2.0  # rad/s^2, peak yaw acceleration of a transition
SMOOTHSTEP_PEAK = 1.5  # a smoothstep ramp's peak slope over its mean: ramp length = 1.5 x change / peak rate
MOVE_STRIDES = 2  # a moving segment without a length: its ramp plus this many strides
STOP_HOLD_S = 1.0  # a stop without a length: its ramp, one stride to bring the feet down, then this long standing
STAND_S = 2.0  # a stand without a length
START_STAND_S = 1.0  # "starts ...": the stand before the first moving segment
COMMAND_HOLD_S = 3.0  # the last row of a command timeline holds this long (or until the duration)
STAND_TOLERANCE = 0.05  # leg lengths: in a stand, a foot this close to its next foothold stays down
STAND_YAW_TOLERANCE = 0.08  # rad, the same for the foot's heading
GRID_DT = 0.002  # s, the grid the footfalls are read on
PREROLL_S = 2.5  # s of the program's first command before the clip (the ZMP preview of biped walks needs 2)
POSTROLL_S = 2.0  # s of its last command after it
MIN_RUN = 0.35  # a swing or stance shorter than this fraction of its gait's own (phase blending) is dropped
RESOLVE_S = 2.5  # s, the steady clip each moving segment is resolved on
MAX_SEGMENTS = 64
# a transition may use this much more of the velocity limits than the steady gaits do (never more than the limits):
# the tracker's headroom is shorter there for a moment
TRANSITION_VELOCITY_SLACK = 1.25

STOP_WORDS = {"stop", "stops", "stopping", "stopped", "halt", "halts", "halting", "halted"}
STAND_WORDS = {"stand", "stands", "standing", "rest", "rests", "resting", "wait", "waits", "waiting", "pause",
               "pauses", "still", "idle", "freeze", "freezes"}
START_WORDS = {"start", "starts", "starting", "begin", "begins", "beginning", "sets", "set", "off"}
FASTER_WORDS = {"speeds", "speed", "accelerates", "accelerate", "faster", "quicker", "hurries"}
SLOWER_WORDS = {"slows", "slow", "decelerates", "slower"}
BACK_UP = re.compile(r"\bbacks? up\b|\bbacking up\b|\bbacks? off\b|\breverses?\b|\breversing\b")
NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "ten": 10, "half": 0.5, "a": 1}
DURATION = re.compile(r"(?:\bfor\s+)?(\d+(?:\.\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|half an?|an?)"
                      r"\s*(s|sec|secs|seconds?|minutes?|min)\b")
SPLIT = re.compile(r"\s*(?:,|;|\.\s|\bthen\b|\bafterwards\b|\bafter that\b|\bbefore\b|\bfinally\b)\s*")
SHIFT_WORDS = ("up", "down", "to", "into", "a", "an")


@dataclass
class Segment:
    """One steady command of a program.

    kind "move" (a gait pattern at ``speed`` m/s along ``direction`` rad in the heading frame, turning at
    ``turn_rate`` rad/s) or "stand"; ``duration`` s (None: the default for its kind, see the module docstring);
    ``stop``: a stand that ends a movement (its default length holds the ramp down, a stride and STOP_HOLD_S);
    ``height`` m: body height (None: the robot's stance height); ``text``: the words it came from; ``level``: its
    speed level in the pattern's Froude range (None: explicit speed); ``explicit_pattern``: the gait was named."""

    kind: str = "move"
    pattern: str | None = None
    speed: float = 0.0
    direction: float = 0.0
    turn_rate: float = 0.0
    duration: float | None = None
    stop: bool = False
    height: float | None = None
    text: str = ""
    level: float | None = 0.5
    explicit_pattern: bool = True

    @property
    def command(self) -> np.ndarray:
        """(vx, vy, yaw rate) in the heading frame (m/s, m/s, rad/s)."""
        return np.array([self.speed * math.cos(self.direction), self.speed * math.sin(self.direction),
                         self.turn_rate])

    def describe(self) -> str:
        if self.kind == "stand":
            return "stop" if self.stop else "stand"
        turn = f", turning {'left' if self.turn_rate > 0 else 'right'} {abs(self.turn_rate):.2f} rad/s" \
            if self.turn_rate else ""
        way = "" if abs(self.direction) < 1e-6 else f" at {math.degrees(self.direction):.0f} deg"
        return f"{self.pattern} {self.speed:.2f} m/s{way}{turn}"


@dataclass
class MotionProgram:
    """Segments in order, how they were read (``notes``) and where from (``source``: "prompt" or a file)."""

    segments: list[Segment]
    notes: list[str] = field(default_factory=list)
    source: str = "prompt"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "segments": [dataclasses.asdict(s) for s in self.segments]}


# ----------------------------------------------------------------------------- prompts
def split_prompt(prompt: str) -> list[str]:
    """The pieces of a prompt that describes a sequence ("walks, then trots, then stops" -> 3 pieces)."""
    text = " " + str(prompt).lower().strip().rstrip(".!") + " "
    text = re.sub(r"\band then\b|\band finally\b|\band after that\b", " then ", text)
    # "X and stops": a stop joined by "and" is its own piece
    text = re.sub(r"\band\s+(?=(?:then\s+)?(?:comes? to a )?(?:stop|stops|halt|halts|stand|stands)\b)", " then ", text)
    pieces = [p.strip() for p in SPLIT.split(text)]
    return [p for p in pieces if p and re.search(r"[a-z0-9]", p)]


def is_program_prompt(prompt: str) -> bool:
    """Whether ``prompt`` asks for more than one steady command: several pieces, a stop or stand, or a length."""
    pieces = split_prompt(prompt)
    if len(pieces) > 1:
        return True
    words = set(re.findall(r"[a-z]+", str(prompt).lower()))
    return bool(words & (STOP_WORDS | {"stand", "stands", "standing", "starts", "start"})) or \
        bool(DURATION.search(str(prompt).lower()))


def _duration(text: str) -> tuple[float | None, str]:
    """A segment length said in ``text`` ("for 3 seconds", "2.5 s", "half a minute") and the text without it."""
    match = DURATION.search(text)
    if not match:
        return None, text
    raw, unit = match.group(1), match.group(2)
    value = float(raw) if re.fullmatch(r"\d+(?:\.\d+)?", raw) else NUMBER_WORDS.get(raw.split()[0], 1.0)
    if unit.startswith("min"):
        value *= 60.0
    return value, (text[:match.start()] + " " + text[match.end():])


def program_from_prompt(prompt: str, robot: Robot, legs: Sequence[Leg] | None = None) -> MotionProgram:
    """The segments a prompt describes (module docstring). Notes say how it was split and read; a piece without a
    gait word keeps the previous one's gait (and its speed, unless it says another); the first piece sets the gait
    for stands before it."""
    if prompt is None or not str(prompt).strip():
        raise ConfigError("the prompt is empty; describe the motion, e.g. --prompt 'a dog walks, then trots, "
                          "then stops'")
    legs = list(find_legs(robot) if legs is None else legs)
    num_legs = len(legs)
    length = leg_length(robot, legs)
    vocabulary = GAIT_WORDS.get(num_legs, {"wave": "wave", "walk": "wave", "crawl": "wave"})
    pieces = split_prompt(prompt)
    notes = [f"program: {len(pieces)} piece(s) of {prompt!r}: {pieces}"]
    segments: list[Segment] = []
    previous: Segment | None = None
    for n, piece in enumerate(pieces):
        seconds, text = _duration(piece)
        words = re.findall(r"[a-z/]+|\d+(?:\.\d+)?", text)
        stems = [_stem(w) for w in words]
        pattern, gait_word = None, None
        for word, stem in zip(words, stems):
            for candidate in (word, stem, stem + "e"):
                if candidate in vocabulary and pattern is None and candidate not in ("step",):
                    pattern, gait_word = vocabulary[candidate], word
        set_words = set(words)
        stopping = bool(set_words & STOP_WORDS) or "comes to a stop" in text
        standing = (bool(set_words & STAND_WORDS) and pattern is None) or stopping
        starting = bool(set_words & START_WORDS) and n == 0 and not standing
        if standing:
            segment = Segment(kind="stand", pattern=None, duration=seconds, stop=stopping and previous is not None
                              and previous.kind == "move", text=piece, level=None, explicit_pattern=False)
            notes.append(f"segment {len(segments) + 1} {piece!r}: {'stop' if segment.stop else 'stand'}"
                         + (f" for {seconds:g} s" if seconds else ""))
            segments.append(segment)
            previous = segment
            continue
        if starting:
            segments.append(Segment(kind="stand", pattern=None, duration=START_STAND_S, text="(start)", level=None,
                                    explicit_pattern=False))
            notes.append(f"segment {len(segments)}: stand {START_STAND_S:g} s before the start")
        moving_before = next((s for s in reversed(segments) if s.kind == "move"), None)
        explicit = pattern is not None
        if pattern is None:
            pattern = moving_before.pattern if moving_before else DEFAULT_PATTERN.get(num_legs, "wave")
        key = pattern_key(pattern, num_legs)
        has_speed = bool(set_words & set(SPEED_WORDS)) or bool(re.search(r"\b(full|top) speed\b", text))
        hint = 0.15 if gait_word in ("jog",) else 1.0 if gait_word in ("sprint", "race", "dash") else None
        if has_speed or hint is not None:
            level = _speed_level(words, [], hint)
        elif moving_before is not None and not explicit and moving_before.level is not None:
            level = moving_before.level
        else:
            level = 0.5
        if set_words & FASTER_WORDS and not has_speed and not explicit:
            level = min((moving_before.level if moving_before and moving_before.level is not None else 0.5) + 0.35,
                        1.0)
        if set_words & SLOWER_WORDS and not has_speed and not explicit:
            level = max((moving_before.level if moving_before and moving_before.level is not None else 0.5) - 0.35,
                        0.0)
        lo, hi = PATTERNS[key].froude
        speed = froude_speed(lo * (hi / lo) ** level, length)
        explicit_speed = re.search(r"(\d+(?:\.\d+)?)\s*(?:m/s|mps|meters? per second|metres? per second)", text)
        if explicit_speed:
            speed, level = float(explicit_speed.group(1)), None
        own: list[str] = []
        direction, turn_rate, speed = _direction(words, text, speed, length, own)
        if BACK_UP.search(text):
            direction = math.pi
        segment = Segment(kind="move", pattern=pattern, speed=float(speed), direction=float(direction),
                          turn_rate=float(turn_rate), duration=seconds, text=piece, level=level,
                          explicit_pattern=explicit)
        notes.append(f"segment {len(segments) + 1} {piece!r}: {segment.describe()}"
                     + ("" if explicit else f" (gait {pattern!r} kept)") + (f" for {seconds:g} s" if seconds else ""))
        known = (SUBJECT_WORDS | DIRECTION_WORDS | set(SPEED_WORDS) | STOP_WORDS | STAND_WORDS | START_WORDS
                 | FASTER_WORDS | SLOWER_WORDS | set(SHIFT_WORDS) | {"backs", "back", "comes", "reverse"})
        unknown = sorted({w for w, s in zip(words, stems) if not re.fullmatch(r"\d+(?:\.\d+)?", w)
                          and w not in known and w not in vocabulary and s not in vocabulary
                          and s + "e" not in vocabulary})
        if unknown:
            notes.append(f"segment {len(segments) + 1}: ignored words {unknown}")
        segments.append(segment)
        previous = segment
    if not any(s.kind == "move" for s in segments):
        notes.append("program: no moving segment; the robot stands")
    if len(segments) > MAX_SEGMENTS:
        raise ConfigError(f"the prompt describes {len(segments)} segments; at most {MAX_SEGMENTS} are allowed")
    return MotionProgram(segments=segments, notes=notes, source="prompt")


# ----------------------------------------------------------------------------- command timelines
COMMAND_FIELDS = ("t", "vx", "vy", "yaw_rate")
OPTIONAL_FIELDS = ("gait", "height")


def read_commands(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a command timeline file (CSV with a header, or YAML: a list of mappings or ``commands:``), as
    dicts with t, vx, vy, yaw_rate and optionally gait, height; ConfigError naming the file, row and field."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--commands {path}: no such file; give a CSV (header t,vx,vy,yaw_rate[,gait,height]) or "
                          "YAML timeline")
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"--commands {path}: not valid YAML ({exc})") from exc
        if isinstance(data, dict):
            data = data.get("commands")
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise ConfigError(f"--commands {path}: expected a list of mappings with fields t, vx, vy, yaw_rate "
                              "(optionally gait, height), or a mapping with such a list under 'commands'")
        raw_rows = [{str(k).strip().lower(): v for k, v in row.items()} for row in data]
        first_row = 1
    else:
        with path.open(newline="") as handle:
            lines = [line for line in handle if line.strip() and not line.lstrip().startswith("#")]
        reader = csv.DictReader(lines)
        if reader.fieldnames is None:
            raise ConfigError(f"--commands {path}: the file is empty; the first line is the header "
                              "t,vx,vy,yaw_rate[,gait,height]")
        header = [str(h).strip().lower() for h in reader.fieldnames]
        missing = [f for f in COMMAND_FIELDS if f not in header]
        unknown = [f for f in header if f not in COMMAND_FIELDS + OPTIONAL_FIELDS]
        if missing or unknown:
            raise ConfigError(f"--commands {path}: header {header} "
                              + (f"lacks {missing}" if missing else f"has unknown columns {unknown}")
                              + "; the header is t,vx,vy,yaw_rate[,gait,height] (s, m/s, m/s, rad/s, pattern, m)")
        raw_rows = [{str(k).strip().lower(): v for k, v in row.items()} for row in reader]
        first_row = 2  # the file's line numbers: the header is line 1
    if not raw_rows:
        raise ConfigError(f"--commands {path}: no rows; add at least one command t,vx,vy,yaw_rate")
    rows = []
    for n, raw in enumerate(raw_rows):
        where = f"--commands {path}, row {n + first_row}"
        missing = [f for f in COMMAND_FIELDS if raw.get(f) in (None, "")]
        if missing:
            raise ConfigError(f"{where}: field(s) {missing} are empty; every row needs t, vx, vy, yaw_rate")
        row: dict[str, Any] = {}
        for name in COMMAND_FIELDS + ("height",):
            if raw.get(name) in (None, ""):
                continue
            try:
                row[name] = float(raw[name])
            except (TypeError, ValueError):
                raise ConfigError(f"{where}: field {name!r} is {raw[name]!r}, not a number") from None
            if not math.isfinite(row[name]):
                raise ConfigError(f"{where}: field {name!r} is {raw[name]!r}; give a finite number")
        gait = raw.get("gait")
        if gait not in (None, ""):
            row["gait"] = str(gait).strip().lower()
        if n == 0 and abs(row["t"]) > 1e-9:
            raise ConfigError(f"{where}: field 't' is {row['t']:g}; the first command starts at t = 0")
        if n > 0 and row["t"] <= rows[-1]["t"]:
            raise ConfigError(f"{where}: field 't' is {row['t']:g}, not after the previous row's {rows[-1]['t']:g}; "
                              "times must increase")
        if "height" in row and row["height"] <= 0:
            raise ConfigError(f"{where}: field 'height' is {row['height']:g}; give the body height in metres (> 0) "
                              "or leave it empty")
        row["_where"] = where
        rows.append(row)
    return rows


def program_from_commands(path: str | Path, robot: Robot, legs: Sequence[Leg] | None = None,
                          prompt: str | None = None) -> MotionProgram:
    """A program from a command timeline file (:func:`read_commands`): each row holds until the next, the last for
    COMMAND_HOLD_S (or until the clip's duration). A row's gait is its ``gait`` column, else the prompt's gait (if a
    prompt names one), else the robot's default; a zero command without a gait column is a stand."""
    legs = list(find_legs(robot) if legs is None else legs)
    num_legs = len(legs)
    rows = read_commands(path)
    prompt_gait = None
    if prompt:
        vocabulary = GAIT_WORDS.get(num_legs, {})
        for word in re.findall(r"[a-z]+", prompt.lower()):
            for candidate in (word, _stem(word), _stem(word) + "e"):
                if candidate in vocabulary and prompt_gait is None:
                    prompt_gait = vocabulary[candidate]
    default = prompt_gait or DEFAULT_PATTERN.get(num_legs, "wave")
    segments = []
    length = leg_length(robot, legs)
    for n, row in enumerate(rows):
        end = rows[n + 1]["t"] if n + 1 < len(rows) else None
        seconds = None if end is None else end - row["t"]
        vx, vy, wz = row["vx"], row["vy"], row["yaw_rate"]
        speed = math.hypot(vx, vy)
        if "gait" in row:
            try:
                pattern_key(row["gait"], num_legs)
            except ConfigError as exc:
                raise ConfigError(f"{row['_where']}: field 'gait' {row['gait']!r}: {exc}") from None
        if "gait" not in row and speed < 1e-9 and abs(wz) < 1e-9:
            segment = Segment(kind="stand", duration=seconds, height=row.get("height"), text=row["_where"],
                              level=None, explicit_pattern=False,
                              stop=bool(segments) and segments[-1].kind == "move")
        else:
            pattern = row.get("gait", default)
            froude = speed ** 2 / (GRAVITY * length)
            if froude > 3.0:
                raise ConfigError(f"{row['_where']}: speed {speed:.2f} m/s (vx, vy) is beyond any gait for legs "
                                  f"{length:.2f} m long (Froude {froude:.1f} > 3); use at most "
                                  f"{froude_speed(3.0, length):.2f} m/s")
            segment = Segment(kind="move", pattern=pattern, speed=speed, direction=math.atan2(vy, vx) if speed else 0.0,
                              turn_rate=wz, duration=seconds, height=row.get("height"), text=row["_where"],
                              level=None, explicit_pattern="gait" in row)
        segments.append(segment)
    if len(segments) > 10_000:
        raise ConfigError(f"--commands {path}: {len(segments)} rows; at most 10000 are allowed")
    notes = [f"program: {len(segments)} command(s) from {path}" + (f", gait {prompt_gait!r} from the prompt"
                                                                    if prompt_gait else "")]
    return MotionProgram(segments=segments, notes=notes, source=str(path))


# ----------------------------------------------------------------------------- generation
@dataclass
class ResolvedSegment:
    """A segment with its start and end (s) and the gait parameters it is played with."""

    segment: Segment
    start: float
    end: float
    spec: GaitSpec | None  # the resolved gait spec (stands: the neighbouring moving segment's, speed 0)
    command: np.ndarray  # (3,) vx, vy, yaw rate played (after any lowering)
    notes: list[str] = field(default_factory=list)
    limit: SpeedLimit | None = None
    asked: np.ndarray = field(default_factory=lambda: np.zeros(3))  # (3,) the asked command
    ramp: float = 0.0  # s, the transition into this segment (velocity ramp and gait blend)

    def to_dict(self) -> dict[str, Any]:
        spec = self.spec
        return {"kind": self.segment.kind, "stop": self.segment.stop, "text": self.segment.text,
                "start_s": round(self.start, 4), "end_s": round(self.end, 4), "ramp_s": round(self.ramp, 4),
                "pattern": self.segment.pattern if self.segment.kind == "move" else "stand",
                "asked": {"vx_mps": float(self.asked[0]), "vy_mps": float(self.asked[1]),
                          "yaw_rate_radps": float(self.asked[2])},
                "command": {"vx_mps": float(self.command[0]), "vy_mps": float(self.command[1]),
                            "yaw_rate_radps": float(self.command[2])},
                "frequency_hz": None if spec is None else float(spec.frequency),
                "duty_factor": None if spec is None else float(spec.duty_factor),
                "height_m": self.segment.height,
                "speed_limited_by": None if self.limit is None else self.limit.joint,
                "speed_limit_ratio": None if self.limit is None else float(self.limit.ratio),
                "speed_limit_kind": None if self.limit is None else self.limit.kind}


@dataclass
class ProgramResult:
    """A program's reference clip, its segments as played, and the figures of the gait library's checks."""

    motion: Motion
    segments: list[ResolvedSegment]
    notes: list[str]
    ik_error_m: float
    joint_velocity_ratio: float
    effort_ratio: float = 0.0


def _ramp_length(change: np.ndarray, accel: float, yaw_accel: float) -> float:
    return max(RAMP_S, SMOOTHSTEP_PEAK * float(np.hypot(change[0], change[1])) / accel,
               SMOOTHSTEP_PEAK * abs(float(change[2])) / yaw_accel)


def _gait_changes(before: GaitSpec | None, after: GaitSpec) -> bool:
    return before is not None and (before.pattern != after.pattern or abs(before.frequency - after.frequency) > 1e-6
                                   or abs(before.duty_factor - after.duty_factor) > 1e-6)


def _blend_length(before: GaitSpec | None, after: GaitSpec) -> float:
    """How long a gait change takes: one stride of the slower gait (0 when the gait stays)."""
    return max(1.0 / before.frequency, 1.0 / after.frequency) if _gait_changes(before, after) else 0.0


def _transition_length(before: ResolvedSegment | None, after: ResolvedSegment, accel: float) -> float:
    """The velocity ramp into ``after``: within the acceleration limits, and as long as its gait blend (the speed
    changes with the cadence, so strides stay as long as the gaits make them)."""
    previous = np.zeros(3) if before is None else before.command
    return max(_ramp_length(after.command - previous, accel, YAW_ACCEL_MAX),
               _blend_length(None if before is None else before.spec, after.spec))


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3 - 2 * x)


def resolve_segments(robot: Robot, program: MotionProgram, legs: Sequence[Leg], stance: Stance, fps: float,
                     max_velocity_ratio: float, duration: float | None = None,
                     accel: float = ACCEL_MAX, cache: dict | None = None,
                     terrain: Any = None) -> list[ResolvedSegment]:
    """Each moving segment resolved by the gait library on a steady clip (cached per command in ``cache``), stands
    given their neighbours' gait, and every segment its start and end (module docstring for the default lengths)."""
    cache = {} if cache is None else cache
    out: list[ResolvedSegment] = []
    for segment in program.segments:
        if segment.kind != "move":
            out.append(ResolvedSegment(segment, 0.0, 0.0, None, np.zeros(3)))
            continue
        key = (segment.pattern, round(segment.speed, 4), round(segment.direction, 4), round(segment.turn_rate, 4))
        if key not in cache:
            spec = GaitSpec(pattern=segment.pattern, speed=segment.speed, direction=segment.direction,
                            turn_rate=segment.turn_rate, notes=[])
            cache[key] = generate_gait_result(robot, spec, RESOLVE_S, fps, legs, slow_down=True,
                                              max_velocity_ratio=max_velocity_ratio, stance=stance, terrain=terrain)
        result = cache[key]
        spec = result.spec
        played = Segment(kind="move", pattern=segment.pattern, speed=spec.speed, direction=segment.direction,
                         turn_rate=spec.turn_rate)
        notes = [n for n in spec.notes if "slowed" in n or n.startswith("warning")]
        out.append(ResolvedSegment(segment, 0.0, 0.0, spec, played.command, notes, result.limit, segment.command))
    # stands: the gait clock of the moving segment before them (or after, at the start)
    for n, item in enumerate(out):
        if item.spec is None:
            near = next((o.spec for o in reversed(out[:n]) if o.spec is not None), None) or \
                next((o.spec for o in out[n + 1:] if o.spec is not None), None)
            if near is None:  # a program of stands only: the default gait's clock, never stepping
                pattern = PATTERNS_BY_LEGS.get(len(legs), ("wave",))[0]
                from akd_core.motion.gait import resolve_spec

                near = resolve_spec(GaitSpec(pattern=pattern, speed=0.0), legs, stance)
            item.spec = dataclasses.replace(near, speed=0.0, turn_rate=0.0, bounce=0.0)
    # lengths
    t = 0.0
    for n, item in enumerate(out):
        ramp = item.ramp = _transition_length(out[n - 1] if n else None, item, accel)
        stride = 1.0 / float(item.spec.frequency)
        length = float(item.segment.duration) if item.segment.duration is not None else \
            _default_length(item.segment, ramp, stride)
        item.start, item.end = t, t + length
        t += length
    if duration is not None:
        total = out[-1].end
        free = [o for o in out if o.segment.duration is None]
        fixed = sum(o.end - o.start for o in out if o.segment.duration is not None)
        if free and duration > fixed:
            scale = (duration - fixed) / max(total - fixed, 1e-9)
            t = 0.0
            for item in out:
                length = (item.end - item.start) * (scale if item.segment.duration is None else 1.0)
                item.start, item.end = t, t + length
                t += length
        out = [o for o in out if o.start < duration - 1e-9]
        out[-1].end = float(duration)
    return out


class Schedule:
    """The program's body path and footfalls on a fine grid (module docstring, steps 2-3); :meth:`targets` reads
    them at any times, in the layout of :func:`akd_core.motion.gait.foot_targets`."""

    def __init__(self, segments: Sequence[ResolvedSegment], stance: Stance, accel: float = ACCEL_MAX):
        self.stance = stance
        legs = stance.legs
        labels = [leg.label for leg in legs]
        end = segments[-1].end
        self.grid = np.arange(-PREROLL_S, end + POSTROLL_S + GRID_DT / 2, GRID_DT)
        grid = self.grid
        dt = GRID_DT
        starts = np.array([s.start for s in segments])
        which = np.clip(np.searchsorted(starts, grid, side="right") - 1, 0, len(segments) - 1)
        # commands: ramps from the value reached to each segment's command (the body at rest before t = 0)
        command = np.zeros((len(grid), 3))
        value = np.zeros(3)
        for n, seg in enumerate(segments):
            lo = seg.start if n else -np.inf
            hi = segments[n + 1].start if n + 1 < len(segments) else np.inf
            span = (grid >= lo) & (grid < hi)
            ramp = max(_ramp_length(seg.command - value, accel, YAW_ACCEL_MAX),
                       _blend_length(segments[n - 1].spec if n else None, seg.spec))
            weight = _smoothstep((grid[span] - seg.start) / ramp)
            command[span] = value + (seg.command - value) * weight[:, None]
            if n + 1 < len(segments):
                value = value + (seg.command - value) * float(_smoothstep(np.array((hi - seg.start) / ramp)))
        self.command = command
        yaw = np.cumsum(command[:, 2] * dt)
        yaw -= np.interp(0.0, grid, yaw)
        c, s = np.cos(yaw), np.sin(yaw)
        vel = np.stack([c * command[:, 0] - s * command[:, 1], s * command[:, 0] + c * command[:, 1]], -1)
        xy = np.cumsum(vel * dt, axis=0)
        xy -= np.array([np.interp(0.0, grid, xy[:, 0]), np.interp(0.0, grid, xy[:, 1])])
        self.xy, self.yaw = xy, yaw
        # gait parameters: blended over a stride of the slower gait at each change; offsets aligned first
        specs = [s.spec for s in segments]
        num = len(legs)
        offsets = []
        reference = np.array([specs[0].phase_offsets[lab] for lab in labels])
        for spec in specs:
            own = np.array([spec.phase_offsets[lab] for lab in labels])
            offsets.append(_aligned(own, reference))
            reference = offsets[-1]
        one_hot = np.eye(len(specs))
        params = [np.r_[sp.frequency, sp.duty_factor, sp.step_height, sp.bounce,
                        (seg.segment.height - stance.body_height) if seg.segment.height else 0.0, off, one_hot[n]]
                  for n, (sp, seg, off) in enumerate(zip(specs, segments, offsets))]
        blended = np.zeros((len(grid), len(params[0])))
        value = params[0].copy()
        for n, seg in enumerate(segments):
            lo = seg.start if n else -np.inf
            hi = segments[n + 1].start if n + 1 < len(segments) else np.inf
            span = (grid >= lo) & (grid < hi)
            length = max(_blend_length(segments[n - 1].spec, seg.spec), 1e-9) if n else 1e-9
            weight = _smoothstep((grid[span] - seg.start) / length)
            blended[span] = value + (params[n] - value) * weight[:, None]
            if n + 1 < len(segments):
                value = value + (params[n] - value) * float(_smoothstep(np.array((hi - seg.start) / length)))
        freq, duty, height, bounce, z_off = (blended[:, i] for i in range(5))
        phase_off = blended[:, 5:5 + num]
        mix = blended[:, 5 + num:]
        clock = np.cumsum(freq * dt)
        clock -= np.interp(0.0, grid, clock)
        # the body: stance height, the segments' height changes, and the blended bounce of each gait
        cycle = clock % 1.0
        ramp_in = _smoothstep(grid / RAMP_S)
        lift = np.zeros(len(grid))
        for n, spec in enumerate(specs):
            profile = _bounce_profile(dataclasses.replace(spec, phase_offsets=dict(zip(labels, offsets[n] % 1.0))),
                                      labels)
            lift += mix[:, n] * spec.bounce * np.interp(cycle, np.linspace(0, 1, 257)[:-1], profile, period=1.0)
        self.z = stance.body_height + z_off + lift * ramp_in
        # footfalls
        standing = np.array([segments[i].segment.kind == "stand" for i in which])
        tolerance = STAND_TOLERANCE * stance.leg_length
        self.legs: list[dict[str, np.ndarray]] = []
        for k in range(num):
            down = ((clock + phase_off[:, k]) % 1.0) < duty
            down = _clean_runs(down, duty, freq)
            begins, ends = _runs(down)
            holds, hold_yaw, keep = [], [], []
            for b, e in zip(begins, ends):
                lifted = keep[-1][1] if keep else 0  # the swing before this stance: lift-off and touch-down
                stance_len = min(e - b, int(round(duty[b] / freq[b] / dt)))
                mid = min(b + stance_len // 2, len(grid) - 1)
                cy, sy = math.cos(yaw[mid]), math.sin(yaw[mid])
                nominal = stance.feet_body[k, :2]
                point = xy[mid] + np.array([cy * nominal[0] - sy * nominal[1], sy * nominal[0] + cy * nominal[1]])
                if holds and standing[min(lifted, len(grid) - 1)] and standing[b] and \
                        np.linalg.norm(point - holds[-1]) < tolerance and abs(yaw[mid] - hold_yaw[-1]) < \
                        STAND_YAW_TOLERANCE:
                    keep[-1] = (keep[-1][0], e)  # the foot stays down: no step
                    continue
                holds.append(point)
                hold_yaw.append(float(yaw[mid]))
                keep.append((b, e))
            b_idx = np.array([b for b, _ in keep])
            e_idx = np.array([e for _, e in keep])
            self.legs.append({"start": grid[b_idx], "end": grid[np.minimum(e_idx, len(grid) - 1)],
                              "hold": np.array(holds), "yaw": np.array(hold_yaw),
                              "height": height[np.minimum(e_idx, len(grid) - 1)],
                              "duty": duty[np.minimum(e_idx, len(grid) - 1)]})
        self.segment_index = which

    def targets(self, times: np.ndarray) -> dict[str, np.ndarray]:
        """Root and foot trajectories at ``times`` (F,) as :func:`akd_core.motion.gait.foot_targets` returns them."""
        times = np.asarray(times, dtype=np.float64)
        grid = self.grid
        xy = np.stack([np.interp(times, grid, self.xy[:, 0]), np.interp(times, grid, self.xy[:, 1])], -1)
        yaw = np.interp(times, grid, self.yaw)
        root_pos = np.c_[xy, np.interp(times, grid, self.z)]
        num = len(self.legs)
        feet = np.zeros((len(times), num, 3))
        foot_yaw = np.zeros((len(times), num))
        contacts = np.zeros((len(times), num), bool)
        for k, leg in enumerate(self.legs):
            j = np.clip(np.searchsorted(leg["start"], times, side="right") - 1, 0, len(leg["start"]) - 1)
            nxt = np.minimum(j + 1, len(leg["start"]) - 1)
            in_stance = (times < leg["end"][j]) | (j == nxt) | (times < leg["start"][0])
            span = np.maximum(leg["start"][nxt] - leg["end"][j], 1e-6)
            tau = np.clip((times - leg["end"][j]) / span, 0.0, 1.0)
            duty = leg["duty"][j]
            s_h = (tau ** 3 - 2 * tau ** 2 + tau) * (1 - duty) + tau * tau * (3 - 2 * tau)
            a, b = leg["hold"][j], leg["hold"][nxt]
            feet[:, k, :2] = np.where(in_stance[:, None], a, a + (b - a) * s_h[:, None])
            feet[:, k, 2] = np.where(in_stance, 0.0, leg["height"][j] * 0.5 * (1 - np.cos(2 * np.pi * tau)))
            foot_yaw[:, k] = np.where(in_stance, leg["yaw"][j], leg["yaw"][j] + (leg["yaw"][nxt] - leg["yaw"][j]) * s_h)
            contacts[:, k] = in_stance
        return {"root_pos": root_pos, "yaw": yaw, "feet": feet, "foot_yaw": foot_yaw, "contacts": contacts}

    def body_path(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Root xy (T,2) and yaw (T,) at ``times`` (the gait library's ``body_path`` for a program)."""
        times = np.asarray(times, dtype=np.float64)
        return (np.stack([np.interp(times, self.grid, self.xy[:, 0]), np.interp(times, self.grid, self.xy[:, 1])],
                         -1), np.interp(times, self.grid, self.yaw))


def _aligned(offsets: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``offsets`` (K,) shifted by the common cycle fraction that, with each wrapped to within half a cycle of
    ``reference``, moves them least (a gait change then moves each leg's phase as little as it can)."""
    best, best_cost = offsets, np.inf
    for shift in np.linspace(0.0, 1.0, 200, endpoint=False):
        delta = (offsets + shift - reference + 0.5) % 1.0 - 0.5
        cost = float(np.sum(delta ** 2))
        if cost < best_cost - 1e-12:
            best, best_cost = reference + delta, cost
    return best


def _runs(down: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end indices (end exclusive) of the True runs of ``down``."""
    edges = np.diff(np.r_[0, down.astype(np.int8), 0])
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def _clean_runs(down: np.ndarray, duty: np.ndarray, freq: np.ndarray) -> np.ndarray:
    """Stance (True) runs with the slivers a phase blend can make removed: swings, then stances, shorter than
    MIN_RUN of their gait's own; the grid's first and last swings made stance (the feet start and end down)."""
    down = down.copy()
    begins, ends = _runs(~down)
    for b, e in zip(begins, ends):
        if b == 0 or e == len(down) or (e - b) * GRID_DT < MIN_RUN * (1 - duty[b]) / freq[b]:
            down[b:e] = True
    begins, ends = _runs(down)
    for b, e in zip(begins, ends):
        if b > 0 and e < len(down) and (e - b) * GRID_DT < MIN_RUN * duty[b] / freq[b]:
            down[b:e] = False
    return down


def generate_program(robot: Robot, program: MotionProgram, fps: float = 50.0, legs: Sequence[Leg] | None = None,
                     prompt: str = "", max_velocity_ratio: float = 1.0,
                     duration: float | None = None, terrain: Any = None) -> ProgramResult:
    """One reference clip of ``program`` (module docstring), on ``terrain`` (an
    :class:`akd_core.model.terrain.Terrain`; None: flat ground)."""
    from akd_core.motion.feasibility import effort_ratios, joint_torques

    if not np.isfinite(fps) or fps <= 0:
        raise ConfigError(f"fps must be a positive number, got {fps}")
    if duration is not None and (not np.isfinite(duration) or duration <= 0):
        raise ConfigError(f"duration must be a positive number of seconds, got {duration}")
    legs = list(find_legs(robot) if legs is None else legs)
    for segment in program.segments:
        if segment.kind == "move":
            pattern_key(segment.pattern, len(legs))
    from akd_core.motion.gait import HUMAN_WALK, ZMP_BALANCE
    from akd_core.motion.humanoid import humanoid_body

    flat = terrain is None or terrain.is_flat
    body = humanoid_body(robot, legs) if (HUMAN_WALK and ZMP_BALANCE and len(legs) == 2 and flat) else None
    if body is not None:
        return _human_program(robot, program, legs, body, fps, prompt, max_velocity_ratio, duration)
    stance = stance_pose(robot, legs)
    for segment in program.segments:
        if segment.height is not None and not 0.05 * stance.leg_length < segment.height <= \
                stance.body_height + 0.2 * stance.leg_length:
            raise ConfigError(f"{segment.text}: height {segment.height:.3f} m is outside the range robot "
                              f"'{robot.name}' can stand at (about {0.6 * stance.body_height:.2f} .. "
                              f"{stance.body_height + 0.2 * stance.leg_length:.2f} m)")
    notes = list(program.notes)
    limit = np.asarray(robot.velocity_limit, dtype=np.float64)
    finite = np.isfinite(limit) & (limit > 0)
    accel = ACCEL_MAX
    flight = any(s.kind == "move" and PATTERNS[pattern_key(s.pattern, len(legs))].flight for s in program.segments)
    from akd_core.motion.gait import CARRY_FLIGHT, _balanced

    cache: dict[tuple, Any] = {}
    for attempt in range(3):
        segments = resolve_segments(robot, program, legs, stance, fps, max_velocity_ratio, duration, accel, cache,
                                    terrain)
        schedule = Schedule(segments, stance, accel)
        end = segments[-1].end
        times = np.arange(int(round(end * fps)) + 1) / fps
        walks = [s for s in segments if s.segment.kind == "move"]

        def plan(t: np.ndarray, schedule: Schedule = schedule) -> dict[str, np.ndarray]:
            return on_terrain(schedule.targets, t, terrain, stance)

        balance = plan if (walks and _balanced(walks[0].spec, stance)) else None
        carry = CARRY_FLIGHT and flight and len(legs) >= 3
        motion, error = solve_clip(robot, stance, times, plan(times), fps, prompt or "", balance=balance,
                                   carry=carry)
        vel = np.abs(motion.joint_vel().astype(np.float64)).max(0)
        ratios = np.where(finite, vel / np.where(finite, limit, 1.0), 0.0)
        ratio = float(ratios.max(initial=0.0))
        if ratio <= min(TRANSITION_VELOCITY_SLACK * max_velocity_ratio, 1.0) or attempt == 2:
            break
        worst = int(ratios.argmax())
        notes.append(f"program: the transitions need joint '{robot.joint_names[worst]}' at {ratio:.2f} x its "
                     f"velocity limit: ramps lengthened (peak acceleration {accel * 0.6:.2f} m/s^2)")
        log.warning(notes[-1])
        accel *= 0.6
    if ratio > 1.0:
        worst = int(ratios.argmax())
        notes.append(f"warning: program needs joint '{robot.joint_names[worst]}' at {ratio:.2f} x its URDF velocity "
                     "limit; the tracker clamps its targets there")
        log.warning(notes[-1])
    effort = float(effort_ratios(robot, joint_torques(robot, motion)).max(initial=0.0))
    for n, item in enumerate(segments):
        for note in item.notes:
            notes.append(f"segment {n + 1}: {note}")
    motion.prompt = prompt
    return ProgramResult(motion=motion, segments=segments, notes=notes, ik_error_m=float(error),
                         joint_velocity_ratio=ratio, effort_ratio=effort)


def _human_program(robot: Robot, program: MotionProgram, legs: Sequence[Leg], body: Any, fps: float, prompt: str,
                   max_velocity_ratio: float, duration: float | None) -> ProgramResult:
    """A program of a human-like biped: one :mod:`akd_core.motion.humanoid` walk resolved for the program's fastest
    walking command, along the program's body path (speeds and turns scaled by what the walk could keep), standing
    with both feet down wherever the body is at rest (:func:`_rest_intervals`), its steady cycle read in the fastest
    walking segment."""
    from akd_core.motion.humanoid import WalkRequest, generate_walk

    bad = [s.pattern for s in program.segments if s.kind == "move" and s.pattern != "walk"]
    if bad:
        raise ConfigError(f"a program of a robot with human-like legs may walk, turn and stand; it asks for {bad}. "
                          "Ask for those gaits in their own clip (one prompt each)")
    notes = list(program.notes)
    walks = [s for s in program.segments if s.kind == "move"]
    fastest = max(walks, key=lambda s: s.speed) if walks else Segment(pattern="walk", speed=0.0)
    turn = max((abs(s.turn_rate) for s in walks), default=0.0)
    stance_like = Stance(joint_pos=np.zeros(robot.num_dofs), body_height=float(body.straight_height),
                         leg_length=float(body.straight_height), feet_body=np.zeros((len(legs), 3)),
                         foot_rot=np.tile(np.eye(3), (len(legs), 1, 1)), legs=list(legs),
                         centres=np.zeros((len(legs), 3)), stride_room=1.0)
    _check_spec(GaitSpec(pattern="walk", speed=fastest.speed, turn_rate=turn), body.straight_height)
    request = WalkRequest(speed=float(fastest.speed), direction=0.0, turn_rate=float(turn), ramp_time=RAMP_S)
    from akd_core.motion.humanoid import _alexander_cadence

    stride = 1.0 / _alexander_cadence(max(request.speed, 0.1), float(body.straight_height))
    items = _timed(program.segments, stride, duration)
    fastest_item = next((item for item in items if item.segment is fastest), None)
    request.steady_from = None if fastest_item is None else fastest_item.start + fastest_item.ramp
    request.stands = _rest_intervals(items, stance_like)

    def path_for(walk: Any) -> Any:
        """The program's body path at the speeds the resolved ``walk`` keeps (its lowering applied to every
        command)."""
        scale = walk.speed / request.speed if request.speed > 0 else 1.0
        spec = GaitSpec(pattern="walk", speed=walk.speed, frequency=walk.frequency, duty_factor=walk.duty_factor,
                        step_height=walk.step_height, bounce=0.0,
                        phase_offsets={leg.label: float(p) for leg, p in zip(legs, walk.phases)})
        scaled = [dataclasses.replace(item, spec=spec, command=item.command * scale) for item in items]
        return Schedule(scaled, stance_like).body_path

    result = generate_walk(robot, legs, body, request, path_for, items[-1].end, fps, prompt,
                           max_velocity_ratio=max_velocity_ratio)
    walk = result.gait
    scale = walk.speed / request.speed if request.speed > 0 else 1.0
    spec = GaitSpec(pattern="walk", speed=walk.speed, turn_rate=walk.turn_rate, frequency=walk.frequency,
                    duty_factor=walk.duty_factor, step_height=walk.step_height, bounce=0.0,
                    phase_offsets={leg.label: float(p) for leg, p in zip(legs, walk.phases)}, notes=list(walk.notes))
    for item in items:
        item.command = item.command * scale
        item.spec = spec if item.segment.kind == "move" else dataclasses.replace(spec, speed=0.0, turn_rate=0.0)
        item.limit = result.limit if item.segment.kind == "move" else None
    for item, original in zip(items, program.segments):
        item.asked = original.command
    notes.extend(result.gait.notes)
    return ProgramResult(motion=result.motion, segments=items, notes=notes, ik_error_m=float(result.ik_error_m),
                         joint_velocity_ratio=float(result.joint_velocity_ratio), effort_ratio=result.effort_ratio)


def _rest_intervals(items: Sequence[ResolvedSegment], stance: Stance) -> tuple[tuple[float, float], ...]:
    """(start, end) s of the spans in which a program's body is at rest (its command zero, the ramps into and out of
    a stand excluded; -inf / inf where the rest runs past the clip's ends): where a human-like walk stands."""
    spec = GaitSpec(pattern="walk", speed=0.0, frequency=1.0, duty_factor=0.6, step_height=0.0, bounce=0.0,
                    phase_offsets={leg.label: 0.5 * k for k, leg in enumerate(stance.legs)})
    schedule = Schedule([dataclasses.replace(item, spec=spec) for item in items], stance)
    still = np.all(np.abs(schedule.command) < 1e-9, axis=1)
    begins, ends = _runs(still)
    grid = schedule.grid
    return tuple((-math.inf if b == 0 else float(grid[b]), math.inf if e == len(grid) else float(grid[e - 1]))
                 for b, e in zip(begins, ends))


def _timed(segments: Sequence[Segment], stride: float, duration: float | None) -> list[ResolvedSegment]:
    """Segments with their start and end at a common stride length (s), for a walk whose cadence is chosen later."""
    items, t, previous = [], 0.0, np.zeros(3)
    for segment in segments:
        command = segment.command if segment.kind == "move" else np.zeros(3)
        ramp = _ramp_length(command - previous, ACCEL_MAX, YAW_ACCEL_MAX)
        length = segment.duration if segment.duration is not None else _default_length(segment, ramp, stride)
        items.append(ResolvedSegment(segment, t, t + length, None, command, asked=segment.command, ramp=ramp))
        t, previous = t + length, command
    if duration is not None:
        k = float(duration) / t
        for item in items:
            item.start, item.end, item.ramp = item.start * k, item.end * k, min(item.ramp, (item.end - item.start) * k)
    return items


def _default_length(segment: Segment, ramp: float, stride: float) -> float:
    """A segment's length when none was asked (module docstring)."""
    if segment.kind == "move":
        return ramp + MOVE_STRIDES * stride
    if segment.stop:
        return ramp + stride + STOP_HOLD_S
    if segment.text.startswith("--commands"):
        return COMMAND_HOLD_S
    return START_STAND_S if segment.text == "(start)" else STAND_S


def transition_figures(motion: Motion, segments: Sequence[ResolvedSegment | dict[str, Any]]) -> dict[str, float]:
    """The largest joint acceleration (rad/s^2) in the transitions between segments (each segment's ramp) and in
    the steady parts, and their ratio: a transition must not jerk the joints more than the gaits themselves do."""
    if motion.num_frames < 3:
        return {}
    fps = motion.fps
    acc = np.abs(np.diff(motion.joint_pos.astype(np.float64), 2, axis=0)).max(1) * fps * fps  # (F-2,) frames 1..F-2
    times = (np.arange(len(acc)) + 1) / fps
    window = np.zeros(len(acc), bool)
    first = np.zeros(len(acc), bool)
    for n, seg in enumerate(segments):
        start = seg["start_s"] if isinstance(seg, dict) else seg.start
        ramp = seg["ramp_s"] if isinstance(seg, dict) else seg.ramp
        inside = (times >= start) & (times <= start + ramp)
        (window if n else first)[:] |= inside
    steady = ~window & ~first
    if not window.any() or not steady.any():
        return {}
    inner, across = float(acc[steady].max()), float(acc[window].max())
    return {"transition_joint_acc_max": across, "segment_joint_acc_max": inner,
            "transition_acc_ratio": across / max(inner, 1e-9)}


def segment_figures(motion: Motion, segments: Sequence[ResolvedSegment | dict[str, Any]],
                    root_pos: np.ndarray | None = None, root_quat: np.ndarray | None = None,
                    contacts: np.ndarray | None = None) -> list[dict[str, float]]:
    """Per segment: the mean velocity (heading frame) and yaw rate of the root over the segment's steady part (from
    the end of the transition into it to its end), of the clip's own root or of ``root_pos``/``root_quat`` (such as
    tracked states at the clip's frames), and the root speed and the share of frames with every foot down in its
    last second."""
    from akd_core.model.spatial import quat_yaw

    pos = motion.root_pos.astype(np.float64) if root_pos is None else np.asarray(root_pos, np.float64)
    quat = motion.root_quat.astype(np.float64) if root_quat is None else np.asarray(root_quat, np.float64)
    down = motion.foot_contacts if contacts is None else contacts
    yaw = np.unwrap(quat_yaw(quat))
    fps = motion.fps
    out = []
    for seg in segments:
        start = seg["start_s"] if isinstance(seg, dict) else seg.start
        end = seg["end_s"] if isinstance(seg, dict) else seg.end
        ramp = seg["ramp_s"] if isinstance(seg, dict) else seg.ramp
        start = min(start + ramp, end - 1.0 / fps)  # the steady part: after the transition into it
        a, b = int(round(start * fps)), min(int(round(end * fps)), len(pos) - 1)
        if b <= a:
            out.append({"vx_mps": 0.0, "vy_mps": 0.0, "yaw_rate_radps": 0.0, "speed_mps": 0.0})
            continue
        vel = np.gradient(pos[a:b + 1, :2], 1.0 / fps, axis=0)
        c, s = np.cos(yaw[a:b + 1]), np.sin(yaw[a:b + 1])
        vx = c * vel[:, 0] + s * vel[:, 1]
        vy = -s * vel[:, 0] + c * vel[:, 1]
        last = max(b - int(round(fps)), a)
        speed_last = np.linalg.norm(np.gradient(pos[last:b + 1, :2], 1.0 / fps, axis=0), axis=-1) \
            if b - last >= 2 else np.zeros(1)
        out.append({"vx_mps": float(vx.mean()), "vy_mps": float(vy.mean()),
                    "yaw_rate_radps": float((yaw[b] - yaw[a]) * fps / (b - a)),
                    "speed_mps": float(np.hypot(vx.mean(), vy.mean())),
                    "last_second_speed_mps": float(speed_last.max()),
                    "last_second_feet_down": float(np.asarray(down[last:b + 1]).all(-1).mean()) if down is not None
                    and np.asarray(down).size else 0.0})
    return out


__all__ = ["Segment", "MotionProgram", "ResolvedSegment", "ProgramResult", "Schedule", "split_prompt",
           "is_program_prompt", "program_from_prompt", "read_commands", "program_from_commands", "resolve_segments",
           "generate_program", "segment_figures", "transition_figures"]
