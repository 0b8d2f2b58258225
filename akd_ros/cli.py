"""``akd ros ...``: the ROS 2 commands of the ``akd`` CLI (wired by akd_core/cli/).

``akd ros replay RUN [--rate HZ] [--loop]`` streams a run on live topics (see :mod:`akd_ros.replay`);
``akd ros generate --robot R --prompt P`` runs the generator node once (pipeline, then replay);
``akd ros sim --robot R [--run RUN | --policy P.onnx]`` runs the MuJoCo simulator node (:mod:`akd_ros.sim`);
``akd ros policy P.onnx [--cmd-vel]`` runs an exported policy against it (:mod:`akd_ros.policy_node`; a
velocity-command policy follows /cmd_vel).
rclpy is imported only when a command runs, so ``akd ros --help`` works without the ROS wheels.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from akd_core.io.errors import DependencyError


def _require_rclpy() -> None:
    try:
        import rclpy  # noqa: F401
    except ImportError as exc:
        raise DependencyError(
            f"rclpy is not importable ({exc}); install the ROS 2 wheels (pip install -e '.[ros]') or source a "
            "ROS 2 (Kilted or newer) installation, and run the venv's own python/akd") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="ros_command", metavar="ACTION")
    sub.required = True
    p = sub.add_parser("replay", help="publish a run as live ROS 2 topics",
                       description="Publish RUN's tracked motion (or its reference) on /joint_states, "
                                   "/robot_description, the PD-target JointTrajectory, command streams and "
                                   "/akd/root_odom. Refuses commands outside the URDF limits.")
    p.add_argument("run", type=Path, help="run directory (made by `akd run` / `akd track`)")
    p.add_argument("--rate", type=float, default=None, metavar="HZ",
                   help="samples per second (default: the run's own rate, 1/dt of tracked.npz)")
    p.add_argument("--rate-scale", type=float, default=1.0, help="speed factor when --rate is not given")
    p.add_argument("--loop", action="store_true", help="start over after the last sample until Ctrl-C")
    p.add_argument("--source", choices=["tracked", "reference"], default="tracked",
                   help="tracked.npz (falls back to reference.npz when absent) or reference.npz")
    p.add_argument("--remap", action="append", default=[], metavar="URDF_NAME:NEW_NAME",
                   help="rename a joint in every message (repeatable)")
    p.add_argument("--trajectory-topic", default=None,
                   help="JointTrajectory topic (default /joint_trajectory_controller/joint_trajectory)")
    p.add_argument("--no-trajectory", action="store_true", help="do not publish the JointTrajectory")
    p.add_argument("--wait-for-subscribers", type=int, default=0, metavar="N",
                   help="start once /joint_states has N subscribers")
    p.add_argument("--allow-unsafe", action="store_true",
                   help="publish even commands outside the URDF limits (only for robots you know tolerate it)")
    p.set_defaults(ros_func=_replay)

    p = sub.add_parser("generate", help="run the generator node once: pipeline, then replay",
                       description="Run the AKD pipeline for ROBOT and PROMPT (as the akd_generator node's "
                                   "~/generate service does), then replay the run on ROS 2 topics.")
    p.add_argument("--robot", required=True, help="built-in robot name or URDF path")
    p.add_argument("--prompt", required=True)
    p.add_argument("--out", default="", help="run directory (default runs/<robot>_<prompt words>)")
    p.add_argument("--source", choices=["gait", "sds"], default="gait")
    p.add_argument("--loop", action="store_true")
    p.set_defaults(ros_func=_generate)

    p = sub.add_parser("sim", help="the MuJoCo simulator node: /clock, /joint_states, /imu, /odom; PD targets in",
                       description="Simulate ROBOT in AKD's MuJoCo model, publishing /clock, /joint_states, /imu, "
                                   "/odom (and /tf where tf2_msgs is installed) and taking PD targets as "
                                   "ros2_control's joint_trajectory_controller (JointTrajectory) and "
                                   "forward_command_controller (Float64MultiArray) take them. Commands outside the "
                                   "URDF limits are dropped and logged.")
    p.add_argument("--robot", default="", help="built-in robot name or URDF path (default: the run's robot.urdf)")
    p.add_argument("--package-path", action="append", default=[], metavar="DIR")
    p.add_argument("--run", type=Path, default=None, help="start from RUN/tracked.npz with the run's physics")
    p.add_argument("--policy", type=Path, default=None, help="start from this ONNX policy's clip, its physics")
    p.add_argument("--clip", type=int, default=0, help="the policy's clip to start from (default 0)")
    p.add_argument("--control-hz", type=float, default=0.0, help="without --run/--policy (default 50)")
    p.add_argument("--lockstep", action="store_true", help="advance only once the next command has arrived")
    p.add_argument("--real-time-factor", type=float, default=1.0, help="without --lockstep; 0 = as fast as possible")
    p.add_argument("--duration", type=float, default=0.0, help="simulated seconds (default: until Ctrl-C)")
    p.add_argument("--wait-for-subscribers", type=int, default=0, metavar="N",
                   help="start once /joint_states has N subscribers")
    p.set_defaults(ros_func=_sim)

    p = sub.add_parser("policy", help="run an exported policy (ONNX) on /joint_states + /imu -> PD targets",
                       description="Drive a robot (or `akd ros sim`) with an ONNX policy from `akd export-policy`: "
                                   "reads /joint_states and /imu, publishes PD targets on "
                                   "/position_controller/commands every control period. Uses simulated time.")
    p.add_argument("policy", type=Path, help="ONNX export of a policy")
    p.add_argument("--clip", type=int, default=0, help="which reference clip to track (default 0)")
    p.add_argument("--trajectory", action="store_true",
                   help="also publish a one-point JointTrajectory per command (joint_trajectory_controller)")
    p.add_argument("--duration", type=float, default=0.0, help="stop after this many simulated seconds")
    p.add_argument("--wall-time", action="store_true", help="use the wall clock instead of /clock")
    p.add_argument("--cmd-vel", action="store_true",
                   help="follow /cmd_vel (geometry_msgs/Twist in base_link) with a velocity-command policy "
                        "(`akd train-policy LIBRARY --task velocity`): clipped to its trained box, zero after "
                        "--cmd-vel-timeout s without a Twist")
    p.add_argument("--cmd-vel-topic", default="/cmd_vel", help="the Twist topic (default /cmd_vel)")
    p.add_argument("--cmd-vel-timeout", type=float, default=0.5,
                   help="seconds (wall clock) without a Twist after which the command is zero (default 0.5)")
    p.set_defaults(ros_func=_policy)


def _replay(args: argparse.Namespace) -> int:
    _require_rclpy()
    from akd_ros.replay import replay_run

    # akd_core.cli.main has made SIGINT stop this process even if it was started with SIGINT ignored
    options = {}
    if args.trajectory_topic:
        options["trajectory_topic"] = args.trajectory_topic
    return replay_run(args.run, rate=args.rate, loop=args.loop, rate_scale=args.rate_scale,
                      allow_unsafe=args.allow_unsafe, joint_name_remap=args.remap, source=args.source,
                      publish_trajectory=not args.no_trajectory, wait_for_subscribers=args.wait_for_subscribers,
                      args=[], **options)


def _generate(args: argparse.Namespace) -> int:
    _require_rclpy()
    from akd_ros.generator import run_generator_node

    run_generator_node({"robot": args.robot, "prompt": args.prompt, "out": args.out, "source": args.source,
                        "loop": bool(args.loop), "autostart": True, "exit_after_replay": True}, args=[])
    return 0


def _sim(args: argparse.Namespace) -> int:
    _require_rclpy()
    from akd_ros.sim import SimOptions, run_sim_node

    options = SimOptions(robot=args.robot, package_paths=list(args.package_path),
                         run_dir=str(args.run) if args.run else "", policy=str(args.policy) if args.policy else "",
                         clip=args.clip, control_hz=args.control_hz, lockstep=args.lockstep,
                         real_time_factor=args.real_time_factor, duration=args.duration,
                         wait_for_subscribers=args.wait_for_subscribers)
    run_sim_node(options, args=[])
    return 0


def _policy(args: argparse.Namespace) -> int:
    _require_rclpy()
    from akd_ros.policy_node import PolicyOptions, run_policy_node

    options = PolicyOptions(policy=str(args.policy), clip=args.clip, publish_trajectory=args.trajectory,
                            duration=args.duration, cmd_vel=args.cmd_vel, cmd_vel_topic=args.cmd_vel_topic,
                            cmd_vel_timeout=args.cmd_vel_timeout)
    run_policy_node(options, args=[] if args.wall_time else ["--ros-args", "-p", "use_sim_time:=true"])
    return 0


def cli(args: argparse.Namespace) -> int:
    return int(args.ros_func(args) or 0)
