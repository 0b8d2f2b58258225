"""Programs of robots with human-like legs (akd_core.motion.program._human_program): one human-like walk along the
program's body path that stands, both feet flat and the arms hanging, wherever the body is at rest (the stand before a
start, the end of a stop), and walks in between.

Figures are measured on the written clip by FK, not taken from the generator. Generation only (no tracking).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.legs import find_legs
from akd_core.model.load import load_robot
from akd_core.motion.humanoid import (
    WalkRequest,
    foot_plan,
    humanoid_body,
    resolve_walk,
    upper_body,
    zmp_plan,
)
from akd_core.motion.program import generate_program, program_from_prompt

from .conftest import example_robot_data_dir, example_robot_urdf


def _contact_points_world(robot, motion) -> np.ndarray:
    """(F, K, P, 3) the clip's contact points (heel and toe of each foot) in the world, by FK."""
    with torch.no_grad():
        pos, rot = ForwardKinematics(robot).double()(torch.as_tensor(motion.root_pos, dtype=torch.float64),
                                                     torch.as_tensor(motion.root_quat, dtype=torch.float64),
                                                     torch.as_tensor(motion.joint_pos, dtype=torch.float64))
    pos, rot = pos.numpy(), rot.numpy()
    points = motion.contact_points()
    return np.stack([pos[:, robot.link_index(name), None] + np.einsum("fij,pj->fpi", rot[:, robot.link_index(name)],
                                                                      points[k])
                     for k, name in enumerate(motion.foot_names)], 1)


@pytest.fixture(scope="module")
def g1_stand_walk_stop():
    robot = load_robot(example_robot_urdf("g1"), [str(example_robot_data_dir().parent.parent)])
    legs = find_legs(robot)
    program = program_from_prompt("stand, walk forward, stop", robot, legs)
    result = generate_program(robot, program, fps=50.0, legs=legs, max_velocity_ratio=0.75)
    return robot, humanoid_body(robot, legs), result


def test_a_stop_ends_standing_still_with_both_feet_flat_and_the_arms_hanging(g1_stand_walk_stop):
    robot, body, result = g1_stand_walk_stop
    motion = result.motion
    last = slice(-int(motion.fps), None)
    assert motion.foot_contacts[last].all() and motion.contact_parts()[last].all()
    world = _contact_points_world(robot, motion)[last]
    assert np.linalg.norm(world - world[0], axis=-1).max() < 0.002  # the feet do not move
    assert np.abs(world[..., 2]).max() < 0.01  # ... and are on the ground
    speed = np.linalg.norm(np.gradient(motion.root_pos[last, :2], 1.0 / motion.fps, axis=0), axis=-1)
    assert speed.max() < 0.05, speed.max()
    shoulders = [arm.shoulder for arm in body.arms]
    arm_speed = np.abs(np.gradient(motion.joint_pos[last][:, shoulders], 1.0 / motion.fps, axis=0))
    assert arm_speed.max() < 0.05, arm_speed.max()
    for arm in body.arms:  # hanging at rest
        np.testing.assert_allclose(motion.joint_pos[-1, list(arm.joints)], arm.rest, atol=1e-3)


def test_a_program_starts_from_standing_and_walks_in_between(g1_stand_walk_stop):
    robot, body, result = g1_stand_walk_stop
    motion = result.motion
    stand, walk, stop = result.segments
    assert (stand.segment.kind, walk.segment.kind, stop.segment.kind) == ("stand", "move", "stand")
    standing = slice(0, int(round(stand.end * motion.fps)))
    assert motion.foot_contacts[standing].all() and motion.contact_parts()[standing].all()
    shoulders = [arm.shoulder for arm in body.arms]
    assert np.ptp(motion.joint_pos[standing][:, shoulders], axis=0).max() < 1e-3  # no arm swing while standing
    # the walk steps: each foot swings at least twice, with single support on either foot
    walking = slice(int(round((walk.start + walk.ramp) * motion.fps)), int(round(walk.end * motion.fps)))
    down = motion.foot_contacts[walking]
    for k in range(2):
        lifts = np.flatnonzero(down[:-1, k] & ~down[1:, k])
        assert len(lifts) >= 2, down[:, k]
        assert (down[:, k] & ~down[:, 1 - k]).any()
    speed = np.linalg.norm(np.gradient(motion.root_pos[walking, :2], 1.0 / motion.fps, axis=0), axis=-1)
    assert speed.mean() > 0.8 * float(np.hypot(*walk.command[:2]))
    assert np.ptp(motion.joint_pos[walking][:, shoulders], axis=0).min() > math.radians(10.0)  # the arms swing


def test_a_walk_whose_body_stands_throughout_keeps_both_feet_flat_and_the_zmp_between_them():
    robot = load_robot("humanoid")
    legs = find_legs(robot)
    body = humanoid_body(robot, legs)
    request = WalkRequest(speed=0.6, stands=((-math.inf, math.inf),))
    gait = resolve_walk(robot, body, legs, request, 1.0, 0.75)
    times = np.arange(0.0, 3.0, 0.02)
    feet = foot_plan(body, gait, lambda t: (np.zeros((len(t), 2)), np.zeros(len(t))), times)
    assert feet["stance"].all() and feet["parts"].all()
    np.testing.assert_allclose(feet["pitch"], 0.0)
    np.testing.assert_allclose(feet["centre"], feet["centre"][:1].repeat(len(times), 0), atol=1e-12)
    np.testing.assert_allclose(feet["push_off"], 0.0)
    zmp = zmp_plan(body, gait, feet)
    np.testing.assert_allclose(zmp, zmp[:1].repeat(len(times), 0), atol=1e-12)
    assert abs(zmp[0, 1] - feet["centre"][0, :, 1].mean()) < 1e-9  # between the feet
    q = np.zeros((len(times), robot.num_dofs))
    pelvis = upper_body(robot, body, gait, times, q)
    np.testing.assert_allclose(pelvis, 0.0)
    for arm in body.arms:
        np.testing.assert_allclose(q[:, list(arm.joints)], np.tile(arm.rest, (len(times), 1)), atol=1e-9)
