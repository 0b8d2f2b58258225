"""Dataset and bag export of run directories: ``akd export RUN [RUN...] --format FMT [-o PATH]``.

Formats (docs/formats.md describes every field):

- ``hdf5``          one robomimic / Isaac Lab HDF5 file, one ``data/demo_N`` per run (needs tracked.npz)
- ``lerobot``       one LeRobot v3.0 dataset folder, one episode per run, the prompt as task (needs tracked.npz)
- ``amp``           one legged_gym AMP ``.txt`` per run (tracked states, else the reference clip)
- ``isaaclab-amp``  one Isaac Lab AMP ``.npz`` per run (tracked states, else the reference clip)
- ``rosbag2``       one MCAP rosbag2 folder per run
- motion files for RL-tracking trainers, one per run (:mod:`.motion_files`; tracked states, else the reference):
  ``mjlab``, ``beyondmimic`` (npz), ``gmr``, ``mimickit`` (pickle), ``protomotions`` (``.motion``),
  ``locomujoco`` (Trajectory npz), ``amp-rsl-rl`` (``.npy``); ``target_model`` names the trainer's robot model
  (MJCF; a URDF for beyondmimic) whose body and joint order they follow
- ``all``           every format above

Default outputs live in the run: ``RUN/export/dataset.hdf5``, ``RUN/export/lerobot/``, ``RUN/export/<run>.txt``,
``RUN/export/<run>.npz``, ``RUN/export/rosbag2/``, ``RUN/export/<run>.<format>.<ext>`` (motion files); they are
rebuilt on every export. With ``-o PATH`` a dataset format appends the runs to an existing dataset (``--overwrite``
starts it afresh); a per-run format writes ``PATH`` itself for one run (a file, or the bag folder) or
``PATH/<run name>.<ext>`` for several.
Every file is written under a temporary name and renamed, so a crash never leaves half a dataset.

A run made on a terrain carries it (:mod:`akd_core.export.terrain`): every export writes ``RUN/scene.xml`` (the robot
on the terrain, MJCF), HDF5 demos and LeRobot episodes store the terrain's kind, spec and height grid, and each
per-run file gets ``<file>.terrain.npz`` and ``<file>.scene.xml`` beside it.

`akd export` applies the quality gates (:mod:`akd_core.export.quality`): of several runs it exports those that pass and
lists the others with their reasons (``<-o PATH>.summary.json``; exit 1 when none passes); one run that fails a gate
is refused with :class:`~akd_core.io.errors.QualityGateError` naming it. ``--include-rejected`` overrides.
:func:`export_runs` itself applies no gate (only the URDF-limit check).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from akd_core.export.amp import read_amp_txt, read_isaaclab_amp, write_amp_txt, write_isaaclab_amp
from akd_core.export.common import (
    DATASET_FORMATS,
    FORMATS,
    MOTION_FORMATS,
    PER_RUN_FORMATS,
    Episode,
    check_episode_limits,
    load_episode,
)
from akd_core.export.hdf5 import read_hdf5, write_hdf5
from akd_core.export.lerobot import read_lerobot, write_lerobot
from akd_core.export.motion_files import SUFFIX as MOTION_SUFFIX
from akd_core.export.motion_files import read_motion_file, write_motion_file
from akd_core.export.quality import GATE_OPTIONS, QualityGates, assess_run, clip_of
from akd_core.export.rosbag import read_rosbag, write_rosbag
from akd_core.export.terrain import ensure_run_scene, terrain_record, write_run_scene, write_sidecars
from akd_core.io.errors import AKDError, ConfigError, QualityGateError
from akd_core.io.rundir import RunDir

if TYPE_CHECKING:
    from akd_core.export.quality import QualityGates

log = logging.getLogger(__name__)

EXPORT_DIR = "export"
_SUFFIX = {"amp": ".txt", "isaaclab-amp": ".npz", "rosbag2": "", **MOTION_SUFFIX}


def parse_formats(spec: str | list[str] | tuple[str, ...]) -> list[str]:
    """"hdf5,lerobot" | "all" | ["amp", ...] -> validated list of formats (order kept, duplicates dropped)."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    formats: list[str] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        expanded = list(FORMATS) if item == "all" else [item]
        for fmt in expanded:
            if fmt not in FORMATS:
                raise ConfigError(f"unknown export format {fmt!r}; choose from {', '.join(FORMATS)} or 'all'")
            if fmt not in formats:
                formats.append(fmt)
    if not formats:
        raise ConfigError(f"no export format given; choose from {', '.join(FORMATS)} or 'all'")
    return formats


