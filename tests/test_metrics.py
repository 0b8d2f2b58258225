"""motion_metrics against hand-built clips whose answers are known in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from akd_core.io.errors import MotionError
from akd_core.model.legs import find_legs, rest_link_poses
from akd_core.model.load import load_robot
from akd_core.motion.metrics import geometry_points, motion_metrics


@pytest.fixture(scope="module")
def a1(a1_urdf):
    robot = load_robot(a1_urdf)
    return robot, find_legs(robot)


def _standing(robot, frames: int, height: float):
    """Rest pose clip at root height ``height`` (identity orientation)."""
    q = np.tile(robot.default_joint_pos(), (frames, 1))
    root = np.tile([0.0, 0.0, height], (frames, 1))
    quat = np.tile([0.0, 0.0, 0.0, 1.0], (frames, 1))
    return root, quat, q


def _lowest_sphere_bottom(robot) -> float:
    """Independent reference: lowest point of the a1 foot spheres at the rest pose (root at the origin)."""
    pos, rot = rest_link_poses(robot)
    low = np.inf
    for i, link in enumerate(robot.links):
        for geom in link.collisions:
            if geom.kind == "sphere":
                low = min(low, (rot[i] @ geom.origin[:3, 3] + pos[i])[2] - geom.size[0])
    return low


def test_penetration_is_the_depth_of_the_lowest_sphere(a1):
    robot, legs = a1
    ground = -_lowest_sphere_bottom(robot)  # root height at which the feet just touch z = 0
    feet = [leg.foot_link for leg in legs]
    offsets = np.array([leg.foot_offset for leg in legs])
    for sink in (0.0, 0.003, 0.02):
        root, quat, q = _standing(robot, 5, ground - sink)
        m = motion_metrics(robot, root, quat, q, 50.0, feet, offsets)
        assert m["penetration_m"] == pytest.approx(sink, abs=2e-4)


def test_geometry_points_give_sphere_centres_with_radii(a1):
    robot, _ = a1
    idx, pts, radius = geometry_points(robot)
    spheres = radius > 0
    assert spheres.sum() == 4 and np.allclose(radius[spheres], 0.02)


def test_sliding_feet_skate_at_the_body_speed(a1):
    robot, legs = a1
    frames, fps, speed = 51, 50.0, 0.2
    root, quat, q = _standing(robot, frames, -_lowest_sphere_bottom(robot))
    root[:, 0] = speed * np.arange(frames) / fps
    feet = [leg.foot_link for leg in legs]
    offsets = np.array([leg.foot_offset for leg in legs])
    contacts = np.ones((frames, 4), dtype=bool)
    m = motion_metrics(robot, root, quat, q, fps, feet, offsets, contacts)
    assert m["foot_skate_mps"] == pytest.approx(speed, rel=1e-6)
    assert m["foot_skate_max_mps"] == pytest.approx(speed, rel=1e-6)
    assert m["speed_mps"] == pytest.approx(speed, rel=1e-6)
    assert m["root_speed_mps"] == pytest.approx(speed, rel=1e-6)
    assert m["contact_schedule_match"] == 1.0 and m["duty_factor"] == 1.0
    # half the intended contacts say "swing" while the feet are down: half the pairs mismatch
    contacts[:, :2] = False
    m = motion_metrics(robot, root, quat, q, fps, feet, offsets, contacts)
    assert m["contact_schedule_match"] == pytest.approx(0.5)
    assert m["duty_factor_per_foot"][feet[0]] == 0.0 and m["duty_factor_per_foot"][feet[3]] == 1.0


def test_swing_clearance_is_the_mean_peak_of_swing_phases(a1):
    robot, legs = a1
    frames = 40
    base = -_lowest_sphere_bottom(robot)
    root, quat, q = _standing(robot, frames, base)
    lift = np.zeros(frames)
    lift[10:20] = np.linspace(0, 0.05, 10)  # one swing peaking at 5 cm (exact frame 19)
    lift[25:30] = 0.02  # a second at 2 cm
    root[:, 2] += lift
    contacts = np.tile((lift == 0)[:, None], (1, 4))
    feet = [leg.foot_link for leg in legs]
    offsets = np.array([leg.foot_offset for leg in legs])
    m = motion_metrics(robot, root, quat, q, 50.0, feet, offsets, contacts)
    height0 = motion_metrics(robot, root[:1], quat[:1], q[:1], 50.0, feet, offsets)  # feet height at rest ~0
    assert height0["penetration_m"] < 1e-6
    assert m["swing_clearance_m"] == pytest.approx((0.05 + 0.02) / 2, abs=1e-3)
    assert m["foot_skate_mps"] == pytest.approx(0.0, abs=1e-9)


def test_joint_limit_and_velocity_figures(a1):
    robot, legs = a1
    frames, fps = 21, 50.0
    root, quat, q = _standing(robot, frames, 0.5)
    j = robot.joint_names.index("FL_hip_joint")
    rate = 4.2  # rad/s
    q[:, j] = np.linspace(0.0, rate * (frames - 1) / fps, frames)
    m = motion_metrics(robot, root, quat, q, fps, [], np.zeros((0, 3)))
    assert m["joint_velocity_ratio"] == pytest.approx(rate / robot.velocity_limit[j], rel=1e-6)
    expected = max(0.0, q[:, j].max() - robot.upper[j])
    assert m["joint_limit_violation_rad"] == pytest.approx(expected, abs=1e-9)
    assert expected > 0.0


def test_bad_shapes_are_motion_errors(a1):
    robot, legs = a1
    root, quat, q = _standing(robot, 4, 0.3)
    with pytest.raises(MotionError, match="shapes"):
        motion_metrics(robot, root, quat, q[:, :5], 50.0, [], np.zeros((0, 3)))
    with pytest.raises(MotionError, match="foot_contacts"):
        motion_metrics(robot, root, quat, q, 50.0, [legs[0].foot_link], legs[0].foot_offset[None],
                       np.ones((3, 1), dtype=bool))
    with pytest.raises(MotionError, match="not all links"):
        motion_metrics(robot, root, quat, q, 50.0, ["no_such_foot"], np.zeros((1, 3)))
