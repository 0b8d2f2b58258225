"""`akd preview RUN`: mesh preview video, reference | tracked side by side -> RUN/preview.mp4."""

from __future__ import annotations

import argparse
from pathlib import Path

from akd_core.io.rundir import PREVIEW, RunDir
from akd_core.render.preview import stage_preview


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `akd preview RUN`."""
    parser.add_argument("run", type=Path, help="run directory (made by `akd gait` / `akd run`)")
    parser.add_argument("--width", type=int, default=320, help="width of each panel in pixels (default 320)")
    parser.add_argument("--height", type=int, default=240, help="height in pixels (default 240)")
    parser.add_argument("--fps", type=float, default=None, help="video frame rate (default: min(30, motion rate))")
    parser.add_argument("--naive", action="store_true", help="add a third panel: the naive PD replay baseline")
    parser.add_argument("-o", "--output", type=Path, default=None, help="output file (default RUN/preview.mp4)")


def run(args: argparse.Namespace) -> int:
    metrics = stage_preview(RunDir(args.run), width=args.width, height=args.height, fps=args.fps, naive=args.naive,
                            output=args.output)
    path = args.output if args.output is not None else RunDir(args.run).file(PREVIEW)
    print(f"wrote {path} ({metrics['frames']} frames, {metrics['panels']} panels, "
          f"{metrics['render_s_per_frame'] * 1e3:.0f} ms/frame)")
    return 0
