"""`akd export RUN [RUN...]`: datasets, bags and motion files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from akd_core.cli.gates import add_quality_arguments, gates_from_args
from akd_core.export import FORMATS, export_gated, stage_export, summary_path
from akd_core.export.quality import quality_table
from akd_core.io.fileio import write_json_atomic
from akd_core.io.rundir import RunDir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run directories (several -> one dataset)")
    parser.add_argument("--format", "-f", default="hdf5", dest="formats",
                        help=f"comma-separated: {', '.join(FORMATS)}, or all (default hdf5)")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="dataset file/folder (appended to if it exists), or output folder of per-run formats; "
                             "default RUN/export/")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing -o dataset instead of appending")
    parser.add_argument("--source", choices=("auto", "tracked", "reference"), default="auto",
                        help="clip of the per-run exports (amp, rosbag2, motion files; default: tracked if present)")
    parser.add_argument("--loop-mode", choices=("Wrap", "Clamp"), default="Wrap",
                        help="AMP .txt LoopMode and MimicKit loop_mode")
    parser.add_argument("--target-model", type=Path, default=None, metavar="FILE",
                        help="motion files: the robot model the trainer loads (MJCF .xml; the URDF for beyondmimic), "
                             "whose body and joint order they follow (default: the run's own robot)")
    parser.add_argument("--summary", type=Path, default=None,
                        help="several runs: where to write the JSON summary of included/excluded runs "
                             "(default: <-o PATH>.summary.json)")
    add_quality_arguments(parser)


def run(args: argparse.Namespace) -> int:

    gates = gates_from_args(args)
    options: dict[str, Any] = {"source": args.source, "loop_mode": args.loop_mode}
    if args.target_model is not None:
        options["target_model"] = args.target_model
    if args.overwrite:
        options["append"] = False
    if len(args.runs) == 1:
        metrics = stage_export(RunDir(args.runs[0]), args.formats, args.output, gates=gates,
                               include_rejected=args.include_rejected, **options)
        verdict = metrics.get("quality")
        if verdict and not verdict["passed"]:
            print(f"WARNING: --include-rejected: exported {args.runs[0]} although it fails the quality gates: "
                  f"{'; '.join(verdict['reasons'])}", file=sys.stderr)
        for path in (p for files in metrics["files"].values() for p in files):
            print(path)
        return 0
    report = export_gated(args.runs, args.formats, args.output, gates=gates, include_rejected=args.include_rejected,
                          **options)
    print(quality_table(report["runs"]))
    print(f"{report['included']} of {len(report['runs'])} runs exported, {report['excluded']} excluded "
          f"({gates.describe()})")
    for path in (p for files in report["written"].values() for p in files):
        print(path)
    target = summary_path(args.output, args.summary)
    if target is not None:
        write_json_atomic(target, report)
        print(f"summary: {target}")
    if not report["included"]:
        print("akd export: no run passed the quality gates, nothing was exported; see the reasons above "
              "(or pass --include-rejected)", file=sys.stderr)
        return 1
    return 0
