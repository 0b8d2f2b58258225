"""Leg discovery, gait patterns, IK and the `akd gait` stage, on real URDFs and the built-in skeletons.

The quality bar of issue 3 for every clip: stance-foot skating < 0.01 m/s, penetration < 2 mm, IK foot error
< 5 mm, no joint-limit violation, joint velocities within the URDF limits. Measured by akd_core.motion.metrics (FK of
the written clip, independent of the IK that made it). A fast representative subset runs by default; the full
robots x patterns x 3 speeds sweep is `-m slow`.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from akd_core.io.errors import ConfigError, KinematicTreeError, MotionError
from akd_core.io.rundir import RunDir
from akd_core.model import skeletons
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.legs import find_legs, leg_length
from akd_core.model.load import load_robot
from akd_core.motion.clip import Motion
from akd_core.motion.gait import (
    PATTERNS_BY_LEGS,
    GaitSpec,
    generate_gait,
    generate_gait_result,
    speed_for_level,
    stance_pose,
)
from akd_core.motion.metrics import foot_positions, motion_metrics
from akd_core.motion.stage import stage_gait

from .conftest import example_robot_data_dir, example_robot_urdf


def _robot(name: str):
    return load_robot(name if name in skeletons.SKELETONS else example_robot_urdf(name))


def _quality(robot, motion: Motion) -> dict:
    # skating at the parts of a foot that are down (a human-like walk rolls its soles: heel strike, toe-off)
    return motion_metrics(robot, motion.root_pos, motion.root_quat, motion.joint_pos, motion.fps,
                          motion.foot_names, motion.foot_offsets, motion.foot_contacts,
                          contact_points=motion.contact_points(), contact_parts=motion.contact_parts())


def _assert_quality(robot, result) -> dict:
    m = _quality(robot, result.motion)
    label = f"{robot.name} {result.spec.pattern} {result.spec.speed:.2f} m/s: {m}"
    assert m["foot_skate_mps"] < 0.01, label
    assert m["penetration_m"] < 2e-3, label
    assert result.ik_error_m < 5e-3, label
    assert m["joint_limit_violation_rad"] <= 1e-6, label
    assert m["joint_velocity_ratio"] <= 1.0 + 1e-6, label
    result.motion.validate(robot)
    return m


def _heights(robot, motion: Motion) -> np.ndarray:
    """Foot contact-point heights (F, K) by FK of the clip."""
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        pos, rot = fk(torch.as_tensor(motion.root_pos, dtype=torch.float64),
                      torch.as_tensor(motion.root_quat, dtype=torch.float64),
                      torch.as_tensor(motion.joint_pos, dtype=torch.float64))
    return foot_positions(robot, pos, rot, motion.foot_names, motion.foot_offsets)[..., 2]


# ----------------------------------------------------------------------------- legs
@pytest.mark.parametrize("name, count, labels", [
    ("a1", 4, ["LF", "RF", "LH", "RH"]),
    ("solo12", 4, ["LF", "RF", "LH", "RH"]),
    ("quadruped", 4, ["LF", "RF", "LH", "RH"]),
    ("hexapod", 6, ["LF", "RF", "LM", "RM", "LR", "RR"]),
    ("ostrich", 2, ["L", "R"]),
    ("humanoid", 2, ["L", "R"]),
])
def test_legs_are_found_and_labelled(name, count, labels):
    robot = _robot(name)
    legs = find_legs(robot)
    assert [leg.label for leg in legs] == labels
    assert len(legs) == count
    for leg in legs:
        assert len(leg.joint_names) >= 2
        assert robot.link_names.index(leg.hip_link) < robot.link_names.index(leg.foot_link)
        assert (leg.side == "left") == leg.label.startswith("L")


def test_a1_feet_are_the_foot_spheres_and_map_to_their_names(a1_urdf):
    robot = load_robot(a1_urdf)
    legs = {leg.label: leg for leg in find_legs(robot)}
    assert {k: v.foot_link for k, v in legs.items()} == {"LF": "FL_foot", "RF": "FR_foot", "LH": "RL_foot",
                                                         "RH": "RR_foot"}
    assert all(leg.contact_radius == pytest.approx(0.02) for leg in legs.values())
    assert legs["LF"].joint_names == ("FL_hip_joint", "FL_thigh_joint", "FL_calf_joint")


def test_skeleton_feet_match_the_skeleton_definition():
    """Contact points agree with akd_core.model.skeletons' own foot offsets (humanoid: sole centre below the ankle)."""
    for name in ("quadruped", "humanoid", "hexapod"):
        robot = skeletons.build(name)
        expected = skeletons.foot_offsets(name)
        legs = find_legs(robot)
        assert sorted(leg.foot_link for leg in legs) == sorted(expected)
        for leg in legs:
            np.testing.assert_allclose(leg.foot_offset, expected[leg.foot_link], atol=1e-6)


