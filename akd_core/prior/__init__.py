"""Video priors behind one interface (:class:`VideoPrior`): CogVideoX from a local diffusers
folder, a tiny random CogVideoX for tests, and an oracle that knows the target video.

    prior = make_prior("tiny", "a robot dog trotting", seed=0)
    loss, info = prior.sds_loss(video, step, total_steps, generator)   # video (F, 3, H, W) in [0, 1]
    loss.backward()                                                    # d loss / d latents = z - x0_hat
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from akd_core.errors import ConfigError
from akd_core.prior.base import TimestepSchedule, VideoPrior, classifier_free_guidance, guided_prediction
from akd_core.prior.cogvideox import CogVideoXOptions, CogVideoXPrior, check_model_folder, fit_frames, fit_size
from akd_core.prior.oracle import OracleVideoPrior
from akd_core.prior.tiny import make_tiny_prior, save_tiny_pretrained

PRIOR_NAMES = ("cogvideox", "tiny", "oracle")

__all__ = [
    "PRIOR_NAMES",
    "CogVideoXOptions",
    "CogVideoXPrior",
    "OracleVideoPrior",
    "TimestepSchedule",
    "VideoPrior",
    "check_model_folder",
    "classifier_free_guidance",
    "fit_frames",
    "fit_size",
    "guided_prediction",
    "make_prior",
    "make_tiny_prior",
    "save_tiny_pretrained",
]

_LOAD_OPTIONS = ("vae_gradient_checkpointing", "vae_slicing", "vae_tiling", "keep_prompt_encoder")


def make_prior(
    name: str,
    prompt: str,
    video_model: str | Path | None = None,
    target_video: Tensor | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
    **opts: Any,
) -> VideoPrior:
    """Build a prior by name.

    name: "cogvideox" (needs ``video_model``, a local diffusers folder), "tiny" (seeded random
    CogVideoX), or "oracle" (needs ``target_video`` (F, 3, H, W) in [0, 1]; built on the tiny
    model, or on ``video_model`` when given).
    opts: CogVideoXOptions fields (num_frames, height, width, frame_fit, size_fit, guidance_scale,
    schedule, reduction, negative_prompt, sample_posterior) and, for folders, vae_gradient_checkpointing,
    vae_slicing, vae_tiling, keep_prompt_encoder.
    """
    if name not in PRIOR_NAMES:
        raise ConfigError(f"unknown prior {name!r}; choose one of {', '.join(PRIOR_NAMES)}")
    load_opts = {k: opts.pop(k) for k in _LOAD_OPTIONS if k in opts}
    try:
        options = CogVideoXOptions(**opts)
    except TypeError as exc:
        raise ConfigError(f"prior options: {exc}; valid options are the CogVideoXOptions fields") from exc
    if name == "oracle" and target_video is None:
        raise ConfigError("--prior oracle needs a target video (--target RUN0 with a rendered video)")
    if name == "cogvideox" and video_model is None:
        raise ConfigError(
            "--prior cogvideox needs --video-model DIR, a local diffusers CogVideoX folder "
            "(weights are never downloaded); use --prior tiny to run without one"
        )
    if video_model is not None and name != "tiny":
        base: CogVideoXPrior = CogVideoXPrior.from_pretrained(
            video_model, prompt, dtype=dtype, device=device, options=options, **load_opts
        )
    else:
        base = make_tiny_prior(prompt, seed=seed, device=device, dtype=dtype, options=options)
    if name == "oracle":
        # the oracle encodes with the posterior mean unless asked otherwise: a render equal to the
        # target then has exactly zero gradient
        sample_posterior = options.sample_posterior if "sample_posterior" in opts else False
        return OracleVideoPrior.from_prior(base, target_video, sample_posterior=sample_posterior)
    return base
