"""A run's terrain in its outputs: the preview and the Gaussian render draw it (flat runs exactly as before), the run
gets an MJCF scene of the robot on it, and datasets and motion files carry its height grid."""

from __future__ import annotations

from pathlib import Path

import imageio.v3 as iio
import mujoco
import numpy as np
import pytest
import torch

from akd_core.cli import main
from akd_core.export import export_runs, load_episode, read_hdf5, read_lerobot
from akd_core.export.terrain import SCENE_XML, START_KEY, sidecar_paths, write_run_scene
from akd_core.io.rundir import RunDir
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.robot import load_urdf
from akd_core.model.terrain import Terrain, parse_terrain_spec, run_terrain
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.render import (
    GroundConfig,
    follow_camera,
    intrinsics_from_fov,
    look_at,
    render_terrain_ground,
    render_video,
    to_uint8_frames,
)
from akd_core.render.gaussians import GaussianAsset
from akd_core.render.preview import PreviewRenderer, render_frame
from akd_core.render.terrain_cast import TerrainCaster

from .conftest import example_robot_urdf

DATA = Path(__file__).parent / "data"


def kinematic_tracked(run_dir: Path) -> None:
    """A tracked.npz that replays the reference exactly (PD targets = reference angles, no torques): what the export
    writers need, without running the tracker."""
    run = RunDir(run_dir)
    motion = Motion.load(run.file("reference.npz"))
    j = len(motion.joint_names)
    TrackedMotion(dt=motion.dt, joint_names=motion.joint_names, pd_targets=motion.joint_pos,
                  joint_torques=np.zeros_like(motion.joint_pos), joint_pos=motion.joint_pos,
                  joint_vel=motion.joint_vel(), root_pos=motion.root_pos, root_quat=motion.root_quat,
                  root_lin_vel=motion.root_lin_vel(), root_ang_vel=motion.root_ang_vel(), kp=np.full(j, 40.0),
                  kd=np.full(j, 1.0)).save(run.file("tracked.npz"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An a1 trotting up the stairs (terrain from the prompt) and a flat quadruped trot, both with a tracked.npz."""
    root = tmp_path_factory.mktemp("terrain_outputs")
    stairs, flat = root / "a1_stairs", root / "flat"
    assert main(["gait", "--robot", str(example_robot_urdf("a1")), "--prompt", "a dog trots up the stairs",
                 "--duration", "2", "--out", str(stairs), "--no-preview"]) == 0
    assert main(["gait", "--robot", "quadruped", "--prompt", "a dog trots", "--duration", "1", "--out", str(flat),
                 "--no-preview"]) == 0
    for run_dir in (stairs, flat):
        kinematic_tracked(run_dir)
    return stairs, flat


@pytest.fixture(scope="module")
def a1():
    return load_urdf(example_robot_urdf("a1"))


def flat_pose(robot):
    """The pose of the flat reference frames in tests/data."""
    joint_pos = robot.default_joint_pos().copy() + 0.15 * np.sin(np.arange(robot.num_dofs))
    yaw = 0.3
    return np.array([0.2, 0.1, 0.28]), np.array([0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)]), joint_pos


def test_flat_preview_and_gaussian_frames_are_the_frames_rendered_before_terrains(a1):
    """tests/data/flat_*_a1.png were rendered by the renderers before terrains existed (2026-11-29, 44891f4, this
    project's 2-vCPU CPU machine): a flat run's ground keeps the exact z = 0 code, so the frames are the same pixel
    for pixel (within one level on a thousandth of the pixels, for other machines' float rounding)."""
    root_pos, root_quat, joint_pos = flat_pose(a1)
    expected = iio.imread(DATA / "flat_preview_a1.png")
    image = render_frame(a1, root_pos, root_quat, joint_pos, width=160, height=120, terrain=Terrain.flat())
    assert np.abs(image.astype(int) - expected).max() <= 1
    assert (image != expected).any(axis=-1).mean() < 1e-3

    asset = GaussianAsset.from_robot(a1, n_gaussians=3000, seed=0)
    with torch.no_grad():
        link_pos, link_rot = ForwardKinematics(a1)(torch.tensor(root_pos[None], dtype=torch.float32),
                                                   torch.tensor(root_quat[None], dtype=torch.float32),
                                                   torch.tensor(joint_pos[None], dtype=torch.float32))
        means, covars = asset.pose(link_pos, link_rot)
        viewmats, K = follow_camera(means, 96, 72)
        frames = render_video(means, covars, asset.colors_tensor(), asset.opacities_tensor(), viewmats, K, 96, 72,
                              backend="torch", terrain=Terrain.flat())
    image, expected = to_uint8_frames(frames)[0], iio.imread(DATA / "flat_render_a1.png")
    assert np.abs(image.astype(int) - expected).max() <= 1
    assert (image != expected).any(axis=-1).mean() < 1e-3


def test_stairs_preview_puts_the_ground_under_the_stance_feet_on_the_treads(runs):
    stairs, _ = runs
    run = RunDir(stairs)
    robot = load_urdf(run.file("robot.urdf"))
    motion = Motion.load(run.file("reference.npz"), robot)
    terrain = run_terrain(run)
    renderer = PreviewRenderer(robot, 160, 120, terrain=terrain)
    flat = PreviewRenderer(robot, 160, 120)
    camera = renderer.follow_camera(motion.root_pos, motion.root_quat, motion.fps)
    f = len(motion.root_pos) - 1  # the robot has climbed: its feet are on the treads, 0.1 - 0.3 m up
    viewmat = camera.viewmats[f]
    # the camera follows the root up the stairs (and watches the climb from behind)
    first, last = (-m[:3, :3].T @ m[:3, 3] for m in (camera.viewmats[0], viewmat))
    assert last[2] - first[2] == pytest.approx(motion.root_pos[f, 2] - motion.root_pos[0, 2], abs=0.05)
    assert last[0] < motion.root_pos[f, 0]

    hits = renderer._caster.cast(viewmat, renderer.K, 160, 120)
    level = hits.hit & (hits.normals[..., 2] > 0.999)  # treads and floor, not risers
    points = hits.points[level]
    assert np.abs(points[:, 2] - terrain.height(points[:, 0], points[:, 1])).max() < 1e-6
    assert (points[:, 2] > 0.05).mean() > 0.3  # much of the view is treads above the floor

    link_pos, link_rot = renderer.link_poses(motion.root_pos[f:f + 1], motion.root_quat[f:f + 1],
                                             motion.joint_pos[f:f + 1])
    feet = [robot.link_index(n) for n in motion.foot_names]
    tips = link_pos[0, feet] + np.einsum("kij,kj->ki", link_rot[0, feet], motion.foot_offsets)
    stance = motion.foot_contacts[f]
    assert stance.any() and (tips[stance, 2] > 0.15).all()
    cam = tips @ viewmat[:3, :3].T + viewmat[:3, 3]
    u = np.floor(renderer.K[0, 0] * cam[:, 0] / cam[:, 2] + renderer.K[0, 2]).astype(int)
    v = np.floor(renderer.K[1, 1] * cam[:, 1] / cam[:, 2] + renderer.K[1, 2]).astype(int)
    for k in np.nonzero(stance)[0]:
        assert 0 <= u[k] < 160 and 0 <= v[k] < 120
        # the drawn ground at the foot's pixel is where the foot stands (within the pixel's footprint)
        assert hits.depth[v[k], u[k]] == pytest.approx(cam[k, 2], abs=0.03)
    image = renderer.render(link_pos[0], link_rot[0], viewmat)
    on_flat = flat.render(link_pos[0], link_rot[0], viewmat)
    rows = slice(max(v[stance].min() - 20, 0), min(v[stance].max() + 20, 120))
    changed = (image[rows] != on_flat[rows]).any(axis=-1)
    assert changed.mean() > 0.3  # the ground around the feet is not the flat checkerboard


def test_gaussian_render_draws_the_stairs_and_hides_gaussians_inside_a_step():
    terrain = parse_terrain_spec("stairs:0.1,0.3,length=3")  # tread 2 spans x 0.6 - 0.9 at z = 0.2
    caster = TerrainCaster(terrain)
    width, height = 64, 48
    target = np.array([0.75, 0.0, 0.2])
    viewmat = look_at(torch.tensor(target + [-0.9, -0.5, 0.6]), torch.tensor(target))[None]  # (1, 4, 4) float64
    K = intrinsics_from_fov(40.0, width, height, dtype=torch.float64)
    colors, depth = render_terrain_ground(viewmat, K, width, height, GroundConfig(), caster)
    assert colors.shape == (1, height, width, 4, 3) and depth.shape == (1, height, width, 4)
    hits = caster.cast(viewmat[0].numpy(), K.numpy(), width, height)
    level = hits.hit & (hits.normals[..., 2] > 0.999)
    assert np.abs(hits.points[level][:, 2] - terrain.height(*hits.points[level][:, :2].T)).max() < 1e-6

    above, inside = np.array([0.75, -0.05, 0.26]), np.array([0.75, 0.1, 0.15])  # inside: under tread 2, z > 0
    means = torch.tensor(np.stack([above, inside])[None], dtype=torch.float64)
    covars = (0.012**2 * torch.eye(3, dtype=torch.float64)).expand(1, 2, 3, 3)
    red = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    opacities = torch.tensor([0.99, 0.99], dtype=torch.float64)
    on_stairs = render_video(means, covars, red, opacities, viewmat, K, width, height, backend="torch",
                             terrain=caster)[0].permute(1, 2, 0).numpy()
    on_flat = render_video(means, covars, red, opacities, viewmat, K, width, height,
                           backend="torch")[0].permute(1, 2, 0).numpy()
    cam = np.stack([above, inside]) @ viewmat[0, :3, :3].numpy().T + viewmat[0, :3, 3].numpy()
    px = (K[0, 0].item() * cam[:, 0] / cam[:, 2] + K[0, 2].item()).astype(int)
    py = (K[1, 1].item() * cam[:, 1] / cam[:, 2] + K[1, 2].item()).astype(int)
    redness = lambda image, k: image[py[k], px[k], 0] - image[py[k], px[k], 1]  # noqa: E731
    assert redness(on_stairs, 0) > 0.5 and redness(on_flat, 0) > 0.5  # above the tread: seen on both grounds
    assert redness(on_flat, 1) > 0.5  # z > 0: flat ground shows it
    assert redness(on_stairs, 1) < 0.1  # inside the step: hidden
    assert np.abs(on_stairs - on_flat).max(axis=-1).mean() > 0.05  # the ground itself differs


def test_scene_xml_compiles_and_its_rays_meet_the_terrain_with_the_robot_at_the_start_pose(runs):
    stairs, flat = runs
    path = write_run_scene(stairs)
    assert path == stairs / SCENE_XML
    model = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(model)
    terrain = run_terrain(RunDir(stairs))
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1.5, 4.0, 300), rng.uniform(-1.9, 1.9, 300)
    mujoco.mj_forward(model, data)
    geom = np.zeros(1, dtype=np.int32)
    groups = np.array([1, 0, 0, 0, 0, 0], dtype=np.uint8)  # group 0: the terrain (AKD's robot geoms are in group 3)
    heights = [5.0 - mujoco.mj_ray(model, data, np.array([px, py, 5.0]), np.array([0.0, 0.0, -1.0]), groups, 1, -1,
                                   geom) for px, py in zip(x, y)]
    assert np.abs(np.array(heights) - terrain.height(x, y)).max() < 1e-6
    names = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in range(model.ngeom)}
    assert {"terrain_plane0", "terrain_box0"} <= names
    motion = Motion.load(stairs / "reference.npz")
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, START_KEY)
    mujoco.mj_resetDataKeyframe(model, data, key)
    assert data.qpos[:3] == pytest.approx(motion.root_pos[0], abs=1e-5)  # MJCF keeps 6 significant digits
    assert data.qpos[7:] == pytest.approx(motion.joint_pos[0], abs=1e-5)
    assert write_run_scene(flat) is None and not (flat / SCENE_XML).exists()  # flat ground: no scene
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST  # AKD's MJCF's own: the run has no track
    RunDir(stairs).set_stage("track", status="done", metrics={"integrator": "euler"})
    euler = mujoco.MjModel.from_xml_path(str(write_run_scene(stairs)))  # the tracking's, to replay tracked.npz
    assert euler.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER


def test_hdf5_and_lerobot_carry_the_terrain_grid_of_terrain_npz(runs, tmp_path):
    stairs, flat = runs
    with np.load(stairs / "terrain.npz") as grid:
        heights, origin, cell, spec = grid["heights"], grid["origin"], float(grid["cell"]), str(grid["spec"])
    assert RunDir(stairs).manifest()["terrain"]["spec"] == spec

    [path] = export_runs([stairs, flat], "hdf5", tmp_path / "dataset.hdf5", progress=False)
    demo_stairs, demo_flat = read_hdf5(path).demos
    assert demo_stairs.terrain["kind"] == "stairs" and demo_stairs.terrain["spec"] == spec
    assert np.array_equal(demo_stairs.terrain["heights"], heights)
    assert np.array_equal(demo_stairs.terrain["origin"], origin) and demo_stairs.terrain["cell"] == cell
    assert demo_flat.terrain["kind"] == "flat" and "heights" not in demo_flat.terrain
    # the terrain.npz cell is what the docs promise: heights[i, j] at origin + (i, j) cell, <= 0.02 m
    i, j = np.meshgrid(np.arange(0, heights.shape[0], 9), np.arange(0, heights.shape[1], 7), indexing="ij")
    xs, ys = origin[0] + i * cell, origin[1] + j * cell
    terrain = run_terrain(RunDir(stairs))
    away = terrain.edge_distance(xs, ys) > cell
    assert cell <= 0.02 and np.abs(heights[i, j] - terrain.height(xs, ys))[away].max() < 1e-5

    [root] = export_runs([stairs], "lerobot", tmp_path / "lerobot", progress=False)
    [episode] = read_lerobot(root)
    assert episode.terrain["kind"] == "stairs" and episode.terrain["spec"] == spec
    assert np.array_equal(episode.terrain["heights"], heights) and episode.terrain["cell"] == cell
    assert (root / episode.terrain["file"]).is_file()

    # foot contacts are measured from the surface under each foot: the stance schedule holds up the stairs
    clip = load_episode(stairs, "reference")
    reference = clip.reference
    assert (clip.foot_contacts == reference.foot_contacts).mean() > 0.8


def test_motion_files_get_the_terrain_and_the_scene_beside_them(runs, tmp_path):
    stairs, flat = runs
    [path] = export_runs([stairs], "mjlab", tmp_path / "stairs.mjlab.npz", progress=False)
    npz, scene = sidecar_paths(path)
    assert npz == tmp_path / "stairs.mjlab.terrain.npz" and scene == tmp_path / "stairs.mjlab.scene.xml"
    with np.load(npz) as copy, np.load(stairs / "terrain.npz") as grid:
        assert np.array_equal(copy["heights"], grid["heights"]) and str(copy["spec"]) == str(grid["spec"])
    assert mujoco.MjModel.from_xml_path(str(scene)).nkey == 1
    assert (stairs / SCENE_XML).is_file()  # the run got its scene too
    [path] = export_runs([flat], "mjlab", tmp_path / "flat.mjlab.npz", progress=False)
    assert not any(p.exists() for p in sidecar_paths(path))
