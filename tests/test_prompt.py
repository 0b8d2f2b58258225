"""Prompt -> GaitSpec: gait, speed and direction words, morphology defaults, Froude scaling, bad prompts."""

from __future__ import annotations

import math

import pytest

from akd_core.io.errors import ConfigError
from akd_core.model import skeletons
from akd_core.model.legs import find_legs, leg_length
from akd_core.model.load import load_robot
from akd_core.motion.gait import PATTERNS, froude_speed
from akd_core.motion.prompt import spec_from_prompt

from .conftest import example_robot_urdf


@pytest.fixture(scope="module")
def robots():
    out = {name: skeletons.build(name) for name in ("quadruped", "ostrich", "humanoid", "hexapod")}
    out["a1"] = load_robot(example_robot_urdf("a1"))
    return out


def _spec(robots, name: str, prompt: str):
    robot = robots[name]
    return spec_from_prompt(prompt, robot, find_legs(robot))


@pytest.mark.parametrize("name, prompt, pattern", [
    ("quadruped", "a dog trotting forward quickly", "trot"),
    ("a1", "a robot walking slowly and turning left", "walk"),
    ("ostrich", "an ostrich running", "run"),
    ("hexapod", "hexapod crawling", "wave"),
    ("hexapod", "a hexapod scurrying", "tripod"),
    ("quadruped", "a dog galloping", "gallop"),
    ("quadruped", "a horse running", "gallop"),
    ("quadruped", "a dog pacing", "pace"),
    ("quadruped", "a deer bounding", "bound"),
    ("quadruped", "a goat pronking", "pronk"),
    ("quadruped", "a cat creeping", "crawl"),
    ("humanoid", "a person hopping", "hop"),
    ("humanoid", "a person walking", "walk"),
])
def test_gait_words(robots, name, prompt, pattern):
    spec, notes = _spec(robots, name, prompt)
    assert spec.pattern == pattern
    assert not any(n.startswith("warning") for n in notes), notes


def test_speed_words_order_speeds(robots):
    speeds = [_spec(robots, "quadruped", f"a dog trotting {word}")[0].speed
              for word in ("very slowly", "slowly", "", "quickly", "very fast")]
    assert speeds == sorted(speeds) and len(set(speeds)) == 5


def test_default_speed_is_the_middle_of_the_froude_range(robots):
    robot = robots["quadruped"]
    legs = find_legs(robot)
    spec, _ = spec_from_prompt("a dog trotting", robot, legs)
    lo, hi = PATTERNS["trot"].froude
    froude = spec.speed ** 2 / (9.81 * leg_length(robot, legs))
    assert froude == pytest.approx(math.sqrt(lo * hi), rel=1e-6)


def test_speed_scales_with_leg_length_by_froude(robots):
    """Same prompt, two sizes: speeds in the ratio sqrt(L1 / L2) (equal Froude numbers)."""
    small, big = robots["a1"], robots["ostrich"]
    v_small = spec_from_prompt("walking", small)[0].speed
    v_big = spec_from_prompt("walking", big)[0].speed
    l_small, l_big = leg_length(small, find_legs(small)), leg_length(big, find_legs(big))
    froude_walk = PATTERNS["walk"].froude, PATTERNS["biped_walk"].froude
    expected = (froude_speed(math.sqrt(froude_walk[1][0] * froude_walk[1][1]), l_big)
                / froude_speed(math.sqrt(froude_walk[0][0] * froude_walk[0][1]), l_small))
    assert v_big / v_small == pytest.approx(expected, rel=1e-6)
    assert v_big > v_small


def test_walking_and_running_differ(robots):
    walk, _ = _spec(robots, "quadruped", "a dog walking")
    run, _ = _spec(robots, "quadruped", "a dog running")
    assert PATTERNS[run.pattern].duty_factor < PATTERNS[walk.pattern].duty_factor - 0.3
    assert run.speed > 2 * walk.speed


def test_directions(robots):
    assert _spec(robots, "a1", "a dog walking backward")[0].direction == pytest.approx(math.pi)
    left, _ = _spec(robots, "a1", "a dog trotting and turning left")
    right, _ = _spec(robots, "a1", "a dog trotting and turning right")
    assert left.turn_rate > 0 > right.turn_rate and left.turn_rate == pytest.approx(-right.turn_rate)
    still, _ = _spec(robots, "a1", "a dog trotting in place")
    assert still.speed == 0.0
    side, _ = _spec(robots, "a1", "a dog trotting sideways to the right")
    assert side.direction == pytest.approx(-math.pi / 2) and side.turn_rate == 0.0
    assert _spec(robots, "a1", "a dog walking forward")[0].direction == 0.0


def test_explicit_speed(robots):
    spec, notes = _spec(robots, "a1", "trot at 0.8 m/s")
    assert spec.speed == pytest.approx(0.8) and any("as asked" in n for n in notes)


def test_unknown_words_fall_back_with_a_warning(robots):
    spec, notes = _spec(robots, "quadruped", "a dog flibbering")
    assert spec.pattern == "trot"
    assert any(n.startswith("warning") and "default" in n for n in notes)
    assert any("flibbering" in n for n in notes)
    spec, notes = _spec(robots, "hexapod", "zorping")
    assert spec.pattern == "tripod"


@pytest.mark.parametrize("prompt", ["", "   ", None])
def test_empty_prompt_is_a_config_error(robots, prompt):
    with pytest.raises(ConfigError, match="prompt"):
        _spec(robots, "a1", prompt)


def test_notes_are_recorded_in_the_spec(robots):
    spec, notes = _spec(robots, "a1", "a dog trotting quickly")
    assert spec.notes == notes and spec.to_dict()["notes"] == notes
