"""`akd run`: every stage in order on one run directory, resumable, with a ten-second summary.

motion (gait or sds) -> track -> crosscheck -> preview -> export. A stage whose manifest entry
says "done" is skipped on a re-run (unless ``--force``), so a killed run continues where it
stopped; the long stages (distill, track) also resume from their own checkpoints.

The cross-check runs in a child process beside the main one (``PipelineConfig.concurrent``): started
once the robot exists, it imports Newton/Warp and loads (or compiles) the robot's kernels while the
tracking runs, then replays ``tracked.npz`` while the preview and the export run here. Its Warp
kernels step on one core and the preview renders on the other, so the two cost one wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from akd_core.export import stage_export
from akd_core.io.errors import AKDError, ConfigError, TrackingFailedError
from akd_core.io.rundir import PREVIEW, RunDir
from akd_core.motion.stage import stage_gait
from akd_core.physics.crosscheck import crosscheck_when_told, stage_crosscheck
from akd_core.physics.tracker import stage_track
from akd_core.render.preview import stage_preview
from akd_core.sds.distill import stage_distill

SOURCES = ("gait", "sds")
DEFAULT_EXPORTS = ("hdf5", "lerobot")


@dataclass
class PipelineConfig:
    robot: str
    prompt: str
    out: Path
    source: str = "gait"
    duration: float | None = None  # s (None: 4 for one gait, the sum of its segments for a motion program)
    fps: float = 50.0
    seed: int = 0
    feet: list[str] | None = None
    package_paths: list[str] = field(default_factory=list)
    track_iterations: int | None = None
    track_fast: bool = False  # `akd track --fast` (tracker.FAST_PRESET)
    track_yaw_rate_weight: float | None = None  # `akd track --yaw-rate-weight`
    track_integrator: str | None = None  # `akd track --integrator` (None: by the robot's feet, TrackingConfig)
    # `akd track --control-hz` (None: the reference's fps; FLIGHT_CONTROL_HZ for a clip with flight phases)
    track_control_hz: float | None = None
    device: str | None = None
    exports: tuple[str, ...] = DEFAULT_EXPORTS
    force: bool = False
    # sds source
    prior: str = "cogvideox"
    video_model: str | None = None
    distill_iterations: int | None = None
    distill_param: str | None = None  # akd distill's --param (None: the model folder's akd.json, else frames)
    distill_init: str | None = None  # akd distill's --init (None: constant, a neutral start)
    concurrent: bool = True  # cross-check in a child process beside preview/export (False: strictly in order)
    link_err_limit_m: float | None = None  # `akd track --link-err-limit` (None: the clip's motion-class limit)
    keep_failed: bool = False  # export a clip that failed its verdict (marked success=False) and return normally
    commands: str | None = None  # a command timeline file (akd_core.motion.program), source gait only
    terrain: str | None = None  # --terrain SPEC|FILE (akd_core.model.terrain), source gait only


def _motion_stage(cfg: PipelineConfig, run: RunDir) -> dict:
    if cfg.source == "gait":

        return stage_gait(run, robot_spec=cfg.robot, prompt=cfg.prompt, duration=cfg.duration, fps=cfg.fps,
                          seed=cfg.seed, feet=cfg.feet, package_paths=cfg.package_paths, commands=cfg.commands,
                          terrain=cfg.terrain)
    if cfg.commands or cfg.terrain:
        raise ConfigError("--commands and --terrain make their clip from the gait library; use them with --source "
                          "gait")

    return stage_distill(run, robot_spec=cfg.robot, prompt=cfg.prompt, prior=cfg.prior, video_model=cfg.video_model,
                         iterations=cfg.distill_iterations, init=cfg.distill_init, duration=cfg.duration,
                         seed=cfg.seed,
                         package_paths=cfg.package_paths, resume=True,
                         config_overrides={"param": cfg.distill_param} if cfg.distill_param else None)


def _track_stage(cfg: PipelineConfig, run: RunDir) -> dict:

    return stage_track(run, iterations=cfg.track_iterations, device=cfg.device, seed=cfg.seed, fast=cfg.track_fast,
                       integrator=cfg.track_integrator, control_hz=cfg.track_control_hz,
                       link_err_limit_m=cfg.link_err_limit_m, yaw_rate_weight=cfg.track_yaw_rate_weight)


def _crosscheck_stage(cfg: PipelineConfig, run: RunDir) -> dict:

    return stage_crosscheck(run, device=cfg.device)


def _preview_stage(cfg: PipelineConfig, run: RunDir) -> dict:

    return stage_preview(run)


def _export_stage(cfg: PipelineConfig, run: RunDir) -> dict:
    if not cfg.exports:  # --export none: the stage is recorded, nothing is written
        with run.running_stage("export", {"formats": []}) as metrics:
            metrics["files"] = {}
        return metrics
    return stage_export(run, list(cfg.exports))  # no quality gates: a fallen run's dataset says success=False


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
    todo = {name: cfg.force or not run.stage_done(_stage_key(name, cfg)) for name, _ in STAGES}
    background: BackgroundCrosscheck | None = None
    try:
        for index, (name, func) in enumerate(STAGES, 1):
            key = _stage_key(name, cfg)
            if not todo[name]:
                echo(f"[{index}/{total}] {key}: done already (skipped; --force re-runs it)")
                continue
            if (background is None and name != "motion" and cfg.concurrent and todo["crosscheck"]
                    and any(todo[other] for other in ("track", "preview", "export"))):
                background = BackgroundCrosscheck(run, cfg.device)  # needs the robot: after the motion stage
            if name == "export" and not cfg.keep_failed and _failure_reasons(run):
                echo(f"[{index}/{total}] {key}: skipped, the tracked clip failed (--keep-failed exports it)")
                continue
            if name == "crosscheck" and background is not None:
                background.go()
                echo(f"[{index}/{total}] {key} ... (in the background, beside the next stages)")
                continue
            echo(f"[{index}/{total}] {key} ...")
            start, cpu = time.perf_counter(), time.process_time()
            func(cfg, run)
            # CPU seconds too: on a shared machine the wall time says more about the neighbours than about the stage
            echo(f"[{index}/{total}] {key}: {time.perf_counter() - start:.1f} s "
                 f"(CPU {time.process_time() - cpu:.1f} s)")
        if background is not None:
            index = [name for name, _ in STAGES].index("crosscheck") + 1
            waited = background.wait()
            echo(f"[{index}/{total}] crosscheck: {run.stage('crosscheck').get('seconds', 0.0):.1f} s "
                 f"(waited {waited:.1f} s for it after the other stages)")
    finally:
        if background is not None:
            background.stop()
    reasons = _failure_reasons(run)
    manifest = run.update_manifest(pipeline={"status": "failed" if reasons else "done"})
    echo(summary_table(run, manifest))
    if reasons and not cfg.keep_failed:
        raise TrackingFailedError(
            f"{run.path}: the tracked clip FAILED: {'; '.join(reasons)}. manifest.json records it (verdict); the "
            f"preview shows it, and nothing was exported. Try a slower speed or another gait, or pass --keep-failed "
            "to export it anyway (marked success=False).")
    return manifest


def _failure_reasons(run: RunDir) -> list[str]:
    """Why the run's tracked clip failed its verdict (empty: it passed, or it is not tracked yet)."""
    return list(run.stage("track").get("metrics", {}).get("failure_reasons") or [])


