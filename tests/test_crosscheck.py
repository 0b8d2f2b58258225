"""Cross-check in the other engine: MuJoCo-tracked targets replayed in Newton (windowed), a detectably wrong replay
fails, and the crosscheck stage's file."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from akd_core.io.rundir import RunDir
from akd_core.model.robot import load_urdf
from akd_core.physics import crosscheck as C
from akd_core.physics import tracker as TR
from akd_core.physics.params import physics_from_dict
from tests.conftest import example_robot_urdf
from tests.test_gradient import trot_in_place


@pytest.fixture(scope="module")
def a1():
    return load_urdf(example_robot_urdf("a1"))


@pytest.fixture(scope="module")
def mpc_trot(a1):
    cfg = TR.TrackingConfig(method="mpc", samples=8)
    return TR.track_motion(a1, trot_in_place(a1, duration=1.0), cfg, progress=False)


def test_newton_replays_mujoco_tracked_targets_within_threshold(a1, mpc_trot):
    tracked, metrics = mpc_trot
    result = C.crosscheck(a1, tracked, physics_from_dict(a1, metrics), "newton", window_s=0.5, open_loop_s=1.0)
    assert result["engine"] == "newton" and result["tracked_engine"] == "mujoco"
    assert result["windows"] == 2 and result["window_s"] == pytest.approx(0.5)
    assert result["passed"] and result["joint_rmse_rad"] < 0.05, result
    assert result["root_pos_err_m"] < 0.05
    assert np.isfinite(result["open_loop_joint_rmse_rad"]) and result["open_loop_s"] == pytest.approx(1.0)


def test_wrong_targets_fail_the_crosscheck(a1, mpc_trot):
    """Front and rear legs swapped in the targets: the other engine then does something else, and the check says so."""
    tracked, metrics = mpc_trot
    swapped = tracked.pd_targets.copy()
    swapped[:, :6], swapped[:, 6:] = tracked.pd_targets[:, 6:], tracked.pd_targets[:, :6]
    swapped[:, [1, 4, 7, 10]] += 0.4
    wrong = dataclasses.replace(tracked, pd_targets=swapped, naive=None)
    result = C.crosscheck(a1, wrong, physics_from_dict(a1, metrics), "mujoco", open_loop_s=0.2)
    assert not result["passed"]


def test_stage_crosscheck_writes_json_and_picks_the_other_engine(a1, tmp_path, mpc_trot):
    tracked, metrics = mpc_trot
    run = RunDir(tmp_path / "run", create=True)
    a1.to_urdf(run.file("robot.urdf"))
    tracked.save(run.file("tracked.npz"))
    run.set_stage("track", status="done", metrics=metrics)
    result = C.stage_crosscheck(run, open_loop_s=0.2)
    saved = json.loads(run.file("crosscheck.json").read_text())
    for key in ("joint_rmse_rad", "root_pos_err_m", "max_joint_dev_rad", "threshold", "passed",
                "open_loop_root_drift_m"):
        assert key in saved
    assert saved["engine"] == "newton" and saved["passed"] == result["passed"]
    assert run.stage("crosscheck")["status"] == "done"


def test_newton_model_takes_masses_from_the_urdf_only(a1):
    """Newton would add every collision shape's volume at its default density (a1: +0.7 kg, anymal_c: +29 kg):
    the cross-check must simulate the same robot MuJoCo does."""
    from akd_core.physics.engines.newton import newton_model
    from akd_core.physics.params import default_physics

    model = newton_model(a1, default_physics(a1), worlds=2)
    assert float(model.body_mass.numpy().sum()) == pytest.approx(2 * a1.total_mass, rel=1e-6)


def test_newton_gets_a_urdf_of_collisions_with_meshes_it_can_read(tmp_path):
    """anymal_b's foot visuals are COLLADA files Newton's reader rejects: Newton's URDF carries collisions only,
    every mesh as STL/OBJ, and the model builds."""
    from akd_core.physics.engines.newton import newton_model
    from akd_core.physics.params import default_physics

    robot = load_urdf(example_robot_urdf("anymal_b"))
    text = robot.to_urdf(mesh_uris="stl", visuals=False)
    assert "<visual" not in text and ".dae" not in text.lower()
    model = newton_model(robot, default_physics(robot))
    assert float(model.body_mass.numpy().sum()) == pytest.approx(robot.total_mass, rel=1e-6)


# ----------------------------------------------------------------------------- the Newton check fails what it should
def test_newton_crosscheck_fails_on_the_targets_of_another_clip(a1, mpc_trot):
    """The tracked trot's states with the PD targets of another clip (the gait library's pace of the same length):
    Newton, at the default step and with its step refinements, must not pass them."""
    from akd_core.motion.gait import GaitSpec, generate_gait_result

    tracked, metrics = mpc_trot
    other = generate_gait_result(a1, GaitSpec(pattern="pace", speed=0.3), duration=1.0, fps=1.0 / tracked.dt).motion
    wrong = dataclasses.replace(tracked, pd_targets=other.joint_pos[:tracked.num_steps].astype(np.float32), naive=None)
    result = C.crosscheck(a1, wrong, physics_from_dict(a1, metrics), "newton", open_loop_s=0)
    assert not result["passed"], result
    assert result["joint_rmse_rad"] > 2 * C.DEFAULT_THRESHOLD_RAD
    assert result["step_refinements"] == C.STEP_REFINEMENTS and "open_loop_s" not in result


def test_newton_crosscheck_fails_when_effort_limits_are_one_percent_of_real(a1, mpc_trot):
    """The right targets on a robot whose motors give 1 % of their torque: it sags, and the check says so (in MuJoCo
    too: both engines clamp to the PhysicsParams' effort limits, not to the URDF's)."""
    tracked, metrics = mpc_trot
    physics = physics_from_dict(a1, metrics)
    weak = dataclasses.replace(physics, effort=0.01 * physics.effort)
    result = C.crosscheck(a1, tracked, weak, "newton", open_loop_s=0)
    assert not result["passed"], result
    assert result["joint_rmse_rad"] > 2 * C.DEFAULT_THRESHOLD_RAD
    assert not C.crosscheck(a1, tracked, weak, "mujoco", open_loop_s=0)["passed"]


def test_newton_engine_keeps_each_batch_size_and_rolls_out_as_a_fresh_one(a1, mpc_trot):
    """The MPC alternates N candidate worlds with one executed world: the engine keeps a model per world count
    (rebuilding a 1024-world model every re-plan cost seconds on CUDA) and what it rolls out after switching back
    equals a freshly built engine's, world by world, to float rounding."""
    from akd_core.physics.engines import make_engine
    from akd_core.physics.engines.base import Feet

    tracked, metrics = mpc_trot
    physics = physics_from_dict(a1, metrics)
    states = C.tracked_states(tracked)
    targets = np.asarray(tracked.pd_targets, dtype=np.float64)[:6]
    starts = [states[0], states[3], states[7]]
    batch = np.stack([targets, targets[::-1], targets + 0.05])

    def engine():
        return make_engine("newton", a1, physics, tracked.dt / 4, 4, Feet((), np.zeros((0, 3))), C.mass_links(a1))

    fresh3, fresh1 = engine(), engine()
    want3 = fresh3.rollout(starts, batch).states
    want1 = fresh1.rollout(states[5], targets[None]).states
    sim = engine()
    sim.rollout(starts, batch)
    model3 = sim.model
    for _ in range(2):
        got1 = sim.rollout(states[5], targets[None]).states
        got3 = sim.rollout(starts, batch).states
        assert sim.model is model3 and sim.worlds == 3
        for got, want in ((got1, want1), (got3, want3)):
            np.testing.assert_allclose(got.joint_pos, want.joint_pos, atol=1e-5)
            np.testing.assert_allclose(got.root_pos, want.root_pos, atol=1e-5)
            np.testing.assert_allclose(got.root_lin_vel, want.root_lin_vel, atol=1e-4)
    # the rollouts differ per world (the batch is not one world copied)
    assert np.abs(want3.joint_pos[0, -1] - want3.joint_pos[2, -1]).max() > 1e-3


