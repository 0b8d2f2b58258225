"""Skinning: cotangent Laplacian, bone-heat weights, weight transfer, linear blend skinning of Gaussians."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import trimesh

from akd_core.io.errors import ConfigError
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.skeletons import STANDING_HEIGHT, build
from akd_core.render.gaussians import GaussianAsset
from akd_core.render.skinning import (
    bone_heat_weights,
    cotangent_laplacian,
    dense_weights,
    linear_blend,
    point_segment_distance,
    rigid_weights,
    robot_bones,
    top_k_weights,
    transfer_weights,
    visible_from_vertices,
)


@pytest.fixture(scope="module")
def quadruped_skin():
    robot = build("quadruped")
    asset = GaussianAsset.from_robot(robot, n_gaussians=3000, seed=0)
    segments, segment_link = robot_bones(robot, asset.rest_link_pos, asset.rest_link_rot)
    weights = bone_heat_weights(asset.skin, segments, segment_link, len(robot.link_names))
    return robot, asset, weights


def _grid_mesh(n: int = 9) -> trimesh.Trimesh:
    """A unit square in the plane z = 0 triangulated on an n x n vertex grid (with alternating diagonals)."""
    xs = np.linspace(0.0, 1.0, n)
    gx, gy = np.meshgrid(xs, xs, indexing="ij")
    vertices = np.stack([gx.ravel(), gy.ravel(), np.zeros(n * n)], 1)
    faces = []
    for i in range(n - 1):
        for j in range(n - 1):
            a, b, c, d = i * n + j, (i + 1) * n + j, (i + 1) * n + j + 1, i * n + j + 1
            faces += [[a, b, c], [a, c, d]] if (i + j) % 2 else [[a, b, d], [b, c, d]]
    return trimesh.Trimesh(vertices, np.array(faces), process=False)


# ----------------------------------------------------------------------------- Laplacian
def test_cotangent_laplacian_reproduces_dirichlet_energy_of_linear_functions() -> None:
    mesh = _grid_mesh()
    lap, areas = cotangent_laplacian(np.asarray(mesh.vertices), np.asarray(mesh.faces))
    assert abs(lap - lap.T).max() < 1e-12
    np.testing.assert_allclose(lap @ np.ones(len(areas)), 0.0, atol=1e-12)
    np.testing.assert_allclose(areas.sum(), 1.0, rtol=1e-12)
    # f = 2x + 3y on the unit square: integral of |grad f|^2 = 13 = -f^T L f
    f = 2 * mesh.vertices[:, 0] + 3 * mesh.vertices[:, 1]
    np.testing.assert_allclose(-f @ (lap @ f), 13.0, rtol=1e-10)
    interior = (mesh.vertices[:, :2].min(1) > 1e-9) & (mesh.vertices[:, :2].max(1) < 1 - 1e-9)
    np.testing.assert_allclose((lap @ f)[interior], 0.0, atol=1e-10)  # linear precision


def test_point_segment_distance_matches_closed_form() -> None:
    segments = np.array([[[0.0, 0, 0], [1.0, 0, 0]]])
    points = np.array([[0.5, 2.0, 0.0], [-3.0, 0.0, 4.0], [2.0, 0.0, 0.0]])
    dist, closest = point_segment_distance(points, segments)
    np.testing.assert_allclose(dist[:, 0], [2.0, 5.0, 1.0])
    np.testing.assert_allclose(closest[:, 0], [[0.5, 0, 0], [0, 0, 0], [1, 0, 0]])


# ----------------------------------------------------------------------------- bone heat
def test_visibility_is_blocked_by_the_surface() -> None:
    box = trimesh.creation.box(extents=(1.0, 1.0, 1.0))
    ids = np.arange(len(box.vertices))
    inside = np.zeros((len(ids), 3))
    outside = np.tile([3.0, 0.0, 0.0], (len(ids), 1))
    assert visible_from_vertices(box, ids, inside, 1e-4).all()
    assert not visible_from_vertices(box, ids, outside, 1e-4).any()


def test_bone_heat_on_a_bar_splits_at_the_joint() -> None:
    """Two collinear bones in a long box: each end belongs to its bone, the joint is shared half and half."""
    bar = trimesh.creation.box(extents=(2.0, 0.2, 0.2))
    bar = bar.subdivide_to_size(0.05)
    bar.merge_vertices()
    segments = np.array([[[-0.9, 0, 0], [0.0, 0, 0]], [[0.0, 0, 0], [0.9, 0, 0]]])
    weights = bone_heat_weights(bar, segments, np.array([0, 1]), num_links=2)
    x = np.asarray(bar.vertices)[:, 0]
    assert weights.min() >= 0.0
    np.testing.assert_allclose(weights.sum(1), 1.0, atol=1e-9)
    assert weights[x < -0.6, 0].min() > 0.95 and weights[x > 0.6, 1].min() > 0.95
    middle = np.abs(x) < 1e-9
    np.testing.assert_allclose(weights[middle, 0], 0.5, atol=0.05)
    # mirror symmetry of the set-up: w0(x) = w1(-x) (up to the triangulation, which is not mirror symmetric)
    mirrored = np.asarray(bar.vertices) * [-1, 1, 1]
    _, mirror_index = trimesh.proximity.ProximityQuery(bar).vertex(mirrored)
    np.testing.assert_allclose(weights[:, 0], weights[mirror_index, 1], atol=5e-3)


def test_component_without_visible_bone_takes_its_nearest_bone() -> None:
    """Multi-component fix: a separate sphere with no bone inside still gets valid weights (its nearest bone)."""
    a = trimesh.creation.icosphere(subdivisions=2, radius=0.2)
    b = trimesh.creation.icosphere(subdivisions=2, radius=0.2)
    b.apply_translation([1.0, 0.0, 0.0])
    mesh = trimesh.util.concatenate([a, b])
    segments = np.array([[[-0.1, 0, 0], [0.1, 0, 0]], [[-0.1, 0.0, 0.5], [0.1, 0.0, 0.5]]])  # second: outside both
    weights = bone_heat_weights(mesh, segments, np.array([0, 1]), num_links=2)
    assert np.isfinite(weights).all()
    np.testing.assert_allclose(weights.sum(1), 1.0, atol=1e-9)
    assert weights[: len(a.vertices), 0].min() > 0.99  # bone 0 is inside sphere a and visible
    nearest = np.argmin(point_segment_distance(np.asarray(b.vertices), segments)[0], axis=1)
    np.testing.assert_array_equal(weights[len(a.vertices):].argmax(1), nearest)


def test_quadruped_bone_heat_is_a_smooth_partition_of_unity(quadruped_skin) -> None:
    robot, asset, weights = quadruped_skin
    mesh = asset.skin
    assert mesh.is_watertight
    assert weights.min() >= 0.0
    np.testing.assert_allclose(weights.sum(1), 1.0, atol=1e-9)
    intermediate = [i for i, n in enumerate(robot.link_names) if n.endswith(("_link_x", "_link_y"))]
    assert np.abs(weights[:, intermediate]).max() == 0.0
    edges = mesh.edges_unique
    jump = np.abs(weights[edges[:, 0]] - weights[edges[:, 1]]).max(1)
    # nearest-bone (one-hot) weights would jump by 1 across every bone boundary
    assert jump.max() < 0.35 and jump.mean() < 0.06


def test_quadruped_foot_has_no_weight_from_the_opposite_leg(quadruped_skin) -> None:
    robot, asset, weights = quadruped_skin
    names = robot.link_names
    for leg, other in (("front_left", "front_right"), ("hind_right", "hind_left")):
        foot = names.index(f"{leg}_foot")
        near = np.linalg.norm(asset.skin.vertices - asset.rest_link_pos[foot], axis=1) < 0.03
        assert near.sum() >= 3
        opposite = [i for i, n in enumerate(names) if n.startswith(other)]
        own = [i for i, n in enumerate(names) if n.startswith(leg)]
        assert weights[near][:, opposite].sum(1).max() < 1e-3
        assert weights[near][:, own].sum(1).min() > 0.99


# ----------------------------------------------------------------------------- sparse weights, transfer
def test_top_k_keeps_the_largest_and_renormalises() -> None:
    dense = np.array([[0.1, 0.6, 0.05, 0.25], [0.0, 0.0, 1.0, 0.0]])
    index, value = top_k_weights(dense, k=2)
    np.testing.assert_array_equal(index, [[1, 3], [2, 0]])
    np.testing.assert_allclose(value, [[0.6 / 0.85, 0.25 / 0.85], [1.0, 0.0]])
    np.testing.assert_allclose(dense_weights(*rigid_weights(np.array([2, 0])), 3), [[0, 0, 1], [1, 0, 0]])
    with pytest.raises(ConfigError):
        top_k_weights(np.zeros(3))


def test_transfer_interpolates_barycentrically_at_the_nearest_surface_point() -> None:
    mesh = _grid_mesh(3)
    vertex_weights = np.stack([mesh.vertices[:, 0], 1 - mesh.vertices[:, 0]], 1)  # linear: reproduced exactly
    points = np.array([[0.3, 0.7, 0.2], [0.9, 0.1, -0.5]])  # off the surface: projected onto z = 0
    got = transfer_weights(mesh, vertex_weights, points)
    np.testing.assert_allclose(got, [[0.3, 0.7], [0.9, 0.1]], atol=1e-9)
    np.testing.assert_allclose(transfer_weights(mesh, vertex_weights, mesh.vertices[:1] * 1.0), vertex_weights[:1],
                               atol=1e-12)


# ----------------------------------------------------------------------------- LBS
def _quadruped_pose(robot, asset, joint_pos: torch.Tensor):
    fk = ForwardKinematics(robot)
    frames = joint_pos.shape[0]
    root_pos = torch.tensor([[0.1, -0.2, STANDING_HEIGHT["quadruped"]]], dtype=torch.float64).expand(frames, 3)
    root_quat = torch.tensor([[0.0, 0.0, np.sin(0.2), np.cos(0.2)]], dtype=torch.float64).expand(frames, 4)
    return fk(root_pos, root_quat, joint_pos)


def test_lbs_at_the_rest_pose_is_the_identity(quadruped_skin) -> None:
    robot, asset, _ = quadruped_skin
    fk = ForwardKinematics(robot)
    link_pos, link_rot = fk(torch.zeros(1, 3, dtype=torch.float64), torch.tensor([[0.0, 0, 0, 1]], dtype=torch.float64),
                            torch.as_tensor(asset.rest_joint_pos[None]))
    means, covars = asset.pose(link_pos, link_rot)
    np.testing.assert_allclose(means[0].numpy(), asset.means, atol=1e-12)
    np.testing.assert_allclose(covars[0].numpy(), asset.covars, atol=1e-15)


def test_lbs_moves_covariances_with_the_same_jacobian_as_the_means(quadruped_skin) -> None:
    """Sigma' = A Sigma A^T: for Sigma = d d^T, the posed covariance is (phi(x + d) - phi(x)) (...)^T."""
    robot, asset, _ = quadruped_skin
    q = torch.linspace(-0.3, 0.3, robot.num_dofs, dtype=torch.float64)[None]
    link_pos, link_rot = _quadruped_pose(robot, asset, q)
    t = lambda x, dt=torch.float64: torch.as_tensor(x, dtype=dt)  # noqa: E731
    rng = np.random.default_rng(1)
    delta = 1e-3 * rng.standard_normal((asset.num_gaussians, 3))
    args = (t(asset.weight_index, torch.long), t(asset.weight_value), t(asset.rest_link_pos), t(asset.rest_link_rot),
            link_pos, link_rot)
    rank_one = t(delta[:, :, None] * delta[:, None, :])
    moved, posed_cov = linear_blend(t(asset.means), rank_one, *args)
    moved_plus, _ = linear_blend(t(asset.means + delta), rank_one, *args)
    d_posed = (moved_plus - moved)[0]
    np.testing.assert_allclose(posed_cov[0].numpy(), (d_posed[:, :, None] * d_posed[:, None, :]).numpy(),
                               atol=1e-16)


