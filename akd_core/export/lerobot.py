"""LeRobot v3.0 datasets written with pyarrow (no lerobot dependency), appended atomically.

Layout (mirrors lerobot's ``datasets/utils.py`` constants and ``LeRobotDatasetMetadata`` for codebase v3.0)::

    ROOT/meta/info.json                              codebase_version "v3.0", robot_type, totals, fps, splits,
                                                     data_path / video_path templates, features
    ROOT/meta/stats.json                             {feature: {min, max, mean, std, count}} over every frame
    ROOT/meta/tasks.parquet                          column task_index, pandas index "task" (the prompt)
    ROOT/meta/episodes/chunk-000/file-000.parquet    episode_index, tasks, length, data/chunk_index,
                                                     data/file_index, dataset_from_index, dataset_to_index,
                                                     meta/episodes/chunk_index, meta/episodes/file_index,
                                                     stats/<feature>/<stat>
    ROOT/data/chunk-000/file-000.parquet             one row per frame
    ROOT/meta/terrain.json                           AKD's: the ground of every episode, {"schema": 1, "episodes":
                                                     [{"episode_index", "kind", "spec", "notes", "file"}]}, file =
                                                     "meta/terrain/episode_000000.npz" (a copy of the run's
                                                     terrain.npz) or null for flat ground (lerobot ignores it)

Frame features: ``observation.state`` (2J + 13: joint positions, joint velocities, root position, root quaternion
xyzw, root linear and angular velocity in the world frame; every entry named), ``action`` (J PD targets),
``observation.effort`` (J torques), ``observation.foot_contacts`` (K, 0/1), for feet with contact parts
``observation.foot_contact_parts`` (K*P, 0/1: heel and toe lines, named ``<foot>/<part>``), for datasets whose every
episode follows a velocity command ``observation.command`` (3: vx, vy m/s and yaw rate rad/s in the heading frame), and
lerobot's automatic ``timestamp`` (= frame_index / fps), ``frame_index``, ``episode_index``, ``index``, ``task_index``.

Appending reads the dataset, adds the new episodes (episode and frame indices continue, prompts seen before keep
their task index), and rewrites every file into a temporary folder renamed into place. A dataset has one set of
features: ``observation.command`` is written when every episode has a command and the dataset being appended to (if
any) has the feature too.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
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

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 500
INFO_PATH = "meta/info.json"
TERRAIN_PATH = "meta/terrain.json"  # AKD's own: the ground of each episode
TERRAIN_FILE = "meta/terrain/episode_{episode_index:06d}.npz"
TERRAIN_SCHEMA = 1
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DEFAULT_FEATURES = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
STAT_NAMES = ("min", "max", "mean", "std", "count")


def _pa():
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa, pq


def state_names(episode: Episode) -> list[str]:
    """Names of the observation.state entries, in order."""
    joints = episode.joint_names
    return ([f"{j}.pos" for j in joints] + [f"{j}.vel" for j in joints]
            + [f"root.pos.{a}" for a in "xyz"] + [f"root.quat.{a}" for a in "xyzw"]
            + [f"root.lin_vel.{a}" for a in "xyz"] + [f"root.ang_vel.{a}" for a in "xyz"])


def episode_features(episode: Episode, command: bool | None = None) -> dict[str, dict[str, Any]]:
    """lerobot ``features`` of this episode's frames (incl. the automatic ones). ``command``: whether to include
    ``observation.command`` (default: when the episode has a command)."""
    j, k = len(episode.joint_names), len(episode.foot_names)
    features = {
        "observation.state": {"dtype": "float32", "shape": [2 * j + 13], "names": state_names(episode)},
        "action": {"dtype": "float32", "shape": [j], "names": [f"{n}.pos_target" for n in episode.joint_names]},
        "observation.effort": {"dtype": "float32", "shape": [j], "names": [f"{n}.effort" for n in episode.joint_names]},
    }
    if k:  # a robot without feet (e.g. an arm) has no contact feature
        features["observation.foot_contacts"] = {"dtype": "float32", "shape": [k], "names": list(episode.foot_names)}
    if has_parts(episode):  # which part of each foot is down (heel, toe)
        names = part_names(episode)
        features["observation.foot_contact_parts"] = {"dtype": "float32", "shape": [len(names)], "names": names}
    if (episode.command is not None) if command is None else command:
        features["observation.command"] = {"dtype": "float32", "shape": [len(COMMAND_NAMES)],
                                           "names": list(COMMAND_NAMES)}
    return {**features, **json.loads(json.dumps(DEFAULT_FEATURES))}


def _frame_values(episode: Episode) -> dict[str, np.ndarray]:
    """Per-frame arrays of the non-automatic features: (T, width) float32."""
    state = np.concatenate([episode.joint_pos, episode.joint_vel, episode.root_pos, episode.root_quat,
                            episode.root_lin_vel, episode.root_ang_vel], axis=1)
    values = {"observation.state": state.astype(np.float32), "action": episode.pd_targets.astype(np.float32),
              "observation.effort": episode.joint_torques.astype(np.float32)}
    if episode.foot_names:
        values["observation.foot_contacts"] = episode.foot_contacts.astype(np.float32)
    if has_parts(episode):
        values["observation.foot_contact_parts"] = episode.foot_part_contacts.reshape(
            episode.num_samples, -1).astype(np.float32)
    if episode.command is not None:
        values["observation.command"] = episode.command.astype(np.float32)
    return values


# ----------------------------------------------------------------------------- writing
def write_lerobot(episodes: list[Episode], root: str | Path, append: bool = True,
                  robot_type: str | None = None) -> Path:
    """Write ``episodes`` (one lerobot episode each; the prompt is the task) into the dataset folder ``root``."""
    pa, pq = _pa()
    root = Path(root)
    if not episodes:
        raise MotionError(f"{root}: no episodes to write")
    for episode in episodes:
        require_tracked(episode, "lerobot")
    stack_checked(episodes, "lerobot")
    existing = append and (root / INFO_PATH).exists()
    info = json.loads((root / INFO_PATH).read_text()) if existing else None
    # one set of features per dataset: the command only when every episode (and the dataset appended to) has it
    command = all(e.command is not None for e in episodes) and \
        (info is None or "observation.command" in info.get("features", {}))
    features = episode_features(episodes[0], command)
    fps = episodes[0].fps
    for episode in episodes[1:]:
        _check_features(features, episode_features(episode, command), root, str(episode.run_dir))
    if existing:
        _check_features(info["features"], features, root, str(episodes[0].run_dir))
        if abs(float(info["fps"]) - fps) > 1e-6 * fps:
            raise MotionError(f"{root} holds episodes at {info['fps']} fps, the new ones are at {fps} fps; "
                              "export them to another dataset (-o)")
        old = read_tables(root)
        tasks, tables, first_episode = old["tasks"], [old["data"]], int(info["total_episodes"])
        first_index = int(info["total_frames"])
    else:
        tasks, tables, first_episode, first_index = [], [], 0, 0
    for offset, episode in enumerate(episodes):
        if episode.prompt not in tasks:
            tasks.append(episode.prompt)
        table = _episode_table(episode, features, first_episode + offset, first_index, tasks.index(episode.prompt))
        first_index += table.num_rows
        tables.append(table)
    data = pa.concat_tables(tables)
    with atomic_path(root, suffix="") as tmp:
        if existing:
            shutil.copytree(root, tmp)
        else:
            tmp.mkdir(parents=True)
        _write_all(tmp, data, tasks, features, fps,
                   robot_type or (info or {}).get("robot_type") or episodes[0].robot.name)
        _write_terrain(tmp, episodes, first_episode)
    return root


def _write_terrain(folder: Path, episodes: list[Episode], first_episode: int) -> None:
    """Add the episodes' ground to ``meta/terrain.json`` (episodes of a dataset written before it existed: flat) and
    copy each non-flat run's terrain.npz to ``meta/terrain/episode_XXXXXX.npz``."""
    path = folder / TERRAIN_PATH
    entries = json.loads(path.read_text())["episodes"] if path.exists() else []
    known = {int(e["episode_index"]) for e in entries}
    entries += [{"episode_index": i, "kind": "flat", "spec": "flat", "notes": [], "file": None}
                for i in range(first_episode) if i not in known]
    for offset, episode in enumerate(episodes):
        index = first_episode + offset
        record = terrain_record(episode.run_dir)
        file = None
        if not record.is_flat:
            file = TERRAIN_FILE.format(episode_index=index)
            (folder / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(record.file, folder / file)
        entries.append({"episode_index": index, "kind": record.kind, "spec": record.spec, "notes": record.notes,
                        "file": file})
    entries.sort(key=lambda e: int(e["episode_index"]))
    path.write_text(json.dumps({"schema": TERRAIN_SCHEMA, "episodes": entries}, indent=4) + "\n")


def _check_features(expected: dict, got: dict, root: Path, source: str) -> None:
    if set(expected) != set(got):
        raise MotionError(f"{root}: the features of {source} {sorted(got)} differ from the dataset's "
                          f"{sorted(expected)}; export it to another dataset (-o)")
    for key, spec in got.items():
        have = expected.get(key)
        if have is None or list(have["shape"]) != list(spec["shape"]) or have.get("names") != spec.get("names"):
            raise MotionError(f"{root}: feature '{key}' of {source} ({spec['shape']}, names {spec.get('names')}) "
                              f"does not match the dataset's ({have and have['shape']}); a lerobot dataset holds one "
                              "robot: export other robots to another dataset (-o)")


def _episode_table(episode: Episode, features: dict, episode_index: int, first_index: int, task_index: int):
    pa, _ = _pa()
    n = episode.num_samples
    frame_index = np.arange(n, dtype=np.int64)
    columns: dict[str, Any] = {}
    for key, values in _frame_values(episode).items():
        if key not in features:  # a command the dataset does not hold (write_lerobot)
            continue
        width = int(features[key]["shape"][0])
        columns[key] = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), type=pa.float32()), width)
    columns["timestamp"] = pa.array((frame_index / episode.fps).astype(np.float32))
    columns["frame_index"] = pa.array(frame_index)
    columns["episode_index"] = pa.array(np.full(n, episode_index, dtype=np.int64))
    columns["index"] = pa.array(first_index + frame_index)
    columns["task_index"] = pa.array(np.full(n, task_index, dtype=np.int64))
    return pa.table(columns)