def test_akd_crosscheck_open_loop_0_replays_no_open_loop_and_prints_cleanly(a1, tmp_path, mpc_trot, capsys):
    """`akd crosscheck RUN --open-loop 0` once raised KeyError('open_loop_s') printing its summary: 0 means no
    open-loop replay, the windowed figures are printed alone; a negative value is a clear error."""
    from akd_core.cli import main

    tracked, metrics = mpc_trot
    run = RunDir(tmp_path / "run", create=True)
    a1.to_urdf(run.file("robot.urdf"))
    tracked.save(run.file("tracked.npz"))
    run.set_stage("track", status="done", metrics=metrics)
    code = main(["crosscheck", str(run.path), "--open-loop", "0", "--engine", "mujoco"])
    out = capsys.readouterr().out
    saved = json.loads(run.file("crosscheck.json").read_text())
    assert code == (0 if saved["passed"] else 1)
    assert not any(key.startswith("open_loop") for key in saved)
    assert saved["windows"] == 2 and 0.0 <= saved["joint_rmse_rad"] < C.DEFAULT_THRESHOLD_RAD  # replayed in MuJoCo
    assert "no open-loop replay" in out and f"{saved['joint_rmse_rad']:.4f} rad" in out
    assert main(["crosscheck", str(run.path), "--open-loop", "0.2", "--engine", "mujoco"]) == code
    assert "open loop 0.2 s: joint RMSE" in capsys.readouterr().out
    assert main(["crosscheck", str(run.path), "--open-loop", "-1"]) == 2
    assert "--open-loop must be a number of seconds >= 0" in capsys.readouterr().err