def default_output(run_dir: Path, fmt: str) -> Path:
    """Where a run's own export of ``fmt`` goes when no -o is given."""
    folder = Path(run_dir) / EXPORT_DIR
    named = {"hdf5": "dataset.hdf5", "lerobot": "lerobot", "rosbag2": "rosbag2"}
    if fmt in MOTION_FORMATS:  # several of them share a suffix: <run>.<format>.<ext>
        return folder / f"{Path(run_dir).resolve().name}.{fmt}{_SUFFIX[fmt]}"
    return folder / named[fmt] if fmt in named else folder / f"{Path(run_dir).resolve().name}{_SUFFIX[fmt]}"


def _target(fmt: str, out: Path | None, run_dirs: list[Path], several_formats: bool) -> Path | None:
    """The dataset path (dataset formats) or output folder/file (per-run formats) of ``fmt`` under ``out``."""
    if out is None:
        return None
    if several_formats:  # `all` (or a list) with -o: one sub-path per format
        return out / {"hdf5": "dataset.hdf5", "lerobot": "lerobot"}.get(fmt, fmt)
    return out


def _per_run_path(fmt: str, run_dir: Path, target: Path | None, single: bool) -> Path:
    if target is None:
        return default_output(run_dir, fmt)
    suffix = _SUFFIX[fmt]
    if single and (fmt == "rosbag2" or target.suffix == suffix):
        return target
    return target / f"{Path(run_dir).resolve().name}{suffix}"


def export_runs(run_dirs: list[str | Path], fmt: str, out: str | Path | None = None, *, append: bool | None = None,
                allow_out_of_limits: bool = False, source: str = "auto", loop_mode: str = "Wrap",
                target_model: str | Path | None = None, start_ns: int | None = None, progress: bool = True,
                episodes: dict[tuple[Path, str], Episode] | None = None, several: bool = False) -> list[Path]:
    """Export runs in one format (or several: "hdf5,amp", "all"); returns the written paths.

    Dataset formats (hdf5, lerobot) put every run in one dataset (one episode each); per-run formats write one
    file/folder per run. ``append`` (dataset formats): add to an existing dataset; default True with ``out``,
    False (rebuild) for the run's own default output. ``source`` ("auto" | "tracked" | "reference") picks the
    clip of the per-run formats; dataset formats always need the tracked clip. ``episodes``: episodes already
    loaded, by (run dir, clip wanted); the limit check still applies to them. ``several``: lay out per-run outputs
    as for several runs (``PATH/<run>.<ext>``) even when one is given. ``loop_mode`` is the AMP ``.txt`` LoopMode and
    MimicKit's loop mode; ``target_model`` the trainer's robot model that the motion files follow. No quality gate is
    applied here: :func:`export_gated` (`akd export`, `akd batch`) leaves out the runs that fail them."""
    run_dirs = [Path(r) for r in run_dirs]
    if not run_dirs:
        raise ConfigError("no run directory given; pass one or more RUN folders")
    formats = parse_formats(fmt)
    out = Path(out) if out is not None else None
    if out is None and len(run_dirs) > 1 and any(f in DATASET_FORMATS for f in formats):
        raise ConfigError("several runs go into one dataset: name it with -o PATH "
                          "(e.g. -o datasets/walks.hdf5 or -o datasets/walks_lerobot)")
    cache: dict[tuple[Path, str], Episode] = dict(episodes or {})

    def episode_of(run_dir: Path, wanted: str) -> Episode:
        key = (run_dir, wanted)
        if key not in cache:
            cache[key] = load_episode(run_dir, wanted, check_limits=False)
        if not allow_out_of_limits:
            check_episode_limits(cache[key])
        return cache[key]

    for run_dir in run_dirs:  # the robot on its terrain, RUN/scene.xml (nothing for flat ground)
        _quietly(ensure_run_scene, run_dir)
    written: list[Path] = []
    for fmt_name in formats:
        target = _target(fmt_name, out, run_dirs, len(formats) > 1)
        wanted = "tracked" if fmt_name in DATASET_FORMATS else source
        clips = [episode_of(r, wanted) for r in tqdm(run_dirs, desc=f"export {fmt_name}", unit="run",
                                                      disable=not progress or len(run_dirs) < 2)]
        if fmt_name in DATASET_FORMATS:
            path = target if target is not None else default_output(run_dirs[0], fmt_name)
            keep = append if append is not None else target is not None
            writer = write_hdf5 if fmt_name == "hdf5" else write_lerobot
            written.append(writer(clips, path, append=keep))
        else:
            for episode in clips:
                path = _per_run_path(fmt_name, episode.run_dir, target, len(run_dirs) == 1 and not several)
                if fmt_name == "amp":
                    written.append(write_amp_txt(episode, path, loop_mode=loop_mode))
                elif fmt_name == "isaaclab-amp":
                    written.append(write_isaaclab_amp(episode, path))
                elif fmt_name in MOTION_FORMATS:
                    written.append(write_motion_file(episode, fmt_name, path, target_model=target_model,
                                                     loop_mode=loop_mode))
                else:
                    written.append(write_rosbag(episode, path, start_ns=start_ns))
                _quietly(write_sidecars, episode.run_dir, written[-1])  # <file>.terrain.npz, <file>.scene.xml
        log.debug("export %s: %s", fmt_name, ", ".join(str(p) for p in written))
    return written


