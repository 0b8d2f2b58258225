"""`akd crosscheck RUN`: the other engine replays the tracked PD targets, windowed."""

from __future__ import annotations

import argparse
from pathlib import Path

from akd_core.io.rundir import CROSSCHECK, RunDir
from akd_core.physics.crosscheck import DEFAULT_OPEN_LOOP_S, DEFAULT_THRESHOLD_RAD, DEFAULT_WINDOW_S, stage_crosscheck


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, help="run directory with tracked.npz (from `akd track`)")
    parser.add_argument("--window", type=float, default=DEFAULT_WINDOW_S,
                        help="seconds each window replays from the tracked state (default 0.5)")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_RAD,
                        help="pass if the windowed joint RMSE (rad) is below this (default 0.05)")
    parser.add_argument("--open-loop", type=float, default=DEFAULT_OPEN_LOOP_S,
                        help="seconds of open-loop replay from the first state reported beside it (default: the "
                             "whole clip; 0: no open-loop replay)")
    parser.add_argument("--engine", default=None, choices=("mujoco", "newton"),
                        help="engine that replays (default: the one the run was not tracked in)")


def run(args: argparse.Namespace) -> int:
    run = RunDir(args.run)
    r = stage_crosscheck(run, args.window, args.threshold, args.open_loop, args.engine)
    verdict = "PASSED" if r["passed"] else "FAILED"
    print(f"crosscheck {verdict} in {r['engine']} (tracked in {r['tracked_engine']}): windowed joint RMSE "
          f"{r['joint_rmse_rad']:.4f} rad over {r['windows']} x {r['window_s']:.2f} s windows (threshold "
          f"{r['threshold']}), worst window {r['worst_window_joint_rmse_rad']:.4f} rad, root error "
          f"{r['root_pos_err_m']:.4f} m; {open_loop_summary(r)} -> {run.file(CROSSCHECK)}")
    return 0 if r["passed"] else 1


def open_loop_summary(r: dict) -> str:
    """The open-loop part of the summary line; "no open-loop replay" when it was turned off (--open-loop 0)."""
    if "open_loop_s" not in r:
        return "no open-loop replay"
    return (f"open loop {r['open_loop_s']:.1f} s: joint RMSE {r['open_loop_joint_rmse_rad']:.4f} rad, root drift "
            f"{r['open_loop_root_drift_m']:.3f} m")
