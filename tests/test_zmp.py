"""Cart-table preview control of the CoM and the ZMP reference of a foot schedule (akd_core.motion.zmp)."""

from __future__ import annotations

import numpy as np

from akd_core.motion.zmp import preview_com, preview_gains, zmp_reference

DT = 0.005
Z_C = 0.8


def _alternating_steps(duration: float = 6.0, frequency: float = 1.0, duty: float = 0.6, half_width: float = 0.1,
                       stride: float = 0.0):
    """Two feet at y = +-half_width stepping L (phase 0), R (phase 0.5); returns times, feet (T,2,3), contacts."""
    t = np.arange(0.0, duration, DT)
    contacts = np.stack([((frequency * t + p) % 1.0) < duty for p in (0.0, 0.5)], -1)
    feet = np.zeros((len(t), 2, 3))
    feet[:, 0, 1], feet[:, 1, 1] = half_width, -half_width
    feet[..., 0] = stride * t[:, None]  # not a real foot schedule in x; only y matters for the sway tests
    return t, feet, contacts


def test_gains_are_finite_and_the_preview_fades():
    g = preview_gains(DT, Z_C, 1.6)
    assert np.isfinite(g.gi) and np.all(np.isfinite(g.gx)) and np.all(np.isfinite(g.gp))
    assert g.gp[0] == -g.gi
    assert abs(g.gp[-1]) < 1e-2 * abs(g.gp).max()  # 1.6 s is long enough: the far future hardly matters


def test_constant_reference_com_converges_to_it():
    ref = np.full((int(4.0 / DT), 2), [0.3, -0.2])
    com, zmp = preview_com(ref, DT, Z_C, com0=np.zeros(2))
    assert np.allclose(com[-1], [0.3, -0.2], atol=1e-4)
    assert np.allclose(zmp[-1], [0.3, -0.2], atol=1e-4)


def test_step_in_the_reference_is_tracked_within_millimetres():
    t = np.arange(0.0, 6.0, DT)
    ref = np.where(t < 2.0, 0.0, 0.1)
    com, zmp = preview_com(ref, DT, Z_C)
    settled = (t > 2.5) | (t < 1.0)
    assert np.abs(zmp - ref)[settled].max() < 3e-3
    assert com[t < 0.5].max() < 1e-3 < com[(t > 1.5) & (t < 2.0)].max()  # the preview moves the CoM early
    assert abs(com[-1] - 0.1) < 1e-4


def test_zmp_reference_is_on_the_stance_foot_and_transfers_in_double_support():
    t, feet, contacts = _alternating_steps()
    ref = zmp_reference(feet, contacts)
    single_l = contacts[:, 0] & ~contacts[:, 1]
    single_r = contacts[:, 1] & ~contacts[:, 0]
    assert np.allclose(ref[single_l, 1], 0.1) and np.allclose(ref[single_r, 1], -0.1)
    double = contacts.all(1)
    assert np.all(np.abs(ref[double, 1]) < 0.1)
    # in one double support (t in [0.5, 0.6): R lands, L lifts at 0.6) the ZMP moves from L to R monotonically
    window = (t >= 0.5) & (t < 0.6)
    assert np.all(np.diff(ref[window, 1]) < 0)


def test_lateral_sway_follows_the_stance_foot_and_stays_between_the_feet():
    t, feet, contacts = _alternating_steps(duration=8.0)
    ref = zmp_reference(feet, contacts)
    com, zmp = preview_com(ref, DT, Z_C, com0=np.zeros(2))
    late = t > 3.0  # after the start transient
    sway = com[late, 1]
    assert np.abs(sway).max() < 0.1  # inside the half foot spacing
    assert np.abs(sway).max() > 0.02  # it really sways
    assert np.corrcoef(sway, ref[late, 1])[0, 1] > 0.5  # in phase with the stance foot
    assert np.abs(zmp[late, 1] - ref[late, 1]).max() < 0.03  # tracked (the reference jumps are not smooth)