def _quietly(write, run_dir: Path, *args: Any) -> None:
    """Write a run's terrain files; a failure there (a robot MuJoCo cannot compile, say) is a warning: the dataset or
    motion file itself is what was asked for, and the run's terrain.npz still describes the ground."""
    try:
        write(run_dir, *args)
    except (AKDError, OSError, ValueError) as exc:
        log.warning("%s: the terrain files were not written (%s)", run_dir, exc)


def export_gated(run_dirs: list[str | Path], fmt: str | list[str], out: str | Path | None = None, *,
                 gates: QualityGates | None = None, include_rejected: bool = False, source: str = "auto",
                 progress: bool = True, **options: Any) -> dict[str, Any]:
    """`akd export` of several runs: judge each run by the quality gates (:mod:`akd_core.export.quality`) and export the
    runs that pass (all that can be exported with ``include_rejected``). One bad run never costs the others.

    Returns ``{"formats", "output", "quality" (the gates + include_rejected), "runs": [{"name", "run_dir",
    "passed", "included", "reasons", "quality" (figures)}], "included", "excluded", "written": {fmt: [paths]}}``;
    nothing is written when no run is included. ``options`` go to :func:`export_runs` (append, loop_mode, ...)."""

    gates = gates if gates is not None else QualityGates()
    formats = parse_formats(fmt)
    run_dirs = [Path(r) for r in run_dirs]
    if not run_dirs:
        raise ConfigError("no run directory given; pass one or more RUN folders")
    if out is None and len(run_dirs) > 1 and any(f in DATASET_FORMATS for f in formats):
        raise ConfigError("several runs go into one dataset: name it with -o PATH "
                          "(e.g. -o datasets/walks.hdf5 or -o datasets/walks_lerobot)")
    rows: list[dict[str, Any]] = []
    cache: dict[tuple[Path, str], Episode] = {}
    for run_dir in tqdm(run_dirs, desc="quality gates", unit="run", disable=not progress or len(run_dirs) < 2):
        clip = clip_of(run_dir, formats, source)
        quality, episode = assess_run(run_dir, gates, clip, include_rejected)
        if episode is not None:
            cache[(run_dir, clip)] = episode
            if source == "auto":
                cache[(run_dir, "auto")] = episode
        rows.append({"name": run_dir.resolve().name, "run_dir": str(run_dir), "passed": quality.passed,
                     "included": quality.included, "reasons": quality.reasons, "quality": quality.figures})
    included = [Path(r["run_dir"]) for r in rows if r["included"]]
    written: dict[str, list[str]] = {}
    if included:
        for fmt_name in formats:
            target = _target(fmt_name, Path(out), run_dirs, len(formats) > 1) if out is not None else None
            paths = export_runs(included, fmt_name, target, source=source, progress=progress, episodes=cache,
                                allow_out_of_limits=gates.allow_limit_violations or include_rejected,
                                several=len(run_dirs) > 1, **options)
            written[fmt_name] = [str(p) for p in paths]
    return {"formats": formats, "output": None if out is None else str(out),
            "quality": {**gates.to_dict(), "include_rejected": include_rejected}, "runs": rows,
            "included": len(included), "excluded": len(rows) - len(included), "written": written}


