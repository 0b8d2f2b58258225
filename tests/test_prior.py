"""Video priors: SDS gradients against hand computations with the real diffusers modules (tiny sizes)."""

from __future__ import annotations

import argparse
import json
import math
import shutil

import numpy as np
import pytest
import torch

from akd_core.cli.prior_options import add_prior_arguments, prior_options_from_args
from akd_core.io.errors import ConfigError, DependencyError
from akd_core.sds.prior import (
    CogVideoXPrior,
    OracleVideoPrior,
    TimestepSchedule,
    classifier_free_guidance,
    fit_frames,
    fit_size,
    guided_prediction,
    make_prior,
    make_prior_from_options,
    make_tiny_prior,
    save_tiny_pretrained,
)
from akd_core.sds.prior.tiny import TINY_SCHEDULER_CONFIG, build_tiny_modules

PROMPT = "a robot dog trotting on grass"



def make_prior_from_args(args, prompt, **kwargs):
    """The prior `akd distill`'s flags ask for, by the CLI's path: flags -> PriorOptions -> prior."""
    return make_prior_from_options(prior_options_from_args(args), prompt, **kwargs)


def _video(seed: int, frames: int = 9, size: tuple[int, int] = (64, 64)) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(frames, 3, *size, generator=gen)


def _rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual - expected).norm() / expected.norm().clamp_min(1e-12))


@pytest.fixture(scope="module")
def tiny() -> CogVideoXPrior:
    return make_tiny_prior(PROMPT, seed=0)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_tiny_pretrained(tmp_path_factory.mktemp("models") / "tiny-cogvideox", seed=3)


def _hand_v(prior: CogVideoXPrior, noisy: torch.Tensor, timestep: int, rotary) -> torch.Tensor:
    """Guided v from two separate transformer calls (no batching) and CFG written out."""
    t = torch.tensor([timestep])
    with torch.no_grad():
        v_cond = prior.transformer(noisy, prior.cond_embeds, t, image_rotary_emb=rotary, return_dict=False)[0]
        v_uncond = prior.transformer(noisy, prior.uncond_embeds, t, image_rotary_emb=rotary, return_dict=False)[0]
    return v_uncond + prior.guidance_scale * (v_cond - v_uncond)


def _pipeline_rotary(prior: CogVideoXPrior, latents: torch.Tensor):
    """RoPE from diffusers' own CogVideoXPipeline method (the reference for ours)."""
    from diffusers import CogVideoXPipeline

    pipe = CogVideoXPipeline(tokenizer=None, text_encoder=None, vae=prior.vae, transformer=prior.transformer,
                             scheduler=None)  # fmt: skip
    if not prior.transformer.config.use_rotary_positional_embeddings:
        return None
    return pipe._prepare_rotary_positional_embeddings(prior.height, prior.width, latents.shape[1], torch.device("cpu"))


# ----------------------------------------------------------------------------- tiny prior, SDS


def test_tiny_sds_step_backpropagates_to_the_input_video(tiny):
    video = _video(0).requires_grad_(True)
    loss, info = tiny.sds_loss(video, step=0, total_steps=100, generator=torch.Generator().manual_seed(1))
    loss.backward()
    assert loss.ndim == 0 and math.isfinite(loss.item())
    assert info["latents"].shape == (1, 3, 4, 8, 8)  # 9 frames -> 3 latent frames, 64 px -> 8
    assert 20 <= info["timestep"] <= 980
    assert torch.isfinite(video.grad).all()
    assert video.grad.abs().sum() > 0
    assert all(p.grad is None for p in tiny.transformer.parameters())  # the model stays frozen


