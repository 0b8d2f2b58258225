"""Robots of the zoo (docs/zoo.md) that failed for reasons of AKD's own: a slow trot's horizon (ANYmal C), ASCII STL
meshes MuJoCo cannot read (simple_humanoid), feet no collision geometry carries (simple_humanoid, its classical
variant) and a robot whose joints are all fixed (iris)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from akd_core.io.errors import AKDError, KinematicTreeError, URDFError
from akd_core.model.legs import find_legs, robot_info
from akd_core.model.robot import is_ascii_stl, load_urdf
from akd_core.motion.clip import Motion
from akd_core.physics import tracker as TR
from akd_core.physics.metrics import require_colliding_feet
from tests.conftest import example_robot_data_dir, example_robot_urdf
from tests.test_gradient import trot_in_place

SIMPLE_HUMANOID = "simple_humanoid_description/urdf/simple_humanoid.urdf"
SIMPLE_HUMANOID_CLASSICAL = "simple_humanoid_description/urdf/simple_humanoid_classical.urdf"
IRIS_SIMPLE = "iris_description/robots/iris_simple.urdf"

ASCII_BOX = """solid box
{facets}endsolid box
"""


@pytest.fixture(scope="module")
def a1():
    return load_urdf(example_robot_urdf("a1"))


def _standing(robot, feet: list[str], frames: int = 3) -> Motion:
    """The rest pose held for a few frames, every foot down."""
    rest = np.clip(np.zeros(robot.num_dofs), robot.lower, robot.upper)
    return Motion(fps=50.0, joint_names=robot.joint_names, joint_pos=np.tile(rest, (frames, 1)),
                  root_pos=np.tile([0.0, 0.0, 1.0], (frames, 1)), root_quat=np.tile([0.0, 0.0, 0.0, 1.0], (frames, 1)),
                  foot_names=feet, foot_offsets=np.zeros((len(feet), 3)),
                  foot_contacts=np.ones((frames, len(feet)), dtype=bool))


# ----------------------------------------------------------------------------- horizon and swing
def test_the_horizon_sees_a_slow_trots_swinging_feet_land_and_walks_keep_the_default(a1):
    """Three or more feet: 0.4 s, or SWING_HORIZON_FACTOR x the swing on line support, on the knot grid, where
    longer. A 2 Hz trot (0.25 s swings) keeps 0.4 s; a 1 Hz one (0.5 s swings) plans 0.7-0.8 s ahead; a walk's swings,
    with three feet down, do not count; an explicit --horizon wins."""
    quick, slow = trot_in_place(a1, duration=3.0, freq=2.0), trot_in_place(a1, duration=3.0, freq=1.0)
    assert TR.swing_seconds(quick) == pytest.approx(0.25, abs=0.021)
    assert TR.swing_seconds(slow) == pytest.approx(0.5, abs=0.021)
    assert TR.sized(TR.TrackingConfig(), a1, quick, "cpu")[1] == 0.4
    horizon = TR.sized(TR.TrackingConfig(), a1, slow, "cpu")[1]
    assert horizon in (0.7, 0.8) and horizon >= TR.SWING_HORIZON_FACTOR * TR.swing_seconds(slow) - 0.05
    assert TR.sized(TR.TrackingConfig(horizon_s=0.3), a1, slow, "cpu")[1] == 0.3
    trot = trot_in_place(a1, duration=3.0, freq=0.5)
    lifted = np.zeros_like(trot.foot_contacts)  # one foot at a time, a quarter period each: three feet stay down
    lifted[np.arange(trot.num_frames), (np.arange(trot.num_frames) / trot.fps * 0.5 % 1.0 * 4).astype(int)] = True
    walk = Motion(fps=trot.fps, joint_names=trot.joint_names, joint_pos=trot.joint_pos, root_pos=trot.root_pos,
                  root_quat=trot.root_quat, foot_names=trot.foot_names, foot_offsets=trot.foot_offsets,
                  foot_contacts=~lifted)
    assert TR.swing_seconds(walk) is None and TR.sized(TR.TrackingConfig(), a1, walk, "cpu")[1] == 0.4


def test_a_clip_with_flight_phases_plans_on_finer_knots_further_ahead_at_a_higher_rate(a1):
    """A pronk (every foot up together, a flight each stride) plans with knots FLIGHT_KNOT_S apart, at least
    FLIGHT_HORIZON_S ahead, controlled at FLIGHT_CONTROL_HZ, in build's setup too; a trot keeps KNOT_S, its swing's
    shorter horizon and the reference's 50 Hz; explicit settings win and a non-positive knot_s is refused."""
    from akd_core.io.errors import ConfigError
    from akd_core.motion.gait import GaitSpec, generate_gait

    legs = find_legs(a1)
    pronk = generate_gait(a1, GaitSpec("pronk", speed=0.6), 2.0, 50, legs)
    trot = generate_gait(a1, GaitSpec("trot", speed=0.6), 2.0, 50, legs)
    assert (~pronk.foot_contacts.any(axis=1)).mean() > 0.2 and not (~trot.foot_contacts.any(axis=1)).any()
    assert TR.knot_seconds(TR.TrackingConfig(), a1, pronk) == TR.FLIGHT_KNOT_S < TR.KNOT_S
    assert TR.knot_seconds(TR.TrackingConfig(), a1, trot) == TR.KNOT_S
    flying, steady = TR.build(a1, pronk, TR.TrackingConfig()), TR.build(a1, trot, TR.TrackingConfig())
    assert flying.reference.fps == TR.FLIGHT_CONTROL_HZ == 100.0 and steady.reference.fps == 50.0
    assert flying.knot == round(TR.FLIGHT_KNOT_S * 100) and steady.knot == round(TR.KNOT_S * 50)
    assert flying.horizon == round(TR.FLIGHT_HORIZON_S * 100)
    assert steady.horizon == round(TR.default_horizon_s(trot, False) * 50) < round(TR.FLIGHT_HORIZON_S * 50)
    assert TR.build(a1, pronk, TR.TrackingConfig(control_hz=50.0)).reference.fps == 50.0
    assert TR.knot_seconds(TR.TrackingConfig(knot_s=0.08), a1, pronk) == 0.08
    with pytest.raises(ConfigError, match="knot_s"):
        TR.knot_seconds(TR.TrackingConfig(knot_s=0.0), a1, trot)


