"""`akd batch`: sweeps of robots x prompts x seeds, run locally or on a Ray cluster, into one dataset.

A sweep YAML expands into jobs; each job is one `akd run` in its own run directory under
``out``, named from its parameters. Jobs are independent and idempotent: a job whose manifest
says the pipeline finished is skipped, a failing job is recorded with its error and does not
stop the others, and Ctrl-C stops cleanly (a re-run resumes). Every finished run is judged by the
sweep's quality gates (``quality:``, :mod:`akd_core.export.quality`): the runs that pass are aggregated into
one dataset per export format under ``out/dataset/`` (rebuilt each time), the others are listed with
their reasons. ``out/summary.json`` / ``summary.csv`` are written after every sweep, even when jobs
fail, nothing passes, or the sweep is interrupted (docs/formats.md, "summary.json").

Backends: ``local`` (a process pool, one worker by default) and ``ray`` (one Ray task per job
with CPU/GPU requests and retries on worker loss; ``--address`` joins an existing cluster).

The motion library (`akd library`, :mod:`akd_core.library`) runs its clips through the same jobs and backends
(:func:`execute_jobs`): a job may follow a command timeline (``Job.commands``) and keep a clip whose tracking failed
its verdict as a finished run (``Job.keep_failed``), which the quality gates then leave out.
"""

from __future__ import annotations

import csv
import json
import logging
import re
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from tqdm import tqdm

from akd_core.export import export_runs
from akd_core.export.quality import QualityGates, assess_run, figures_of, quality_table
from akd_core.io.errors import AKDError, ConfigError, DependencyError
from akd_core.io.fileio import atomic_path, write_json_atomic
from akd_core.io.rundir import RunDir
from akd_core.physics.targets import reference_control_hz
from akd_core.pipeline import PipelineConfig, run_pipeline

log = logging.getLogger(__name__)

SWEEP_KEYS = {"out", "robots", "package_paths", "prompts", "seeds", "source", "duration", "fps", "export",
              "iterations", "fast", "device", "prior", "video_model", "feet", "cpus_per_job", "gpus_per_job",
              "quality"}
SUMMARY_SCHEMA = 1


@dataclass
class Sweep:
    out: Path
    robots: list[str]
    prompts: list[str]
    seeds: list[int] = field(default_factory=lambda: [0])
    package_paths: list[str] = field(default_factory=list)
    source: str = "gait"
    duration: float = 4.0
    fps: float = 50.0
    export: list[str] = field(default_factory=lambda: ["hdf5", "lerobot"])
    iterations: int | None = None
    fast: bool = False  # `akd track --fast` (the MPC preset of tracker.FAST_PRESET)
    yaw_rate_weight: float | None = None  # `akd track --yaw-rate-weight`
    device: str | None = None
    prior: str = "cogvideox"
    video_model: str | None = None
    feet: list[str] | None = None
    cpus_per_job: float = 1.0
    gpus_per_job: float | None = None  # default: 1 for sds jobs, 0 otherwise
    quality: QualityGates = field(default_factory=QualityGates)


@dataclass
class Job:
    name: str
    run_dir: str
    robot: str
    prompt: str
    seed: int
    sweep: dict[str, Any]
    commands: str | None = None  # a command timeline file (`akd run --commands`), gait source only
    keep_failed: bool = False  # a clip that fails its tracking verdict is a finished run (left to the quality gates)


