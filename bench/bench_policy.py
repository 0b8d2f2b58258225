"""Behaviour-cloning figures: trot clips of the built-in quadruped tracked in Newton (naive PD replay, CPU), BC
training time, and 10 s closed-loop MuJoCo rollouts (upright time, distance ratio, speeds, joint RMSE).

    .venv/bin/python bench/bench_policy.py [--out DIR] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.learn import policy as P  # noqa: E402
from akd_core.model.load import load_robot  # noqa: E402
from tests.test_policy import tracked_trot_runs, write_hdf5_from_runs  # noqa: E402

CLIPS = [(0.6, 0.0), (0.8, 0.0), (0.8, 1.5), (1.0, 0.0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "akd_bench_policy")
    parser.add_argument("--seeds", default="0,1,2", help="training seeds")
    args = parser.parse_args()
    robot = load_robot("quadruped")
    start = time.perf_counter()
    runs = tracked_trot_runs(args.out, robot, CLIPS)
    print(f"data: {len(runs)} tracked trot clips in {time.perf_counter() - start:.1f} s (cached in {args.out})")
    write_hdf5_from_runs(args.out / "trots.hdf5", runs)
    dataset = P.load_dataset(args.out / "trots.hdf5")
    for seed in (int(s) for s in args.seeds.split(",")):
        policy, meta, metrics = P.train_bc(dataset, robot, seed=seed, progress=False)
        print(f"seed {seed}: train {metrics['train_seconds']:.1f} s, {metrics['num_samples']} samples, "
              f"target RMSE {metrics['target_rmse_rad']:.4f} rad")
        for demo in range(len(dataset.demos)):
            r, _ = P.evaluate_policy(policy, meta, robot, seconds=10.0, demo=demo, progress=False)
            print(f"  {r['reference_demo']}: upright {r['upright_seconds']:.1f} s, distance {r['distance_m']:.2f} m "
                  f"({r['distance_ratio']:.0%}), speed {r['forward_speed_mps']:.3f} vs {r['reference_speed_mps']:.3f} "
                  f"m/s, joint RMSE {r['joint_rmse_rad']:.3f} rad")


if __name__ == "__main__":
    main()
