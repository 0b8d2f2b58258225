"""How SDS uses a model folder (issue 32 item 5): a folder declares the parametrisation and settings it suits in
``akd.json`` beside ``model_index.json`` (the shipped prior: ``param`` phase), a folder without the file gets the
paper's per-frame SDS, flags win over both; a bad file is an error naming it, the field and the fix. The phase
search's "contrast" score compares the prompt with the same caption told with each gait word. All fast: no
distillation runs here (tests/test_default_prior.py runs `akd distill` on a folder without akd.json;
tests/test_shipped_prior.py has the slow runs of the shipped prior's defaults)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from akd_core.cli import build_parser
from akd_core.io.errors import ConfigError
from akd_core.sds.distill import (
    DEFAULT_ITERATIONS_CPU,
    DistillConfig,
    contrast_prompts,
    distill_settings,
    model_defaults,
    phase_scorer,
)
from akd_core.sds.prior.cogvideox import CogVideoXOptions
from akd_core.sds.prior.default import DEFAULT_MODEL_NAME, MODELS_DIRS, model_settings, prior_prompt
from akd_core.sds.prior.tiny import make_tiny_prior

SHIPPED = MODELS_DIRS[0] / DEFAULT_MODEL_NAME
GAITS = ("trotting", "pacing", "bounding", "galloping", "walking")


def _folder(tmp_path: Path, settings: object | str) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    text = settings if isinstance(settings, str) else json.dumps(settings)
    (folder / "akd.json").write_text(text)
    return folder


def test_a_folder_without_akd_json_gets_the_papers_per_frame_sds(tmp_path):
    config, init, declared = distill_settings("cogvideox", tmp_path, None, None, None, cuda=False)
    assert declared == {} and config.param == "frames" and init == "constant"
    assert config == DistillConfig(iterations=DEFAULT_ITERATIONS_CPU)
    assert distill_settings("cogvideox", tmp_path, None, None, None, cuda=True)[0].iterations == 10000


def test_the_folder_declares_its_parametrisation_and_flags_win(tmp_path):
    folder = _folder(tmp_path, {"param": "phase", "distill": {"iterations": 7, "n_gaussians": 1500,
                                                              "phase_search_timesteps": [200, 300],
                                                              "phase_search_contrast": [["trotting", "pacing"]]}})
    config, init, declared = distill_settings("cogvideox", folder, None, None, None, seed=3)
    assert (config.param, config.iterations, config.n_gaussians, config.seed) == ("phase", 7, 1500, 3)
    assert config.phase_search_timesteps == (200, 300) and config.phase_search_contrast == (("trotting", "pacing"),)
    assert init == "constant" and declared["param"] == "phase"
    # the command's flags (config_overrides, --iterations, --init) win over the folder
    config, init, _ = distill_settings("cogvideox", folder, 12, "gait", {"param": "frames", "n_gaussians": 900})
    assert (config.param, config.iterations, config.n_gaussians, init) == ("frames", 12, 900, "gait")
    # the oracle borrows the folder's VAE only: its settings are DistillConfig's, its start the target's standing
    config, init, declared = distill_settings("oracle", folder, None, None, None, cuda=False)
    assert declared == {} and config.param == "frames" and init == "standing"
    assert config.iterations == DEFAULT_ITERATIONS_CPU


@pytest.mark.parametrize(("content", "match"), [
    ("{not json", "cannot read it as JSON"),
    ('["phase"]', "must hold a JSON object"),
    ({"parametrisation": "phase"}, "unknown field.*'parametrisation'.*param, distill"),
    ({"param": "joints"}, "field 'param' must be one of frames, phase"),
    ({"param": 3}, "field 'param' must be a string"),
    ({"distill": {"lr": 0.1}}, "'distill' has an unknown setting 'lr'"),
    ({"distill": {"seed": 1}}, "'distill' has an unknown setting 'seed'"),
    ({"distill": {"camera": "spin"}}, "camera must be one of"),
    ({"distill": {"param": "phase"}}, "give 'param' once"),
    ({"distill": []}, "field 'distill' must be an object"),
    ({"prompt_phrases": {"quickly": 3}}, "field 'prompt_phrases' must map phrases to phrases"),
])
def test_a_bad_akd_json_names_the_file_the_field_and_the_fix(tmp_path, content, match):
    folder = _folder(tmp_path, content)
    with pytest.raises(ConfigError, match=match) as info:
        distill_settings("cogvideox", folder, None, None, None)
    assert str(folder / "akd.json") in str(info.value)


def test_the_shipped_prior_declares_phase_and_its_training_view():
    declared = model_defaults(SHIPPED)
    assert declared["param"] == "phase" and declared["phase_search_score"] == "contrast"
    # what its training clips were (akd prior data): 2000 Gaussians, the follow camera at the default framing, sharp
    assert (declared["n_gaussians"], declared["camera"], declared["camera_margin"], declared["blur_px"]) == \
        (2000, "follow", 1.4, 0.0)
    assert model_settings(SHIPPED)["about"]
    config, init, _ = distill_settings("cogvideox", SHIPPED, None, None, None)
    assert config.param == "phase" and init == "constant"


def test_the_prompt_is_told_in_the_words_and_order_of_the_priors_captions():
    """The shipped prior's captions say "a dog trotting fast forward"; "quickly" is no word of its tokenizer."""
    assert prior_prompt("a dog trotting forward quickly", SHIPPED) == "a dog trotting fast forward"
    assert prior_prompt("A dog pacing forward  slowly", SHIPPED) == "A dog pacing slowly forward"
    assert prior_prompt("a dog bounding forward", SHIPPED) == "a dog bounding forward"
    assert prior_prompt("a dog trotting forward quickly", None) == "a dog trotting forward quickly"


