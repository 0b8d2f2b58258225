"""HDF5 datasets in the robomimic / Isaac Lab layout (``data/demo_N``), written and appended atomically.

Layout (docs/formats.md has the full table)::

    /                      attrs schema_version, fps, num_episodes, total_samples, description
    /data                  attrs total (sum of num_samples), env_args (JSON: env_name "akd", type 2, env_kwargs,
                           robot, fps, dt, joint_names, kp, kd, effort_limit, velocity_limit, lower, upper,
                           foot_names, state_layout, quat_order "xyzw")
    /data/demo_N           attrs num_samples, seed, success (= did not fall), prompt, robot, run, source, fps,
                           joint_names (JSON), kp, kd
      actions              (T, J) PD targets (rad)
      processed_actions    (T, J) the same PD targets (what the PD controller applied; Isaac Lab's name)
      obs/joint_pos        (T, J)      obs/joint_vel      (T, J)
      obs/root_pos         (T, 3)      obs/root_quat      (T, 4) xyzw
      obs/root_lin_vel     (T, 3)      obs/root_ang_vel   (T, 3) world frame
      obs/foot_contacts    (T, K) uint8 (1 = foot within 1.5 cm of the ground)
      obs/foot_contact_parts (T, K*P) uint8, clips whose feet have parts (a sole's heel and toe lines): 1 = that
                           part within 1.5 cm of the ground; columns foot-major, named by the demo attr
                           ``foot_contact_parts`` (JSON, "<foot>/<part>")
      obs/command          (T, 3) the velocity command the clip follows: vx, vy (m/s), yaw rate (rad/s) in the heading
                           frame, ramped as the reference was (gait-library clips; absent for SDS clips); demo attr
                           ``command_names`` (JSON ["vx", "vy", "yaw_rate"])
      joint_torques        (T, J) N m
      states               (T, 13 + 2J) root pos(3), root quat xyzw(4), joint pos(J), root lin vel(3),
                           root ang vel(3), joint vel(J)
      initial_state/articulation/robot/{root_pose (1, 7) pos + quat xyzw, root_velocity (1, 6) lin + ang,
                           joint_position (1, J), joint_velocity (1, J)}   (Isaac Lab's nested initial state)
      reference/           the kinematic reference the demo tracks (RUN/reference.npz at its own rate), so a
                           trainer can ask an expert to track it from any state (DAgger): attrs fps, prompt,
                           foot_names (JSON); joint_pos (F, J), root_pos (F, 3), root_quat (F, 4) xyzw,
                           foot_offsets (K, 3), foot_contacts (F, K) uint8
      terrain/             the ground the run was made on: attrs kind, spec (``--terrain SPEC`` re-creates it),
                           notes (JSON); for a terrain other than flat ground also attrs origin (2,) m, cell m and
                           the dataset heights (nx, ny) float32 m, heights[i, j] the surface at x = origin[0] + i cell,
                           y = origin[1] + j cell (RUN/terrain.npz's grid)

Every dataset is float32 and gzip-compressed. Appending copies the file to a temporary name beside it, adds
the new demos (numbering continues), updates the totals, fsyncs and renames: a crash leaves the old file intact.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from akd_core.export.common import (
    COMMAND_NAMES,
    Episode,
    has_parts,
    part_names,
    require_tracked,
    stack_checked,
)
from akd_core.export.terrain import terrain_record
from akd_core.io.errors import MotionError
from akd_core.io.fileio import atomic_path

SCHEMA_VERSION = 1
DESCRIPTION = ("AKD tracked motions: actions = PD targets (rad), obs = simulated states, joint_torques (N m); "
               "quaternions xyzw; z up; SI units")
OBS_KEYS = ("joint_pos", "joint_vel", "root_pos", "root_quat", "root_lin_vel", "root_ang_vel", "foot_contacts")
GZIP_LEVEL = 4


def states_layout(num_joints: int) -> list[tuple[str, int]]:
    """(name, width) of the columns of ``states`` (and the flattened sim state), in order."""
    return [("root_pos", 3), ("root_quat", 4), ("joint_pos", num_joints), ("root_lin_vel", 3),
            ("root_ang_vel", 3), ("joint_vel", num_joints)]


def flat_states(episode: Episode) -> np.ndarray:
    """(T, 13 + 2J) flattened simulation state per step (see :func:`states_layout`)."""
    return np.concatenate([getattr(episode, name) for name, _ in states_layout(len(episode.joint_names))],
                          axis=1).astype(np.float32)


def env_args(episode: Episode) -> dict[str, Any]:
    """The ``data`` group's env_args (robomimic env metadata + what Isaac Lab / our BC reader need)."""
    robot = episode.robot
    return {
        **tracking_physics(episode),
        "env_name": "akd", "type": 2,
        "env_kwargs": {"robot": robot.name, "fps": episode.fps, "dt": episode.dt},
        "robot": robot.name, "fps": episode.fps, "dt": episode.dt, "joint_names": list(episode.joint_names),
        "kp": _list(episode.kp), "kd": _list(episode.kd), "effort_limit": _list(robot.effort_limit),
        "velocity_limit": _list(robot.velocity_limit), "lower": _list(robot.lower), "upper": _list(robot.upper),
        "foot_names": list(episode.foot_names), "quat_order": "xyzw",
        "state_layout": [[n, w] for n, w in states_layout(len(episode.joint_names))],
    }


