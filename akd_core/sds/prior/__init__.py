"""Video priors behind one interface (:class:`VideoPrior`): CogVideoX from a local diffusers
folder, a tiny random CogVideoX for tests, and an oracle that knows the target video.

    prior = make_prior("tiny", "a robot dog trotting", seed=0)
    loss, info = prior.sds_loss(video, step, total_steps, generator)   # video (F, 3, H, W) in [0, 1]
    loss.backward()                                                    # d loss / d latents = z - x0_hat
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from akd_core.io.errors import ConfigError, DependencyError
from akd_core.sds.prior.base import TimestepSchedule, VideoPrior, classifier_free_guidance, guided_prediction
from akd_core.sds.prior.cogvideox import CogVideoXOptions, CogVideoXPrior, check_model_folder, fit_frames, fit_size
from akd_core.sds.prior.oracle import OracleVideoPrior
from akd_core.sds.prior.tiny import make_tiny_prior, save_tiny_pretrained

PRIOR_NAMES = ("cogvideox", "tiny", "oracle")

__all__ = [
    "PRIOR_NAMES",
    "CogVideoXOptions",
    "CogVideoXPrior",
    "OracleVideoPrior",
    "TimestepSchedule",
    "VideoPrior",
    "PriorOptions",
    "describe_model_folder",
    "make_prior_from_options",
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


# ----------------------------------------------------------------------------- command line

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def default_device_dtype() -> tuple[str, torch.dtype]:
    """("cuda", bfloat16) when CUDA is present, else ("cpu", float32)."""
    return ("cuda", torch.bfloat16) if torch.cuda.is_available() else ("cpu", torch.float32)


@dataclass(frozen=True)
class PriorOptions:
    """How SDS builds and queries its video prior (the prior options of `akd distill` / `akd run --source sds`).

    ``None`` keeps the model's or :class:`TimestepSchedule`'s default."""

    prior: str = "tiny"  # one of PRIOR_NAMES
    video_model: Path | None = None  # local diffusers CogVideoX folder (never downloaded)
    guidance_scale: float = 100.0  # classifier-free guidance scale
    negative_prompt: str = ""  # the prompt guidance steers away from ("" = plain CFG)
    t_min: float | None = None  # lowest SDS noise level, fraction of the model's timesteps
    t_max: tuple[float, float] | None = None  # highest noise level, annealed from [0] to [1]
    t_anneal: float | None = None  # fraction of the iterations over which t_max anneals
    sds_denoise_steps: int = 1  # DDIM steps from the noised render to SDS's target (1: the paper's)
    frames: int | None = None  # frames fed to the VAE (8n+1)
    height: int | None = None  # prior input size, pixels
    width: int | None = None
    dtype: str | None = None  # a key of DTYPES (default bfloat16 on CUDA, float32 on CPU)
    vae_tiling: bool = False  # tile the VAE encode (less GPU memory)

    def schedule(self) -> TimestepSchedule | None:
        """The SDS timestep schedule these options ask for (None: the default schedule).

        Raises ConfigError (naming the options) when the bounds are out of order."""
        if self.t_min is None and self.t_max is None and self.t_anneal is None:
            return None
        default = TimestepSchedule()
        start, end = self.t_max if self.t_max is not None else (default.t_end_initial, default.t_end_final)
        try:
            return TimestepSchedule(t_start=default.t_start if self.t_min is None else self.t_min,
                                    t_end_initial=start, t_end_final=end,
                                    anneal_fraction=default.anneal_fraction if self.t_anneal is None else self.t_anneal)
        except ConfigError as exc:
            raise ConfigError(f"--t-min/--t-max/--t-anneal: {exc}") from exc


def make_prior_from_options(options: PriorOptions, prompt: str, target_video: Tensor | None = None,
                            seed: int = 0, contrast_prompts: tuple[str, ...] = ()) -> VideoPrior:
    """Build the prior that ``options`` describe; ``contrast_prompts`` are encoded with the prompt
    (CogVideoXOptions.contrast_prompts)."""
    device, dtype = default_device_dtype()
    if options.dtype is not None:
        dtype = DTYPES[options.dtype]
    opts: dict[str, Any] = {"guidance_scale": options.guidance_scale, "negative_prompt": options.negative_prompt or ""}
    for key, value in (("num_frames", options.frames), ("height", options.height), ("width", options.width)):
        if value is not None:
            opts[key] = value
    schedule = options.schedule()
    if schedule is not None:
        opts["schedule"] = schedule
    if options.sds_denoise_steps != 1:
        opts["denoise_steps"] = options.sds_denoise_steps
    if options.video_model is not None and options.prior != "tiny":
        opts["vae_tiling"] = options.vae_tiling
    if contrast_prompts:
        opts["contrast_prompts"] = tuple(contrast_prompts)
    return make_prior(options.prior, prompt, options.video_model, target_video, device, dtype, seed, **opts)


def describe_model_folder(folder: str | Path) -> dict[str, Any]:
    """Check a diffusers CogVideoX folder's layout and read its configs (no weights loaded)."""
    from diffusers import CogVideoXDDIMScheduler, CogVideoXTransformer3DModel

    folder = check_model_folder(folder)
    try:
        tcfg = CogVideoXTransformer3DModel.load_config(folder, subfolder="transformer", local_files_only=True)
        scfg = CogVideoXDDIMScheduler.load_config(folder, subfolder="scheduler", local_files_only=True)
        vcfg = json.loads((folder / "vae" / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise DependencyError(f"cannot read the configs of video model folder {folder}: {exc}") from exc
    factor = 2 ** (len(vcfg.get("block_out_channels", (0, 0, 0, 0))) - 1)  # the VAE's spatial compression
    return {
        "folder": str(folder),
        "layers": tcfg.get("num_layers"),
        "heads": tcfg.get("num_attention_heads"),
        "frames": tcfg.get("sample_frames"),
        "height_px": tcfg.get("sample_height", 0) * factor,
        "width_px": tcfg.get("sample_width", 0) * factor,
        "rotary": tcfg.get("use_rotary_positional_embeddings", False),
        "text_len": tcfg.get("max_text_seq_length"),
        "vae_spatial_factor": factor,
        "vae_temporal_factor": vcfg.get("temporal_compression_ratio"),
        "vae_scaling_factor": vcfg.get("scaling_factor"),
        "prediction_type": scfg.get("prediction_type"),
        "snr_shift_scale": scfg.get("snr_shift_scale"),
        "rescale_betas_zero_snr": scfg.get("rescale_betas_zero_snr"),
    }