def test_lbs_gradient_matches_finite_differences(quadruped_skin) -> None:
    robot, asset, _ = quadruped_skin
    j = robot.joint_names.index("front_left_knee")
    subset = asset.subset(np.arange(0, asset.num_gaussians, 25))
    rng = np.random.default_rng(0)
    probe_m = torch.as_tensor(rng.standard_normal((subset.num_gaussians, 3)))
    probe_c = torch.as_tensor(rng.standard_normal((subset.num_gaussians, 3, 3)))

    def loss(q: torch.Tensor) -> torch.Tensor:
        means, covars = subset.pose(*_quadruped_pose(robot, subset, q))
        return (means[0] * probe_m).sum() + 1e3 * (covars[0] * probe_c).sum()

    q0 = torch.full((1, robot.num_dofs), 0.1, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(loss(q0), q0)
    eps = 1e-6
    bump = torch.zeros_like(q0)
    bump[0, j] = eps
    fd = (loss(q0.detach() + bump) - loss(q0.detach() - bump)) / (2 * eps)
    assert abs(float(grad[0, j])) > 1e-3
    np.testing.assert_allclose(float(grad[0, j]), float(fd), rtol=1e-6)
    assert torch.autograd.gradcheck(lambda q: subset.subset(np.arange(5)).pose(*_quadruped_pose(robot, subset, q))[0],
                                    (q0[:, :].detach().clone().requires_grad_(True),), eps=1e-6, atol=1e-6)


def test_lbs_rejects_link_poses_of_another_robot(quadruped_skin) -> None:
    _, asset, _ = quadruped_skin
    with pytest.raises(ConfigError, match="links"):
        asset.pose(torch.zeros(1, 3, 3), torch.eye(3).expand(1, 3, 3, 3))
