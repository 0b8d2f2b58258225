"""The default video prior (issue 18 item 3): `akd distill` / `akd run --source sds` without --video-model load
$AKD_VIDEO_MODEL or the shipped models/akd-gaits-tiny; a missing folder is an error that names it. The distill
stage records the distilled clip's gait class, and the `akd run` summary prints it for sds runs."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from akd_core.cli import main
from akd_core.io.errors import DependencyError
from akd_core.io.rundir import RunDir
from akd_core.motion.classify import GAITS
from akd_core.sds.prior import default
from akd_core.sds.prior.tiny import save_tiny_pretrained

PROMPT = "a dog trotting forward"
FAST = ["--iterations", "1", "--n-gaussians", "400", "--width", "32", "--height", "32"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A complete diffusers CogVideoX folder (tiny, random) named like the shipped prior."""
    return save_tiny_pretrained(tmp_path_factory.mktemp("models") / default.DEFAULT_MODEL_NAME, seed=0)


@pytest.fixture
def shipped(tiny_model, monkeypatch) -> Path:
    """The tiny folder placed where the shipped prior is looked for; no machine-configured model."""
    monkeypatch.setattr(default, "MODELS_DIRS", [tiny_model.parent])
    monkeypatch.delenv(default.VIDEO_MODEL_ENV, raising=False)
    return tiny_model


@pytest.fixture(scope="module")
def distilled(tiny_model, tmp_path_factory) -> tuple[Path, str]:
    """`akd distill` without --prior / --video-model (one iteration, small render), the tiny folder placed as the
    shipped prior: (run directory, printed output). About 20-50 s on 2 busy cores (the render, not the loading)."""
    out = tmp_path_factory.mktemp("sds") / "run"
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.setattr(default, "MODELS_DIRS", [tiny_model.parent])
        patch.delenv(default.VIDEO_MODEL_ENV, raising=False)
        assert main(["distill", "--robot", "quadruped", "--prompt", PROMPT, "--out", str(out), *FAST]) == 0
    return out, printed.getvalue()


def test_akd_distill_without_video_model_loads_the_shipped_folder(distilled, tiny_model):
    out, printed = distilled
    stage = RunDir(out).stage("distill")
    assert stage["status"] == "done"
    assert stage["config"]["prior"] == "cogvideox" and stage["config"]["video_model"] == str(tiny_model)
    # a folder without akd.json gets the paper's per-frame SDS from its neutral start (the rest pose gliding forward)
    assert stage["config"]["param"] == "frames" and stage["config"]["init"] == "constant"
    assert stage["config"]["model_settings"] is None
    metrics = stage["metrics"]
    # one SDS step barely moves the neutral start: no gait the classifier is sure of
    assert metrics["gait_class"] in GAITS and metrics["gait_confidence"] < 0.5, metrics
    assert f"gait_class: {metrics['gait_class']}" in printed


def test_the_default_folder_is_what_gets_loaded(shipped, tmp_path, capsys):
    """A broken default folder fails in the loader, naming what is missing: the default is really loaded."""
    broken = tmp_path / "models" / default.DEFAULT_MODEL_NAME
    shutil.copytree(shipped, broken)
    shutil.rmtree(broken / "transformer")
    default.MODELS_DIRS[:] = [broken.parent]
    assert main(["distill", "--robot", "quadruped", "--prompt", PROMPT, "--out", str(tmp_path / "run"), *FAST]) == 2
    err = capsys.readouterr().err
    assert str(broken) in err and "missing transformer" in err


def test_a_missing_default_folder_is_an_error_naming_it_and_the_fixes(tmp_path, monkeypatch, capsys):
    nowhere = tmp_path / "nowhere"
    monkeypatch.setattr(default, "MODELS_DIRS", [nowhere])
    monkeypatch.delenv(default.VIDEO_MODEL_ENV, raising=False)
    out = tmp_path / "run"
    assert main(["distill", "--robot", "quadruped", "--prompt", PROMPT, "--out", str(out), *FAST]) == 2
    err = capsys.readouterr().err
    folder = str(nowhere / default.DEFAULT_MODEL_NAME)
    assert folder in err and "akd prior train" in err and "--video-model DIR" in err and "--prior tiny" in err
    assert RunDir(out).stage("distill") == {}, "the stage did not start"


def test_akd_distill_defaults_to_the_cogvideox_path():
    from akd_core.cli import build_parser

    parser = build_parser("distill")
    args = parser.parse_args(["distill", "--robot", "quadruped", "--prompt", PROMPT, "--out", "x"])
    assert args.prior == "cogvideox" and args.video_model is None
    assert parser.parse_args(["distill", "--out", "x", "--prior", "tiny"]).prior == "tiny"