def test_contrast_prompts_swap_the_gait_word():
    groups = (GAITS, ("trots", "paces"))
    assert contrast_prompts("a dog pacing fast forward", groups) == tuple(
        f"a dog {g} fast forward" for g in GAITS)
    assert contrast_prompts("a dog paces", groups) == ("a dog trots", "a dog paces")
    assert contrast_prompts("a dog jumping", groups) == ()
    assert contrast_prompts("trotting trotters", (GAITS,))[1] == "pacing trotters"  # whole words only


def test_the_contrast_score_is_the_prompts_error_over_the_rivals_mean():
    """denoising_error_table scores rival captions in batched calls exactly as one call per caption and draw; the
    "contrast" score is the prompt's column over the mean of all rivals' (the prompt among them)."""
    from akd_core.model.legs import find_legs
    from akd_core.model.load import load_robot
    from akd_core.sds.clip_render import ClipRenderer, RenderView
    from akd_core.sds.distill import _view
    from akd_core.sds.phase import LegCycle, PhaseMotionParameters, cycle_clip, random_phases

    rivals = tuple(f"a dog {g} forward" for g in GAITS[:3])
    prior = make_tiny_prior(rivals[1], seed=0, options=CogVideoXOptions(contrast_prompts=rivals, height=32, width=32))
    assert prior.contrast_embeds.shape[0] == 3
    robot = load_robot("quadruped")
    legs = find_legs(robot)
    dofs = [robot.joint_names.index(name) for leg in legs for name in leg.joint_names]
    dof_leg = [i for i, leg in enumerate(legs) for _ in leg.joint_names]
    coeffs = np.zeros((len(dofs), 3))
    coeffs[:, 0], coeffs[:, 2] = robot.default_joint_pos()[dofs], 0.3  # a swing of 0.3 rad (one harmonic)
    cycle = LegCycle(2.0, 0.5, 0.55, np.array(dofs), np.array(dof_leg), coeffs, [leg.label for leg in legs])
    phases = random_phases(len(legs), 0)
    clip = cycle_clip(robot, cycle, phases, prior.num_frames, 8.0)
    config = DistillConfig(param="phase", n_gaussians=200, phase_search_score="contrast",
                           phase_search_timesteps=(300, 600), phase_search_draws=1)
    renderer = ClipRenderer(robot, 32, 32, 200, 0, "torch", _view(config))
    params = PhaseMotionParameters(clip, robot, cycle, phases)
    score = phase_scorer(params, renderer, prior, config)
    candidates = [phases, np.remainder(phases + np.array([0.0, 0.5, 0.5, 0.0]), 1.0)]
    values = score(candidates)
    # the same by hand: one transformer call per candidate, draw and caption
    with torch.no_grad():
        gen = torch.Generator().manual_seed(config.seed * 1000 + 13)
        expected, draws = [], []
        for candidate in candidates:
            params.phase.copy_(torch.as_tensor(candidate, dtype=torch.float32))
            means, covars = renderer.pose(*renderer.link_poses(params))
            video = renderer.render_view(means, covars, RenderView(*renderer.camera(means), 0.0))
            latents = prior.encode(video, generator=torch.Generator().manual_seed(config.seed))
            if not draws:
                draws = [(t, torch.randn(latents.shape, generator=gen)) for t in (300, 600)]
            errors = np.zeros((len(draws), len(rivals)))
            for d, (t, noise) in enumerate(draws):
                noisy = prior.add_noise(latents, noise, t)
                for k in range(len(rivals)):
                    v = prior._transformer_call(noisy, prior.contrast_embeds[k:k + 1],
                                                torch.full((1,), t, dtype=torch.long))
                    errors[d, k] = float((latents - prior.x0_from_v(noisy, v.float(), t)).pow(2).mean())
            mean = errors.mean(0)
            expected.append(mean[1] / mean.mean())
    np.testing.assert_allclose(values, expected, rtol=1e-5)
    assert values[0] != values[1]


def test_akd_run_passes_init_and_param_to_the_distill_stage():
    args = build_parser("run").parse_args(["run", "--robot", "quadruped", "--prompt", "a dog pacing forward", "--out",
                                           "x", "--source", "sds", "--init", "standing", "--param", "frames"])
    assert (args.init, args.param) == ("standing", "frames")
    args = build_parser("run").parse_args(["run", "--robot", "quadruped", "--prompt", "p", "--out", "x"])
    assert args.init is None and args.param is None  # the model folder decides


def test_akd_distill_flags_override_the_folder():
    from akd_core.cli.distill import config_overrides

    parser = build_parser("distill")
    args = parser.parse_args(["distill", "--out", "x", "--param", "frames", "--phase-search-refine", "--n-gaussians",
                              "900"])
    overrides = config_overrides(args)
    assert overrides["param"] == "frames" and overrides["phase_search_refine"] == () and overrides["n_gaussians"] == 900
    config, _, _ = distill_settings("cogvideox", SHIPPED, None, None, overrides)
    assert (config.param, config.phase_search_refine, config.n_gaussians) == ("frames", (), 900)
    assert "phase_search_refine" not in config_overrides(parser.parse_args(["distill", "--out", "x"]))
