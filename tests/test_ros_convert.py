"""akd_ros.safety and akd_ros.convert in-process: limit checks and message contents (no DDS needed)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from akd_core.io.errors import ConfigError, JointLimitError
from akd_core.io.rundir import REFERENCE, ROBOT_URDF, TRACKED
from akd_core.model.robot import load_urdf
from akd_core.motion.clip import Motion, TrackedMotion

from .ros_runs import make_run

pytest.importorskip("rclpy", reason="the ROS 2 wheels are not installed (pip install -e '.[ros]')")

from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from akd_ros.convert import (  # noqa: E402
    joint_trajectory_msg,
    load_replay_data,
    odometry_msg,
    parse_remap,
    robot_description_xml,
    trajectory_velocities,
    with_loop_return,
)
from akd_ros.safety import JointLimits, command_violations, refuse_unsafe, step_velocities  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("ros_convert") / "run", dt=0.01, steps=60)


@pytest.fixture(scope="module")
def limits(run):
    return JointLimits.from_robot(load_urdf(run.file(ROBOT_URDF)))


def _violations(limits, tracked, loop=False):
    return command_violations(limits, tracked.dt, tracked.pd_targets, trajectory_velocities(tracked.pd_targets,
                              tracked.dt), tracked.joint_torques, loop=loop)


def test_a_run_within_limits_has_no_violations(run, limits):
    assert _violations(limits, TrackedMotion.load(run.file(TRACKED))) == []


def test_position_violation_names_stream_joint_sample_and_limits(run, limits):
    tracked = TrackedMotion.load(run.file(TRACKED))
    j = tracked.joint_names.index("RL_hip_joint")
    tracked.pd_targets[7, j] = limits.upper[j] + 0.05
    found = [v for v in _violations(limits, tracked) if v.kind == "position"]
    assert [(v.joint, v.sample) for v in found] == [("RL_hip_joint", 7)]
    assert found[0].excess == pytest.approx(0.05, abs=1e-6)
    with pytest.raises(JointLimitError, match=r"PD target position of joint 'RL_hip_joint' .* at sample 7 "
                                              r"\(t = 0\.070 s\), outside the URDF position limits "
                                              r"\[-0\.8029, 0\.8029\] rad"):
        refuse_unsafe(found, "RUN", tracked.dt)


def test_velocity_violation_from_a_jump_between_samples(run, limits):
    tracked = TrackedMotion.load(run.file(TRACKED))
    j = tracked.joint_names.index("FL_thigh_joint")
    tracked.pd_targets[30:, j] += 0.3  # a 0.3 rad step in 10 ms = 30 rad/s > 21 rad/s, positions still in range
    found = _violations(limits, tracked)
    kinds = {(v.stream, v.joint) for v in found}
    assert ("PD target step rate", "FL_thigh_joint") in kinds
    step = next(v for v in found if v.stream == "PD target step rate")
    assert step.sample == 29 and step.value == pytest.approx(30.0 + (tracked.pd_targets[30, j] - 0.3 -
                                                                     tracked.pd_targets[29, j]) / 0.01, rel=1e-4)
    assert step.upper == 21.0 and step.unit == "rad/s"


def test_effort_violation_and_non_finite_values(run, limits):
    tracked = TrackedMotion.load(run.file(TRACKED))
    tracked.joint_torques[3, 0] = -40.0  # a1 effort limit 33.5 N m
    tracked.pd_targets[5, 2] = np.nan
    found = {(v.kind, v.joint, v.sample) for v in _violations(limits, tracked)}
    assert ("effort", "FR_hip_joint", 3) in found
    assert ("non-finite", "FR_calf_joint", 5) in found


def test_looping_refuses_the_wrap_around_jump(run, limits):
    tracked = TrackedMotion.load(run.file(TRACKED))  # 60 samples of a 1.5 Hz swing: not a whole cycle
    assert not [v for v in _violations(limits, tracked, loop=False) if v.kind == "velocity"]
    wrap = [v for v in _violations(limits, tracked, loop=True) if "looping" in v.stream]
    jump = np.abs(tracked.pd_targets[0].astype(np.float64) - tracked.pd_targets[-1]) / tracked.dt
    assert {v.joint for v in wrap} == {n for n, s in zip(tracked.joint_names, jump) if s > 21.0}
    assert all(v.sample == len(tracked.pd_targets) - 1 for v in wrap)
    assert step_velocities(tracked.pd_targets, tracked.dt, loop=True).shape == tracked.pd_targets.shape


def test_continuous_joints_have_no_position_limit():
    limits = JointLimits(["wheel"], np.array([-np.inf]), np.array([np.inf]), np.array([5.0]), np.array([2.0]),
                         np.array([False]))
    positions = np.linspace(0, 30, 1000)[:, None]  # 30 rad in 999 * 0.01 s = 3 rad/s
    assert command_violations(limits, 0.01, positions, np.gradient(positions, 0.01, axis=0), None) == []


def test_trajectory_message_has_no_effort_and_round_trips_through_cdr(run):
    tracked = TrackedMotion.load(run.file(TRACKED))
    vel = trajectory_velocities(tracked.pd_targets, tracked.dt)
    msg = joint_trajectory_msg(tracked.joint_names, tracked.pd_targets, vel, 10_000_000, stamp_ns=5 * 10**9 + 7)
    back = deserialize_message(serialize_message(msg), JointTrajectory)
    assert back.header.stamp.sec == 5 and back.header.stamp.nanosec == 7
    assert list(back.joint_names) == tracked.joint_names and len(back.points) == tracked.num_steps
    point = back.points[42]
    np.testing.assert_array_equal(point.positions, tracked.pd_targets[42].astype(np.float64))
    np.testing.assert_allclose(point.velocities, (tracked.pd_targets[43].astype(np.float64) -
                                                  tracked.pd_targets[41]) / 0.02, rtol=1e-9)
    assert (point.time_from_start.sec, point.time_from_start.nanosec) == (0, 420_000_000)
    assert all(len(p.effort) == 0 for p in back.points)
    assert np.all(np.asarray(back.points[-1].velocities) == 0.0)


def test_odometry_twist_is_in_the_body_frame():
    yaw = np.pi / 2  # body x axis points along world y
    quat = np.array([0, 0, np.sin(yaw / 2), np.cos(yaw / 2)])
    msg = odometry_msg(np.array([1.0, 2.0, 0.3]), quat, np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 0.2]),
                       stamp_ns=0, frame_id="odom", child_frame_id="base")
    lin = msg.twist.twist.linear
    assert (lin.x, lin.y, lin.z) == pytest.approx((1.0, 0.0, 0.0), abs=1e-12)
    assert msg.twist.twist.angular.z == pytest.approx(0.2)
    assert msg.pose.pose.orientation.w == pytest.approx(np.cos(yaw / 2))


def test_robot_description_gets_file_uris_and_remapped_joints(run):
    text = run.file(ROBOT_URDF).read_text()
    out = robot_description_xml(text, {"FR_hip_joint": "fr_hip"})
    root = ET.fromstring(out)
    meshes = [m.get("filename") for m in root.iter("mesh")]
    assert meshes and all(f.startswith("file:///") for f in meshes)
    joints = {j.get("name") for j in root.iter("joint")}
    assert "fr_hip" in joints and "FR_hip_joint" not in joints


def test_remap_rejects_unknown_joints_and_duplicates():
    names = ["a", "b"]
    assert parse_remap(["a:x", ""], names) == {"a": "x"}
    with pytest.raises(ConfigError, match="'c', which is not a joint"):
        parse_remap(["c:x"], names)
    with pytest.raises(ConfigError, match=r"\['b'\] appear more than once"):
        parse_remap(["a:b"], names)
    with pytest.raises(ConfigError, match="old_name:new_name"):
        parse_remap(["a"], names)


def test_reference_only_run_replays_the_reference(tmp_path):
    run = make_run(tmp_path / "run", dt=0.02, steps=30, tracked=False)
    data = load_replay_data(run)
    motion = Motion.load(run.file(REFERENCE))
    assert data.source == "reference" and data.dt == pytest.approx(0.02)
    assert data.joint_torques is None and data.joint_effort is None
    np.testing.assert_array_equal(data.pd_targets, motion.joint_pos)
    assert not run.file(TRACKED).exists()


def test_loop_return_brings_every_joint_back_within_the_velocity_limits(run, limits):
    data = load_replay_data(run)  # 60 samples of a 1.5 Hz swing: the wrap-around jump alone is refused
    assert [v for v in command_violations(limits, data.dt, data.pd_targets, data.pd_target_vel,
                                          data.joint_torques, loop=True) if "looping" in v.stream]
    looped, extra = with_loop_return(data, limits.velocity)
    assert extra > 0 and looped.num_samples == data.num_samples + extra
    assert command_violations(limits, looped.dt, looped.pd_targets, looped.pd_target_vel, looped.joint_torques,
                              loop=True) == []
    steps = step_velocities(looped.pd_targets, looped.dt, loop=True)[data.num_samples - 1:]  # return + wrap
    assert np.all(np.abs(steps) <= 0.5 * limits.velocity + 1e-6)
    np.testing.assert_allclose(looped.pd_targets[:data.num_samples], data.pd_targets)  # the clip is unchanged
    # the slowest joint sets the duration (whole samples): one sample fewer would exceed the allowed speed
    ratio = np.abs(data.pd_targets[0] - data.pd_targets[-1]) / (0.5 * limits.velocity * (extra + 1) * data.dt)
    assert extra / (extra + 1) < ratio.max() <= 1.0 + 1e-6
    np.testing.assert_allclose(looped.joint_vel[data.num_samples:], steps[1:], rtol=1e-5, atol=1e-6)
    assert np.all(looped.root_lin_vel[data.num_samples:] == 0)
    np.testing.assert_allclose(looped.root_pos[data.num_samples:], np.repeat(data.root_pos[-1:], extra, 0))
    assert np.all(looped.pd_target_vel[-1] == 0)  # the trajectory of a pass still ends at rest
    # a clip whose ends already meet needs no return
    closed = load_replay_data(run)
    closed.pd_targets = closed.pd_targets.copy()
    closed.pd_targets[-1] = closed.pd_targets[0]
    assert with_loop_return(closed, limits.velocity)[1] == 0
