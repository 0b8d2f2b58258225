"""Gait classification of a clip (akd_core.motion.classify): gait-library clips of the built-in quadruped and of
a1 are recognised at 25 fps and at 8 fps, phases follow the library's, standing and random motions are not
taken for gaits, bipeds alternate or hop, other robots are "unknown" with the reason."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.ndimage import gaussian_filter1d

from akd_core.model.load import load_robot
from akd_core.model.robot import load_urdf
from akd_core.motion.classify import GAITS, classify_gait, wrap_cycles
from akd_core.motion.clip import Motion
from akd_core.motion.gait import PATTERNS, GaitSpec, generate_gait
from akd_core.sds.clip_render import constant_velocity_init, fit_clip, standing_height
from tests.conftest import example_robot_urdf

PATTERNS_TESTED = ("trot", "pace", "bound", "walk")
CLIP_SECONDS = 2.0
CONFIDENT = 0.5  # a gait named with at least this confidence is a claim


@pytest.fixture(scope="module")
def robots() -> dict:
    return {"quadruped": load_robot("quadruped"), "a1": load_urdf(example_robot_urdf("a1"))}


@pytest.fixture(scope="module")
def library_clips(robots) -> dict:
    """(robot, pattern) -> a 2 s gait-library clip at 25 fps, stepping in place at the pattern's cadence
    (about 1.2 Hz); generated once (about 1-3 s each)."""
    return {(name, pattern): generate_gait(robot, GaitSpec(pattern=pattern), duration=CLIP_SECONDS, fps=25.0)
            for name, robot in robots.items() for pattern in PATTERNS_TESTED}


def _at(motion: Motion, fps: float, seconds: float = CLIP_SECONDS) -> Motion:
    """The clip resampled to ``fps`` and cut to ``seconds`` (what a video model sees)."""
    return fit_clip(motion, int(round(seconds * fps)) + 1, fps)


@pytest.mark.parametrize("fps", [25.0, 8.0])
@pytest.mark.parametrize("robot_name", ["quadruped", "a1"])
@pytest.mark.parametrize("pattern", PATTERNS_TESTED)
def test_library_gaits_are_recognised(robots, library_clips, robot_name, pattern, fps):
    clip = _at(library_clips[(robot_name, pattern)], fps)
    result = classify_gait(robots[robot_name], clip)
    assert result.gait == pattern, (result.summary(), result.reason, result.phases)
    assert result.confidence >= (0.9 if fps == 25.0 else 0.75), (result.summary(), result.reason)
    assert result.frequency_hz == pytest.approx(1.2, abs=0.15)  # the library's cadence for these clips
    assert result.signal.shape == (clip.num_frames, 4) and result.labels == ["LF", "RF", "LH", "RH"]


@pytest.mark.parametrize("pattern", PATTERNS_TESTED)
def test_measured_phases_are_the_libraries(robots, library_clips, pattern):
    """The phase convention: a leg whose library phase offset is larger by 0.25 is measured 0.25 ahead (so the
    library's lateral-sequence walk is told from a diagonal-sequence one)."""
    result = classify_gait(robots["a1"], library_clips[("a1", pattern)])
    offsets = PATTERNS[pattern].phases
    for label, phase in result.phases.items():
        expected = offsets[label] - offsets["LF"]
        assert abs(wrap_cycles(phase - expected)) < 0.04, (label, phase, expected)


def test_pair_phases_describe_the_trot_and_the_pace(robots, library_clips):
    trot = classify_gait(robots["quadruped"], library_clips[("quadruped", "trot")]).pair_phase
    assert abs(trot["diagonal_lf_rh"]) < 0.04 and abs(trot["diagonal_rf_lh"]) < 0.04
    assert abs(trot["front"]) > 0.46 and abs(trot["left"]) > 0.46
    pace = classify_gait(robots["quadruped"], library_clips[("quadruped", "pace")]).pair_phase
    assert abs(pace["left"]) < 0.04 and abs(pace["right"]) < 0.04 and abs(pace["diagonal_lf_rh"]) > 0.46


def test_a_short_clip_of_nine_frames_still_names_the_gait(robots, library_clips):
    """One second at 8 fps (9 frames, about 1.2 cycles), as a small video prior renders it."""
    for pattern in ("trot", "pace", "bound"):
        clip = _at(library_clips[("quadruped", pattern)], 8.0, seconds=1.0)
        result = classify_gait(robots["quadruped"], clip)
        assert clip.num_frames == 9 and result.gait == pattern and result.confidence >= CONFIDENT, result.summary()


def test_time_reversed_and_mirrored_walks_are_walks(robots, library_clips):
    """A walk played backwards is a diagonal-sequence walk; one that leads with the other side is mirrored:
    both are walks (the templates include every gait's mirror image and time reversal)."""
    clip = library_clips[("a1", "walk")]
    reversed_clip = Motion(fps=clip.fps, joint_names=clip.joint_names, joint_pos=clip.joint_pos[::-1],
                           root_pos=clip.root_pos[::-1], root_quat=clip.root_quat[::-1], foot_names=clip.foot_names,
                           foot_offsets=clip.foot_offsets)
    result = classify_gait(robots["a1"], reversed_clip)
    assert result.gait == "walk" and result.confidence >= 0.9, result.summary()
    # reversed: LF now lags LH by a quarter cycle instead of leading it
    assert result.pair_phase["left"] == pytest.approx(0.25, abs=0.04)
    forward = classify_gait(robots["a1"], clip)
    assert forward.pair_phase["left"] == pytest.approx(-0.25, abs=0.04)


def test_a_drifting_body_does_not_hide_the_gait(robots, library_clips):
    """The root sinking 4 cm over the clip (a distilled clip's drift) adds a trend to every foot height."""
    clip = library_clips[("quadruped", "trot")]
    sinking = Motion(fps=clip.fps, joint_names=clip.joint_names, joint_pos=clip.joint_pos,
                     root_pos=clip.root_pos - np.linspace(0.0, 0.04, clip.num_frames)[:, None] * [0, 0, 1],
                     root_quat=clip.root_quat, foot_names=clip.foot_names, foot_offsets=clip.foot_offsets)
    result = classify_gait(robots["quadruped"], sinking)
    assert result.gait == "trot" and result.confidence >= 0.9, result.summary()


def test_contact_signal_follows_the_library_schedule(robots, library_clips):
    clip = library_clips[("quadruped", "trot")]
    result = classify_gait(robots["quadruped"], clip)
    order = [clip.foot_names.index(name) for name in result.foot_names]
    agreement = (result.contacts == clip.foot_contacts[:, order]).mean()
    assert agreement > 0.85, agreement
    assert result.signal.min() > -0.005 and result.signal.max() > 0.03  # stance on the ground, swing lifted


@pytest.mark.parametrize("robot_name", ["quadruped", "a1"])
def test_standing_is_standing(robots, robot_name):
    robot = robots[robot_name]
    still = constant_velocity_init(robot, 51, 25.0, speed=0.0, height=standing_height(robot))
    result = classify_gait(robot, still)
    assert result.gait == "standing" and result.confidence > 0.95, result.summary()
    # a little sway and joint jitter (a distilled "standing" clip) is still standing
    rng = np.random.default_rng(0)
    swaying = Motion(fps=still.fps, joint_names=still.joint_names,
                     joint_pos=still.joint_pos + rng.normal(0.0, 0.003, still.joint_pos.shape),
                     root_pos=still.root_pos + 0.002 * np.sin(np.arange(51) / 4.0)[:, None] * [0, 0, 1],
                     root_quat=still.root_quat)
    result = classify_gait(robot, swaying)
    assert result.gait == "standing" and result.confidence > 0.3, result.summary()


def _random_clip(robot, kind: str, seed: int, fps: float) -> Motion:
    """Random joint motion about the rest pose, body gliding forward: i.i.d. noise or smooth random curves."""
    rng = np.random.default_rng(seed)
    frames = int(CLIP_SECONDS * fps) + 1
    base = constant_velocity_init(robot, frames, fps, speed=0.3, height=standing_height(robot))
    if kind == "noise":
        offsets = rng.normal(0.0, 0.2, base.joint_pos.shape)
    else:
        offsets = gaussian_filter1d(rng.normal(0.0, 0.6, base.joint_pos.shape), sigma=0.12 * fps, axis=0)
    base.joint_pos = np.clip(base.joint_pos + offsets, robot.lower, robot.upper)
    return base


@pytest.mark.parametrize("kind", ["noise", "smooth"])
@pytest.mark.parametrize("robot_name", ["quadruped", "a1"])
def test_random_motions_are_not_confident_gaits(robots, robot_name, kind):
    """Random joint motions (5 seeds x 25 and 8 fps) are never named a gait with confidence >= 0.5 (measured over
    30 seeds: none at 25 fps, about 2 % at 8 fps for these kinds)."""
    robot = robots[robot_name]
    for fps in (25.0, 8.0):
        for seed in range(5):
            result = classify_gait(robot, _random_clip(robot, kind, seed, fps))
            claimed = result.gait not in ("unknown", "standing") and result.confidence >= CONFIDENT
            assert not claimed, (fps, seed, result.summary(), result.reason)


def test_bipeds_alternate_or_hop():
    humanoid = load_robot("humanoid")
    walk = classify_gait(humanoid, generate_gait(humanoid, GaitSpec(pattern="walk"), duration=2.0, fps=25.0))
    assert walk.gait == "walk" and walk.confidence >= 0.8 and abs(walk.pair_phase["left_right"]) > 0.45, walk.reason
    hop = classify_gait(humanoid, generate_gait(humanoid, GaitSpec(pattern="hop"), duration=2.0, fps=25.0))
    assert hop.gait == "hop" and hop.confidence >= 0.8 and abs(hop.pair_phase["left_right"]) < 0.05, hop.reason


def test_other_robots_and_short_clips_are_unknown_with_the_reason(robots):
    hexapod = load_robot("hexapod")
    clip = constant_velocity_init(hexapod, 30, 25.0, speed=0.3, height=standing_height(hexapod))
    result = classify_gait(hexapod, clip)
    assert result.gait == "unknown" and result.confidence == 0.0
    assert "quadrupeds" in result.reason and "LM" in result.reason
    quadruped = robots["quadruped"]
    short = constant_velocity_init(quadruped, 5, 8.0, speed=0.3, height=standing_height(quadruped))
    result = classify_gait(quadruped, short)
    assert result.gait == "unknown" and "5 frames" in result.reason


def test_result_is_json_ready_and_names_a_known_gait(robots, library_clips):
    result = classify_gait(robots["quadruped"], library_clips[("quadruped", "bound")])
    data = json.loads(json.dumps(result.to_dict()))
    assert data["gait"] == "bound" and data["gait"] in GAITS
    assert set(data["pair_phase"]) == {"front", "hind", "left", "right", "diagonal_lf_rh", "diagonal_rf_lh"}
    assert sum(result.scores.values()) == pytest.approx(1.0)
    assert result.summary().startswith("bound (confidence ")
