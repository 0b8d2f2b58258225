"""`akd run`: every stage in order on one run directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from akd_core.cli.options import (
    add_fast_argument,
    add_integrator_argument,
    add_motion_arguments,
    add_robot_options,
    add_verdict_arguments,
    motion_prompt,
)
from akd_core.pipeline import DEFAULT_EXPORTS, SOURCES, PipelineConfig, run_pipeline
from akd_core.sds.distill import INITS, PARAMETRISATIONS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_robot_options(parser)
    parser.add_argument("--prompt", default=None,
                        help="text describing the motion, e.g. 'a dog trotting forward'; a sequence makes a "
                             "motion program: "
                             "'a dog walks, then trots, then stops' "
                             "(required unless --commands is given)")
    parser.add_argument("--out", required=True, type=Path, help="run directory (created)")
    parser.add_argument("--source", choices=SOURCES, default="gait",
                        help="gait: procedural gait library (CPU, seconds); sds: SDS distillation from a video prior")
    add_motion_arguments(parser)
    parser.add_argument("--fps", type=float, default=50.0, help="reference frame rate (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--feet", default=None, help="comma-separated foot link names (default: detected)")
    parser.add_argument("--iterations", type=int, default=None, help="tracking optimisation iterations")
    add_fast_argument(parser)
    add_integrator_argument(parser)
    add_verdict_arguments(parser)
    parser.add_argument("--device", default=None, help="physics device: cpu or cuda (default: cuda if available)")
    parser.add_argument("--export", default=",".join(DEFAULT_EXPORTS),
                        help="comma-separated export formats (hdf5,lerobot,amp,isaaclab-amp,rosbag2 | all | none)")
    parser.add_argument("--force", action="store_true", help="re-run stages that are already done")
    parser.add_argument("--prior", default="cogvideox", help="sds source: cogvideox | tiny")
    parser.add_argument("--video-model", default=None, help="sds source: local diffusers CogVideoX folder (default: "
                                                            "$AKD_VIDEO_MODEL, else the shipped models/akd-gaits-tiny)")
    parser.add_argument("--distill-iterations", type=int, default=None)
    parser.add_argument("--param", choices=PARAMETRISATIONS, default=None,
                        help="sds source: what SDS optimises (akd distill --param; phase: the legs' phases of a "
                             "gait-library stride, continued to --duration). Default: the model folder's akd.json "
                             "(the shipped prior: phase), else frames")
    parser.add_argument("--init", choices=INITS, default=None,
                        help="sds source: the clip SDS starts from (akd distill --init; default constant: a neutral "
                             "start that holds no gait, so the gait comes from the prior)")


def run(args: argparse.Namespace) -> int:
    exports: tuple[str, ...]
    if args.export in ("", "none"):
        exports = ()
    elif args.export == "all":
        exports = ("hdf5", "lerobot", "amp", "isaaclab-amp", "rosbag2")
    else:
        exports = tuple(x.strip() for x in args.export.split(",") if x.strip())
    cfg = PipelineConfig(
        robot=args.robot, prompt=motion_prompt(args), commands=args.commands, terrain=args.terrain, out=args.out,
        source=args.source, duration=args.duration, fps=args.fps,
        seed=args.seed, feet=args.feet.split(",") if args.feet else None, package_paths=args.package_path,
        track_iterations=args.iterations, track_fast=args.fast, track_integrator=args.integrator,
        device=args.device, exports=exports, force=args.force,
        prior=args.prior, video_model=args.video_model, distill_iterations=args.distill_iterations,
        distill_param=args.param, distill_init=args.init, link_err_limit_m=args.link_err_limit,
        keep_failed=args.keep_failed)
    run_pipeline(cfg)
    return 0
