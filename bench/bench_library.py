"""`akd library` at scale: coverage of the velocity-command box, clips kept, time per clip, per robot.

Runs ``akd library --robot ROBOT --out OUT/<robot> --clips N --seconds S`` (the CLI, as a user would) for the
built-in quadruped and the a1 of example-robot-data, reads each library's summary.json and coverage.json, prints
one row per robot (and a markdown row for docs/benchmarks.md, dated with the commit and the machine), and copies
each coverage heatmap to ``--images`` (docs/images/library_coverage_<robot>.png).

The full setting (40 clips of 10 s per robot) takes about an hour on 2 CPU cores; ``--clips 2 --seconds 5`` shows
it works in minutes. A library resumes: re-running the bench with the same ``--out`` continues where it stopped.

Usage: .venv/bin/python bench/bench_library.py [--clips 40] [--seconds 10] [--robots quadruped,a1]
       [--out runs/bench_library] [--max-parallel 1] [--fast] [--images docs/images | --no-images]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def robot_spec(name: str) -> str:
    """A built-in name, or a1 from example-robot-data (its URDF in the environment's site-packages)."""
    if name == "a1":
        urdf = (Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
                / "a1_description" / "urdf" / "a1.urdf")
        if not urdf.is_file():
            sys.exit(f"bench_library: {urdf} is missing; pip install example-robot-data (the test extra)")
        return str(urdf)
    return name


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + (" (with uncommitted changes)" if dirty else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--robots", default="quadruped,a1", help="comma-separated: quadruped, a1, or any ROBOT")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_library")
    parser.add_argument("--max-parallel", type=int, default=1)
    parser.add_argument("--fast", action="store_true", help="akd library --fast (the MPC preset)")
    parser.add_argument("--images", type=Path, default=ROOT / "docs" / "images",
                        help="where the coverage heatmaps are copied (library_coverage_<robot>.png)")
    parser.add_argument("--no-images", action="store_true", help="copy no heatmap")
    args = parser.parse_args()
    akd = Path(sys.executable).with_name("akd")
    rows = []
    for name in [r.strip() for r in args.robots.split(",") if r.strip()]:
        label = Path(name).stem if name.endswith((".urdf", ".xml")) else name
        out = args.out / f"{label}_{args.clips}x{args.seconds:g}s"
        command = [str(akd), "library", "--robot", robot_spec(name), "--out", str(out), "--clips", str(args.clips),
                   "--seconds", f"{args.seconds:g}", "--max-parallel", str(args.max_parallel)] + \
            (["--fast"] if args.fast else [])
        print("$ " + " ".join(command), flush=True)
        start = time.perf_counter()
        code = subprocess.run(command, cwd=ROOT).returncode
        wall = time.perf_counter() - start
        summary_path = out / "summary.json"
        if not summary_path.is_file():
            print(f"bench_library: {label}: akd library exited {code} without a summary", file=sys.stderr)
            rows.append({"robot": label, "exit": code})
            continue
        summary = json.loads(summary_path.read_text())
        library = summary.get("library", {})
        coverage = json.loads((out / "coverage.json").read_text())
        if not args.no_images and (out / "coverage.png").is_file():
            args.images.mkdir(parents=True, exist_ok=True)
            shutil.copy2(out / "coverage.png", args.images / f"library_coverage_{label}.png")
        rows.append({"robot": label, "exit": code, "clips": library.get("clips"), "kept": library.get("clips_kept"),
                     "failed": library.get("clips_failed"), "failed_tracking": library.get("clips_failed_tracking"),
                     "covered": coverage["covered_cells"], "feasible": coverage["feasible_cells"],
                     "fraction": coverage["covered_fraction"], "box": coverage["box"],
                     "per_clip": library.get("compute_seconds_per_clip"), "wall": wall,
                     "seconds": coverage["seconds_total"]})
    print()
    print(f"akd library: {args.clips} clips of {args.seconds:g} s per robot, {args.max_parallel} in parallel"
          + (", --fast" if args.fast else ""))
    print(f"{'robot':12s} {'kept':>9s} {'failed':>7s} {'covered cells':>14s} {'fraction':>9s} {'s/clip':>7s} "
          f"{'wall s':>7s}  box")
    for r in rows:
        if "clips" not in r:
            print(f"{r['robot']:12s} exit {r['exit']}, no summary")
            continue
        box = r["box"]
        print(f"{r['robot']:12s} {r['kept']:>4d}/{r['clips']:<4d} {r['failed'] + r['failed_tracking']:>7d} "
              f"{r['covered']:>6d}/{r['feasible']:<7d} {r['fraction']:>9.2f} {r['per_clip'] or 0:>7.1f} "
              f"{r['wall']:>7.0f}  vx {box['vx_mps']}, vy {box['vy_mps']}, yaw {box['yaw_rate_radps']}")
    print()
    print(f"markdown ({datetime.date.today().isoformat()}, commit {git_commit()}, {os.cpu_count()} vCPUs, "
          f"{cpu_model()}):")
    print("| robot | clips x s | kept | covered cells (>= 1 s) | s of stage time per clip |")
    print("|---|---|---|---|---|")
    for r in rows:
        if "clips" in r:
            print(f"| {r['robot']} | {r['clips']} x {args.seconds:g} | {r['kept']} | {r['covered']} of "
                  f"{r['feasible']} ({100 * r['fraction']:.0f} %) | {r['per_clip'] or 0:.0f} |")
    return 0 if all(r.get("exit") == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
