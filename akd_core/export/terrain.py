"""The ground an exported run was made on, carried with its exports (docs/formats.md, "Terrain").

A run made on a terrain (``akd gait --terrain``, or terrain words in the prompt) records it in its manifest
(``terrain``: kind, spec, notes) and, unless flat, in ``RUN/terrain.npz`` (a height grid over the clip's path,
:meth:`~akd_core.model.terrain.Terrain.to_npz`). Exports carry it so a trainer can build the same ground:

- ``RUN/scene.xml`` (:func:`write_run_scene`): one self-contained MJCF with the robot (the run's ``robot.xml``
  without its own floor, or AKD's MJCF of ``robot.urdf``) on the terrain's planes, boxes and height fields, a
  keyframe ``akd_start`` at the clip's first pose; written for non-flat terrains only (flat ground is the robot's
  MJCF on a plane z = 0, nothing to add);
- HDF5 demos and LeRobot episodes: the terrain's kind, spec and height grid (:func:`terrain_record`);
- per-run files (motion files for RL trainers, AMP, rosbag2): ``<output>.terrain.npz`` and ``<output>.scene.xml``
  beside each file, copies of the run's (:func:`write_sidecars`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from akd_core.io.errors import ConfigError
from akd_core.io.fileio import atomic_path, write_text_atomic
from akd_core.io.rundir import REFERENCE, ROBOT_MJCF, ROBOT_URDF, TERRAIN, TRACKED, RunDir
from akd_core.model.robot import load_urdf
from akd_core.model.terrain import Terrain, run_terrain

SCENE_XML = "scene.xml"  # RUN/scene.xml: the robot on the run's terrain (non-flat terrains)
TERRAIN_SIDECAR = ".terrain.npz"  # <output><TERRAIN_SIDECAR>: the run's terrain.npz beside a per-run export
SCENE_SIDECAR = ".scene.xml"  # <output><SCENE_SIDECAR>: the run's scene.xml beside it
SCENE_MODEL_PREFIX = "akd_scene_"  # the scene's model name; a stale scene.xml of AKD's is told by it
START_KEY = "akd_start"  # the scene's keyframe: the clip's first pose


@dataclass
class TerrainRecord:
    """What an export stores of a run's ground: ``kind``, ``spec`` (re-creates it: ``--terrain SPEC``), ``notes``,
    and for a non-flat terrain the grid of ``RUN/terrain.npz``: ``heights`` (nx, ny) float32 m, with
    ``heights[i, j]`` the surface at x = origin[0] + i cell, y = origin[1] + j cell; ``origin`` (2,) m; ``cell`` m."""

    kind: str = "flat"
    spec: str = "flat"
    notes: list[str] = field(default_factory=list)
    heights: np.ndarray | None = None
    origin: np.ndarray | None = None
    cell: float | None = None
    file: Path | None = None  # RUN/terrain.npz

    @property
    def is_flat(self) -> bool:
        return self.heights is None


def terrain_record(run_dir: str | Path) -> TerrainRecord:
    """The terrain of a run directory as exports store it (flat when the run records none)."""
    run = RunDir(run_dir)
    info = run.manifest().get("terrain") or {}
    kind, spec = str(info.get("kind") or "flat"), str(info.get("spec") or "flat")
    notes = [str(n) for n in info.get("notes") or []]
    path = run.file(TERRAIN)
    if not path.exists():
        if kind != "flat":
            raise ConfigError(f"{run.path}: manifest.json names terrain {spec!r} but {TERRAIN} is missing; run "
                              "`akd gait` again with --terrain")
        return TerrainRecord(kind=kind, spec=spec, notes=notes)
    with np.load(path, allow_pickle=False) as data:
        heights = np.asarray(data["heights"], dtype=np.float32)
        origin = np.asarray(data["origin"], dtype=np.float64).reshape(2)
        cell = float(data["cell"])
        kind = str(data["kind"]) if kind == "flat" else kind
        spec = str(data["spec"]) if spec == "flat" else spec
    return TerrainRecord(kind=kind, spec=spec, notes=notes, heights=heights, origin=origin, cell=cell, file=path)


# ----------------------------------------------------------------------------- RUN/scene.xml
def write_run_scene(run_dir: str | Path, terrain: Terrain | None = None) -> Path | None:
    """Write ``RUN/scene.xml``: the run's robot standing on its terrain, one MJCF that compiles on its own (meshes by
    absolute path). Returns the path, or None for flat ground (a scene.xml AKD wrote before is removed then).

    The robot is the run's ``robot.xml`` (an MJCF robot; the floor and props of the scene it came from are left
    out) or AKD's MJCF of ``robot.urdf`` (:meth:`Robot.to_mjcf`; position actuators with the gains of
    ``tracked.npz`` when the run was tracked), stepping with the MuJoCo integrator the run was tracked with. The
    terrain's geoms are named ``terrain_plane0``, ``terrain_box3``,
    ``terrain_hfield0``, ... and collide with the robot; a keyframe ``akd_start`` holds the clip's first pose."""
    run = RunDir(run_dir)
    terrain = terrain if terrain is not None else run_terrain(run)
    path = run.file(SCENE_XML)
    if terrain.is_flat:
        if path.exists() and f'model="{SCENE_MODEL_PREFIX}' in path.read_text(errors="replace")[:400]:
            path.unlink()
        return None
    spec = _robot_spec(run)
    integrator = (((run.manifest().get("stages") or {}).get("track") or {}).get("metrics") or {}).get("integrator")
    if integrator:  # replaying tracked.npz's targets needs the tracking's integration (euler, implicitfast)
        import mujoco

        spec.option.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{str(integrator).upper()}")
    terrain.add_to_mjspec(spec, prefix="terrain")
    spec.modelname = f"{SCENE_MODEL_PREFIX}{terrain.kind}"
    try:
        model = spec.compile()
    except Exception as exc:  # MuJoCo's message names the element
        raise ConfigError(f"{path}: the robot on the terrain does not compile in MuJoCo ({exc})") from exc
    _add_start_key(spec, model, run)
    spec.compile()
    return write_text_atomic(path, spec.to_xml())


