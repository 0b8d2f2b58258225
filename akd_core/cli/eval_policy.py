"""`akd eval-policy POLICY --robot ROBOT [--controller policy|mpc] [--episodes N --seconds S --push-mps V
--push-every S --friction LO,HI --mass-scale LO,HI --obs-noise X] [--json FILE]`: closed-loop evaluation under
pushes and randomised physics; the MPC expert is measured by the same command (``--controller mpc``).
`akd eval-policy POLICY --task velocity [--commands FILE]`: a velocity-command policy following commands (RMSE of
vx, vy and yaw rate, falls, gait style against its library)."""

from __future__ import annotations

import argparse
from pathlib import Path

from akd_core.io.errors import ConfigError
from akd_core.learn.command import EVAL_BOX, EVAL_RESAMPLE_S, CommandSchedule
from akd_core.learn.env import Randomisation, WorldPhysics
from akd_core.learn.evaluate import EvalConfig, ExpertController, PolicyController, evaluate, passes, write_report
from akd_core.learn.expert import ExpertConfig
from akd_core.learn.policy import check_robot_matches, load_policy
from akd_core.learn.velocity_eval import AXES, VelocityEvalConfig, evaluate_velocity
from akd_core.model.load import load_robot
from akd_core.motion.program import read_commands

from .options import add_robot_options


def parse_pair(text: str, flag: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in str(text).split(","))
    except ValueError as exc:
        raise ConfigError(f"{flag} must be LO,HI (two numbers), got {text!r}") from exc
    return lo, hi


def add_randomisation_arguments(parser) -> None:
    """The disturbances of an evaluation (and of DAgger's rollouts): the issue's defaults."""
    parser.add_argument("--push-mps", type=float, default=0.4, help="push: base velocity kick, m/s (default 0.4)")
    parser.add_argument("--push-every", type=float, default=2.0, help="seconds between pushes (default 2; 0: none)")
    parser.add_argument("--friction", default="0.6,1.2", help="ground friction range LO,HI (default 0.6,1.2)")
    parser.add_argument("--mass-scale", default="0.9,1.1", help="base mass scale range LO,HI (default 0.9,1.1)")
    parser.add_argument("--obs-noise", type=float, default=1.0,
                        help="observation noise level (1 = joint 0.01 rad, 1.5 rad/s, gyro 0.2 rad/s, gravity 0.05;"
                             " default 1)")
    parser.add_argument("--latency", default="0,0.02", help="action latency range LO,HI in s (default 0,0.02)")
    parser.add_argument("--expert-samples", type=int, default=None,
                        help="MPC expert: candidates per re-plan (default: the tracker's for this robot)")
    parser.add_argument("--expert-replan", type=int, default=1,
                        help="MPC expert: control periods between re-plans (default 1: at the control rate)")
    parser.add_argument("--expert-anchor", type=float, default=0.05, metavar="M",
                        help="MPC expert: shift the reference horizontally once a push moved the base more than M "
                             "from it (default 0.05; 0 = never)")


def randomisation(args: argparse.Namespace) -> Randomisation:
    rand = Randomisation(push_mps=args.push_mps, push_every_s=args.push_every,
                         friction=parse_pair(args.friction, "--friction"),
                         mass_scale=parse_pair(args.mass_scale, "--mass-scale"),
                         obs_noise=args.obs_noise, latency_s=parse_pair(args.latency, "--latency"))
    rand.check()
    return rand


