"""Video priors behind one interface (:class:`VideoPrior`): CogVideoX from a local diffusers
folder, a tiny random CogVideoX for tests, and an oracle that knows the target video.

    prior = make_prior("tiny", "a robot dog trotting", seed=0)
    loss, info = prior.sds_loss(video, step, total_steps, generator)   # video (F, 3, H, W) in [0, 1]
    loss.backward()                                                    # d loss / d latents = z - x0_hat
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from akd_core.errors import ConfigError, DependencyError
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
    "add_arguments",
    "add_prior_arguments",
    "cli",
    "describe_model_folder",
    "make_prior_from_args",
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


def schedule_from_args(args: argparse.Namespace) -> TimestepSchedule | None:
    """The SDS timestep schedule that --t-min / --t-max / --t-anneal ask for (None: the default schedule).

    Raises ConfigError (naming the options) when the bounds are out of order."""
    t_min, t_max, anneal = (getattr(args, name, None) for name in ("t_min", "t_max", "t_anneal"))
    if t_min is None and t_max is None and anneal is None:
        return None
    default = TimestepSchedule()
    start, end = t_max if t_max is not None else (default.t_end_initial, default.t_end_final)
    try:
        return TimestepSchedule(t_start=default.t_start if t_min is None else t_min, t_end_initial=start,
                                t_end_final=end, anneal_fraction=default.anneal_fraction if anneal is None else anneal)
    except ConfigError as exc:
        raise ConfigError(f"--t-min/--t-max/--t-anneal: {exc}") from exc


def make_prior_from_args(
    args: argparse.Namespace, prompt: str, target_video: Tensor | None = None, seed: int = 0
) -> VideoPrior:
    """Build the prior chosen by :func:`add_prior_arguments` options."""
    device, dtype = default_device_dtype()
    if args.prior_dtype is not None:
        dtype = DTYPES[args.prior_dtype]
    opts: dict[str, Any] = {"guidance_scale": args.guidance_scale,
                            "negative_prompt": getattr(args, "negative_prompt", "") or ""}  # fmt: skip
    for key, value in (("num_frames", args.prior_frames), ("height", args.prior_height), ("width", args.prior_width)):
        if value is not None:
            opts[key] = value
    schedule = schedule_from_args(args)
    if schedule is not None:
        opts["schedule"] = schedule
    if getattr(args, "sds_denoise_steps", 1) != 1:
        opts["denoise_steps"] = args.sds_denoise_steps
    if args.video_model is not None and args.prior != "tiny":
        opts["vae_tiling"] = args.vae_tiling
    return make_prior(args.prior, prompt, args.video_model, target_video, device, dtype, seed, **opts)


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`akd prior check DIR` | `akd prior save-tiny DIR [--seed N] [--no-rotary]` | `akd prior data --out DIR ...`
    | `akd prior train --data DIR --out MODEL_DIR --stage vae|transformer ...`."""
    actions = parser.add_subparsers(dest="prior_command", metavar="ACTION")
    actions.required = True
    check = actions.add_parser("check", help="validate a local diffusers CogVideoX folder and print its setup")
    check.add_argument("folder", type=Path)
    save = actions.add_parser("save-tiny", help="write a tiny random CogVideoX folder (tests, offline demos)")
    save.add_argument("folder", type=Path)
    save.add_argument("--seed", type=int, default=0)
    save.add_argument("--no-rotary", action="store_true", help="sin-cos positions (2B-style) instead of RoPE (5B)")
    data = actions.add_parser("data", help="render a captioned training video set of gait-library motions "
                                           "(distill's renderer and cameras); resumable")
    data.add_argument("--out", type=Path, required=True, help="data folder (clips/, index.json)")
    data.add_argument("--clips", type=int, default=100, help="number of clips (existing ones are kept)")
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--frames", type=int, default=9, help="frames per clip (8n+1 suits CogVideoX)")
    data.add_argument("--size", type=int, nargs=2, default=(64, 64), metavar=("W", "H"), help="pixels")
    data.add_argument("--n-gaussians", type=int, default=2000)
    data.add_argument("--backend", choices=("auto", "torch", "gsplat"), default="auto")
    data.add_argument("--orbit-fraction", type=float, default=0.7,
                      help="clips seen from a random orbit view; the rest from distill's follow camera "
                           "(0: every clip as `akd distill` looks at it by default)")
    data.add_argument("--blur-fraction", type=float, default=0.4,
                      help="clips rendered with distill's coarse-to-fine blur (0 to max 4 px)")
    data.add_argument("--heading-spread", type=float, default=180.0, metavar="DEG",
                      help="initial body headings drawn within +-DEG of +x, distill's start heading (180: any "
                           "direction; e.g. 15 with --orbit-fraction 0: the legs always from distill's side view)")
    data.add_argument("--min-stride-frames", type=float, default=4.0, metavar="N",
                      help="slow every gait (speed and cadence together) so that a stride spans at least N video "
                           "frames (default 4: a quarter cycle per frame; 0: the gait library's own cadence)")
    snap = actions.add_parser("snapshot", help="write the diffusers folder of a transformer training's latest "
                                               "checkpoint elsewhere (try a prior while it trains)")
    snap.add_argument("model", type=Path, help="MODEL_DIR of `akd prior train --stage transformer`")
    snap.add_argument("--out", type=Path, required=True, help="folder to write (replaced entry by entry)")
    tr = actions.add_parser("train", help="train a CogVideoX-architecture prior from scratch on `akd prior data` "
                                          "clips: --stage vae, then --stage transformer (checkpoints, --resume)")
    tr.add_argument("--data", type=Path, required=True, help="folder written by `akd prior data`")
    tr.add_argument("--out", type=Path, required=True,
                    help="model folder (vae/, then the complete diffusers folder; checkpoints/, losses, samples/)")
    tr.add_argument("--stage", choices=("vae", "transformer"), default="vae")
    tr.add_argument("--steps", type=int, default=None,
                    help="total steps of the stage, a resume continues to it (default vae 2000, transformer 10000)")
    tr.add_argument("--batch", type=int, default=None, help="clips per step (default vae 4, transformer 8)")
    tr.add_argument("--lr", type=float, default=None, help="AdamW learning rate (default vae 1e-3, transformer 5e-4)")
    tr.add_argument("--checkpoint-every", type=int, default=None, help="steps (default vae 50, transformer 100)")
    tr.add_argument("--val-every", type=int, default=None, help="steps (default vae 100, transformer 500)")
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--resume", action="store_true", help="continue from MODEL_DIR/checkpoints/<stage>.pt")
    vae = tr.add_argument_group("--stage vae")
    vae.add_argument("--crop", type=int, default=None, help="random square crops (pixels; 0: full frames; "
                                                            "default 32)")
    tfm = tr.add_argument_group("--stage transformer (needs MODEL_DIR/vae/ from --stage vae)")
    tfm.add_argument("--layers", type=int, default=None, help="transformer blocks (default 4)")
    tfm.add_argument("--heads", type=int, default=None, help="attention heads (default 4)")
    tfm.add_argument("--head-dim", type=int, default=None, help="dims per head, a multiple of 16 with RoPE "
                                                                "(default 32)")
    tfm.add_argument("--no-rotary", action="store_true", help="sin-cos positions (2B-style) instead of RoPE (5B)")
    tfm.add_argument("--text-len", type=int, default=None, help="prompt tokens (max_text_seq_length, default 16)")
    tfm.add_argument("--warmup", type=int, default=None, help="linear lr warmup steps (default 100)")
    tfm.add_argument("--cfg-dropout", type=float, default=None,
                     help="fraction of samples trained on the empty prompt (default 0.1)")
    tfm.add_argument("--contrast-weight", type=float, default=None,
                     help="weight of the contrastive term: each clip's caption must fit it (1 + margin) x better "
                          "than the same caption naming another gait (default 0: plain diffusion training)")
    tfm.add_argument("--contrast-margin", type=float, default=None, help="relative margin of that term (default 0.1)")
    tfm.add_argument("--contrast-partner", type=float, default=None,
                     help="fraction of those rival captions that name the gait most like the clip's (trot <-> pace, "
                          "bound <-> gallop, walk -> pace; default 0.5), the rest any other gait")
    tfm.add_argument("--init-from", default=None, metavar="FOLDER",
                     help="fine-tune: start from this model folder's transformer (e.g. models/akd-gaits-tiny; copy "
                          "its vae/ into --out first) instead of a random one")
    tfm.add_argument("--sample-every", type=int, default=None,
                     help="write sample videos every N steps (default 0: at the end only)")
    tfm.add_argument("--sample-steps", type=int, default=None, help="DDIM steps of the samples (default 50; 0: none)")


