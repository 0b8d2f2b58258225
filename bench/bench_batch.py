"""`akd batch` throughput: jobs per hour with the local process pool and with Ray, and Ray's overhead per job.

The same sweep (short gait clips, 1 tracking iteration, HDF5 export) runs once per backend in fresh output
folders; overhead per job = (Ray wall time - local wall time) / jobs at the same parallelism.
Usage: .venv/bin/python bench/bench_batch.py [--jobs 4] [--parallel 2] [--duration 0.6]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.batch import run_batch  # noqa: E402

PROMPTS = ["walking forward", "trotting forward", "walking slowly", "trotting quickly", "pacing forward",
           "walking and turning left", "trotting and turning right", "bounding forward"]


def write_sweep(folder: Path, backend: str, jobs: int, duration: float) -> Path:
    prompts = ", ".join(f'"{p}"' for p in PROMPTS[:jobs])
    path = folder / f"sweep_{backend}.yaml"
    path.write_text(f"out: runs_{backend}\nrobots: [quadruped]\nprompts: [{prompts}]\nseeds: [0]\n"
                    f"duration: {duration}\niterations: 1\nexport: [hdf5]\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=4, help=f"number of jobs (at most {len(PROMPTS)})")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--duration", type=float, default=0.6, help="clip length of each job, s")
    args = parser.parse_args()
    jobs = min(args.jobs, len(PROMPTS))
    rows = {}
    with tempfile.TemporaryDirectory(prefix="akd_bench_batch_") as tmp:
        for backend in ("local", "ray"):
            sweep = write_sweep(Path(tmp), backend, jobs, args.duration)
            start = time.perf_counter()
            summary = run_batch(sweep, backend=backend, max_parallel=args.parallel, progress=False)
            seconds = time.perf_counter() - start
            rows[backend] = (seconds, summary["succeeded"])
    print(f"akd batch: {jobs} jobs (quadruped, {args.duration} s clips, 1 tracking iteration), "
          f"{args.parallel} in parallel")
    print(f"{'backend':8s} {'wall s':>8s} {'ok':>4s} {'jobs/hour':>10s}")
    for backend, (seconds, ok) in rows.items():
        print(f"{backend:8s} {seconds:8.1f} {ok:4d} {3600 * jobs / seconds:10.0f}")
    overhead = (rows["ray"][0] - rows["local"][0]) / jobs
    print(f"Ray overhead per job (incl. ray.init/shutdown amortised): {overhead:+.1f} s")


if __name__ == "__main__":
    main()