def tracking_physics(episode: Episode) -> dict[str, Any]:
    """What a simulator needs to replay the episode's PD targets as tracking executed them (the track stage's
    ``sim_dt_s``, ``armature``, ``contact``, ``engine``, ``method``, ``integrator`` (MuJoCo's); empty for a reference
    clip or a run without a manifest). The policy's MuJoCo environment reads them back."""
    path = Path(episode.run_dir) / "manifest.json"
    if episode.source != "tracked" or not path.exists():
        return {}
    metrics = ((json.loads(path.read_text()).get("stages") or {}).get("track") or {}).get("metrics") or {}
    keys = ("sim_dt_s", "armature", "contact", "engine", "method", "integrator")
    return {k: metrics[k] for k in keys if metrics.get(k) is not None}


def _list(values) -> list[float | None]:
    """JSON-safe list: +-inf (continuous joints) -> None."""
    if values is None:
        return []
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=np.float64).reshape(-1)]


def write_hdf5(episodes: list[Episode], path: str | Path, append: bool = True) -> Path:
    """Write ``episodes`` as demos into ``path`` (appending to an existing file when ``append``). Returns path."""
    import h5py

    path = Path(path)
    if not episodes:
        raise MotionError(f"{path}: no episodes to write")
    for episode in episodes:
        require_tracked(episode, "hdf5")
    stack_checked(episodes, "hdf5")
    existing = append and path.exists()
    with atomic_path(path) as tmp:
        if existing:
            shutil.copy2(path, tmp)
        with h5py.File(tmp, "a" if existing else "w") as f:
            if existing:
                _check_existing(f, path, episodes[0])
            else:
                _init_file(f, episodes[0])
            data = f["data"]
            next_index = 1 + max((_demo_index(n) for n in data.keys()), default=-1)
            for offset, episode in enumerate(episodes):
                _write_demo(data.create_group(f"demo_{next_index + offset}"), episode)
            _update_totals(f, episodes)
            f.flush()
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
    return path


def _init_file(f, first: Episode) -> None:
    f.attrs["schema_version"] = SCHEMA_VERSION
    f.attrs["fps"] = first.fps
    f.attrs["description"] = DESCRIPTION
    data = f.create_group("data")
    data.attrs["env_args"] = json.dumps(env_args(first))
    data.attrs["total"] = 0


def _check_existing(f, path: Path, first: Episode) -> None:
    if "data" not in f:
        raise MotionError(f"{path} has no 'data' group, so it is not a robomimic / Isaac Lab dataset; "
                          "choose another -o PATH (or delete the file)")
    fps = float(f.attrs.get("fps", first.fps))
    if abs(fps - first.fps) > 1e-6 * fps:
        raise MotionError(f"{path} holds demos at {fps} fps, the new episodes are at {first.fps} fps; "
                          "export them to another file (-o)")


def _update_totals(f, new: list[Episode]) -> None:
    data = f["data"]
    demos = [k for k in data.keys() if k.startswith("demo_")]
    total = int(sum(int(data[k].attrs["num_samples"]) for k in demos))
    data.attrs["total"] = total
    f.attrs["num_episodes"] = len(demos)
    f.attrs["total_samples"] = total
    args = json.loads(data.attrs["env_args"])
    robots = sorted({args.get("robot", "")} | {e.robot.name for e in new}
                    | set(args.get("robots", [])))
    names = {tuple(args["joint_names"])} | {tuple(e.joint_names) for e in new}
    if len(robots) > 1 or len(names) > 1:
        # several robots in one dataset: per-demo attrs (robot, joint_names, kp, kd) are authoritative
        args["robots"] = robots
        args["mixed_robots"] = True
        data.attrs["env_args"] = json.dumps(args)


