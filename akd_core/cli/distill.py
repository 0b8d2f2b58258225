"""`akd distill`: SDS distillation of a motion from a video diffusion prior -> RUN/reference.npz.

Defaults: DistillConfig's (the paper's per-frame SDS with the settings that pass the oracle's known answer), then
the model folder's akd.json (the shipped prior: --param phase and its training view), then these flags."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from akd_core.cli.options import add_robot_options
from akd_core.cli.prior_options import add_prior_arguments, prior_options_from_args
from akd_core.io.errors import RunDirError
from akd_core.io.rundir import REFERENCE, RunDir
from akd_core.sds.distill import (
    CAMERA_MODES,
    CHECKPOINT,
    INITS,
    PARAMETRISATIONS,
    PHASE_SEARCH_SCORES,
    SMOOTH_NORMS,
    stage_distill,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:

    add_robot_options(parser, required=False)
    parser.add_argument("--prompt", default=None, help="text describing the motion")
    parser.add_argument("--out", required=True, type=Path, help="run directory")
    add_prior_arguments(parser)
    # with no --video-model, --prior cogvideox loads $AKD_VIDEO_MODEL or the shipped models/akd-gaits-tiny
    parser.set_defaults(prior="cogvideox")
    parser.add_argument("--target", type=Path, default=None, help="oracle prior: RUN0 whose reference.npz to recover")
    parser.add_argument("--oracle-space", choices=("latent", "pixels"), default="latent",
                        help="oracle prior: compare through the VAE (default) or on the rendered pixels")
    parser.add_argument("--iterations", type=int, default=None,
                        help="default: the model folder's akd.json, else 10000 on CUDA (paper), 400 on CPU")
    parser.add_argument("--init", choices=INITS, default=None,
                        help="initial clip: constant (default: the rest pose gliding forward, the paper's; with "
                             "--param phase the legs cycling at random phases), standing (the oracle's default: "
                             "standing on the target's root path), gait (the gait library's clip of the prompt, "
                             "which already holds the prompt's pattern)")
    parser.add_argument("--fps", type=float, default=50.0, help="frame rate of the written reference.npz")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", action="store_true", help="continue from RUN/distill/checkpoint.pt")
    parser.add_argument("--lambda-smooth", type=float, default=None,
                        help="weight of the mean |temporal Laplacian| (default 0; the paper's 2e5 holds a gait's "
                             "legs still at 8 fps and fails the oracle's known answer)")
    parser.add_argument("--lambda-ground", type=float, default=None,
                        help="weight of the depth below the ground (default 1e4; the paper's: 1e7)")
    parser.add_argument("--lambda-float", type=float, default=None,
                        help="weight of the lowest point's height above the ground (default 1e6; 0: the paper's "
                             "objective, which lets a weak prior lift the body off the ground)")
    parser.add_argument("--lambda-skate", type=float, default=None,
                        help="weight of the feet's sliding speed while on the ground (m/s; default 0, the paper's "
                             "objective, which lets the feet glide under a moving body; 3e5 stops that)")
    parser.add_argument("--smooth-norm", choices=SMOOTH_NORMS, default=None,
                        help="l1 (default, the paper's): mean |temporal Laplacian|; l2: its mean square, which does "
                             "not hold small swings still (pair with a --lambda-smooth of its own scale)")
    parser.add_argument("--init-noise", type=float, default=None, metavar="RAD",
                        help="std of random noise added to the initial clip's joint angles (default 0): breaks the "
                             "symmetry of a still start, where every phase of a gait pulls alike")
    parser.add_argument("--param", choices=PARAMETRISATIONS, default=None,
                        help="what SDS optimises: frames (the paper's per-frame joint angles) or phase (one "
                             "gait-library leg cycle repeated by every leg with its own phase, random at the start "
                             "unless --init gait: the prior picks the footfall pattern). Default: what the model "
                             "folder's akd.json declares (the shipped prior: phase), else frames")
    parser.add_argument("--lr-phase", type=float, default=None,
                        help="--param phase: cycles per step (default 0.01; the shipped prior's akd.json: 0.004)")
    parser.add_argument("--lr-cycle", type=float, default=None,
                        help="--param phase: step of the cycle's shape, the body joints and the root (default 0: SDS "
                             "moves the phases, the stride stays the gait library's)")
    parser.add_argument("--phase-search-grid", type=int, default=None,
                        help="--param phase: before the gradient steps, every combination of the legs' relative "
                             "phases on a grid of this many per cycle, then finer sweeps around the best (default 2: "
                             "the 8 half-cycle patterns of a quadruped; 0: no search)")
    parser.add_argument("--phase-search-refine", type=int, nargs="*", default=None, metavar="N",
                        help="--param phase: after the grid, rounds of one-leg moves on these finer grids (default 4: "
                             "quarter cycles, the four-beat gaits; none: the grid's best)")
    parser.add_argument("--phase-search-score", choices=PHASE_SEARCH_SCORES, default=None,
                        help="--param phase: what the search minimises (default classifier: the prompt's denoising "
                             "error over the unconditional one; contrast, the shipped prior's: over its mean under "
                             "the prompt told with each gait word; conditional; guided, SDS's own)")
    parser.add_argument("--cycle-harmonics", type=int, default=None,
                        help="--param phase: harmonics of the leg cycle (default 3)")
    parser.add_argument("--n-gaussians", type=int, default=None, help="Gaussians of the robot's asset (default 2000)")
    parser.add_argument("--width", type=int, default=None, help="render width (default: the prior's)")
    parser.add_argument("--height", type=int, default=None, help="render height (default: the prior's)")
    parser.add_argument("--backend", choices=("auto", "torch", "gsplat"), default="auto")
    parser.add_argument("--camera", choices=CAMERA_MODES, default=None,
                        help="orbit (default): a random direction every iteration (sees every leg); follow (the "
                             "paper's; the shipped prior's akd.json): one direction, re-framed every iteration; fixed: "
                             "framed once")
    parser.add_argument("--camera-margin", type=float, default=None,
                        help="framing: bounding-sphere radius x margin fills the view (default 0.9; smaller = closer)")
    parser.add_argument("--blur-px", type=float, default=None,
                        help="coarse to fine: blur renders by this many pixels, shrinking to 0 at 60%% of the run "
                             "(default 4)")
    parser.add_argument("--lr-final", type=float, default=None,
                        help="learning-rate multiplier reached at the end (linear decay over the last 40%%; "
                             "default 0.1)")
    parser.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                        help="write RUN/distill/checkpoint.pt every N iterations (default 25), and at the end; an "
                             "interrupted run resumes from the last one (--resume)")


# DistillConfig fields that `akd distill` options of the same name (dashes for underscores) override
CONFIG_OPTIONS = ("lambda_smooth", "smooth_norm", "lambda_ground", "lambda_float", "lambda_skate", "init_noise",
                  "param", "lr_phase", "lr_cycle", "phase_search_grid", "phase_search_refine", "phase_search_score",
                  "cycle_harmonics",
                  "n_gaussians", "width", "height", "backend", "camera", "camera_margin", "blur_px", "lr_final",
                  "checkpoint_every")


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """{field: value} for the CONFIG_OPTIONS ``args`` sets (present and not None)."""
    overrides = {k: getattr(args, k) for k in CONFIG_OPTIONS if getattr(args, k, None) is not None}
    if "phase_search_refine" in overrides:
        overrides["phase_search_refine"] = tuple(overrides["phase_search_refine"])
    return overrides


def run(args: argparse.Namespace) -> int:
    run = RunDir(args.out, create=True)
    if args.resume and not run.file("distill").joinpath(CHECKPOINT).exists():
        raise RunDirError(f"--resume: no checkpoint in {run.file('distill')}; start without --resume")
    overrides = config_overrides(args)
    metrics = stage_distill(run, robot_spec=args.robot, prompt=args.prompt, prior=args.prior,
                            video_model=args.video_model, target=args.target, iterations=args.iterations,
                            init=args.init, fps=args.fps, seed=args.seed, package_paths=args.package_path,
                            resume=args.resume,
                            prior_options=prior_options_from_args(args) if args.prior == "cogvideox" else None,
                            config_overrides=overrides, oracle_space=args.oracle_space)
    print(f"wrote {run.file(REFERENCE)} (distilled; videos and checkpoints in {run.file('distill')})")
    for key, value in metrics.items():
        print(f"  {key}: {value}")
    return 0
