"""Quality gates (akd_core.export.quality): the gate logic on manifest metrics, the limit gate on real tracked arrays
(through the exporter's own check), and `akd export` leaving out -- or refusing -- runs that are not usable
demonstrations, read back with h5py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import h5py
import numpy as np
import pytest

from akd_core.cli import main
from akd_core.export.quality import QualityGates, assess_run, gate_manifest
from akd_core.io.errors import ConfigError
from akd_core.io.rundir import REFERENCE, ROBOT_URDF, TRACKED, RunDir
from akd_core.model.robot import load_urdf
from akd_core.motion.clip import Motion, TrackedMotion

GOOD_TRACK = {"fell": False, "max_tilt_deg": 4.0, "link_pos_err_m": 0.05, "foot_skate_mps": 0.08,
              "penetration_m": 0.004, "contact_schedule_match": 0.85, "joint_rmse_rad": 0.03,
              "naive_link_pos_err_m": 0.09, "torque_saturation_frac": 0.0}
GOOD_CROSS = {"passed": True, "joint_rmse_rad": 0.004, "threshold": 0.05}


def manifest(track: dict | None = None, cross: dict | None = None, **track_overrides) -> dict:
    stages = {"gait": {"status": "done", "metrics": {}}}
    if track is not False:
        stages["track"] = {"status": "done", "metrics": {**GOOD_TRACK, **(track or {}), **track_overrides}}
    if cross is not False:
        stages["crosscheck"] = {"status": "done", "metrics": {**GOOD_CROSS, **(cross or {})}}
    return {"robot": "quadruped", "prompt": "trotting forward", "stages": stages}


def finished_run(path: Path, prompt: str = "trotting forward", seed: int = 0, robot: str = "quadruped",
                 track: dict | None = None, cross: dict | None = None, exceed: tuple[str, int, int] | None = None
                 ) -> RunDir:
    """A finished `akd run` of a built-in robot without the minutes of tracking: a real `akd gait` clip, tracked.npz
    = the reference itself (a perfect tracker), and the track / crosscheck metrics written into the manifest.
    ``exceed=(field, frame, joint)`` pushes that tracked value 0.2 rad past the joint's upper limit."""
    from akd_core.motion.stage import stage_gait

    run = RunDir(path, create=True)
    stage_gait(run, robot_spec=robot, prompt=prompt, duration=0.4, fps=50.0, seed=seed)
    urdf = load_urdf(run.file(ROBOT_URDF))
    ref = Motion.load(run.file(REFERENCE), urdf)
    q = ref.joint_pos.astype(np.float64)
    arrays = {"joint_pos": q.copy(), "pd_targets": q.copy()}
    if exceed is not None:
        name, frame, joint = exceed
        arrays[name][frame, joint] = urdf.upper[joint] + 0.2
    TrackedMotion(dt=ref.dt, joint_names=urdf.joint_names, pd_targets=arrays["pd_targets"],
                  joint_torques=np.zeros_like(q), joint_pos=arrays["joint_pos"], joint_vel=ref.joint_vel(),
                  root_pos=ref.root_pos, root_quat=ref.root_quat, root_lin_vel=ref.root_lin_vel(),
                  root_ang_vel=ref.root_ang_vel(), kp=np.full(urdf.num_dofs, 40.0),
                  kd=np.full(urdf.num_dofs, 1.0)).save(run.file(TRACKED))
    run.set_stage("track", status="done", seconds=1.0, config={}, metrics={**GOOD_TRACK, **(track or {})})
    run.set_stage("crosscheck", status="done", seconds=0.1, config={}, metrics={**GOOD_CROSS, **(cross or {})})
    run.set_stage("preview", status="done", seconds=0.1, config={}, metrics={})
    run.update_manifest(pipeline={"source": "gait", "exports": [], "status": "done"})
    return run


# ----------------------------------------------------------------------------- the gates on metric dicts
def test_default_gates_pass_a_good_run_and_name_every_gate_a_bad_one_fails():
    gates = QualityGates()
    assert gates.max_link_err_m == 0.3 and not gates.allow_falls and gates.require_crosscheck
    assert gate_manifest(manifest(), gates)[0] == []
    reasons, fig = gate_manifest(manifest(track={"fell": True, "max_tilt_deg": 176.0, "link_pos_err_m": 0.9},
                                          cross={"passed": False, "joint_rmse_rad": 0.31}), gates)
    assert reasons == ["fell (max root tilt 176 deg) (gate allow_falls)",
                       "cross-check failed: joint RMSE 0.31 rad vs threshold 0.05 rad (gate require_crosscheck)",
                       "link position error 0.9 m > 0.3 m (gate max_link_err_m)"]
    assert fig["fell"] is True and fig["max_tilt_deg"] == 176.0 and fig["crosscheck_passed"] is False
    diverged = gate_manifest(manifest(fell=True, diverged=True), gates)[0]
    assert diverged == ["fell (the simulation blew up) (gate allow_falls)"]
    # each gate can be turned off
    lenient = QualityGates(allow_falls=True, require_crosscheck=False, max_link_err_m=None)
    assert gate_manifest(manifest(track={"fell": True, "link_pos_err_m": 0.9}, cross={"passed": False}),
                         lenient)[0] == []