def _demo_index(name: str) -> int:
    tail = name.rsplit("_", 1)[-1]
    return int(tail) if name.startswith("demo_") and tail.isdigit() else -1


def _dataset(group, name: str, values: np.ndarray) -> None:
    group.create_dataset(name, data=values, compression="gzip", compression_opts=GZIP_LEVEL)


def _write_demo(group, episode: Episode) -> None:
    f32 = np.float32
    group.attrs["num_samples"] = episode.num_samples
    group.attrs["seed"] = episode.seed
    group.attrs["success"] = bool(episode.success)
    group.attrs["prompt"] = episode.prompt
    group.attrs["robot"] = episode.robot.name
    group.attrs["run"] = str(episode.run_dir)
    group.attrs["source"] = episode.source
    group.attrs["fps"] = episode.fps
    group.attrs["joint_names"] = json.dumps(list(episode.joint_names))
    group.attrs["foot_names"] = json.dumps(list(episode.foot_names))
    group.attrs["kp"] = np.asarray(episode.kp, dtype=np.float64)
    group.attrs["kd"] = np.asarray(episode.kd, dtype=np.float64)
    _dataset(group, "actions", episode.pd_targets.astype(f32))
    _dataset(group, "processed_actions", episode.pd_targets.astype(f32))
    for key in OBS_KEYS[:-1]:
        _dataset(group, f"obs/{key}", getattr(episode, key).astype(f32))
    _dataset(group, "obs/foot_contacts", episode.foot_contacts.astype(np.uint8))
    if has_parts(episode):
        group.attrs["foot_contact_parts"] = json.dumps(part_names(episode))
        _dataset(group, "obs/foot_contact_parts",
                 episode.foot_part_contacts.reshape(episode.num_samples, -1).astype(np.uint8))
    if episode.command is not None:  # what a velocity-command policy is conditioned on
        group.attrs["command_names"] = json.dumps(list(COMMAND_NAMES))
        _dataset(group, "obs/command", episode.command.astype(f32))
    _dataset(group, "joint_torques", episode.joint_torques.astype(f32))
    _dataset(group, "states", flat_states(episode))
    init = group.create_group("initial_state/articulation/robot")
    _dataset(init, "root_pose", np.concatenate([episode.root_pos[:1], episode.root_quat[:1]], 1).astype(f32))
    _dataset(init, "root_velocity", np.concatenate([episode.root_lin_vel[:1], episode.root_ang_vel[:1]], 1).astype(f32))
    _dataset(init, "joint_position", episode.joint_pos[:1].astype(f32))
    _dataset(init, "joint_velocity", episode.joint_vel[:1].astype(f32))
    if episode.reference is not None:
        _write_reference(group.create_group("reference"), episode.reference)
    _write_terrain(group.create_group("terrain"), episode)


def _write_terrain(group, episode: Episode) -> None:
    """The demo's ground under ``terrain/`` (module docstring): kind, spec, notes; heights, origin, cell unless flat."""
    record = terrain_record(episode.run_dir)
    group.attrs["kind"] = record.kind
    group.attrs["spec"] = record.spec
    group.attrs["notes"] = json.dumps(record.notes)
    if not record.is_flat:
        group.attrs["origin"] = np.asarray(record.origin, dtype=np.float64)
        group.attrs["cell"] = float(record.cell)
        _dataset(group, "heights", np.asarray(record.heights, dtype=np.float32))


def _write_reference(group, motion) -> None:
    """The demo's kinematic reference (a :class:`~akd_core.motion.clip.Motion`) under ``reference/``."""
    group.attrs["fps"] = float(motion.fps)
    group.attrs["prompt"] = motion.prompt
    group.attrs["foot_names"] = json.dumps(list(motion.foot_names))
    for key in ("joint_pos", "root_pos", "root_quat"):
        _dataset(group, key, np.asarray(getattr(motion, key), dtype=np.float32))
    _dataset(group, "foot_offsets", np.asarray(motion.foot_offsets, dtype=np.float32).reshape(-1, 3))
    if motion.foot_contacts is not None:
        _dataset(group, "foot_contacts", np.asarray(motion.foot_contacts).astype(np.uint8))


