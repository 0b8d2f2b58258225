"""`akd library --robot ROBOT --out DIR`: a motion library over the velocity-command box (docs/library.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from akd_core.cli.gates import add_quality_arguments, gates_from_args
from akd_core.cli.options import (
    add_fast_argument,
    add_robot_options,
    add_yaw_rate_weight_argument,
    split_floats,
    split_names,
)
from akd_core.export import parse_formats
from akd_core.library import (
    CELL,
    DEFAULT_EXPORTS,
    LIBRARY_YAW_RATE_WEIGHT,
    LibraryConfig,
    library_table,
    parse_range,
    run_library,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_robot_options(parser)
    parser.add_argument("--out", required=True, type=Path,
                        help="library folder: commands/, runs/<clip>/, dataset/, coverage.json, coverage.png, "
                             "summary.json (re-running the same command resumes it)")
    parser.add_argument("--clips", type=int, default=40, help="number of clips (default 40)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each clip, s (default 10)")
    box = parser.add_argument_group(
        "command box (vx, vy m/s and yaw rate rad/s in the heading frame; write a negative LO with '=', e.g. "
        "--vx=-0.5,1.0)")
    box.add_argument("--vx", default=None, metavar="LO,HI",
                     help="forward speed range (default: -0.5 .. the robot's top speed of its gait, found by the gait "
                          "library within the joint limits)")
    box.add_argument("--vy", default=None, metavar="LO,HI", help="lateral speed range (default -0.3,0.3)")
    box.add_argument("--yaw", default=None, metavar="LO,HI", help="yaw-rate range (default -1.0,1.0)")
    box.add_argument("--gaits", default=None, metavar="G1,G2",
                     help="the gaits to use (default: the robot's default gait: trot for quadrupeds, walk for "
                          "bipeds); with several, each command uses the slowest gait that reaches its speed "
                          "(e.g. trot,walk: walk at the low speeds)")
    box.add_argument("--cell", default=",".join(f"{c:g}" for c in CELL), metavar="VX,VY,YAW",
                     help=f"grid cell size (default {','.join(f'{c:g}' for c in CELL)})")
    parser.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="local: a process pool; ray: one Ray task per clip (DIR on a shared filesystem)")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    parser.add_argument("--max-parallel", type=int, default=1, help="clips run at once (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="clip n runs with seed SEED + n")
    parser.add_argument("--export", default=",".join(DEFAULT_EXPORTS),
                        help=f"dataset formats under DIR/dataset (default {','.join(DEFAULT_EXPORTS)}; "
                             "any of `akd export`'s)")
    parser.add_argument("--fps", type=float, default=50.0, help="reference frame rate = control rate (default 50)")
    parser.add_argument("--feet", default=None, help="comma-separated foot link names (default: detected)")
    parser.add_argument("--iterations", type=int, default=None, help="tracking optimisation iterations")
    add_fast_argument(parser)
    add_yaw_rate_weight_argument(parser, LIBRARY_YAW_RATE_WEIGHT)
    parser.add_argument("--device", default=None, help="physics device: cpu or cuda (default: cuda if available)")
    parser.add_argument("--plan-only", action="store_true",
                        help="write the plan (DIR/plan.json, DIR/commands/*.csv) and stop: nothing is run")
    add_quality_arguments(parser)


def config_from_args(args: argparse.Namespace) -> LibraryConfig:
    """The library's options from the command line (ConfigError naming the option on a bad value)."""
    cell = parse_cell(args.cell)
    return LibraryConfig(
        robot=args.robot, out=args.out, clips=args.clips, seconds=args.seconds,
        vx=parse_range(args.vx, "--vx"), vy=parse_range(args.vy, "--vy"), yaw_rate=parse_range(args.yaw, "--yaw"),
        gaits=split_names(args.gaits), cell=cell, backend=args.backend, address=args.address,
        max_parallel=args.max_parallel, seed=args.seed, fps=args.fps, package_paths=args.package_path,
        feet=split_names(args.feet), iterations=args.iterations, fast=args.fast, device=args.device,
        yaw_rate_weight=args.yaw_rate_weight,
        exports=tuple(parse_formats(args.export)), quality=gates_from_args(args),
        include_rejected=args.include_rejected, plan_only=args.plan_only)


def parse_cell(text: str) -> tuple[float, float, float]:
    from akd_core.io.errors import ConfigError

    values = split_floats(text, 3)
    if values is None or not all(v > 0 for v in values):
        raise ConfigError(f"--cell {text!r}: give three positive sizes VX,VY,YAW (m/s, m/s, rad/s), e.g. "
                          f"--cell {','.join(f'{c:g}' for c in CELL)}")
    return values  # type: ignore[return-value]


def run(args: argparse.Namespace) -> int:
    summary = run_library(config_from_args(args))
    if "library" not in summary:  # --plan-only
        print(f"akd library: planned {summary['clips']} clips: {summary['plan']}")
        return 0
    print(library_table(summary))
    if summary["exit_code"]:
        print("akd library: no clip made it into the dataset; see the reasons above and in summary.json",
              file=sys.stderr)
    return summary["exit_code"]