def test_a_clip_that_failed_its_tracking_verdict_is_left_out_unless_allowed():
    failed = manifest(tracking_passed=False, failure_reasons=["link error 0.071 m > 0.03 m (the limit for steady "
                                                              "clips)"])
    assert gate_manifest(failed, QualityGates())[0] == [
        "tracking failed: link error 0.071 m > 0.03 m (the limit for steady clips) (gate allow_failed_tracking)"]
    assert gate_manifest(failed, QualityGates(allow_failed_tracking=True))[0] == []
    assert gate_manifest(manifest(tracking_passed=True, failure_reasons=[]), QualityGates())[0] == []


def test_threshold_gates_prefer_stance_slip_and_fail_nan_and_missing_metrics():
    gates = QualityGates(max_stance_slip_mps=0.1, max_penetration_m=0.01, min_contact_match=0.8)
    assert gate_manifest(manifest(), gates)[0] == []  # foot_skate_mps 0.08 stands in for stance slip
    reasons, fig = gate_manifest(manifest(stance_slip_mps=0.25, foot_skate_mps=0.01), gates)
    assert reasons == ["stance slip 0.25 m/s > 0.1 m/s (gate max_stance_slip_mps)"]
    assert fig["stance_slip_metric"] == "stance_slip_mps"
    reasons = gate_manifest(manifest(penetration_m=0.03, contact_schedule_match=0.5), gates)[0]
    assert reasons == ["penetration 0.03 m > 0.01 m (gate max_penetration_m)",
                       "contact schedule match 0.5 < 0.8 (gate min_contact_match)"]
    nan = gate_manifest(manifest(link_pos_err_m=math.nan), QualityGates())[0]
    assert nan == ["link position error nan m > 0.3 m (gate max_link_err_m)"]
    no_link = manifest()
    del no_link["stages"]["track"]["metrics"]["link_pos_err_m"]
    assert "link_pos_err_m not recorded by the track stage" in gate_manifest(no_link, QualityGates())[0][0]
    assert gate_manifest(manifest(cross=False), QualityGates())[0] == [
        "cross-check not run (gate require_crosscheck); run `akd crosscheck RUN`"]
    assert gate_manifest(manifest(track=False), QualityGates())[0][0].startswith("not tracked")
    running = manifest()
    running["stages"]["track"]["status"] = "failed"
    assert "tracking did not finish" in gate_manifest(running, QualityGates())[0][0]


def test_quality_blocks_are_checked_like_every_config():
    assert QualityGates.from_mapping({"max_link_err_m": None, "allow_falls": True}) == QualityGates(
        allow_falls=True, max_link_err_m=None)
    with pytest.raises(ConfigError, match=r"sweep.yaml: quality: unknown gates \['max_link_err'\]"):
        QualityGates.from_mapping({"max_link_err": 0.2}, "sweep.yaml: quality")
    with pytest.raises(ConfigError, match="'allow_falls' must be true or false"):
        QualityGates.from_mapping({"allow_falls": "no"})
    with pytest.raises(ConfigError, match="'max_penetration_m' must be a non-negative number or null"):
        QualityGates.from_mapping({"max_penetration_m": -1})
    with pytest.raises(ConfigError, match="fraction"):
        QualityGates.from_mapping({"min_contact_match": 5})
    with pytest.raises(ConfigError, match="must be a mapping"):
        QualityGates.from_mapping(["allow_falls"])


def test_the_table_lists_every_excluded_run_and_counts_a_crowd_of_good_ones():
    from akd_core.export.quality import quality_table

    good = [{"name": f"quadruped__trot__seed{i}", "included": True, "passed": True, "reasons": [],
             "quality": {"link_pos_err_m": 0.05}} for i in range(30)]
    bad = {"name": "go2__trotting-forward-over-rough-ground-with-a-long-prompt__seed0", "included": False,
           "passed": False, "reasons": ["fell (max root tilt 176 deg) (gate allow_falls)"], "quality": {}}
    forced = {**bad, "name": "go2__trot__seed1", "included": True}
    table = quality_table([*good, bad, forced]).splitlines()
    assert table[1].startswith(bad["name"] + " excluded") and table[1].endswith("(gate allow_falls)")
    assert "INCLUDED DESPITE: fell" in table[2] and table[2].split()[1] == "included*"
    assert table[3] == "... and 30 included runs that pass every gate (listed in the summary)"
    assert table[4].startswith("* --include-rejected: 1 run(s)")
    short = quality_table(good[:2], status=False).splitlines()
    assert len(short) == 3 and short[1] == "quadruped__trot__seed0 included      0.0500"


