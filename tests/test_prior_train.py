"""`akd prior data` and `akd prior train` (vae, transformer) at tiny scale: determinism, resume, the saved folder."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest
import torch

from akd_core.io.errors import ConfigError
from akd_core.sds.prior import train as train_mod
from akd_core.sds.prior.data import GAITS, DataConfig, clip_recipe, make_dataset, prompt_for
from akd_core.sds.prior.train import VAETrainConfig, train, train_vae
from akd_core.sds.prior.training import whole_clip_batches

# 4 clips of 5 frames at 32x32 (half standing, so that only ~2 gait clips are generated)
DATA = DataConfig(clips=4, seed=1, frames=5, width=32, height=32, n_gaussians=500, standing_fraction=0.5)
TINY_VAE = {"block_out_channels": (8, 8), "latent_channels": 4, "norm_num_groups": 4}


def _arrays(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("prior_data") / "set"
    summary = make_dataset(out, DATA, progress=False)
    return out, summary


def test_data_layout_prompts_and_pose(dataset):
    out, summary = dataset
    assert summary["rendered"] == 4 and summary["skipped"] == 0
    index = json.loads((out / "index.json").read_text())
    assert [e["file"] for e in index["clips"]] == [f"clips/{i:06d}.npz" for i in range(4)]
    gaits = set()
    for i, entry in enumerate(index["clips"]):
        clip = _arrays(out / entry["file"])
        assert clip["frames"].shape == (5, 32, 32, 3) and clip["frames"].dtype == np.uint8
        assert clip["frames"].std() > 5  # robot and checkerboard visible, not a blank frame
        meta = json.loads(str(clip["meta"]))
        assert str(clip["prompt"]) == entry["prompt"] == meta["prompt"] == prompt_for(clip_recipe(DATA, i))
        assert meta["gait"] in GAITS and meta["camera"]["mode"] in ("orbit", "follow")
        word = {"trot": "trot", "pace": "pac", "bound": "bound", "gallop": "gallop", "walk": "walk",
                "standing": "stand"}[meta["gait"]]
        assert word in entry["prompt"] or "strolling" in entry["prompt"]
        assert clip["joint_pos"].shape[0] == 5 and clip["root_quat"].shape == (5, 4)
        gaits.add(meta["gait"])
    assert "standing" in gaits and len(gaits) >= 2


def test_data_is_deterministic_and_resumes(dataset, tmp_path):
    out, _ = dataset
    index = json.loads((out / "index.json").read_text())
    moving = next(i for i, e in enumerate(index["clips"]) if e["gait"] != "standing")
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / "motions")  # the gait clip is generated again from scratch
    (copy / "clips" / f"{moving:06d}.npz").unlink()
    (copy / "index.json").unlink()
    summary = make_dataset(copy, DATA, progress=False)
    assert summary["rendered"] == 1 and summary["skipped"] == 3
    for i in range(4):
        a, b = _arrays(out / "clips" / f"{i:06d}.npz"), _arrays(copy / "clips" / f"{i:06d}.npz")
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"clip {i} {key}")
    assert json.loads((copy / "index.json").read_text()) == index
    # another seed gives other clips; other settings in the same folder are refused
    assert [prompt_for(clip_recipe(DataConfig(clips=4, seed=2), i)) for i in range(4)] != \
        [e["prompt"] for e in index["clips"]]
    with pytest.raises(ConfigError, match="other settings"):
        make_dataset(copy, DataConfig(clips=4, seed=1, frames=9, width=32, height=32), progress=False)


def test_camera_and_blur_fractions_from_the_command_line():
    """`akd prior data --orbit-fraction 0 --blur-fraction 0`: every clip as `akd distill` sees it by default
    (follow camera from azimuth -70, elevation 20, margin 1.4, no blur); the default mixes in orbit views."""
    from akd_core.cli import build_parser

    args = build_parser("prior").parse_args(["prior", "data", "--out", "x", "--orbit-fraction", "0",
                                             "--blur-fraction", "0"])
    assert (args.orbit_fraction, args.blur_fraction) == (0.0, 0.0)
    follow = DataConfig(clips=200, orbit_fraction=0.0, blur_fraction=0.0)
    recipes = [clip_recipe(follow, i) for i in range(200)]
    assert all(r["camera"] == "follow" and (r["azimuth_deg"], r["elevation_deg"], r["margin"]) == (-70.0, 20.0, 1.4)
               and r["blur_px"] == 0.0 for r in recipes)
    mixed = [clip_recipe(DataConfig(clips=200), i) for i in range(200)]
    assert 0.6 < np.mean([r["camera"] == "orbit" for r in mixed]) < 0.8
    assert [r["gait"] for r in recipes] == [r["gait"] for r in mixed]  # the motions do not depend on the camera
    with pytest.raises(ConfigError, match="--orbit-fraction must be in"):
        DataConfig(orbit_fraction=1.5)


def test_heading_spread_keeps_the_body_near_distills_start_heading():
    """`--heading-spread 15`: every clip starts within 15 deg of +x (distill's heading), so the follow camera sees
    the legs from distill's side; the default (180) draws any direction, exactly as sets made before the option."""
    from akd_core.cli import build_parser

    args = build_parser("prior").parse_args(["prior", "data", "--out", "x", "--heading-spread", "15"])
    assert args.heading_spread == 15.0
    side = [clip_recipe(DataConfig(clips=300, heading_spread_deg=15.0), i) for i in range(300)]
    anyway = [clip_recipe(DataConfig(clips=300), i) for i in range(300)]
    assert max(abs(r["heading"]) for r in side) <= np.radians(15.0)
    assert max(abs(r["heading"]) for r in anyway) > np.radians(170.0)
    # the same stream value scaled: the motions and all other choices are unchanged
    assert all(abs(a["heading"] * 12.0 - b["heading"]) < 1e-12 for a, b in zip(side, anyway))
    assert [{**a, "heading": 0} for a in side] == [{**b, "heading": 0} for b in anyway]
    with pytest.raises(ConfigError, match="--heading-spread must be in"):
        DataConfig(heading_spread_deg=200.0)


def _params(folder) -> dict[str, torch.Tensor]:
    return torch.load(folder / "checkpoints" / "vae.pt", map_location="cpu", weights_only=False)["model"]


def test_vae_resume_is_bit_identical_after_max_steps_and_ctrl_c(dataset, tmp_path, monkeypatch):
    out, _ = dataset
    config = VAETrainConfig(steps=3, batch=2, crop=16, val_every=100, **TINY_VAE)
    straight = train_vae(out, tmp_path / "straight", config, progress=False)
    assert straight["steps_done"] == 3

    parts = tmp_path / "parts"
    first = train_vae(out, parts, config, progress=False, max_steps=1)
    assert first["steps_done"] == 1
    calls = {"n": 0}
    real_losses = train_mod.vae_losses

    def interrupted(*args, **kwargs):  # Ctrl-C inside the 2nd step's forward pass
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt
        return real_losses(*args, **kwargs)

    monkeypatch.setattr(train_mod, "vae_losses", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_vae(out, parts, config, resume=True, progress=False)
    assert torch.load(parts / "checkpoints" / "vae.pt", weights_only=False)["step"] == 1
    resumed = train_vae(out, parts, config, resume=True, progress=False)
    assert resumed["steps_done"] == 3
    a, b = _params(tmp_path / "straight"), _params(parts)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    rows = (parts / "vae_losses.csv").read_text().splitlines()
    assert len(rows) == 4 and rows[0].startswith("step,loss,l1,edge,kl")
    with pytest.raises(ConfigError, match="another shape"):
        train_vae(out, parts, VAETrainConfig(steps=4, block_out_channels=(8, 8, 8), latent_channels=4,
                                             norm_num_groups=4), resume=True, progress=False)


def test_cli_trains_the_default_vae_and_the_folder_loads(dataset, tmp_path):
    from diffusers import AutoencoderKLCogVideoX

    from akd_core.cli import main

    out, _ = dataset
    model = tmp_path / "model"
    assert main(["prior", "train", "--data", str(out), "--out", str(model), "--steps", "1", "--batch", "1",
                 "--crop", "0"]) == 0
    summary = json.loads((model / "train_vae.json").read_text())
    assert summary["parameters"] == 681427  # docs/prior_training.md's 0.68 M setting
    assert (model / "samples" / "vae_000001.mp4").stat().st_size > 0
    vae = whole_clip_batches(AutoencoderKLCogVideoX.from_pretrained(model / "vae", local_files_only=True), 5)
    assert tuple(vae.config.block_out_channels) == (16, 32, 32) and vae.config.latent_channels == 16
    clip = torch.from_numpy(np.load(out / "clips" / "000000.npz")["frames"])
    x = clip.permute(3, 0, 1, 2)[None].float() / 127.5 - 1.0  # (1, 3, F, H, W)
    with torch.no_grad():
        z = vae.encode(x).latent_dist.mode()
        rec = vae.decode(z).sample
    assert z.shape == (1, 16, 5, 8, 8)  # 4x spatial, no temporal compression
    assert rec.shape == x.shape
    with pytest.raises(ConfigError, match="needs a TransformerTrainConfig"):
        train(out, tmp_path / "t", "transformer", VAETrainConfig())


def test_validation_l1_falls_in_a_short_tiny_run(dataset, tmp_path):
    out, _ = dataset
    # measured: 25 steps 0.136 -> 0.019 (full frames), 0.136 -> 0.048 (16 px crops); 20 steps asserted with margin
    config = VAETrainConfig(steps=20, batch=2, crop=0, lr=3e-3, val_every=20, checkpoint_every=100, **TINY_VAE)
    summary = train_vae(out, tmp_path / "m", config, progress=False)
    assert summary["final_val_l1"] < 0.6 * summary["initial_val_l1"], summary


# ----------------------------------------------------------------------------- the transformer stage
# 9 frames (8n+1, as CogVideoXPrior feeds the VAE) at 32x32; the same recipes as DATA (a gallop, two standing),
# so its motion bank is reused
DATA9 = DataConfig(clips=3, seed=1, frames=9, width=32, height=32, n_gaussians=500, standing_fraction=0.5)
TINY_VAE4 = {"block_out_channels": (8, 8, 8), "latent_channels": 4, "norm_num_groups": 4}  # 4x spatial: 8x8 latents
TINY_TF = {"layers": 1, "heads": 2, "head_dim": 16, "time_embed_dim": 16, "text_dim": 16, "text_heads": 2}


@pytest.fixture(scope="module")
def vae_model(dataset, tmp_path_factory):
    """(9-frame data folder, a model folder holding a tiny VAE trained 2 steps by `--stage vae`)."""
    out5, _ = dataset
    root = tmp_path_factory.mktemp("prior_tf")
    data9 = root / "set9"
    data9.mkdir()
    shutil.copytree(out5 / "motions", data9 / "motions")  # the gait clips do not depend on the frame count
    make_dataset(data9, DATA9, progress=False)
    model = root / "model"
    train_vae(data9, model, VAETrainConfig(steps=2, batch=2, crop=0, lr=3e-3, **TINY_VAE4), progress=False)
    return data9, model


def _with_vae(vae_model, folder):
    shutil.copytree(vae_model[1] / "vae", folder / "vae")
    return folder


def test_transformer_v_loss_falls_on_a_fixed_batch(vae_model):
    """The v-prediction loss of the stage's own parts (VAE latents, prompt table, RoPE, scheduler) is learnable."""
    from diffusers import CogVideoXDDIMScheduler

    from akd_core.sds.prior import train_transformer as tt
    from akd_core.sds.prior.cogvideox import rotary_embeddings
    from akd_core.sds.prior.data import caption_words
    from akd_core.sds.prior.tiny import TINY_SCHEDULER_CONFIG
    from akd_core.sds.prior.training import load_clips

    data9, model = vae_model
    config = tt.TransformerTrainConfig(**{**TINY_TF, "layers": 2, "head_dim": 32})  # 133 k parameters
    frames, prompts, _ = load_clips(data9)
    vae = tt.load_frozen_vae(model, 9)
    mean, std = tt.encode_clips(vae, frames, 4, torch.device("cpu"))
    scale = tt.latent_scaling_factor(mean, std, True)
    gen = torch.Generator().manual_seed(0)
    z = ((mean + std * torch.randn(mean.shape, generator=gen)) * scale).permute(0, 2, 1, 3, 4)  # samples
    assert z.shape == (3, 9, 4, 8, 8) and abs(float(z.std()) - 1.0) < 0.05  # the scaling factor gives unit std
    tokenizer, encoder = tt.build_text_encoder(config, caption_words())
    table = tt.PromptTable(tokenizer, encoder, config.text_len, prompts)
    kwargs = config.transformer_kwargs(vae.config, 9, 32, 32)
    transformer = tt.build_transformer(kwargs, seed=0)
    rotary = rotary_embeddings(transformer.config, 9, 8, 8, torch.device("cpu"))
    scheduler = CogVideoXDDIMScheduler(**TINY_SCHEDULER_CONFIG)
    t = torch.tensor([150, 550, 900])
    noise = torch.randn(z.shape, generator=gen)
    embeds = table.embeds[table.rows(prompts)]
    zero_prediction = float(scheduler.get_velocity(z, noise, t).square().mean())  # the loss of predicting v = 0
    optimizer = torch.optim.AdamW(transformer.parameters(), lr=5e-3)
    losses = []
    for _ in range(40):
        loss = tt.transformer_loss(transformer, scheduler, z, embeds, t, noise, rotary)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    # measured: 1.37 -> 0.24 in 40 steps against 1.01 for v = 0: the model fits the batch, not only its mean
    assert losses[0] > 0.9 * zero_prediction, (losses[0], zero_prediction)
    assert losses[-1] < 0.4 * zero_prediction, (losses, zero_prediction)


def _tf_params(folder) -> dict[str, torch.Tensor]:
    return torch.load(folder / "checkpoints" / "transformer.pt", map_location="cpu", weights_only=False)["model"]


def test_transformer_resume_is_bit_identical_after_max_steps_and_ctrl_c(vae_model, tmp_path, monkeypatch):
    from akd_core.sds.prior import train_transformer as tt

    data9, _ = vae_model
    config = tt.TransformerTrainConfig(steps=3, batch=2, sample_steps=0, val_every=2, val_timesteps=2, **TINY_TF)
    straight = tt.train_transformer(data9, _with_vae(vae_model, tmp_path / "straight"), config, progress=False)
    assert straight["steps_done"] == 3

    parts = _with_vae(vae_model, tmp_path / "parts")
    assert tt.train_transformer(data9, parts, config, progress=False, max_steps=1)["steps_done"] == 1
    calls = {"n": 0}
    real_loss = tt.transformer_loss

    def interrupted(*args, **kwargs):  # Ctrl-C inside the 2nd step's forward pass
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt
        return real_loss(*args, **kwargs)

    monkeypatch.setattr(tt, "transformer_loss", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tt.train_transformer(data9, parts, config, resume=True, progress=False)
    assert torch.load(parts / "checkpoints" / "transformer.pt", weights_only=False)["step"] == 1
    monkeypatch.setattr(tt, "transformer_loss", real_loss)
    resumed = tt.train_transformer(data9, parts, config, resume=True, progress=False)
    assert resumed["steps_done"] == 3 and resumed["scaling_factor"] == straight["scaling_factor"]
    a, b = _tf_params(tmp_path / "straight"), _tf_params(parts)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    rows = (parts / "transformer_losses.csv").read_text().splitlines()
    assert len(rows) == 4 and rows[0].startswith("step,loss,grad_norm,lr,seconds")
    assert (parts / "transformer_val.csv").read_text().splitlines()[0] == "step,val_mse,val_mse_uncond"
    with pytest.raises(ConfigError, match="another shape"):
        tt.train_transformer(data9, parts, tt.TransformerTrainConfig(steps=4, **{**TINY_TF, "layers": 2}),
                             resume=True, progress=False)


def test_cli_transformer_stage_writes_a_folder_the_prior_loads(vae_model, tmp_path, capsys):
    from akd_core.cli import main
    from akd_core.sds.prior import CogVideoXPrior, check_model_folder, describe_model_folder

    data9, _ = vae_model
    model = _with_vae(vae_model, tmp_path / "model")
    assert main(["prior", "train", "--data", str(data9), "--out", str(model), "--stage", "transformer",
                 "--steps", "4", "--batch", "2", "--layers", "1", "--heads", "2", "--head-dim", "16",
                 "--sample-steps", "2"]) == 0
    assert "akd prior check" in capsys.readouterr().out
    summary = json.loads((model / "train_transformer.json").read_text())
    assert summary["steps_done"] == 4 and np.isfinite(summary["final_val_mse"])
    assert (model / "samples" / "transformer_000004.mp4").stat().st_size > 0
    check_model_folder(model)
    report = describe_model_folder(model)
    assert (report["frames"], report["height_px"], report["width_px"]) == (9, 32, 32)
    assert report["vae_scaling_factor"] == pytest.approx(summary["scaling_factor"])
    assert report["prediction_type"] == "v_prediction"

    prior = CogVideoXPrior.from_pretrained(model, "a dog trotting forward", dtype=torch.float32, device="cpu",
                                           keep_prompt_encoder=True)
    assert (prior.num_frames, prior.height, prior.width) == (9, 32, 32)
    clip = torch.from_numpy(np.load(data9 / "clips" / "000000.npz")["frames"]).permute(0, 3, 1, 2).float() / 255
    video = clip.clone().requires_grad_(True)
    assert torch.equal(prior.fit_video(video), video)  # 9 frames at 32x32 go in unchanged
    loss, info = prior.sds_loss(video, 0, 10, torch.Generator().manual_seed(0))
    loss.backward()
    assert info["latents"].shape == (1, 9, 4, 8, 8)
    assert torch.isfinite(video.grad).all() and float(video.grad.abs().sum()) > 0

    # the text path: every caption word is one token, and prompts give different conditioning
    index = json.loads((data9 / "index.json").read_text())
    tokenizer = prior.prompt_encoder.tokenizer
    for entry in index["clips"]:
        assert len(tokenizer.tokenize(entry["prompt"])) == len(entry["prompt"].split()), entry["prompt"]
    embeds = prior.prompt_encoder(["a dog trotting forward", "a dog pacing forward", "a dog bounding forward", ""])
    assert embeds.shape == (4, 16, 32)
    for i in range(4):
        for j in range(i + 1, 4):
            assert float((embeds[i] - embeds[j]).abs().max()) > 0.1, (i, j)
    uncond = prior.cond_embeds.clone()
    prior.set_prompt("a dog pacing forward")
    assert not torch.equal(uncond, prior.cond_embeds)


def test_transformer_stage_needs_the_vae_and_8n_plus_1_frames(dataset, vae_model, tmp_path, capsys):
    from akd_core.cli import main
    from akd_core.sds.prior.train_transformer import TransformerTrainConfig, train_transformer

    data9, _ = vae_model
    with pytest.raises(ConfigError, match=r"vae not found.*--stage vae"):
        train_transformer(data9, tmp_path / "empty", TransformerTrainConfig(**TINY_TF), progress=False)
    with pytest.raises(ConfigError, match="8n\\+1"):
        train_transformer(dataset[0], tmp_path / "five", TransformerTrainConfig(**TINY_TF), progress=False)
    with pytest.raises(ConfigError, match="multiple of 16"):
        TransformerTrainConfig(head_dim=24)
    assert main(["prior", "train", "--data", str(data9), "--out", str(tmp_path / "m"), "--stage", "transformer",
                 "--crop", "16"]) != 0
    assert "--crop do not apply to --stage transformer" in capsys.readouterr().err


def test_rival_prompt_names_another_gait_and_keeps_every_other_word():
    from akd_core.sds.prior.data import NOUNS, rival_prompt

    many = DataConfig(clips=400, seed=3)
    for i in range(many.clips):
        recipe = clip_recipe(many, i)
        caption = prompt_for(recipe)
        for other in GAITS:
            if other == recipe["gait"]:
                continue
            rival = prompt_for({**recipe, "gait": other, "speed_level": recipe["speed_level"],
                                "turn_rate": recipe["turn_rate"]}) if recipe["gait"] != "standing" else None
            got = rival_prompt(caption, recipe["gait"], other)
            assert got != caption and recipe["noun"] in got
            if rival is not None and recipe["template"] < 3:  # same template number, noun and speed words
                assert got == rival, (caption, other, got, rival)
            if recipe["gait"] != "standing" and other != "standing":
                assert rival_prompt(got, other, recipe["gait"]) == caption  # and back
    assert rival_prompt("a dog standing still", "standing", "trot") == "a dog trotting forward"
    assert NOUNS[0] == "dog"
    with pytest.raises(ConfigError, match="not one of the trot templates"):
        rival_prompt("a cat trotting", "trot", "pace")


def test_contrastive_term_makes_the_caption_fit_its_clip_better_than_a_rival_gait(vae_model):
    """On a fixed batch, the hinge (own caption's v-MSE x 1.1 vs a caption naming another gait) is learnable:
    after training with it the rival captions explain the clips clearly worse; plain v-MSE training alone does
    not separate them as much."""
    from diffusers import CogVideoXDDIMScheduler

    from akd_core.sds.prior import train_transformer as tt
    from akd_core.sds.prior.cogvideox import rotary_embeddings
    from akd_core.sds.prior.data import caption_words
    from akd_core.sds.prior.tiny import TINY_SCHEDULER_CONFIG
    from akd_core.sds.prior.training import load_clips

    data9, model = vae_model
    config = tt.TransformerTrainConfig(**{**TINY_TF, "layers": 2, "head_dim": 32})
    frames, prompts, index = load_clips(data9)
    rivals = tt.rival_prompts(prompts, index, data9)
    assert len(rivals) == 3 and all(len(r) == len(GAITS) - 1 for r in rivals)
    vae = tt.load_frozen_vae(model, 9)
    mean, std = tt.encode_clips(vae, frames, 4, torch.device("cpu"))
    z = (mean * tt.latent_scaling_factor(mean, std, True)).permute(0, 2, 1, 3, 4)
    tokenizer, encoder = tt.build_text_encoder(config, caption_words())
    table = tt.PromptTable(tokenizer, encoder, config.text_len, [*prompts, *sum(rivals, [])])
    rotary = rotary_embeddings(tt.build_transformer(config.transformer_kwargs(vae.config, 9, 32, 32), 0).config,
                                9, 8, 8, torch.device("cpu"))
    scheduler = CogVideoXDDIMScheduler(**TINY_SCHEDULER_CONFIG)
    gen = torch.Generator().manual_seed(0)
    t = torch.tensor([300, 600, 900])
    noise = torch.randn(z.shape, generator=gen)
    own = table.embeds[table.rows(prompts)]
    rival = table.embeds[table.rows([r[0] for r in rivals])]
    active = torch.ones(3, dtype=torch.bool)
    ratio = {}
    for weight in (0.0, 5.0):
        transformer = tt.build_transformer(config.transformer_kwargs(vae.config, 9, 32, 32), seed=0)
        optimizer = torch.optim.AdamW(transformer.parameters(), lr=5e-3)
        for _ in range(60):
            mse, hinge = tt.contrastive_loss(transformer, scheduler, z, own, rival, t, noise, rotary, 0.1, active)
            optimizer.zero_grad()
            (mse + weight * hinge).backward()
            optimizer.step()
        with torch.no_grad():
            e_own = tt.transformer_loss(transformer, scheduler, z, own, t, noise, rotary)
            e_rival = tt.transformer_loss(transformer, scheduler, z, rival, t, noise, rotary)
        ratio[weight] = float(e_rival / e_own)
    print("rival / own v-MSE after 60 steps (contrast weight 0, 5):", ratio)
    assert ratio[5.0] > 1.1 and ratio[5.0] > ratio[0.0] + 0.05
    # a masked (empty-prompt) sample adds nothing
    _, hinge = tt.contrastive_loss(transformer, scheduler, z, own, rival, t, noise, rotary, 0.1,
                                   torch.zeros(3, dtype=torch.bool))
    assert float(hinge.detach()) == 0.0


def test_min_stride_frames_slows_gaits_the_video_cannot_resolve(tmp_path):
    """`--min-stride-frames 4` (the default): at 8 fps no stride is shorter than 4 frames (2 Hz); a faster gait is
    slowed as a whole (speed, turn rate and cadence by one factor, same step length), so the clip is still the
    pattern it was and the classifier finds it at the capped cadence. 0 keeps the gait library's cadence; a
    folder written before the option (no key in config.json) counts as 0, so resuming it with the default is
    refused instead of mixing the two kinds of clip."""
    from akd_core.cli import build_parser
    from akd_core.model.load import load_robot
    from akd_core.motion.classify import classify_gait
    from akd_core.sds.prior.data import DataRenderer

    assert build_parser("prior").parse_args(["prior", "data", "--out", "x"]).min_stride_frames == 4.0
    capped, free = DataConfig(clips=40, seed=3), DataConfig(clips=40, seed=3, min_stride_frames=0.0)
    trot = next(clip_recipe(capped, i) for i in range(40) if clip_recipe(capped, i)["gait"] == "trot")
    trot = {**trot, "speed_level": 0.6, "turn_rate": 0.4}
    slow_motion, slow = DataRenderer(capped).gait_motion(trot)
    _, fast = DataRenderer(free).gait_motion(trot)
    assert fast["frequency"] > 3.0 and slow["frequency"] == pytest.approx(2.0)  # 8 fps / 4 frames
    assert slow["speed"] / fast["speed"] == pytest.approx(slow["frequency"] / fast["frequency"])
    assert slow["turn_rate"] / fast["turn_rate"] == pytest.approx(slow["frequency"] / fast["frequency"])
    assert slow["step_length"] == pytest.approx(fast["step_length"])
    got = classify_gait(load_robot("quadruped"), slow_motion)
    assert got.gait == "trot" and got.frequency_hz == pytest.approx(2.0, abs=0.1)
    with pytest.raises(ConfigError, match="--min-stride-frames"):
        DataConfig(min_stride_frames=1.5)
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    cfg = {k: v for k, v in json.loads(json.dumps(dataclasses.asdict(DataConfig(clips=1)))).items()
           if k != "min_stride_frames"}
    (legacy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="min_stride_frames"):
        make_dataset(legacy, DataConfig(clips=1), progress=False)


def test_init_from_fine_tunes_a_trained_folder(vae_model, tmp_path):
    """--init-from FOLDER: the transformer and text encoder start from the folder's weights (the first validation
    equals the folder's last) at its latent scale; another shape or another VAE is a ConfigError naming the fix."""
    from akd_core.sds.prior import train_transformer as tt

    data9, _ = vae_model
    config = tt.TransformerTrainConfig(steps=3, batch=2, sample_steps=0, val_every=3, val_timesteps=2, **TINY_TF)
    first = _with_vae(vae_model, tmp_path / "first")
    done = tt.train_transformer(data9, first, config, progress=False)
    tuned = _with_vae(vae_model, tmp_path / "tuned")
    fine = tt.train_transformer(data9, tuned, tt.TransformerTrainConfig(**{**config.__dict__, "steps": 2,
                                                                           "init_from": str(first)}),
                                progress=False)
    assert fine["initial_val_mse"] == pytest.approx(done["final_val_mse"], rel=1e-6)
    assert fine["scaling_factor"] == pytest.approx(done["scaling_factor"])
    assert fine["initial_val_mse"] < done["initial_val_mse"]  # not a fresh start
    assert fine["steps_done"] == 2 and not torch.equal(_tf_params(first)["proj_out.weight"],
                                                         _tf_params(tuned)["proj_out.weight"])
    with pytest.raises(ConfigError, match="another shape"):
        tt.train_transformer(data9, _with_vae(vae_model, tmp_path / "shape"),
                             tt.TransformerTrainConfig(steps=1, init_from=str(first), **{**TINY_TF, "layers": 2}),
                             progress=False)
    other = _with_vae(vae_model, tmp_path / "other_vae")
    from diffusers import AutoencoderKLCogVideoX

    vae = AutoencoderKLCogVideoX.from_pretrained(other / "vae")
    with torch.no_grad():
        next(vae.parameters()).add_(0.01)
    vae.save_pretrained(other / "vae")
    with pytest.raises(ConfigError, match="copy .* into MODEL_DIR"):
        tt.train_transformer(data9, other, tt.TransformerTrainConfig(steps=1, init_from=str(first), **TINY_TF),
                             progress=False)


def test_snapshot_writes_the_checkpoints_folder(vae_model, tmp_path, capsys):
    """`akd prior snapshot MODEL_DIR --out DIR`: the latest checkpoint as a complete folder, the same weights
    the training's own folder holds at that step; a MODEL_DIR without a checkpoint is a clear error."""
    from akd_core.cli import main
    from akd_core.sds.prior import check_model_folder
    from akd_core.sds.prior import train_transformer as tt

    data9, _ = vae_model
    model = _with_vae(vae_model, tmp_path / "model")
    tt.train_transformer(data9, model, tt.TransformerTrainConfig(steps=2, batch=2, sample_steps=0, val_every=2,
                                                                 val_timesteps=1, **TINY_TF), progress=False)
    assert main(["prior", "snapshot", str(model), "--out", str(tmp_path / "snap")]) == 0
    assert "transformer step 2" in capsys.readouterr().out
    check_model_folder(tmp_path / "snap")
    from diffusers import CogVideoXTransformer3DModel

    a = CogVideoXTransformer3DModel.from_pretrained(model / "transformer").state_dict()
    b = CogVideoXTransformer3DModel.from_pretrained(tmp_path / "snap" / "transformer").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    vae_a = json.loads((model / "vae" / "config.json").read_text())["scaling_factor"]
    assert json.loads((tmp_path / "snap" / "vae" / "config.json").read_text())["scaling_factor"] == vae_a
    assert main(["prior", "snapshot", str(tmp_path / "snap"), "--out", str(tmp_path / "x")]) != 0
    assert "checkpoints" in capsys.readouterr().err