def _refusal(run: RunDir, reasons: list[str]) -> QualityGateError:
    import re

    gates = [g for r in reasons for g in re.findall(r"gate (\w+)", r)]
    options = [GATE_OPTIONS[g] + (" VALUE|none" if g.startswith(("max_", "min_")) else "")
               for g in dict.fromkeys(gates) if g in GATE_OPTIONS]
    relax = f"relax the gate{'s' if len(options) > 1 else ''} ({', '.join(options)}), " if options else ""
    return QualityGateError(
        f"{run.path} is not a usable demonstration, so it was not exported: {'; '.join(reasons)}. "
        f"Fix the run, {relax}or pass --include-rejected to export it anyway (the dataset then marks it)")


def stage_export(run: RunDir, formats: str | list[str] = "hdf5,lerobot", out: str | Path | None = None, *,
                 gates: QualityGates | None = None, include_rejected: bool = False,
                 **options: Any) -> dict[str, Any]:
    """`akd export RUN`: the run's exports, recorded as stage "export" in its manifest. Returns the metrics.

    With ``gates`` (as `akd export` does) a run that fails one is refused with :class:`QualityGateError` naming the
    gate, unless ``include_rejected``; the verdict is recorded under the stage's ``quality`` metric."""
    formats = parse_formats(formats)
    verdict = None
    if gates is not None:

        quality, episode = assess_run(run.path, gates, clip_of(run.path, formats, options.get("source", "auto")),
                                      include_rejected)
        # a run that cannot be loaded at all is left to the export below, whose error names the missing file
        if episode is not None:
            if not quality.included:
                raise _refusal(run, quality.reasons)
            verdict = {"passed": quality.passed, "reasons": quality.reasons, "include_rejected": include_rejected}
            options["allow_out_of_limits"] = (options.get("allow_out_of_limits", False)
                                              or gates.allow_limit_violations or include_rejected)
    config = {"formats": formats, "out": str(out) if out else None,
              **{k: v for k, v in options.items() if k != "progress"},
              **({"quality": gates.to_dict(), "include_rejected": include_rejected} if gates is not None else {})}
    with run.running_stage("export", config) as metrics:
        files: dict[str, list[str]] = {}
        for fmt in formats:
            target = _target(fmt, Path(out), [run.path], len(formats) > 1) if out is not None else None
            files[fmt] = [str(p) for p in export_runs([run.path], fmt, target, **options)]
        metrics["files"] = files
        episode = load_episode(run.path, "auto", check_limits=False)
        metrics["num_samples"] = episode.num_samples
        metrics["duration_s"] = round(episode.num_samples * episode.dt, 6)
        metrics["source"] = episode.source
        if verdict is not None:
            metrics["quality"] = verdict
    return metrics


def summary_path(out: Path | None, explicit: Path | None) -> Path | None:
    """Where `akd export` of several runs writes its summary: ``--summary PATH``, else ``<-o PATH>.summary.json``
    beside the output (none without -o)."""
    if explicit is not None:
        return explicit
    if out is None:
        return None
    return out.with_name(out.name + ".summary.json")


__all__ = ["Episode", "load_episode", "export_runs", "export_gated", "stage_export", "parse_formats", "default_output",
           "write_hdf5", "read_hdf5", "write_lerobot", "read_lerobot", "write_amp_txt", "read_amp_txt",
           "write_isaaclab_amp", "read_isaaclab_amp", "write_rosbag", "read_rosbag", "write_motion_file",
           "read_motion_file", "terrain_record", "write_run_scene", "FORMATS", "DATASET_FORMATS", "PER_RUN_FORMATS",
           "MOTION_FORMATS"]
