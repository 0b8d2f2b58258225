"""`akd train-bc` and `akd eval-policy`: behaviour cloning on a dataset, closed-loop evaluation in MuJoCo."""

from __future__ import annotations

import argparse
from pathlib import Path

from akd_core.cli.options import add_robot_options
from akd_core.io.errors import ConfigError
from akd_core.io.fileio import write_json_atomic
from akd_core.learn.policy import (
    ACTION_MODES,
    DEFAULT_EPOCHS,
    DEFAULT_HIDDEN,
    DEFAULT_OBS_NOISE,
    evaluate_policy,
    load_dataset,
    load_policy,
    save_policy,
    train_bc,
    write_rollout_video,
)
from akd_core.model.load import load_robot


# ----------------------------------------------------------------------------- CLI
def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `akd train-bc DATASET --robot ROBOT -o POLICY.pt`."""
    parser.add_argument("dataset", type=Path, help="HDF5 dataset from `akd export RUN [RUN...] --format hdf5`")
    add_robot_options(parser)
    parser.add_argument("-o", "--output", type=Path, required=True, help="policy file to write (.pt)")
    parser.add_argument("--epochs", type=int, default=DEFAULT_EPOCHS, help=f"default {DEFAULT_EPOCHS}")
    parser.add_argument("--hidden", default=",".join(map(str, DEFAULT_HIDDEN)),
                        help="hidden layer widths, comma-separated (default 256,256)")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--obs-noise", type=float, default=DEFAULT_OBS_NOISE,
                        help="std of training noise on normalised observations (default 0.2; 0 = pure BC)")
    parser.add_argument("--action-mode", choices=ACTION_MODES, default="absolute",
                        help="regress absolute PD targets (default) or residuals target - joint_pos")
    parser.add_argument("--seed", type=int, default=0)


def run_train(args: argparse.Namespace) -> int:
    try:
        hidden = tuple(int(h) for h in str(args.hidden).split(",") if h.strip())
    except ValueError as exc:
        raise ConfigError(f"--hidden must be comma-separated integers, got {args.hidden!r}") from exc
    if not hidden or min(hidden) < 1:
        raise ConfigError(f"--hidden must list positive layer widths, got {args.hidden!r}")
    robot = load_robot(args.robot, args.package_path)
    dataset = load_dataset(args.dataset)
    policy, meta, metrics = train_bc(dataset, robot, epochs=args.epochs, hidden=hidden, lr=args.lr,
                                     batch_size=args.batch_size, obs_noise=args.obs_noise, seed=args.seed,
                                     action_mode=args.action_mode)
    save_policy(args.output, policy, meta)
    print(f"trained on {metrics['num_demos']} demos ({metrics['num_samples']} samples) in "
          f"{metrics['train_seconds']:.1f} s: final loss {metrics['final_loss']:.4f}, PD-target RMSE "
          f"{metrics['target_rmse_rad']:.4f} rad -> {args.output}")
    return 0


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `akd eval-policy POLICY.pt --robot ROBOT [--seconds S] [--video OUT.mp4]`."""
    parser.add_argument("policy", type=Path, help="policy file from `akd train-bc`")
    add_robot_options(parser)
    parser.add_argument("--seconds", type=float, default=10.0, help="rollout length (default 10)")
    parser.add_argument("--demo", type=int, default=None,
                        help="index of the reference demo to start from (default: the fastest)")
    parser.add_argument("--speed", type=float, default=None,
                        help="command speed in m/s (default: the reference demo's; picks the closest demo)")
    parser.add_argument("--video", type=Path, default=None, help="write an MP4 of the rollout here")
    parser.add_argument("--json", type=Path, default=None, help="write the metrics to this JSON file")


def run_eval(args: argparse.Namespace) -> int:
    policy, meta = load_policy(args.policy)
    robot = load_robot(args.robot, args.package_path)
    metrics, traj = evaluate_policy(policy, meta, robot, seconds=args.seconds, demo=args.demo, speed=args.speed)
    print(f"policy {args.policy} on '{robot.name}' in MuJoCo for {args.seconds:g} s "
          f"(reference {metrics['reference_demo']}):")
    print(f"  upright {metrics['upright_seconds']:.2f} s{' (FELL)' if metrics['fell'] else ''}, distance "
          f"{metrics['distance_m']:.2f} m = {metrics['distance_ratio']:.0%} of the reference's "
          f"{metrics['reference_distance_m']:.2f} m")
    print(f"  forward speed {metrics['forward_speed_mps']:.3f} m/s (dataset {metrics['reference_speed_mps']:.3f}), "
          f"joint RMSE vs reference {metrics['joint_rmse_rad']:.4f} rad over {metrics['joint_rmse_seconds']:.2f} s")
    if args.json is not None:
        write_json_atomic(args.json, metrics)
    if args.video is not None:
        print(f"  video -> {write_rollout_video(robot, meta, traj, args.video)}")
    return 1 if metrics["fell"] else 0