def test_spine_joints_are_not_leg_joints():
    legs = find_legs(skeletons.build("quadruped"))
    assert not any(j.startswith("spine") for leg in legs for j in leg.joint_names)


@pytest.mark.parametrize("urdf", ["ur_description/urdf/ur5_robot.urdf", "panda_description/urdf/panda.urdf"])
def test_a_robot_arm_has_no_legs(urdf):
    robot = load_robot(example_robot_data_dir() / urdf)
    with pytest.raises(KinematicTreeError, match="--feet"):
        find_legs(robot)


def test_feet_override(a1_urdf):
    robot = load_robot(a1_urdf)
    legs = find_legs(robot, ["FL_foot", "FR_foot"])
    assert [leg.foot_link for leg in legs] == ["FL_foot", "FR_foot"]
    with pytest.raises(ConfigError, match="no_such_link"):
        find_legs(robot, ["no_such_link"])


# ----------------------------------------------------------------------------- stance
def test_a_robot_facing_along_its_base_y_cannot_stand_and_says_why():
    # example-robot-data's "quadroped": 2-DoF legs hinged about the base's x axis (front legs at +y) whose knee
    # limits have no lower/upper (lower == upper == 0: unlimited, as MuJoCo reads them)
    with pytest.warns(UserWarning, match=r"'FL_KFE' has lower == upper .*read as unlimited"):
        robot = load_robot(example_robot_urdf("erd_quadruped"), [str(example_robot_data_dir().parent)])
    knee = robot.joint_names.index("FL_KFE")
    assert robot.lower[knee] == -np.inf and robot.upper[knee] == np.inf
    with pytest.raises(MotionError, match=r"cannot stand .*no leg joint hinges about the base's y axis.*REP 103"):
        stance_pose(robot, find_legs(robot))


def test_stance_pose_stands_on_the_ground_within_limits(a1_urdf):
    robot = load_robot(a1_urdf)
    legs = find_legs(robot)
    stance = stance_pose(robot, legs)
    assert np.all(stance.joint_pos >= robot.lower) and np.all(stance.joint_pos <= robot.upper)
    assert 0.5 * stance.leg_length < stance.body_height < stance.leg_length + 0.05
    clip = Motion(fps=50, joint_names=robot.joint_names, joint_pos=stance.joint_pos[None],
                  root_pos=[[0.0, 0.0, stance.body_height]], root_quat=[[0, 0, 0, 1.0]],
                  foot_names=[leg.foot_link for leg in stance.legs],
                  foot_offsets=[leg.foot_offset for leg in stance.legs])
    heights = _heights(robot, clip)
    np.testing.assert_allclose(heights, 0.0, atol=1e-4)
    assert _quality(robot, clip)["penetration_m"] < 1e-4


# ----------------------------------------------------------------------------- patterns
@pytest.fixture(scope="module")
def a1_clips(a1_urdf):
    robot = load_robot(a1_urdf)
    legs = find_legs(robot)
    length = leg_length(robot, legs)
    clips = {}
    for pattern in ("trot", "pace", "bound", "walk", "gallop"):
        spec = GaitSpec(pattern=pattern, speed=speed_for_level(pattern, legs, length, 0.5))
        clips[pattern] = generate_gait_result(robot, spec, duration=2.0, fps=50, legs=legs)
    return robot, legs, clips


