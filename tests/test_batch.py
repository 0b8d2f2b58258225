"""`akd batch`: sweeps expand into named jobs, failures are isolated, the dataset holds only the runs that pass
the quality gates, summary.json names the others with their reasons (always written), re-runs do no work, and the
local and Ray backends produce identical datasets."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from akd_core.batch import expand_jobs, load_sweep, run_batch
from akd_core.export.quality import QualityGates
from akd_core.io.errors import ConfigError


def _write_sweep(folder: Path, out: str) -> Path:
    sweep = folder / "sweep.yaml"
    sweep.write_text(f"""
out: {out}
robots: [quadruped, hexapod]
prompts: ["walking forward", "trotting forward"]
seeds: [0]
source: gait
duration: 0.6
iterations: 1
export: [hdf5]
""")
    return sweep


def test_sweep_expands_into_named_jobs(tmp_path):
    sweep = load_sweep(_write_sweep(tmp_path, "runs/s"))
    jobs = expand_jobs(sweep)
    assert len(jobs) == 4
    assert {j.name for j in jobs} == {
        "quadruped__walking-forward__seed0", "quadruped__trotting-forward__seed0",
        "hexapod__walking-forward__seed0", "hexapod__trotting-forward__seed0"}
    assert all(Path(j.run_dir).parent == tmp_path / "runs" / "s" for j in jobs)
    assert all(j.keep_failed for j in jobs)  # a failed tracking verdict is the gates' call (allow_failed_tracking)
    assert sweep.quality == QualityGates()  # default gates when the sweep has no quality block


def test_bad_sweeps_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("out: x\nrobots: [quadruped]\nprompt: ['typo']\n")
    with pytest.raises(ConfigError, match="unknown keys \\['prompt'\\]"):
        load_sweep(bad)
    bad.write_text("out: x\nrobots: [quadruped]\n")
    with pytest.raises(ConfigError, match="'prompts' is required"):
        load_sweep(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_sweep(tmp_path / "missing.yaml")
    bad.write_text("out: x\nrobots: [quadruped]\nprompts: [trot]\nquality: {allow_fall: true}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: quality: unknown gates \['allow_fall'\]"):
        load_sweep(bad)


BROKEN_URDF = """<robot name="broken">
<link name="base"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
</inertial></link>
<joint name="hip" type="revolute"><parent link="base"/><child link="thigh"/>
<limit lower="-1" upper="1" effort="10" velocity="5"/></joint></robot>
"""


def _demos(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """Demos of an HDF5 dataset by the name of their run directory."""
    with h5py.File(path, "r") as f:
        return {Path(g.attrs["run"]).name: {"actions": g["actions"][()], "joint_pos": g["obs"]["joint_pos"][()],
                                            "success": bool(g.attrs["success"])}
                for g in (f["data"][name] for name in f["data"])}


def _verdicts(summary: dict) -> dict[str, tuple[bool, list[str]]]:
    return {r["name"]: (r["included"], r["reasons"]) for r in summary["runs"]}


def _gated_sweep(folder: Path, extra: str = "", robots: str = "[quadruped, broken.urdf]") -> Path:
    (folder / "broken.urdf").write_text(BROKEN_URDF)
    sweep = folder / "sweep.yaml"
    sweep.write_text(f"""