def load_sweep(path: str | Path) -> Sweep:
    """Parse and check a sweep YAML (relative paths are relative to the YAML's folder)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"sweep file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the sweep must be a mapping of keys (out, robots, prompts, seeds, ...)")
    unknown = sorted(set(data) - SWEEP_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown keys {unknown}; valid keys are {sorted(SWEEP_KEYS)}")
    for key in ("out", "robots", "prompts"):
        if not data.get(key):
            raise ConfigError(f"{path}: '{key}' is required (see README, 'Many runs at once')")
    base = path.parent
    for key in ("robots", "prompts", "seeds", "export", "package_paths"):
        if key in data and not isinstance(data[key], list):
            data[key] = [data[key]]

    def local(p: str) -> str:
        candidate = Path(p).expanduser()
        return str(candidate if candidate.is_absolute() or not (base / candidate).exists() else base / candidate)

    data["robots"] = [local(str(r)) if (str(r).endswith((".urdf", ".xml")) or "/" in str(r)) else str(r)
                      for r in data["robots"]]
    data["package_paths"] = [local(str(p)) for p in data.get("package_paths", [])]
    out = Path(data["out"]).expanduser()
    data["out"] = out if out.is_absolute() else base / out
    if data.get("source", "gait") not in ("gait", "sds"):
        raise ConfigError(f"{path}: 'source' must be gait or sds, got {data['source']!r}")
    data["quality"] = QualityGates.from_mapping(data.get("quality"), f"{path}: quality")
    try:
        return Sweep(**data)
    except TypeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def _slug(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "x"


def robot_label(robot: str) -> str:
    """A sweep's robot entry as a short name: a built-in name, a URDF's or MJCF's file stem (a MuJoCo
    ``scene*.xml``: its folder's name, e.g. unitree_g1), or the NAME of ``menagerie:NAME``."""
    if robot.startswith("menagerie:"):
        robot = robot.split(":", 1)[1].strip("/")
        return robot if not robot.endswith(".xml") else robot_label(robot)
    if robot.endswith((".urdf", ".xml")):
        path = Path(robot)
        return path.parent.name if path.stem.startswith("scene") and path.parent.name else path.stem
    return robot


def expand_jobs(sweep: Sweep) -> list[Job]:
    jobs, common = [], {k: v for k, v in asdict(sweep).items()
                        if k not in ("robots", "prompts", "seeds", "out", "quality")}
    for robot in sweep.robots:
        robot_name = robot_label(robot)
        for prompt in sweep.prompts:
            for seed in sweep.seeds:
                name = f"{_slug(robot_name, 24)}__{_slug(prompt)}__seed{seed}"
                # a clip that fails its tracking verdict is a finished run: the gate allow_failed_tracking
                # leaves it out with its reason, and --include-rejected can put it in (marked success=False)
                jobs.append(Job(name=name, run_dir=str(Path(sweep.out) / name), robot=robot, prompt=prompt,
                                seed=int(seed), sweep=common, keep_failed=True))
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ConfigError("two jobs of the sweep map to the same run directory name; make robots/prompts distinct")
    return jobs


def job_done(job: Job) -> bool:
    """Whether the job's pipeline finished: "done", or (``keep_failed``) "failed", i.e. ran to the end with a tracked
    clip that failed its verdict. A run that crashed or was interrupted is not done and runs again (it resumes)."""
    manifest = Path(job.run_dir) / "manifest.json"
    if not manifest.exists():
        return False
    try:
        status = json.loads(manifest.read_text()).get("pipeline", {}).get("status")
    except json.JSONDecodeError:
        return False
    return status == "done" or (job.keep_failed and status == "failed")


def _record(job: Job, **fields: Any) -> dict[str, Any]:
    return {"name": job.name, "run_dir": job.run_dir, "robot": job.robot, "prompt": job.prompt, "seed": job.seed,
            **fields}


