"""Forward kinematics equals MuJoCo's, on every built-in skeleton and on real robots; gradients are exact."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.load import load_robot
from akd_core.model.robot import Robot, load_urdf
from akd_core.model.spatial import xyzw_to_wxyz
from akd_core.model.spatial.tensor import matrix_to_quat, quat_to_matrix

from .conftest import example_robot_urdf

mujoco = pytest.importorskip("mujoco")

TOL = 1e-5


def _builtin_names() -> list[str]:
    from akd_core.model import skeletons

    return sorted(skeletons.SKELETONS)


def _random_configs(robot: Robot, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    lower = np.where(np.isfinite(robot.lower), robot.lower, -np.pi)
    upper = np.where(np.isfinite(robot.upper), robot.upper, np.pi)
    joint_pos = rng.uniform(lower, upper, size=(n, robot.num_dofs))
    root_pos = rng.normal(size=(n, 3))
    root_quat = rng.normal(size=(n, 4))
    root_quat /= np.linalg.norm(root_quat, axis=1, keepdims=True)
    return root_pos, root_quat, joint_pos


def _mujoco_link_poses(model, robot: Robot, root_pos, root_quat, joint_pos):
    """World pose of every robot link in MuJoCo (bodies looked up by name)."""
    data = mujoco.MjData(model)
    free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    assert len(free) == 1, "the model must have exactly one free joint (the floating root)"
    root_adr = model.jnt_qposadr[free[0]]
    qpos_adr = [model.jnt_qposadr[model.joint(name).id] for name in robot.joint_names]
    bodies = [model.body(name).id for name in robot.link_names]
    pos = np.zeros((len(root_pos), len(bodies), 3))
    rot = np.zeros((len(root_pos), len(bodies), 3, 3))
    for i in range(len(root_pos)):
        data.qpos[:] = 0
        data.qpos[root_adr:root_adr + 3] = root_pos[i]
        data.qpos[root_adr + 3:root_adr + 7] = xyzw_to_wxyz(root_quat[i])  # MuJoCo quaternions are (w, x, y, z)
        data.qpos[qpos_adr] = joint_pos[i]
        mujoco.mj_kinematics(model, data)
        pos[i] = data.xpos[bodies]
        rot[i] = data.xmat[bodies].reshape(-1, 3, 3)
    return pos, rot


def _assert_fk_matches(robot: Robot, model, n: int = 100) -> None:
    root_pos, root_quat, joint_pos = _random_configs(robot, n)
    fk = ForwardKinematics(robot)
    pos, rot = fk(torch.tensor(root_pos), torch.tensor(root_quat), torch.tensor(joint_pos))
    ref_pos, ref_rot = _mujoco_link_poses(model, robot, root_pos, root_quat, joint_pos)
    np.testing.assert_allclose(pos.numpy(), ref_pos, atol=TOL, rtol=0)
    np.testing.assert_allclose(rot.numpy(), ref_rot, atol=TOL, rtol=0)


def _urdf_import_model(robot: Robot, tmp_path):
    """MuJoCo's own URDF importer (MjSpec.from_file), geometry-free, every link kept as a body, free root added."""
    bare = copy.deepcopy(robot)
    for link in bare.links:
        link.visuals, link.collisions = [], []
    # keep fixed-joint links as bodies so every link can be compared by name
    lines = bare.to_urdf().splitlines()
    robot_line = next(i for i, line in enumerate(lines) if line.startswith("<robot"))
    lines.insert(robot_line + 1, '  <mujoco><compiler fusestatic="false" discardvisual="false"/></mujoco>')
    text = "\n".join(lines)
    path = tmp_path / f"{robot.name}_bare.urdf"
    path.write_text(text)
    spec = mujoco.MjSpec.from_file(str(path))
    root = spec.body(robot.root_link)
    root.add_freejoint()
    return spec.compile()


@pytest.mark.parametrize("name", _builtin_names())
def test_builtin_fk_matches_mujoco_from_generated_mjcf(name):
    robot = load_robot(name)
    model = mujoco.MjModel.from_xml_string(robot.to_mjcf())
    _assert_fk_matches(robot, model)


@pytest.mark.parametrize("name", _builtin_names())
def test_builtin_fk_matches_mujoco_urdf_import(name, tmp_path):
    robot = load_robot(name)
    _assert_fk_matches(robot, _urdf_import_model(robot, tmp_path))


@pytest.mark.parametrize("name", ["a1", "solo12"])
def test_real_robot_fk_matches_mujoco_from_generated_mjcf(name):
    robot = load_urdf(example_robot_urdf(name))
    model = mujoco.MjModel.from_xml_string(robot.to_mjcf())
    _assert_fk_matches(robot, model)