@pytest.mark.parametrize("rotary", [True, False], ids=["rope-5b", "sincos-2b"])
@pytest.mark.parametrize("timestep", [37, 500, 963])
def test_sds_gradient_on_latents_is_z_minus_x0_hat_computed_by_hand(rotary, timestep):
    prior = make_tiny_prior(PROMPT, seed=1, rotary=rotary)
    with torch.no_grad():
        z = prior.encode(_video(2), generator=torch.Generator().manual_seed(0))
    noise = torch.randn(z.shape, generator=torch.Generator().manual_seed(5))
    latents = z.clone().requires_grad_(True)
    loss, info = prior.sds_loss_latents(latents, timestep=timestep, noise=noise)
    loss.backward()

    a = float(prior.alphas_cumprod[timestep])
    noisy = math.sqrt(a) * z + math.sqrt(1 - a) * noise
    v = _hand_v(prior, noisy, timestep, _pipeline_rotary(prior, z))
    x0_hat = math.sqrt(a) * noisy - math.sqrt(1 - a) * v
    expected = z - x0_hat
    assert expected.abs().max() > 1e-3
    assert _rel_err(latents.grad, expected) < 1e-4
    assert _rel_err(info["x0_hat"], x0_hat) < 1e-4
    assert loss.item() == pytest.approx(0.5 * float(expected.pow(2).sum()), rel=1e-4)

    mean_prior = prior.with_options(reduction="mean")
    latents_mean = z.clone().requires_grad_(True)
    mean_prior.sds_loss_latents(latents_mean, timestep=timestep, noise=noise)[0].backward()
    assert _rel_err(latents_mean.grad * z.numel(), expected) < 1e-4


def test_full_sds_gradient_on_video_is_the_encoder_vjp_of_the_latent_gradient(tiny):
    prior = tiny.with_options(sample_posterior=False)  # deterministic encoder, so it can be replayed
    video = _video(3).requires_grad_(True)
    loss, info = prior.sds_loss(video, step=10, total_steps=100, generator=torch.Generator().manual_seed(2))
    loss.backward()
    replay = video.detach().clone().requires_grad_(True)
    (expected,) = torch.autograd.grad(prior.encode(replay), replay, grad_outputs=info["grad"])
    assert expected.abs().sum() > 0
    assert _rel_err(video.grad, expected) < 1e-5


def test_same_generator_seed_gives_the_same_sds_step(tiny):
    video = _video(4)
    runs = [tiny.sds_loss(video, 3, 10, torch.Generator().manual_seed(9)) for _ in range(2)]
    assert runs[0][1]["timestep"] == runs[1][1]["timestep"]
    assert torch.equal(runs[0][1]["grad"], runs[1][1]["grad"])


def test_alphas_cumprod_follow_the_cogvideox_schedule_formula(tiny):
    cfg = TINY_SCHEDULER_CONFIG
    betas = np.linspace(cfg["beta_start"] ** 0.5, cfg["beta_end"] ** 0.5, cfg["num_train_timesteps"]) ** 2
    alphas = np.cumprod(1.0 - betas)
    s = cfg["snr_shift_scale"]
    alphas = alphas / (s + (1 - s) * alphas)  # SNR shift (SD3 style)
    root = np.sqrt(alphas)  # zero terminal SNR rescale (Lin et al. 2023, Alg. 1)
    root = (root - root[-1]) * root[0] / (root[0] - root[-1])
    np.testing.assert_allclose(tiny.alphas_cumprod.numpy(), root**2, rtol=1e-6, atol=1e-9)
    assert tiny.alphas_cumprod[-1] == 0.0


# ----------------------------------------------------------------------------- helpers


def test_cfg_combination_known_numbers():
    v_uncond, v_cond = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 5.0])
    assert torch.equal(classifier_free_guidance(v_uncond, v_cond, 1.0), v_cond)
    assert torch.equal(classifier_free_guidance(v_uncond, v_cond, 0.0), v_uncond)
    assert torch.equal(classifier_free_guidance(v_uncond, v_cond, 100.0), torch.tensor([201.0, 302.0]))