def _column_matrix(table, key: str) -> np.ndarray:
    """(rows, width) float64 values of a feature column (scalar columns -> width 1)."""
    column = table.column(key).combine_chunks()
    import pyarrow as pa

    if pa.types.is_fixed_size_list(column.type) or pa.types.is_list(column.type):
        width = column.type.list_size if pa.types.is_fixed_size_list(column.type) else None
        flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
        return flat.reshape(len(column), width if width is not None else -1)
    return column.to_numpy(zero_copy_only=False).astype(np.float64).reshape(-1, 1)


def feature_stats(values: np.ndarray) -> dict[str, list]:
    """min, max, mean, std (population), count of (N, D) values, as lerobot's compute_stats writes them."""
    return {"min": values.min(0).tolist(), "max": values.max(0).tolist(), "mean": values.mean(0).tolist(),
            "std": values.std(0).tolist(), "count": [int(values.shape[0])]}


def _write_all(folder: Path, data, tasks: list[str], features: dict, fps: float, robot_type: str) -> None:
    pa, pq = _pa()
    data_file = folder / DATA_PATH.format(chunk_index=0, file_index=0)
    data_file.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, data_file)
    episode_ids = data.column("episode_index").to_numpy()
    order = np.unique(episode_ids)
    matrices = {key: _column_matrix(data, key) for key in features}
    rows = []
    for ep in order:
        mask = episode_ids == ep
        idx = np.nonzero(mask)[0]
        task_ids = np.unique(matrices["task_index"][mask, 0]).astype(int)
        row: dict[str, Any] = {
            "episode_index": int(ep), "tasks": [tasks[t] for t in task_ids], "length": int(mask.sum()),
            "data/chunk_index": 0, "data/file_index": 0,
            "dataset_from_index": int(matrices["index"][idx[0], 0]),
            "dataset_to_index": int(matrices["index"][idx[-1], 0]) + 1,
            "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0,
        }
        for key in features:
            for stat, value in feature_stats(matrices[key][mask]).items():
                row[f"stats/{key}/{stat}"] = value
        rows.append(row)
    episodes_file = folder / EPISODES_PATH.format(chunk_index=0, file_index=0)
    episodes_file.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=_episodes_schema(features)), episodes_file)
    _write_tasks(folder / TASKS_PATH, tasks)
    stats = {key: feature_stats(matrices[key]) for key in features}
    (folder / STATS_PATH).write_text(json.dumps(stats, indent=4) + "\n")
    info = {
        "codebase_version": CODEBASE_VERSION, "robot_type": robot_type, "total_episodes": len(order),
        "total_frames": int(data.num_rows), "total_tasks": len(tasks), "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILES_SIZE_IN_MB, "video_files_size_in_mb": VIDEO_FILES_SIZE_IN_MB,
        "fps": fps, "splits": {"train": f"0:{len(order)}"}, "data_path": DATA_PATH, "video_path": None,
        "features": features,
    }
    (folder / INFO_PATH).write_text(json.dumps(info, indent=4) + "\n")