def test_resolution_order_flag_then_environment_then_shipped(shipped, tmp_path, monkeypatch):
    assert default.resolve_video_model() == shipped
    elsewhere = tmp_path / "configured"
    elsewhere.mkdir()
    monkeypatch.setenv(default.VIDEO_MODEL_ENV, str(elsewhere))
    assert default.resolve_video_model() == elsewhere
    assert default.resolve_video_model(tmp_path / "given") == tmp_path / "given"
    monkeypatch.setenv(default.VIDEO_MODEL_ENV, str(tmp_path / "gone"))
    with pytest.raises(DependencyError, match=r"\$AKD_VIDEO_MODEL names the video model folder .*gone"):
        default.resolve_video_model()


def test_the_repository_models_folder_is_searched_first():
    repo = Path(__file__).resolve().parents[1]
    assert default.MODELS_DIRS[0] == repo / "models"


def test_akd_run_sds_loads_the_default_folder(tmp_path, monkeypatch):
    """`akd run --source sds` without --video-model: its motion stage looks for the shipped folder (missing: the
    error names it) and loads it (a broken one fails in the loader, naming what is missing)."""
    from akd_core.pipeline import PipelineConfig, _motion_stage

    monkeypatch.delenv(default.VIDEO_MODEL_ENV, raising=False)
    cfg = PipelineConfig(robot="quadruped", prompt=PROMPT, out=tmp_path / "run", source="sds", distill_iterations=1)
    assert cfg.prior == "cogvideox" and cfg.video_model is None
    monkeypatch.setattr(default, "MODELS_DIRS", [tmp_path / "nowhere"])
    with pytest.raises(DependencyError, match="default prior folder .*nowhere/akd-gaits-tiny does not exist"):
        _motion_stage(cfg, RunDir(cfg.out, create=True))
    broken = tmp_path / "models" / default.DEFAULT_MODEL_NAME
    broken.mkdir(parents=True)
    monkeypatch.setattr(default, "MODELS_DIRS", [tmp_path / "nowhere", broken.parent])
    with pytest.raises(DependencyError, match=f"{broken} is incomplete: missing model_index.json"):
        _motion_stage(cfg, RunDir(cfg.out, create=True))


def test_akd_run_summary_names_the_distilled_gait(distilled):
    from akd_core.pipeline import summary_table

    out, _ = distilled
    run = RunDir(out)
    manifest = run.update_manifest(pipeline={"source": "sds"})
    metrics = manifest["stages"]["distill"]["metrics"]
    assert metrics["gait_class"] in GAITS
    lines = summary_table(run, manifest).splitlines()
    reference = next(i for i, x in enumerate(lines) if x.strip().startswith("reference:"))
    assert lines[reference + 1].strip() == (f"distilled gait: {metrics['gait_class']} (confidence "
                                            f"{metrics['gait_confidence']:.2g}; prompt {PROMPT!r})")
    json.dumps(manifest)  # the metrics stay JSON
    # a gait-library run has no such line
    assert "distilled gait" not in summary_table(run, run.update_manifest(pipeline={"source": "gait"}))


def test_a_folders_akd_json_sets_what_akd_distill_runs(tiny_model, tmp_path, monkeypatch, capsys):
    """A copy of the tiny folder whose akd.json declares --param phase (cheap settings for a test), placed as the
    default model: `akd distill` with no flags runs the phase search with the contrast score over the rewritten
    prompt's gait captions, from random leg phases, and records all of it in the stage config."""
    folder = tmp_path / "models" / default.DEFAULT_MODEL_NAME
    shutil.copytree(tiny_model, folder)
    (folder / "akd.json").write_text(json.dumps({
        "param": "phase",
        "distill": {"iterations": 1, "n_gaussians": 200, "width": 32, "height": 32, "phase_search_refine": [],
                    "phase_search_timesteps": [300], "phase_search_score": "contrast",
                    "phase_search_contrast": [["trotting", "pacing", "bounding"]], "video_every": 0},
        "prompt_phrases": {"forward quickly": "fast forward"}}))
    monkeypatch.setattr(default, "MODELS_DIRS", [folder.parent])
    monkeypatch.delenv(default.VIDEO_MODEL_ENV, raising=False)
    out = tmp_path / "run"
    assert main(["distill", "--robot", "quadruped", "--prompt", "a dog pacing forward quickly", "--out",
                 str(out)]) == 0
    stage = RunDir(out).stage("distill")
    config, metrics = stage["config"], stage["metrics"]
    assert config["video_model"] == str(folder) and config["param"] == "phase" and config["init"] == "constant"
    assert config["model_settings"]["n_gaussians"] == 200 and config["iterations"] == 1
    assert config["prior_prompt"] == "a dog pacing fast forward"
    assert config["contrast_prompts"] == [f"a dog {g} fast forward" for g in ("trotting", "pacing", "bounding")]
    assert config["cycle_hz"] > 0 and len(config["start_phases"]) == 4
    assert metrics["phase_search_candidates"] == 8  # the half-cycle grid only
    assert "gait_class:" in capsys.readouterr().out
