"""`akd batch`: sweeps expand into named jobs, failures are isolated, re-runs do no work, and the
local and Ray backends produce identical datasets."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from akd_core.batch import expand_jobs, load_sweep, run_batch
from akd_core.errors import ConfigError
from akd_core.rundir import RunDir


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


def _poison_one_job(out: Path) -> str:
    """A stale run directory of another robot/prompt under one job's name: that job must fail, alone."""
    name = "hexapod__trotting-forward__seed0"
    RunDir(out / name, create=True).update_manifest(robot="ostrich", prompt="an ostrich running")
    return name


def _demos(path: Path) -> dict[str, dict[str, np.ndarray]]:
    with h5py.File(path, "r") as f:
        return {name: {"actions": f["data"][name]["actions"][()], "joint_pos": f["data"][name]["obs"]["joint_pos"][()],
                       "prompt": f["data"][name].attrs.get("prompt")} for name in f["data"]}


@pytest.mark.slow
def test_local_and_ray_sweeps_isolate_failures_resume_and_agree(tmp_path):
    pytest.importorskip("ray")
    results = {}
    for backend in ("local", "ray"):
        sweep = _write_sweep(tmp_path, f"runs/{backend}")
        failing = _poison_one_job(tmp_path / "runs" / backend)
        summary = run_batch(sweep, backend=backend, max_parallel=2, progress=False)
        assert summary["jobs"] == 4 and summary["succeeded"] == 3 and summary["failed"] == 1
        failed = [r for r in summary["runs"] if r["status"] == "failed"]
        assert failed[0]["name"] == failing and "already holds a run" in failed[0]["error"]
        dataset = Path(summary["datasets"]["hdf5"][0])
        with h5py.File(dataset, "r") as f:
            assert len(f["data"]) == 3 and f["data"].attrs["total"] > 0
        csv_rows = (tmp_path / "runs" / backend / "summary.csv").read_text().strip().splitlines()
        assert len(csv_rows) == 5
        assert json.loads((tmp_path / "runs" / backend / "summary.json").read_text())["failed"] == 1
        again = run_batch(sweep, backend=backend, max_parallel=2, progress=False)
        assert again["executed"] == 1, "only the failed job is attempted again"
        assert {r["name"] for r in again["runs"] if r["status"] == "skipped"} == {
            r["name"] for r in summary["runs"] if r["status"] == "done"}
        results[backend] = _demos(dataset)
    local, ray_ = results["local"], results["ray"]
    assert sorted(local) == sorted(ray_)
    for name in local:
        np.testing.assert_array_equal(local[name]["actions"], ray_[name]["actions"])
        np.testing.assert_array_equal(local[name]["joint_pos"], ray_[name]["joint_pos"])


def test_ray_backend_without_ray_is_a_clear_error(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    sweep = _write_sweep(tmp_path, "runs/noray")
    from akd_core.errors import DependencyError

    with pytest.raises(DependencyError, match="pip install"):
        run_batch(sweep, backend="ray", progress=False)


def test_summary_table_lists_every_dataset_written():
    from akd_core.batch import summary_table

    summary = {"runs": [{"name": "a1__trot__seed0", "status": "done", "link_pos_err_m": 0.1, "seconds": 3.0},
                        {"name": "bad__trot__seed0", "status": "failed", "error": "no legs found"}],
               "jobs": 2, "succeeded": 1, "sweep_out": "out",
               "datasets": {"hdf5": ["out/dataset/dataset.hdf5"],
                            "lerobot": ["out/dataset/lerobot_a1", "out/dataset/lerobot_quadruped"]}}
    table = summary_table(summary)
    assert "out/dataset/lerobot_a1, out/dataset/lerobot_quadruped" in table
    assert "1 of 2 runs succeeded" in table and "no legs found" in table
