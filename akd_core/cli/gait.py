"""`akd gait`: a reference gait from the gait library -> RUN/reference.npz (and RUN/preview.mp4)."""

from __future__ import annotations

import argparse

from akd_core.cli.options import add_motion_arguments, add_robot_options, motion_prompt
from akd_core.io.rundir import PREVIEW, REFERENCE, RunDir
from akd_core.model.load import load_run_robot
from akd_core.model.terrain import run_terrain
from akd_core.motion.clip import Motion
from akd_core.motion.feasibility import describe
from akd_core.motion.stage import stage_gait
from akd_core.render.preview import render_preview


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `akd gait` (docs/architecture.md, "Outputs and the commands are a contract")."""
    add_robot_options(parser)
    parser.add_argument("--prompt", default=None,
                        help="text, e.g. 'a dog trotting forward quickly'; a sequence makes a motion program: "
                             "'a dog walks, then trots, then stops' "
                             "(required unless --commands is given)")
    parser.add_argument("--out", required=True, help="run directory (created)")
    add_motion_arguments(parser)
    parser.add_argument("--fps", type=float, default=50.0, help="frame rate (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="recorded in the manifest (the gait is deterministic)")
    parser.add_argument("--feet", default=None, metavar="LINK,...",
                        help="foot link names, comma-separated, instead of automatic leg detection")
    parser.add_argument("--no-preview", action="store_true", help="do not render preview.mp4")


def run(args: argparse.Namespace) -> int:
    """`akd gait ...`: run the stage and print where the files are."""

    run = RunDir(args.out, create=True)
    feet = [f.strip() for f in args.feet.split(",") if f.strip()] if args.feet else None
    metrics = stage_gait(run, args.robot, motion_prompt(args),
                         duration=args.duration, fps=args.fps, seed=args.seed, feet=feet,
                         package_paths=args.package_path, commands=args.commands, terrain=args.terrain)
    if not args.no_preview:
        robot = load_run_robot(run)
        render_preview(robot, [Motion.load(run.file(REFERENCE), robot)], ["reference"], run.file(PREVIEW),
                       terrain=run_terrain(run))
    stage = run.stage("gait")
    spec = stage.get("config", {}).get("spec", {})
    print(f"gait: {spec.get('pattern')} at {spec.get('speed', 0):.2f} m/s, {spec.get('frequency', 0):.2f} Hz, "
          f"duty {spec.get('duty_factor', 0):.2f} ({metrics['num_frames']} frames)")
    for note in stage.get("config", {}).get("notes", []):
        print(f"  note: {note}")
    for n, seg in enumerate(stage.get("config", {}).get("segments", []) or []):
        cmd, ref = seg["command"], seg.get("reference", {})
        print(f"  segment {n + 1}: {seg['start_s']:6.2f}-{seg['end_s']:6.2f} s  {seg['pattern']:<7} command vx "
              f"{cmd['vx_mps']:+.2f} vy {cmd['vy_mps']:+.2f} m/s yaw {cmd['yaw_rate_radps']:+.2f} rad/s; reference "
              f"vx {ref.get('vx_mps', 0):+.2f} vy {ref.get('vy_mps', 0):+.2f} yaw {ref.get('yaw_rate_radps', 0):+.2f}")
    print(f"  foot skate {metrics['foot_skate_mps']:.4f} m/s, penetration {metrics['penetration_m'] * 1000:.2f} mm, "
          f"IK error {metrics['ik_foot_error_m'] * 1000:.2f} mm, joint velocity {metrics['joint_velocity_ratio']:.2f}"
          " x limit")
    print(f"  {describe(metrics)}")
    print(f"wrote {run.file('reference.npz')}")
    if run.file("preview.mp4").exists():
        print(f"wrote {run.file('preview.mp4')}")
    return 0