def expert_config(args: argparse.Namespace) -> ExpertConfig:
    if args.expert_replan < 1:
        raise ConfigError(f"--expert-replan must be at least 1, got {args.expert_replan}")
    return ExpertConfig(samples=args.expert_samples, replan_frames=args.expert_replan,
                        anchor_radius_m=args.expert_anchor if args.expert_anchor > 0 else None, seed=args.seed)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", type=Path, help="policy file from `akd train-policy` (.pt)")
    add_robot_options(parser, required=False)
    parser.add_argument("--task", choices=("reference", "velocity"), default=None,
                        help="what the policy follows (default: the policy's own task): its reference clips, or "
                             "velocity commands")
    parser.add_argument("--controller", choices=("policy", "mpc"), default="policy",
                        help="evaluate the policy (default) or the MPC expert on the policy's clips")
    parser.add_argument("--seconds", type=float, default=20.0, help="episode length (default 20)")
    parser.add_argument("--episodes", type=int, default=10, help="episodes (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="episode draws (same seed = same episodes)")
    add_randomisation_arguments(parser)
    parser.add_argument("--json", type=Path, default=None,
                        help="write the report here (finished episodes are checkpointed beside it, FILE.ckpt)")
    parser.add_argument("--video", type=Path, default=None,
                        help="write an MP4 of the first episode here (--task velocity: and a contact sheet, the "
                             "same name .png: a pose every second labelled with command and measured velocity)")
    vel = parser.add_argument_group("velocity commands (--task velocity)")
    vel.add_argument("--commands", type=Path, default=None, metavar="FILE",
                     help="a command timeline (CSV t,vx,vy,yaw_rate or YAML, as `akd run --commands`) for every "
                          "episode instead of random draws")
    vel.add_argument("--resample-every", type=float, default=EVAL_RESAMPLE_S,
                     help=f"seconds between random command draws (default {EVAL_RESAMPLE_S:g})")
    for flag, (lo, hi), unit in zip(("--vx", "--vy", "--yaw"), EVAL_BOX, ("m/s", "m/s", "rad/s")):
        vel.add_argument(flag, default=f"{lo:g},{hi:g}", metavar="LO,HI",
                         help=f"range of the random draws, {unit} (default {lo:g},{hi:g}; a negative LO needs "
                              f"the = form, {flag}={lo:g},{hi:g})")


def _velocity(args: argparse.Namespace, policy, meta, robot) -> int:
    if args.controller != "policy":
        raise ConfigError("--task velocity evaluates the policy itself; --controller mpc tracks reference clips")
    schedule, source = None, "uniform"
    if args.commands is not None:
        schedule, source = CommandSchedule.from_rows(read_commands(args.commands)), str(args.commands)
    ranges = tuple(parse_pair(getattr(args, name), f"--{name}") for name in ("vx", "vy", "yaw"))
    cfg = VelocityEvalConfig(seconds=args.seconds, episodes=args.episodes, seed=args.seed,
                             randomisation=randomisation(args), resample_s=args.resample_every, ranges=ranges,
                             commands=schedule, commands_source=source)
    checkpoint = args.json.with_name(args.json.name + ".ckpt") if args.json is not None else None
    report, trajectories = evaluate_velocity(robot, policy, meta, cfg, checkpoint=checkpoint,
                                             keep_trajectories=1 if args.video else 0)
    report["policy"] = str(args.policy)
    fmt = lambda v, spec: "n/a" if v is None else format(v, spec)  # noqa: E731
    style = report["style"]
    commands = (f"commands from {source}" if schedule is not None else
                f"commands drawn every {args.resample_every:g} s from vx {ranges[0]}, vy {ranges[1]}, yaw rate "
                f"{ranges[2]}")
    print(f"{report['controller']} on '{robot.name}': {report['episodes']} episodes x {args.seconds:g} s, {commands}; "
          f"pushes {args.push_mps:g} m/s every {args.push_every:g} s, friction {args.friction}, mass "
          f"x{args.mass_scale}")
    print(f"  falls {report['falls']}/{report['episodes']}, RMSE vx {fmt(report['vx_rmse_mps'], '.3f')} m/s, vy "
          f"{fmt(report['vy_rmse_mps'], '.3f')} m/s, yaw rate {fmt(report['yaw_rate_rmse_radps'], '.3f')} rad/s "
          f"(turn {fmt(report['yaw_rate_split']['turn_rmse_radps'], '.3f')}, within strides "
          f"{fmt(report['yaw_rate_split']['stride_rmse_radps'], '.3f')}); "
          f"style vs the library: duty factor error {fmt(style['duty_factor_error'], '.3f')}, contact patterns "
          f"{fmt(style['pattern_match'], '.2f')}, stride error {fmt(style['stride_hz_error'], '.2f')} Hz; "
          f"{report['wall_seconds']:.0f} s")
    tails = report["before_falls"]
    if tails["steps"]:
        share, rest = tails["sq_error_share"], tails["rmse_other_steps"]
        print(f"  the {tails['window_s']:g} s before each fall ({tails['steps']} scored steps) hold "
              + ", ".join(f"{fmt(share[a], '.0%')} of the {n} error" for a, n in zip(AXES, ("vx", "vy", "yaw-rate")))
              + f"; over the other steps RMSE vx {fmt(rest['vx_mps'], '.3f')}, vy {fmt(rest['vy_mps'], '.3f')}, "
              f"yaw rate {fmt(rest['yaw_rate_radps'], '.3f')}")
    after = report["after_change"]
    if sum(after["steps"]):
        print("  by the time since the command changed: " + "; ".join(
            f"{lo:g}-{hi:g} s" if hi is not None else f"{lo:g} s on" for lo, hi in after["bins_s"]) + " hold "
            + ", ".join(str(n) for n in after["steps"]) + " scored steps; RMSE "
            + "; ".join(f"vx {fmt(after['vx_mps'][b], '.3f')}, vy {fmt(after['vy_mps'][b], '.3f')}, yaw rate "
                        f"{fmt(after['yaw_rate_radps'][b], '.3f')} (turn {fmt(after['turn_radps'][b], '.3f')})"
                        for b in range(len(after["steps"]))))
    gait = report["gait_windows"]
    if gait["windows"]:
        seen = ", ".join(f"{g} {n}" for g, n in sorted(gait["seen"].items(), key=lambda kv: -kv[1]))
        print(f"  gait: {gait['as_library_gait']} of {gait['windows']} windows of {gait['window_s']:g} s at "
              f">= {gait['min_speed_mps']:g} m/s read as the library's gait ({gait['share']:.0%}; seen: {seen})")
    if args.json is not None:
        write_report(args.json, report)
        if checkpoint is not None and checkpoint.exists():
            checkpoint.unlink()
    if args.video is not None and trajectories:
        from akd_core.learn.video import write_contact_sheet, write_rollout_video

        print(f"  video -> {write_rollout_video(robot, meta, trajectories[0], args.video)}")
        sheet = write_contact_sheet(robot, trajectories[0], meta.dt, args.video.with_suffix(".png"))
        print(f"  contact sheet -> {sheet}")
    return 0 if report["falls"] <= report["episodes"] // 10 else 1


def run(args: argparse.Namespace) -> int:
    policy, meta = load_policy(args.policy)
    task = args.task or meta.task
    if task != meta.task:
        raise ConfigError(f"{args.policy} is a {meta.task} policy (trained with --task {meta.task}); evaluate it "
                          f"with --task {meta.task}")
    robot = load_robot(args.robot or meta.robot, args.package_path)
    check_robot_matches(meta.joint_names, robot, "the policy")
    if task == "velocity":
        return _velocity(args, policy, meta, robot)
    cfg = EvalConfig(seconds=args.seconds, episodes=args.episodes, seed=args.seed, randomisation=randomisation(args))
    controller = (ExpertController(expert_config(args)) if args.controller == "mpc"
                  else PolicyController(policy, cfg.randomisation.obs_noise, name=meta.method))
    checkpoint = args.json.with_name(args.json.name + ".ckpt") if args.json is not None else None
    report, trajectories = evaluate(robot, WorldPhysics.from_dict(meta.physics), meta.clips, meta.starts, controller,
                                    cfg, checkpoint=checkpoint, keep_trajectories=1 if args.video else 0)
    report["policy"] = str(args.policy)
    fmt = lambda v, spec: "n/a" if v is None else format(v, spec)  # noqa: E731
    print(f"{controller.name} on '{robot.name}': {report['episodes']} episodes x {args.seconds:g} s, pushes "
          f"{args.push_mps:g} m/s every {args.push_every:g} s, friction {args.friction}, mass x{args.mass_scale}")
    print(f"  falls {report['falls']}/{report['episodes']}, joint RMSE {fmt(report['joint_rmse_rad'], '.3f')} rad, "
          f"distance ratio {fmt(report['distance_ratio'], '.2f')}, speed {fmt(report['mean_speed_mps'], '.2f')} "
          f"m/s (reference {fmt(report['reference_speed_mps'], '.2f')}), {report['wall_seconds']:.0f} s")
    if args.json is not None:
        write_report(args.json, report)
        if checkpoint is not None and checkpoint.exists():
            checkpoint.unlink()
    if args.video is not None and trajectories:
        from akd_core.learn.video import write_rollout_video

        print(f"  video -> {write_rollout_video(robot, meta, trajectories[0], args.video)}")
    return 0 if passes(report, max_falls=report["episodes"] // 10) else 1