def test_guided_prediction_makes_one_batched_call_uncond_first():
    calls = []

    def model(latents, embeds, timestep):  # v = latents * (embedding mean) + timestep
        calls.append((latents.shape[0], timestep.tolist()))
        return latents * embeds.mean(dim=(1, 2)).view(-1, 1) + timestep.view(-1, 1).float()

    x = torch.tensor([[1.0, 2.0]])
    cond, uncond = torch.full((1, 3, 2), 2.0), torch.full((1, 3, 2), 1.0)
    v = guided_prediction(model, x, torch.tensor([7]), cond, uncond, scale=3.0)
    assert calls == [(2, [7, 7])]
    # v_u = x + 7 = [8, 9], v_c = 2x + 7 = [9, 11] -> v_u + 3 (v_c - v_u) = [11, 15]
    assert torch.equal(v, torch.tensor([[11.0, 15.0]]))


def test_timestep_schedule_anneals_t_end_over_the_first_half():
    sched = TimestepSchedule()
    assert sched.bounds(0, 10_000, 1000) == (20, 980)
    assert sched.bounds(2_500, 10_000, 1000) == (20, 740)
    assert sched.bounds(5_000, 10_000, 1000) == (20, 500)
    assert sched.bounds(10_000, 10_000, 1000) == (20, 500)
    gen = torch.Generator().manual_seed(0)
    draws = [sched.sample(2_500, 10_000, 1000, gen) for _ in range(2000)]
    assert min(draws) >= 20 and max(draws) <= 740
    assert min(draws) < 40 and max(draws) > 720  # covers the whole range
    assert TimestepSchedule(anneal_fraction=0.25).bounds(2_500, 10_000, 1000) == (20, 500)
    with pytest.raises(ConfigError, match="t_start"):
        TimestepSchedule(t_start=0.6, t_end_final=0.5)


# ----------------------------------------------------------------------------- oracle


@pytest.mark.parametrize("timestep", [20, 400, 979])
def test_oracle_sds_gradient_is_z_minus_target_latents_for_any_t(tiny, timestep):
    target = _video(10)
    oracle = OracleVideoPrior.from_prior(tiny, target)
    with torch.no_grad():
        z = oracle.encode(_video(11))
        z_star = oracle.encode(target)
    noise = torch.randn(z.shape, generator=torch.Generator().manual_seed(timestep))
    grad, _ = oracle.sds_grad(z, timestep, noise)
    assert (z - z_star).abs().max() > 0.01
    assert _rel_err(grad, z - z_star) < 1e-4

    same, _ = oracle.sds_grad(z_star, timestep, noise)
    assert same.abs().max() < 1e-4 * z_star.abs().max()


def test_oracle_sds_descent_moves_a_video_towards_the_target():
    target = _video(20, size=(32, 32))
    oracle = make_prior("oracle", PROMPT, target_video=target, seed=0, height=32, width=32)
    assert isinstance(oracle, OracleVideoPrior)
    video = _video(21, size=(32, 32)).requires_grad_(True)
    optim = torch.optim.Adam([video], lr=0.03)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        start = float((oracle.encode(video) - oracle.target_latents).norm())
    for step in range(6):
        optim.zero_grad()
        loss, _ = oracle.sds_loss(video, step, 6, gen)
        loss.backward()
        optim.step()
    with torch.no_grad():
        end = float((oracle.encode(video) - oracle.target_latents).norm())
    assert end < 0.8 * start


# ----------------------------------------------------------------------------- loading from a folder