def run_job(job: Job) -> dict[str, Any]:
    """Run one job's pipeline (in a worker process); never raises: failures come back as records."""

    start = time.perf_counter()
    if job_done(job):
        return _record(job, status="skipped", seconds=0.0)
    record = _record(job)
    s = job.sweep
    cfg = PipelineConfig(robot=job.robot, prompt=job.prompt, out=Path(job.run_dir), source=s["source"],
                         duration=s["duration"], fps=s["fps"], seed=job.seed, feet=s.get("feet"),
                         package_paths=list(s.get("package_paths", [])), track_iterations=s.get("iterations"),
                         track_fast=bool(s.get("fast", False)), track_yaw_rate_weight=s.get("yaw_rate_weight"),
                         device=s.get("device"), exports=(),
                         prior=s.get("prior", "cogvideox"), video_model=s.get("video_model"),
                         commands=job.commands, keep_failed=job.keep_failed,
                         # one control rate for every clip of the sweep's datasets (a dataset has one fps), the
                         # sweep's frame rate: a flight gait is not raised to tracker.FLIGHT_CONTROL_HZ here
                         track_control_hz=reference_control_hz(s["fps"]),
                         concurrent=False)  # the jobs already share the cores: one process each
    try:
        run_pipeline(cfg, echo=lambda _msg: None)
        record["status"] = "done"
    except AKDError as exc:
        record.update(status="failed", error=str(exc).split("\n")[0])
    except Exception as exc:  # an unexpected crash of one job must not stop the sweep
        record.update(status="failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    record["seconds"] = round(time.perf_counter() - start, 2)
    return record


# ----------------------------------------------------------------------------- backends
def _run_local(jobs: list[Job], max_parallel: int, bar: tqdm, results: list[dict[str, Any]]) -> None:
    ctx = get_context("spawn")  # torch/Warp state must not be forked
    with ProcessPoolExecutor(max_workers=max_parallel, mp_context=ctx) as pool:
        pending: dict[Future, Job] = {pool.submit(run_job, job): job for job in jobs}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    job = pending.pop(fut)
                    try:
                        results.append(fut.result())
                    except Exception as exc:  # worker process died
                        results.append(_record(job, status="failed",
                                               error=f"worker lost: {type(exc).__name__}: {exc}"))
                    bar.update(1)
        except KeyboardInterrupt:
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _run_ray(jobs: list[Job], address: str | None, max_parallel: int, bar: tqdm, results: list[dict[str, Any]],
             cpus_per_job: float = 1.0, gpus_per_job: float = 0.0) -> None:
    try:
        import ray
    except ImportError as exc:
        raise DependencyError("--backend ray needs Ray: pip install 'ray>=2.40' (or pip install -e '.[ray]')") from exc
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(1, int(max_parallel * cpus_per_job)), log_to_driver=False,
                     include_dashboard=False)
    remote = ray.remote(num_cpus=cpus_per_job, num_gpus=gpus_per_job, max_retries=2)(run_job)
    refs = {remote.remote(job): job for job in jobs}
    try:
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                job = refs.pop(ref)
                try:
                    results.append(ray.get(ref))
                except Exception as exc:  # retries exhausted (worker/node lost)
                    results.append(_record(job, status="failed",
                                           error=f"ray task failed: {type(exc).__name__}: {str(exc)[:300]}"))
                bar.update(1)
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started_here:
            ray.shutdown()


def execute_jobs(jobs: list[Job], results: list[dict[str, Any]], backend: str = "local", address: str | None = None,
                 max_parallel: int = 1, cpus_per_job: float = 1.0, gpus_per_job: float = 0.0,
                 bar: tqdm | None = None) -> None:
    """Run ``jobs`` on a backend ("local": a process pool of ``max_parallel`` workers; "ray": one task per job,
    joining the cluster at ``address`` or starting a local one), appending one record per job to ``results`` as each
    finishes (so a caller that catches KeyboardInterrupt keeps the records of the jobs that did) and advancing
    ``bar``. A failing job is a record with its error, never an exception."""
    if backend not in ("local", "ray"):
        raise ConfigError(f"--backend must be local or ray, got {backend!r}")
    if not jobs:
        return
    bar = bar if bar is not None else tqdm(total=len(jobs), disable=True)
    if backend == "local":
        _run_local(jobs, max(1, int(max_parallel)), bar, results)
    else:
        _run_ray(jobs, address, max(1, int(max_parallel)), bar, results, cpus_per_job, gpus_per_job)


# ----------------------------------------------------------------------------- judging and aggregation
def stage_statuses(manifest: dict[str, Any], source: str, job_failed: bool) -> dict[str, str]:
    """The status of every pipeline stage of a run ("done", "failed", "not run", ...). A job that failed before its
    stage could record itself (e.g. a URDF that does not load) shows "failed" at the first stage not done."""
    keys = ["gait" if source == "gait" else "distill", "track", "crosscheck", "preview"]
    recorded = manifest.get("stages", {}) or {}
    keys += [k for k in recorded if k not in keys and k != "export"]
    statuses = {k: (recorded.get(k) or {}).get("status") or "not run" for k in keys}
    if job_failed and "failed" not in statuses.values():
        first = next((k for k in keys if statuses[k] != "done"), None)
        if first is not None:
            statuses[first] = "failed"
    return statuses


