"""Leg odometry (akd_core.learn.odometry): its kinematics against the project's FK, its estimate against the simulated
base velocity of a tracked trot, and the policy that sees it: file round trip and the ONNX graph's parity."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from akd_core.io.errors import ConfigError
from akd_core.learn import bc as B
from akd_core.learn.dataset import load_dataset
from akd_core.learn.observation import body_angular_velocity
from akd_core.learn.odometry import FootChains, LegOdometry, foot_points_numpy
from akd_core.learn.onnx_export import OnnxPolicy, export_onnx
from akd_core.learn.policy import FitConfig, load_policy, save_policy
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.load import load_robot
from akd_core.model.spatial import quat_to_matrix
from tests.policy_runs import dataset_of, feedforward_run


@pytest.fixture(scope="module")
def quadruped():
    return load_robot("quadruped")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, quadruped):
    root = tmp_path_factory.mktemp("odometry_runs")
    runs = [feedforward_run(root / "trot05", quadruped, "a dog trotting forward at 0.5 m/s", 2.0)]
    return load_dataset(dataset_of(runs, root / "trot.hdf5"))


def _chains(robot, dataset):
    clip = dataset.demos[0].reference
    return FootChains.from_robot(robot, list(clip.foot_names), clip.foot_offsets)


def test_foot_points_are_the_forward_kinematics_of_the_feet_in_the_base_frame(quadruped, dataset):
    chains = _chains(quadruped, dataset)
    q = np.random.default_rng(0).uniform(-0.6, 0.6, size=(16, quadruped.num_dofs))
    fk = ForwardKinematics(quadruped)
    pos, rot = fk(torch.zeros(16, 3, dtype=torch.float64), torch.tensor([[0.0, 0, 0, 1]] * 16, dtype=torch.float64),
                  torch.as_tensor(q))
    clip = dataset.demos[0].reference
    idx = [quadruped.link_names.index(f) for f in clip.foot_names]
    expected = (pos[:, idx] + (rot[:, idx] @ torch.as_tensor(clip.foot_offsets)[None, :, :, None]).squeeze(-1))
    np.testing.assert_allclose(foot_points_numpy(chains, q), expected.numpy(), atol=1e-12)
    odometry = LegOdometry(FootChains.from_dict(chains.to_dict()))  # the chain survives its serialisation
    np.testing.assert_allclose(odometry.foot_points(torch.as_tensor(q, dtype=torch.float32)).numpy(),
                               expected.numpy(), atol=1e-5)


def test_feet_planted_on_the_ground_give_the_base_velocity_exactly(quadruped, dataset):
    """Kinematic ground truth: joint velocities solved so that every foot stands still while the base moves at v and
    turns at w; whatever the stance weights, the estimate is v."""
    chains = _chains(quadruped, dataset)
    rng = np.random.default_rng(1)
    q = rng.uniform(-0.2, 0.2, size=(1, quadruped.num_dofs))
    feet = foot_points_numpy(chains, q)[0]  # (K, 3) in the base frame
    h = 1e-6
    jac = np.stack([(foot_points_numpy(chains, q + h * e)[0] - foot_points_numpy(chains, q - h * e)[0]) / (2 * h)
                    for e in np.eye(quadruped.num_dofs)[:, None, :]], -1)  # (K, 3, J)
    v, w = np.array([0.4, -0.1, 0.05]), np.array([0.1, -0.2, 0.3])
    wanted = -(v + np.cross(w, feet))  # (K, 3) foot velocity relative to the base that keeps it still
    qd = np.linalg.lstsq(jac.reshape(-1, quadruped.num_dofs), wanted.reshape(-1), rcond=None)[0]
    np.testing.assert_allclose(jac @ qd, wanted, atol=1e-6)  # every leg can do it (the legs are redundant)
    for gravity in (np.array([0.0, 0.0, -1.0]), np.array([0.3, -0.2, -0.9])):
        args = [torch.as_tensor(x[None] if x.ndim == 1 else x, dtype=torch.float32) for x in (q, qd, w, gravity)]
        with torch.no_grad():
            estimate = LegOdometry(chains)(*args).numpy()[0]
        np.testing.assert_allclose(estimate, v, atol=2e-3)


def test_odometry_follows_the_simulated_base_velocity_of_a_tracked_trot(quadruped, dataset):
    demo = dataset.demos[0]
    odometry = LegOdometry(_chains(quadruped, dataset))
    rot = quat_to_matrix(demo.root_quat.astype(np.float64))
    v_body = np.einsum("nji,nj->ni", rot, demo.root_lin_vel)  # the simulator's base velocity, base frame
    gyro = body_angular_velocity(demo.root_quat, demo.root_ang_vel)
    gravity = -rot[:, 2, :]
    with torch.no_grad():
        estimate = odometry(*(torch.as_tensor(x, dtype=torch.float32)
                              for x in (demo.joint_pos, demo.joint_vel, gyro, gravity))).numpy()
    forward = v_body[:, 0]
    assert forward.mean() > 0.3  # a trot at 0.5 m/s
    assert abs(estimate[:, 0].mean() - forward.mean()) < 0.1
    assert np.sqrt(np.mean((estimate - v_body) ** 2)) < 0.1
    assert np.corrcoef(estimate[:, 0], forward)[0, 1] > 0.6
    # a base velocity the legs do not show is not estimated: the same joints with the base velocity doubled
    assert np.sqrt(np.mean((estimate - 2 * v_body) ** 2)) > 2 * np.sqrt(np.mean((estimate - v_body) ** 2))


def test_policy_with_odometry_round_trips_and_its_onnx_graph_matches_torch(quadruped, dataset, tmp_path):
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install onnx onnxruntime)")
    policy, meta, _ = B.train_bc(dataset, quadruped, B.BCConfig(odometry=True, fit=FitConfig(epochs=3)),
                                 progress=False)
    assert policy.odometry is not None and policy.obs_mean.numel() == policy.obs_dim + 3
    obs, _ = B.training_arrays(dataset)
    obs = np.concatenate([obs, obs + np.random.default_rng(0).normal(size=obs.shape).astype(np.float32)])
    loaded, _ = load_policy(save_policy(tmp_path / "p.pt", policy, meta))
    np.testing.assert_array_equal(loaded.act(obs), policy.act(obs))
    exported = OnnxPolicy(export_onnx(policy, meta, tmp_path / "p.onnx"))
    assert exported.obs_dim == policy.obs_dim  # the estimate is computed inside the graph, not fed to it
    assert exported.meta["odometry"].startswith("leg odometry inside the graph")
    np.testing.assert_allclose(exported.act(obs), policy.act(obs), atol=1e-5, rtol=0)
    # the estimate matters to the network: changing the weights it enters by changes the targets
    first = policy.net[0]
    with torch.no_grad():
        first.weight[:, -3:] += 1.0
    assert np.abs(policy.act(obs) - loaded.act(obs)).max() > 1e-3


def test_odometry_needs_feet_that_are_links(quadruped):
    with pytest.raises(ConfigError, match="not links"):
        FootChains.from_robot(quadruped, ["no_such_foot"], np.zeros((1, 3)))
