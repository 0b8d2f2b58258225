"""Motion files for RL-tracking trainers (akd_core.export.motion_files): every format read back and checked against
MuJoCo FK of the tracked states on the robot's own MJCF (Robot.to_mjcf), body and joint order included, and, in the
slow tests, loaded by the trainers' own loaders (mjlab, amp-rsl-rl, loco-mujoco) in throwaway virtual environments."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest

from akd_core.export import export_runs, load_episode
from akd_core.export.common import MOTION_FORMATS
from akd_core.export.motion_files import SUFFIX, isaac_body_order, read_motion_file, write_motion_file
from akd_core.io.errors import AKDError, ConfigError, MotionError
from akd_core.io.rundir import ROBOT_URDF, TRACKED, RunDir
from akd_core.model.robot import Robot, load_urdf
from akd_core.motion.clip import TrackedMotion
from akd_core.motion.stage import stage_gait
from akd_core.physics.tracker import stage_track

# Isaac Lab's order of the a1 URDF's bodies: 'trunk' and 'imu_link' hang on fixed joints and are merged into 'base';
# breadth-first, siblings by name (Isaac Lab's Unitree quadrupeds list FL, FR, RL, RR hips, then thighs, then calves)
A1_ISAAC_BODIES = ["base", "FL_hip", "FR_hip", "RL_hip", "RR_hip", "FL_thigh", "FR_thigh", "RL_thigh", "RR_thigh",
                   "FL_calf", "FR_calf", "RL_calf", "RR_calf"]
A1_ISAAC_JOINTS = [f"{leg}_{part}_joint" for part in ("hip", "thigh", "calf") for leg in ("FL", "FR", "RL", "RR")]


@pytest.fixture(scope="module")
def run(tmp_path_factory, a1_urdf) -> RunDir:
    """A short a1 trot, tracked in MuJoCo (one tracking iteration per window): real simulated states."""
    run = RunDir(tmp_path_factory.mktemp("motion_files") / "trot", create=True)
    stage_gait(run, robot_spec=str(a1_urdf), prompt="trot forward", duration=0.6, fps=50.0, seed=0, feet=None,
               package_paths=[])
    stage_track(run, iterations=1, progress=False, seed=0)
    return run


@pytest.fixture(scope="module")
def fk(run):
    """MuJoCo FK of tracked.npz on the robot's own MJCF (with its geometry), independent of the writers' model."""
    robot = load_urdf(run.file(ROBOT_URDF))
    return mujoco_states(robot.to_mjcf(), TrackedMotion.load(run.file(TRACKED)))


def mujoco_states(xml: str, tracked: TrackedMotion) -> dict:
    """Per frame: xpos, xquat (wxyz), link-origin and COM velocities (world) of every body, by name."""
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "root")
    q0, v0 = model.jnt_qposadr[root], model.jnt_dofadr[root]
    joints = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in tracked.joint_names]
    names = [model.body(b).name for b in range(model.nbody)]
    out = {k: [] for k in ("xpos", "xquat", "link_vel", "com_vel", "ang_vel")}
    for t in range(len(tracked.joint_pos)):
        x, y, z, w = tracked.root_quat[t]
        data.qpos[q0:q0 + 3] = tracked.root_pos[t]
        data.qpos[q0 + 3:q0 + 7] = [w, x, y, z]
        data.qpos[model.jnt_qposadr[joints]] = tracked.joint_pos[t]
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, np.array([w, x, y, z]))
        data.qvel[v0:v0 + 3] = tracked.root_lin_vel[t]
        data.qvel[v0 + 3:v0 + 6] = rot.reshape(3, 3).T @ tracked.root_ang_vel[t]
        data.qvel[model.jnt_dofadr[joints]] = tracked.joint_vel[t]
        mujoco.mj_forward(model, data)
        out["xpos"].append(data.xpos.copy())
        out["xquat"].append(data.xquat.copy())
        for key, kind in (("link_vel", mujoco.mjtObj.mjOBJ_XBODY), ("com_vel", mujoco.mjtObj.mjOBJ_BODY)):
            vel = np.zeros((model.nbody, 6))
            for b in range(model.nbody):
                mujoco.mj_objectVelocity(model, data, kind, b, vel[b], 0)
            out[key].append(vel[:, 3:])
            out["ang_vel"].append(vel[:, :3]) if key == "link_vel" else None
    states = {k: np.stack(v) for k, v in out.items()}
    states.update(names=names, model=model)
    return states


def by_name(fk: dict, key: str, names) -> np.ndarray:
    return fk[key][:, [fk["names"].index(str(n)) for n in names]]


def assert_same_quats(a: np.ndarray, b: np.ndarray, atol: float = 1e-5) -> None:
    """Equal as rotations (q and -q are the same rotation)."""
    err = np.minimum(np.abs(a - b).max(-1), np.abs(a + b).max(-1))
    assert err.max() < atol, err.max()


def export(run: RunDir, fmt: str, out: Path, **options) -> Path:
    (path,) = export_runs([run.path], fmt, out / f"trot{SUFFIX[fmt]}", **options)
    return path


# ----------------------------------------------------------------------------- mjlab / BeyondMimic
def test_mjlab_npz_has_mujoco_body_order_and_mujoco_fk_of_the_tracked_states(run, fk, tmp_path):
    data = read_motion_file(export(run, "mjlab", tmp_path), "mjlab")
    tracked = TrackedMotion.load(run.file(TRACKED))
    assert list(data["body_names"]) == fk["names"][1:]  # every body but the world, in MuJoCo id order
    assert list(data["joint_names"]) == [fk["model"].joint(j).name for j in range(1, fk["model"].njnt)]
    assert data["fps"].shape == (1,) and data["fps"][0] == pytest.approx(1 / tracked.dt)
    assert data["body_pos_w"].dtype == np.float32 and data["body_pos_w"].shape == (len(tracked.joint_pos), 23, 3)
    np.testing.assert_allclose(data["body_pos_w"], by_name(fk, "xpos", data["body_names"]), atol=1e-5)
    assert_same_quats(data["body_quat_w"], by_name(fk, "xquat", data["body_names"]))  # wxyz, as MuJoCo's xquat
    np.testing.assert_allclose(data["body_lin_vel_w"], by_name(fk, "link_vel", data["body_names"]), atol=1e-4)
    np.testing.assert_allclose(data["body_ang_vel_w"], by_name(fk, "ang_vel", data["body_names"]), atol=1e-4)
    order = [tracked.joint_names.index(n) for n in data["joint_names"]]
    np.testing.assert_allclose(data["joint_pos"], tracked.joint_pos[:, order], atol=1e-6)
    # velocities are the simulated ones, not differences of positions: the root's are tracked.npz's
    np.testing.assert_allclose(data["body_lin_vel_w"][:, 0], tracked.root_lin_vel, atol=1e-5)
    np.testing.assert_allclose(data["joint_vel"], tracked.joint_vel[:, order], atol=1e-5)


def test_beyondmimic_npz_has_isaac_lab_order_and_center_of_mass_velocities(run, fk, tmp_path):
    data = read_motion_file(export(run, "beyondmimic", tmp_path), "beyondmimic")
    tracked = TrackedMotion.load(run.file(TRACKED))
    assert list(data["body_names"]) == A1_ISAAC_BODIES
    assert list(data["joint_names"]) == A1_ISAAC_JOINTS
    np.testing.assert_allclose(data["body_pos_w"], by_name(fk, "xpos", A1_ISAAC_BODIES), atol=1e-5)
    assert_same_quats(data["body_quat_w"], by_name(fk, "xquat", A1_ISAAC_BODIES))
    # Isaac Lab's body_lin_vel_w is the centre of mass's; a body that absorbed links on fixed joints ('base' the trunk
    # and imu, each calf its foot) moves with their joint centre of mass: MuJoCo's COM velocities, mass-weighted
    model = fk["model"]
    for i, body in enumerate(A1_ISAAC_BODIES):
        merged = {"base": ["trunk", "imu_link"]}.get(body, [body[:2] + "_foot"] if "calf" in body else [])
        group = [body, *merged]
        ids = [model.body(n).id for n in group]
        mass = model.body_mass[ids]
        expected = np.einsum("tbi,b->ti", fk["com_vel"][:, ids], mass / mass.sum())
        np.testing.assert_allclose(data["body_lin_vel_w"][:, i], expected, atol=1e-4, err_msg=body)
    order = [tracked.joint_names.index(n) for n in A1_ISAAC_JOINTS]
    np.testing.assert_allclose(data["joint_pos"], tracked.joint_pos[:, order], atol=1e-6)


def test_isaac_order_is_breadth_first_with_siblings_by_name_and_fixed_links_merged(run):
    robot = load_urdf(run.file(ROBOT_URDF))
    order, merged = isaac_body_order(robot)
    assert order == A1_ISAAC_BODIES and sorted(merged["base"]) == ["base", "imu_link", "trunk"]
    unmerged, _ = isaac_body_order(robot, merge_fixed_joints=False)
    assert unmerged[:2] == ["base", "trunk"] and unmerged[2:6] == ["FL_hip", "FR_hip", "RL_hip", "RR_hip"]
    assert set(unmerged) == set(robot.link_names) and unmerged.index("imu_link") == 6  # trunk's children by name


# ----------------------------------------------------------------------------- GMR / MimicKit / ProtoMotions
def test_gmr_pickle_has_xyzw_root_mujoco_dof_order_and_root_frame_body_positions(run, fk, tmp_path):
    with open(export(run, "gmr", tmp_path), "rb") as f:
        data = pickle.load(f)  # as general_motion_retargeting.data_loader.load_robot_motion reads it
    tracked = TrackedMotion.load(run.file(TRACKED))
    assert data["fps"] == pytest.approx(1 / tracked.dt) and data["link_body_list"] == fk["names"][1:]
    assert_same_quats(data["root_rot"], tracked.root_quat)  # (x, y, z, w)
    np.testing.assert_allclose(data["root_pos"], tracked.root_pos, atol=1e-6)
    dofs = [fk["model"].joint(j).name for j in range(1, fk["model"].njnt)]
    np.testing.assert_allclose(data["dof_pos"], tracked.joint_pos[:, [tracked.joint_names.index(n) for n in dofs]],
                               atol=1e-6)
    xyzw = data["root_rot"].astype(np.float64)
    from scipy.spatial.transform import Rotation

    world = by_name(fk, "xpos", data["link_body_list"])
    local = np.stack([Rotation.from_quat(q).inv().apply(w - p) for q, w, p in zip(xyzw, world, data["root_pos"])])
    np.testing.assert_allclose(data["local_body_pos"], local, atol=1e-5)
    assert np.abs(data["local_body_pos"][:, 0]).max() < 1e-6  # the root sits at the origin of its own frame


def test_mimickit_frames_are_root_pos_exp_map_and_dofs(run, fk, tmp_path):
    from scipy.spatial.transform import Rotation

    path = export(run, "mimickit", tmp_path, loop_mode="Clamp")
    with open(path, "rb") as f:
        data = pickle.load(f)  # mimickit.anim.motion.load_motion: LoopMode(loop_mode), np.array(frames, float32)
    tracked = TrackedMotion.load(run.file(TRACKED))
    assert data["loop_mode"] == 0 and data["fps"] == pytest.approx(1 / tracked.dt)
    frames = np.array(data["frames"], dtype=np.float32)
    assert frames.shape == (len(tracked.joint_pos), 6 + len(tracked.joint_names))
    np.testing.assert_allclose(frames[:, :3], tracked.root_pos, atol=1e-6)
    exp_map = frames[:, 3:6].astype(np.float64)
    assert np.linalg.norm(exp_map, axis=1).max() <= np.pi + 1e-6  # MimicKit's quat_to_exp_map: angle in [0, pi]
    assert_same_quats(Rotation.from_rotvec(exp_map).as_quat(), tracked.root_quat)
    dofs = [fk["model"].joint(j).name for j in range(1, fk["model"].njnt)]
    np.testing.assert_allclose(frames[:, 6:], tracked.joint_pos[:, [tracked.joint_names.index(n) for n in dofs]],
                               atol=1e-6)
    assert read_motion_file(export(run, "mimickit", tmp_path / "wrap"), "mimickit")["loop_mode"] == 1


def test_protomotions_motion_is_a_robot_state_dict_with_xyzw_bodies_and_foot_contacts(run, fk, tmp_path):
    import torch

    data = torch.load(export(run, "protomotions", tmp_path), weights_only=False)  # as MotionLib._load_motions
    tracked = TrackedMotion.load(run.file(TRACKED))
    names = fk["names"][1:]
    assert set(data) == {"fps", "dof_pos", "dof_vel", "rigid_body_pos", "rigid_body_rot", "rigid_body_vel",
                         "rigid_body_ang_vel", "rigid_body_contacts"}
    assert isinstance(data["fps"], float) and data["fps"] == pytest.approx(1 / tracked.dt)
    for key in ("dof_pos", "dof_vel", "rigid_body_pos", "rigid_body_rot", "rigid_body_vel", "rigid_body_ang_vel"):
        assert data[key].dtype == torch.float32, key
    assert data["rigid_body_contacts"].dtype == torch.bool
    assert data["rigid_body_contacts"].shape == (len(tracked.joint_pos), len(names))
    np.testing.assert_allclose(data["rigid_body_pos"].numpy(), fk["xpos"][:, 1:], atol=1e-5)
    assert_same_quats(data["rigid_body_rot"].numpy()[..., [3, 0, 1, 2]], fk["xquat"][:, 1:])  # stored (x, y, z, w)
    np.testing.assert_allclose(data["rigid_body_vel"].numpy(), fk["link_vel"][:, 1:], atol=1e-4)
    episode = load_episode(run.path)
    contacts = data["rigid_body_contacts"].numpy()
    for k, foot in enumerate(episode.foot_names):
        np.testing.assert_array_equal(contacts[:, names.index(foot)], episode.foot_contacts[:, k])
    others = [i for i, n in enumerate(names) if n not in episode.foot_names]
    assert not contacts[:, others].any() and contacts.any()


# ----------------------------------------------------------------------------- LocoMuJoCo / amp-rsl-rl
def test_locomujoco_trajectory_npz_has_mujoco_qpos_layout_and_every_body(run, fk, tmp_path):
    data = read_motion_file(export(run, "locomujoco", tmp_path), "locomujoco")
    tracked = TrackedMotion.load(run.file(TRACKED))
    model = fk["model"]
    assert data["frequency"] == pytest.approx(1 / tracked.dt)
    assert list(data["split_points"]) == [0, len(tracked.joint_pos)]  # one trajectory
    assert list(data["joint_names"]) == [model.joint(j).name for j in range(model.njnt)]  # free joint 'root' first
    assert list(data["body_names"]) == fk["names"]  # every body, 'world' first, as ExtendTrajData records them
    np.testing.assert_array_equal(data["jnt_type"], model.jnt_type)
    qpos = data["qpos"]
    np.testing.assert_allclose(qpos[:, :3], tracked.root_pos, atol=1e-6)
    assert_same_quats(qpos[:, 3:7], tracked.root_quat[:, [3, 0, 1, 2]])  # MuJoCo (w, x, y, z)
    dofs = [model.joint(j).name for j in range(1, model.njnt)]
    np.testing.assert_allclose(qpos[:, 7:], tracked.joint_pos[:, [tracked.joint_names.index(n) for n in dofs]],
                               atol=1e-6)
    np.testing.assert_allclose(data["qvel"][:, :3], tracked.root_lin_vel, atol=1e-6)
    np.testing.assert_allclose(data["xpos"], fk["xpos"], atol=1e-5)
    assert_same_quats(data["xquat"], fk["xquat"])
    assert data["metadata"].item() is None and data["site_names"].item() is None


def test_amp_rsl_rl_npy_is_a_named_joint_dict_with_xyzw_root(run, tmp_path):
    data = np.load(export(run, "amp-rsl-rl", tmp_path), allow_pickle=True).item()  # as AMPLoader.load_data
    tracked = TrackedMotion.load(run.file(TRACKED))
    assert data["joints_list"] == list(tracked.joint_names) and data["fps"] == pytest.approx(1 / tracked.dt)
    np.testing.assert_allclose(np.array(data["joint_positions"]), tracked.joint_pos, atol=1e-6)
    np.testing.assert_allclose(np.array(data["root_position"]), tracked.root_pos, atol=1e-6)
    assert_same_quats(np.array(data["root_quaternion"]), tracked.root_quat)


# ----------------------------------------------------------------------------- target model, source, errors
def reordered_mjcf(robot: Robot, path: Path) -> Path:
    """The same robot with every body's children in reverse order: another valid MuJoCo body order."""
    mirrored = Robot(robot.name, robot.links, list(reversed(robot.joints)))
    path.write_text(mirrored.to_mjcf())
    return path


