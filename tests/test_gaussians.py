"""Gaussian assets: surface sampling, rigid binding, creature skin, PLY files, rendering, and `akd render RUN`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import trimesh

from akd_core.io.errors import ConfigError, RunDirError
from akd_core.io.rundir import RunDir
from akd_core.model.kinematics import ForwardKinematics, geometry_corners
from akd_core.model.robot import Geometry, Joint, Link, Robot, load_urdf
from akd_core.model.skeletons import STANDING_HEIGHT, build
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.render.gaussians import PLY_FIELDS, SH_C0, GaussianAsset, bone_boxes, load_ply, save_ply, skin_sdf
from akd_core.render.skinning import robot_bones


def _rest_fk(robot: Robot) -> tuple[np.ndarray, np.ndarray]:
    fk = ForwardKinematics(robot)
    pos, rot = fk(torch.zeros(1, 3, dtype=torch.float64), torch.tensor([[0.0, 0, 0, 1]], dtype=torch.float64),
                  torch.as_tensor(robot.default_joint_pos()[None]))
    return pos[0].numpy(), rot[0].numpy()


def _random_pose(robot: Robot, frames: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    lower = torch.as_tensor(np.nan_to_num(robot.lower, neginf=-1.0), dtype=torch.float64)
    upper = torch.as_tensor(np.nan_to_num(robot.upper, posinf=1.0), dtype=torch.float64)
    q = lower + (upper - lower) * torch.rand(frames, robot.num_dofs, generator=gen, dtype=torch.float64)
    quat = torch.nn.functional.normalize(torch.randn(frames, 4, generator=gen, dtype=torch.float64), dim=-1)
    return torch.randn(frames, 3, generator=gen, dtype=torch.float64), quat, q


@pytest.fixture(scope="module")
def a1_asset(a1_urdf):
    robot = load_urdf(a1_urdf)
    return robot, GaussianAsset.from_robot(robot, n_gaussians=3000, seed=3)


@pytest.fixture(scope="module")
def quadruped_rigid():
    robot = build("quadruped")
    return robot, GaussianAsset.from_robot(robot, n_gaussians=4000, seed=1, skin=False)


# ----------------------------------------------------------------------------- robot assets
def test_a1_posed_means_equal_fk_transformed_link_points(a1_asset) -> None:
    robot, asset = a1_asset
    assert asset.skin is None and asset.weight_index.shape == (asset.num_gaussians, 1)
    rest_pos, rest_rot = _rest_fk(robot)
    idx = asset.link_index
    local = np.einsum("nji,nj->ni", rest_rot[idx], asset.means - rest_pos[idx])  # world -> link frame at rest
    fk = ForwardKinematics(robot)
    link_pos, link_rot = fk(*_random_pose(robot, 3, seed=0))
    means, covars = asset.pose(link_pos, link_rot)
    expected = fk.transform_points(link_pos, link_rot, torch.as_tensor(idx), torch.as_tensor(local))
    np.testing.assert_allclose(means.numpy(), expected.numpy(), atol=1e-12)
    rel = link_rot[:, idx] @ torch.as_tensor(rest_rot[idx]).transpose(-1, -2)
    np.testing.assert_allclose(covars.numpy(), (rel @ torch.as_tensor(asset.covars) @ rel.transpose(-1, -2)).numpy(),
                               atol=1e-15)


def test_a1_colours_come_from_urdf_materials(a1_asset) -> None:
    robot, asset = a1_asset
    trunk = robot.link_index("trunk")
    silver = robot.link("trunk").visuals[0].rgba[:3]
    np.testing.assert_allclose(asset.colors[asset.link_index == trunk], np.tile(silver, ((asset.link_index == trunk)
                                                                                        .sum(), 1)))
    assert len(np.unique(asset.link_index)) >= 13  # trunk, 4 x (hip, thigh, calf), feet


def test_samples_lie_on_the_link_boxes_with_their_colour_and_normal(quadruped_rigid) -> None:
    robot, asset = quadruped_rigid
    rest_pos, rest_rot = _rest_fk(robot)
    on_surface = np.zeros(asset.num_gaussians, dtype=bool)
    rot = trimesh.transformations.quaternion_matrix(np.roll(asset.quats, 1, axis=1)[0])[:3, :3]
    assert np.allclose(rot[:, 2], asset.normals[0])
    for n in range(asset.num_gaussians):
        li = asset.link_index[n]
        link = robot.link(robot.link_names[li])
        for geom in link.visuals:
            tf = np.eye(4)
            tf[:3, :3], tf[:3, 3] = rest_rot[li], rest_pos[li]
            box_tf = tf @ geom.origin
            local = box_tf[:3, :3].T @ (asset.means[n] - box_tf[:3, 3])
            half = geom.size / 2
            if np.all(np.abs(local) <= half + 1e-9) and np.isclose(np.abs(local / half).max(), 1.0, atol=1e-9):
                face_axis = np.argmax(np.abs(local) / half)
                normal_local = box_tf[:3, :3].T @ asset.normals[n]
                if np.isclose(abs(normal_local[face_axis]), 1.0, atol=1e-9) and np.allclose(
                        asset.colors[n], geom.rgba[:3]):
                    on_surface[n] = True
    assert on_surface.all()
    # flat: the smallest std is along the normal (the third axis of each Gaussian's frame)
    along_normal = np.einsum("ni,nij,nj->n", asset.normals, asset.covars, asset.normals)
    assert np.allclose(np.sqrt(along_normal), asset.scales[:, 2]) and (asset.scales[:, 2] < asset.scales[:, 0]).all()


def test_gaussians_are_spread_by_surface_area(quadruped_rigid) -> None:
    robot, asset = quadruped_rigid
    area = np.array([sum(2 * (g.size[0] * g.size[1] + g.size[1] * g.size[2] + g.size[0] * g.size[2])
                         for g in robot.link(name).visuals) for name in robot.link_names])
    expected = asset.num_gaussians * area / area.sum()
    counts = np.bincount(asset.link_index, minlength=len(area))
    sigma = np.sqrt(expected * (1 - area / area.sum()))
    assert (np.abs(counts - expected) <= 4.5 * sigma + 1).all()


def test_assets_are_reproducible_from_their_seed(quadruped_rigid) -> None:
    robot, asset = quadruped_rigid
    again = GaussianAsset.from_robot(robot, n_gaussians=4000, seed=1, skin=False)
    other = GaussianAsset.from_robot(robot, n_gaussians=4000, seed=2, skin=False)
    np.testing.assert_array_equal(asset.means, again.means)
    assert not np.allclose(asset.means, other.means)


def test_robot_without_geometry_is_a_clear_error() -> None:
    robot = Robot("bare", [Link("base"), Link("leg")],
                  [Joint("hip", "revolute", "base", "leg", axis=np.array([0.0, 1.0, 0.0]), lower=-1.0, upper=1.0)])
    with pytest.raises(ConfigError, match="no visual or collision geometry"):
        GaussianAsset.from_robot(robot, n_gaussians=10, seed=0, skin=False)
    with pytest.raises(ConfigError, match="n_gaussians"):
        GaussianAsset.from_robot(robot, n_gaussians=0)


def test_primitive_shapes_are_sampled_on_their_surface() -> None:
    shapes = [Geometry("sphere", np.array([0.1])), Geometry("cylinder", np.array([0.05, 0.3])),
              Geometry("capsule", np.array([0.04, 0.2]))]
    robot = Robot("prims", [Link("base", visuals=shapes)], [])
    asset = GaussianAsset.from_robot(robot, n_gaussians=600, seed=0)
    x, y, z = asset.means.T
    radial = np.hypot(x, y)
    sphere = np.isclose(np.linalg.norm(asset.means, axis=1), 0.1, atol=2e-3)  # icosphere facets: ~1 % inside
    cylinder = (np.isclose(radial, 0.05, atol=1e-3) & (np.abs(z) <= 0.15 + 1e-9)) | np.isclose(np.abs(z), 0.15)
    capsule_r = np.where(np.abs(z) <= 0.1, radial, np.hypot(radial, np.abs(z) - 0.1))
    capsule = np.isclose(capsule_r, 0.04, atol=1e-3)
    assert (sphere | cylinder | capsule).all()
    np.testing.assert_allclose(asset.colors, 0.7)  # no material, no mesh colours: grey


# ----------------------------------------------------------------------------- creature skin
@pytest.mark.parametrize("name", ["ostrich", "humanoid"])
def test_creature_skin_encloses_the_bones_and_hugs_the_boxes(name: str) -> None:
    robot = build(name)
    asset = GaussianAsset.from_robot(robot, n_gaussians=2000, seed=0)
    skin = asset.skin
    assert skin is not None and skin.is_watertight and skin.volume > 0
    segments, _ = robot_bones(robot, asset.rest_link_pos, asset.rest_link_rot)
    along = segments[:, :1] + np.linspace(0.05, 0.95, 7)[None, :, None] * (segments[:, 1:] - segments[:, :1])
    assert skin.contains(along.reshape(-1, 3)).all()
    boxes = bone_boxes(robot, asset.rest_link_pos, asset.rest_link_rot)
    # vertices on the smooth union's level set; samples on the flat facets between them (chord error only)
    np.testing.assert_allclose(skin_sdf(np.asarray(skin.vertices), boxes, 0.01, 0.012), 0.0, atol=2e-3)
    assert np.abs(skin_sdf(asset.means, boxes, 0.01, 0.012)).max() < 0.5 * skin.edges_unique_length.mean()
    # every Gaussian is skinned, weights sum to one, colours are bone materials
    np.testing.assert_allclose(asset.weight_value.sum(1), 1.0, atol=1e-9)
    materials = {tuple(np.round(g.rgba[:3], 6)) for link in robot.links for g in link.visuals}
    assert {tuple(c) for c in np.round(asset.colors, 6)} <= materials


# ----------------------------------------------------------------------------- PLY
def test_ply_round_trip_and_standard_3dgs_header(tmp_path, a1_asset) -> None:
    robot, asset = a1_asset
    path = save_ply(asset, tmp_path / "a1.ply")
    header = path.read_bytes().split(b"end_header\n")[0].decode().splitlines()
    props = [line.split()[-1] for line in header if line.startswith("property")]
    assert props[: len(PLY_FIELDS)] == list(PLY_FIELDS)
    assert f"element vertex {asset.num_gaussians}" in header
    back = load_ply(path)
    for name in ("means", "normals", "colors", "scales", "weight_value", "rest_link_pos", "rest_link_rot"):
        np.testing.assert_allclose(getattr(back, name), getattr(asset, name), rtol=1e-6, atol=1e-6, err_msg=name)
    np.testing.assert_array_equal(back.weight_index, asset.weight_index)
    assert back.link_names == asset.link_names
    np.testing.assert_allclose(np.abs((back.quats * asset.quats).sum(1)), 1.0, atol=1e-6)  # same rotation
    fk = ForwardKinematics(robot)
    link_pos, link_rot = fk(*_random_pose(robot, 1, seed=4))
    np.testing.assert_allclose(back.pose(link_pos, link_rot)[0].numpy(), asset.pose(link_pos, link_rot)[0].numpy(),
                               atol=1e-5)
    # an independent PLY reader sees the same positions and the 3DGS encodings
    cloud = trimesh.load(path)
    np.testing.assert_allclose(np.asarray(cloud.vertices), asset.means, atol=1e-6)
    attrs = cloud.metadata["_ply_raw"]["vertex"]["data"]
    np.testing.assert_allclose(attrs["f_dc_0"], (asset.colors[:, 0] - 0.5) / SH_C0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(attrs["scale_2"], np.log(asset.scales[:, 2]), rtol=1e-5)
    np.testing.assert_allclose(1 / (1 + np.exp(-attrs["opacity"])), asset.opacities, atol=1e-6)
    np.testing.assert_allclose(attrs["rot_0"], asset.quats[:, 3], atol=1e-6)  # w first, as 3DGS


def test_load_ply_rejects_other_files(tmp_path) -> None:
    bad = tmp_path / "x.ply"
    bad.write_text("not a ply\n")
    with pytest.raises(ConfigError, match="not a PLY"):
        load_ply(bad)


# ----------------------------------------------------------------------------- rendering
def test_rendered_robot_is_where_fk_puts_it(quadruped_rigid) -> None:
    from akd_core.render import intrinsics_from_fov, look_at, rasterize

    robot, asset = quadruped_rigid
    fk = ForwardKinematics(robot)
    q = torch.zeros(1, robot.num_dofs, dtype=torch.float64)
    q[0, robot.joint_names.index("front_left_knee")] = -1.2
    q[0, robot.joint_names.index("hind_right_knee")] = 1.2
    root_pos = torch.tensor([[0.4, -0.3, STANDING_HEIGHT["quadruped"]]], dtype=torch.float64)
    root_quat = torch.tensor([[0.0, 0.0, np.sin(0.35), np.cos(0.35)]], dtype=torch.float64)
    link_pos, link_rot = fk(root_pos, root_quat, q)
    means, covars = asset.pose(link_pos, link_rot)
    width, height = 96, 80
    viewmat = look_at(torch.tensor([[0.6, -2.6, 0.9]], dtype=torch.float64),
                      torch.tensor([[0.4, -0.3, 0.35]], dtype=torch.float64))
    K = intrinsics_from_fov(45.0, width, height, dtype=torch.float64)
    _, alpha = rasterize(means.float(), covars.float(), asset.colors_tensor(), asset.opacities_tensor(),
                         viewmat.float(), K.float(), width, height, backend="torch")
    mask = alpha[0, :, :, 0].numpy() > 0.5

    def project(points: torch.Tensor) -> np.ndarray:
        cam = (viewmat[0, :3, :3] @ points.T + viewmat[0, :3, 3:]).T
        pix = (K @ cam.T).T
        return (pix[:, :2] / pix[:, 2:]).numpy()

    # geometry says: the box corners (posed by FK) bound the silhouette within about one splat radius
    idx, pts = geometry_corners(robot, use="visual")
    corners = project(ForwardKinematics.transform_points(link_pos, link_rot, torch.as_tensor(idx),
                                                         torch.as_tensor(pts))[0])
    ys, xs = np.nonzero(mask)
    assert abs(xs.min() - corners[:, 0].min()) < 3 and abs(xs.max() + 1 - corners[:, 0].max()) < 3
    assert abs(ys.min() - corners[:, 1].min()) < 3 and abs(ys.max() + 1 - corners[:, 1].max()) < 3
    # the bent front-left paw: its box centre projects onto covered pixels
    for name in ("front_left_paw", "hind_right_paw", "head", "chest"):
        li = robot.link_index(name)
        centre = link_pos[0, li] + link_rot[0, li] @ torch.as_tensor(robot.link(name).visuals[0].origin[:3, 3])
        u, v = project(centre[None])[0]
        assert mask[int(v), int(u)], name


# ----------------------------------------------------------------------------- akd render RUN
def _make_run(tmp_path, robot: Robot, frames: int = 4, fps: float = 10.0, tracked: bool = True) -> RunDir:
    run = RunDir(tmp_path / "run", create=True)
    robot.to_urdf(run.file("robot.urdf"))
    t = np.arange(frames) / fps
    q = np.tile(robot.default_joint_pos(), (frames, 1)) + 0.2 * np.sin(2 * np.pi * t)[:, None]
    q = np.clip(q, robot.lower, robot.upper)
    root_pos = np.stack([0.3 * t, 0 * t, np.full(frames, STANDING_HEIGHT["quadruped"])], 1)
    root_quat = np.tile([0.0, 0.0, 0.0, 1.0], (frames, 1))
    Motion(fps=fps, joint_names=robot.joint_names, joint_pos=q, root_pos=root_pos, root_quat=root_quat,
           prompt="test").save(run.file("reference.npz"))
    if tracked:
        zeros = np.zeros_like(q)
        TrackedMotion(dt=1 / fps, joint_names=robot.joint_names, pd_targets=q, joint_torques=zeros, joint_pos=q,
                      joint_vel=zeros, root_pos=root_pos - [0, 0, 0.05], root_quat=root_quat,
                      root_lin_vel=np.zeros((frames, 3)), root_ang_vel=np.zeros((frames, 3)),
                      kp=np.ones(robot.num_dofs), kd=np.ones(robot.num_dofs)).save(run.file("tracked.npz"))
    return run


def test_stage_render_writes_side_by_side_video_and_ply(tmp_path) -> None:
    import imageio_ffmpeg

    from akd_core.render.run_video import stage_render

    robot = build("quadruped")
    run = _make_run(tmp_path, robot)
    metrics = stage_render(run, width=48, height=40, backend="torch", n_gaussians=800, progress=False)
    reader = imageio_ffmpeg.read_frames(str(run.file("render.mp4")))
    meta = next(reader)
    frames = [np.frombuffer(f, dtype=np.uint8) for f in reader]
    assert meta["size"] == (96, 40) and len(frames) == 4 == metrics["frames"]
    assert metrics["panels"] == 2 and metrics["skinned"]
    manifest = json.loads(run.file("manifest.json").read_text())
    assert manifest["stages"]["render"]["status"] == "done"
    assert manifest["stages"]["render"]["config"]["backend"] == "torch"
    ply = load_ply(run.file("gaussians.ply"))
    assert ply.num_gaussians == 800 and ply.link_names == robot.link_names


def test_stage_render_without_reference_names_the_missing_step(tmp_path) -> None:
    from akd_core.render.run_video import stage_render

    run = RunDir(tmp_path / "empty", create=True)
    with pytest.raises(RunDirError, match="robot.urdf"):
        stage_render(run)
    build("quadruped").to_urdf(run.file("robot.urdf"))
    with pytest.raises(RunDirError, match="reference.npz"):
        stage_render(run)
    with pytest.raises(ConfigError, match="width"):
        stage_render(run, width=4)
