"""`akd prior ...`: check a CogVideoX folder, write a tiny one, render training data, train, snapshot."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from akd_core.io.errors import ConfigError
from akd_core.sds.prior import describe_model_folder, save_tiny_pretrained
from akd_core.sds.prior.data import DataConfig, make_dataset
from akd_core.sds.prior.train import VAETrainConfig, train
from akd_core.sds.prior.train_transformer import TransformerTrainConfig, snapshot_folder


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


def run(args: argparse.Namespace) -> int:
    """Run `akd prior ...`; returns the exit code."""
    if args.prior_command == "check":
        print(json.dumps(describe_model_folder(args.folder), indent=2))
    elif args.prior_command == "data":
        config = DataConfig(clips=args.clips, seed=args.seed, frames=args.frames, width=args.size[0],
                            height=args.size[1], n_gaussians=args.n_gaussians, backend=args.backend,
                            orbit_fraction=args.orbit_fraction, blur_fraction=args.blur_fraction,
                            heading_spread_deg=args.heading_spread, min_stride_frames=args.min_stride_frames)
        summary = make_dataset(args.out, config)
        rate = f", {summary['clips_per_min']:.1f} clips/min" if summary["clips_per_min"] else ""
        print(f"{args.out}: {summary['clips']} clips ({summary['rendered']} rendered, {summary['skipped']} kept)"
              f"{rate}; index {args.out / 'index.json'}")
    elif args.prior_command == "train":
        summary = train(args.data, args.out, args.stage, train_config_from_args(args), resume=args.resume)
        if args.stage == "vae":
            print(f"wrote {summary['vae']} (step {summary['steps_done']}/{summary['steps']}, validation L1 "
                  f"{summary['initial_val_l1']} -> {summary['final_val_l1']}; losses in {args.out})")
        else:
            print(f"wrote the diffusers CogVideoX folder {args.out} (transformer step {summary['steps_done']}/"
                  f"{summary['steps']}, validation v-MSE {summary['initial_val_mse']} -> {summary['final_val_mse']}"
                  f", empty prompt {summary['final_val_mse_uncond']}; `akd prior check {args.out}`)")
    elif args.prior_command == "snapshot":
        snap = snapshot_folder(args.model, args.out)
        print(f"wrote {snap['folder']} (transformer step {snap['step']} of {args.model}; `--video-model "
              f"{snap['folder']}`)")
    else:
        folder = save_tiny_pretrained(args.folder, seed=args.seed, rotary=not args.no_rotary)
        print(f"wrote tiny CogVideoX model folder {folder}")
    return 0
