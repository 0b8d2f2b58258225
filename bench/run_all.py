"""Run every benchmark in bench/ and print one report of their figures.

Each bench runs as its own process (so one's memory high-water mark doesn't leak into another's), its
output is collected, and a table lists what ran, how long it took and whether it succeeded, followed by
every bench's own figures. ``--quick`` passes each bench its small setting (minutes instead of ~half
an hour on 2 CPU cores).

Usage: .venv/bin/python bench/run_all.py [--quick] [--only fk,render,...] [--out report.txt]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> (script, full arguments, quick arguments)
BENCHES: dict[str, tuple[str, list[str], list[str]]] = {
    "fk": ("bench_fk.py", [], ["--frames", "500", "--repeats", "3"]),
    "render": ("bench_render.py", [], ["--quick"]),
    "sds": ("bench_sds.py", [], ["--iterations", "2", "--gaussians", "2000"]),
    "tracking": ("bench_tracking.py", [], ["--clips", "a1-trot", "--duration", "1.0", "--worlds", "2"]),
    "ros": ("bench_ros.py", [], ["--rates", "100,500", "--duration", "1.0"]),
    "policy": ("bench_policy.py", [], ["--episodes", "2", "--seconds", "5", "--skip", "dagger,bc+ppo,dagger+ppo,mpc"]),
    "batch": ("bench_batch.py", [], ["--jobs", "2"]),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small settings for every bench")
    parser.add_argument("--only", default=None, help=f"comma-separated subset of {','.join(BENCHES)}")
    parser.add_argument("--out", type=Path, default=None, help="also write the report to this file")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",")] if args.only else list(BENCHES)
    unknown = sorted(set(names) - set(BENCHES))
    if unknown:
        parser.error(f"unknown benches {unknown}; choose from {sorted(BENCHES)}")
    rows, outputs = [], []
    for name in names:
        script, full, quick = BENCHES[name]
        cmd = [sys.executable, str(HERE / script), *(quick if args.quick else full)]
        print(f"running {name}: {' '.join(cmd[1:])}", flush=True)
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        ok = proc.returncode == 0
        rows.append((name, "ok" if ok else f"FAILED ({proc.returncode})", seconds))
        text = proc.stdout.strip() if ok else (proc.stdout + proc.stderr).strip()[-3000:]
        outputs.append(f"== {name} ({script}) ==\n{text}\n")
    lines = ["", f"{'bench':10s} {'status':14s} {'wall s':>8s}"]
    lines += [f"{name:10s} {status:14s} {seconds:8.1f}" for name, status, seconds in rows]
    report = "\n".join(lines) + "\n\n" + "\n".join(outputs)
    print(report)
    if args.out:
        args.out.write_text(report)
    return 0 if all(status == "ok" for _, status, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
