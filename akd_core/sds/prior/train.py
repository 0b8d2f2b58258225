"""`akd prior train`: train a CogVideoX-architecture video prior from scratch on `akd prior data` clips.

Stage ``vae`` (built): ``AutoencoderKLCogVideoX`` from its constructor, by default the setting measured in
docs/prior_training.md: block_out_channels (16, 32, 32) -> 4x spatial compression, NO temporal
compression, 16 latent channels, layers_per_block 1 (0.68 M parameters). The VAE decodes all latent frames in one
pass (``num_latent_frames_batch_size`` / ``num_sample_frames_batch_size`` set to cover the clip): diffusers'
default of 2 latent frames per chunk with a cache between chunks made a CPU training step ~10x slower.

Loss per step on a batch of random clips (optionally random square crops), pixels in [0, 1]:

    L = |x_hat - x|_1 + 0.5 (|dx x_hat - dx x|_1 + |dy x_hat - dy x|_1) + 1e-6 KL(q(z|x) || N(0, I))

with x_hat decoded from a posterior sample; AdamW lr 1e-3. Validation: L1 of the posterior-mean reconstruction
of held-out clips (the last ~10 % of the index), full frames.

MODEL_DIR layout::

    MODEL_DIR/vae/                 save_pretrained at the end of every run (AutoencoderKLCogVideoX.from_pretrained)
    MODEL_DIR/checkpoints/vae.pt   model + optimiser + step + random state + history (every K steps, on Ctrl-C)
    MODEL_DIR/vae_losses.csv       step, loss, l1, edge, kl, seconds
    MODEL_DIR/vae_val.csv          step, val_l1
    MODEL_DIR/samples/vae_<step>.mp4   held-out clip (top) and its reconstruction (bottom); step zero-padded to 6
    MODEL_DIR/train_vae.json       config and final figures

Stage ``transformer`` (CogVideoXTransformer3DModel, v-prediction, text conditioning through a T5 tokenizer and
encoder, the complete diffusers folder): :mod:`akd_core.sds.prior.train_transformer`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from akd_core.io.errors import ConfigError, RunDirError
from akd_core.io.fileio import atomic_path, write_json_atomic
from akd_core.render import write_mp4
from akd_core.sds.prior.train_transformer import TransformerTrainConfig, train_transformer
from akd_core.sds.prior.training import (
    jsonable,
    load_clips,
    restore_training_state,
    split_clips,
    to_model_input,
    whole_clip_batches,
    write_csv,
)

log = logging.getLogger(__name__)

STAGES = ("vae", "transformer")
VAE_CHECKPOINT = "checkpoints/vae.pt"


@dataclass
class VAETrainConfig:
    """`akd prior train --stage vae` settings (defaults: docs/prior_training.md's measured setting)."""

    steps: int = 2000
    batch: int = 4
    lr: float = 1e-3
    weight_decay: float = 1e-2  # AdamW's default
    crop: int = 32  # random square crops of this many pixels (0: full frames)
    edge_weight: float = 0.5
    kl_weight: float = 1e-6
    checkpoint_every: int = 50
    val_every: int = 100
    val_fraction: float = 0.1
    seed: int = 0
    block_out_channels: tuple[int, ...] = (16, 32, 32)
    latent_channels: int = 16
    layers_per_block: int = 1
    norm_num_groups: int = 8
    temporal_compression_ratio: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.block_out_channels = tuple(int(c) for c in self.block_out_channels)
        if self.steps < 1 or self.batch < 1:
            raise ConfigError(f"--steps and --batch must be >= 1, got {self.steps}, {self.batch}")
        if self.lr <= 0:
            raise ConfigError(f"--lr must be > 0, got {self.lr}")
        if self.crop < 0:
            raise ConfigError(f"--crop must be >= 0 (0: full frames), got {self.crop}")
        if any(c % self.norm_num_groups for c in (*self.block_out_channels, self.latent_channels)):
            raise ConfigError(f"norm_num_groups {self.norm_num_groups} must divide every channel count "
                              f"{self.block_out_channels} and latent_channels {self.latent_channels}")

    @property
    def spatial_factor(self) -> int:
        return 2 ** (len(self.block_out_channels) - 1)

    def vae_kwargs(self, height: int, width: int) -> dict[str, Any]:
        n = len(self.block_out_channels)
        return {
            "down_block_types": ("CogVideoXDownBlock3D",) * n,
            "up_block_types": ("CogVideoXUpBlock3D",) * n,
            "block_out_channels": self.block_out_channels,
            "latent_channels": self.latent_channels,
            "layers_per_block": self.layers_per_block,
            "norm_num_groups": self.norm_num_groups,
            "temporal_compression_ratio": self.temporal_compression_ratio,
            "sample_height": height,
            "sample_width": width,
        }


def build_vae(config: VAETrainConfig, height: int, width: int, frames: int) -> torch.nn.Module:
    """A fresh VAE, initialised from config.seed (the global random state is left alone)."""
    from diffusers import AutoencoderKLCogVideoX

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        vae = AutoencoderKLCogVideoX(**config.vae_kwargs(height, width))
    return whole_clip_batches(vae, frames)


def random_crops(x: Tensor, crop: int, generator: torch.Generator) -> Tensor:
    """One random square crop per clip of (B, C, F, H, W); unchanged when crop is 0 or not smaller."""
    height, width = x.shape[-2:]
    if crop <= 0 or (crop >= height and crop >= width):
        return x
    ch, cw = min(crop, height), min(crop, width)
    tops = torch.randint(0, height - ch + 1, (x.shape[0],), generator=generator).tolist()
    lefts = torch.randint(0, width - cw + 1, (x.shape[0],), generator=generator).tolist()
    return torch.stack([x[b, ..., t:t + ch, s:s + cw] for b, (t, s) in enumerate(zip(tops, lefts))])


def vae_losses(vae: torch.nn.Module, x: Tensor, config: VAETrainConfig,
               generator: torch.Generator | None) -> dict[str, Tensor]:
    """The training loss of one batch x (B, 3, F, H, W) in [-1, 1]; the terms in [0, 1] pixel units."""
    posterior = vae.encode(x).latent_dist
    z = posterior.sample(generator=generator) if generator is not None else posterior.mode()
    rec = vae.decode(z).sample
    diff = (rec - x) * 0.5  # [0, 1] pixel units
    l1 = diff.abs().mean()
    edge = (diff[..., :, 1:] - diff[..., :, :-1]).abs().mean() + (diff[..., 1:, :] - diff[..., :-1, :]).abs().mean()
    kl = posterior.kl().mean()
    loss = l1 + config.edge_weight * edge + config.kl_weight * kl
    return {"loss": loss, "l1": l1, "edge": edge, "kl": kl, "rec": rec}


@torch.no_grad()
def validation_l1(vae: torch.nn.Module, frames: Tensor, indices: list[int], batch: int, device: torch.device) -> float:
    """Mean L1 ([0, 1] pixels) of the posterior-mean reconstructions of clips ``indices``, full frames."""
    if not indices:
        return float("nan")
    total, count = 0.0, 0
    was_training = vae.training
    vae.eval()
    for start in range(0, len(indices), batch):
        x = to_model_input(frames[indices[start:start + batch]]).to(device)
        rec = vae.decode(vae.encode(x).latent_dist.mode()).sample
        total += float(((rec - x) * 0.5).abs().mean()) * x.shape[0]
        count += x.shape[0]
    vae.train(was_training)
    return total / count


# ----------------------------------------------------------------------------- the run
def train_vae(data: str | Path, out: str | Path, config: VAETrainConfig, resume: bool = False,
              progress: bool = True, max_steps: int | None = None, device: str | None = None) -> dict[str, Any]:
    """Train (or, with ``resume``, continue) the VAE; writes MODEL_DIR/vae and the files in the module docstring.

    ``max_steps`` stops after that many steps of this call (a checkpoint is written there; --resume continues).
    """
    out = Path(out)
    ckpt_path = out / VAE_CHECKPOINT
    if resume and not ckpt_path.exists():
        raise RunDirError(f"--resume: no checkpoint {ckpt_path}; start without --resume")
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    frames, _prompts, _index = load_clips(data)
    num_clips, num_frames, height, width, _ = frames.shape
    factor = config.spatial_factor
    crop = config.crop if 0 < config.crop < min(height, width) else 0
    for size in (height, width, crop):
        if size % factor:
            raise ConfigError(f"frame size {height}x{width} (crop {crop}) must be a multiple of the VAE's spatial "
                              f"factor {factor}; render with `--size` multiples of {factor} or change --crop")
    train_idx, val_idx = split_clips(num_clips, config.val_fraction)
    vae = build_vae(config, height, width, num_frames).to(dev).train()
    optimizer = torch.optim.AdamW(vae.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(config.seed)
    start, history, val_history = 0, [], []
    if resume:
        state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        if state["vae_config"] != jsonable(config.vae_kwargs(height, width)):
            raise ConfigError(f"{ckpt_path} holds a VAE of another shape ({state['vae_config']}); "
                              "train into another MODEL_DIR or use the checkpoint's settings")
        start, history, val_history = restore_training_state(state, vae, optimizer, generator)
        log.info("resuming VAE training from %s at step %d", ckpt_path, start)
    stop = config.steps if max_steps is None else min(config.steps, start + max_steps)
    params = sum(p.numel() for p in vae.parameters())

    def save_checkpoint(step: int, gen_state: Tensor) -> None:
        with atomic_path(ckpt_path) as tmp:
            torch.save({"model": vae.state_dict(), "optimizer": optimizer.state_dict(), "generator": gen_state,
                        "torch_rng": torch.get_rng_state(), "step": step, "history": history,
                        "val_history": val_history, "config": asdict(config),
                        "vae_config": jsonable(config.vae_kwargs(height, width))}, tmp)

    if not val_history and val_idx:
        val_history.append({"step": start, "val_l1": validation_l1(vae, frames, val_idx, config.batch, dev)})
    bar = tqdm(range(start, stop), initial=start, total=config.steps, desc="prior train vae",
               disable=not progress, dynamic_ncols=True)
    completed, in_update = start, False
    gen_done = generator.get_state()  # the random state after the last finished step
    train_t = torch.as_tensor(train_idx)
    try:
        for step in bar:
            t0 = time.perf_counter()
            pick = train_t[torch.randint(0, len(train_idx), (config.batch,), generator=generator)]
            x = random_crops(to_model_input(frames[pick]), crop, generator).to(dev)
            terms = vae_losses(vae, x, config, generator)
            optimizer.zero_grad(set_to_none=True)
            terms["loss"].backward()
            in_update = True
            optimizer.step()
            in_update = False
            done = completed = step + 1
            gen_done = generator.get_state()
            row = {"step": done, **{k: float(terms[k].detach()) for k in ("loss", "l1", "edge", "kl")},
                   "seconds": time.perf_counter() - t0}
            history.append(row)
            bar.set_postfix(l1=f"{row['l1']:.4f}", val=f"{val_history[-1]['val_l1']:.4f}" if val_history else "-")
            if val_idx and (done % config.val_every == 0 or done == config.steps):
                val_history.append({"step": done, "val_l1": validation_l1(vae, frames, val_idx, config.batch, dev)})
            if done % config.checkpoint_every == 0 or done == stop:
                save_checkpoint(done, gen_done)
    except KeyboardInterrupt:
        if not in_update:  # parameters are those after the last finished step: a cut step is redone on --resume
            del history[completed:]
            save_checkpoint(completed, gen_done)
            log.warning("VAE training interrupted after step %d; checkpoint %s (continue with --resume)", completed,
                        ckpt_path)
        else:
            log.warning("VAE training interrupted inside an optimiser step; the last periodic checkpoint %s stays",
                        ckpt_path)
        raise
    finally:
        bar.close()
    final_step = history[-1]["step"] if history else start
    write_csv(out / "vae_losses.csv", history)
    write_csv(out / "vae_val.csv", val_history)
    vae_dir = out / "vae"
    with atomic_path(vae_dir, suffix="") as tmp:
        vae.save_pretrained(tmp)
    sample = None
    if val_idx or train_idx:
        sample = out / "samples" / f"vae_{final_step:06d}.mp4"
        _write_sample(vae, frames[(val_idx or train_idx)[0]], sample, dev)
    summary = {
        "stage": "vae", "steps_done": final_step, "steps": config.steps, "parameters": params,
        "clips": num_clips, "train_clips": len(train_idx), "val_clips": len(val_idx),
        "frames": num_frames, "height": height, "width": width, "crop": crop, "device": str(dev),
        "initial_val_l1": val_history[0]["val_l1"] if val_history else None,
        "final_val_l1": val_history[-1]["val_l1"] if val_history else None,
        "final_train_l1": history[-1]["l1"] if history else None,
        "median_step_s": float(np.median([r["seconds"] for r in history[start:] or history])) if history else None,
        "config": asdict(config), "vae": str(vae_dir), "sample": str(sample) if sample else None,
    }
    write_json_atomic(out / "train_vae.json", summary)
    return summary


@torch.no_grad()
def _write_sample(vae: torch.nn.Module, clip: Tensor, path: Path, device: torch.device) -> None:

    was_training = vae.training
    vae.eval()
    x = to_model_input(clip[None]).to(device)
    rec = vae.decode(vae.encode(x).latent_dist.mode()).sample
    vae.train(was_training)
    both = torch.cat([x, rec], dim=-2)[0].permute(1, 0, 2, 3).cpu()  # (F, 3, 2H, W)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        write_mp4(((both + 1.0) * 0.5).clamp(0, 1), tmp, fps=8.0)


def train(data: str | Path, out: str | Path, stage: str, config: Any, resume: bool = False,
          progress: bool = True) -> dict[str, Any]:
    """`akd prior train`: one stage, the VAE first (``config`` a :class:`VAETrainConfig`), then the transformer
    (a :class:`akd_core.sds.prior.train_transformer.TransformerTrainConfig`)."""
    if stage == "vae":
        if not isinstance(config, VAETrainConfig):
            raise ConfigError(f"--stage vae needs a VAETrainConfig, got {type(config).__name__}")
        return train_vae(data, out, config, resume=resume, progress=progress)
    if stage == "transformer":

        if not isinstance(config, TransformerTrainConfig):
            raise ConfigError(f"--stage transformer needs a TransformerTrainConfig, got {type(config).__name__}")
        return train_transformer(data, out, config, resume=resume, progress=progress)
    raise ConfigError(f"--stage must be one of {', '.join(STAGES)}, got {stage!r}")
