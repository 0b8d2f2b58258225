"""MuJoCo replay of Newton-tracked motions: agreement on the same targets, a detectably wrong replay fails,
and the crosscheck stage's file. (The 2 s replay of optimised targets on real 4 s gait clips is the slow test
tests/test_tracking.py::test_four_second_gait_tracks_upright_better_than_naive_and_replays_in_mujoco.)"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from akd_core import crosscheck as C
from akd_core import tracking as T
from akd_core.robot import load_urdf
from akd_core.rundir import RunDir
from tests.conftest import example_robot_urdf
from tests.test_tracking import trot_in_place


@pytest.fixture(scope="module")
def a1():
    return load_urdf(example_robot_urdf("a1"))


@pytest.fixture(scope="module")
def naive_trot(a1):
    tracked, metrics = T.track_motion(a1, trot_in_place(a1, duration=1.0), T.TrackingConfig(iterations=0),
                                      progress=False)
    return tracked, metrics


def test_mujoco_replay_of_newton_pd_targets_agrees(a1, naive_trot):
    tracked, metrics = naive_trot
    result = C.crosscheck(a1, tracked, metrics["sim_dt_s"], np.asarray(metrics["armature"]))
    assert result["passed"] and result["joint_rmse_rad"] < 0.05
    assert result["root_pos_drift_m"] < 0.05
    assert result["seconds"] == pytest.approx(1.0)
    # open-loop torque replay is reported too (it drifts: no feedback), and is finite
    assert np.isfinite(result["torque_joint_rmse_rad"])


def test_replay_starts_from_newton_state_with_wxyz_conversion(a1, naive_trot):
    tracked, metrics = naive_trot
    out = C.replay(a1, tracked, metrics["sim_dt_s"], np.asarray(metrics["armature"]), horizon_s=0.0)
    np.testing.assert_allclose(out["root_quat"][0], tracked.root_quat[0] / np.linalg.norm(tracked.root_quat[0]),
                               atol=1e-6)
    np.testing.assert_allclose(out["joint_pos"][0], tracked.joint_pos[0], atol=1e-6)


def test_wrong_targets_fail_the_crosscheck(a1, naive_trot):
    """Front and rear legs swapped in the targets: MuJoCo then does something else, and the check says so."""
    tracked, metrics = naive_trot
    swapped = tracked.pd_targets.copy()
    swapped[:, :6], swapped[:, 6:] = tracked.pd_targets[:, 6:], tracked.pd_targets[:, :6]
    swapped[:, [1, 4, 7, 10]] += 0.4
    wrong = dataclasses.replace(tracked, pd_targets=swapped, naive=None)
    result = C.crosscheck(a1, wrong, metrics["sim_dt_s"], np.asarray(metrics["armature"]))
    assert not result["passed"]


def test_stage_crosscheck_writes_json(a1, tmp_path, naive_trot):
    tracked, metrics = naive_trot
    run = RunDir(tmp_path / "run", create=True)
    a1.to_urdf(run.file("robot.urdf"))
    tracked.save(run.file("tracked.npz"))
    run.set_stage("track", status="done", metrics=metrics)
    result = C.stage_crosscheck(run, horizon_s=0.5)
    saved = json.loads(run.file("crosscheck.json").read_text())
    for key in ("joint_rmse_rad", "root_pos_drift_m", "max_joint_dev_rad", "threshold", "passed"):
        assert key in saved
    assert saved["passed"] == result["passed"] is True
    assert run.stage("crosscheck")["status"] == "done"