@pytest.mark.parametrize("pattern, together, apart", [
    ("trot", [("LF", "RH"), ("RF", "LH")], [("LF", "RF"), ("LF", "LH")]),
    ("pace", [("LF", "LH"), ("RF", "RH")], [("LF", "RF"), ("LF", "RH")]),
    ("bound", [("LF", "RF"), ("LH", "RH")], [("LF", "LH"), ("LF", "RH")]),
])
def test_pattern_moves_the_right_legs_together(a1_clips, pattern, together, apart):
    robot, legs, clips = a1_clips
    motion = clips[pattern].motion
    index = {leg.label: k for k, leg in enumerate(legs)}
    contacts = motion.foot_contacts
    heights = _heights(robot, motion)
    lifted = heights > 0.01
    for a, b in together:
        ia, ib = index[a], index[b]
        assert np.array_equal(contacts[:, ia], contacts[:, ib]), (pattern, a, b)
        np.testing.assert_allclose(heights[:, ia], heights[:, ib], atol=2e-3)
        assert lifted[:, ia].any()
    for a, b in apart:
        ia, ib = index[a], index[b]
        assert (contacts[:, ia] != contacts[:, ib]).mean() > 0.3, (pattern, a, b)
        # half a cycle apart: one is up while the other is down
        assert (lifted[:, ia] & ~lifted[:, ib]).any() and (lifted[:, ib] & ~lifted[:, ia]).any()


def test_a1_patterns_meet_the_quality_bar(a1_clips):
    robot, _legs, clips = a1_clips
    for result in clips.values():
        m = _assert_quality(robot, result)
        assert m["swing_clearance_m"] > 0.5 * result.spec.step_height
        assert m["speed_mps"] == pytest.approx(result.spec.speed, rel=0.2)  # ramp-in from rest lowers the mean


@pytest.mark.parametrize("level", [0.0, 0.5, 1.0])
def test_trot_at_three_speeds_on_a1(a1_urdf, level):
    robot = load_robot(a1_urdf)
    legs = find_legs(robot)
    speed = speed_for_level("trot", legs, leg_length(robot, legs), level)
    _assert_quality(robot, generate_gait_result(robot, GaitSpec("trot", speed=speed), 1.5, 50, legs))


@pytest.mark.parametrize("name, pattern", [("solo12", "walk"), ("quadruped", "trot"), ("hexapod", "tripod"),
                                           ("ostrich", "run"), ("humanoid", "walk")])
def test_representative_gaits_on_other_robots(name, pattern):
    robot = _robot(name)
    legs = find_legs(robot)
    speed = speed_for_level(pattern, legs, leg_length(robot, legs), 0.5)
    _assert_quality(robot, generate_gait_result(robot, GaitSpec(pattern, speed=speed), 1.2, 50, legs))


@pytest.mark.parametrize("name, prompt", [
    ("anymal_b", "trot forward"), ("anymal_c", "trot forward"), ("b1", "trot forward"), ("go1", "trot forward"),
    ("go2", "trot forward"), ("laikago", "trot forward"), ("hyq", "trot forward"), ("solo", "trot forward"),
    ("bolt", "walk forward"), pytest.param("g1", "walk forward", marks=pytest.mark.slow),  # g1: ~50 s
    ("talos", "walk forward")])
