"""Options shared by several `akd` commands: the robot and its ROS package paths, run directories.

Light on purpose (no torch): `akd robots ...` imports it and starts in a fraction of a second. The quality
gates are in :mod:`akd_core.cli.gates`, the video prior's options in :mod:`akd_core.cli.prior_options`."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_robot_options(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--robot", required=required,
                        help="built-in robot name (`akd robots list`), a path to a URDF or MuJoCo MJCF (.xml, a "
                             "scene.xml too), or menagerie:NAME (a MuJoCo Menagerie model under $MENAGERIE_ROOT)")
    add_package_path(parser)


def add_package_path(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--package-path", action="append", default=[], metavar="DIR",
                        help="folder containing ROS packages, for package:// mesh URIs (repeatable; "
                             "ROS_PACKAGE_PATH and AMENT_PREFIX_PATH are searched too)")


def add_run_dir(parser: argparse.ArgumentParser, help_text: str = "run directory (made by `akd gait` / `akd run`)"
                ) -> None:
    parser.add_argument("run", type=Path, help=help_text)


def split_names(text: str | None) -> list[str] | None:
    """'a, b,c' -> ['a', 'b', 'c']; None or empty -> None (e.g. --feet)."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    return names or None


def split_floats(text: str, count: int) -> tuple[float, ...] | None:
    """'0.3,0.3,0.4' -> (0.3, 0.3, 0.4) when it holds ``count`` numbers, else None (the caller names the fix)."""
    try:
        values = tuple(float(v) for v in str(text).split(","))
    except ValueError:
        return None
    return values if len(values) == count else None


def add_fast_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fast", action="store_true",
                        help="MPC preset for robots with three or more feet on CPU: 25 antithetic samples rolled out "
                             "at a 4 ms step, re-planned every 0.06 s, where those options are not given (~2.5x "
                             "faster, about the same link error: docs/tracking.md 'Fast preset'; bipeds: no change)")


def add_yaw_rate_weight_argument(parser: argparse.ArgumentParser, default: float | None = None) -> None:
    parser.add_argument("--yaw-rate-weight", type=float, default=default, metavar="W",
                        help="weight of the tracking cost's yaw-rate term, |root yaw rate - the reference's| in "
                             f"rad/s (default {default if default is not None else 0:g}): a trot tracked without it "
                             "swings its heading within each stride (docs/tracking.md)")


def add_integrator_argument(parser: argparse.ArgumentParser) -> None:
    from akd_core.physics.engines.mujoco import MUJOCO_INTEGRATORS

    parser.add_argument("--integrator", default=None, choices=MUJOCO_INTEGRATORS,
                        help="MuJoCo integrator of the tracking models (default: euler for robots with three or more "
                             "feet, so loaded stance feet do not creep; implicitfast for bipeds and where explicit "
                             "damping would be unstable: docs/tracking.md 'Integrator'). The clip's replays (RL "
                             "worlds, akd ros sim, the exported scene) step with the one it was tracked with")


def add_verdict_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--link-err-limit", type=float, default=None, metavar="M",
                        help="the clip fails above this mean link error in m (default by motion class: 0.03 walks, "
                             "trots and paces of three or more feet, 0.05 gaits with flight phases, 0.08 bipeds; "
                             "docs/tracking.md 'When a clip fails')")
    parser.add_argument("--keep-failed", action="store_true",
                        help="a clip that fails (fell, lost the reference, link error above its limit) is still "
                             "exported (marked success=False) and the command exits 0; it is always marked failed "
                             "in manifest.json")


def fail_unless_passed(run, metrics: dict, keep_failed: bool) -> int:
    """0 when the tracked clip passed (or ``keep_failed``); otherwise a TrackingFailedError naming the reasons."""
    from akd_core.io.errors import TrackingFailedError

    reasons = metrics.get("failure_reasons") or []
    if not reasons:
        return 0
    text = "; ".join(reasons)
    if keep_failed:
        print(f"FAILED (kept, --keep-failed): {text}")
        return 0
    raise TrackingFailedError(
        f"{run.path}: the tracked clip FAILED: {text}. manifest.json records it (verdict, "
        "stages.track.metrics.failure_reasons) and tracked.npz is kept (`akd preview RUN` shows it). Try a slower "
        "speed or another gait, `akd track RUN --samples N` with more samples, or pass --keep-failed to use it anyway.")


def motion_prompt(args: argparse.Namespace) -> str:
    """The prompt of `akd gait` / `akd run`: ``--prompt``, or with only ``--commands`` a prompt naming the file."""
    from akd_core.io.errors import ConfigError

    if args.prompt and str(args.prompt).strip():
        return str(args.prompt)
    if getattr(args, "commands", None):
        return f"command timeline {Path(args.commands).name}"
    raise ConfigError("give --prompt (e.g. 'a dog trotting forward', or a sequence: 'a dog walks, then trots, then "
                      "stops') or --commands FILE (a command timeline)")


def add_motion_arguments(parser: argparse.ArgumentParser) -> None:
    """``--duration``, ``--terrain`` and ``--commands`` of `akd gait` and `akd run` (the clip's length, its ground and a
    command timeline)."""
    parser.add_argument("--duration", type=float, default=None,
                        help="clip length in seconds (default 4; a motion program or --commands: the sum of its "
                             "segments)")
    parser.add_argument("--terrain", default=None, metavar="SPEC|FILE",
                        help="the ground: slope:DEG, stairs:RISE,RUN[,up|down], steps:HEIGHT,LENGTH, "
                             "rough:AMPLITUDE[,WAVELENGTH], heightmap:FILE[,CELL[,SCALE]], an MJCF scene .xml or a "
                             "terrain.npz (default: terrain words in the prompt, else the robot's scene, else flat; "
                             "docs/terrain.md)")
    parser.add_argument("--commands", default=None, metavar="FILE",
                        help="a command timeline, CSV with header t,vx,vy,yaw_rate[,gait,height] (s, m/s, rad/s in "
                             "the heading frame) or YAML with those fields: each row holds until the next "
                             "(docs/programs.md)")