_STAGE_ARGS = {
    "vae": ("steps", "batch", "lr", "checkpoint_every", "val_every", "seed", "crop"),
    "transformer": ("steps", "batch", "lr", "checkpoint_every", "val_every", "seed", "layers", "heads", "head_dim",
                    "text_len", "warmup", "cfg_dropout", "sample_every", "sample_steps", "contrast_weight",
                    "contrast_margin", "contrast_partner", "init_from"),
}


def train_config_from_args(args: argparse.Namespace) -> Any:
    """The stage's config dataclass from `akd prior train` arguments (unset ones keep the dataclass default);
    an argument of the other stage is refused (ConfigError)."""
    from akd_core.prior.train import VAETrainConfig
    from akd_core.prior.train_transformer import TransformerTrainConfig

    mine = _STAGE_ARGS[args.stage]
    other = [f"--{k.replace('_', '-')}" for stage, keys in _STAGE_ARGS.items() if stage != args.stage
             for k in keys if k not in mine and getattr(args, k, None) is not None]
    if args.stage == "vae" and args.no_rotary:
        other.append("--no-rotary")
    if other:
        raise ConfigError(f"{', '.join(other)} do not apply to --stage {args.stage}")
    values = {k: getattr(args, k) for k in mine if getattr(args, k) is not None}
    if args.stage == "vae":
        return VAETrainConfig(**values)
    return TransformerTrainConfig(**values, rotary=not args.no_rotary)


