"""`akd prior train --stage transformer`: a CogVideoX transformer trained from scratch on the trained VAE's latents.

Needs MODEL_DIR/vae/ from ``akd prior train --stage vae`` (frozen here). The stage builds, all from constructors and
a seed (nothing is downloaded):

* ``CogVideoXTransformer3DModel``; default 4 layers x 4 heads x 32 dims, time embedding 64 (1.24 M parameters,
  the setting measured on our CPUs, docs/prior_training.md), RoPE like CogVideoX-5B, patch size 2.
  Its config agrees with the VAE the way
  ``CogVideoXPrior`` and ``CogVideoXPipeline`` read it: ``sample_frames`` = the clips' pixel frames,
  ``temporal_compression_ratio`` = the VAE's (1 by default: 9 frames -> 9 latent frames), ``sample_height`` /
  ``sample_width`` = the LATENT size (pixels / the VAE's 2^(len(block_out_channels) - 1)), in/out channels = the
  VAE's latent channels.
* The text path: a word-level T5 tokenizer built offline (tiny.py's, with every caption word of
  :func:`akd_core.sds.prior.data.caption_words` in its vocabulary) and a small T5EncoderModel (default d_model 32,
  2 layers), **frozen at its seeded random initialisation**. A random T5 still maps different captions to different
  embeddings (each word has its own random embedding vector); the transformer's trained ``text_proj`` and attention
  learn to read them. Captions are encoded once (:class:`PromptTable`) with the same ``T5PromptEncoder`` SDS uses,
  padded to ``max_text_seq_length`` (default 16 tokens; a longer caption is refused, never truncated).

Training (per step, a batch of random training clips): latents z = (posterior mean + std * eps) of the frozen VAE
times ``scaling_factor`` = 1 / the std of those latents over the training clips, so that they have unit std
(written into MODEL_DIR/vae/config.json so that the prior and the pipeline scale alike); t uniform in [0, 1000);
noise ~ N(0, I); z_t = scheduler.add_noise(z, noise, t); target v = scheduler.get_velocity(z, noise, t) with
CogVideoX's DDIM scheduler config (:data:`akd_core.sds.prior.tiny.TINY_SCHEDULER_CONFIG`: v-prediction, zero-terminal
SNR, SNR shift 3); loss MSE(transformer(z_t, prompt, t), v). ``cfg_dropout`` of the samples get the empty-prompt
embedding (the negative prompt of CFG). AdamW, linear warmup, gradient clipping. CUDA when present (float32).

Contrastive term (``contrast_weight`` > 0, off by default): the same forward pass also scores each captioned sample
under a rival caption, its own with the gait told as another gait (:func:`akd_core.sds.prior.data.rival_prompt`:
"a dog trotting fast" -> "a dog pacing fast"; ``contrast_partner`` of the rivals name the gait most like the clip's,
:data:`~akd_core.sds.prior.data.PARTNER_GAIT`, the rest any other), and adds ``contrast_weight`` x
max(0, (1 + ``contrast_margin``) e_own - e_rival) with e the per-sample v-MSE. The v-MSE alone learns the gait word
only through the few latent pixels where the legs are, and a prior that scores a trot and a pace alike gives SDS
no reason to pick either. The loss CSV then has a ``hinge`` column.

Validation: the same v-MSE on held-out clips (the last ~10 % of the index), posterior-mean latents, at
``val_timesteps`` evenly spaced timesteps with fixed noise (the same every time), once with each clip's caption and
once with the empty prompt: ``val_mse`` < ``val_mse_uncond`` means the model reads the prompt.

MODEL_DIR after the stage (a complete diffusers CogVideoX folder, written with ``save_pretrained``)::

    MODEL_DIR/model_index.json, transformer/, vae/, scheduler/, text_encoder/, tokenizer/
    MODEL_DIR/checkpoints/transformer.pt     model + optimiser + step + random state + history + text encoder
    MODEL_DIR/transformer_losses.csv         step, loss, grad_norm, lr, seconds
    MODEL_DIR/transformer_val.csv            step, val_mse, val_mse_uncond
    MODEL_DIR/samples/transformer_<step>.mp4 DDIM samples from noise (CogVideoXPipeline), one prompt per column;
                                             step zero-padded to 6
    MODEL_DIR/train_transformer.json         config and final figures
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from akd_core.io.errors import ConfigError, RunDirError
from akd_core.io.fileio import atomic_path, write_json_atomic
from akd_core.render import write_mp4
from akd_core.sds.prior.cogvideox import T5PromptEncoder, rotary_embeddings
from akd_core.sds.prior.data import GAITS, PARTNER_GAIT, caption_words, rival_prompt
from akd_core.sds.prior.tiny import TINY_SCHEDULER_CONFIG, tiny_text_encoder, tiny_tokenizer
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

TRANSFORMER_CHECKPOINT = "checkpoints/transformer.pt"
SAMPLE_PROMPTS = ("a dog trotting forward", "a dog pacing forward", "a dog bounding forward", "a dog standing still")
PIPELINE_ENTRIES = ("transformer", "vae", "scheduler", "text_encoder", "tokenizer", "model_index.json")
SDS_FRAME_MULTIPLE = 8  # CogVideoXPrior reads the VAE's num_sample_frames_batch_size (8) as its 8n+1 frame rule


@dataclass
class TransformerTrainConfig:
    """`akd prior train --stage transformer` settings (model defaults: the measured 1.2 M setting)."""

    steps: int = 10000
    batch: int = 8
    lr: float = 5e-4
    weight_decay: float = 1e-2
    warmup: int = 100  # linear learning-rate warmup over this many steps (0: none)
    grad_clip: float = 1.0  # max gradient norm (0: no clipping)
    cfg_dropout: float = 0.1  # fraction of samples trained with the empty prompt (classifier-free guidance)
    latent_sample: bool = True  # train on posterior samples (as SDS encodes) instead of posterior means
    checkpoint_every: int = 100
    val_every: int = 500
    val_fraction: float = 0.1
    val_timesteps: int = 4
    sample_every: int = 0  # also write sample videos every this many steps (0: only at the end)
    sample_steps: int = 50  # DDIM steps of the sample videos (0: no samples)
    sample_guidance: float = 6.0  # CogVideoXPipeline's default guidance scale
    sample_prompts: tuple[str, ...] = SAMPLE_PROMPTS
    # contrastive term (0: off, plain diffusion training): each captioned sample is also scored under a rival
    # caption that names another gait (data.rival_prompt), and pays when its own caption's v-MSE is not at least
    # (1 + contrast_margin) x smaller than the rival's
    contrast_weight: float = 0.0
    contrast_margin: float = 0.1
    contrast_partner: float = 0.5  # fraction of rivals that name the clip's data.PARTNER_GAIT (the rest: any other)
    # fine-tuning: a model folder (e.g. models/akd-gaits-tiny) whose transformer, text encoder and latent scaling
    # this training starts from, instead of a seeded initialisation; its VAE must be MODEL_DIR's (not with --resume:
    # a resumed run already holds its weights)
    init_from: str | None = None
    seed: int = 0
    layers: int = 4
    heads: int = 4
    head_dim: int = 32
    time_embed_dim: int = 64
    patch_size: int = 2
    rotary: bool = True
    text_dim: int = 32
    text_layers: int = 2
    text_heads: int = 2
    text_len: int = 16

    def __post_init__(self) -> None:
        self.sample_prompts = tuple(str(p) for p in self.sample_prompts)
        if self.steps < 1 or self.batch < 1:
            raise ConfigError(f"--steps and --batch must be >= 1, got {self.steps}, {self.batch}")
        if self.lr <= 0:
            raise ConfigError(f"--lr must be > 0, got {self.lr}")
        if not 0.0 <= self.cfg_dropout < 1.0:
            raise ConfigError(f"--cfg-dropout must be in [0, 1), got {self.cfg_dropout}")
        if min(self.layers, self.heads, self.head_dim, self.time_embed_dim, self.patch_size) < 1:
            raise ConfigError("--layers, --heads, --head-dim, time_embed_dim and patch_size must be >= 1, got "
                              f"{self.layers}, {self.heads}, {self.head_dim}, {self.time_embed_dim}, {self.patch_size}")
        if self.rotary and self.head_dim % 16:
            raise ConfigError(f"--head-dim {self.head_dim}: CogVideoX's RoPE splits a head t/h/w = 1/4, 3/8, 3/8 "
                              "into even parts, so it must be a multiple of 16 (or train with --no-rotary)")
        if self.text_dim % self.text_heads:
            raise ConfigError(f"--text-dim {self.text_dim} must be a multiple of text_heads {self.text_heads}")
        if not 0.0 <= self.contrast_partner <= 1.0:
            raise ConfigError(f"--contrast-partner must be in [0, 1], got {self.contrast_partner}")
        if self.contrast_weight < 0 or self.contrast_margin < 0:
            raise ConfigError(f"--contrast-weight and --contrast-margin must be >= 0, got {self.contrast_weight}, "
                              f"{self.contrast_margin}")
        if self.text_len < 2:
            raise ConfigError(f"--text-len must be >= 2 tokens, got {self.text_len}")
        if self.warmup < 0 or self.grad_clip < 0 or self.checkpoint_every < 1 or self.val_every < 1:
            raise ConfigError("--warmup and grad_clip must be >= 0, --checkpoint-every and --val-every >= 1; got "
                              f"{self.warmup}, {self.grad_clip}, {self.checkpoint_every}, {self.val_every}")
        if self.val_timesteps < 1 or self.sample_steps < 0 or self.sample_every < 0:
            raise ConfigError("val_timesteps must be >= 1, --sample-steps and --sample-every >= 0; got "
                              f"{self.val_timesteps}, {self.sample_steps}, {self.sample_every}")

    def transformer_kwargs(self, vae_config: Any, frames: int, height: int, width: int) -> dict[str, Any]:
        """CogVideoXTransformer3DModel kwargs for ``frames`` x ``height`` x ``width`` pixel clips through the VAE."""
        factor = 2 ** (len(vae_config.block_out_channels) - 1)
        channels = int(vae_config.latent_channels)
        return {
            "num_attention_heads": self.heads,
            "attention_head_dim": self.head_dim,
            "in_channels": channels,
            "out_channels": channels,
            "time_embed_dim": self.time_embed_dim,
            "text_embed_dim": self.text_dim,
            "num_layers": self.layers,
            "sample_width": width // factor,  # LATENT sizes (CogVideoXPrior / the pipeline multiply by the factor)
            "sample_height": height // factor,
            "sample_frames": frames,  # pixel frames: (sample_frames - 1) / temporal_compression_ratio + 1 latent
            "temporal_compression_ratio": int(vae_config.temporal_compression_ratio),
            "patch_size": self.patch_size,
            "max_text_seq_length": self.text_len,
            "use_rotary_positional_embeddings": self.rotary,
        }


# ----------------------------------------------------------------------------- parts
def build_transformer(kwargs: dict[str, Any], seed: int) -> torch.nn.Module:
    """A fresh CogVideoXTransformer3DModel initialised from ``seed`` (the global random state is left alone)."""
    from diffusers import CogVideoXTransformer3DModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return CogVideoXTransformer3DModel(**kwargs)


def build_text_encoder(config: TransformerTrainConfig, words: list[str]) -> tuple[Any, torch.nn.Module]:
    """(tokenizer, frozen seeded random T5 encoder): tiny.py's offline tokenizer with ``words`` added."""
    tokenizer = tiny_tokenizer(words)
    encoder = tiny_text_encoder(len(tokenizer), config.seed, config.text_dim, config.text_layers, config.text_heads)
    return tokenizer, encoder.eval().requires_grad_(False)