def ensure_run_scene(run_dir: str | Path) -> Path | None:
    """:func:`write_run_scene` unless ``RUN/scene.xml`` is already newer than every file it is made from (the
    terrain, the robot, the reference, the tracked gains): one export of many formats writes it once."""
    run = RunDir(run_dir)
    path = run.file(SCENE_XML)
    sources = [run.file(name) for name in (TERRAIN, ROBOT_URDF, ROBOT_MJCF, REFERENCE, TRACKED)]
    if path.exists() and run.file(TERRAIN).exists():
        newest = max(f.stat().st_mtime_ns for f in sources if f.exists())
        if path.stat().st_mtime_ns >= newest:
            return path
    return write_run_scene(run.path)


def _robot_spec(run: RunDir):
    """MjSpec of the run's robot alone: its robot.xml without the world's geoms and other bodies, or AKD's MJCF."""
    import mujoco

    mjcf = run.file(ROBOT_MJCF)
    if mjcf.exists():
        spec = mujoco.MjSpec.from_file(str(mjcf))
        free = [j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_FREE]
        root = free[0].parent if len(free) == 1 else None
        for geom in list(spec.worldbody.geoms):
            spec.delete(geom)
        for body in list(spec.worldbody.bodies):
            if root is None or body.name != root.name:
                spec.delete(body)
        return spec
    robot = load_urdf(run.require(ROBOT_URDF, f"akd gait --robot ROBOT --prompt TEXT --out {run.path}"))
    gains: dict[str, Any] = {}
    if run.file(TRACKED).exists():
        with np.load(run.file(TRACKED), allow_pickle=False) as data:
            gains = {"kp": np.asarray(data["kp"], dtype=np.float64), "kd": np.asarray(data["kd"], dtype=np.float64)}
    root_height = None
    if run.file(REFERENCE).exists():
        with np.load(run.file(REFERENCE), allow_pickle=False) as data:
            root_height = float(data["root_pos"][0, 2])
    return mujoco.MjSpec.from_string(robot.to_mjcf(ground=False, root_height=root_height, **gains))


def _add_start_key(spec, model, run: RunDir) -> None:
    """Keyframe START_KEY: the reference's first root pose and joint angles (joints matched by name; skipped when
    the model's joints and the clip's differ)."""
    import mujoco

    if not run.file(REFERENCE).exists():
        return
    with np.load(run.file(REFERENCE), allow_pickle=False) as data:
        names = [str(n) for n in data["joint_names"]]
        joint_pos, root_pos, root_quat = data["joint_pos"][0], data["root_pos"][0], data["root_quat"][0]
    qpos = np.array(model.qpos0, dtype=np.float64)
    kinds = [int(t) for t in model.jnt_type]
    free = [j for j in range(model.njnt) if kinds[j] == int(mujoco.mjtJoint.mjJNT_FREE)]
    if len(free) != 1:
        return
    adr = int(model.jnt_qposadr[free[0]])
    qpos[adr:adr + 3] = root_pos
    qpos[adr + 3:adr + 7] = [root_quat[3], root_quat[0], root_quat[1], root_quat[2]]  # xyzw -> MuJoCo's wxyz
    for j in range(model.njnt):
        if j == free[0]:
            continue
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
        if name not in names or kinds[j] not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            return
        qpos[int(model.jnt_qposadr[j])] = joint_pos[names.index(name)]
    spec.add_key(name=START_KEY, qpos=qpos.tolist())


# ----------------------------------------------------------------------------- per-run files
def sidecar_paths(output: str | Path) -> tuple[Path, Path]:
    """(terrain.npz, scene.xml) beside a per-run export ``output``: ``<output minus its suffix>.terrain.npz`` and
    ``.scene.xml`` (``trot.mjlab.npz`` -> ``trot.mjlab.terrain.npz``, ``rosbag2/`` -> ``rosbag2.terrain.npz``)."""
    output = Path(output)
    stem = output.with_suffix("") if output.suffix else output
    return stem.with_name(stem.name + TERRAIN_SIDECAR), stem.with_name(stem.name + SCENE_SIDECAR)


def write_sidecars(run_dir: str | Path, output: str | Path) -> list[Path]:
    """Copy the run's terrain.npz and scene.xml (written when missing or stale) beside ``output``; returns the
    copies. A flat run has none: sidecars left there by an earlier export are removed."""
    run = RunDir(run_dir)
    npz, scene = sidecar_paths(output)
    record = terrain_record(run.path)
    if record.is_flat:
        for stale in (npz, scene):
            stale.unlink(missing_ok=True)
        return []
    _copy(record.file, npz)
    _copy(ensure_run_scene(run.path), scene)
    return [npz, scene]


def _copy(source: Path, target: Path) -> None:
    with atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)


__all__ = ["SCENE_XML", "START_KEY", "TerrainRecord", "ensure_run_scene", "sidecar_paths", "terrain_record",
           "write_run_scene", "write_sidecars"]