out: runs/gated
robots: {robots}
prompts: ["trotting forward"]
seeds: [0, 1]
duration: 0.4
iterations: 1
export: [hdf5]
{extra}""")
    return sweep


def test_sweep_dataset_holds_only_the_good_runs_and_the_summary_names_the_rest(tmp_path, capsys):
    """Two finished quadruped runs (seed 1's tracked robot fell, as its manifest says) and two jobs of a URDF that
    does not load: exit 0, a dataset of exactly the good run, every other run listed with its reason."""
    from akd_core.cli import main

    from .test_quality import finished_run

    sweep = _gated_sweep(tmp_path)
    out = tmp_path / "runs" / "gated"
    finished_run(out / "quadruped__trotting-forward__seed0", seed=0)
    finished_run(out / "quadruped__trotting-forward__seed1", seed=1, track={"fell": True, "max_tilt_deg": 176.0})
    assert main(["batch", str(sweep)]) == 0
    table = capsys.readouterr().out
    assert "1 of 4 runs in the dataset, 3 excluded (2 failed jobs)" in table
    assert "fell (max root tilt 176 deg) (gate allow_falls)" in table and "job failed at gait" in table
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_code"] == 0 and summary["in_dataset"] == 1 and summary["failed"] == 2
    runs = {r["name"]: r for r in summary["runs"]}
    good, fell = runs["quadruped__trotting-forward__seed0"], runs["quadruped__trotting-forward__seed1"]
    broken = runs["broken__trotting-forward__seed0"]
    assert good["included"] and good["passed"] and good["reasons"] == []
    assert good["stages"] == {"gait": "done", "track": "done", "crosscheck": "done", "preview": "done"}
    assert good["quality"]["link_pos_err_m"] == 0.05 and good["quality"]["crosscheck_passed"] is True
    assert not fell["included"] and fell["reasons"] == ["fell (max root tilt 176 deg) (gate allow_falls)"]
    assert fell["quality"]["fell"] is True and fell["status"] == "skipped"
    assert broken["status"] == "failed" and not broken["included"]
    assert broken["stages"] == {"gait": "failed", "track": "not run", "crosscheck": "not run", "preview": "not run"}
    assert broken["reasons"] == [f"job failed at gait: {broken['error']}"] and "thigh" in broken["error"]
    assert summary["totals"]["robot"] == {"quadruped": {"jobs": 2, "included": 1, "excluded": 1, "failed": 0},
                                          "broken": {"jobs": 2, "included": 0, "excluded": 2, "failed": 2}}
    assert summary["totals"]["prompt"]["trotting forward"]["included"] == 1
    assert summary["quality"] == {"allow_falls": False, "allow_failed_tracking": False, "allow_limit_violations": False,
                                  "require_crosscheck": True,
                                  "max_link_err_m": 0.3, "max_stance_slip_mps": None, "max_penetration_m": None,
                                  "min_contact_match": None, "include_rejected": False}
    dataset = out / "dataset" / "dataset.hdf5"
    assert summary["datasets"] == {"hdf5": [str(dataset)]}
    first = _demos(dataset)
    assert sorted(first) == ["quadruped__trotting-forward__seed0"]
    csv_rows = (out / "summary.csv").read_text().strip().splitlines()
    assert len(csv_rows) == 5 and csv_rows[0].startswith("name,status,included,passed,reasons")

    # re-running is idempotent: only the failed jobs are attempted again, the same dataset and verdicts
    again = run_batch(sweep, progress=False)
    assert again["executed"] == 2 and _verdicts(again) == _verdicts(summary)
    second = _demos(dataset)
    assert sorted(second) == sorted(first)
    np.testing.assert_array_equal(second["quadruped__trotting-forward__seed0"]["actions"],
                                  first["quadruped__trotting-forward__seed0"]["actions"])

    # --include-rejected puts the fallen run back (marked, success = False). From here on the sweep leaves out the
    # broken URDF (its jobs would only fail again): the finished runs are judged again without re-running them
    _gated_sweep(tmp_path, robots="[quadruped]")
    assert main(["batch", str(sweep), "--include-rejected"]) == 0
    table = capsys.readouterr().out
    assert "INCLUDED DESPITE: fell" in table and "--include-rejected: 1 run(s)" in table
    forced = json.loads((out / "summary.json").read_text())
    assert forced["included_despite_gates"] == 1 and forced["in_dataset"] == 2
    assert {k: v["success"] for k, v in _demos(dataset).items()} == {
        "quadruped__trotting-forward__seed0": True, "quadruped__trotting-forward__seed1": False}

    # gates tightened in the sweep: the finished runs are judged again without re-running; none passes -> exit 1,
    # the summary is still written, and the dataset folder no longer holds the old demos
    _gated_sweep(tmp_path, "quality: {max_link_err_m: 0.01, allow_falls: true}", robots="[quadruped]")
    assert main(["batch", str(sweep)]) == 1
    assert "no run made it into the dataset" in capsys.readouterr().err
    strict = json.loads((out / "summary.json").read_text())
    assert strict["exit_code"] == 1 and strict["in_dataset"] == 0 and strict["datasets"] == {"hdf5": []}
    assert _verdicts(strict)["quadruped__trotting-forward__seed1"] == (
        False, ["link position error 0.05 m > 0.01 m (gate max_link_err_m)"])
    assert list((out / "dataset").iterdir()) == []


def test_an_interrupted_sweep_still_writes_its_summary(tmp_path, monkeypatch):
    """Ctrl-C during the jobs: the summary lists the finished runs and the interrupted ones; the dataset is kept."""
    import akd_core.batch as batch

    from .test_quality import finished_run

    sweep = _gated_sweep(tmp_path)
    out = tmp_path / "runs" / "gated"
    finished_run(out / "quadruped__trotting-forward__seed0", seed=0)

    def interrupted(jobs, max_parallel, bar, results):
        broken = next(j for j in jobs if j.name.startswith("broken"))
        results.append(batch.run_job(broken))  # a real job (the URDF does not load), then the user presses Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(batch, "_run_local", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_batch(sweep, progress=False)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and summary["exit_code"] == 1 and summary["datasets"] == {}
    statuses = {r["name"]: r["status"] for r in summary["runs"]}
    assert statuses == {"broken__trotting-forward__seed0": "failed", "broken__trotting-forward__seed1": "interrupted",
                        "quadruped__trotting-forward__seed0": "skipped",
                        "quadruped__trotting-forward__seed1": "interrupted"}
    reasons = {r["name"]: r["reasons"] for r in summary["runs"]}
    assert reasons["quadruped__trotting-forward__seed1"] == [
        "interrupted: the sweep was interrupted before this job finished"]
    assert reasons["quadruped__trotting-forward__seed0"] == []  # finished and good, but no dataset was rebuilt
    assert not (out / "dataset").exists()


def _weak_quadruped(folder: Path) -> Path:
    """The built-in quadruped with every effort limit at 1 %: too weak to stand."""
    from akd_core.model.skeletons import build

    robot = build("quadruped")
    for joint in robot.joints:
        joint.effort *= 0.01
    path = folder / "weak_quadruped.urdf"
    robot.to_urdf(path)
    return path


@pytest.mark.slow
def test_local_and_ray_sweeps_keep_only_usable_demos_resume_and_agree(tmp_path):
    """Real jobs end to end: the built-in quadruped (a usable trot), the same robot at 1 % effort (excluded by the
    default gates) and a URDF that does not load; local and Ray give the same dataset of exactly the good run."""
    pytest.importorskip("ray")
    from akd_core.cli import main

    _weak_quadruped(tmp_path)
    (tmp_path / "broken.urdf").write_text(BROKEN_URDF)
    good, weak, broken = ("quadruped__trotting-forward__seed0", "weak-quadruped__trotting-forward__seed0",
                          "broken__trotting-forward__seed0")
    results = {}
    for backend in ("local", "ray"):
        sweep = tmp_path / f"sweep_{backend}.yaml"
        sweep.write_text(f"out: runs/{backend}\nrobots: [quadruped, weak_quadruped.urdf, broken.urdf]\n"
                         "prompts: [trotting forward]\nduration: 0.6\niterations: 1\nexport: [hdf5]\n")
        assert main(["batch", str(sweep), "--backend", backend, "--max-parallel", "2"]) == 0
        summary = json.loads((tmp_path / "runs" / backend / "summary.json").read_text())
        runs = {r["name"]: r for r in summary["runs"]}
        assert summary["jobs"] == 3 and summary["in_dataset"] == 1 and summary["failed"] == 1
        assert runs[good]["included"] and runs[good]["reasons"] == []
        assert runs[weak]["status"] == "done" and not runs[weak]["included"]
        assert all("(gate " in reason for reason in runs[weak]["reasons"]) and runs[weak]["reasons"]
        assert runs[broken]["reasons"][0].startswith("job failed at gait")
        dataset = Path(summary["datasets"]["hdf5"][0])
        assert sorted(_demos(dataset)) == [good]
        again = run_batch(sweep, backend=backend, max_parallel=2, progress=False)
        assert again["executed"] == 1, "only the failed job is attempted again"
        assert _verdicts(again) == _verdicts(summary) and sorted(_demos(dataset)) == [good]
        results[backend] = _demos(dataset)
    local, ray_ = results["local"], results["ray"]
    np.testing.assert_array_equal(local[good]["actions"], ray_[good]["actions"])
    np.testing.assert_array_equal(local[good]["joint_pos"], ray_[good]["joint_pos"])


def test_ray_backend_without_ray_is_a_clear_error(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    sweep = _write_sweep(tmp_path, "runs/noray")
    from akd_core.io.errors import DependencyError

    with pytest.raises(DependencyError, match="pip install"):
        run_batch(sweep, backend="ray", progress=False)


def test_summary_table_lists_every_dataset_written():
    from akd_core.batch import summary_table

    summary = {"runs": [{"name": "a1__trot__seed0", "status": "done", "included": True, "passed": True,
                         "reasons": [], "quality": {"link_pos_err_m": 0.1}},
                        {"name": "bad__trot__seed0", "status": "failed", "included": False, "passed": False,
                         "reasons": ["job failed at gait: no legs found"], "quality": {}}],
               "jobs": 2, "in_dataset": 1, "excluded": 1, "failed": 1, "sweep_out": "out",
               "datasets": {"hdf5": ["out/dataset/dataset.hdf5"],
                            "lerobot": ["out/dataset/lerobot_a1", "out/dataset/lerobot_quadruped"]}}
    table = summary_table(summary)
    assert "out/dataset/lerobot_a1, out/dataset/lerobot_quadruped" in table
    assert "1 of 2 runs in the dataset, 1 excluded (1 failed jobs)" in table and "no legs found" in table
    assert "a1__trot__seed0" in table and "0.1000" in table


def test_a_sweep_tracks_its_flight_gaits_at_its_own_frame_rate_so_its_dataset_has_one(tmp_path, monkeypatch):
    """`akd track` controls a clip with flight phases at tracker.FLIGHT_CONTROL_HZ; a sweep's clips share one
    dataset, which has one fps, so a sweep tracks every clip at its frame rate: a pronk and a trot at 50 fps both
    come out at 50 Hz, and the HDF5 dataset holds both (the gates opened: 0.8 s clips, one MPC iteration)."""
    from akd_core.model.load import load_robot
    from akd_core.motion.clip import Motion
    from akd_core.physics.verdict import motion_class

    monkeypatch.chdir(tmp_path)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("out: runs/rates\nrobots: [quadruped]\nprompts: [pronk forward, trotting forward]\n"
                     "duration: 0.8\niterations: 1\nexport: [hdf5]\n"
                     "quality: {allow_failed_tracking: true, allow_falls: true, max_link_err_m: 10, "
                     "require_crosscheck: false}\n")
    summary = run_batch(sweep, progress=False)
    out = tmp_path / "runs" / "rates"
    pronk, trot = out / "quadruped__pronk-forward__seed0", out / "quadruped__trotting-forward__seed0"
    robot = load_robot("quadruped")
    assert motion_class(robot, Motion.load(pronk / "reference.npz")) == "dynamic"
    for run in (pronk, trot):
        assert float(np.load(run / "tracked.npz")["dt"]) == pytest.approx(0.02)
    assert summary["in_dataset"] == 2 and sorted(_demos(Path(summary["datasets"]["hdf5"][0]))) == \
        sorted([pronk.name, trot.name])
