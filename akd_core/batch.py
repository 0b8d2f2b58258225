"""`akd batch`: sweeps of robots x prompts x seeds, run locally or on a Ray cluster, into one dataset.

A sweep YAML expands into jobs; each job is one `akd run` in its own run directory under
``out``, named from its parameters. Jobs are independent and idempotent: a job whose manifest
says the pipeline finished is skipped, a failing job is recorded with its error and does not
stop the others, and Ctrl-C stops cleanly (a re-run resumes). Successful runs are aggregated
into one dataset per export format plus ``summary.csv`` / ``summary.json``.

Backends: ``local`` (a process pool, one worker by default) and ``ray`` (one Ray task per job
with CPU/GPU requests and retries on worker loss; ``--address`` joins an existing cluster).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import re
import shutil
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .errors import AKDError, ConfigError, DependencyError
from .fileio import atomic_path, write_json_atomic
from .rundir import RunDir

log = logging.getLogger(__name__)

SWEEP_KEYS = {"out", "robots", "package_paths", "prompts", "seeds", "source", "duration", "fps", "export",
              "iterations", "device", "prior", "video_model", "feet", "cpus_per_job", "gpus_per_job"}


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
    device: str | None = None
    prior: str = "cogvideox"
    video_model: str | None = None
    feet: list[str] | None = None
    cpus_per_job: float = 1.0
    gpus_per_job: float | None = None  # default: 1 for sds jobs, 0 otherwise


@dataclass
class Job:
    name: str
    run_dir: str
    robot: str
    prompt: str
    seed: int
    sweep: dict[str, Any]


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
    try:
        return Sweep(**data)
    except TypeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def _slug(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "x"


def expand_jobs(sweep: Sweep) -> list[Job]:
    jobs, common = [], {k: v for k, v in asdict(sweep).items() if k not in ("robots", "prompts", "seeds", "out")}
    for robot in sweep.robots:
        robot_name = Path(robot).stem if robot.endswith((".urdf", ".xml")) else robot
        for prompt in sweep.prompts:
            for seed in sweep.seeds:
                name = f"{_slug(robot_name, 24)}__{_slug(prompt)}__seed{seed}"
                jobs.append(Job(name=name, run_dir=str(Path(sweep.out) / name), robot=robot, prompt=prompt,
                                seed=int(seed), sweep=common))
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ConfigError("two jobs of the sweep map to the same run directory name; make robots/prompts distinct")
    return jobs


def job_done(job: Job) -> bool:
    manifest = Path(job.run_dir) / "manifest.json"
    if not manifest.exists():
        return False
    try:
        return json.loads(manifest.read_text()).get("pipeline", {}).get("status") == "done"
    except json.JSONDecodeError:
        return False


def run_job(job: Job) -> dict[str, Any]:
    """Run one job's pipeline (in a worker process); never raises: failures come back as records."""
    from .pipeline import PipelineConfig, run_pipeline

    start = time.perf_counter()
    record: dict[str, Any] = {"name": job.name, "run_dir": job.run_dir, "robot": job.robot, "prompt": job.prompt,
                              "seed": job.seed}
    if job_done(job):
        return {**record, "status": "skipped", "seconds": 0.0, **_run_metrics(job.run_dir)}
    s = job.sweep
    cfg = PipelineConfig(robot=job.robot, prompt=job.prompt, out=Path(job.run_dir), source=s["source"],
                         duration=s["duration"], fps=s["fps"], seed=job.seed, feet=s.get("feet"),
                         package_paths=list(s.get("package_paths", [])), track_iterations=s.get("iterations"),
                         device=s.get("device"), exports=(), prior=s.get("prior", "cogvideox"),
                         video_model=s.get("video_model"))
    try:
        run_pipeline(cfg, echo=lambda _msg: None)
        record["status"] = "done"
    except AKDError as exc:
        record.update(status="failed", error=str(exc).split("\n")[0])
    except Exception as exc:  # an unexpected crash of one job must not stop the sweep
        record.update(status="failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    record["seconds"] = round(time.perf_counter() - start, 2)
    if record["status"] == "done":
        record.update(_run_metrics(job.run_dir))
    return record


def _run_metrics(run_dir: str) -> dict[str, Any]:
    stages = RunDir(run_dir).manifest().get("stages", {})
    track = stages.get("track", {}).get("metrics", {})
    cross = stages.get("crosscheck", {}).get("metrics", {})
    keep = ("link_pos_err_m", "naive_link_pos_err_m", "joint_rmse_rad", "foot_skate_mps", "fell",
            "torque_saturation_frac")
    out = {k: track.get(k) for k in keep}
    out["crosscheck_joint_rmse_rad"] = cross.get("joint_rmse_rad")
    out["crosscheck_passed"] = cross.get("passed")
    return out


# ----------------------------------------------------------------------------- backends
def _run_local(jobs: list[Job], max_parallel: int, bar: tqdm) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
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
                        results.append({"name": job.name, "run_dir": job.run_dir, "robot": job.robot,
                                        "prompt": job.prompt, "seed": job.seed, "status": "failed",
                                        "error": f"worker lost: {type(exc).__name__}: {exc}"})
                    bar.update(1)
        except KeyboardInterrupt:
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return results


def _run_ray(jobs: list[Job], address: str | None, max_parallel: int, bar: tqdm, sweep: Sweep) -> list[dict]:
    try:
        import ray
    except ImportError as exc:
        raise DependencyError("--backend ray needs Ray: pip install 'ray>=2.40' (or pip install -e '.[ray]')") from exc
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(1, int(max_parallel * sweep.cpus_per_job)), log_to_driver=False,
                     include_dashboard=False)
    gpus = sweep.gpus_per_job if sweep.gpus_per_job is not None else (1.0 if sweep.source == "sds" else 0.0)
    remote = ray.remote(num_cpus=sweep.cpus_per_job, num_gpus=gpus, max_retries=2)(run_job)
    refs = {remote.remote(job): job for job in jobs}
    results: list[dict[str, Any]] = []
    try:
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                job = refs.pop(ref)
                try:
                    results.append(ray.get(ref))
                except Exception as exc:  # retries exhausted (worker/node lost)
                    results.append({"name": job.name, "run_dir": job.run_dir, "robot": job.robot,
                                    "prompt": job.prompt, "seed": job.seed, "status": "failed",
                                    "error": f"ray task failed: {type(exc).__name__}: {str(exc)[:300]}"})
                bar.update(1)
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started_here:
            ray.shutdown()
    return results