def test_target_model_sets_the_order_and_values_follow_by_name(run, fk, tmp_path):
    robot = load_urdf(run.file(ROBOT_URDF))
    target = reordered_mjcf(robot, tmp_path / "trainer.xml")
    model = mujoco.MjModel.from_xml_path(str(target))
    default = read_motion_file(export(run, "mjlab", tmp_path / "default"), "mjlab")
    data = read_motion_file(export(run, "mjlab", tmp_path / "target", target_model=target), "mjlab")
    assert list(data["body_names"]) == [model.body(b).name for b in range(1, model.nbody)]
    assert list(data["body_names"]) != list(default["body_names"])
    np.testing.assert_allclose(data["body_pos_w"], by_name(fk, "xpos", data["body_names"]), atol=1e-5)
    assert list(data["joint_names"]) == [model.joint(j).name for j in range(1, model.njnt)]
    tracked = TrackedMotion.load(run.file(TRACKED))
    np.testing.assert_allclose(data["joint_pos"], tracked.joint_pos[:, [tracked.joint_names.index(n)
                                                                        for n in data["joint_names"]]], atol=1e-6)


def test_a_body_or_joint_only_one_side_has_is_an_error_naming_it(run, tmp_path):
    episode = load_episode(run.path)
    spec = mujoco.MjSpec.from_string(episode.robot.to_mjcf())
    spec.delete(spec.body("FR_foot"))
    spec.actuator("RL_calf_joint").target = "RL_knee_joint"
    spec.joint("RL_calf_joint").name = "RL_knee_joint"
    target = tmp_path / "other.xml"
    target.write_text(spec.to_xml())
    with pytest.raises(MotionError, match=r"RL_knee_joint.*RL_calf_joint|FR_foot") as err:
        write_motion_file(episode, "mjlab", tmp_path / "x.npz", target_model=target)
    assert "FR_foot" in str(err.value) or "RL_knee_joint" in str(err.value)
    with pytest.raises(MotionError, match="FR_foot"):
        write_motion_file(episode, "gmr", tmp_path / "x.pkl", target_model=target)
    assert not (tmp_path / "x.npz").exists() and not (tmp_path / "x.pkl").exists()
    with pytest.raises(ConfigError, match="URDF"):
        write_motion_file(episode, "mjlab", tmp_path / "x.npz", target_model=run.file(ROBOT_URDF))
    with pytest.raises(AKDError, match="does not exist"):
        write_motion_file(episode, "beyondmimic", tmp_path / "x.npz", target_model=tmp_path / "none.urdf")


