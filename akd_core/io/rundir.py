"""The run directory: the files every stage reads and writes, and manifest.json.

``RUN/manifest.json`` = ``{"robot", "prompt", "stages": {name: {"status", "seconds",
"config", "metrics"}}, "versions", "seeds"}`` (docs/architecture.md, "Outputs and the commands are a
contract"). It is rewritten atomically after every change, so a killed run never leaves a torn manifest, and each
read-modify-write holds a lock (``RUN/.manifest.lock``), so stages running at the same time in
several processes (`akd run` cross-checks beside the preview) never lose each other's entries.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from akd_core.io.errors import RunDirError
from akd_core.io.fileio import write_json_atomic

REFERENCE = "reference.npz"
TRACKED = "tracked.npz"
ROBOT_URDF = "robot.urdf"
ROBOT_MJCF = "robot.xml"  # MJCF robots only: the model MuJoCo tracks on (akd_core.model.mjcf)
MANIFEST = "manifest.json"
CROSSCHECK = "crosscheck.json"
PREVIEW = "preview.mp4"
TERRAIN = "terrain.npz"  # the ground a run was made on (akd_core.model.terrain; absent: flat z = 0)

_VERSIONED = ("akd", "torch", "warp-lang", "newton", "mujoco", "numpy", "yourdfpy", "diffusers", "gsplat")


def package_versions() -> dict[str, str]:
    return dict(_package_versions())


@functools.cache
def _package_versions() -> dict[str, str]:  # looked up once per process: every manifest write records them
    versions = {}
    for name in _VERSIONED:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


class RunDir:
    """A run directory and its manifest. Stages record status, timing, config, metrics."""

    def __init__(self, path: str | Path, create: bool = False):
        self.path = Path(path)
        if create:
            self.path.mkdir(parents=True, exist_ok=True)
        elif not self.path.is_dir():
            raise RunDirError(
                f"run directory {self.path} does not exist; create it with "
                f"`akd gait --robot ROBOT --prompt TEXT --out {self.path}` (or `akd run`)"
            )

    # -- paths --------------------------------------------------------------
    def file(self, name: str) -> Path:
        return self.path / name

    def require(self, name: str, made_by: str) -> Path:
        """Path of a file a stage needs; a clear error naming the producing command if missing."""
        path = self.path / name
        if not path.exists():
            raise RunDirError(f"{path} is missing; run `{made_by}` first to produce it")
        return path

    # -- manifest -----------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        path = self.path / MANIFEST
        if not path.exists():
            return {"robot": None, "prompt": None, "stages": {}, "versions": package_versions(), "seeds": {}}
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise RunDirError(f"{path} is not valid JSON ({exc}); delete it and re-run the stages") from exc

    @contextlib.contextmanager
    def _manifest_lock(self) -> Iterator[None]:
        """Exclusive across processes for one read-modify-write of the manifest (POSIX; elsewhere a no-op)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: one process per run directory
            yield
            return
        with open(self.path / ".manifest.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        with self._manifest_lock():
            manifest = self.manifest()
            for key, value in fields.items():
                if isinstance(value, dict) and isinstance(manifest.get(key), dict):
                    manifest[key].update(value)
                else:
                    manifest[key] = value
            manifest["versions"] = package_versions()
            write_json_atomic(self.path / MANIFEST, manifest)
        return manifest

    def stage(self, name: str) -> dict[str, Any]:
        return self.manifest().get("stages", {}).get(name, {})

    def stage_done(self, name: str) -> bool:
        return self.stage(name).get("status") == "done"

    def set_stage(self, name: str, **fields: Any) -> None:
        with self._manifest_lock():
            manifest = self.manifest()
            stage = manifest.setdefault("stages", {}).setdefault(name, {})
            stage.update(fields)
            manifest["versions"] = package_versions()
            write_json_atomic(self.path / MANIFEST, manifest)

    @contextlib.contextmanager
    def running_stage(self, name: str, config: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Mark a stage running; yield a metrics dict to fill; mark done (or failed) with timing."""
        start = time.perf_counter()
        metrics: dict[str, Any] = {}
        self.set_stage(name, status="running", config=config or {}, metrics={})
        try:
            yield metrics
        except BaseException as exc:
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            self.set_stage(name, status=status, seconds=round(time.perf_counter() - start, 3),
                           error=f"{type(exc).__name__}: {exc}", metrics=metrics)
            raise
        self.set_stage(name, status="done", seconds=round(time.perf_counter() - start, 3),
                       metrics=metrics, error=None)
