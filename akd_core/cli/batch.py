"""`akd batch SWEEP.yaml`: many runs, locally or on a Ray cluster, into one dataset."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from akd_core.batch import run_batch, summary_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep", type=Path,
                        help="sweep YAML (out, robots, prompts, seeds, source, duration, export, quality)")
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    parser.add_argument("--max-parallel", type=int, default=None, help="concurrent jobs (default 1)")
    parser.add_argument("--include-rejected", action="store_true",
                        help="put every finished run in the dataset whatever the quality gates say "
                             "(the summary marks the runs that fail them)")


def run(args: argparse.Namespace) -> int:
    summary = run_batch(args.sweep, args.backend, args.address, args.max_parallel,
                        include_rejected=args.include_rejected)
    print(summary_table(summary))
    if summary["exit_code"]:
        print("akd batch: no run made it into the dataset; see the reasons above and in summary.json "
              "(quality gates: sweep key 'quality', or --include-rejected)", file=sys.stderr)
    return summary["exit_code"]