def test_reference_source_exports_the_kinematic_clip_with_its_velocities(run, tmp_path):
    reference = load_episode(run.path, "reference")
    (path,) = export_runs([run.path], "mjlab", tmp_path / "ref.npz", source="reference")
    data = read_motion_file(path, "mjlab")
    names = list(data["body_names"])
    idx = [reference.body_names.index(n) for n in names]
    np.testing.assert_allclose(data["body_pos_w"], reference.body_pos[:, idx], atol=1e-5)
    # analytic body velocities of the reference's own (finite-difference) joint velocities ~ differences of FK
    np.testing.assert_allclose(data["body_lin_vel_w"][2:-2], reference.body_lin_vel[2:-2, idx], atol=0.15)
    tracked = read_motion_file(export(run, "mjlab", tmp_path / "tracked"), "mjlab")
    assert np.abs(tracked["body_pos_w"] - data["body_pos_w"]).max() > 1e-3  # a different clip


def test_every_motion_format_is_in_all_with_its_own_default_file(run):
    written = export_runs([run.path], ",".join(MOTION_FORMATS), None)
    assert [p.name for p in written] == [f"trot.{fmt}{SUFFIX[fmt]}" for fmt in MOTION_FORMATS]
    assert all(p.parent == run.path / "export" and p.is_file() for p in written)


