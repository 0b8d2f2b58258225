"""`akd track RUN`: physics tracking of the reference -> RUN/tracked.npz."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from akd_core.cli.options import (
    add_fast_argument,
    add_integrator_argument,
    add_verdict_arguments,
    add_yaw_rate_weight_argument,
    fail_unless_passed,
)
from akd_core.io.rundir import TRACKED, RunDir
from akd_core.physics.metrics import fall_warning
from akd_core.physics.tracker import METHODS, stage_track


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, help="run directory with robot.urdf and reference.npz")
    parser.add_argument("--method", default="mpc", choices=METHODS,
                        help="mpc: sampling MPC (default; MuJoCo on CPU, Newton on CUDA); adam: the paper's gradient "
                             "method through Newton's differentiable simulation")
    parser.add_argument("--engine", default="auto", choices=("auto", "mujoco", "newton"),
                        help="physics engine (auto: Newton on CUDA, MuJoCo on CPU)")
    parser.add_argument("--device", default=None, choices=["auto", "cpu", "cuda"], help="Warp device (default auto)")
    parser.add_argument("--samples", type=int, default=None, help="MPC candidates per re-plan (default sized)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="MPC annealing rounds per re-plan (default 1); adam: Adam steps per window")
    parser.add_argument("--noise", type=float, default=None, help="MPC knot noise, rad (default 0.04)")
    parser.add_argument("--horizon", type=float, default=None,
                        help="MPC horizon, s (default 0.4, or 1.5 x the gait's swing on two feet where longer; "
                             "bipeds 0.8)")
    parser.add_argument("--replan", type=float, default=None,
                        help="MPC re-plan period, s (default 0.06; bipeds 0.04)")
    parser.add_argument("--plan-dt", type=float, default=None,
                        help="MuJoCo step of the MPC's candidate rollouts, s (default: bipeds 2 x the tracking "
                             "step, with its contact stiffness; other robots and 0: the tracking step). What is "
                             "executed always steps at --sim-dt")
    add_integrator_argument(parser)
    parser.add_argument("--mu", type=float, default=None, help="Coulomb friction coefficient (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sim-dt", type=float, default=None,
                        help="simulation step bound in s (default 2e-3 MuJoCo, 1e-3 Newton)")
    parser.add_argument("--control-hz", type=float, default=None,
                        help="PD target rate (default the reference's fps; 100 Hz for a clip with flight phases on "
                             "three or more feet)")
    parser.add_argument("--kp", type=float, default=None, help="PD stiffness for every joint (default mass-scaled)")
    parser.add_argument("--kd", type=float, default=None, help="PD damping for every joint (default critical)")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="adam: optimisation wall-time cap in s (default 150 on CPU unless --iterations)")
    parser.add_argument("--window", type=float, default=0.5,
                        help="adam: optimisation window in s (default 0.5); 0 = the whole clip at once (paper)")
    parser.add_argument("--lr", type=float, default=0.02, help="adam: learning rate (rad)")
    parser.add_argument("--no-inverse-dynamics", action="store_true",
                        help="nominal targets without the reference's inverse-dynamics torques (q_ref + kd/kp qd_ref)")
    parser.add_argument("--feedforward-ok", type=float, default=None,
                        help="skip the MPC when the feedforward replay tracks upright within this link error in m "
                             "(default 0.02; 0 always runs the MPC)")
    parser.add_argument("--retry-above", type=float, default=None,
                        help="with the default --samples, re-plan a clip once with twice the samples when its link "
                             "error is above this many m or it fell, keeping the better (default 0.03 quadrupeds, "
                             "0.08 bipeds; 0 never)")
    parser.add_argument("--warm-decay", type=float, default=None,
                        help="time constant (s) with which each re-plan's warm start fades toward the feedforward "
                             "targets (default 2; 0 keeps it as planned: long clips then drift, docs/tracking.md)")
    parser.add_argument("--antithetic", action="store_true",
                        help="MPC perturbations in +/- pairs: a steadier plan for the same rollouts (docs/tracking.md)")
    add_fast_argument(parser)
    add_yaw_rate_weight_argument(parser)
    add_verdict_arguments(parser)
    parser.add_argument("--no-resume", action="store_true", help="ignore RUN/track_ckpt.pt and start over")


def run(args: argparse.Namespace) -> int:
    run = RunDir(args.run)
    metrics = stage_track(run, resume=not args.no_resume, method=args.method, engine=args.engine, device=args.device,
                          samples=args.samples, iterations=args.iterations, noise_rad=args.noise,
                          horizon_s=args.horizon, replan_s=args.replan, plan_dt=args.plan_dt, contact_mu=args.mu,
                          integrator=args.integrator,
                          retry_above_m=args.retry_above, antithetic=args.antithetic, fast=args.fast,
                          warm_decay_s=args.warm_decay, yaw_rate_weight=args.yaw_rate_weight,
                          seed=args.seed,
                          sim_dt=args.sim_dt, control_hz=args.control_hz, kp=args.kp, kd=args.kd,
                          time_budget_s=args.time_budget, window_s=args.window if args.window > 0 else None,
                          lr=args.lr, inverse_dynamics=not args.no_inverse_dynamics,
                          feedforward_ok_m=args.feedforward_ok, link_err_limit_m=args.link_err_limit)
    print(f"tracked -> {run.file(TRACKED)} ({metrics['method']} on {metrics['engine']}, "
          f"{metrics.get('track_seconds', metrics.get('optimise_seconds', 0.0)):.0f} s)")
    print(f"  {'metric':26s} {'naive':>10s} {'tracked':>10s}")
    for key in ("link_pos_err_m", "joint_rmse_rad", "root_pos_err_m", "heading_err_deg", "stance_slip_mps",
                "touchdown_speed_mps", "foot_skate_mps", "penetration_m", "feet_on_edges_frac", "non_foot_contact_frac",
                "sole_on_one_tread_frac", "contact_schedule_match", "max_tilt_deg",
                "torque_saturation_frac", "final_root_err_m", "fell"):
        if key not in metrics:
            continue
        print(f"  {key:26s} {str(_fmt(metrics.get('naive_' + key))):>10s} {str(_fmt(metrics[key])):>10s}")
    if metrics.get("non_foot_contact_links"):
        print(f"  touching the ground besides the feet: {', '.join(metrics['non_foot_contact_links'])}")
    if metrics["fell"]:
        print(fall_warning(metrics))
    return fail_unless_passed(run, metrics, args.keep_failed)


def _fmt(value: Any) -> Any:
    return f"{value:.4f}" if isinstance(value, float) else value