def test_from_pretrained_loads_a_saved_tiny_folder_like_the_diffusers_pipeline(tiny_folder):
    from diffusers import CogVideoXPipeline

    prior = CogVideoXPrior.from_pretrained(tiny_folder, PROMPT, dtype=torch.float32, device="cpu")
    pipe = CogVideoXPipeline.from_pretrained(tiny_folder, local_files_only=True)
    cond, uncond = pipe.encode_prompt(PROMPT, do_classifier_free_guidance=True, max_sequence_length=16)
    torch.testing.assert_close(prior.cond_embeds, cond)
    torch.testing.assert_close(prior.uncond_embeds, uncond)
    assert not torch.allclose(cond, uncond)
    torch.testing.assert_close(prior.alphas_cumprod, pipe.scheduler.alphas_cumprod.double())
    reference, _, _ = build_tiny_modules(seed=3)
    for (name, loaded), (_, built) in zip(prior.transformer.state_dict().items(), reference.state_dict().items()):
        torch.testing.assert_close(loaded, built, msg=name)
    assert prior.prompt_encoder is None  # T5 freed after encoding
    with pytest.raises(ConfigError, match="keep_prompt_encoder"):
        prior.set_prompt("a cat")

    latents = prior.encode(_video(5), generator=torch.Generator().manual_seed(0))
    ours = prior.rotary_embeddings(*latents.shape[1:2], *latents.shape[3:])
    for a, b in zip(ours, _pipeline_rotary(prior, latents)):
        torch.testing.assert_close(a, b)
    video = _video(6).requires_grad_(True)
    loss, _ = prior.sds_loss(video, generator=torch.Generator().manual_seed(0))
    loss.backward()
    assert torch.isfinite(video.grad).all() and video.grad.abs().sum() > 0


def test_make_prior_cogvideox_uses_the_folder_and_keeps_the_encoder_on_request(tiny_folder):
    prior = make_prior("cogvideox", PROMPT, video_model=tiny_folder, keep_prompt_encoder=True, guidance_scale=7.5)
    assert isinstance(prior, CogVideoXPrior) and prior.guidance_scale == 7.5
    before = prior.cond_embeds.clone()
    prior.set_prompt("a humanoid running")
    assert prior.prompt == "a humanoid running" and not torch.allclose(before, prior.cond_embeds)


def test_negative_prompt_from_the_command_line_is_the_pipelines_negative_embedding(tiny_folder):
    import argparse

    from diffusers import CogVideoXPipeline


    parser = argparse.ArgumentParser()
    add_prior_arguments(parser)
    args = parser.parse_args(["--prior", "cogvideox", "--video-model", str(tiny_folder),
                              "--guidance-scale", "12", "--negative-prompt", "a cat sitting"])  # fmt: skip
    prior = make_prior_from_args(args, PROMPT)
    pipe = CogVideoXPipeline.from_pretrained(tiny_folder, local_files_only=True)
    cond, negative = pipe.encode_prompt(PROMPT, negative_prompt="a cat sitting", do_classifier_free_guidance=True,
                                        max_sequence_length=16)  # fmt: skip
    _, empty = pipe.encode_prompt(PROMPT, do_classifier_free_guidance=True, max_sequence_length=16)
    assert prior.guidance_scale == 12.0
    torch.testing.assert_close(prior.cond_embeds, cond)
    torch.testing.assert_close(prior.uncond_embeds, negative)
    assert not torch.allclose(negative, empty)  # the negative prompt replaced CFG's empty prompt
    plain = make_prior_from_args(parser.parse_args(["--prior", "cogvideox", "--video-model", str(tiny_folder)]), PROMPT)
    torch.testing.assert_close(plain.uncond_embeds, empty)


def test_missing_model_folder_names_the_expected_layout(tmp_path):
    with pytest.raises(DependencyError) as err:
        CogVideoXPrior.from_pretrained(tmp_path / "nope", PROMPT, device="cpu")
    message = str(err.value)
    for entry in ("model_index.json", "transformer/", "vae/", "text_encoder/", "tokenizer", "scheduler/"):
        assert entry in message


def test_incomplete_model_folder_names_the_missing_subfolder(tiny_folder, tmp_path):
    broken = shutil.copytree(tiny_folder, tmp_path / "broken")
    shutil.rmtree(broken / "vae")
    with pytest.raises(DependencyError, match=r"missing vae/config\.json"):
        make_prior("cogvideox", PROMPT, video_model=broken)

    corrupt = shutil.copytree(tiny_folder, tmp_path / "corrupt")
    (corrupt / "vae" / "diffusion_pytorch_model.safetensors").write_bytes(b"not weights")
    with pytest.raises(DependencyError, match="VAE"):
        make_prior("cogvideox", PROMPT, video_model=corrupt)