def _episodes_schema(features: dict):
    pa, _ = _pa()
    fields = [("episode_index", pa.int64()), ("tasks", pa.list_(pa.string())), ("length", pa.int64()),
              ("data/chunk_index", pa.int64()), ("data/file_index", pa.int64()),
              ("dataset_from_index", pa.int64()), ("dataset_to_index", pa.int64()),
              ("meta/episodes/chunk_index", pa.int64()), ("meta/episodes/file_index", pa.int64())]
    for key in features:
        for stat in STAT_NAMES:
            fields.append((f"stats/{key}/{stat}", pa.list_(pa.int64() if stat == "count" else pa.float64())))
    return pa.schema(fields)


def _write_tasks(path: Path, tasks: list[str]) -> None:
    """tasks.parquet as ``pandas.DataFrame({"task_index": ...}, index=pd.Index(tasks, name="task")).to_parquet()``
    writes it (lerobot reads it with ``pd.read_parquet`` and looks tasks up by the index)."""
    pa, pq = _pa()
    table = pa.table({"task_index": pa.array(np.arange(len(tasks), dtype=np.int64)), "task": pa.array(tasks)})
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
             "metadata": None},
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    table = table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
    pq.write_table(table, path)


# ----------------------------------------------------------------------------- reading
@dataclass
class LeRobotEpisode:
    episode_index: int
    task: str
    frames: dict[str, np.ndarray]  # feature -> (length, width) (automatic columns -> (length,))
    meta: dict[str, Any]  # the episode's row of meta/episodes
    # meta/terrain.json's entry ("kind", "spec", "notes", "file") and, for a non-flat ground, its grid: "heights"
    # (nx, ny), "origin" (2,), "cell"; None in a dataset without meta/terrain.json (flat ground)
    terrain: dict[str, Any] | None = None


