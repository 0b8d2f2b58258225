"""`akd render RUN`: Gaussian-splat render of the run's motion -> RUN/render.mp4."""

from __future__ import annotations

import argparse
from pathlib import Path

from akd_core.io.rundir import RunDir
from akd_core.render.run_video import DEFAULT_FPS, DEFAULT_GAUSSIANS, stage_render


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `akd render RUN` (docs/architecture.md, "Outputs and the commands are a contract")."""
    parser.add_argument("run", type=Path, help="run directory with reference.npz (from `akd gait` / `akd run`)")
    parser.add_argument("--width", type=int, default=256, help="panel width in pixels (default 256)")
    parser.add_argument("--height", type=int, default=256, help="panel height in pixels (default 256)")
    parser.add_argument("--backend", choices=("auto", "torch", "gsplat"), default="auto",
                        help="rasterizer: gsplat (CUDA) or torch (CPU); auto picks gsplat when CUDA is present")
    parser.add_argument("--n-gaussians", type=int, default=DEFAULT_GAUSSIANS,
                        help=f"Gaussians in the asset (default {DEFAULT_GAUSSIANS})")
    parser.add_argument("--fps", type=float, default=None, help=f"video frame rate (default min({DEFAULT_FPS:g}, "
                        "the reference's rate))")
    parser.add_argument("--seed", type=int, default=0, help="seed of the Gaussian surface sampling")


def run(args: argparse.Namespace) -> int:
    """`akd render RUN ...`: run the stage and print where the video is."""
    run = RunDir(args.run)
    metrics = stage_render(run, width=args.width, height=args.height, backend=args.backend,
                           n_gaussians=args.n_gaussians, fps=args.fps, seed=args.seed)
    print(f"render: {metrics['frames']} frames x {metrics['panels']} panel(s), "
          f"{metrics['render_s_per_frame']:.3f} s per panel frame -> {metrics['video']} "
          f"(asset: {metrics['gaussians_ply']})")
    return 0