def load_frozen_vae(out: Path, frames: int) -> torch.nn.Module:
    """MODEL_DIR/vae/ (from `--stage vae`), frozen, encoding and decoding whole clips in one pass (training only)."""
    from diffusers import AutoencoderKLCogVideoX

    vae_dir = out / "vae"
    if not (vae_dir / "config.json").exists():
        raise ConfigError(f"{vae_dir} not found: the transformer stage trains on the latents of a trained VAE; run "
                          f"`akd prior train --data DATA --out {out} --stage vae` first")
    try:
        vae = AutoencoderKLCogVideoX.from_pretrained(vae_dir, local_files_only=True)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"cannot load the VAE {vae_dir}: {exc}; re-run `akd prior train --stage vae "
                          f"--out {out}` to write it again") from exc
    return whole_clip_batches(vae, frames).eval().requires_grad_(False)


def load_start_weights(folder: Path, tkwargs: dict[str, Any], fingerprint: str, tokenizer: Any,
                       text_encoder: torch.nn.Module) -> dict[str, Any]:
    """``--init-from FOLDER``: its transformer weights and latent scaling factor, checked against this run.

    The folder's transformer must have this run's shape, its VAE must be MODEL_DIR's (same weights) and its
    tokenizer this run's vocabulary; its text encoder weights are loaded into ``text_encoder``. Anything else is a
    ConfigError naming the folder and what differs."""
    from diffusers import AutoencoderKLCogVideoX, CogVideoXTransformer3DModel
    from transformers import AutoTokenizer, T5EncoderModel

    for entry in ("transformer", "vae", "text_encoder", "tokenizer"):
        if not (folder / entry).is_dir():
            raise ConfigError(f"--init-from {folder}: no {entry}/ (a diffusers CogVideoX folder written by "
                              "`akd prior train --stage transformer`, e.g. models/akd-gaits-tiny)")
    start = CogVideoXTransformer3DModel.from_pretrained(folder / "transformer", local_files_only=True)
    differs = {k: (start.config.get(k), v) for k, v in jsonable(tkwargs).items()
               if jsonable({k: start.config.get(k)})[k] != v}
    if differs:
        raise ConfigError(f"--init-from {folder}/transformer has another shape than this run ({differs}: folder, "
                          "run); pass the folder's --layers/--heads/--head-dim/--text-len or train from scratch")
    vae = AutoencoderKLCogVideoX.from_pretrained(folder / "vae", local_files_only=True)
    if vae_fingerprint(vae) != fingerprint:
        raise ConfigError(f"--init-from {folder}/vae differs from MODEL_DIR/vae: the transformer only knows its own "
                          f"VAE's latents; copy {folder}/vae into MODEL_DIR first")
    if AutoTokenizer.from_pretrained(folder / "tokenizer", local_files_only=True).get_vocab() != tokenizer.get_vocab():
        raise ConfigError(f"--init-from {folder}/tokenizer has another vocabulary than this version's captions; "
                          "train from scratch")
    encoder = T5EncoderModel.from_pretrained(folder / "text_encoder", local_files_only=True)
    text_encoder.load_state_dict(encoder.state_dict())
    return {"transformer": start.state_dict(), "scaling_factor": float(vae.config.scaling_factor)}