# ----------------------------------------------------------------------------- the real loaders (slow)
VENV_ROOT = Path(os.environ.get("AKD_LOADER_VENVS", Path.home() / ".cache" / "akd" / "loader-venvs"))
TORCH_DISTRIBUTIONS = ("torch", "typing_extensions", "sympy", "mpmath", "networkx", "jinja2", "markupsafe", "filelock",
                       "fsspec")


def _torch_link_dir() -> Path:
    """A folder of links to this interpreter's torch (CPU build) and its dependencies, so a loader's venv can share it
    instead of downloading a CUDA build of several GB."""
    import importlib.metadata as metadata

    folder = VENV_ROOT / "torch-link"
    folder.mkdir(parents=True, exist_ok=True)
    for name in TORCH_DISTRIBUTIONS:
        dist = metadata.distribution(name)
        site = Path(dist.locate_file(""))
        for top in sorted({f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}):  # packages and dist-info
            if (site / top).exists() and not (folder / top).exists():
                (folder / top).symlink_to(site / top)
    return folder


def loader_venv(name: str, requirement: str, share_torch: bool) -> Path:
    """The python of a cached venv holding ``requirement`` (created once; skip when the registry is unreachable)."""
    venv = VENV_ROOT / name
    python = venv / "bin" / "python"
    if (venv / ".installed").is_file():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    if share_torch:
        (venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
         / "akd_torch.pth").write_text(f"{_torch_link_dir()}\n")
    probe = subprocess.run([str(python), "-m", "pip", "download", "--no-deps", "-q", "-d", str(venv / "probe"),
                            requirement], capture_output=True, text=True, timeout=600)
    if probe.returncode != 0:
        pytest.skip(f"cannot reach the package registry for {requirement}: {probe.stderr.strip()[-300:]}")
    constraints = []
    if share_torch:  # hold pip to the shared torch: a newer one would pull a CUDA build and its libraries (GBs)
        import torch

        (venv / "constraints.txt").write_text(f"torch=={torch.__version__.split('+')[0]}\n")
        constraints = ["-c", str(venv / "constraints.txt")]
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", requirement, *constraints],
                             capture_output=True, text=True, timeout=3000)
    assert install.returncode == 0, f"pip install {requirement} failed:\n{install.stderr[-3000:]}"
    (venv / ".installed").write_text(requirement + "\n")
    return python