def cli(args: argparse.Namespace) -> int:
    """Run `akd prior ...`; returns the exit code."""
    if args.prior_command == "check":
        print(json.dumps(describe_model_folder(args.folder), indent=2))
    elif args.prior_command == "data":
        from akd_core.prior.data import DataConfig, make_dataset

        config = DataConfig(clips=args.clips, seed=args.seed, frames=args.frames, width=args.size[0],
                            height=args.size[1], n_gaussians=args.n_gaussians, backend=args.backend,
                            orbit_fraction=args.orbit_fraction, blur_fraction=args.blur_fraction,
                            heading_spread_deg=args.heading_spread, min_stride_frames=args.min_stride_frames)
        summary = make_dataset(args.out, config)
        rate = f", {summary['clips_per_min']:.1f} clips/min" if summary["clips_per_min"] else ""
        print(f"{args.out}: {summary['clips']} clips ({summary['rendered']} rendered, {summary['skipped']} kept)"
              f"{rate}; index {args.out / 'index.json'}")
    elif args.prior_command == "train":
        from akd_core.prior.train import train

        summary = train(args.data, args.out, args.stage, train_config_from_args(args), resume=args.resume)
        if args.stage == "vae":
            print(f"wrote {summary['vae']} (step {summary['steps_done']}/{summary['steps']}, validation L1 "
                  f"{summary['initial_val_l1']} -> {summary['final_val_l1']}; losses in {args.out})")
        else:
            print(f"wrote the diffusers CogVideoX folder {args.out} (transformer step {summary['steps_done']}/"
                  f"{summary['steps']}, validation v-MSE {summary['initial_val_mse']} -> {summary['final_val_mse']}"
                  f", empty prompt {summary['final_val_mse_uncond']}; `akd prior check {args.out}`)")
    elif args.prior_command == "snapshot":
        from akd_core.prior.train_transformer import snapshot_folder

        snap = snapshot_folder(args.model, args.out)
        print(f"wrote {snap['folder']} (transformer step {snap['step']} of {args.model}; `--video-model "
              f"{snap['folder']}`)")
    else:
        folder = save_tiny_pretrained(args.folder, seed=args.seed, rotary=not args.no_rotary)
        print(f"wrote tiny CogVideoX model folder {folder}")
    return 0