def read_tables(root: str | Path) -> dict[str, Any]:
    """The raw pieces: info (dict), tasks (list[str] by task_index), data and episodes (pyarrow Tables), stats."""
    _, pq = _pa()
    root = Path(root)
    if not (root / INFO_PATH).is_file():
        raise MotionError(f"{root} is not a LeRobot dataset ({INFO_PATH} missing); "
                          f"write one with `akd export RUN --format lerobot -o {root}`")
    info = json.loads((root / INFO_PATH).read_text())
    if info.get("codebase_version") != CODEBASE_VERSION:
        raise MotionError(f"{root}: codebase_version {info.get('codebase_version')!r}; AKD appends to and reads "
                          f"{CODEBASE_VERSION} datasets only")
    task_table = pq.read_table(root / TASKS_PATH)
    order = np.argsort(task_table.column("task_index").to_numpy())
    names = task_table.column("task").to_pylist()
    data_files = sorted((root / "data").glob("chunk-*/file-*.parquet"))
    import pyarrow as pa

    data = pa.concat_tables([pq.read_table(p) for p in data_files])
    episodes = pa.concat_tables([pq.read_table(p) for p in sorted((root / "meta/episodes").glob("chunk-*/*.parquet"))])
    return {"info": info, "tasks": [names[i] for i in order], "data": data, "episodes": episodes,
            "stats": json.loads((root / STATS_PATH).read_text())}


def read_lerobot(root: str | Path) -> list[LeRobotEpisode]:
    """Every episode of a LeRobot v3.0 dataset, in episode order."""
    tables = read_tables(root)
    terrains = _read_terrain(Path(root))
    data, tasks = tables["data"], tables["tasks"]
    scalar = set(DEFAULT_FEATURES)
    matrices = {key: _column_matrix(data, key) for key in tables["info"]["features"]}
    episode_ids = data.column("episode_index").to_numpy()
    result = []
    for row in tables["episodes"].to_pylist():
        start, stop = int(row["dataset_from_index"]), int(row["dataset_to_index"])
        mask = episode_ids == row["episode_index"]
        frames = {}
        for key, values in matrices.items():
            values = values[mask]
            frames[key] = values[:, 0].astype(np.int64 if key != "timestamp" else np.float32) if key in scalar \
                else values.astype(np.float32)
        if frames["index"].size != stop - start or (frames["index"].size and frames["index"][0] != start):
            raise MotionError(f"{root}: episode {row['episode_index']} rows do not match dataset_from/to_index "
                              f"[{start}, {stop})")
        result.append(LeRobotEpisode(episode_index=int(row["episode_index"]), task=tasks[int(frames["task_index"][0])],
                                     frames=frames, meta=row, terrain=terrains.get(int(row["episode_index"]))))
    return result


def _read_terrain(root: Path) -> dict[int, dict[str, Any]]:
    """meta/terrain.json's entries by episode index, with the grid of each non-flat one loaded."""
    path = root / TERRAIN_PATH
    if not path.exists():
        return {}
    out = {}
    for entry in json.loads(path.read_text())["episodes"]:
        entry = dict(entry)
        if entry.get("file"):
            with np.load(root / entry["file"], allow_pickle=False) as grid:
                entry.update(heights=grid["heights"], origin=grid["origin"], cell=float(grid["cell"]))
        out[int(entry["episode_index"])] = entry
    return out
