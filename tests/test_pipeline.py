"""`akd run` (akd_core.pipeline): every stage in order on a real robot, resume, --force, the summary."""

from __future__ import annotations

import pytest

from akd_core.io.errors import ConfigError
from akd_core.io.rundir import RunDir
from akd_core.pipeline import PipelineConfig, run_pipeline

STAGES = ("gait", "track", "crosscheck", "preview", "export")


@pytest.fixture(scope="module")
def finished(tmp_path_factory, a1_urdf):
    """A short a1 trot through the whole pipeline (1 tracking iteration per window)."""
    out = tmp_path_factory.mktemp("pipeline") / "run"
    cfg = PipelineConfig(robot=str(a1_urdf), prompt="trot forward", out=out, duration=0.6, track_iterations=1,
                         exports=("hdf5",))
    lines: list[str] = []
    manifest = run_pipeline(cfg, echo=lines.append)
    return cfg, manifest, lines


def test_every_stage_runs_in_order_and_writes_its_files(finished):
    cfg, manifest, lines = finished
    assert [line.split()[1].rstrip(":") for line in lines if line.startswith("[") and "..." in line] == list(STAGES)
    assert all(manifest["stages"][s]["status"] == "done" for s in STAGES)
    assert manifest["pipeline"]["status"] == "done"
    for name in ("robot.urdf", "reference.npz", "tracked.npz", "crosscheck.json", "preview.mp4",
                 "export/dataset.hdf5"):
        assert (cfg.out / name).is_file(), name
    for s in STAGES:
        assert manifest["stages"][s]["seconds"] >= 0


def test_summary_reports_the_recorded_figures(finished):
    _, manifest, lines = finished
    summary = lines[-1]
    track = manifest["stages"]["track"]["metrics"]
    cross = manifest["stages"]["crosscheck"]["metrics"]
    link_row = next(line for line in summary.splitlines() if "link position error" in line)
    assert f"{track['naive_link_pos_err_m']:.3g} m" in link_row and f"{track['link_pos_err_m']:.3g} m" in link_row
    assert f"cross-check in {cross['engine']}" in summary and ("PASS" if cross["passed"] else "FAIL") in summary
    assert "akd ros replay" in summary and "export/" in summary


def test_rerun_skips_done_stages_and_redoes_an_unfinished_one(finished):
    cfg, _, _ = finished
    tracked_mtime = (cfg.out / "tracked.npz").stat().st_mtime_ns
    lines: list[str] = []
    run_pipeline(cfg, echo=lines.append)
    assert sum("done already" in line for line in lines) == len(STAGES)
    assert (cfg.out / "tracked.npz").stat().st_mtime_ns == tracked_mtime
    # a run killed during crosscheck: that stage (and only it) runs again
    RunDir(cfg.out).set_stage("crosscheck", status="running", seconds=0.0, config={}, metrics={})
    lines = []
    manifest = run_pipeline(cfg, echo=lines.append)
    assert [line for line in lines if "..." in line] == ["[3/5] crosscheck ..."]
    assert manifest["stages"]["crosscheck"]["status"] == "done"
    assert (cfg.out / "tracked.npz").stat().st_mtime_ns == tracked_mtime


def test_another_prompt_in_the_same_run_needs_force(finished):
    cfg, _, _ = finished
    other = PipelineConfig(robot=cfg.robot, prompt="pace forward", out=cfg.out)
    with pytest.raises(ConfigError, match="already holds a run .*--force"):
        run_pipeline(other, echo=lambda _: None)


@pytest.mark.parametrize("field,value,match", [("prompt", "  ", "--prompt is empty"),
                                               ("source", "mocap", "--source must be one of")])
def test_bad_options_are_clear_errors(tmp_path, field, value, match):
    cfg = PipelineConfig(robot="quadruped", prompt="a dog trotting", out=tmp_path / "run")
    setattr(cfg, field, value)
    with pytest.raises(ConfigError, match=match):
        run_pipeline(cfg, echo=lambda _: None)