def judge(sweep: Sweep, record: dict[str, Any], include_rejected: bool = False) -> tuple[dict[str, Any], Any]:
    """One job record -> its summary row (stage statuses, quality figures, included or excluded and why) and the
    loaded episode of an included run (None otherwise)."""
    row = dict(record)
    row.setdefault("seconds", 0.0)
    run_dir = Path(record["run_dir"])
    try:
        manifest = RunDir(run_dir).manifest() if run_dir.is_dir() else {}
    except AKDError as exc:
        manifest = {}
        row.setdefault("error", str(exc).splitlines()[0])
    failed = record["status"] not in ("done", "skipped")
    row["stages"] = stage_statuses(manifest, sweep.source, failed)
    if failed:
        at = next((k for k, v in row["stages"].items() if v == "failed"), None)
        what = "interrupted" if record["status"] == "interrupted" else f"job failed{f' at {at}' if at else ''}"
        row.update(passed=False, included=False, quality=figures_of(manifest),
                   reasons=[f"{what}: {record.get('error') or record['status']}"])
        return row, None
    quality, episode = assess_run(run_dir, sweep.quality, "tracked", include_rejected)
    row.update(passed=quality.passed, included=quality.included, reasons=quality.reasons, quality=quality.figures)
    return row, episode if quality.included else None


def _totals(rows: list[dict[str, Any]], key: str) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {}
    for r in rows:
        label = robot_label(r["robot"]) if key == "robot" else r[key]
        t = totals.setdefault(label, {"jobs": 0, "included": 0, "excluded": 0, "failed": 0})
        t["jobs"] += 1
        t["included" if r["included"] else "excluded"] += 1
        t["failed"] += r["status"] not in ("done", "skipped")
    return totals


def _export_datasets(sweep: Sweep, rows: list[dict[str, Any]], episodes: dict[tuple[Path, str], Any],
                     allow_out_of_limits: bool) -> dict[str, list[str]]:
    """Rebuild ``out/dataset/`` from the included runs: built in a temporary folder and renamed into place, so it
    always holds exactly the runs the summary calls included (and a crash leaves the previous one)."""

    datasets = Path(sweep.out) / "dataset"
    included = [r for r in rows if r["included"]]
    written: dict[str, list[str]] = {fmt: [] for fmt in sweep.export}
    with atomic_path(datasets, suffix="") as tmp:
        tmp.mkdir()
        for fmt in sweep.export if included else []:
            groups = {"": included}
            if fmt == "lerobot":  # a LeRobot dataset holds one robot: one dataset per robot of the sweep
                groups = {}
                for r in included:
                    groups.setdefault(_slug(robot_label(r["robot"]), 24), []).append(r)
                if len(groups) == 1:
                    groups = {"": included}
            for suffix, runs in groups.items():
                name = {"hdf5": "dataset.hdf5", "lerobot": "lerobot"}.get(fmt, fmt)
                target = tmp / (f"{name}_{suffix}" if suffix else name)
                paths = export_runs([Path(r["run_dir"]) for r in runs], fmt, target, append=False, progress=False,
                                    episodes=episodes, allow_out_of_limits=allow_out_of_limits,
                                    several=len(runs) > 1)
                written[fmt] += [str(datasets / Path(p).relative_to(tmp)) for p in paths]
    return written