def run_loader(python: Path, script: str, tmp_path: Path) -> dict:
    """Run ``script`` (which writes what the loader returned to OUT) in the loader's venv; its arrays back."""
    out = tmp_path / "loaded.npz"
    proc = subprocess.run([str(python), "-c", script, str(out)], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, f"the real loader failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    with np.load(out, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.slow
def test_mjlab_motion_loader_and_entity_read_the_export_in_order(run, fk, tmp_path):
    python = loader_venv("mjlab-1.6.0", "mjlab==1.6.0", share_torch=True)
    path = export(run, "mjlab", tmp_path)
    xml = tmp_path / "robot.xml"
    xml.write_text(load_urdf(run.file(ROBOT_URDF)).to_mjcf())
    script = f"""
import sys, mujoco, numpy as np, torch
from mjlab.entity import Entity, EntityCfg
from mjlab.tasks.tracking.mdp.commands import MotionLoader
entity = Entity(EntityCfg(spec_fn=lambda: mujoco.MjSpec.from_file({str(xml)!r})))
names = list(entity.body_names)
loader = MotionLoader({str(path)!r}, torch.arange(len(names)), device="cpu")
np.savez(sys.argv[1], body_names=np.array(names), joint_names=np.array(list(entity.joint_names)),
         body_pos_w=loader.body_pos_w.numpy(), body_quat_w=loader.body_quat_w.numpy(),
         body_lin_vel_w=loader.body_lin_vel_w.numpy(), joint_pos=loader.joint_pos.numpy())
"""
    loaded = run_loader(python, script, tmp_path)
    written = read_motion_file(path, "mjlab")
    # mjlab's own entity of the robot's MJCF lists bodies and joints in the order the file has them
    assert list(loaded["body_names"]) == list(written["body_names"])
    assert list(loaded["joint_names"]) == list(written["joint_names"])
    np.testing.assert_allclose(loaded["body_pos_w"], by_name(fk, "xpos", loaded["body_names"]), atol=1e-5)
    assert_same_quats(loaded["body_quat_w"], by_name(fk, "xquat", loaded["body_names"]))
    np.testing.assert_allclose(loaded["body_lin_vel_w"], by_name(fk, "link_vel", loaded["body_names"]), atol=1e-4)
    np.testing.assert_allclose(loaded["joint_pos"], written["joint_pos"])


@pytest.mark.slow
def test_amp_rsl_rl_loader_reads_the_export(run, tmp_path):
    python = loader_venv("amp-rsl-rl", "amp-rsl-rl", share_torch=True)
    export(run, "amp-rsl-rl", tmp_path)
    tracked = TrackedMotion.load(run.file(TRACKED))
    joints = list(reversed(tracked.joint_names))  # the environment's own order: the loader maps by name
    script = f"""
import sys, numpy as np
from pathlib import Path
from amp_rsl_rl.utils.motion_loader import AMPLoader
loader = AMPLoader(device="cpu", dataset_path_root=Path({str(tmp_path)!r}), datasets={{"trot": 1.0}},
                   simulation_dt={tracked.dt!r}, slow_down_factor=1, expected_joint_names={joints!r})
data = loader.motion_data[0]
np.savez(sys.argv[1], joint_positions=data.joint_positions.numpy(), base_quat_wxyz=data.base_quat.numpy())
"""
    loaded = run_loader(python, script, tmp_path)
    order = [tracked.joint_names.index(n) for n in joints]
    np.testing.assert_allclose(loaded["joint_positions"], tracked.joint_pos[:, order], atol=1e-5)
    assert_same_quats(loaded["base_quat_wxyz"], tracked.root_quat[:, [3, 0, 1, 2]], atol=1e-5)


@pytest.mark.slow
def test_locomujoco_trajectory_load_reads_the_export(run, fk, tmp_path):
    python = loader_venv("loco-mujoco-1.0.0", "loco-mujoco==1.0.0", share_torch=False)
    path = export(run, "locomujoco", tmp_path)
    script = f"""
import sys, numpy as np
from loco_mujoco.trajectory import Trajectory
traj = Trajectory.load({str(path)!r}, backend=np)
info, data = traj.info, traj.data
hip = info.joint_name2ind_qpos["FR_hip_joint"]
single = data.get(0, 5, backend=np)
np.savez(sys.argv[1], frequency=info.frequency, joint_names=np.array(info.joint_names),
         body_names=np.array(info.body_names), qpos=np.asarray(data.qpos), xpos=np.asarray(data.xpos),
         fr_hip=np.asarray(data.qpos)[:, hip], frame5_qpos=np.asarray(single.qpos), nbody=info.model.nbody)
"""
    loaded = run_loader(python, script, tmp_path)
    tracked = TrackedMotion.load(run.file(TRACKED))
    assert float(loaded["frequency"]) == pytest.approx(1 / tracked.dt) and int(loaded["nbody"]) == len(fk["names"])
    assert list(loaded["body_names"]) == fk["names"]
    np.testing.assert_allclose(loaded["xpos"], fk["xpos"], atol=1e-5)
    np.testing.assert_allclose(loaded["fr_hip"][:, 0], tracked.joint_pos[:, tracked.joint_names.index("FR_hip_joint")],
                               atol=1e-6)
    np.testing.assert_allclose(loaded["frame5_qpos"], loaded["qpos"][5])
