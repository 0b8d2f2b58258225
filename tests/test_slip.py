"""Stance slip as MuJoCo measures it: a sensor row describes the state before its step, so the step a foot touches
down at reports the speed it arrives with. A foot that lands and sticks does not slip; one that slides while
pressed slips at its sliding speed."""
from __future__ import annotations

import numpy as np
import pytest

from akd_core.physics.metrics import stance_slip, touchdown_speed

mujoco = pytest.importorskip("mujoco")

BALL = """
<mujoco>
  <option timestep="0.002" cone="elliptic" impratio="10"/>
  <worldbody>
    <geom name="ground" type="plane" size="5 5 0.1" friction="{mu} 0.005 0.0001" solref="0.004 1"/>
    <body name="foot" pos="0 0 0.0305">
      <joint name="x" type="slide" axis="1 0 0"/>
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.03" mass="0.5" friction="{mu} 0.005 0.0001" solref="0.004 1"/>
      <site name="point" pos="0 0 -0.03" size="0.005"/>
    </body>
  </worldbody>
  <sensor>
    <framelinvel name="vel" objtype="site" objname="point"/>
    <contact name="force" body1="foot" geom2="ground" data="found force" reduce="netforce" num="1"/>
  </sensor>
</mujoco>
"""


def _slide(mu: float, vx: float, vz: float, steps: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """A foot (a ball on slide joints: it cannot roll) released just above the ground moving (vx, 0, vz): per step,
    the sensors MujocoEngine reads (the contact point's velocity, the ground's normal force on the foot)."""
    model = mujoco.MjModel.from_xml_string(BALL.format(mu=mu))
    data = mujoco.MjData(model)
    data.qvel[0], data.qvel[1] = vx, vz
    vel, force = np.zeros((steps, 1, 3)), np.zeros((steps, 1))
    for i in range(steps):
        mujoco.mj_step(model, data)  # the sensors describe the state before this step
        vel[i, 0] = data.sensordata[:3]
        force[i, 0] = abs(data.sensordata[6])  # found, then the net force's (fx, fy, fz)
    return vel, force


def test_a_foot_that_lands_and_sticks_does_not_slip():
    vel, force = _slide(mu=1.0, vx=0.5, vz=-0.3, steps=40)
    on = np.flatnonzero(force[:, 0] > 0.05)
    first = on[0]
    assert np.linalg.norm(vel[first, 0, :2]) > 0.3  # the touchdown row: the speed it arrives with
    assert stance_slip(vel, force, 0.05) < 0.02
    # the same rows paired before the step (the arrival speed counted as slip) read several times more
    assert np.linalg.norm(vel[on, 0, :2], axis=-1).mean() > 3 * stance_slip(vel, force, 0.05)
    # the landings are reported as such: 0.5 m/s, then a small hop (the ball rebounds) landing at what is left
    onsets = on[np.r_[True, np.diff(on) > 1]]
    assert len(onsets) >= 1 and touchdown_speed(vel, force, 0.05) == pytest.approx(
        np.linalg.norm(vel[onsets, 0, :2], axis=-1).mean())
    assert touchdown_speed(vel, np.zeros_like(force), 0.05) is None


def test_a_foot_that_slides_while_pressed_slips_at_its_speed():
    vel, force = _slide(mu=0.02, vx=0.5, vz=0.0, steps=60)  # slides on ice, decelerating at mu g
    slip = stance_slip(vel, force, 0.05)
    pressed = force[:, 0] > 0.05
    assert pressed.sum() > 20
    assert slip == pytest.approx(np.linalg.norm(vel[pressed, 0, :2], axis=-1).mean(), abs=0.01)
    assert slip > 0.4