# ----------------------------------------------------------------------------- real run directories
def test_limit_gate_names_the_joint_and_frame_of_the_tracked_arrays(tmp_path):
    run = finished_run(tmp_path / "wild", exceed=("pd_targets", 7, 2))
    joint = load_urdf(run.file(ROBOT_URDF)).joint_names[2]
    quality, episode = assess_run(run.path, QualityGates())
    assert not quality.passed and not quality.included and episode is not None
    (reason,) = quality.reasons
    assert f"'pd_targets' of joint '{joint}'" in reason and "at frame 7" in reason
    assert reason.endswith("(gate allow_limit_violations)")
    assert quality.figures["limit_violation"].startswith(str(run.path))
    allowed, _ = assess_run(run.path, QualityGates(allow_limit_violations=True))
    assert allowed.passed and allowed.included
    forced, _ = assess_run(run.path, QualityGates(), include_rejected=True)
    assert forced.included and not forced.passed and forced.reasons == quality.reasons
    good, _ = assess_run(finished_run(tmp_path / "good").path, QualityGates())
    assert good.passed and good.reasons == [] and good.figures["limit_violation"] is None


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("quality_runs")
    return {"good": finished_run(root / "good"),
            "fell": finished_run(root / "fell", seed=1, track={"fell": True, "max_tilt_deg": 150.0}),
            "wild": finished_run(root / "wild", seed=2, exceed=("joint_pos", 12, 0))}


def _demo_runs(path: Path) -> list[str]:
    with h5py.File(path, "r") as f:
        return sorted(Path(f["data"][d].attrs["run"]).name for d in f["data"])


def test_export_of_many_runs_keeps_the_good_ones_and_lists_the_others(three_runs, tmp_path, capsys):
    runs = [str(r.path) for r in three_runs.values()]
    out = tmp_path / "walks.hdf5"
    assert main(["export", *runs, "--format", "hdf5", "-o", str(out)]) == 0
    assert _demo_runs(out) == ["good"]
    printed = capsys.readouterr().out
    assert "1 of 3 runs exported, 2 excluded" in printed and "fell (max root tilt 150 deg)" in printed
    summary = json.loads((tmp_path / "walks.hdf5.summary.json").read_text())
    by_name = {r["name"]: r for r in summary["runs"]}
    assert by_name["good"]["included"] and by_name["good"]["reasons"] == []
    assert by_name["fell"]["reasons"] == ["fell (max root tilt 150 deg) (gate allow_falls)"]
    assert "at frame 12" in by_name["wild"]["reasons"][0] and summary["written"]["hdf5"] == [str(out)]

    # --include-rejected puts them back, and says so; the fallen demo keeps success = False
    forced = tmp_path / "all.hdf5"
    assert main(["export", *runs, "--format", "hdf5", "-o", str(forced), "--include-rejected"]) == 0
    assert _demo_runs(forced) == ["fell", "good", "wild"]
    printed = capsys.readouterr().out
    assert "INCLUDED DESPITE: fell" in printed and "--include-rejected: 2 run(s)" in printed
    with h5py.File(forced, "r") as f:
        success = {Path(f["data"][d].attrs["run"]).name: bool(f["data"][d].attrs["success"]) for d in f["data"]}
    assert success == {"fell": False, "good": True, "wild": True}

    # a gate relaxed on the command line
    relaxed = tmp_path / "relaxed.hdf5"
    assert main(["export", *runs, "-o", str(relaxed), "--allow-falls"]) == 0
    assert _demo_runs(relaxed) == ["fell", "good"]

    # nothing passes: exit 1, the summary is still written, no dataset
    none = tmp_path / "none.hdf5"
    assert main(["export", runs[1], runs[2], "-o", str(none)]) == 1
    assert not none.exists()
    assert json.loads((tmp_path / "none.hdf5.summary.json").read_text())["included"] == 0
    assert "no run passed the quality gates" in capsys.readouterr().err


def test_export_of_one_run_refuses_a_rejected_run_naming_the_gate(three_runs, capsys):
    fell = three_runs["fell"]
    assert main(["export", str(fell.path), "--format", "hdf5"]) == 2
    err = capsys.readouterr().err
    assert "is not a usable demonstration" in err and "fell (max root tilt 150 deg) (gate allow_falls)" in err
    assert "--allow-falls" in err and "--include-rejected" in err
    assert not (fell.path / "export" / "dataset.hdf5").exists()
    wild = three_runs["wild"]
    assert main(["export", str(wild.path), "--format", "amp"]) == 2
    assert "--allow-limit-violations" in capsys.readouterr().err
    # the old spelling of the limit override still works
    assert main(["export", str(wild.path), "--format", "amp", "--allow-out-of-limits"]) == 0
    assert main(["export", str(fell.path), "--format", "hdf5", "--include-rejected"]) == 0
    assert "WARNING: --include-rejected" in capsys.readouterr().err
    stage = RunDir(fell.path).stage("export")
    assert stage["metrics"]["quality"]["passed"] is False and stage["metrics"]["quality"]["include_rejected"]
    assert _demo_runs(fell.path / "export" / "dataset.hdf5") == ["fell"]
    assert main(["export", str(three_runs["good"].path), "--format", "hdf5"]) == 0
    assert RunDir(three_runs["good"].path).stage("export")["metrics"]["quality"]["passed"] is True