def test_akd_gait_on_more_real_robots(tmp_path, name, prompt):
    """What `akd gait --robot URDF --prompt ...` does on robots AKD was not developed on (example-robot-data)."""
    run = RunDir(tmp_path / name, create=True)
    stage_gait(run, robot_spec=str(example_robot_urdf(name)), prompt=prompt, duration=1.2, fps=50,
               package_paths=[str(example_robot_data_dir().parent.parent)])
    robot = load_robot(run.file("robot.urdf"))
    motion = Motion.load(run.file("reference.npz"), robot)
    m = _quality(robot, motion)
    label = f"{name}: {m}"
    assert m["foot_skate_mps"] < 0.01 and m["penetration_m"] < 2e-3, label
    assert m["joint_limit_violation_rad"] <= 1e-6 and m["joint_velocity_ratio"] <= 0.75 + 1e-6, label
    assert m["speed_mps"] > 0.2, label  # it really moves forward
    motion.validate(robot)


def test_walking_and_galloping_differ_in_duty_factor_and_speed(a1_clips):
    robot, _legs, clips = a1_clips
    walk, gallop = _quality(robot, clips["walk"].motion), _quality(robot, clips["gallop"].motion)
    # a1's calves cannot carry its 2 m/s gallop in 0.35 stances: it gallops slower in longer stances, and says why
    assert walk["duty_factor"] > 0.7 and gallop["duty_factor"] < walk["duty_factor"] - 0.1
    assert gallop["speed_mps"] > 1.5 * walk["speed_mps"]
    assert clips["gallop"].limit is not None and clips["gallop"].limit.kind == "effort"


def test_turning_in_place_keeps_feet_planted(a1_urdf):
    robot = load_robot(a1_urdf)
    result = generate_gait_result(robot, GaitSpec("trot", speed=0.0, turn_rate=0.8), 2.0, 50)
    motion = result.motion
    yaw = 2 * np.arctan2(motion.root_quat[:, 2], motion.root_quat[:, 3])
    ramp = 0.5  # smoothstep ramp: it loses half the ramp time
    assert yaw[-1] == pytest.approx(0.8 * (2.0 - ramp / 2), rel=0.02)
    assert np.linalg.norm(motion.root_pos[-1, :2] - motion.root_pos[0, :2]) < 1e-6
    _assert_quality(robot, result)


def test_backward_walk_moves_backward(a1_urdf):
    robot = load_robot(a1_urdf)
    result = generate_gait_result(robot, GaitSpec("walk", speed=0.3, direction=math.pi), 1.5, 50)
    assert result.motion.root_pos[-1, 0] < -0.2
    _assert_quality(robot, result)


def test_velocity_limits_slow_a_gait_down_or_fail_clearly(a1_urdf):
    robot = load_robot(a1_urdf)
    for joint in robot.joints:
        joint.velocity = 4.0  # rad/s: a slow robot (the a1's URDF says 21)
    fast = GaitSpec("trot", speed=1.2)
    with pytest.raises(MotionError, match="velocity limit"):
        generate_gait(robot, fast, 1.5, 50, slow_down=False)
    result = generate_gait_result(robot, fast, 1.5, 50)
    assert result.spec.speed < 1.2 and result.joint_velocity_ratio <= 1.0
    assert any("slowed down" in note for note in result.spec.notes)
    _assert_quality(robot, result)


@pytest.mark.parametrize("speed", [-0.5, 12.0, float("nan")])
def test_impossible_speeds_are_config_errors(a1_urdf, speed):
    robot = load_robot(a1_urdf)
    with pytest.raises(ConfigError, match="speed"):
        generate_gait(robot, GaitSpec("trot", speed=speed), 1.0, 50)


def test_pattern_must_fit_the_leg_count(a1_urdf):
    with pytest.raises(ConfigError, match="tripod"):
        generate_gait(load_robot(a1_urdf), GaitSpec("tripod", speed=0.2), 1.0, 50)


def test_clip_is_deterministic_and_has_the_requested_frames(a1_urdf):
    robot = load_robot(a1_urdf)
    a = generate_gait(robot, GaitSpec("trot", speed=0.8), 1.0, 40)
    b = generate_gait(robot, GaitSpec("trot", speed=0.8), 1.0, 40)
    assert a.num_frames == 41 and a.fps == 40
    np.testing.assert_array_equal(a.joint_pos, b.joint_pos)