def test_a_clip_controlled_above_its_frame_rate_gets_its_torques_from_its_own_frames(a1):
    """A 50 fps pronk controlled at 100 Hz: the inverse-dynamics torques are those of the clip's own frames,
    interpolated. Computed on the linearly upsampled clip instead, the accelerations are zero between the clip's
    frames and twice the real ones at them, and the torques jump every other control period (10 x the second
    difference, 2026-11-30)."""
    from akd_core.motion.gait import GaitSpec, generate_gait
    from akd_core.physics.inverse import inverse_dynamics_torques
    from akd_core.physics.metrics import contact_schedule

    pronk = generate_gait(a1, GaitSpec("pronk", speed=0.6), 1.0, 50, find_legs(a1))
    setup = TR.build(a1, pronk, TR.TrackingConfig())
    assert setup.reference.fps == 100.0
    schedule = contact_schedule(a1, setup.reference)
    feet = TR.Feet(schedule.names, schedule.points)
    lift = np.array([0.0, 0.0, setup.height_shift])
    own, _ = inverse_dynamics_torques(a1, pronk, setup.physics, feet, root_pos=pronk.root_pos + lift,
                                      stance=contact_schedule(a1, pronk).intended)
    smooth = TR.control_rate_torques(a1, pronk, setup.reference, setup.physics, feet, setup.height_shift,
                                     schedule.intended)
    naive, _ = inverse_dynamics_torques(a1, setup.reference, setup.physics, feet,
                                        root_pos=setup.reference.root_pos + lift, stance=schedule.intended)
    assert smooth.shape == naive.shape == (setup.reference.num_frames, a1.num_dofs)
    np.testing.assert_allclose(smooth[::2], own[:len(smooth[::2])], atol=1e-9)
    np.testing.assert_allclose(smooth[1:-1:2], 0.5 * (smooth[:-2:2] + smooth[2::2]), atol=1e-9)
    jumps = lambda tau: np.abs(tau[2:] - 2 * tau[1:-1] + tau[:-2]).mean()  # noqa: E731
    assert jumps(naive) > 3 * jumps(smooth), (jumps(naive), jumps(smooth))