# ----------------------------------------------------------------------------- reader
@dataclass
class HDF5Demo:
    name: str
    attrs: dict[str, Any]
    actions: np.ndarray  # (T, J)
    obs: dict[str, np.ndarray]  # key -> (T, .)
    joint_torques: np.ndarray | None  # (T, J); None in files that lack it (hand-made robomimic files)
    states: np.ndarray | None  # (T, 13 + 2J); None when absent
    initial_state: dict[str, np.ndarray]  # "articulation/robot/<name>" -> (1, .)
    processed_actions: np.ndarray | None = None
    reference: dict[str, Any] | None = None  # reference/ group: arrays + "fps", "prompt", "foot_names"; None if absent
    # terrain/ group: "kind", "spec", "notes" and, unless flat, "heights" (nx, ny), "origin" (2,), "cell"; files
    # written before terrains existed have none: their demos were made on flat ground
    terrain: dict[str, Any] | None = None


@dataclass
class HDF5Dataset:
    path: Path
    attrs: dict[str, Any]
    data_attrs: dict[str, Any]
    env_args: dict[str, Any]
    demos: list[HDF5Demo] = field(default_factory=list)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _datasets_under(group, h5py) -> dict[str, np.ndarray]:
    """{relative path: array} of every dataset below ``group``."""
    found: dict[str, np.ndarray] = {}

    def visit(key: str, item) -> None:
        if isinstance(item, h5py.Dataset):
            found[key] = item[()]

    group.visititems(visit)
    return found


def read_hdf5(path: str | Path) -> HDF5Dataset:
    """Every demo of an HDF5 dataset written by :func:`write_hdf5`, in demo order."""
    import h5py

    path = Path(path)
    if not path.is_file():
        raise MotionError(f"{path} does not exist; write it with `akd export RUN --format hdf5 -o {path}`")
    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise MotionError(f"{path} is not a readable HDF5 file ({exc}); re-export it with `akd export`") from exc
    with handle as f:
        if "data" not in f:
            raise MotionError(f"{path}: no 'data' group; not a robomimic / Isaac Lab dataset (write one with "
                              f"`akd export RUN [RUN...] --format hdf5`)")
        data = f["data"]
        try:
            env = json.loads(_plain(data.attrs.get("env_args", "{}")))
        except json.JSONDecodeError as exc:
            raise MotionError(f"{path}: data.attrs['env_args'] is not JSON ({exc}); re-export with `akd export`") \
                from exc
        if not isinstance(env, dict):
            raise MotionError(f"{path}: data.attrs['env_args'] is not a JSON object; re-export with `akd export`")
        result = HDF5Dataset(path=path, attrs={k: _plain(v) for k, v in f.attrs.items()},
                             data_attrs={k: _plain(v) for k, v in data.attrs.items()}, env_args=env)
        for name in sorted((k for k in data.keys() if k.startswith("demo")), key=_demo_order):
            g = data[name]
            if "actions" not in g or "obs" not in g:
                raise MotionError(f"{path}: data/{name} lacks 'actions' or 'obs'; re-export with `akd export`")
            init = _datasets_under(g["initial_state"], h5py) if "initial_state" in g else {}
            result.demos.append(HDF5Demo(
                name=name, attrs={k: _plain(v) for k, v in g.attrs.items()}, actions=g["actions"][()],
                obs={k: g["obs"][k][()] for k in g["obs"].keys()},
                joint_torques=g["joint_torques"][()] if "joint_torques" in g else None,
                states=g["states"][()] if "states" in g else None, initial_state=init,
                processed_actions=g["processed_actions"][()] if "processed_actions" in g else None,
                reference=_read_reference(g["reference"]) if "reference" in g else None,
                terrain=_read_terrain(g["terrain"]) if "terrain" in g else None))
    return result


def _demo_order(name: str) -> tuple[int, str]:
    tail = name.rsplit("_", 1)[-1]
    return (int(tail), name) if tail.isdigit() else (1 << 30, name)


def _read_reference(group) -> dict[str, Any]:
    out: dict[str, Any] = {k: group[k][()] for k in group.keys()}
    out["fps"] = float(_plain(group.attrs["fps"]))
    out["prompt"] = str(_plain(group.attrs.get("prompt", "")))
    out["foot_names"] = json.loads(_plain(group.attrs.get("foot_names", "[]")))
    return out


def _read_terrain(group) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": str(_plain(group.attrs.get("kind", "flat"))),
                           "spec": str(_plain(group.attrs.get("spec", "flat"))),
                           "notes": json.loads(_plain(group.attrs.get("notes", "[]")))}
    if "heights" in group:
        out["heights"] = group["heights"][()]
        out["origin"] = np.asarray(group.attrs["origin"], dtype=np.float64)
        out["cell"] = float(_plain(group.attrs["cell"]))
    return out
