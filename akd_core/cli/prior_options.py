"""The video prior's options (`akd distill`, `akd run --source sds`) and the :class:`PriorOptions` they build."""

from __future__ import annotations

import argparse
from pathlib import Path

from akd_core.sds.prior import DTYPES, PRIOR_NAMES, PriorOptions


def add_prior_arguments(parser: argparse.ArgumentParser) -> None:
    """The prior options a stage command (e.g. `akd distill`) offers; pair with :func:`make_prior_from_args`."""
    parser.add_argument("--prior", choices=PRIOR_NAMES, default="tiny", help="video prior for SDS")
    parser.add_argument("--video-model", type=Path, default=None, metavar="DIR",
                        help="local diffusers CogVideoX folder (never downloaded)")  # fmt: skip
    parser.add_argument("--guidance-scale", type=float, default=100.0, help="classifier-free guidance scale")
    parser.add_argument("--negative-prompt", default="", metavar="TEXT",
                        help="the prompt guidance steers away from (default: the empty prompt, plain CFG)")  # fmt: skip
    parser.add_argument("--t-min", type=float, default=None, metavar="FRAC",
                        help="lowest SDS noise level, a fraction of the model's timesteps (default 0.02)")
    parser.add_argument("--t-max", type=float, nargs=2, default=None, metavar=("START", "END"),
                        help="highest SDS noise level, annealed linearly from START to END (default 0.98 0.5)")
    parser.add_argument("--t-anneal", type=float, default=None, metavar="FRAC",
                        help="fraction of the iterations over which --t-max anneals (default 0.5)")
    parser.add_argument("--sds-denoise-steps", type=int, default=1, metavar="K",
                        help="DDIM steps from the noised render to SDS's target (default 1: the paper's one-step "
                             "prediction; more: a sharp sample of the prior instead of the mean of all)")
    parser.add_argument("--prior-frames", type=int, default=None, help="frames fed to the VAE (8n+1)")
    parser.add_argument("--prior-height", type=int, default=None, help="prior input height in pixels")
    parser.add_argument("--prior-width", type=int, default=None, help="prior input width in pixels")
    parser.add_argument("--prior-dtype", choices=sorted(DTYPES), default=None,
                        help="model dtype (default bfloat16 on CUDA, float32 on CPU)")  # fmt: skip
    parser.add_argument("--vae-tiling", action="store_true", help="tile the VAE encode (less GPU memory)")


def prior_options_from_args(args: argparse.Namespace) -> PriorOptions:
    """The :class:`PriorOptions` that :func:`add_prior_arguments` flags ask for."""
    return PriorOptions(prior=args.prior, video_model=args.video_model, guidance_scale=args.guidance_scale,
                        negative_prompt=args.negative_prompt or "", t_min=args.t_min,
                        t_max=tuple(args.t_max) if args.t_max is not None else None, t_anneal=args.t_anneal,
                        sds_denoise_steps=args.sds_denoise_steps, frames=args.prior_frames,
                        height=args.prior_height, width=args.prior_width, dtype=args.prior_dtype,
                        vae_tiling=args.vae_tiling)
