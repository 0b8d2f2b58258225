"""`akd run`: every stage in order on one run directory, resumable, with a ten-second summary.

motion (gait or sds) -> track -> crosscheck -> preview -> export. A stage whose manifest entry
says "done" is skipped on a re-run (unless ``--force``), so a killed run continues where it
stopped; the long stages (distill, track) also resume from their own checkpoints.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .rundir import PREVIEW, RunDir

SOURCES = ("gait", "sds")
DEFAULT_EXPORTS = ("hdf5", "lerobot")


@dataclass
class PipelineConfig:
    robot: str
    prompt: str
    out: Path
    source: str = "gait"
    duration: float = 4.0
    fps: float = 50.0
    seed: int = 0
    feet: list[str] | None = None
    package_paths: list[str] = field(default_factory=list)
    track_iterations: int | None = None
    device: str | None = None
    exports: tuple[str, ...] = DEFAULT_EXPORTS
    force: bool = False
    # sds source
    prior: str = "cogvideox"
    video_model: str | None = None
    distill_iterations: int | None = None
    distill_param: str | None = None  # akd distill's --param (None: DistillConfig's default)


def _motion_stage(cfg: PipelineConfig, run: RunDir) -> dict:
    if cfg.source == "gait":
        from .gait import stage_gait

        return stage_gait(run, robot_spec=cfg.robot, prompt=cfg.prompt, duration=cfg.duration, fps=cfg.fps,
                          seed=cfg.seed, feet=cfg.feet, package_paths=cfg.package_paths, preview=False)
    from .distill import stage_distill

    return stage_distill(run, robot_spec=cfg.robot, prompt=cfg.prompt, prior=cfg.prior, video_model=cfg.video_model,
                         iterations=cfg.distill_iterations, duration=cfg.duration, seed=cfg.seed,
                         package_paths=cfg.package_paths, resume=True,
                         config_overrides={"param": cfg.distill_param} if cfg.distill_param else None)


def _track_stage(cfg: PipelineConfig, run: RunDir) -> dict:
    from .physics.tracker import stage_track

    return stage_track(run, iterations=cfg.track_iterations, device=cfg.device, seed=cfg.seed)


def _crosscheck_stage(cfg: PipelineConfig, run: RunDir) -> dict:
    from .physics.crosscheck import stage_crosscheck

    return stage_crosscheck(run, device=cfg.device)


def _preview_stage(cfg: PipelineConfig, run: RunDir) -> dict:
    from .preview import stage_preview

    return stage_preview(run)


def _export_stage(cfg: PipelineConfig, run: RunDir) -> dict:
    from .export import export_runs

    written: dict[str, Any] = {}
    with run.running_stage("export", {"formats": list(cfg.exports)}) as metrics:
        for fmt in cfg.exports:
            paths = export_runs([run.path], fmt, None)
            written[fmt] = [str(p) for p in paths]
        metrics["files"] = written
    return written


STAGES: list[tuple[str, Callable[[PipelineConfig, RunDir], Any]]] = [
    ("motion", _motion_stage),
    ("track", _track_stage),
    ("crosscheck", _crosscheck_stage),
    ("preview", _preview_stage),
    ("export", _export_stage),
]


def _stage_key(name: str, cfg: PipelineConfig) -> str:
    """Manifest key a stage records itself under."""
    if name == "motion":
        return "gait" if cfg.source == "gait" else "distill"
    return name


def run_pipeline(cfg: PipelineConfig, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every stage (skipping those already done) and return the manifest."""
    if cfg.source not in SOURCES:
        raise ConfigError(f"--source must be one of {SOURCES}, got {cfg.source!r}")
    if not cfg.prompt or not cfg.prompt.strip():
        raise ConfigError("--prompt is empty; describe the motion, e.g. --prompt 'a dog trotting forward'")
    run = RunDir(cfg.out, create=True)
    previous = run.manifest()
    if previous.get("robot") not in (None, cfg.robot) or previous.get("prompt") not in (None, cfg.prompt):
        if not cfg.force:
            raise ConfigError(
                f"{run.path} already holds a run of robot {previous.get('robot')!r} with prompt "
                f"{previous.get('prompt')!r}; choose another --out or pass --force to start over")
    run.update_manifest(robot=cfg.robot, prompt=cfg.prompt,
                        pipeline={"source": cfg.source, "exports": list(cfg.exports), "status": "running"})
    total = len(STAGES)
    for index, (name, func) in enumerate(STAGES, 1):
        key = _stage_key(name, cfg)
        if run.stage_done(key) and not cfg.force:
            echo(f"[{index}/{total}] {key}: done already (skipped; --force re-runs it)")
            continue
        echo(f"[{index}/{total}] {key} ...")
        start = time.perf_counter()
        func(cfg, run)
        echo(f"[{index}/{total}] {key}: {time.perf_counter() - start:.1f} s")
    manifest = run.update_manifest(pipeline={"status": "done"})
    echo(summary_table(run, manifest))
    return manifest