@pytest.mark.slow
def test_anymal_c_trot_forward_tracks_within_the_steady_limit_on_the_first_attempt():
    """docs/zoo.md's failing cell: ANYmal C "trot forward" 4 s (velocity-limited, 0.81 m/s, 0.38 s swings), MPC
    always planned. With the 0.4 s horizon the first attempt was 0.075 m and the second 0.038 m (failed); with 0.6 s
    the first is 0.029 m (2026-11-29)."""
    from tests.test_tracking import _clip

    robot, motion = _clip("anymal_c", "trot", None, prompt="trot forward")
    _, m = TR.track_motion(robot, motion, TR.TrackingConfig(feedforward_ok_m=0.0), progress=False)
    assert m["horizon_s"] == pytest.approx(0.6) and m["attempts"] is None, m
    assert m["link_pos_err_m"] <= 0.03 and m["stance_slip_mps"] <= 0.03 and not m["fell"], m


# ----------------------------------------------------------------------------- meshes MuJoCo reads
def test_ascii_stl_meshes_are_converted_to_binary_for_mujoco(tmp_path):
    """MuJoCo's STL decoder takes binary files only ("number of faces should be between 1 and 200000 ... perhaps
    this is an ASCII file?"); the MJCF AKD writes points at a binary copy, and a binary STL is used as it is."""
    import mujoco
    import trimesh

    facets = "".join("facet normal 0 0 0\nouter loop\n" + "".join(f"vertex {' '.join(map(str, v))}\n" for v in tri)
                     + "endloop\nendfacet\n" for tri in trimesh.creation.box().triangles)
    ascii_stl = tmp_path / "box.stl"
    ascii_stl.write_text(ASCII_BOX.format(facets=facets))
    binary_stl = tmp_path / "binary.stl"
    trimesh.creation.box().export(binary_stl)
    assert is_ascii_stl(ascii_stl) and not is_ascii_stl(binary_stl)
    urdf = tmp_path / "bot.urdf"
    urdf.write_text(f"""<robot name="bot">
  <link name="base"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
    </inertial><collision><geometry><mesh filename="{ascii_stl}"/></geometry></collision>
    <collision><origin xyz="0.2 0 0"/><geometry><mesh filename="{binary_stl}"/></geometry></collision></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="10" velocity="5"/></joint>
  <link name="arm"><inertial><mass value="0.5"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
</robot>""")
    xml = load_urdf(urdf).to_mjcf(mesh_cache=tmp_path / "cache")
    model = mujoco.MjModel.from_xml_string(xml)
    assert model.nmesh == 2 and str(binary_stl) in xml and str(ascii_stl) not in xml
    assert example_robot_data_dir().joinpath(SIMPLE_HUMANOID).is_file()
    humanoid = load_urdf(example_robot_data_dir() / SIMPLE_HUMANOID)  # its box.stl is ASCII
    assert mujoco.MjModel.from_xml_string(humanoid.to_mjcf(mesh_cache=tmp_path / "cache")).nmesh == 1


@pytest.mark.parametrize("relpath", [SIMPLE_HUMANOID, SIMPLE_HUMANOID_CLASSICAL])
def test_feet_no_collision_geometry_carries_are_named_before_tracking(relpath):
    """simple_humanoid's only collision geometry is a 1 m cylinder on its body (it would be tracked sitting on it),
    its classical variant has none at all: both are refused before an engine is built (tracker.build and the
    gradient method's build_problem call this first), naming the feet and the fix."""
    robot = load_urdf(example_robot_data_dir() / relpath)
    with pytest.raises(URDFError, match=r"\['l_ankle', 'r_ankle'\].*no collision geometry.*<collision>"):
        require_colliding_feet(robot, _standing(robot, ["l_ankle", "r_ankle"]))
    a1 = load_urdf(example_robot_urdf("a1"))
    require_colliding_feet(a1, _standing(a1, ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]))  # sphere feet: fine


# ----------------------------------------------------------------------------- robots without legs
def test_a_robot_whose_joints_are_all_fixed_has_no_legs_and_says_so():
    """iris_simple (a drone, every joint fixed) raised a bare IndexError from the forward kinematics of zero joints."""
    robot = load_urdf(example_robot_data_dir() / IRIS_SIMPLE)
    assert robot.num_dofs == 0
    with pytest.raises(KinematicTreeError, match="robot 'iris' has no legs: none of its 5 joints is actuated"):
        find_legs(robot)
    with pytest.raises(KinematicTreeError, match="no legs"):
        find_legs(robot, ["iris__rotor_0"])
    info = robot_info(robot)
    assert info["feet"] is None and "no legs" in info["feet_note"]


