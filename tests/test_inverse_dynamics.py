"""Whole-body inverse dynamics of a reference (akd_core.physics.inverse): known answers without contacts, the ground
carrying the base in stance, and the PD targets it gives holding a robot where plain position targets sag."""

from __future__ import annotations

import numpy as np
import pytest

from akd_core.model.robot import load_urdf
from akd_core.motion.clip import Motion
from akd_core.physics import tracker as TR
from akd_core.physics.engines.base import Feet
from akd_core.physics.inverse import inverse_dynamics_torques
from akd_core.physics.params import default_physics
from tests.conftest import example_robot_urdf
from tests.test_gradient import A1_FEET, trot_in_place


@pytest.fixture(scope="module")
def a1():
    return load_urdf(example_robot_urdf("a1"))


def standing(robot, duration=1.0, contacts=True, fall=False) -> Motion:
    """The trot-in-place pose held still (or in free fall), all feet on the ground (or none)."""
    m = trot_in_place(robot, duration=duration, amp=0.0)
    if fall:
        t = np.arange(m.num_frames) / m.fps
        m.root_pos[:, 2] = 2.0 - 0.5 * 9.81 * t ** 2
    m.foot_contacts = np.full(m.foot_contacts.shape, contacts)
    return m


def feet(motion) -> Feet:
    return Feet(tuple(motion.foot_names), np.asarray(motion.foot_offsets, dtype=np.float64))


def test_free_fall_needs_no_torque_and_hovering_needs_the_whole_weight(a1):
    """No stance: a ballistic reference with fixed joints needs zero torque and nothing from the ground; the same
    pose held in the air leaves the whole weight (m g) unsupplied."""
    physics = default_physics(a1)
    falling = standing(a1, contacts=False, fall=True)
    tau, summary = inverse_dynamics_torques(a1, falling, physics, feet(falling))
    # float32 clip positions: second differences carry ~1e-4 m/s^2
    assert np.abs(tau[1:-1]).max() < 1e-4 and summary["base_residual_frac"] < 1e-4  # N m, against ~10 N m held
    hovering = standing(a1, contacts=False)
    _, summary = inverse_dynamics_torques(a1, hovering, physics, feet(hovering))
    assert summary["base_residual_frac"] == pytest.approx(1.0, abs=1e-6)


def test_stance_feet_carry_the_base_and_the_legs_hold_the_weight(a1):
    """Four feet down, standing still: the ground supplies the base's whole wrench (no residual); the torques hold
    the weight (the knees work against gravity) and are steady frame to frame."""
    motion = standing(a1)
    tau, summary = inverse_dynamics_torques(a1, motion, default_physics(a1), feet(motion))
    assert summary["base_residual_frac"] < 1e-6 and summary["torque_clamped_frac"] == 0.0
    names = a1.joint_names
    calf = [names.index(f"{leg}_calf_joint") for leg in ("FR", "FL", "RR", "RL")]
    assert np.all(np.abs(tau[:, calf]) > 1.0)  # N m against a ~12 kg body on a 0.2 m calf
    np.testing.assert_allclose(tau, np.broadcast_to(tau[0], tau.shape), atol=1e-3)


def test_stance_wrench_distribution_follows_the_schedule(a1):
    """Feet out of stance push nothing: lifting one foot's contact flag changes the other legs' torques."""
    motion = standing(a1)
    physics = default_physics(a1)
    tau4, _ = inverse_dynamics_torques(a1, motion, physics, feet(motion))
    three = motion.foot_contacts.copy()
    three[:, A1_FEET.index("FR_foot")] = False
    tau3, summary = inverse_dynamics_torques(a1, motion, physics, feet(motion), stance=three)
    assert summary["base_residual_frac"] < 1e-3  # three feet can still carry a static body
    fl_calf = a1.joint_names.index("FL_calf_joint")
    assert abs(tau3[5, fl_calf]) > abs(tau4[5, fl_calf]) + 0.5


def test_inverse_dynamics_targets_hold_a_standing_robot_where_position_targets_sag(a1):
    """Replayed in MuJoCo with Coulomb friction: the reference pose plus tau / kp holds the standing a1's joints
    within 2 mrad of the reference; the pose alone lets the joints give under the weight (~10 mrad)."""
    motion = standing(a1)
    errors = {}
    for idyn in (False, True):
        setup = TR.build(a1, motion, TR.TrackingConfig(inverse_dynamics=idyn))
        record, _ = TR.execute(setup.engine, setup.start, setup.feedforward)
        metrics = TR.record_metrics(setup, record, setup.feedforward)[1]
        errors[idyn] = metrics["joint_rmse_rad"]
    assert errors[True] < 2e-3
    assert errors[False] > 3 * errors[True]


def test_inverse_dynamics_feedforward_tracks_a_trot_closer(a1):
    """The trot in place replayed open loop: the inverse-dynamics targets follow the links more closely."""
    motion = trot_in_place(a1, duration=1.0)
    err = {}
    for idyn in (False, True):
        setup = TR.build(a1, motion, TR.TrackingConfig(inverse_dynamics=idyn))
        record, _ = TR.execute(setup.engine, setup.start, setup.feedforward)
        err[idyn] = TR.record_metrics(setup, record, setup.feedforward)[1]["link_pos_err_m"]
    assert err[True] < 0.7 * err[False]