# ----------------------------------------------------------------------------- fitting renders to the model


def test_fit_frames_resamples_or_pads_to_the_model_count():
    ramp = torch.arange(10.0).view(10, 1, 1, 1).expand(10, 3, 2, 2)
    down = fit_frames(ramp, 9, "resample")
    torch.testing.assert_close(down[:, 0, 0, 0], torch.arange(9.0) * 9.0 / 8.0)
    padded = fit_frames(ramp, 17, "pad")
    torch.testing.assert_close(padded[:10], ramp)
    assert (padded[10:] == 9.0).all()
    up = fit_frames(ramp, 17, "resample")
    torch.testing.assert_close(up[:, 0, 0, 0], torch.linspace(0, 9, 17))


def test_fit_size_stretches_or_letterboxes():
    video = torch.rand(2, 3, 48, 48)
    torch.testing.assert_close(
        fit_size(video, 64, 64, "letterbox"), torch.nn.functional.interpolate(video, (64, 64), mode="bilinear")
    )
    wide = torch.rand(2, 3, 48, 96)
    boxed = fit_size(wide, 64, 64, "letterbox")
    core = torch.nn.functional.interpolate(wide, (32, 64), mode="bilinear", antialias=True)
    torch.testing.assert_close(boxed[..., 16:48, :], core)
    torch.testing.assert_close(boxed[..., :16, :], core[..., :1, :].expand(-1, -1, 16, -1))
    assert fit_size(wide, 64, 64, "stretch").shape == (2, 3, 64, 64)


def test_prior_adapts_frame_count_and_resolution(tiny):
    video = _video(7, frames=10, size=(48, 48)).requires_grad_(True)
    loss, info = tiny.sds_loss(video, generator=torch.Generator().manual_seed(0))
    loss.backward()
    assert info["latents"].shape == (1, 3, 4, 8, 8)
    assert video.grad.shape == video.shape and video.grad.abs().sum() > 0

    longer = tiny.with_options(num_frames=17, frame_fit="pad")
    assert longer.encode(_video(7, frames=10)).shape == (1, 5, 4, 8, 8)
    with pytest.raises(ConfigError, match="8n\\+1"):
        tiny.with_options(num_frames=10)
    with pytest.raises(ConfigError, match="multiples of 16"):
        tiny.with_options(height=50)
    with pytest.raises(ConfigError, match=r"\(F, 3, H, W\)"):
        tiny.encode(torch.rand(3, 64, 64))


def test_decode_returns_a_video_in_unit_range(tiny):
    frames = tiny.decode(tiny.encode(_video(8)).detach())
    assert frames.shape == (9, 3, 64, 64)
    assert frames.min() >= 0.0 and frames.max() <= 1.0


def test_make_prior_rejects_bad_requests():
    with pytest.raises(ConfigError, match="--video-model"):
        make_prior("cogvideox", PROMPT)
    with pytest.raises(ConfigError, match="target"):
        make_prior("oracle", PROMPT)
    with pytest.raises(ConfigError, match="unknown prior"):
        make_prior("sora", PROMPT)
    with pytest.raises(ConfigError, match="frame_fit"):
        make_prior("tiny", PROMPT, frame_fit="stretch")
    with pytest.raises(ConfigError, match="CogVideoXOptions"):
        make_prior("tiny", PROMPT, guidance=3.0)


def test_tiny_prompt_embeddings_are_seeded_per_prompt(tiny):
    again = make_tiny_prior(PROMPT, seed=0)
    torch.testing.assert_close(again.cond_embeds, tiny.cond_embeds)
    other = make_tiny_prior("a hexapod jumping", seed=0)
    assert not torch.allclose(other.cond_embeds, tiny.cond_embeds)
    torch.testing.assert_close(other.uncond_embeds, tiny.uncond_embeds)