# ----------------------------------------------------------------------------- stage + CLI
def test_stage_gait_writes_a_run_that_loads(tmp_path, a1_urdf):
    run = RunDir(tmp_path / "run", create=True)
    metrics = stage_gait(run, str(a1_urdf), "a dog trotting forward", duration=1.0, fps=50)
    robot = load_robot(run.file("robot.urdf"))
    assert robot.joint_names == load_robot(a1_urdf).joint_names
    motion = Motion.load(run.file("reference.npz"), robot=robot)
    assert motion.num_frames == 51 and motion.prompt == "a dog trotting forward"
    manifest = json.loads(run.file("manifest.json").read_text())
    stage = manifest["stages"]["gait"]
    assert stage["status"] == "done"
    assert stage["config"]["spec"]["pattern"] == "trot" and stage["config"]["spec"]["frequency"] > 0
    assert manifest["prompt"] == "a dog trotting forward" and manifest["seeds"]["gait"] == 0
    assert metrics["foot_skate_mps"] < 0.01 and stage["metrics"]["penetration_m"] < 2e-3
    json.dumps(stage["metrics"])  # plain numbers


def test_stage_gait_rejects_an_empty_prompt(tmp_path, a1_urdf):
    with pytest.raises(ConfigError, match="prompt"):
        stage_gait(RunDir(tmp_path / "run", create=True), str(a1_urdf), "  ")


def test_akd_gait_command(tmp_path, a1_urdf, capsys):
    from akd_core.cli import main

    out = tmp_path / "cli"
    code = main(["gait", "--robot", str(a1_urdf), "--prompt", "a dog pacing slowly", "--out", str(out),
                 "--duration", "0.8", "--no-preview", "--feet", "FL_foot,FR_foot,RL_foot,RR_foot"])
    assert code == 0
    assert "pace" in capsys.readouterr().out
    assert Motion.load(out / "reference.npz").foot_names == ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]


# ----------------------------------------------------------------------------- full sweep
@pytest.mark.slow
@pytest.mark.parametrize("name", ["a1", "solo12", "quadruped", "hexapod", "ostrich", "humanoid"])
def test_every_pattern_at_three_speeds(name):
    """Every gait at the slowest, middle and quickest speed of its range makes a clean clip, or is refused with a
    MotionError that says the robot cannot do it within its joint limits and names the joint (where neither a slower
    gait nor another style fits the velocity limits); at most one speed of a gait is refused."""
    robot = _robot(name)
    legs = find_legs(robot)
    length = leg_length(robot, legs)
    for pattern in PATTERNS_BY_LEGS[len(legs)]:
        refused = []
        for level in (0.0, 0.5, 1.0):
            spec = GaitSpec(pattern, speed=speed_for_level(pattern, legs, length, level))
            try:
                result = generate_gait_result(robot, spec, 3.0, 50, legs)
            except MotionError as exc:
                message = str(exc)
                assert f"cannot {pattern} within its joint limits" in message, message
                assert any(f"'{joint}'" in message for joint in robot.joint_names), message
                refused.append(level)
                continue
            _assert_quality(robot, result)
        assert len(refused) <= 1, f"{robot.name} {pattern}: refused at levels {refused}"


# ----------------------------------------------------------------------------- balanced biped walks (issue 16)
@pytest.mark.parametrize("name", ["humanoid", pytest.param("ostrich", marks=pytest.mark.slow),  # ostrich ~30 s
                                  pytest.param("g1", marks=pytest.mark.slow)])  # g1: ~1 min
