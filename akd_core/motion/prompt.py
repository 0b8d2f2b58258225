"""Prompt -> GaitSpec: gait, speed and direction words, with defaults per morphology and size.

``spec_from_prompt("a dog trotting forward quickly", robot, legs)`` returns a :class:`~akd_core.motion.gait.GaitSpec`
and a list of notes saying what was understood and what was assumed (notes starting with ``warning:`` mark
a default used because no gait word was understood; words that were ignored are listed too). The chosen
spec is recorded by ``akd gait`` in manifest.json.

Rules (documented in docs/gait.md):

- **Gait words** map to a pattern of the robot's leg count. Quadrupeds: walk, crawl/creep/sneak, trot, pace/amble,
  bound/leap, gallop/run/sprint/race/dash (a running quadruped gallops: the fastest symmetric gaits are
  asymmetric), pronk/hop/jump/bounce. Bipeds: walk/march/stroll, run/jog/sprint (trot, gallop -> run), hop/jump/
  pronk/bound. Hexapods: tripod/walk/run/trot/scurry (tripod), wave/crawl/creep (wave). Other leg counts: wave.
  No gait word: trot (quadruped), walk (biped), tripod (hexapod), wave (others), with a warning note.
- **Speed** is a level in the pattern's Froude range Fr = v^2 / (g L) (L = leg length): very slowly 0, slowly
  0.15, (default) 0.5, quickly/fast 0.85, very fast/sprint/full speed 1; scaled by the robot's size through
  Fr, so a large dog trots faster than a small one. An explicit "0.8 m/s" wins (checked against Fr <= 3).
  "jog" is a slow run, "sprint" a fast one.
- **Direction**: forward (default); backward/backwards/reverse (direction pi); sideways/sidestep + left/right
  (direction +-pi/2); "turning left/right" (also "turn", "circling", "counterclockwise", "clockwise"): a yaw
  rate giving a turning radius of 4 leg lengths (2 with "sharply"/"tight"), at least 0.4 rad/s; "in place",
  "on the spot", "stationary": speed 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from akd_core.io.errors import ConfigError
from akd_core.model.legs import Leg, find_legs, leg_length
from akd_core.model.robot import Robot
from akd_core.motion.gait import PATTERNS, PATTERNS_BY_LEGS, GaitSpec, froude_speed, pattern_key

DEFAULT_PATTERN = {4: "trot", 2: "walk", 6: "tripod"}
GAIT_WORDS: dict[int, dict[str, str]] = {
    4: {"walk": "walk", "stroll": "walk", "march": "walk", "strut": "walk", "step": "walk",
        "crawl": "crawl", "creep": "crawl", "sneak": "crawl", "stalk": "crawl",
        "trot": "trot", "jog": "trot", "pace": "pace", "amble": "pace",
        "bound": "bound", "leap": "bound", "gallop": "gallop", "run": "gallop", "sprint": "gallop",
        "race": "gallop", "dash": "gallop", "canter": "gallop",
        "pronk": "pronk", "hop": "pronk", "jump": "pronk", "bounce": "pronk", "stot": "pronk", "bounc": "pronk"},
    2: {"walk": "walk", "stroll": "walk", "march": "walk", "strut": "walk", "step": "walk", "crawl": "walk",
        "creep": "walk", "sneak": "walk", "run": "run", "jog": "run", "sprint": "run", "race": "run", "dash": "run",
        "trot": "run", "gallop": "run", "hop": "hop", "jump": "hop", "pronk": "hop", "bound": "hop",
        "bounce": "hop", "bounc": "hop", "leap": "hop"},
    6: {"tripod": "tripod", "walk": "tripod", "run": "tripod", "trot": "tripod", "scurry": "tripod",
        "scuttle": "tripod", "march": "tripod", "sprint": "tripod", "jog": "tripod",
        "wave": "wave", "crawl": "wave", "creep": "wave", "sneak": "wave", "stroll": "wave"},
}
SPEED_WORDS = {"slowly": 0.15, "slow": 0.15, "leisurely": 0.15, "gently": 0.15, "carefully": 0.15, "calmly": 0.15,
               "steadily": 0.5, "normally": 0.5, "moderately": 0.5, "quickly": 0.85, "quick": 0.85, "fast": 0.85,
               "briskly": 0.85, "rapidly": 0.85, "swiftly": 0.85, "hurriedly": 0.85}
INTENSIFIERS = ("very", "really", "extremely", "super")
SUBJECT_WORDS = {"a", "an", "the", "robot", "dog", "puppy", "cat", "horse", "pony", "deer", "animal", "creature",
                 "quadruped", "biped", "hexapod", "ostrich", "bird", "emu", "humanoid", "person", "human", "man",
                 "woman", "spider", "insect", "ant", "beetle", "bug", "legged", "is", "and", "while", "with", "its",
                 "it", "to", "of", "in", "on", "at", "around", "across", "along", "over", "ground", "floor", "field",
                 "straight", "ahead", "then", "gait", "motion", "speed", "pace_", "up", "down", "by", "toward",
                 "towards", "mode", "like", "little", "big", "small", "large", "happy", "happily", "one", "two",
                 "four", "six", "legs", "leg", "grass", "road", "path", "flat", "smoothly", "naturally", "casually",
                 # terrain words (akd_core.model.terrain.terrain_from_prompt reads them)
                 "stairs", "stair", "staircase", "steps", "slope", "slopes", "hill", "ramp", "incline", "degree",
                 "degrees", "deg", "rough", "uneven", "rocky", "bumpy", "terrain", "curb", "kerb", "block", "onto"}
DIRECTION_WORDS = {"forward", "forwards", "backward", "backwards", "back", "reverse", "sideways", "sidestep",
                   "sidestepping", "left", "right", "turn", "turning", "turns", "circle", "circling", "circles",
                   "clockwise", "counterclockwise", "anticlockwise", "place", "spot", "stationary", "sharply",
                   "sharp", "tight", "tightly", "very", "really", "extremely", "super", "full", "top", "m/s",
                   "mps", "per", "second", "meters", "metres"}


def _stem(word: str) -> str:
    """Crude English stem: trotting -> trot, runs -> run, galloping -> gallop, hopped -> hop."""
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            if len(base) >= 4 and base[-1] == base[-2]:  # trotting -> trott -> trot, hopped -> hopp -> hop
                base = base[:-1]
            return base
    return word


def spec_from_prompt(prompt: str, robot: Robot, legs: Sequence[Leg] | None = None) -> tuple[GaitSpec, list[str]]:
    """A GaitSpec for ``prompt`` on ``robot`` (legs found if not given) and notes on how it was read."""
    if prompt is None or not str(prompt).strip():
        raise ConfigError("the prompt is empty; describe the motion, e.g. --prompt 'a dog trotting forward'")
    legs = list(find_legs(robot) if legs is None else legs)
    num_legs = len(legs)
    length = leg_length(robot, legs)
    text = str(prompt).lower()
    words = re.findall(r"[a-z/]+|\d+(?:\.\d+)?", text)
    notes: list[str] = []
    vocabulary = GAIT_WORDS.get(num_legs, {"wave": "wave", "walk": "wave", "crawl": "wave"})
    pattern, gait_word, speed_hint = None, None, None
    for word in words:
        stem = _stem(word)
        for candidate in (word, stem, stem + "e"):  # pacing -> pac -> pace
            if candidate in vocabulary and pattern is None:
                pattern, gait_word = vocabulary[candidate], word
                if candidate in ("jog",):
                    speed_hint = 0.15
                if candidate in ("sprint", "race", "dash"):
                    speed_hint = 1.0
    default = DEFAULT_PATTERN.get(num_legs, "wave")
    if pattern is None:
        pattern = default
        notes.append(f"warning: no gait word understood in {prompt!r}; using the default {pattern!r} for a robot "
                     f"with {num_legs} legs (gait words: {sorted(set(vocabulary))})")
    else:
        notes.append(f"gait: {gait_word!r} -> {pattern} ({num_legs} legs)")
    level = _speed_level(words, notes, speed_hint)
    key = pattern_key(pattern, num_legs)

    lo, hi = PATTERNS[key].froude
    speed = froude_speed(lo * (hi / lo) ** level, length)
    explicit = re.search(r"(\d+(?:\.\d+)?)\s*(?:m/s|mps|meters? per second|metres? per second)", text)
    if explicit:
        speed = float(explicit.group(1))
        notes.append(f"speed: {speed:.2f} m/s as asked")
    else:
        notes.append(f"speed: level {level:.2f} of the {pattern} range Fr {lo}..{hi} for legs {length:.2f} m long "
                     f"-> {speed:.2f} m/s")
    direction, turn_rate, speed = _direction(words, text, speed, length, notes)
    unknown = sorted({w for w in words if not re.fullmatch(r"\d+(?:\.\d+)?", w) and w not in SUBJECT_WORDS
                      and w not in DIRECTION_WORDS and w not in SPEED_WORDS and w not in vocabulary
                      and _stem(w) not in vocabulary and _stem(w) + "e" not in vocabulary})
    if unknown:
        notes.append(f"ignored words (not gait, speed or direction words): {unknown}")
    spec = GaitSpec(pattern=pattern, speed=float(speed), direction=float(direction), turn_rate=float(turn_rate),
                    notes=list(notes))
    return spec, notes


def _speed_level(words: list[str], notes: list[str], hint: float | None) -> float:
    level = 0.5 if hint is None else hint
    for i, word in enumerate(words):
        very = i > 0 and words[i - 1] in INTENSIFIERS
        if word in SPEED_WORDS:
            level = SPEED_WORDS[word]
            if very:
                level = 0.0 if level < 0.5 else 1.0
        if word in ("full", "top") and i + 1 < len(words) and words[i + 1] == "speed":
            level = 1.0
    return level


def _direction(words: list[str], text: str, speed: float, length: float,
               notes: list[str]) -> tuple[float, float, float]:
    """(direction rad, turn rate rad/s, speed m/s) from direction words."""
    direction, turn_rate = 0.0, 0.0
    if any(w in ("backward", "backwards", "reverse") for w in words) or re.search(r"\bwalks? back\b", text):
        direction = math.pi
        notes.append("direction: backward")
    sideways = any(w in ("sideways", "sidestep", "sidestepping") for w in words)
    turning = any(w in ("turn", "turning", "turns", "circle", "circling", "circles", "clockwise",
                        "counterclockwise", "anticlockwise") for w in words)
    left = "left" in words or "counterclockwise" in words or "anticlockwise" in words
    right = "right" in words or ("clockwise" in words and not left)
    in_place = bool(re.search(r"\bin place\b|\bon the spot\b|\bstationary\b", text))
    if in_place:
        speed = 0.0
        notes.append("direction: in place (speed 0)")
    if sideways and (left or right):
        direction = math.pi / 2 if left else -math.pi / 2
        notes.append(f"direction: sideways to the {'left' if left else 'right'}")
    elif turning or ((left or right) and not sideways):
        radius = (2.0 if any(w in ("sharply", "sharp", "tight", "tightly") for w in words) else 4.0) * length
        rate = max(speed / radius, 0.4)
        turn_rate = rate if (left or not right) else -rate
        notes.append(f"turning {'left' if turn_rate > 0 else 'right'} at {abs(turn_rate):.2f} rad/s")
    return direction, turn_rate, speed


__all__ = ["spec_from_prompt", "GAIT_WORDS", "SPEED_WORDS", "DEFAULT_PATTERN", "PATTERNS_BY_LEGS"]