# ----------------------------------------------------------------------------- aggregation
def aggregate(sweep: Sweep, results: list[dict[str, Any]]) -> dict[str, Any]:
    """One dataset per export format from all successful runs (sorted by name), plus the summaries."""
    from .export import export_runs

    ok = sorted((r for r in results if r["status"] in ("done", "skipped")), key=lambda r: r["name"])
    out = Path(sweep.out)
    written: dict[str, list[str]] = {}
    datasets = out / "dataset"
    for fmt in sweep.export:
        if not ok:
            break
        groups = {"": ok}
        if fmt == "lerobot":  # a LeRobot dataset holds one robot: one dataset per robot of the sweep
            groups = {}
            for r in ok:
                groups.setdefault(_slug(Path(r["robot"]).stem, 24), []).append(r)
            if len(groups) == 1:
                groups = {"": ok}
        written[fmt] = []
        for suffix, runs in groups.items():
            name = {"hdf5": "dataset.hdf5", "lerobot": "lerobot"}.get(fmt, fmt)
            target = datasets / (f"{name}_{suffix}" if suffix else name)
            if fmt in ("hdf5", "lerobot") and target.exists():
                # rebuilt from scratch each time, so a re-run never appends episodes twice
                shutil.rmtree(target) if target.is_dir() else target.unlink()
            written[fmt] += [str(p) for p in export_runs([Path(r["run_dir"]) for r in runs], fmt, target)]
    summary = {"sweep_out": str(out), "jobs": len(results), "succeeded": len(ok),
               "failed": sum(r["status"] == "failed" for r in results), "datasets": written,
               "runs": sorted(results, key=lambda r: r["name"])}
    write_json_atomic(out / "summary.json", summary)
    columns = ["name", "status", "robot", "prompt", "seed", "seconds", "link_pos_err_m", "naive_link_pos_err_m",
               "joint_rmse_rad", "foot_skate_mps", "fell", "torque_saturation_frac", "crosscheck_joint_rmse_rad",
               "crosscheck_passed", "error", "run_dir"]
    with atomic_path(out / "summary.csv") as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(summary["runs"])
    return summary


def summary_table(summary: dict[str, Any]) -> str:
    lines = [f"{'run':58s} {'status':8s} {'link err m':>10s} {'naive m':>9s} {'seconds':>8s}  error"]
    for r in summary["runs"]:
        err = r.get("link_pos_err_m")
        naive = r.get("naive_link_pos_err_m")
        lines.append(f"{r['name'][:58]:58s} {r['status']:8s} {'' if err is None else f'{err:.4f}':>10s} "
                     f"{'' if naive is None else f'{naive:.4f}':>9s} {r.get('seconds', 0):8.1f}  "
                     f"{r.get('error', '')[:80]}")
    lines.append(f"{summary['succeeded']} of {summary['jobs']} runs succeeded; datasets: "
                 + ", ".join(f"{k}: {', '.join(map(str, v)) if v else '-'}" for k, v in summary["datasets"].items()))
    lines.append(f"summary: {Path(summary['sweep_out']) / 'summary.csv'}")
    return "\n".join(lines)


def run_batch(sweep_path: str | Path, backend: str = "local", address: str | None = None,
              max_parallel: int | None = None, progress: bool = True) -> dict[str, Any]:
    sweep = load_sweep(sweep_path)
    jobs = expand_jobs(sweep)
    Path(sweep.out).mkdir(parents=True, exist_ok=True)
    max_parallel = max_parallel or 1
    todo = [j for j in jobs if not job_done(j)]
    results = [{**{"name": j.name, "run_dir": j.run_dir, "robot": j.robot, "prompt": j.prompt, "seed": j.seed},
                "status": "skipped", "seconds": 0.0, **_run_metrics(j.run_dir)} for j in jobs if job_done(j)]
    with tqdm(total=len(jobs), initial=len(results), desc="batch", unit="run", disable=not progress) as bar:
        if todo:
            if backend == "local":
                results += _run_local(todo, max_parallel, bar)
            elif backend == "ray":
                results += _run_ray(todo, address, max_parallel, bar, sweep)
            else:
                raise ConfigError(f"--backend must be local or ray, got {backend!r}")
    summary = aggregate(sweep, results)
    summary["executed"] = len(todo)
    return summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep", type=Path, help="sweep YAML (out, robots, prompts, seeds, source, duration, export)")
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    parser.add_argument("--max-parallel", type=int, default=None, help="concurrent jobs (default 1)")


def cli(args: argparse.Namespace) -> int:
    summary = run_batch(args.sweep, args.backend, args.address, args.max_parallel)
    print(summary_table(summary))
    return 0 if summary["failed"] == 0 else 1