def test_biped_walk_keeps_the_cop_over_the_stance_foot(name):
    """The CoM of a biped walk comes from cart-table preview control (akd_core.motion.zmp), so the whole-body CoP stays
    in the support polygon (before: 0 % of the single-support frames, 18 % / 3 % / 11 % of all stance frames of
    humanoid / ostrich / g1; after: 100 % for the built-in two, docs/gait.md)."""
    from akd_core.motion.feasibility import feasibility
    from akd_core.motion.gait import TRACKING_VELOCITY_RATIO
    from akd_core.motion.prompt import spec_from_prompt

    robot = _robot(name)
    legs = find_legs(robot)
    spec, _ = spec_from_prompt("walk forward", robot, legs)
    result = generate_gait_result(robot, spec, 1.5, 50, legs, max_velocity_ratio=TRACKING_VELOCITY_RATIO)
    m = _assert_quality(robot, result)
    per_frame, summary = feasibility(robot, result.motion)
    single = result.motion.foot_contacts.sum(1) == 1
    label = f"{name}: {summary}, {m}"
    assert summary["cop_inside_frac"] >= 0.95, label
    assert (per_frame["margin_m"][single] >= 0).mean() >= 0.95, label
    assert summary["residual_wrench_frac_max"] < 0.05, label
    assert m["speed_mps"] > 0.2, label


def test_biped_walk_sways_over_the_stance_foot_and_keeps_height_yaw_and_feet(monkeypatch):
    """The crouched ZMP walk of bipeds without human-like legs (here the humanoid with HUMAN_WALK off: its own walk
    is akd_core.motion.humanoid's, tests/test_humanoid_walk.py)."""
    import akd_core.motion.gait as gait_module

    monkeypatch.setattr(gait_module, "HUMAN_WALK", False)
    robot = _robot("humanoid")
    legs = find_legs(robot)
    spec = GaitSpec("walk", speed=0.4)
    balanced = generate_gait_result(robot, spec, 3.0, 50, legs)
    monkeypatch.setattr(gait_module, "ZMP_BALANCE", False)
    level = generate_gait_result(robot, spec, 3.0, 50, legs)
    a, b = balanced.motion, level.motion
    assert balanced.spec.speed == level.spec.speed == 0.4
    np.testing.assert_array_equal(a.foot_contacts, b.foot_contacts)
    np.testing.assert_array_equal(a.root_pos[:, 2], b.root_pos[:, 2])
    np.testing.assert_array_equal(a.root_quat, b.root_quat)
    feet = []
    for motion in (a, b):
        fk = ForwardKinematics(robot).double()
        with torch.no_grad():
            pos, rot = fk(torch.as_tensor(motion.root_pos, dtype=torch.float64),
                          torch.as_tensor(motion.root_quat, dtype=torch.float64),
                          torch.as_tensor(motion.joint_pos, dtype=torch.float64))
        feet.append(np.asarray(foot_positions(robot, pos, rot, motion.foot_names, motion.foot_offsets)))
    np.testing.assert_allclose(feet[0], feet[1], atol=1e-3)  # the feet stay where they were: IK absorbs the sway
    sway = a.root_pos[:, 1] - b.root_pos[:, 1]
    side = a.foot_contacts[:, 0].astype(float) - a.foot_contacts[:, 1]  # +1: left foot only, -1: right only
    half_spacing = np.abs(feet[0][:, 0, 1] - feet[0][:, 1, 1]).min() / 2
    assert np.corrcoef(sway, side)[0, 1] > 0.5  # toward the stance foot
    assert 0.01 < np.abs(sway).max() < half_spacing


@pytest.mark.parametrize("name, pattern", [("quadruped", "trot"),
                                           pytest.param("ostrich", "run", marks=pytest.mark.slow)])  # ~20 s
def test_only_biped_walks_are_rebalanced(monkeypatch, name, pattern):
    import akd_core.motion.gait as gait_module

    robot = _robot(name)
    legs = find_legs(robot)
    spec = GaitSpec(pattern, speed=speed_for_level(pattern, legs, leg_length(robot, legs), 0.5))
    on = generate_gait(robot, spec, 1.0, 50, legs)
    monkeypatch.setattr(gait_module, "ZMP_BALANCE", False)
    off = generate_gait(robot, spec, 1.0, 50, legs)
    for field in ("joint_pos", "root_pos", "root_quat", "foot_contacts"):
        np.testing.assert_array_equal(getattr(on, field), getattr(off, field))