def _fmt(value: Any, unit: str = "", digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return f"{value:.{digits}g}{unit}"
    return str(value)


def summary_table(run: RunDir, manifest: dict[str, Any]) -> str:
    """The ten-second summary: tracking naive vs optimised, MuJoCo agreement, skating, saturation, files."""
    stages = manifest.get("stages", {})
    track = stages.get("track", {}).get("metrics", {})
    cross = stages.get("crosscheck", {}).get("metrics", {})
    motion = stages.get("gait", stages.get("distill", {})).get("metrics", {})
    method = track.get("method", "adam")
    kept = track.get("selected_targets")
    label = method if kept in (None, "optimised") else f"{kept} replay"
    tracked_by = f"{label} ({track.get('engine', 'newton')})" if track else "tracked"
    rows = [
        ("", "naive PD replay", tracked_by),
        ("link position error", _fmt(track.get("naive_link_pos_err_m"), " m"), _fmt(track.get("link_pos_err_m"), " m")),
        ("joint RMSE", _fmt(track.get("naive_joint_rmse_rad"), " rad"), _fmt(track.get("joint_rmse_rad"), " rad")),
        ("root position error", _fmt(track.get("naive_root_pos_err_m"), " m"), _fmt(track.get("root_pos_err_m"), " m")),
        ("root height error (max)", _fmt(track.get("naive_root_height_err_max_m"), " m"),
         _fmt(track.get("root_height_err_max_m"), " m")),
        ("final heading error", _fmt(track.get("naive_heading_err_deg"), " deg"),
         _fmt(track.get("heading_err_deg"), " deg")),
        ("stance slip (contacts)", _fmt(track.get("naive_stance_slip_mps"), " m/s"),
         _fmt(track.get("stance_slip_mps"), " m/s")),
        ("foot skating (heights)", _fmt(track.get("naive_foot_skate_mps"), " m/s"),
         _fmt(track.get("foot_skate_mps"), " m/s")),
        ("contact schedule match", _fmt(track.get("naive_contact_schedule_match")),
         _fmt(track.get("contact_schedule_match"))),
        ("penetration", _fmt(track.get("naive_penetration_m"), " m"), _fmt(track.get("penetration_m"), " m")),
        ("torque saturation", _fmt(track.get("naive_torque_saturation_frac")),
         _fmt(track.get("torque_saturation_frac"))),
        ("fell", _fmt(track.get("naive_fell")), _fmt(track.get("fell"))),
    ]
    width = max(len(r[0]) for r in rows) + 2
    lines = ["", f"AKD run: {run.path}  robot={manifest.get('robot')}  prompt={manifest.get('prompt')!r}", ""]
    lines += [f"  {a:<{width}}{b:>18}{c:>18}" for a, b, c in rows]
    if track.get("selected_targets") == "feedforward" and not track.get("replans"):
        lines.append("  (the inverse-dynamics feedforward replay tracked within "
                     f"{_fmt(track.get('feedforward_ok_m'), ' m')}: the MPC was not needed)")
    elif track.get("selected_targets") in ("naive", "feedforward"):
        kept = track["selected_targets"]
        lines.append(f"  (tracking did not improve on the {kept} replay: its PD targets were kept)")
    if track.get("fell"):
        tilt = _fmt(track.get("max_tilt_deg"), " deg")
        lines.append(f"  THE TRACKED ROBOT FELL (max tilt {tilt}): the motion is not usable as a demonstration")
    if track.get("track_seconds") is not None:
        lines.append(f"  tracking took {_fmt(track.get('track_seconds'), ' s')}")
    lines.append("")
    cop = motion.get("cop_inside_frac")
    lines.append(f"  reference: foot skating {_fmt(motion.get('foot_skate_mps'), ' m/s')}, "
                 f"penetration {_fmt(motion.get('penetration_m'), ' m')}"
                 + (f", CoP inside the support polygon on {100 * cop:.0f} % of stance frames" if cop is not None
                    else ""))
    distilled = stages.get("distill", {}).get("metrics", {})
    if manifest.get("pipeline", {}).get("source") == "sds" and distilled.get("gait_class") is not None:
        lines.append(f"  distilled gait: {distilled['gait_class']} (confidence "
                     f"{_fmt(distilled.get('gait_confidence'), digits=2)}; prompt {manifest.get('prompt')!r})")
    if cross:
        verdict = "PASS" if cross.get("passed") else "FAIL"
        lines.append(f"  cross-check in {cross.get('engine', 'the other engine')}: windowed joint RMSE "
                     f"{_fmt(cross.get('joint_rmse_rad'), ' rad')} (threshold {_fmt(cross.get('threshold'), ' rad')}),"
                     f" root error {_fmt(cross.get('root_pos_err_m'), ' m')} -> {verdict}")
    lines.append("")
    lines.append("  files:")
    for path in sorted(run.path.iterdir()):
        if path.name.startswith("."):
            continue
        lines.append(f"    {path}{'/' if path.is_dir() else ''}")
    lines.append("")
    lines.append(f"  replay on ROS 2:  akd ros replay {run.path}   (or: ros2 launch akd replay.launch.py "
                 f"run_dir:={run.path.resolve()})")
    if (run.path / PREVIEW).exists():
        lines.append(f"  watch:            {run.path / PREVIEW}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .cli import add_robot_options

    add_robot_options(parser)
    parser.add_argument("--prompt", required=True, help="text describing the motion, e.g. 'a dog trotting forward'")
    parser.add_argument("--out", required=True, type=Path, help="run directory (created)")
    parser.add_argument("--source", choices=SOURCES, default="gait",
                        help="gait: procedural gait library (CPU, seconds); sds: SDS distillation from a video prior")
    parser.add_argument("--duration", type=float, default=4.0, help="clip length in seconds (default 4)")
    parser.add_argument("--fps", type=float, default=50.0, help="reference frame rate (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--feet", default=None, help="comma-separated foot link names (default: detected)")
    parser.add_argument("--iterations", type=int, default=None, help="tracking optimisation iterations")
    parser.add_argument("--device", default=None, help="physics device: cpu or cuda (default: cuda if available)")
    parser.add_argument("--export", default=",".join(DEFAULT_EXPORTS),
                        help="comma-separated export formats (hdf5,lerobot,amp,isaaclab-amp,rosbag2 | all | none)")
    parser.add_argument("--force", action="store_true", help="re-run stages that are already done")
    parser.add_argument("--prior", default="cogvideox", help="sds source: cogvideox | tiny")
    parser.add_argument("--video-model", default=None, help="sds source: local diffusers CogVideoX folder (default: "
                                                            "$AKD_VIDEO_MODEL, else the shipped models/akd-gaits-tiny)")
    parser.add_argument("--distill-iterations", type=int, default=None)
    parser.add_argument("--param", choices=("frames", "phase"), default=None,
                        help="sds source: what SDS optimises (akd distill --param; phase: the legs' phases of a "
                             "gait-library stride, continued to --duration)")


def cli(args: argparse.Namespace) -> int:
    exports: tuple[str, ...]
    if args.export in ("", "none"):
        exports = ()
    elif args.export == "all":
        exports = ("hdf5", "lerobot", "amp", "isaaclab-amp", "rosbag2")
    else:
        exports = tuple(x.strip() for x in args.export.split(",") if x.strip())
    cfg = PipelineConfig(
        robot=args.robot, prompt=args.prompt, out=args.out, source=args.source, duration=args.duration, fps=args.fps,
        seed=args.seed, feet=args.feet.split(",") if args.feet else None, package_paths=args.package_path,
        track_iterations=args.iterations, device=args.device, exports=exports, force=args.force, prior=args.prior,
        video_model=args.video_model, distill_iterations=args.distill_iterations, distill_param=args.param)
    run_pipeline(cfg)
    return 0
