"""`akd prior data` and `akd prior train --stage vae` at tiny scale: determinism, resume, the saved folder."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from akd_core.errors import ConfigError
from akd_core.prior import train as train_mod
from akd_core.prior.data import GAITS, DataConfig, clip_recipe, make_dataset, prompt_for
from akd_core.prior.train import VAETrainConfig, train, train_vae, whole_clip_batches

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
    assert summary["parameters"] == 681427  # STACK.md's 0.68 M setting
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
    with pytest.raises(ConfigError, match="not built yet"):
        train(out, tmp_path / "t", "transformer", VAETrainConfig())


def test_validation_l1_falls_in_a_short_tiny_run(dataset, tmp_path):
    out, _ = dataset
    # measured: 25 steps 0.136 -> 0.019 (full frames), 0.136 -> 0.048 (16 px crops); 20 steps asserted with margin
    config = VAETrainConfig(steps=20, batch=2, crop=0, lr=3e-3, val_every=20, checkpoint_every=100, **TINY_VAE)
    summary = train_vae(out, tmp_path / "m", config, progress=False)
    assert summary["final_val_l1"] < 0.6 * summary["initial_val_l1"], summary
