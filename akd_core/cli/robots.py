"""`akd robots list | emit NAME | info ROBOT`: the built-in skeletons and what AKD sees in a robot."""

from __future__ import annotations

import argparse
import json
import sys

from akd_core.cli.options import add_package_path
from akd_core.io.errors import AKDError
from akd_core.model import skeletons
from akd_core.model.load import load_robot


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="robots_command", metavar="ACTION")
    actions.required = True
    p = actions.add_parser("list", help="list the built-in robots")
    p.set_defaults(func=run_list)
    p = actions.add_parser("emit", help="write the URDF of a built-in skeleton")
    p.add_argument("name")
    p.add_argument("-o", "--output", default=None, help="output file (default: stdout)")
    p.set_defaults(func=run_emit)
    p = actions.add_parser("info", help="joints, limits, links, mass and feet of a robot")
    p.add_argument("robot", help="built-in name, URDF or MJCF (.xml) path, or menagerie:NAME")
    add_package_path(p)
    p.add_argument("--feet", default=None, help="foot link names, comma-separated, instead of automatic detection")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run_info)


def run(args: argparse.Namespace) -> int:
    return args.func(args)


def run_list(args: argparse.Namespace) -> int:
    for name in sorted(skeletons.SKELETONS):
        robot = skeletons.build(name)
        print(f"{name:12s} {robot.num_dofs:3d} DoF  {len(robot.links):3d} links  {robot.total_mass:7.2f} kg")
    return 0


def run_emit(args: argparse.Namespace) -> int:
    if args.name not in skeletons.SKELETONS:
        raise AKDError(f"unknown built-in robot '{args.name}'; choose one of {sorted(skeletons.SKELETONS)}")
    text = skeletons.build(args.name).to_urdf(args.output)
    if args.output is None:
        sys.stdout.write(text)
    else:
        print(f"wrote {args.output}")
    return 0


def run_info(args: argparse.Namespace) -> int:
    from akd_core.model.legs import robot_info  # leg detection loads torch: late, so `akd robots list` stays quick

    robot = load_robot(args.robot, args.package_path)
    feet = [f.strip() for f in args.feet.split(",") if f.strip()] if args.feet else None
    info = robot_info(robot, feet=feet)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{info['name']}: {info['num_dofs']} actuated joints, {len(info['links'])} links, "
          f"{info['total_mass_kg']:.3f} kg, root '{info['root_link']}'")
    if info["urdf"]:
        print(f"  URDF: {info['urdf']}")
    if info["mjcf"]:
        print(f"  MJCF: {info['mjcf']} (read through MuJoCo's compiler; velocity limits: AKD's defaults)")
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