# ----------------------------------------------------------------------------- command line


def _parse(argv: list[str], add) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="akd prior")
    add(parser)
    return parser.parse_args(argv)


def test_cli_save_tiny_then_check_reports_the_folder_setup(tmp_path, capsys):
    from akd_core.cli.prior import add_arguments
    from akd_core.cli.prior import run as cli

    folder = tmp_path / "tiny-2b"
    assert cli(_parse(["save-tiny", str(folder), "--seed", "4", "--no-rotary"], add_arguments)) == 0
    assert cli(_parse(["check", str(folder)], add_arguments)) == 0
    report = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert report["rotary"] is False and report["frames"] == 9 and report["height_px"] == 64
    assert report["prediction_type"] == "v_prediction" and report["rescale_betas_zero_snr"] is True
    with pytest.raises(DependencyError, match="does not exist"):
        cli(_parse(["check", str(tmp_path / "none")], add_arguments))


def test_prior_arguments_build_the_requested_prior(tiny_folder):

    argv = ["--prior", "cogvideox", "--video-model", str(tiny_folder), "--guidance-scale", "12"]
    argv += ["--prior-frames", "17", "--prior-height", "32", "--prior-width", "48"]
    args = _parse(argv, add_prior_arguments)
    prior = make_prior_from_args(args, PROMPT)
    assert (prior.num_frames, prior.height, prior.width, prior.guidance_scale) == (17, 32, 48, 12.0)
    assert prior.vae.use_tiling is False
    assert prior.encode(_video(1)).shape == (1, 5, 4, 4, 6)



def test_timestep_options_set_the_sds_schedule(tiny_folder):

    base = ["--prior", "cogvideox", "--video-model", str(tiny_folder)]
    prior = make_prior_from_args(_parse(base + ["--t-min", "0.05", "--t-max", "0.6", "0.2"], add_prior_arguments),
                                 PROMPT)  # fmt: skip
    n = prior.num_train_timesteps
    assert prior.schedule.bounds(0, 100, n) == (int(0.05 * n), int(0.6 * n))
    assert prior.schedule.bounds(50, 100, n) == (int(0.05 * n), int(0.2 * n))  # annealed over the first half
    late = make_prior_from_args(_parse(base + ["--t-anneal", "1.0"], add_prior_arguments), PROMPT).schedule
    assert late.bounds(50, 100, n)[1] == int(0.74 * n)  # 0.98 -> 0.5 over all 100 iterations
    assert make_prior_from_args(_parse(base, add_prior_arguments), PROMPT).schedule == TimestepSchedule()
    with pytest.raises(ConfigError, match="--t-min/--t-max"):
        make_prior_from_args(_parse(base + ["--t-min", "0.3", "--t-max", "0.6", "0.2"], add_prior_arguments), PROMPT)


