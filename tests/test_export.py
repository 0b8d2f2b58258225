"""`akd export`: HDF5 (robomimic / Isaac Lab), LeRobot v3.0, AMP motion files and rosbag2, checked field by field
against the run's own arrays, an independent FK (yourdfpy), and the real consumers we can run here (h5py read the way
robomimic reads, pyarrow, json, np.load without pickle, rosbags AnyReader, rclpy deserialize_message, our BC reader)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from akd_core.export import export_runs, load_episode, read_hdf5, read_lerobot, read_rosbag
from akd_core.export.common import CONTACT_HEIGHT_M, MOTION_FORMATS
from akd_core.export.hdf5 import write_hdf5
from akd_core.export.lerobot import write_lerobot
from akd_core.export.motion_files import SUFFIX as MOTION_SUFFIX
from akd_core.io.errors import ConfigError, JointLimitError, RunDirError
from akd_core.io.rundir import REFERENCE, ROBOT_URDF, TRACKED, RunDir
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.robot import load_urdf
from akd_core.model.spatial import quat_to_matrix
from akd_core.motion.clip import Motion, TrackedMotion

from .conftest import example_robot_urdf

FEET = ["FR_foot", "FL_foot", "RR_foot", "RL_foot"]
FOOT_RADIUS = 0.02  # a1's foot collision sphere, centred on the foot link origin
DT = 0.02
STEPS = 50


def make_run(path: Path, prompt: str, seed: int, tracked: bool = True, fell: bool = False) -> RunDir:
    """An a1 run: a 2 Hz in-place stepping clip within the limits, root height such that the lowest foot touches
    the ground at frame 0 (so contacts change), tracked = reference + small noise, torques at 50% of the limits."""
    rng = np.random.default_rng(seed)
    robot = load_urdf(example_robot_urdf("a1"))
    run = RunDir(path, create=True)
    robot.to_urdf(run.file(ROBOT_URDF))
    t = np.arange(STEPS) * DT
    mid, half = (robot.lower + robot.upper) / 2, (robot.upper - robot.lower) / 2
    phase = rng.uniform(0, 2 * np.pi, robot.num_dofs)
    q = mid + 0.3 * half * np.sin(2 * np.pi * 2.0 * t[:, None] + phase)
    yaw = 0.4 * t
    quat = np.stack([np.zeros_like(yaw), np.zeros_like(yaw), np.sin(yaw / 2), np.cos(yaw / 2)], -1)
    root = np.stack([0.2 * t, 0.05 * t, np.zeros_like(t)], -1)
    fk = ForwardKinematics(robot)
    import torch

    pos, _ = fk(torch.as_tensor(root), torch.as_tensor(quat), torch.as_tensor(q))
    feet_z = pos[:, [robot.link_index(f) for f in FEET], 2].numpy()
    root[:, 2] = -(feet_z[0].min() - FOOT_RADIUS)
    motion = Motion(fps=1 / DT, joint_names=robot.joint_names, joint_pos=q, root_pos=root, root_quat=quat,
                    foot_names=FEET, foot_offsets=np.zeros((4, 3)), prompt=prompt)
    motion.save(run.file(REFERENCE))
    run.update_manifest(robot="a1", prompt=prompt, seeds={"gait": seed})
    if tracked:
        noisy = np.clip(q + rng.normal(0, 0.01, q.shape), robot.lower, robot.upper)
        TrackedMotion(dt=DT, joint_names=robot.joint_names, pd_targets=q, joint_pos=noisy,
                      joint_vel=np.gradient(noisy, DT, axis=0), joint_torques=0.5 * robot.effort_limit * np.cos(
                          2 * np.pi * 2.0 * t[:, None] + phase), root_pos=root, root_quat=quat,
                      root_lin_vel=np.tile([0.2, 0.05, 0.0], (STEPS, 1)), root_ang_vel=np.tile([0, 0, 0.4], (STEPS, 1)),
                      kp=np.full(robot.num_dofs, 40.0), kd=np.full(robot.num_dofs, 1.5)).save(run.file(TRACKED))
        # a finished run as the quality gates of `akd export` judge it (tests/test_quality.py tests the gates)
        run.set_stage("track", status="done", metrics={"fell": fell, "max_tilt_deg": 80.0 if fell else 3.0,
                                                        "link_pos_err_m": 0.02})
        run.set_stage("crosscheck", status="done", metrics={"passed": True, "joint_rmse_rad": 0.01})
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("export_runs")
    return [make_run(root / "walk_a", "a dog trotting", 3), make_run(root / "walk_b", "a dog pacing", 4, fell=True)]


def _yourdfpy_foot_in_base(urdf_path: Path, joint_names: list[str], q: np.ndarray) -> np.ndarray:
    """(K, 3) foot origins in the base frame by yourdfpy (independent of our FK)."""
    import yourdfpy

    model = yourdfpy.URDF.load(str(urdf_path), load_meshes=False, build_scene_graph=True)
    model.update_cfg(dict(zip(joint_names, q.tolist())))
    return np.array([model.get_transform(frame_to=f, frame_from="base")[:3, 3] for f in FEET])


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------- episode
def test_episode_feet_match_yourdfpy_fk_and_contacts_follow_foot_height(runs):
    run = runs[0]
    ep = load_episode(run.path)
    tracked = TrackedMotion.load(run.file(TRACKED))
    assert ep.source == "tracked" and ep.prompt == "a dog trotting" and ep.seed == 3 and ep.success
    np.testing.assert_array_equal(ep.pd_targets, tracked.pd_targets)
    rot = quat_to_matrix(tracked.root_quat)
    for frame in (0, 17, 49):
        local = _yourdfpy_foot_in_base(run.file(ROBOT_URDF), ep.joint_names, tracked.joint_pos[frame])
        world = tracked.root_pos[frame] + local @ rot[frame].T
        np.testing.assert_allclose(ep.foot_pos[frame], world, atol=1e-5)
    expected = (ep.foot_pos[..., 2] - FOOT_RADIUS) < CONTACT_HEIGHT_M
    np.testing.assert_array_equal(ep.foot_contacts, expected)
    assert ep.foot_contacts.any() and not ep.foot_contacts.all(), "the clip should lift and plant feet"
    assert load_episode(runs[1].path).success is False  # manifest's track metrics say it fell


# ----------------------------------------------------------------------------- hdf5
def test_hdf5_layout_field_by_field(runs, tmp_path):
    path = tmp_path / "walks.hdf5"
    export_runs([r.path for r in runs], "hdf5", path)
    robot = load_urdf(runs[0].file(ROBOT_URDF))
    j = robot.num_dofs
    with h5py.File(path, "r") as f:
        assert f.attrs["schema_version"] == 1 and f.attrs["fps"] == pytest.approx(1 / DT)
        assert f.attrs["num_episodes"] == 2 and f.attrs["total_samples"] == 2 * STEPS
        assert "xyzw" in f.attrs["description"]
        data = f["data"]
        assert data.attrs["total"] == 2 * STEPS
        env = json.loads(data.attrs["env_args"])
        assert env["env_name"] == "akd" and env["type"] == 2 and env["robot"] == "a1"
        assert env["fps"] == pytest.approx(50.0) and env["joint_names"] == robot.joint_names
        assert env["kp"] == [40.0] * j and env["kd"] == [1.5] * j
        np.testing.assert_allclose(env["effort_limit"], robot.effort_limit)
        assert env["state_layout"] == [["root_pos", 3], ["root_quat", 4], ["joint_pos", j], ["root_lin_vel", 3],
                                       ["root_ang_vel", 3], ["joint_vel", j]]
        for i, run in enumerate(runs):
            demo = data[f"demo_{i}"]
            tracked = TrackedMotion.load(run.file(TRACKED))
            assert demo.attrs["num_samples"] == STEPS and demo.attrs["seed"] == 3 + i
            assert bool(demo.attrs["success"]) is (i == 0)
            assert demo.attrs["prompt"] == ["a dog trotting", "a dog pacing"][i]
            np.testing.assert_array_equal(demo["actions"][()], tracked.pd_targets)
            np.testing.assert_array_equal(demo["joint_torques"][()], tracked.joint_torques)
            for key in ("joint_pos", "joint_vel", "root_pos", "root_quat", "root_lin_vel", "root_ang_vel"):
                np.testing.assert_array_equal(demo["obs"][key][()], getattr(tracked, key), err_msg=key)
                assert demo["obs"][key].compression == "gzip" and demo["obs"][key].dtype == np.float32
            assert demo["obs/foot_contacts"].shape == (STEPS, 4)
            states = demo["states"][()]
            assert states.shape == (STEPS, 13 + 2 * j)
            np.testing.assert_array_equal(states[:, 3:7], tracked.root_quat)
            np.testing.assert_array_equal(states[:, 7:7 + j], tracked.joint_pos)
            np.testing.assert_array_equal(states[:, -j:], tracked.joint_vel)
            init = demo["initial_state/articulation/robot"]
            np.testing.assert_array_equal(init["root_pose"][0], np.r_[tracked.root_pos[0], tracked.root_quat[0]])
            np.testing.assert_array_equal(init["joint_position"][0], tracked.joint_pos[0])
    back = read_hdf5(path)
    np.testing.assert_array_equal(back.demos[1].obs["joint_pos"], TrackedMotion.load(runs[1].file(TRACKED)).joint_pos)


def test_hdf5_reads_the_way_robomimic_and_our_bc_reader_read_it(runs, tmp_path):
    path = tmp_path / "walks.hdf5"
    export_runs([r.path for r in runs], "hdf5", path)
    # robomimic SequenceDataset: demos sorted by their integer suffix, num_samples attr, obs/<key>, actions
    with h5py.File(path, "r") as f:
        demos = sorted(f["data"].keys(), key=lambda name: int(name[5:]))
        assert demos == ["demo_0", "demo_1"]
        env_meta = json.loads(f["data"].attrs["env_args"])
        assert isinstance(env_meta["env_kwargs"], dict) and env_meta["type"] == 2
        total = sum(int(f[f"data/{ep}"].attrs["num_samples"]) for ep in demos)
        assert total == f["data"].attrs["total"]
        for ep in demos:
            n = f[f"data/{ep}"].attrs["num_samples"]
            assert all(f[f"data/{ep}/obs/{k}"].shape[0] == n for k in f[f"data/{ep}/obs"])
            assert f[f"data/{ep}/actions"].shape == (n, 12)
    from akd_core.learn.dataset import load_dataset

    dataset = load_dataset(path)
    assert [d.name for d in dataset.demos] == ["demo_0", "demo_1"]
    assert dataset.dt == pytest.approx(DT) and dataset.joint_names == load_urdf(runs[0].file(ROBOT_URDF)).joint_names
    np.testing.assert_allclose(dataset.demos[0].actions, TrackedMotion.load(runs[0].file(TRACKED)).pd_targets)


def test_a_dataset_of_runs_tracked_at_two_rates_is_refused_naming_the_fix(runs, tmp_path):
    """A clip with flight phases is controlled at 100 Hz by `akd track`, a trot at its 50 fps: one dataset holds one
    fps, so exporting both together stops before writing, naming the rates and `--control-hz`."""
    import shutil

    from akd_core.io.errors import MotionError

    fast = tmp_path / "fast"
    shutil.copytree(runs[1].path, fast)
    tracked = TrackedMotion.load(fast / TRACKED)
    dataclasses.replace(tracked, dt=tracked.dt / 2).save(fast / TRACKED)
    path = tmp_path / "mixed.hdf5"
    with pytest.raises(MotionError, match=r"different control periods \[0\.01, 0\.02\] s.*--control-hz HZ"):
        export_runs([runs[0].path, fast], "hdf5", path)
    assert not path.exists() and not list(tmp_path.glob("mixed*"))


def test_hdf5_append_keeps_first_demo_and_continues_numbering(runs, tmp_path):
    path = tmp_path / "grow.hdf5"
    export_runs([runs[0].path], "hdf5", path)
    with h5py.File(path, "r") as f:
        first = {k: f["data/demo_0/obs"][k][()] for k in f["data/demo_0/obs"]}
    export_runs([runs[1].path], "hdf5", path)
    export_runs([runs[0].path], "hdf5", path)
    with h5py.File(path, "r") as f:
        assert sorted(f["data"].keys()) == ["demo_0", "demo_1", "demo_2"]
        for key, values in first.items():
            np.testing.assert_array_equal(f["data/demo_0/obs"][key][()], values)
        assert f["data"].attrs["total"] == 3 * STEPS and f.attrs["num_episodes"] == 3
        assert f["data/demo_1"].attrs["prompt"] == "a dog pacing"
    export_runs([runs[1].path], "hdf5", path, append=False)
    with h5py.File(path, "r") as f:
        assert list(f["data"].keys()) == ["demo_0"] and f["data/demo_0"].attrs["prompt"] == "a dog pacing"


def test_hdf5_crash_mid_write_leaves_the_old_file_and_no_temporaries(runs, tmp_path):
    path = tmp_path / "safe.hdf5"
    good = load_episode(runs[0].path)
    bad = dataclasses.replace(good, joint_torques=None)  # fails inside the writer, after demo groups were created
    with pytest.raises(AttributeError):
        write_hdf5([good, bad], path)
    assert not path.exists() and list(tmp_path.iterdir()) == []
    write_hdf5([good], path)
    before = _sha(path)
    with pytest.raises(AttributeError):
        write_hdf5([good, bad], path)
    assert _sha(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["safe.hdf5"]


def test_dataset_formats_need_tracking_and_amp_takes_the_reference(tmp_path):
    run = make_run(tmp_path / "untracked", "a dog walking", 0, tracked=False)
    with pytest.raises(RunDirError, match=f"akd track {run.path}"):
        export_runs([run.path], "hdf5", None)
    with pytest.raises(RunDirError, match="akd track"):
        export_runs([run.path], "lerobot", None)
    (txt,) = export_runs([run.path], "amp", None)
    frames = np.asarray(json.loads(txt.read_text())["Frames"])
    np.testing.assert_allclose(frames[:, 7:19], Motion.load(run.file(REFERENCE)).joint_pos, atol=1e-6)


def test_out_of_limit_targets_are_refused_unless_overridden(tmp_path):
    run = make_run(tmp_path / "wild", "a dog", 0)
    tracked = TrackedMotion.load(run.file(TRACKED))
    robot = load_urdf(run.file(ROBOT_URDF))
    tracked.pd_targets[10, 2] = robot.upper[2] + 0.3
    tracked.save(run.file(TRACKED))
    with pytest.raises(JointLimitError, match="pd_targets.*FR_calf_joint.*frame 10"):
        export_runs([run.path], "hdf5", None)
    assert not (run.path / "export" / "dataset.hdf5").exists()
    (path,) = export_runs([run.path], "hdf5", None, allow_out_of_limits=True)
    assert path.exists()


def test_simulated_states_may_press_a_hair_past_a_limit_commands_may_not(tmp_path):
    """A joint held against its limit by load sinks into the simulator's (stiff, finite) limit: a tracked state
    1 mrad past it exports; 10 mrad past it, or a PD target 1 mrad past it, is refused."""
    from akd_core.motion.clip import STATE_LIMIT_TOLERANCE

    run = make_run(tmp_path / "pressed", "a dog", 0)
    robot = load_urdf(run.file(ROBOT_URDF))
    original = TrackedMotion.load(run.file(TRACKED))
    for field_name, excess, ok in (("joint_pos", 1e-3, True), ("joint_pos", 2 * STATE_LIMIT_TOLERANCE, False),
                                   ("pd_targets", 1e-3, False)):
        tracked = TrackedMotion.load(run.file(TRACKED))
        getattr(tracked, field_name)[7, 2] = robot.upper[2] + excess
        tracked.save(run.file(TRACKED))
        if ok:
            assert export_runs([run.path], "hdf5", None)[0].exists()
        else:
            with pytest.raises(JointLimitError, match=f"{field_name}.*FR_calf_joint.*frame 7"):
                export_runs([run.path], "hdf5", None)
        original.save(run.file(TRACKED))


# ----------------------------------------------------------------------------- lerobot
def test_lerobot_v3_layout_and_round_trip(runs, tmp_path):
    import pyarrow.parquet as pq

    root = tmp_path / "lerobot"
    export_runs([r.path for r in runs], "lerobot", root)
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["robot_type"] == "a1" and info["fps"] == pytest.approx(50)
    assert info["total_episodes"] == 2 and info["total_tasks"] == 2 and info["splits"] == {"train": "0:2"}
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] is None and info["chunks_size"] == 1000
    for key in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        assert info["features"][key]["shape"] == [1]
    state = info["features"]["observation.state"]
    assert state["shape"] == [37] and len(state["names"]) == 37 and state["names"][0] == "FR_hip_joint.pos"
    data = pq.read_table(root / "data/chunk-000/file-000.parquet")
    assert info["total_frames"] == data.num_rows == 2 * STEPS
    assert set(data.column_names) == set(info["features"])
    index = data.column("index").to_numpy()
    np.testing.assert_array_equal(index, np.arange(2 * STEPS))
    frame_index = data.column("frame_index").to_numpy()
    np.testing.assert_allclose(data.column("timestamp").to_numpy(), frame_index / 50.0, atol=1e-6)
    np.testing.assert_array_equal(data.column("episode_index").to_numpy(), np.repeat([0, 1], STEPS))
    assert data.schema.field("action").type.list_size == 12
    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [(e["episode_index"], e["length"], e["dataset_from_index"], e["dataset_to_index"], e["tasks"])
            for e in episodes] == [(0, STEPS, 0, STEPS, ["a dog trotting"]), (1, STEPS, STEPS, 2 * STEPS,
                                                                              ["a dog pacing"])]
    assert episodes[0]["data/chunk_index"] == 0 and episodes[0]["meta/episodes/file_index"] == 0
    tasks = pq.read_table(root / "meta/tasks.parquet")
    assert tasks.to_pydict() == {"task_index": [0, 1], "task": ["a dog trotting", "a dog pacing"]}
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]
    stats = json.loads((root / "meta/stats.json").read_text())
    actions = np.concatenate([TrackedMotion.load(r.file(TRACKED)).pd_targets for r in runs]).astype(np.float64)
    np.testing.assert_allclose(stats["action"]["mean"], actions.mean(0), rtol=1e-6)
    np.testing.assert_allclose(stats["action"]["std"], actions.std(0), rtol=1e-5)
    assert stats["action"]["count"] == [2 * STEPS] and stats["index"]["max"] == [2 * STEPS - 1]
    assert episodes[1]["stats/action/min"] == pytest.approx(actions[STEPS:].min(0).tolist(), rel=1e-6)
    back = read_lerobot(root)
    tracked = TrackedMotion.load(runs[1].file(TRACKED))
    assert back[1].task == "a dog pacing"
    np.testing.assert_array_equal(back[1].frames["action"], tracked.pd_targets)
    np.testing.assert_array_equal(back[1].frames["observation.effort"], tracked.joint_torques)
    np.testing.assert_array_equal(back[1].frames["observation.state"][:, :12], tracked.joint_pos)
    np.testing.assert_array_equal(back[1].frames["observation.state"][:, 27:31], tracked.root_quat)


def test_lerobot_tasks_parquet_reads_with_pandas_as_lerobot_does(runs, tmp_path):
    pd = pytest.importorskip("pandas", reason="pandas is not in the venv (lerobot reads tasks with pd.read_parquet)")
    root = tmp_path / "lr"
    export_runs([r.path for r in runs], "lerobot", root)
    tasks = pd.read_parquet(root / "meta/tasks.parquet")
    assert list(tasks.index) == ["a dog trotting", "a dog pacing"] and tasks.index.name == "task"
    assert tasks.loc["a dog pacing", "task_index"] == 1 and tasks.iloc[0].name == "a dog trotting"


def test_lerobot_append_keeps_first_episode_and_reuses_tasks(runs, tmp_path):
    import pyarrow.parquet as pq

    root = tmp_path / "grow"
    export_runs([runs[0].path], "lerobot", root)
    first = pq.read_table(root / "data/chunk-000/file-000.parquet")
    export_runs([runs[1].path], "lerobot", root)
    export_runs([runs[0].path], "lerobot", root)
    data = pq.read_table(root / "data/chunk-000/file-000.parquet")
    assert data.slice(0, STEPS).equals(first)
    info = json.loads((root / "meta/info.json").read_text())
    assert info["total_episodes"] == 3 and info["total_frames"] == 3 * STEPS and info["total_tasks"] == 2
    np.testing.assert_array_equal(data.column("index").to_numpy(), np.arange(3 * STEPS))
    back = read_lerobot(root)
    assert [e.task for e in back] == ["a dog trotting", "a dog pacing", "a dog trotting"]
    assert back[2].frames["task_index"][0] == 0 and back[2].frames["frame_index"][0] == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary folders left"


def test_lerobot_crash_mid_write_leaves_the_old_dataset(runs, tmp_path):
    root = tmp_path / "safe"
    good = load_episode(runs[0].path)
    write_lerobot([good], root)
    before = {p.relative_to(root): _sha(p) for p in root.rglob("*") if p.is_file()}
    bad = dataclasses.replace(good, joint_torques=None)
    with pytest.raises(AttributeError):
        write_lerobot([good, bad], root)
    assert {p.relative_to(root): _sha(p) for p in root.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["safe"]


# ----------------------------------------------------------------------------- amp
def test_amp_txt_loads_with_json_and_toe_positions_are_in_the_root_frame(runs, tmp_path):
    run = runs[0]
    (path,) = export_runs([run.path], "amp", tmp_path / "trot.txt")
    doc = json.loads(path.read_text())
    assert doc["LoopMode"] == "Wrap" and doc["FrameDuration"] == pytest.approx(DT) and doc["MotionWeight"] == 1.0
    assert doc["EnableCycleOffsetPosition"] is True and doc["EnableCycleOffsetRotation"] is True
    frames = np.asarray(doc["Frames"])
    assert frames.shape == (STEPS, 61)  # A1: 3 + 4 + 12 + 12 + 3 + 3 + 12 + 12
    tracked = TrackedMotion.load(run.file(TRACKED))
    np.testing.assert_allclose(frames[:, 0:3], tracked.root_pos, atol=1e-6)
    np.testing.assert_allclose(frames[:, 3:7], tracked.root_quat, atol=1e-6)
    np.testing.assert_allclose(frames[:, 7:19], tracked.joint_pos, atol=1e-6)
    for frame in (0, 25):
        local = _yourdfpy_foot_in_base(run.file(ROBOT_URDF), doc["JointNames"], tracked.joint_pos[frame])
        np.testing.assert_allclose(frames[frame, 19:31].reshape(4, 3), local, atol=1e-5)
    rot = quat_to_matrix(tracked.root_quat)
    lin_local = np.einsum("tji,tj->ti", rot, tracked.root_lin_vel)
    np.testing.assert_allclose(frames[:, 31:34], lin_local, atol=1e-5)
    np.testing.assert_allclose(frames[:, 37:49], tracked.joint_vel, atol=1e-5)
    toe_vel = np.gradient(frames[:, 19:31], DT, axis=0)
    np.testing.assert_allclose(frames[:, 49:61], toe_vel, atol=1e-3)


def test_isaaclab_amp_npz_has_the_loader_fields_with_wxyz_bodies(runs, tmp_path):
    run = runs[0]
    (path,) = export_runs([run.path], "isaaclab-amp", tmp_path / "trot.npz")
    with np.load(path, allow_pickle=False) as data:  # Isaac Lab's MotionLoader loads it like this
        robot = load_urdf(run.file(ROBOT_URDF))
        tracked = TrackedMotion.load(run.file(TRACKED))
        assert float(data["fps"]) == pytest.approx(50.0)
        assert data["dof_names"].tolist() == robot.joint_names and data["body_names"].tolist() == robot.link_names
        n, b = STEPS, len(robot.link_names)
        assert data["dof_positions"].shape == (n, 12) and data["body_positions"].shape == (n, b, 3)
        assert data["body_rotations"].shape == (n, b, 4) and data["body_linear_velocities"].shape == (n, b, 3)
        np.testing.assert_allclose(data["body_positions"][:, 0], tracked.root_pos, atol=1e-6)
        root_wxyz = data["body_rotations"][:, 0]
        expected = np.concatenate([tracked.root_quat[:, 3:], tracked.root_quat[:, :3]], 1)
        np.testing.assert_allclose(np.abs(np.sum(root_wxyz * expected, 1)), 1.0, atol=1e-6)  # same rotation
        np.testing.assert_allclose(np.linalg.norm(data["body_rotations"], axis=-1), 1.0, atol=1e-5)
        foot = robot.link_index("FR_foot")
        ep = load_episode(run.path)
        np.testing.assert_allclose(data["body_positions"][:, foot], ep.foot_pos[:, 0], atol=1e-5)
        np.testing.assert_allclose(data["body_linear_velocities"][:, foot],
                                   np.gradient(ep.foot_pos[:, 0].astype(np.float64), DT, axis=0), atol=1e-3)


# ----------------------------------------------------------------------------- rosbag2
def test_rosbag2_reads_back_with_rosbags_and_deserialises_in_rclpy(runs, tmp_path):
    run = runs[0]
    start = 1_700_000_000_000_000_000
    (bag,) = export_runs([run.path], "rosbag2", tmp_path / "trot_bag", start_ns=start)
    assert sorted(p.suffix for p in bag.iterdir()) == [".mcap", ".yaml"]
    tracked = TrackedMotion.load(run.file(TRACKED))
    topics = read_rosbag(bag)
    period = int(round(DT * 1e9))
    states = topics["/joint_states"]
    assert len(states) == STEPS and [t for t, _ in states] == [start + k * period for k in range(STEPS)]
    np.testing.assert_allclose(states[7][1].position, tracked.joint_pos[7], atol=1e-6)
    np.testing.assert_allclose(states[7][1].effort, tracked.joint_torques[7], atol=1e-5)
    assert states[7][1].header.stamp.sec * 10**9 + states[7][1].header.stamp.nanosec == start + 7 * period
    (traj,) = [m for _, m in topics["/akd/reference_trajectory"]]
    assert list(traj.joint_names) == tracked.joint_names and len(traj.points) == STEPS
    assert all(len(p.effort) == 0 for p in traj.points)
    np.testing.assert_allclose(traj.points[5].positions, tracked.pd_targets[5], atol=1e-6)
    assert traj.points[5].time_from_start.nanosec == 5 * period and not np.any(traj.points[-1].velocities)
    assert len(topics["/akd/pd_targets"]) == len(topics["/akd/joint_torques"]) == STEPS
    odom = topics["/akd/root_odom"][3][1]
    assert odom.header.frame_id == "odom" and odom.child_frame_id == "base"
    lin_body = quat_to_matrix(tracked.root_quat[3]).T @ tracked.root_lin_vel[3]
    np.testing.assert_allclose([odom.twist.twist.linear.x, odom.twist.twist.linear.y], lin_body[:2], atol=1e-6)
    (desc,) = topics["/robot_description"]
    assert "<robot" in desc[1].data and "file://" in desc[1].data
    import yaml

    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    qos = {t["topic_metadata"]["name"]: t["topic_metadata"]["offered_qos_profiles"][0]["durability"]
           for t in info["topics_with_message_count"]}
    assert qos["/robot_description"] == "transient_local" and qos["/joint_states"] == "volatile"

    pytest.importorskip("rclpy", reason="the ROS 2 wheels are not installed (pip install -e '.[ros]')")
    from rclpy.serialization import deserialize_message
    from rosbags.highlevel import AnyReader

    def get_message(msgtype: str):
        """'sensor_msgs/msg/JointState' -> the rclpy message class (sensor_msgs.msg.JointState)."""
        import importlib

        package, _, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{package}.msg"), name)

    counts: dict[str, int] = {}
    with AnyReader([bag]) as reader:
        for connection, _, raw in reader.messages():
            msg = deserialize_message(bytes(raw), get_message(connection.msgtype))
            counts[connection.topic] = counts.get(connection.topic, 0) + 1
            if connection.topic == "/joint_states" and counts[connection.topic] == 8:
                np.testing.assert_allclose(msg.effort, tracked.joint_torques[7], atol=1e-5)
                assert list(msg.name) == tracked.joint_names
            if connection.topic == "/akd/reference_trajectory":
                assert len(msg.points) == STEPS and len(msg.points[0].effort) == 0
    assert counts == {"/robot_description": 1, "/akd/reference_trajectory": 1, "/joint_states": STEPS,
                      "/akd/pd_targets": STEPS, "/akd/joint_torques": STEPS, "/akd/root_odom": STEPS}


# ----------------------------------------------------------------------------- CLI / defaults
def test_akd_export_cli_writes_every_format_and_records_the_stage(tmp_path):
    from akd_core.cli import main

    run = make_run(tmp_path / "cli_run", "a dog trotting", 1)
    assert main(["export", str(run.path), "--format", "all"]) == 0
    out = run.path / "export"
    assert (out / "dataset.hdf5").is_file() and (out / "lerobot/meta/info.json").is_file()
    assert (out / "cli_run.txt").is_file() and (out / "cli_run.npz").is_file()
    assert (out / "rosbag2/metadata.yaml").is_file()
    stage = RunDir(run.path).stage("export")
    assert stage["status"] == "done" and set(stage["metrics"]["files"]) == {"hdf5", "lerobot", "amp",
                                                                            "isaaclab-amp", "rosbag2",
                                                                            *MOTION_FORMATS}
    for fmt in MOTION_FORMATS:  # the motion files (tests/test_motion_files.py checks them) do not collide
        assert (out / f"cli_run.{fmt}{MOTION_SUFFIX[fmt]}").is_file(), fmt
    assert main(["export", str(run.path), "--format", "hdf5"]) == 0  # the run's own default is rebuilt
    with h5py.File(out / "dataset.hdf5", "r") as f:
        assert list(f["data"].keys()) == ["demo_0"]
    with pytest.raises(ConfigError, match="-o PATH"):
        export_runs([run.path, run.path], "hdf5", None)
    with pytest.raises(ConfigError, match="unknown export format"):
        export_runs([run.path], "csv", None)


def test_several_robots_share_an_hdf5_but_not_a_lerobot_dataset(runs, tmp_path):
    from akd_core.io.errors import MotionError
    from akd_core.model.load import load_robot

    robot = load_robot("hexapod")
    run = RunDir(tmp_path / "hexapod_stand", create=True)
    robot.to_urdf(run.file(ROBOT_URDF))
    q = np.tile(np.clip(np.zeros(robot.num_dofs), robot.lower, robot.upper), (STEPS, 1))
    root, quat = np.tile([0.0, 0.0, 0.3], (STEPS, 1)), np.tile([0.0, 0.0, 0.0, 1.0], (STEPS, 1))
    Motion(fps=1 / DT, joint_names=robot.joint_names, joint_pos=q, root_pos=root, root_quat=quat,
           prompt="a hexapod standing").save(run.file(REFERENCE))
    zeros = np.zeros((STEPS, 3))
    TrackedMotion(dt=DT, joint_names=robot.joint_names, pd_targets=q, joint_torques=0 * q, joint_pos=q,
                  joint_vel=0 * q, root_pos=root, root_quat=quat, root_lin_vel=zeros, root_ang_vel=zeros,
                  kp=np.full(robot.num_dofs, 30.0), kd=np.ones(robot.num_dofs)).save(run.file(TRACKED))
    ep = load_episode(run.path)
    assert len(ep.foot_names) == 6 and all(n.endswith("_foot") for n in ep.foot_names)
    path = tmp_path / "mixed.hdf5"
    export_runs([runs[0].path, run.path], "hdf5", path)
    with h5py.File(path, "r") as f:
        env = json.loads(f["data"].attrs["env_args"])
        assert env["mixed_robots"] is True and env["robots"] == ["a1", "hexapod"]
        assert json.loads(f["data/demo_1"].attrs["joint_names"]) == robot.joint_names
        assert f["data/demo_1/actions"].shape == (STEPS, robot.num_dofs)
    with pytest.raises(MotionError, match="one robot"):
        export_runs([runs[0].path, run.path], "lerobot", tmp_path / "lr")


def test_feet_with_heel_and_toe_parts_export_which_part_is_down(tmp_path):
    """A reference whose feet have two parts (schema 2, as a human-like walk's heel and toe lines): HDF5 and LeRobot
    hold each part's contact, from FK of the exported states, named <foot>/<part>; one-part feet add nothing."""
    run = make_run(tmp_path / "parts", "a dog with parts", 5)
    motion = Motion.load(run.file(REFERENCE))
    low, high = np.zeros(3), np.array([0.0, 0.0, 0.05])  # the second part sits 5 cm up the foot: never down
    parts = np.zeros((motion.num_frames, 4, 2), bool)
    parts[:, :, 0] = True
    Motion(fps=motion.fps, joint_names=motion.joint_names, joint_pos=motion.joint_pos, root_pos=motion.root_pos,
           root_quat=motion.root_quat, foot_names=motion.foot_names, foot_offsets=motion.foot_offsets,
           foot_contacts=parts.any(-1), prompt=motion.prompt, foot_contact_points=np.tile([low, high], (4, 1, 1)),
           foot_contact_parts=parts, foot_contact_labels=["low", "high"]).save(run.file(REFERENCE))
    episode = load_episode(run.path)
    assert episode.contact_labels == ["low", "high"] and episode.foot_part_contacts.shape == (STEPS, 4, 2)
    assert not episode.foot_part_contacts[..., 1].any()  # 5 cm above a foot on the ground: never within 1.5 cm
    np.testing.assert_array_equal(episode.foot_part_contacts[..., 0], episode.foot_pos[..., 2] < CONTACT_HEIGHT_M)
    (path,) = export_runs([run.path], "hdf5", tmp_path / "parts.hdf5")
    demo = read_hdf5(path).demos[0]
    assert json.loads(demo.attrs["foot_contact_parts"])[:2] == [f"{FEET[0]}/low", f"{FEET[0]}/high"]
    np.testing.assert_array_equal(demo.obs["foot_contact_parts"], episode.foot_part_contacts.reshape(STEPS, 8))
    (root,) = export_runs([run.path], "lerobot", tmp_path / "lerobot")
    info = json.loads((root / "meta/info.json").read_text())
    assert info["features"]["observation.foot_contact_parts"]["names"][1] == f"{FEET[0]}/high"
    one = load_episode(make_run(tmp_path / "plain", "a dog", 6).path)
    assert one.contact_labels == ["sole"] and one.foot_part_contacts.shape == (STEPS, 4, 1)
    (plain,) = export_runs([one.run_dir], "hdf5", tmp_path / "plain.hdf5")
    assert "foot_contact_parts" not in read_hdf5(plain).demos[0].obs
