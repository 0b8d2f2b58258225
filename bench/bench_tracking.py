"""Tracking benchmark: Newton vs MuJoCo simulated seconds per wall second (same robot, same dt), wall time of a full
tracking optimisation of a 4 s trot, and the naive-vs-optimised error table.

    .venv/bin/python bench/bench_tracking.py [--duration 4] [--iterations 20] [--device cpu]

Reference clip: the a1 trot-in-place of tests/test_tracking.py (until akd_core.gait lands).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core import crosscheck as C  # noqa: E402
from akd_core import tracking as T  # noqa: E402
from akd_core.robot import load_urdf  # noqa: E402
from tests.conftest import example_robot_urdf  # noqa: E402
from tests.test_tracking import trot_in_place  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    robot = load_urdf(example_robot_urdf("a1"))
    motion = trot_in_place(robot, duration=args.duration)
    cfg = T.TrackingConfig(iterations=args.iterations, device=args.device)
    problem = T.build_problem(robot, motion, cfg)
    T.simulate(problem, problem.reference.joint_pos)  # warm-up: kernels + graph capture
    start = time.perf_counter()
    naive = T.simulate(problem, problem.reference.joint_pos)
    newton_wall = time.perf_counter() - start
    tracked = T.to_tracked(problem, naive, problem.reference.joint_pos)
    start = time.perf_counter()
    C.replay(robot, tracked, problem.sim.sim_dt, problem.physics.armature)
    mujoco_wall = time.perf_counter() - start
    print(f"device {problem.sim.device}, sim dt {problem.sim.sim_dt} s, {problem.sim.steps} substeps per control step")
    print(f"Newton Featherstone (graph-captured): {args.duration / newton_wall:8.2f} sim-s per wall-s")
    print(f"MuJoCo (position actuators)         : {args.duration / mujoco_wall:8.2f} sim-s per wall-s")
    print(f"MuJoCo / Newton speed ratio         : {newton_wall / mujoco_wall:8.1f}x")
    start = time.perf_counter()
    tracked, metrics = T.track_motion(robot, motion, cfg, progress=True)
    wall = time.perf_counter() - start
    print(f"full tracking ({metrics['iterations']} iterations, early stop {metrics['early_stopped']}) of a "
          f"{args.duration:g} s trot: {wall:.1f} s wall")
    cc = C.crosscheck(robot, tracked, metrics["sim_dt_s"], np.asarray(metrics["armature"]))
    print("\n| metric | naive | optimised |\n|---|---|---|")
    for key in ("link_pos_err_m", "joint_rmse_rad", "root_pos_err_m", "foot_skate_mps", "penetration_m",
                "max_tilt_deg", "fell", "torque_saturation_frac"):
        print(f"| {key} | {metrics['naive_' + key]:.4g} | {metrics[key]:.4g} |")
    print(f"\nMuJoCo cross-check of optimised targets over {cc['seconds']:.1f} s: joint RMSE {cc['joint_rmse_rad']:.4f}"
          f" rad, max dev {cc['max_joint_dev_rad']:.4f} rad, root drift {cc['root_pos_drift_m']:.4f} m, "
          f"passed {cc['passed']}")


if __name__ == "__main__":
    main()