def aggregate(sweep: Sweep, results: list[dict[str, Any]], include_rejected: bool = False,
              export: bool = True, executed: int | None = None) -> dict[str, Any]:
    """Judge every run, write one dataset per export format from the included ones (sorted by name), and write
    ``summary.json`` / ``summary.csv`` -- always, even when nothing is exported. ``export=False`` (an interrupted
    sweep) leaves ``out/dataset/`` as it was."""
    out = Path(sweep.out)
    rows: list[dict[str, Any]] = []
    episodes: dict[tuple[Path, str], Any] = {}
    for record in sorted(results, key=lambda r: r["name"]):
        row, episode = judge(sweep, record, include_rejected)
        rows.append(row)
        if episode is not None:
            episodes[(Path(row["run_dir"]), "tracked")] = episode
            episodes[(Path(row["run_dir"]), "auto")] = episode
    written: dict[str, list[str]] = {}
    export_error = None
    if export:
        try:
            written = _export_datasets(sweep, rows, episodes,
                                       sweep.quality.allow_limit_violations or include_rejected)
        except AKDError as exc:  # a dataset-level problem (e.g. runs at different rates): still write the summary
            export_error = str(exc).splitlines()[0]
            log.error("akd batch: the dataset could not be written: %s", export_error)
    included = sum(r["included"] for r in rows)
    in_dataset = 0 if export_error or not export else included
    summary = {
        "schema": SUMMARY_SCHEMA, "sweep_out": str(out), "interrupted": not export,
        "quality": {**sweep.quality.to_dict(), "include_rejected": include_rejected},
        "jobs": len(rows), "succeeded": sum(r["status"] in ("done", "skipped") for r in rows),
        "failed": sum(r["status"] == "failed" for r in rows), "included": included,
        "excluded": len(rows) - included, "in_dataset": in_dataset,
        "included_despite_gates": sum(r["included"] and not r["passed"] for r in rows),
        "datasets": written, "export_error": export_error, "executed": executed,
        "totals": {"robot": _totals(rows, "robot"), "prompt": _totals(rows, "prompt")},
        "runs": rows,
    }
    summary["exit_code"] = 0 if in_dataset > 0 else 1
    write_json_atomic(out / "summary.json", summary)
    columns = ["name", "status", "included", "passed", "reasons", "robot", "prompt", "seed", "seconds",
               "link_pos_err_m", "naive_link_pos_err_m", "joint_rmse_rad", "stance_slip_mps", "penetration_m",
               "contact_schedule_match", "max_tilt_deg", "fell", "torque_saturation_frac", "crosscheck_joint_rmse_rad",
               "crosscheck_passed", "limit_violation", "error", "run_dir"]
    with atomic_path(out / "summary.csv") as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({**r.get("quality", {}), **r, "reasons": "; ".join(r["reasons"])})
    return summary


def summary_table(summary: dict[str, Any]) -> str:
    """The short table `akd batch` prints: every run, in the dataset or not and why, then the totals."""
    lines = [quality_table(summary["runs"], status=True)]
    interrupted = " (interrupted: the dataset was not rebuilt)" if summary.get("interrupted") else ""
    lines.append(f"{summary['in_dataset']} of {summary['jobs']} runs in the dataset, {summary['excluded']} excluded "
                 f"({summary['failed']} failed jobs){interrupted}")
    if summary.get("export_error"):
        lines.append(f"the dataset could not be written: {summary['export_error']}")
    if summary["datasets"]:
        lines.append("datasets: " + ", ".join(f"{k}: {', '.join(map(str, v)) if v else '-'}"
                                              for k, v in summary["datasets"].items()))
    lines.append(f"summary: {Path(summary['sweep_out']) / 'summary.json'} (and summary.csv)")
    return "\n".join(lines)


def run_batch(sweep_path: str | Path, backend: str = "local", address: str | None = None,
              max_parallel: int | None = None, progress: bool = True, include_rejected: bool = False) -> dict[str, Any]:
    sweep = load_sweep(sweep_path)
    if backend not in ("local", "ray"):
        raise ConfigError(f"--backend must be local or ray, got {backend!r}")
    jobs = expand_jobs(sweep)
    Path(sweep.out).mkdir(parents=True, exist_ok=True)
    max_parallel = max_parallel or 1
    todo = [j for j in jobs if not job_done(j)]
    pending = {j.name for j in todo}
    results = [_record(j, status="skipped", seconds=0.0) for j in jobs if j.name not in pending]
    try:
        with tqdm(total=len(jobs), initial=len(results), desc="batch", unit="run", disable=not progress) as bar:
            gpus = sweep.gpus_per_job if sweep.gpus_per_job is not None else (1.0 if sweep.source == "sds" else 0.0)
            execute_jobs(todo, results, backend, address, max_parallel, sweep.cpus_per_job, gpus, bar)
    except KeyboardInterrupt:
        finished = {r["name"] for r in results}
        results += [_record(j, status="interrupted", error="the sweep was interrupted before this job finished")
                    for j in todo if j.name not in finished]
        aggregate(sweep, results, include_rejected, export=False,
                  executed=sum(r["status"] not in ("skipped", "interrupted") for r in results))
        raise
    return aggregate(sweep, results, include_rejected, executed=len(todo))