class BackgroundCrosscheck:
    """`akd crosscheck` in a child process (spawned: torch, MuJoCo and Warp state must not be forked). It starts
    importing Newton and warming the robot's kernels at once, and replays ``tracked.npz`` when told to
    (:meth:`go`); :meth:`wait` returns when it is done and raises what it raised."""

    def __init__(self, run: RunDir, device: str | None):
        ctx = get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=crosscheck_when_told, args=(str(run.path), device, child), daemon=True,
                                    name="akd-crosscheck")
        self._process.start()
        child.close()

    def go(self) -> None:
        self._conn.send("go")

    def wait(self) -> float:
        """Seconds spent waiting; raises the child's error (an AKDError as itself)."""
        start = time.perf_counter()
        try:
            status, error = self._conn.recv()
        except EOFError:
            self._process.join()
            raise AKDError(f"the cross-check process ended without a result (exit code {self._process.exitcode}); "
                           "run `akd crosscheck RUN` alone to see why") from None
        self._process.join()
        if status != "done":
            raise error
        return time.perf_counter() - start

    def stop(self) -> None:
        """End the child if it is still running (an error or Ctrl-C in the main process)."""
        if self._process.is_alive():
            try:
                self._conn.send("stop")
            except (BrokenPipeError, OSError):
                pass
            self._process.join(timeout=2.0)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()
        self._conn.close()


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
        ("touch-down speed (horizontal)", _fmt(track.get("naive_touchdown_speed_mps"), " m/s"),
         _fmt(track.get("touchdown_speed_mps"), " m/s")),
        ("foot skating (heights)", _fmt(track.get("naive_foot_skate_mps"), " m/s"),
         _fmt(track.get("foot_skate_mps"), " m/s")),
        ("contact schedule match", _fmt(track.get("naive_contact_schedule_match")),
         _fmt(track.get("contact_schedule_match"))),
        ("penetration", _fmt(track.get("naive_penetration_m"), " m"), _fmt(track.get("penetration_m"), " m")),
        ("feet on edges", _fmt(track.get("naive_feet_on_edges_frac")), _fmt(track.get("feet_on_edges_frac"))),
        ("non-foot contact frames", _fmt(track.get("naive_non_foot_contact_frac")),
         _fmt(track.get("non_foot_contact_frac"))),
        ("torque saturation", _fmt(track.get("naive_torque_saturation_frac")),
         _fmt(track.get("torque_saturation_frac"))),
        ("final root error", _fmt(track.get("naive_final_root_err_m"), " m"),
         _fmt(track.get("final_root_err_m"), " m")),
        ("fell", _fmt(track.get("naive_fell")), _fmt(track.get("fell"))),
    ]
    if "sole_on_one_tread_frac" in track:  # bipeds
        rows.insert(-3, ("sole on one tread", _fmt(track.get("naive_sole_on_one_tread_frac")),
                         _fmt(track.get("sole_on_one_tread_frac"))))
    width = max(len(r[0]) for r in rows) + 2
    col = max(18, *(len(r[1]) + 2 for r in rows), *(len(r[2]) + 2 for r in rows))  # headers never run together
    lines = ["", f"AKD run: {run.path}  robot={manifest.get('robot')}  prompt={manifest.get('prompt')!r}", ""]
    lines += [f"  {a:<{width}}{b:>{col}}{c:>{col}}" for a, b, c in rows]
    if track.get("selected_targets") == "feedforward" and not track.get("replans"):
        lines.append("  (the inverse-dynamics feedforward replay tracked within "
                     f"{_fmt(track.get('feedforward_ok_m'), ' m')}: the MPC was not needed)")
    elif track.get("selected_targets") in ("naive", "feedforward"):
        kept = track["selected_targets"]
        lines.append(f"  (tracking did not improve on the {kept} replay: its PD targets were kept)")
    if track.get("failure_reasons"):
        lines.append(f"  FAILED: {'; '.join(track['failure_reasons'])}")
    elif track.get("tracking_passed"):
        lines.append(f"  passed: link error {_fmt(track.get('link_pos_err_m'), ' m')} <= "
                     f"{_fmt(track.get('link_err_limit_m'), ' m')} (the limit for {track.get('motion_class')} clips)")
    if track.get("segments"):
        lines.append("  segments (tracked, steady part of each):")
        for seg in track["segments"]:
            cmd, got = seg.get("command") or {}, seg.get("achieved") or {}
            seen = (seg.get("gait_seen") or {}).get("gait")
            lines.append(f"    {seg['segment']:>2} {seg['start_s']:6.2f}-{seg['end_s']:6.2f} s {seg['pattern']:<7} "
                         f"vx {_fmt(got.get('vx_mps'), digits=2)}/{_fmt(cmd.get('vx_mps'), digits=2)} m/s, yaw "
                         f"{_fmt(got.get('yaw_rate_radps'), digits=2)}/{_fmt(cmd.get('yaw_rate_radps'), digits=2)} "
                         f"rad/s, link {_fmt(seg.get('link_pos_err_m'), ' m')}"
                         + (f", slip {_fmt(seg['stance_slip_mps'], ' m/s')}" if seg.get("stance_slip_mps") is not None
                            else "")
                         + (f", seen {seen}" if seen else "") + ("" if seg.get("passed") else "  FAILED"))
    if track.get("non_foot_contact_links"):
        lines.append(f"  touching the ground besides the feet: {', '.join(track['non_foot_contact_links'])}")
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