def vae_fingerprint(vae: torch.nn.Module) -> str:
    """sha256 of the VAE's weights (not its config: the scaling factor written by this stage does not count)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(vae.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


@torch.no_grad()
def encode_clips(vae: torch.nn.Module, frames: Tensor, batch: int, device: torch.device,
                 progress: bool = False) -> tuple[Tensor, Tensor]:
    """uint8 (N, F, H, W, 3) -> posterior (mean, std), each float32 (N, C, F', h, w) on the CPU (unscaled)."""
    means, stds = [], []
    for start in tqdm(range(0, frames.shape[0], batch), desc="prior train: encode clips", disable=not progress,
                      dynamic_ncols=True, leave=False):
        posterior = vae.encode(to_model_input(frames[start:start + batch]).to(device)).latent_dist
        means.append(posterior.mean.float().cpu())
        stds.append(posterior.std.float().cpu())
    return torch.cat(means), torch.cat(stds)


def latent_scaling_factor(mean: Tensor, std: Tensor, sample: bool) -> float:
    """1 / the std of the latents the transformer trains on: posterior means, or samples (variance of the means
    plus the mean posterior variance), over every element of the given clips."""
    var = mean.double().var()
    if sample:
        var = var + std.double().square().mean()
    return float(1.0 / var.sqrt())


class PromptTable:
    """Captions -> T5 embeddings, computed once. Row 0 is the empty prompt (CFG's unconditional input).

    Encodes with :class:`akd_core.sds.prior.cogvideox.T5PromptEncoder`, the encoder ``CogVideoXPrior`` uses, so the
    transformer is conditioned in training exactly as in SDS.
    """

    def __init__(self, tokenizer: Any, text_encoder: torch.nn.Module, max_length: int, prompts: list[str]) -> None:
        self.texts = [""] + sorted(set(prompts) - {""})
        self.row = {text: i for i, text in enumerate(self.texts)}
        for text in self.texts:
            count = len(tokenizer(text, add_special_tokens=True).input_ids)
            if count > max_length:
                raise ConfigError(f"caption {text!r} is {count} tokens, more than --text-len {max_length}; "
                                  f"train with --text-len {count} or more (captions are never truncated)")
        encoder = T5PromptEncoder(tokenizer, text_encoder, max_length)
        self.embeds = torch.cat([encoder(self.texts[i:i + 64]).float() for i in range(0, len(self.texts), 64)])

    def rows(self, prompts: list[str]) -> Tensor:
        """Row indices (long) of ``prompts``."""
        return torch.as_tensor([self.row[p] for p in prompts], dtype=torch.long)


def sample_errors(transformer: torch.nn.Module, scheduler: Any, latents: Tensor, embeds: Tensor, timesteps: Tensor,
                  noise: Tensor, rotary: tuple[Tensor, Tensor] | None) -> Tensor:
    """Per-sample v-prediction MSE (B,): latents, noise (B, F', C, h, w) scaled; embeds (B, S, D); timesteps (B,)."""
    noisy = scheduler.add_noise(latents, noise, timesteps)
    target = scheduler.get_velocity(latents, noise, timesteps)
    pred = transformer(hidden_states=noisy, encoder_hidden_states=embeds, timestep=timesteps,
                       image_rotary_emb=rotary, return_dict=False)[0]
    return (pred.float() - target.float()).pow(2).flatten(1).mean(1)


def transformer_loss(transformer: torch.nn.Module, scheduler: Any, latents: Tensor, embeds: Tensor, timesteps: Tensor,
                     noise: Tensor, rotary: tuple[Tensor, Tensor] | None) -> Tensor:
    """v-prediction MSE of one batch (the mean of :func:`sample_errors`)."""
    return sample_errors(transformer, scheduler, latents, embeds, timesteps, noise, rotary).mean()


def contrastive_loss(transformer: torch.nn.Module, scheduler: Any, latents: Tensor, embeds: Tensor,
                     rival_embeds: Tensor, timesteps: Tensor, noise: Tensor, rotary: tuple[Tensor, Tensor] | None,
                     margin: float, active: Tensor) -> tuple[Tensor, Tensor]:
    """(v-MSE over the batch with ``embeds``, contrastive hinge): one forward pass scores every sample under its
    own caption and under ``rival_embeds`` (the same caption naming another gait) on the same noisy latents.

    hinge = sum over ``active`` samples (bool (B,): those trained with a caption) of
    max(0, (1 + margin) e_own - e_rival) / B, with e the per-sample v-MSE: the caption must explain the clip's
    motion better than a wrong gait word does, which plain v-MSE training asks only through the few latent
    pixels where the legs are.
    """
    batch = latents.shape[0]
    err = sample_errors(transformer, scheduler, torch.cat([latents, latents]), torch.cat([embeds, rival_embeds]),
                        torch.cat([timesteps, timesteps]), torch.cat([noise, noise]), rotary)  # (2B,)
    own, rival = err[:batch], err[batch:]
    hinge = torch.relu((1.0 + margin) * own - rival) * active.to(own.dtype)
    return own.mean(), hinge.sum() / batch


def rival_prompts(prompts: list[str], index: dict[str, Any], data: str | Path) -> list[list[str]]:
    """Per clip, its caption told with each other gait (:func:`akd_core.sds.prior.data.rival_prompt`), from the
    index's ``gait`` of every clip: the clip's :data:`~akd_core.sds.prior.data.PARTNER_GAIT` first, then the others."""

    clips = index.get("clips", [])
    if len(clips) != len(prompts) or any("gait" not in c for c in clips):
        raise ConfigError(f"{Path(data) / 'index.json'} does not name every clip's gait; the contrastive term needs "
                          "data written by `akd prior data` (or set --contrast-weight 0)")
    rivals = []
    for prompt, clip in zip(prompts, clips):
        gait = clip["gait"]
        order = [PARTNER_GAIT[gait]] + [g for g in GAITS if g not in (gait, PARTNER_GAIT[gait])]
        rivals.append([rival_prompt(prompt, gait, g) for g in order])
    return rivals


@torch.no_grad()
def validation_mse(transformer: torch.nn.Module, scheduler: Any, latents: Tensor, rows: Tensor, table: PromptTable,
                   config: TransformerTrainConfig, rotary: Any, device: torch.device) -> tuple[float, float]:
    """(v-MSE with each clip's caption, v-MSE with the empty prompt) of held-out latents (N, F', C, h, w).

    Timesteps are ``config.val_timesteps`` evenly spaced over [0, 1000) and the noise is drawn from a generator
    seeded afresh on every call, so the figures are comparable across steps and runs.
    """
    if latents.shape[0] == 0:
        return float("nan"), float("nan")
    count = int(scheduler.config.num_train_timesteps)
    steps = [int((k + 0.5) * count / config.val_timesteps) for k in range(config.val_timesteps)]
    generator = torch.Generator().manual_seed(config.seed + 7919)
    was_training = transformer.training
    transformer.eval()
    totals, n = [0.0, 0.0], 0
    pairs = [(i, t) for i in range(latents.shape[0]) for t in steps]
    for start in range(0, len(pairs), config.batch):
        chunk = pairs[start:start + config.batch]
        z = latents[[i for i, _ in chunk]].to(device)
        t = torch.as_tensor([t for _, t in chunk], dtype=torch.long, device=device)
        noise = torch.randn(z.shape, generator=generator).to(device)
        for k, r in enumerate((rows[[i for i, _ in chunk]], torch.zeros(len(chunk), dtype=torch.long))):
            loss = transformer_loss(transformer, scheduler, z, table.embeds[r], t, noise, rotary)
            totals[k] += float(loss) * len(chunk)
        n += len(chunk)
    transformer.train(was_training)
    return totals[0] / n, totals[1] / n


def make_pipeline(tokenizer: Any, text_encoder: torch.nn.Module, vae: torch.nn.Module,
                  transformer: torch.nn.Module) -> Any:
    """A CogVideoXPipeline on these modules with a fresh CogVideoX DDIM scheduler (v-prediction)."""
    from diffusers import CogVideoXDDIMScheduler, CogVideoXPipeline

    pipe = CogVideoXPipeline(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                             scheduler=CogVideoXDDIMScheduler(**TINY_SCHEDULER_CONFIG))
    pipe.set_progress_bar_config(disable=True)
    return pipe


@torch.no_grad()
def write_samples(pipe: Any, config: TransformerTrainConfig, shape: tuple[int, int, int], path: Path) -> Path:
    """DDIM from noise (``config.sample_steps`` steps, CFG ``config.sample_guidance``) through CogVideoXPipeline for
    each sample prompt, decoded by the VAE; written as one mp4 with a column per prompt. Global RNG untouched."""

    frames, height, width = shape
    transformer = pipe.transformer
    device = next(transformer.parameters()).device
    was_training = transformer.training
    transformer.eval()
    with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
        generator = torch.Generator(device="cpu").manual_seed(config.seed)
        video = pipe(prompt=list(config.sample_prompts), num_frames=frames, height=height, width=width,
                     num_inference_steps=config.sample_steps, guidance_scale=config.sample_guidance,
                     generator=generator, output_type="pt", max_sequence_length=config.text_len).frames
    transformer.train(was_training)
    video = torch.as_tensor(video).float().cpu()  # (P, F, 3, H, W) in [0, 1]
    tiled = torch.cat(list(video), dim=-1)  # (F, 3, H, P * W)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        write_mp4(tiled.clamp(0, 1), tmp, fps=8.0)
    return path


def save_pipeline_folder(pipe: Any, out: Path) -> None:
    """``pipe.save_pretrained`` into MODEL_DIR: each entry (transformer/, vae/, ..., model_index.json last) is
    replaced atomically; the other files of MODEL_DIR (checkpoints, losses, samples) stay."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".pipeline.tmp-", dir=out))
    try:
        pipe.save_pretrained(staging)
        for name in PIPELINE_ENTRIES:
            with atomic_path(out / name, suffix="" if (staging / name).is_dir() else None) as tmp:
                shutil.move(str(staging / name), str(tmp))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def snapshot_folder(model_dir: str | Path, out: str | Path) -> dict[str, Any]:
    """`akd prior snapshot`: the complete diffusers folder of MODEL_DIR's latest transformer checkpoint, written to
    ``out`` (to try a prior while its training goes on; MODEL_DIR is only read). Returns {"step", "folder"}."""
    from diffusers import AutoencoderKLCogVideoX

    model_dir, out = Path(model_dir), Path(out)
    ckpt_path = model_dir / TRANSFORMER_CHECKPOINT
    if not ckpt_path.exists():
        raise RunDirError(f"{ckpt_path} not found: `akd prior snapshot` reads the checkpoint `akd prior train "
                          f"--stage transformer --out {model_dir}` writes")
    if out.resolve() == model_dir.resolve():
        raise ConfigError(f"--out {out} is MODEL_DIR itself; snapshot into another folder")
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    vae = AutoencoderKLCogVideoX.from_pretrained(model_dir / "vae", local_files_only=True)
    if vae_fingerprint(vae) != state["vae_fingerprint"]:
        raise ConfigError(f"{model_dir / 'vae'} is not the VAE {ckpt_path} was trained on")
    vae.register_to_config(scaling_factor=float(state["scaling_factor"]))
    config = TransformerTrainConfig(**{k: tuple(v) if k == "sample_prompts" else v
                                       for k, v in state["config"].items()})
    tokenizer, text_encoder = build_text_encoder(config, list(state["tokenizer_words"]))
    text_encoder.load_state_dict(state["text_encoder"])
    transformer = build_transformer(state["transformer_config"], config.seed)
    transformer.load_state_dict(state["model"])
    save_pipeline_folder(make_pipeline(tokenizer, text_encoder, vae, transformer.eval()), out)
    return {"step": int(state["step"]), "folder": str(out)}


# ----------------------------------------------------------------------------- the run
def train_transformer(data: str | Path, out: str | Path, config: TransformerTrainConfig, resume: bool = False,
                      progress: bool = True, max_steps: int | None = None,
                      device: str | None = None) -> dict[str, Any]:
    """Train (or, with ``resume``, continue) the transformer on MODEL_DIR/vae's latents; writes the complete
    diffusers folder and the files in the module docstring. ``max_steps`` stops after that many steps of this call
    (a checkpoint is written there; --resume continues)."""
    from diffusers import CogVideoXDDIMScheduler

    out = Path(out)
    ckpt_path = out / TRANSFORMER_CHECKPOINT
    if resume and not ckpt_path.exists():
        raise RunDirError(f"--resume: no checkpoint {ckpt_path}; start without --resume")
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    frames, prompts, _index = load_clips(data)
    num_clips, num_frames, height, width, _ = frames.shape
    if (num_frames - 1) % SDS_FRAME_MULTIPLE:
        raise ConfigError(f"{data}: clips of {num_frames} frames; CogVideoXPrior feeds the VAE 8n+1 frames, so the "
                          f"prior must be trained on such clips: render with `akd prior data --frames 9` (or 17, ..)")
    vae = load_frozen_vae(out, num_frames).to(dev)
    factor = 2 ** (len(vae.config.block_out_channels) - 1)
    pixel_multiple = factor * config.patch_size
    if height % pixel_multiple or width % pixel_multiple or height % 8 or width % 8:
        raise ConfigError(f"frame size {height}x{width} must be a multiple of 8 and of {pixel_multiple} (VAE factor "
                          f"{factor} x patch size {config.patch_size}); render with another --size")
    tkwargs = config.transformer_kwargs(vae.config, num_frames, height, width)
    train_idx, val_idx = split_clips(num_clips, config.val_fraction)
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False) if resume else None
    if state is not None and state["transformer_config"] != jsonable(tkwargs):
        raise ConfigError(f"{ckpt_path} holds a transformer of another shape ({state['transformer_config']}); "
                          "train into another MODEL_DIR or use the checkpoint's settings")
    fingerprint = vae_fingerprint(vae)
    if state is not None and state["vae_fingerprint"] != fingerprint:
        raise ConfigError(f"{out / 'vae'} is not the VAE {ckpt_path} was trained on (retrained?); start the "
                          f"transformer stage afresh: delete {ckpt_path} and run without --resume")

    words = list(state["tokenizer_words"]) if state is not None else caption_words()
    tokenizer, text_encoder = build_text_encoder(config, words)
    if state is not None:
        text_encoder.load_state_dict(state["text_encoder"])
    start_weights = None
    if state is None and config.init_from:
        start_weights = load_start_weights(Path(config.init_from), tkwargs, fingerprint, tokenizer, text_encoder)
    text_encoder.to(dev)
    rivals = rival_prompts(prompts, _index, data) if config.contrast_weight > 0 else None
    table = PromptTable(tokenizer, text_encoder, config.text_len,
                        [*prompts, *config.sample_prompts, *(r for clip in rivals or [] for r in clip)])
    table.embeds = table.embeds.to(dev)
    clip_rows = table.rows(prompts)
    rival_rows = torch.stack([table.rows(r) for r in rivals]) if rivals else None  # (N, gaits - 1)

    t0 = time.perf_counter()
    mean, std = encode_clips(vae, frames, max(config.batch, 1), dev, progress)
    encode_s = time.perf_counter() - t0
    if state is not None:
        scale = float(state["scaling_factor"])
    elif start_weights is not None:  # the start transformer learnt latents at its folder's scale
        scale = start_weights["scaling_factor"]
    else:
        scale = latent_scaling_factor(mean[train_idx], std[train_idx], config.latent_sample)
    vae.register_to_config(scaling_factor=scale)
    mean = (mean * scale).permute(0, 2, 1, 3, 4).contiguous().to(dev)  # (N, F', C, h, w): the transformer's layout
    std = (std * scale).permute(0, 2, 1, 3, 4).contiguous().to(dev)
    latent_shape = tuple(mean.shape[1:])

    transformer = build_transformer(tkwargs, config.seed)
    if start_weights is not None:
        transformer.load_state_dict(start_weights["transformer"])
        log.info("transformer starts from %s", config.init_from)
    transformer = transformer.to(dev).train()
    scheduler = CogVideoXDDIMScheduler(**TINY_SCHEDULER_CONFIG)
    rotary = (rotary_embeddings(transformer.config, latent_shape[0], latent_shape[2], latent_shape[3], dev)
              if config.rotary else None)
    optimizer = torch.optim.AdamW(transformer.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(config.seed)
    start, history, val_history = 0, [], []
    if state is not None:
        if int(state["clips"]) != num_clips:
            log.warning("%s was trained on %d clips, %s holds %d: training continues on the new set",
                        ckpt_path, state["clips"], data, num_clips)
        start, history, val_history = restore_training_state(state, transformer, optimizer, generator)
        log.info("resuming transformer training from %s at step %d", ckpt_path, start)
    stop = config.steps if max_steps is None else min(config.steps, start + max_steps)
    params = sum(p.numel() for p in transformer.parameters())
    pipe = make_pipeline(tokenizer, text_encoder, vae, transformer)
    val_latents, val_rows = mean[val_idx], clip_rows[val_idx]

    def validate(step: int) -> None:
        cond, uncond = validation_mse(transformer, scheduler, val_latents, val_rows, table, config, rotary, dev)
        val_history.append({"step": step, "val_mse": cond, "val_mse_uncond": uncond})

    def save_checkpoint(step: int, gen_state: Tensor) -> None:
        with atomic_path(ckpt_path) as tmp:
            torch.save({"model": transformer.state_dict(), "optimizer": optimizer.state_dict(), "generator": gen_state,
                        "torch_rng": torch.get_rng_state(), "step": step, "history": history,
                        "val_history": val_history, "config": asdict(config),
                        "transformer_config": jsonable(tkwargs), "vae_fingerprint": fingerprint,
                        "scaling_factor": scale, "tokenizer_words": words, "clips": num_clips,
                        "text_encoder": text_encoder.state_dict()}, tmp)

    def sample(step: int) -> Path | None:
        if config.sample_steps < 1:
            return None
        return write_samples(pipe, config, (num_frames, height, width),
                             out / "samples" / f"transformer_{step:06d}.mp4")

    if not val_history and val_idx:
        validate(start)
    bar = tqdm(range(start, stop), initial=start, total=config.steps, desc="prior train transformer",
               disable=not progress, dynamic_ncols=True)
    completed, in_update = start, False
    gen_done = generator.get_state()  # the random state after the last finished step
    train_t = torch.as_tensor(train_idx)
    uncond_row = torch.zeros(config.batch, dtype=torch.long)
    num_timesteps = int(scheduler.config.num_train_timesteps)
    try:
        for step in bar:
            t0 = time.perf_counter()
            pick = train_t[torch.randint(0, len(train_idx), (config.batch,), generator=generator)]
            eps = torch.randn((config.batch, *latent_shape), generator=generator).to(dev)
            z = mean[pick] + std[pick] * eps if config.latent_sample else mean[pick]
            timesteps = torch.randint(0, num_timesteps, (config.batch,), generator=generator).to(dev)
            noise = torch.randn(z.shape, generator=generator).to(dev)
            drop = torch.rand(config.batch, generator=generator) < config.cfg_dropout
            rows = torch.where(drop, uncond_row, clip_rows[pick])
            lr = config.lr * min(1.0, (step + 1) / config.warmup) if config.warmup > 0 else config.lr
            for group in optimizer.param_groups:
                group["lr"] = lr
            if rival_rows is None:
                loss = transformer_loss(transformer, scheduler, z, table.embeds[rows], timesteps, noise, rotary)
                hinge = None
            else:  # samples dropped to the empty prompt have no gait word to contrast: masked out
                which = torch.randint(0, rival_rows.shape[1], (config.batch,), generator=generator)
                partner = torch.rand(config.batch, generator=generator) < config.contrast_partner
                which = torch.where(partner, torch.zeros_like(which), which)  # column 0: the partner gait
                rival = rival_rows[pick, which]
                mse, hinge = contrastive_loss(transformer, scheduler, z, table.embeds[rows], table.embeds[rival],
                                              timesteps, noise, rotary, config.contrast_margin, ~drop.to(dev))
                loss = mse + config.contrast_weight * hinge
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(transformer.parameters(),
                                                       config.grad_clip if config.grad_clip > 0 else float("inf"))
            in_update = True
            optimizer.step()
            in_update = False
            done = completed = step + 1
            gen_done = generator.get_state()
            row = {"step": done, "loss": float(loss.detach()), "grad_norm": float(grad_norm), "lr": lr,
                   "seconds": time.perf_counter() - t0}
            if hinge is not None:
                row["hinge"] = float(hinge.detach())
            history.append(row)
            bar.set_postfix(loss=f"{row['loss']:.4f}",
                            val=f"{val_history[-1]['val_mse']:.4f}" if val_history else "-")
            if val_idx and (done % config.val_every == 0 or done == config.steps):
                validate(done)
            if done % config.checkpoint_every == 0 or done == stop:
                save_checkpoint(done, gen_done)
            if config.sample_every and done % config.sample_every == 0 and done != stop:
                sample(done)
    except KeyboardInterrupt:
        if not in_update:  # parameters are those after the last finished step: a cut step is redone on --resume
            del history[completed:]
            save_checkpoint(completed, gen_done)
            log.warning("transformer training interrupted after step %d; checkpoint %s (continue with --resume)",
                        completed, ckpt_path)
        else:
            log.warning("transformer training interrupted inside an optimiser step; the last periodic checkpoint "
                        "%s stays", ckpt_path)
        raise
    finally:
        bar.close()
    final_step = history[-1]["step"] if history else start
    write_csv(out / "transformer_losses.csv", history)
    write_csv(out / "transformer_val.csv", val_history)
    save_pipeline_folder(pipe, out)
    sample_path = sample(final_step)
    recent = history[start:] or history
    summary = {
        "stage": "transformer", "steps_done": final_step, "steps": config.steps, "parameters": params,
        "text_encoder_parameters": sum(p.numel() for p in text_encoder.parameters()),
        "clips": num_clips, "train_clips": len(train_idx), "val_clips": len(val_idx), "captions": len(table.texts) - 1,
        "frames": num_frames, "height": height, "width": width, "latent_shape": list(latent_shape),
        "scaling_factor": scale, "device": str(dev), "encode_clips_s": encode_s,
        "initial_val_mse": val_history[0]["val_mse"] if val_history else None,
        "final_val_mse": val_history[-1]["val_mse"] if val_history else None,
        "final_val_mse_uncond": val_history[-1]["val_mse_uncond"] if val_history else None,
        "final_train_loss": float(np.mean([r["loss"] for r in history[-20:]])) if history else None,
        "median_step_s": float(np.median([r["seconds"] for r in recent])) if history else None,
        "config": asdict(config), "transformer_config": jsonable(tkwargs), "folder": str(out),
        "sample": str(sample_path) if sample_path else None,
    }
    write_json_atomic(out / "train_transformer.json", summary)
    return summary
