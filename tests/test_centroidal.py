"""Gaits with flight phases whose body the feet can carry (akd_core.motion.centroidal): the whole-body CoM falls
freely in flight, the centre of pressure the clip needs comes back onto the stance feet's support, and the
footholds stay where the gait library put them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import akd_core.motion.gait as G
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.legs import find_legs
from akd_core.model.robot import load_urdf
from akd_core.motion.feasibility import centroidal_wrench, feasibility_summary
from tests.conftest import example_robot_urdf


@pytest.fixture(scope="module")
def a1():
    return load_urdf(example_robot_urdf("a1"))


def _clip(robot, pattern: str, speed: float, carry: bool, monkeypatch, frequency: float | None = None
          ) -> G.GaitResult:
    """The clip at exactly ``speed`` (no slowing down for the joints' limits, so carried and level compare)."""
    monkeypatch.setattr(G, "CARRY_FLIGHT", carry)
    monkeypatch.setattr(G, "EFFORT_RATIO", np.inf)
    return G.generate_gait_result(robot, G.GaitSpec(pattern=pattern, speed=speed, frequency=frequency), duration=1.6,
                                  fps=50.0,
                                  legs=find_legs(robot), slow_down=False, max_velocity_ratio=10.0)


def _stance_feet(robot, motion) -> np.ndarray:
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        pos, rot = fk(torch.as_tensor(motion.root_pos), torch.as_tensor(motion.root_quat),
                      torch.as_tensor(motion.joint_pos))
        idx = torch.as_tensor([robot.link_index(n) for n in motion.foot_names])
        return ForwardKinematics.transform_points(pos, rot, idx, torch.as_tensor(motion.foot_offsets)).numpy()


def test_a_bounds_body_pitches_and_heaves_so_its_feet_can_carry_it(a1, monkeypatch):
    level = _clip(a1, "bound", 0.9, False, monkeypatch, frequency=2.5).motion  # the same steps for both
    carried = _clip(a1, "bound", 0.9, True, monkeypatch, frequency=2.5).motion
    before, after = feasibility_summary(a1, level), feasibility_summary(a1, carried)
    # a level bound asks for a CoP ~0.18 m off the stance pair's line; carried, it is within a few mm of it
    assert before["cop_margin_median_m"] < -0.1 < -0.02 < after["cop_margin_median_m"]
    pitch = np.degrees(2 * np.arcsin(np.abs(carried.root_quat[:, 1])))
    assert 1.0 < pitch.max() < 20.0  # it pitches, as a bounding body does, but not wildly
    # the footholds and the stepping are the gait library's: stance feet where they were, and not sliding
    feet_level, feet_carried = _stance_feet(a1, level), _stance_feet(a1, carried)
    down = carried.foot_contacts
    np.testing.assert_array_equal(down, level.foot_contacts)
    assert np.abs(feet_carried[down] - feet_level[down]).max() < 5e-3


def test_in_flight_the_carried_body_falls_freely(a1, monkeypatch):
    pronk = _clip(a1, "pronk", 0.3, True, monkeypatch).motion
    fk = ForwardKinematics(a1).double()
    with torch.no_grad():
        pos, rot = (t.numpy() for t in fk(torch.as_tensor(pronk.root_pos), torch.as_tensor(pronk.root_quat),
                                          torch.as_tensor(pronk.joint_pos)))
    _, force, _, mass = centroidal_wrench(a1, pos, rot, 1.0 / pronk.fps)
    airborne = ~pronk.foot_contacts.any(axis=1)
    # flight frames two frames or more from a stance frame (the differences that give the force span 5 frames)
    flight = airborne & np.roll(airborne, 1) & np.roll(airborne, -1) & np.roll(airborne, 2) & np.roll(airborne, -2)
    flight[:3] = flight[-3:] = False  # one-sided differences at the ends
    assert flight.sum() >= 5
    # the ground force a flight frame needs: none (the level, steady pronk needed about one body weight)
    assert np.abs(force[flight]).max() / (mass * 9.81) < 0.15