def test_akd_gait_on_a_robot_without_legs_exits_with_the_reason(tmp_path, capsys):
    from akd_core.cli import main

    code = main(["gait", "--robot", str(example_robot_data_dir() / IRIS_SIMPLE), "--prompt", "walk forward",
                 "--out", str(tmp_path / "run"), "--duration", "0.5", "--no-preview"])
    assert code == 2 and "has no legs" in capsys.readouterr().err
    assert issubclass(KinematicTreeError, AKDError)


# ----------------------------------------------------------------------------- damped servos (robotis_op3)
def _op3():
    from akd_core.model.load import load_robot
    from tests.conftest import mjcf_robot_xml

    return load_robot(str(mjcf_robot_xml("op3")))


def test_joint_damping_and_rotor_inertia_count_in_the_torque_a_motor_gives_as_mujoco_computes_them():
    """motor_torques of a moving pose: MuJoCo's passive damping force (-b qd) and the armature's share of M qdd for the
    same joint velocities and accelerations, sign-flipped (what the motor must supply)."""
    import mujoco

    from akd_core.motion.feasibility import joint_torques, motor_torques

    robot = _op3()
    rng = np.random.default_rng(0)
    frames, fps = 9, 50.0
    pos = rng.uniform(-0.3, 0.3, robot.num_dofs) + np.outer(np.sin(np.arange(frames) / 3.0),
                                                            rng.uniform(-1, 1, robot.num_dofs))
    clip = Motion(fps=fps, joint_names=robot.joint_names, joint_pos=pos, root_pos=np.tile([0.0, 0.0, 0.3], (frames, 1)),
                  root_quat=np.tile([0.0, 0.0, 0.0, 1.0], (frames, 1)))
    qd = clip.joint_vel().astype(np.float64)
    qdd = np.gradient(qd, 1.0 / fps, axis=0)
    model = mujoco.MjModel.from_xml_path(str(robot.mjcf_path))
    data = mujoco.MjData(model)
    dofs = [int(model.jnt_dofadr[model.joint(n).id]) for n in robot.joint_names]
    f = 4
    data.qvel[dofs] = qd[f]
    mujoco.mj_forward(model, data)
    passive = -data.qfrc_passive[dofs]  # damping (the MJCF has no springs)
    inertia = model.dof_armature[dofs] * qdd[f]
    np.testing.assert_allclose(motor_torques(robot, clip)[f], passive + inertia, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(joint_torques(robot, clip) - joint_torques(robot, clip, motors=False),
                               motor_torques(robot, clip), atol=1e-9)
    assert np.abs(motor_torques(robot, clip, speed=0.5)[f] - (0.5 * passive + 0.25 * inertia)).max() < 1e-9


def test_a_walk_plans_within_its_damped_servos_no_load_speed_and_names_it():
    """op3's Dynamixels (5 N m, damping 1.084 N m s/rad) turn at most 4.6 rad/s; the MJCF gives no velocity limit
    (AKD assumes 20 rad/s). The walk is planned within the damping's speed and says so."""
    from akd_core.motion.gait import TRACKING_VELOCITY_RATIO, GaitSpec, generate_gait_result
    from akd_core.motion.humanoid import EFFORT_RATIO, walk_velocity_limits

    robot = _op3()
    limit, damped = walk_velocity_limits(robot)
    knee = robot.joint_names.index("l_knee")
    assert damped[knee] and limit[knee] == pytest.approx(5.0 / 1.084) and robot.velocity_limit[knee] == 20.0
    result = generate_gait_result(robot, GaitSpec(pattern="walk", speed=0.45), duration=2.0,
                                  max_velocity_ratio=TRACKING_VELOCITY_RATIO)  # as `akd gait` asks
    vel = np.abs(result.motion.joint_vel()).max(0)
    assert vel.max() <= TRACKING_VELOCITY_RATIO * limit.min() + 1e-6  # the 0.45 m/s human walk needed 8.7 rad/s
    assert result.limit is not None and robot.joint_names.index(result.limit.joint) in np.flatnonzero(damped)
    assert "where its damping takes its whole effort limit" in " ".join(result.spec.notes)
    assert result.effort_ratio <= 1.25 * EFFORT_RATIO


# ----------------------------------------------------------------------------- a robot facing its base's y axis
def test_a_quadruped_facing_its_base_y_is_planned_turned_and_its_reference_is_in_the_file_frame(tmp_path):
    """example-robot-data's "quadroped" (legs hinged about the base's x, front feet FL/FR at +y): `akd gait` plans it
    in a base frame turned -90 deg about z; the turned robot at root orientation R is the file's robot at R @ turn
    (same link poses); its "trot forward" moves along the world's +x with the file's base x pointing to -y, and its
    speed along the way it faces is the asked one's order."""
    import torch

    from akd_core.io.rundir import RunDir
    from akd_core.model.kinematics import ForwardKinematics
    from akd_core.model.legs import facing_turn, forward_axis, turned_base
    from akd_core.model.spatial import matrix_to_quat, quat_multiply, quat_to_matrix
    from akd_core.motion.stage import stage_gait

    path = example_robot_urdf("erd_quadruped")
    with pytest.warns(UserWarning):
        robot = load_urdf(path, [str(example_robot_data_dir().parent)])
    a1 = load_urdf(example_robot_urdf("a1"))
    assert facing_turn(a1, find_legs(a1)) is None and np.allclose(forward_axis(a1), [1, 0, 0])
    turn = facing_turn(robot, find_legs(robot))
    np.testing.assert_allclose(turn, [[0, 1, 0], [-1, 0, 0], [0, 0, 1]], atol=1e-12)
    np.testing.assert_allclose(forward_axis(robot), [0, 1, 0], atol=1e-12)
    turned = turned_base(robot, turn)
    assert turned.joint_names == robot.joint_names
    rng = np.random.default_rng(1)
    q = torch.as_tensor(rng.uniform(-1, 1, (1, robot.num_dofs)))
    quat = np.array([0.1, -0.2, 0.3, 0.9]) / np.linalg.norm([0.1, -0.2, 0.3, 0.9])
    pos = torch.tensor([[0.3, -0.1, 0.5]], dtype=torch.float64)
    a = ForwardKinematics(turned).double()(pos, torch.as_tensor(quat[None]), q)[0][0].numpy()
    b = ForwardKinematics(robot).double()(pos, torch.as_tensor(quat_multiply(quat, matrix_to_quat(turn))[None]),
                                          q)[0][0].numpy()
    np.testing.assert_allclose(a, b[[robot.link_names.index(n) for n in turned.link_names]], atol=1e-12)

    run = RunDir(tmp_path / "run", create=True)
    metrics = stage_gait(run, str(path), "trot forward", duration=2.0)
    ref = Motion.load(run.file("reference.npz"), robot)
    travel = ref.root_pos[-1] - ref.root_pos[0]
    assert travel[0] > 0.8 and abs(travel[1]) < 0.01
    base_x = quat_to_matrix(ref.root_quat[-1].astype(np.float64))[:, 0]
    np.testing.assert_allclose(base_x, [0, -1, 0], atol=0.05)
    notes = " ".join(run.manifest()["stages"]["gait"]["config"]["notes"])
    assert metrics["speed_mps"] > 0.5 and "faces its base's +y" in notes


# ----------------------------------------------------------------------------- paces
def test_a_paces_body_sways_over_the_side_whose_feet_are_down(a1):
    """A pace stands on one side's feet at a time: its body is carried by their forces (akd_core.motion.centroidal),
    so it sways toward that side (a straight body failed b1's pace at 0.078 m and ANYmal C's at 0.384 m)."""
    from akd_core.motion.gait import GaitSpec, generate_gait_result

    motion = generate_gait_result(a1, GaitSpec(pattern="pace", speed=0.8), duration=2.0).motion
    names, down, y = motion.foot_names, motion.foot_contacts, motion.root_pos[:, 1]
    left = np.array([n.startswith(("FL", "RL")) for n in names])
    on_left = down[:, left].all(1) & ~down[:, ~left].any(1)
    on_right = down[:, ~left].all(1) & ~down[:, left].any(1)
    steady = np.arange(len(y)) >= 40  # after the start ramp
    assert y[on_left & steady].mean() - y[on_right & steady].mean() > 0.015
    assert np.ptp(y[steady]) > 0.02


def test_a_pace_of_legs_without_a_hip_roll_keeps_a_straight_body():
    """2-DoF sagittal legs ("quadroped") cannot let the body sway over its feet: its pace is not carried (a carried
    one missed its footholds by 12 mm and was slowed from 1.16 to 0.52 m/s for it)."""
    from akd_core.motion.gait import stance_pose

    with pytest.warns(UserWarning):
        robot = load_urdf(example_robot_urdf("erd_quadruped"), [str(example_robot_data_dir().parent)])
    from akd_core.model.legs import facing_turn, turned_base

    turned = turned_base(robot, facing_turn(robot, find_legs(robot)))
    assert not stance_pose(turned, find_legs(turned)).sway
    a1 = load_urdf(example_robot_urdf("a1"))
    assert stance_pose(a1, find_legs(a1)).sway


# ----------------------------------------------------------------------------- legs without a hip roll (solo)
def test_legs_without_a_hip_roll_turn_and_step_sideways_only_as_far_as_their_feet_would_slide(tmp_path):
    """Solo-8's legs hinge about the body's y axis only: a turn needs every stance foot to move sideways under its hip
    (0.16 m/s for "trot forward turning left"), which they can only do by sliding. The turn is lowered until they
    slide SIDEWAYS_SLIDE_MPS, the note and the manifest say why; forward speed is kept, and solo12 (hip rolls) keeps
    its turn."""
    from akd_core.io.rundir import RunDir
    from akd_core.motion.gait import SIDEWAYS_SLIDE_MPS, GaitSpec, generate_gait_result, stance_pose
    from akd_core.motion.metrics import motion_metrics
    from akd_core.motion.prompt import spec_from_prompt
    from akd_core.motion.stage import stage_gait

    solo = load_urdf(example_robot_urdf("solo"))
    legs = find_legs(solo)
    stance = stance_pose(solo, legs)
    assert not stance.sway
    spec = spec_from_prompt("trot forward turning left", solo, legs)[0]
    result = generate_gait_result(solo, spec, 2.0, 50, legs, stance=stance)
    reach = float(np.abs(stance.feet_body[:, 0]).max())
    assert result.asked_turn_rate == spec.turn_rate > 0.4
    assert result.spec.turn_rate * reach == pytest.approx(SIDEWAYS_SLIDE_MPS, rel=1e-6)
    assert "no hip roll" in result.sideways_limit and result.sideways_limit in result.spec.notes
    assert result.spec.speed == pytest.approx(spec.speed) and result.limit is None
    motion = result.motion
    quality = motion_metrics(solo, motion.root_pos, motion.root_quat, motion.joint_pos, motion.fps, motion.foot_names,
                             motion.foot_offsets, motion.foot_contacts)
    assert quality["foot_skate_mps"] <= 1.5 * SIDEWAYS_SLIDE_MPS and result.ik_error_m < 5e-3
    # a sideways walk: its speed, all of it sideways, lowered the same way
    left = generate_gait_result(solo, GaitSpec("walk", speed=0.3, direction=np.pi / 2), 2.0, 50, legs, stance=stance)
    assert left.spec.speed == pytest.approx(SIDEWAYS_SLIDE_MPS) and left.spec.direction == pytest.approx(np.pi / 2)
    assert left.asked_speed == pytest.approx(0.3) and "stepping sideways at 0.30 m/s" in left.sideways_limit
    # hip rolls: the turn as asked
    solo12 = load_urdf(example_robot_urdf("solo12"))
    legs12 = find_legs(solo12)
    spec12 = spec_from_prompt("trot forward turning left", solo12, legs12)[0]
    turned = generate_gait_result(solo12, spec12, 2.0, 50, legs12)
    assert turned.sideways_limit is None and turned.spec.turn_rate == pytest.approx(spec12.turn_rate)
    # the manifest: the asked and the commanded turn rate, and why they differ
    metrics = stage_gait(RunDir(tmp_path / "run", create=True), str(example_robot_urdf("solo")),
                         "trot forward turning left", duration=1.0, fps=50)
    assert metrics["asked_turn_rate_radps"] == pytest.approx(spec.turn_rate)
    assert metrics["turn_rate_command_radps"] == pytest.approx(result.spec.turn_rate)
    assert metrics["turn_limited_by"] == result.sideways_limit


def _assert_refused(urdf: str, prompt: str, duration: float, match: str, max_velocity_ratio: float | None = None):
    """The gait stage's generator refuses ``prompt`` for example-robot-data's ``urdf`` with a MotionError matching
    ``match`` (at the tracking velocity margin unless ``max_velocity_ratio`` is given)."""
    from akd_core.io.errors import MotionError
    from akd_core.motion.gait import TRACKING_VELOCITY_RATIO, generate_gait_result
    from akd_core.motion.prompt import spec_from_prompt

    robot = load_urdf(example_robot_data_dir() / urdf)
    legs = find_legs(robot)
    spec = spec_from_prompt(prompt, robot, legs)[0]
    ratio = TRACKING_VELOCITY_RATIO if max_velocity_ratio is None else max_velocity_ratio
    with pytest.raises(MotionError, match=match):
        generate_gait_result(robot, spec, duration, 50, legs, max_velocity_ratio=ratio)


def test_a_flight_gait_whose_joints_stop_getting_slower_with_its_speed_changes_its_style_naming_the_joint():
    """anymal_c's knees (7.5 rad/s) cannot swing its bound's legs at the slowest bound cadence: halving its speed
    from 0.26 to 0.13 m/s took the knee from 1.38 to 1.27 x its URDF limit, and the bound used to be refused there.
    Before refusing, the generator fits the bound's style to the joints as a biped walk's is: quicker steps with
    longer stances. It stays a bound (front and hind pairs half a cycle apart), within the tracking margin, and its
    notes name the knee that made it change and the style it took."""
    from akd_core.motion.gait import (
        STYLE_CADENCE_GAINS,
        STYLE_DUTIES,
        TRACKING_VELOCITY_RATIO,
        generate_gait_result,
        phase_offsets,
    )
    from akd_core.motion.prompt import spec_from_prompt

    robot = load_urdf(example_robot_data_dir() / "anymal_c_simple_description/urdf/anymal.urdf")
    legs = find_legs(robot)
    spec = spec_from_prompt("bound forward", robot, legs)[0]
    result = generate_gait_result(robot, spec, 4.0, 50, legs, max_velocity_ratio=TRACKING_VELOCITY_RATIO)
    got = result.spec
    assert got.pattern == "bound" and got.phase_offsets == phase_offsets("bound", legs)
    assert 0 < got.speed < 0.3 < spec.speed
    assert result.joint_velocity_ratio <= TRACKING_VELOCITY_RATIO and result.ik_error_m <= 5e-3
    assert max(STYLE_DUTIES) >= got.duty_factor >= min(STYLE_DUTIES)
    assert result.limit is not None and result.limit.kind == "velocity" and result.limit.joint.endswith("_KFE")
    note = next(n for n in got.notes if "that style instead" in n)
    style = re.search(r"and ([0-9.]+) Hz '[LR][FH]_KFE' needs ([0-9.]+) x .*; at ([0-9.]+) Hz with ([0-9]+) % stances "
                      r".* needs ([0-9.]+) x", note)
    assert style, note
    assert float(style[2]) > 1.0 and float(style[5]) == pytest.approx(result.joint_velocity_ratio, abs=0.01)
    assert float(style[3]) == pytest.approx(got.frequency, abs=0.01)
    assert float(style[1]) * min(STYLE_CADENCE_GAINS) - 0.01 <= got.frequency <= float(style[1]) * \
        max(STYLE_CADENCE_GAINS) + 0.01


@pytest.mark.slow  # about 80 s: eight attempts at a 4 s gallop, each carried
def test_a_flight_gait_whose_feet_and_joints_both_stay_past_the_limits_is_refused_naming_both():
    """anymal_c's 4 s gallop misses its footholds at every speed tried, 2.60 down to 1.15 m/s, and its knees stay at
    3.5-4.6 x their velocity limit: the error says the robot cannot gallop within its limits and names the knee,
    where it used to advise a slower gait or lower steps."""
    _assert_refused("anymal_c_simple_description/urdf/anymal.urdf", "gallop forward", 4.0,
                    r"cannot reach their targets .*, and needs joint '[LR][FH]_KFE' at [0-9.]+ x its URDF velocity "
                    r"limit .* cannot gallop within its joint limits")


def test_a_gallop_of_legs_without_a_hip_roll_keeps_its_body_in_their_planes_and_its_speed():
    """A gallop's footfalls are asymmetric: made dynamically consistent, its body would shift sideways, roll and yaw.
    Solo-8's feet cannot follow sideways, which read as feet out of reach, and the gait was slowed from 1.90 to
    0.78 m/s with its feet 18 mm off their targets whatever the speed. The body now moves in the legs' planes: the
    full speed, the feet on their targets, the body neither rolled nor yawed."""
    from akd_core.model.spatial import quat_yaw
    from akd_core.motion.gait import generate_gait_result, stance_pose
    from akd_core.motion.prompt import spec_from_prompt

    solo = load_urdf(example_robot_urdf("solo"))
    legs = find_legs(solo)
    stance = stance_pose(solo, legs)
    spec = spec_from_prompt("gallop forward", solo, legs)[0]
    result = generate_gait_result(solo, spec, 2.0, 50, legs, stance=stance)
    assert result.spec.speed == pytest.approx(spec.speed) and result.limit is None
    assert result.ik_error_m < 5e-3
    motion = result.motion
    assert np.ptp(motion.root_pos[:, 1]) < 1e-6  # straight ahead, no sideways shift
    w, x, y, z = motion.root_quat.T
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    assert np.abs(roll).max() < 1e-6 and np.abs(quat_yaw(motion.root_quat)).max() < 1e-6
    assert np.ptp(motion.root_pos[:, 2]) > 0.01  # ... and still carried up and down by its stances


# ----------------------------------------------------------------------------- slow bounds (zoo cells bound-slow)
def test_a_slow_bound_first_reaches_its_footholds_and_is_never_kept_beyond_its_effort_limits():
    """hyq "bound forward slowly" asked 1.2 m strides its legs cannot reach (IK 32 mm) and stopped with a velocity
    error: feet off their targets now come first (shorter strides). b1's was kept at 1.39 m/s needing 4.3 x a thigh's
    effort limit (it fell at 1.42 m): a kept attempt is slowed further for its efforts."""
    from akd_core.motion.gait import generate_gait_result
    from akd_core.motion.prompt import spec_from_prompt

    hyq = load_urdf(example_robot_urdf("hyq"))
    legs = find_legs(hyq)
    result = generate_gait_result(hyq, spec_from_prompt("bound forward slowly", hyq, legs)[0], 1.0, 50, legs,
                                  max_velocity_ratio=0.75)
    assert result.ik_error_m < 5e-3 and result.joint_velocity_ratio <= 1.0
    assert any("cannot reach their targets" in note and "strides shortened" in note for note in result.spec.notes)

    b1 = load_urdf(example_robot_urdf("b1"))
    legs = find_legs(b1)
    result = generate_gait_result(b1, spec_from_prompt("bound forward slowly", b1, legs)[0], 1.0, 50, legs,
                                  max_velocity_ratio=0.75)
    assert not any("kept (within the URDF limit" in note for note in result.spec.notes)
    assert result.spec.speed < 1.0 and result.effort_ratio < 2.5 and result.limit.kind == "effort"


def test_a_slowed_biped_run_keeps_its_flights_short_and_one_whose_joints_stop_slowing_is_refused():
    """A biped's run slowed for a velocity limit keeps each flight within MAX_FLIGHT_S: a time-stretch had made
    romeo's run at 0.24 m/s a 0.43 Hz series of 0.5 s leaps, which fell. romeo's hips (2.1 rad/s) cannot swing its
    legs at a run's cadence at any speed: refused, naming the joint, and a walk suggested."""
    from akd_core.model.load import load_robot
    from akd_core.motion.gait import (
        MAX_FLIGHT_S,
        TRACKING_VELOCITY_RATIO,
        _flight_fraction,
        generate_gait_result,
        stance_pose,
    )
    from akd_core.motion.prompt import spec_from_prompt

    robot = load_robot("humanoid")
    legs = find_legs(robot)
    for joint in robot.actuated_joints:  # stronger motors: only the velocity limits slow it down
        joint.effort = joint.effort * 10
    spec = spec_from_prompt("run forward", robot, legs)[0]
    result = generate_gait_result(robot, spec, 2.0, 50, legs, max_velocity_ratio=TRACKING_VELOCITY_RATIO)
    assert result.limit is not None and result.limit.kind == "velocity" and result.spec.speed < spec.speed
    stance = stance_pose(robot, legs)
    assert _flight_fraction(result.spec, stance.legs) / result.spec.frequency <= MAX_FLIGHT_S + 1e-9

    _assert_refused("romeo_description/urdf/romeo_small.urdf", "run forward", 2.0,
                    r"needs joint '\w+' at [0-9.]+ x its URDF velocity limit.* no longer makes its joints slower .* "
                    r"cannot run within its joint limits; ask for a walk")


def test_a_refused_gait_is_not_suggested_instead_of_itself(a1):
    """A quadruped that cannot gallop is told to try a trot, a walk or a bound; one that cannot bound is not told to
    try a bound (the slow-bound refusal of the built-in quadruped said "ask for a trot, a walk or a bound")."""
    from types import SimpleNamespace

    from akd_core.motion.gait import _instead

    stance = SimpleNamespace(legs=find_legs(a1))  # _instead reads the legs of the stance
    assert _instead(stance, "a bound", "gallop") == "a trot, a walk or a bound"
    assert _instead(stance, "a bound", "bound") == "a trot or a walk"
