"""The `akd` command (DESIGN.md section 6).

Each subcommand is a thin wrapper: parse options, call one stage function of akd_core,
print where the outputs are. Stage modules are imported only when their command runs,
so `akd robots list` starts in a fraction of a second. AKDError becomes a one-paragraph
message and a non-zero exit code (a traceback only with --debug).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from .errors import AKDError
from .signals import stop_on_sigint, terminate_as_interrupt

log = logging.getLogger("akd")


# ----------------------------------------------------------------------------- shared options
def add_robot_options(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--robot", required=required,
                        help="built-in robot name (`akd robots list`) or a path to a URDF")
    add_package_path(parser)


def add_package_path(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--package-path", action="append", default=[], metavar="DIR",
                        help="folder containing ROS packages, for package:// mesh URIs (repeatable; "
                             "ROS_PACKAGE_PATH and AMENT_PREFIX_PATH are searched too)")


# ----------------------------------------------------------------------------- robots
def _robots_list(args: argparse.Namespace) -> int:
    from . import skeletons

    for name in sorted(skeletons.SKELETONS):
        robot = skeletons.build(name)
        print(f"{name:12s} {robot.num_dofs:3d} DoF  {len(robot.links):3d} links  {robot.total_mass:7.2f} kg")
    return 0


def _robots_emit(args: argparse.Namespace) -> int:
    from . import skeletons

    if args.name not in skeletons.SKELETONS:
        raise AKDError(f"unknown built-in robot '{args.name}'; choose one of {sorted(skeletons.SKELETONS)}")
    text = skeletons.build(args.name).to_urdf(args.output)
    if args.output is None:
        sys.stdout.write(text)
    else:
        print(f"wrote {args.output}")
    return 0


def robot_info(robot, with_feet: bool = True) -> dict:
    """Joints (type, limits), links, total mass and detected feet of a Robot, as plain data."""
    info = {
        "name": robot.name,
        "urdf": str(robot.urdf_path) if robot.urdf_path else None,
        "root_link": robot.root_link,
        "total_mass_kg": round(robot.total_mass, 6),
        "num_dofs": robot.num_dofs,
        "links": robot.link_names,
        "joints": [
            {"name": j.name, "type": j.type, "parent": j.parent, "child": j.child,
             "lower": None if j.type in ("fixed", "continuous") else j.lower,
             "upper": None if j.type in ("fixed", "continuous") else j.upper,
             "velocity": None if j.type == "fixed" else j.velocity,
             "effort": None if j.type == "fixed" else j.effort}
            for j in robot.joints
        ],
        "actuated_joints": robot.joint_names,
        "feet": None,
    }
    if with_feet:
        try:
            from .legs import find_legs

            info["feet"] = [leg.foot_link for leg in find_legs(robot)]
        except (ImportError, AKDError) as exc:
            info["feet_note"] = str(exc).split("\n")[0]
    return info


def _robots_info(args: argparse.Namespace) -> int:
    from .robot import load_robot

    robot = load_robot(args.robot, args.package_path)
    info = robot_info(robot)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{info['name']}: {info['num_dofs']} actuated joints, {len(info['links'])} links, "
          f"{info['total_mass_kg']:.3f} kg, root '{info['root_link']}'")
    if info["urdf"]:
        print(f"  URDF: {info['urdf']}")
    print(f"  {'joint':32s} {'type':10s} {'lower':>9s} {'upper':>9s} {'vel':>7s} {'effort':>8s}")
    for j in info["joints"]:
        if j["type"] == "fixed":
            continue
        lo = "-inf" if j["lower"] is None else f"{j['lower']:.3f}"
        hi = "inf" if j["upper"] is None else f"{j['upper']:.3f}"
        print(f"  {j['name']:32s} {j['type']:10s} {lo:>9s} {hi:>9s} {j['velocity']:7.2f} {j['effort']:8.2f}")
    feet = info.get("feet")
    print(f"  feet: {', '.join(feet) if feet else info.get('feet_note', 'none detected')}")
    return 0


# ----------------------------------------------------------------------------- stage commands
# Each stage lives in its own module with `add_arguments(parser)` and `cli(args) -> int` (names overridable).
STAGE_COMMANDS: list[tuple[str, str, str, str, str]] = [
    ("gait", "akd_core.gait", "procedural reference gait from a prompt -> RUN/reference.npz",
     "add_arguments", "cli"),
    ("distill", "akd_core.distill", "SDS distillation of a motion from a video diffusion prior",
     "add_arguments", "cli"),
    ("track", "akd_core.physics.tracker", "physics tracking: sampling MPC (MuJoCo CPU / Newton CUDA) or --method adam",
     "add_arguments", "cli"),
    ("crosscheck", "akd_core.physics.crosscheck", "replay tracked PD targets in the other engine, windowed",
     "add_arguments", "cli"),
    ("render", "akd_core.render_run", "Gaussian-splat render of RUN's motion -> RUN/render.mp4",
     "add_arguments", "cli"),
    ("preview", "akd_core.preview", "mesh preview video of RUN (reference | tracked) -> RUN/preview.mp4",
     "add_arguments", "cli"),
    ("export", "akd_core.export", "datasets and bags: hdf5, lerobot, amp, isaaclab-amp, rosbag2",
     "add_arguments", "cli"),
    ("run", "akd_core.pipeline", "every stage in order (gait|sds -> track -> crosscheck -> preview -> export)",
     "add_arguments", "cli"),
    ("batch", "akd_core.batch", "many runs from a sweep YAML, locally or on a Ray cluster",
     "add_arguments", "cli"),
    ("prior", "akd_core.prior", "video priors: check a CogVideoX folder, write a tiny one, make training data, train",
     "add_arguments", "cli"),
    ("train-bc", "akd_core.policy", "behaviour cloning on an exported HDF5 dataset",
     "add_train_arguments", "train_cli"),
    ("eval-policy", "akd_core.policy", "closed-loop evaluation of a BC policy in MuJoCo",
     "add_eval_arguments", "eval_cli"),
]


def _stage_module(module: str):
    """The module of a command, or None when that part of AKD is not installed (e.g. akd_ros without rclpy)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            return None
        raise


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `akd` parser. Only the module of ``command`` is imported (so `akd robots list` starts fast);
    with ``command=None`` every command is listed by name and help text."""
    parser = argparse.ArgumentParser(
        prog="akd", description="AKD: reference gaits, tracked PD targets and datasets for legged robots.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    robots = sub.add_parser("robots", help="built-in skeletons and URDF inspection")
    rsub = robots.add_subparsers(dest="robots_command", metavar="ACTION")
    rsub.required = True
    p = rsub.add_parser("list", help="list the built-in robots")
    p.set_defaults(func=_robots_list)
    p = rsub.add_parser("emit", help="write the URDF of a built-in skeleton")
    p.add_argument("name")
    p.add_argument("-o", "--output", default=None, help="output file (default: stdout)")
    p.set_defaults(func=_robots_emit)
    p = rsub.add_parser("info", help="joints, limits, links, mass and feet of a robot")
    p.add_argument("robot", help="built-in name or URDF path")
    add_package_path(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_robots_info)

    commands = [*STAGE_COMMANDS, ("ros", "akd_ros.cli", "ROS 2: replay a run as live topics", "add_arguments", "cli")]
    for name, module_name, help_text, add_name, cli_name in commands:
        if command != name:
            sub.add_parser(name, help=help_text, description=help_text, add_help=False)
            continue
        module = _stage_module(module_name)
        if module is None or not hasattr(module, cli_name):
            hint = " (install the ROS 2 extra: pip install -e '.[ros]')" if name == "ros" else ""
            raise AKDError(f"`akd {name}` is not available in this installation: {module_name} is missing{hint}")
        p = sub.add_parser(name, help=help_text, description=help_text)
        getattr(module, add_name)(p)
        p.set_defaults(func=getattr(module, cli_name))
    return parser


def _command_of(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, format="%(message)s")
    if not debug:
        warnings.simplefilter("ignore", DeprecationWarning)
    # Ctrl-C, kill -INT (even when started with SIGINT ignored) and SIGTERM (kill, a job scheduler, a container
    # stop) all end a command through KeyboardInterrupt, so every long loop leaves its checkpoint (akd_core.signals)
    stop_on_sigint()
    with terminate_as_interrupt():
        return _main(argv, debug)


def _main(argv: list[str], debug: bool) -> int:
    try:
        parser = build_parser(_command_of(argv))
        args = parser.parse_args(argv)
        func: Callable[[argparse.Namespace], int] = args.func
        return int(func(args) or 0)
    except AKDError as exc:
        if debug:
            raise
        command = _command_of(argv) or ""
        print(f"akd {command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"akd {_command_of(argv)}: interrupted; re-run the same command to resume from the last checkpoint",
              file=sys.stderr)
        return 130
    except BrokenPipeError:  # `akd robots info ... | head`: the reader left; not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not raise again
        return 0


def run_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, help="run directory (made by `akd gait` / `akd run`)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