@pytest.mark.parametrize("name", ["a1", "solo12"])
def test_real_robot_fk_matches_mujoco_urdf_import(name, tmp_path):
    robot = load_urdf(example_robot_urdf(name))
    _assert_fk_matches(robot, _urdf_import_model(robot, tmp_path))


@pytest.mark.parametrize("name", ["a1", "solo12"])
def test_fk_gradients_pass_gradcheck(name):
    robot = load_urdf(example_robot_urdf(name))
    fk = ForwardKinematics(robot)
    root_pos, root_quat, joint_pos = (torch.tensor(a, requires_grad=True) for a in _random_configs(robot, 2, seed=3))

    def positions(rp, rq, q):
        pos, rot = fk(rp, rq, q)
        return pos, rot

    assert torch.autograd.gradcheck(positions, (root_pos, root_quat, joint_pos), eps=1e-6, atol=1e-6)


def test_fk_prismatic_and_continuous_joints_match_mujoco(tmp_path):
    urdf = tmp_path / "slider.urdf"
    urdf.write_text("""<?xml version="1.0"?>
<robot name="slider">
  <link name="base"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <link name="carriage"><inertial><mass value="0.5"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <link name="wheel"><inertial><mass value="0.2"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="carriage"/>
    <origin xyz="0.1 0.2 0.3" rpy="0.3 -0.2 0.1"/><axis xyz="0 1 1"/>
    <limit lower="-0.5" upper="0.5" effort="10" velocity="1"/></joint>
  <joint name="spin" type="continuous"><parent link="carriage"/><child link="wheel"/>
    <origin xyz="0 0 -0.2" rpy="1.5707963 0 0"/><axis xyz="0 0 1"/><limit effort="5" velocity="30"/></joint>
</robot>""")
    robot = load_urdf(urdf)
    assert [j.type for j in robot.actuated_joints] == ["prismatic", "continuous"]
    model = mujoco.MjModel.from_xml_string(robot.to_mjcf())
    _assert_fk_matches(robot, model, n=30)


def test_quaternion_matrix_round_trip():
    q = torch.randn(500, 4, dtype=torch.float64)
    q = q / q.norm(dim=-1, keepdim=True)
    q = torch.where(q[:, 3:4] < 0, -q, q)
    np.testing.assert_allclose(matrix_to_quat(quat_to_matrix(q)).numpy(), q.numpy(), atol=1e-10)


def test_fk_is_batched_and_float32_by_default():
    robot = load_urdf(example_robot_urdf("solo12"))
    fk = ForwardKinematics(robot)
    frames = 7
    pos, rot = fk(torch.zeros(frames, 3), torch.tensor([[0.0, 0.0, 0.0, 1.0]]).repeat(frames, 1),
                  torch.zeros(frames, robot.num_dofs))
    assert pos.shape == (frames, len(robot.links), 3) and rot.shape == (frames, len(robot.links), 3, 3)
    assert pos.dtype == torch.float32


def test_mesh_geometry_points_are_real_surface_points_that_find_the_lowest_point(tmp_path):
    """A slanted mesh's lowest point comes from its hull vertices, not from bounding-box corners outside it."""
    import trimesh

    from akd_core.model.kinematics import _mesh_points

    shin = trimesh.creation.cylinder(radius=0.03, height=0.3, sections=64)  # 130 vertices, > 128 directions
    path = tmp_path / "shin.stl"
    shin.export(path)
    points = _mesh_points(str(path), (1.0, 1.0, 1.0))
    hull = shin.convex_hull.vertices
    assert len(points) <= 128
    assert np.min(np.abs(points[:, None, :] - hull[None]).sum(-1), axis=1).max() < 1e-5  # every point is a vertex
    rng = np.random.default_rng(0)
    for _ in range(20):  # any orientation: lowest sampled point within 1 % of the radius-ish scale of the truth
        q = rng.normal(size=4)
        rot = trimesh.transformations.quaternion_matrix(q / np.linalg.norm(q))[:3, :3]
        true_low = (hull @ rot.T)[:, 2].min()
        low = (points @ rot.T)[:, 2].min()
        assert true_low - 1e-6 <= low <= true_low + 0.01 * 0.15  # (STL stores float32)
    box_corner_low = (np.array([[sx * 0.03, sy * 0.03, sz * 0.15] for sx in (-1, 1) for sy in (-1, 1)
                                for sz in (-1, 1)]) @ rot.T)[:, 2].min()
    assert box_corner_low < true_low - 1e-3  # what bounding-box corners would have claimed
    assert np.allclose(_mesh_points(str(path), (2.0, 2.0, 2.0)), 2.0 * points)
