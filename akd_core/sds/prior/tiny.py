"""A tiny random CogVideoX for tests and CPU smoke runs (no weights, no network).

The transformer and VAE come from the SAME diffusers constructors as the real model
(CogVideoXTransformer3DModel, AutoencoderKLCogVideoX) with tiny widths and a seeded
init, and the prior is the same :class:`CogVideoXPrior` class, so every SDS code path
(fitting, VAE encode, RoPE, batched CFG, x0_hat, gradient) is exercised as it will run
on the 5B model. Prompt embeddings come from a seeded table (prompt hash -> randn of
shape (1, max_text_seq_length, text_embed_dim)), so no T5 weights are needed.

:func:`save_tiny_pretrained` writes a complete diffusers folder (model_index.json,
transformer/, vae/, scheduler/, text_encoder/ with a tiny random T5, tokenizer/ with a
small word-level T5 tokenizer built offline) so ``CogVideoXPrior.from_pretrained`` is
tested on a real folder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from akd_core.io.fileio import atomic_path
from akd_core.sds.prior.cogvideox import CogVideoXOptions, CogVideoXPrior

TINY_TEXT_SEQ_LEN = 16
TINY_TEXT_DIM = 16
TINY_LATENT_CHANNELS = 4

# CogVideoX-2b's scheduler_config.json (the 5b one differs only in snr_shift_scale=1.0).
TINY_SCHEDULER_CONFIG: dict[str, Any] = {
    "num_train_timesteps": 1000,
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "clip_sample": False,
    "set_alpha_to_one": True,
    "steps_offset": 0,
    "prediction_type": "v_prediction",
    "timestep_spacing": "trailing",
    "rescale_betas_zero_snr": True,
    "snr_shift_scale": 3.0,
}

_TOKENIZER_TEXT = (  # the tiny tokenizer's word vocabulary (other words fall back to letters)
    "a the robot dog quadruped humanoid biped hexapod cat horse ostrich tiger walking running "
    "trotting jumping galloping turning walks runs jumps on in of to and is with grass ground floor "
    "flat forward slowly fast left right"
)


def tiny_transformer_config(
    rotary: bool = True, patch_size_t: int | None = None, frames: int = 9, height: int = 64, width: int = 64
) -> dict:
    """CogVideoXTransformer3DModel kwargs: 2 heads x 16, 1 layer, 4 latent channels.

    rotary: RoPE like CogVideoX-5B (else sin-cos positions like 2B); patch_size_t=2: CogVideoX 1.5 patching.
    """
    return {
        "num_attention_heads": 2,
        "attention_head_dim": 16,  # RoPE splits it t/h/w = 4/6/6
        "in_channels": TINY_LATENT_CHANNELS,
        "out_channels": TINY_LATENT_CHANNELS,
        "time_embed_dim": 16,
        "text_embed_dim": TINY_TEXT_DIM,
        "num_layers": 1,
        "sample_width": width // 8,
        "sample_height": height // 8,
        "sample_frames": frames,
        "patch_size": 2,
        "patch_size_t": patch_size_t,
        "max_text_seq_length": TINY_TEXT_SEQ_LEN,
        "use_rotary_positional_embeddings": rotary,
    }


def tiny_vae_config(height: int = 64, width: int = 64) -> dict:
    """AutoencoderKLCogVideoX kwargs: 4 blocks (8x spatial, 4x temporal), 4 latent channels."""
    return {
        "block_out_channels": (8, 8, 16, 16),
        "latent_channels": TINY_LATENT_CHANNELS,
        "layers_per_block": 1,
        "norm_num_groups": 4,
        "temporal_compression_ratio": 4,
        "sample_height": height,
        "sample_width": width,
    }


def build_tiny_modules(
    seed: int = 0, rotary: bool = True, patch_size_t: int | None = None
) -> tuple[torch.nn.Module, torch.nn.Module, Any]:
    """Seeded (transformer, vae, scheduler) without touching the global RNG."""
    from diffusers import AutoencoderKLCogVideoX, CogVideoXDDIMScheduler, CogVideoXTransformer3DModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        transformer = CogVideoXTransformer3DModel(**tiny_transformer_config(rotary, patch_size_t))
        vae = AutoencoderKLCogVideoX(**tiny_vae_config())
    return transformer, vae, CogVideoXDDIMScheduler(**TINY_SCHEDULER_CONFIG)


class SeededPromptEncoder:
    """Prompt -> seeded randn (S, D) table entry; the same prompt and seed always give the same embedding."""

    def __init__(self, seq_len: int = TINY_TEXT_SEQ_LEN, dim: int = TINY_TEXT_DIM, seed: int = 0) -> None:
        self.seq_len, self.dim, self.seed = seq_len, dim, seed

    def __call__(self, prompts: list[str]) -> Tensor:
        """list of B prompts -> (B, seq_len, dim)."""
        rows = []
        for prompt in prompts:
            digest = hashlib.sha256(f"{self.seed}:{prompt}".encode()).digest()
            gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
            rows.append(torch.randn(self.seq_len, self.dim, generator=gen))
        return torch.stack(rows)


def make_tiny_prior(
    prompt: str,
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    options: CogVideoXOptions | None = None,
    rotary: bool = True,
    vae_gradient_checkpointing: bool = False,
    patch_size_t: int | None = None,
) -> CogVideoXPrior:
    """A CogVideoXPrior on a seeded tiny model: 9 frames at 64x64 by default (3 latent frames of 4x8x8)."""
    transformer, vae, scheduler = build_tiny_modules(seed, rotary, patch_size_t)
    if vae_gradient_checkpointing:
        vae.enable_gradient_checkpointing()
    if dtype != torch.float32:  # modules are built in float32
        transformer, vae = transformer.to(dtype=dtype), vae.to(dtype=dtype)
    return CogVideoXPrior(
        transformer.to(device),
        vae.to(device),
        scheduler.alphas_cumprod,
        prompt,
        prompt_encoder=SeededPromptEncoder(seed=seed),
        options=options,
        keep_prompt_encoder=True,
    )


def tiny_tokenizer(extra_words: Iterable[str] = ()) -> Any:
    """A T5Tokenizer (Unigram over a small word list + letters) built without any download.

    extra_words: whole words added to the vocabulary after the built-in list (e.g. every word of the captions a
    prior is trained on, :func:`akd_core.sds.prior.data.caption_words`), so that none is spelled out in letters.
    """
    from transformers import T5Tokenizer

    words = _TOKENIZER_TEXT.split()
    words += [w for w in dict.fromkeys(extra_words) if w not in set(words)]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    vocab += [("\u2581" + w, -5.0) for w in words]
    vocab += [(c, -10.0) for c in letters] + [("\u2581" + c, -10.0) for c in letters]
    return T5Tokenizer(vocab=vocab, extra_ids=0)


def tiny_text_encoder(
    vocab_size: int, seed: int, d_model: int = TINY_TEXT_DIM, num_layers: int = 1, num_heads: int = 2
) -> torch.nn.Module:
    """A seeded random T5EncoderModel (d_kv = d_model / num_heads, d_ff = 2 d_model); the global RNG is untouched."""
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        vocab_size=vocab_size,
        d_model=d_model,
        d_kv=max(d_model // num_heads, 1),
        d_ff=2 * d_model,
        num_layers=num_layers,
        num_heads=num_heads,
        dropout_rate=0.0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        return T5EncoderModel(config).eval()


def save_tiny_pretrained(folder: str | Path, seed: int = 0, rotary: bool = True) -> Path:
    """Write a tiny CogVideoX in the diffusers layout (via CogVideoXPipeline.save_pretrained), atomically."""
    from diffusers import CogVideoXPipeline

    transformer, vae, scheduler = build_tiny_modules(seed, rotary)
    tokenizer = tiny_tokenizer()
    pipe = CogVideoXPipeline(
        tokenizer=tokenizer,
        text_encoder=tiny_text_encoder(len(tokenizer), seed),
        vae=vae,
        transformer=transformer,
        scheduler=scheduler,
    )
    folder = Path(folder)
    with atomic_path(folder, suffix="") as tmp:
        pipe.save_pretrained(tmp)
    return folder