def test_multi_step_sds_target_is_the_ddim_schedulers_sample(tiny_folder):
    """--sds-denoise-steps K: SDS's target is the sample K deterministic steps of CogVideoX's own DDIM scheduler
    reach from the noised render (set_timesteps(K), trailing spacing); K = 1 is the paper's one-step x0_hat."""
    from diffusers import CogVideoXDDIMScheduler


    args = _parse(["--prior", "cogvideox", "--video-model", str(tiny_folder), "--sds-denoise-steps", "4"],
                  add_prior_arguments)  # fmt: skip
    prior = make_prior_from_args(args, PROMPT)
    assert prior.denoise_steps == 4
    with torch.no_grad():
        z = prior.encode(_video(3))
    noise = torch.randn(z.shape, generator=torch.Generator().manual_seed(4))
    noisy = prior.add_noise(z, noise, 999)
    scheduler = CogVideoXDDIMScheduler.from_pretrained(tiny_folder, subfolder="scheduler")
    scheduler.set_timesteps(4)
    assert [int(t) for t in scheduler.timesteps] == prior.denoise_timesteps(999, 4) == [999, 749, 499, 249]
    x = noisy
    for t in scheduler.timesteps:
        x = scheduler.step(prior.predict_v(x, int(t)), t, x).prev_sample
    torch.testing.assert_close(prior.denoise(noisy, 999, 4), x, rtol=1e-4, atol=1e-4)
    grad, x0_hat = prior.sds_grad(z, 999, noise)
    torch.testing.assert_close(x0_hat, x, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grad, z - x0_hat)
    noisy_600 = prior.add_noise(z, noise, 600)
    one_step = prior.x0_from_v(noisy_600, prior.predict_v(noisy_600, 600), 600)
    torch.testing.assert_close(prior.denoise(noisy_600, 600, 1), one_step)
    assert not torch.allclose(prior.denoise(noisy, 999, 1), x, atol=1e-3)  # the steps matter
    assert prior.denoise_timesteps(5, 10) == [5, 4, 3, 2, 1, 0]  # never below 0, never repeated
    with pytest.raises(ConfigError, match="--sds-denoise-steps"):
        make_prior_from_args(_parse(["--prior", "cogvideox", "--video-model", str(tiny_folder),
                                     "--sds-denoise-steps", "0"], add_prior_arguments), PROMPT)

def test_cogvideox_15_patching_pads_latent_frames_like_the_pipeline():
    prior = make_tiny_prior(PROMPT, seed=2, patch_size_t=2)  # 3 latent frames -> padded to 4 inside
    with torch.no_grad():
        z = prior.encode(_video(9))
    noise = torch.randn(z.shape, generator=torch.Generator().manual_seed(1))
    timestep = 300
    grad, x0_hat = prior.sds_grad(z, timestep, noise)
    assert grad.shape == z.shape == (1, 3, 4, 8, 8)

    a = float(prior.alphas_cumprod[timestep])
    noisy = math.sqrt(a) * z + math.sqrt(1 - a) * noise
    padded = torch.cat([noisy[:, :1], noisy], dim=1)  # the pipeline pads at the front and drops those frames
    v = _hand_v(prior, padded, timestep, _pipeline_rotary(prior, padded))[:, 1:]
    assert _rel_err(x0_hat, math.sqrt(a) * noisy - math.sqrt(1 - a) * v) < 1e-4


def test_denoising_errors_are_the_cfg_halves_and_the_v_mse(tiny):
    """denoising_errors: (unconditional, conditional) x0 errors from one batched call, equal to the guided error at
    guidance 0 and 1 (the base class's way) and to (1 - a_t) x CogVideoXPrior.v_mse of the same embeddings."""
    from akd_core.sds.prior.base import VideoPrior

    gen = torch.Generator().manual_seed(3)
    latents = tiny.encode(torch.rand((tiny.num_frames, 3, tiny.height, tiny.width), generator=gen))
    noise = torch.randn(latents.shape, generator=gen)
    t = 400
    uncond, cond = tiny.denoising_errors(latents, t, noise)
    assert uncond != pytest.approx(cond, rel=1e-6)  # the prompt changes the prediction
    a = float(tiny.alphas_cumprod[t])
    assert cond == pytest.approx((1 - a) * tiny.v_mse(latents, noise, t, tiny.cond_embeds), rel=1e-4)
    assert uncond == pytest.approx((1 - a) * tiny.v_mse(latents, noise, t, tiny.uncond_embeds), rel=1e-4)
    base_parts = VideoPrior.predict_v_parts(tiny, tiny.add_noise(latents, noise, t), t)  # the generic way
    fast_parts = tiny.predict_v_parts(tiny.add_noise(latents, noise, t), t)
    for slow, fast in zip(base_parts, fast_parts):
        torch.testing.assert_close(slow, fast, rtol=1e-4, atol=1e-5)
    scale = tiny.guidance_scale
    tiny.guidance_scale = 1.0
    try:
        assert tiny.denoising_error(latents, t, noise) == pytest.approx(cond, rel=1e-5)
    finally:
        tiny.guidance_scale = scale
