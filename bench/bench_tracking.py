"""Tracking benchmark on real 4 s forward trots (built-in quadruped and a1): Newton vs MuJoCo simulated seconds per
wall second (same robot, same dt, same targets), wall time of the full `akd track` computation (naive replay +
optimisation + final rollout), the naive-vs-optimised error table and the MuJoCo cross-check over 2 s.

    .venv/bin/python bench/bench_tracking.py [--robots quadruped,a1] [--duration 4] [--iterations N] [--device cpu]

Clips: tests/test_tracking.py GAIT_CLIPS ("<robot>-trot"). Defaults are those of `akd track`.
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
from tests.test_tracking import GAIT_CLIPS, gait_clip, gait_robot  # noqa: E402

ROWS = ("link_pos_err_m", "joint_rmse_rad", "root_pos_err_m", "foot_skate_mps", "penetration_m", "max_tilt_deg",
        "fell", "torque_saturation_frac", "max_torque_ratio")


def bench_robot(name: str, duration: float, iterations: int | None, device: str | None) -> None:
    _, pattern, speed, frequency = GAIT_CLIPS[f"{name}-trot"]
    robot = gait_robot(name)
    motion = gait_clip(robot, pattern, speed, frequency, duration)
    cfg = T.TrackingConfig(iterations=iterations, device=device)
    problem = T.build_problem(robot, motion, cfg)
    T.simulate(problem, problem.reference.joint_pos)  # warm-up: kernels + graph capture
    start = time.perf_counter()
    naive = T.simulate(problem, problem.reference.joint_pos)
    newton_wall = time.perf_counter() - start
    tracked = T.to_tracked(problem, naive, problem.reference.joint_pos)
    start = time.perf_counter()
    C.replay(robot, tracked, problem.sim.sim_dt, problem.physics.armature, problem.physics.contact_mu)
    mujoco_wall = time.perf_counter() - start
    print(f"\n## {name}: {robot.num_dofs} DoF, {robot.total_mass:.1f} kg, {pattern} {speed} m/s, {duration:g} s "
          f"({problem.reference.num_frames} frames), device {problem.sim.device}, sim dt {problem.sim.sim_dt} s")
    print(f"Newton Featherstone (graph-captured): {duration / newton_wall:8.2f} sim-s per wall-s")
    print(f"MuJoCo (position actuators)         : {duration / mujoco_wall:8.2f} sim-s per wall-s")
    print(f"MuJoCo / Newton speed ratio         : {newton_wall / mujoco_wall:8.1f}x")
    start = time.perf_counter()
    tracked, metrics = T.track_motion(robot, motion, cfg, progress=True)
    wall = time.perf_counter() - start
    print(f"full tracking ({metrics['windows']} windows, {metrics['iterations']} Adam iterations in all, "
          f"{metrics['early_stopped_windows']} early-stopped): {wall:.1f} s wall")
    cc = C.crosscheck(robot, tracked, metrics["sim_dt_s"], np.asarray(metrics["armature"]), metrics["contact"]["mu"])
    print("\n| metric | naive | optimised |\n|---|---|---|")
    for key in ROWS:
        print(f"| {key} | {metrics['naive_' + key]:.4g} | {metrics[key]:.4g} |")
    print(f"\nMuJoCo cross-check of optimised targets over {cc['seconds']:.1f} s: joint RMSE {cc['joint_rmse_rad']:.4f}"
          f" rad, max dev {cc['max_joint_dev_rad']:.4f} rad, root drift {cc['root_pos_drift_m']:.4f} m, "
          f"passed {cc['passed']}; open-loop torque replay RMSE {cc['torque_joint_rmse_rad']:.4f} rad")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--robots", default="quadruped,a1")
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--iterations", type=int, default=None, help="per window (default: akd track's)")
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    for name in args.robots.split(","):
        bench_robot(name.strip(), args.duration, args.iterations, args.device)


if __name__ == "__main__":
    main()
