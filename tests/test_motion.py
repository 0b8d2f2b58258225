"""Motion / TrackedMotion files: schema, validation, resampling, velocities, atomic writes."""

from __future__ import annotations

import numpy as np
import pytest

from akd_core.io.errors import JointLimitError, MotionError
from akd_core.model.robot import load_urdf
from akd_core.model.spatial import angular_velocity, quat_slerp
from akd_core.motion.clip import MOTION_SCHEMA, Motion, TrackedMotion

from .conftest import example_robot_urdf


def _motion(frames=50, fps=50.0, joints=12, seed=0) -> Motion:
    t = np.arange(frames) / fps
    joint_pos = 0.2 * np.sin(2 * np.pi * 1.5 * t)[:, None] * np.ones((1, joints))
    yaw = 0.5 * t
    root_quat = np.stack([np.zeros_like(yaw), np.zeros_like(yaw), np.sin(yaw / 2), np.cos(yaw / 2)], -1)
    return Motion(fps=fps, joint_names=[f"j{i}" for i in range(joints)], joint_pos=joint_pos,
                  root_pos=np.stack([0.8 * t, 0 * t, 0.3 + 0 * t], -1), root_quat=root_quat,
                  foot_names=["fl", "fr"], foot_offsets=np.zeros((2, 3)),
                  foot_contacts=np.stack([np.sin(8 * t) > 0, np.sin(8 * t) <= 0], -1), prompt="trot")


def test_save_load_round_trip(tmp_path):
    motion = _motion()
    path = motion.save(tmp_path / "reference.npz")
    again = Motion.load(path)
    for field in ("joint_pos", "root_pos", "root_quat", "foot_offsets", "foot_contacts"):
        np.testing.assert_array_equal(getattr(again, field), getattr(motion, field))
    assert again.joint_names == motion.joint_names and again.foot_names == motion.foot_names
    assert again.prompt == "trot" and again.fps == 50.0 and again.schema == MOTION_SCHEMA == 2
    assert not list(tmp_path.glob(".*tmp*")), "no temporary files left behind"


def test_validation_catches_bad_arrays(tmp_path):
    bad = _motion()
    bad.root_quat = bad.root_quat * 2
    with pytest.raises(MotionError, match="unit quaternions"):
        bad.save(tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()
    bad = _motion()
    bad.joint_pos[3, 2] = np.nan
    with pytest.raises(MotionError, match="NaN"):
        bad.validate()
    with pytest.raises(MotionError, match="lacks required fields"):
        np.savez(tmp_path / "partial.npz", fps=50.0)
        Motion.load(tmp_path / "partial.npz")


def test_joint_limits_and_names_checked_against_robot():
    robot = load_urdf(example_robot_urdf("a1"))
    motion = _motion(joints=robot.num_dofs)
    with pytest.raises(MotionError, match="joint names do not match"):
        motion.validate(robot)
    motion.joint_names = robot.joint_names
    motion.joint_pos[:] = robot.default_joint_pos()
    motion.validate(robot)
    motion.joint_pos[10, 2] = robot.upper[2] + 0.1
    with pytest.raises(JointLimitError, match=f"joint '{robot.joint_names[2]}'.*frame 10"):
        motion.validate(robot)


def test_resample_keeps_duration_and_interpolates():
    motion = _motion(frames=51, fps=50.0)
    up = motion.resample(100.0)
    assert up.num_frames == 101 and up.duration == pytest.approx(motion.duration)
    np.testing.assert_allclose(up.joint_pos[::2], motion.joint_pos, atol=1e-6)
    np.testing.assert_allclose(up.root_pos[1], (motion.root_pos[0] + motion.root_pos[1]) / 2, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(up.root_quat, axis=-1), 1.0, atol=1e-6)
    down = motion.resample(25.0)
    np.testing.assert_allclose(down.joint_pos, motion.joint_pos[::2], atol=1e-6)


def test_finite_difference_velocities():
    motion = _motion(frames=200, fps=100.0)
    t = np.arange(200) / 100.0
    expected = 0.2 * 2 * np.pi * 1.5 * np.cos(2 * np.pi * 1.5 * t)
    # central differences err by h^2/6 * max abs third derivative = 1e-4/6 * 0.2 * (3 pi)^3 = 2.8e-3
    np.testing.assert_allclose(motion.joint_vel()[1:-1, 0], expected[1:-1], atol=3e-3)
    np.testing.assert_allclose(motion.root_lin_vel()[:, 0], 0.8, atol=1e-5)
    np.testing.assert_allclose(motion.root_ang_vel()[1:-1], np.tile([0, 0, 0.5], (198, 1)), atol=1e-4)


def test_angular_velocity_of_constant_rotation_about_tilted_axis():
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    t = np.arange(100) * 0.01
    quat = np.concatenate([np.sin(1.3 * t / 2)[:, None] * axis, np.cos(1.3 * t / 2)[:, None]], -1)
    np.testing.assert_allclose(angular_velocity(quat, 0.01)[1:-1], np.tile(1.3 * axis, (98, 1)), atol=1e-4)
    half = quat_slerp(quat[0], quat[10], 0.5)
    np.testing.assert_allclose(half, quat[5], atol=1e-12)


def test_tracked_round_trip_with_naive(tmp_path):
    steps, joints = 40, 3
    rng = np.random.default_rng(0)
    arrays = {name: rng.normal(size=(steps, joints)) for name in ("pd_targets", "joint_torques", "joint_pos",
                                                                   "joint_vel")}
    arrays.update(root_pos=rng.normal(size=(steps, 3)), root_quat=np.tile([0, 0, 0, 1.0], (steps, 1)),
                  root_lin_vel=rng.normal(size=(steps, 3)), root_ang_vel=rng.normal(size=(steps, 3)))
    naive = TrackedMotion(dt=0.02, joint_names=["a", "b", "c"], kp=np.ones(3), kd=np.ones(3), **arrays)
    tracked = TrackedMotion(dt=0.02, joint_names=["a", "b", "c"], kp=np.ones(3) * 2, kd=np.ones(3),
                            naive=naive, **arrays)
    path = tracked.save(tmp_path / "tracked.npz")
    with np.load(path) as npz:
        assert "naive_pd_targets" in npz.files and "naive_root_quat" in npz.files
    again = TrackedMotion.load(path)
    np.testing.assert_allclose(again.pd_targets, arrays["pd_targets"].astype(np.float32))
    assert again.naive is not None and again.kp[0] == 2.0 and again.dt == 0.02
