"""Robot loading from real URDFs, mesh URI resolution, URDF/MJCF writing, and clear errors for bad input."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from akd_core.io.errors import (
    AKDError,
    InertiaError,
    JointLimitError,
    KinematicTreeError,
    MeshNotFoundError,
    URDFError,
)
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.load import load_robot
from akd_core.model.robot import load_urdf, resolve_mesh_uri

from .conftest import example_robot_data_dir, example_robot_urdf

mujoco = pytest.importorskip("mujoco")

INERTIAL = '<inertial><mass value="{m}"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>'


def _urdf(tmp_path: Path, body: str, name: str = "test.urdf") -> Path:
    path = tmp_path / name
    path.write_text(f'<?xml version="1.0"?>\n<robot name="t">\n{body}\n</robot>\n')
    return path


def _two_links(joint_type="revolute", limit='<limit lower="-1" upper="1" effort="5" velocity="3"/>', mass="1"):
    return (f'<link name="a">{INERTIAL.format(m=mass)}</link><link name="b">{INERTIAL.format(m=1)}</link>'
            f'<joint name="j" type="{joint_type}"><parent link="a"/><child link="b"/>'
            f'<axis xyz="0 0 1"/>{limit}</joint>')


# ----------------------------------------------------------------------------- real robots
def test_a1_loads_with_joints_limits_meshes_and_mass(a1_urdf):
    robot = load_urdf(a1_urdf)
    assert robot.num_dofs == 12
    assert robot.root_link == "trunk" or robot.root_link == "base"
    assert all(j.type == "revolute" for j in robot.actuated_joints)
    assert np.all(robot.lower < robot.upper) and np.all(robot.effort_limit > 0) and np.all(robot.velocity_limit > 0)
    meshes = [g for link in robot.links for g in link.visuals if g.kind == "mesh"]
    assert meshes and all(g.mesh_path is not None and g.mesh_path.is_file() for g in meshes)
    assert meshes[0].mesh_uri.startswith("package://")
    assert robot.total_mass == pytest.approx(13.741, abs=1e-3)
    spheres = [g for link in robot.links for g in link.collisions if g.kind == "sphere"]
    assert spheres, "a1's feet are sphere collisions"


def test_package_uri_resolved_through_package_path_and_env(tmp_path, monkeypatch):
    src = example_robot_data_dir()
    # copy a1 somewhere its ancestors do not contain the package, so only explicit paths can resolve it
    pkg_root = tmp_path / "ws" / "src"
    shutil.copytree(src / "a1_description", pkg_root / "example-robot-data" / "robots" / "a1_description")
    lonely = tmp_path / "elsewhere" / "a1.urdf"
    lonely.parent.mkdir()
    shutil.copy(pkg_root / "example-robot-data" / "robots" / "a1_description" / "urdf" / "a1.urdf", lonely)
    monkeypatch.delenv("ROS_PACKAGE_PATH", raising=False)
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    with pytest.raises(MeshNotFoundError) as err:
        load_urdf(lonely)
    message = str(err.value)
    assert "package://example-robot-data/robots/a1_description/meshes/" in message
    assert "--package-path" in message and str(lonely.parent) in message  # every searched path is listed
    assert load_urdf(lonely, package_paths=[pkg_root]).num_dofs == 12
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(pkg_root))
    assert load_urdf(lonely).num_dofs == 12
    monkeypatch.delenv("ROS_PACKAGE_PATH")
    prefix = tmp_path / "install"
    (prefix / "share").mkdir(parents=True)
    (prefix / "share" / "example-robot-data").symlink_to(pkg_root / "example-robot-data")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    assert load_urdf(lonely).num_dofs == 12


def test_relative_and_file_uris_resolve(tmp_path):
    mesh = tmp_path / "meshes" / "part.stl"
    mesh.parent.mkdir()
    import trimesh

    trimesh.creation.box((0.1, 0.1, 0.1)).export(mesh)
    urdf = _urdf(tmp_path, f'<link name="a">{INERTIAL.format(m=1)}<visual><geometry><mesh filename="meshes/part.stl"/>'
                           f'</geometry></visual><collision><geometry><mesh filename="file://{mesh}"/></geometry>'
                           '</collision></link>')
    robot = load_urdf(urdf)
    assert robot.links[0].visuals[0].mesh_path == mesh
    assert robot.links[0].collisions[0].mesh_path == mesh
    assert resolve_mesh_uri(str(mesh), None) == mesh


@pytest.mark.parametrize("name", ["a1", "solo12"])
def test_urdf_round_trip_preserves_kinematics(name, tmp_path):
    robot = load_urdf(example_robot_urdf(name))
    out = tmp_path / f"{name}.urdf"
    robot.to_urdf(out)
    again = load_urdf(out)
    assert again.link_names == robot.link_names and again.joint_names == robot.joint_names
    for a, b in zip(robot.joints, again.joints):
        assert a.type == b.type and a.parent == b.parent and a.child == b.child
        np.testing.assert_allclose(a.origin, b.origin, atol=1e-14)
        np.testing.assert_array_equal(a.axis, b.axis)
        if a.actuated:
            assert (a.lower, a.upper, a.velocity, a.effort) == (b.lower, b.upper, b.velocity, b.effort)
    assert again.total_mass == robot.total_mass
    rng = np.random.default_rng(0)
    q = torch.tensor(rng.uniform(robot.lower, robot.upper, size=(20, robot.num_dofs)))
    rp, rq = torch.zeros(20, 3, dtype=torch.float64), torch.tensor([[0, 0, 0, 1.0]]).repeat(20, 1).double()
    p1, r1 = ForwardKinematics(robot)(rp, rq, q)
    p2, r2 = ForwardKinematics(again)(rp, rq, q)
    assert torch.max(torch.abs(p1 - p2)) < 1e-13 and torch.max(torch.abs(r1 - r2)) < 1e-13


@pytest.mark.parametrize("name", ["a1", "solo12"])
def test_mjcf_has_free_root_ground_and_limited_position_actuators(name):
    robot = load_urdf(example_robot_urdf(name))
    kp = np.linspace(20, 40, robot.num_dofs)
    model = mujoco.MjModel.from_xml_string(robot.to_mjcf(kp=kp, kd=1.5))
    assert model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    assert model.geom("ground").type == mujoco.mjtGeom.mjGEOM_PLANE
    assert model.nu == robot.num_dofs
    for i, joint in enumerate(robot.actuated_joints):
        act = model.actuator(joint.name)
        assert act.gainprm[0] == pytest.approx(kp[i])
        assert act.biasprm[2] == pytest.approx(-1.5)  # position actuator: kv acts as -kv * qdot
        np.testing.assert_allclose(act.forcerange, [-joint.effort, joint.effort])
        np.testing.assert_allclose(model.jnt_range[model.joint(joint.name).id], [joint.lower, joint.upper])
    assert float(model.body_subtreemass[0]) == pytest.approx(robot.total_mass, rel=1e-9)


def test_load_robot_accepts_paths_and_names_and_explains_unknown(a1_urdf):
    assert load_robot(str(a1_urdf)).num_dofs == 12
    with pytest.raises(URDFError, match="built-in robot"):
        load_robot("no_such_robot")


# ----------------------------------------------------------------------------- errors
def test_missing_file(tmp_path):
    with pytest.raises(URDFError, match="does not exist"):
        load_urdf(tmp_path / "nope.urdf")


def test_malformed_xml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.urdf"
    path.write_text('<robot name="x"><link name="a"></robot>')
    with pytest.raises(URDFError) as err:
        load_urdf(path)
    assert str(path) in str(err.value) and "malformed XML" in str(err.value) and "line 1" in str(err.value)


def test_unknown_joint_type(tmp_path):
    with pytest.raises(URDFError, match="type 'planar'.*revolute, continuous, prismatic, fixed"):
        load_urdf(_urdf(tmp_path, _two_links("planar")))


def test_mesh_not_found_lists_uri_and_search_paths(tmp_path):
    body = (f'<link name="a">{INERTIAL.format(m=1)}<visual><geometry><mesh filename="package://ghost/m.stl"/>'
            '</geometry></visual></link>')
    with pytest.raises(MeshNotFoundError) as err:
        load_urdf(_urdf(tmp_path, body), package_paths=[tmp_path / "pkgs"])
    text = str(err.value)
    assert "package://ghost/m.stl" in text and str(tmp_path / "pkgs" / "ghost" / "m.stl") in text


def test_kinematic_loop_and_multiple_roots(tmp_path):
    loop = (f'<link name="a">{INERTIAL.format(m=1)}</link><link name="b">{INERTIAL.format(m=1)}</link>'
            '<joint name="j1" type="fixed"><parent link="a"/><child link="b"/></joint>'
            '<joint name="j2" type="fixed"><parent link="b"/><child link="a"/></joint>')
    with pytest.raises(KinematicTreeError, match="loop"):
        load_urdf(_urdf(tmp_path, loop))
    two_roots = f'<link name="a">{INERTIAL.format(m=1)}</link><link name="b">{INERTIAL.format(m=1)}</link>'
    with pytest.raises(KinematicTreeError, match="several root links"):
        load_urdf(_urdf(tmp_path, two_roots, "roots.urdf"))
    dangling = (f'<link name="a">{INERTIAL.format(m=1)}</link>'
                '<joint name="j" type="fixed"><parent link="a"/><child link="ghost"/></joint>')
    with pytest.raises(KinematicTreeError, match="'ghost'"):
        load_urdf(_urdf(tmp_path, dangling, "dangling.urdf"))


def test_negative_mass_and_invalid_inertia(tmp_path):
    with pytest.raises(InertiaError, match="mass must be positive"):
        load_urdf(_urdf(tmp_path, _two_links(mass="-2")))
    bad = ('<link name="a"><inertial><mass value="1"/><inertia ixx="-0.1" iyy="0.01" izz="0.01" ixy="0" ixz="0" '
           'iyz="0"/></inertial></link>')
    with pytest.raises(InertiaError, match="link 'a'.*non-negative"):
        load_urdf(_urdf(tmp_path, bad, "inertia.urdf"))


def test_lower_limit_above_upper(tmp_path):
    with pytest.raises(JointLimitError, match="joint 'j'.*lower > upper"):
        load_urdf(_urdf(tmp_path, _two_links(limit='<limit lower="1" upper="-1" effort="5" velocity="3"/>')))


@pytest.mark.parametrize("limit", ['<limit effort="5" velocity="3"/>',
                                   '<limit lower="0.3" upper="0.3" effort="5" velocity="3"/>'])
def test_equal_lower_and_upper_limits_read_as_unlimited_as_mujoco_reads_them(tmp_path, limit):
    """A revolute <limit> without lower/upper (both default to 0) or with equal ones: MuJoCo's URDF importer ignores
    the range, and AKD plans with the joint MuJoCo simulates (a warning names it)."""
    path = _urdf(tmp_path, _two_links(limit=limit))
    with pytest.warns(UserWarning, match="joint 'j' has lower == upper"):
        robot = load_urdf(path)
    imported = mujoco.MjModel.from_xml_path(str(path))
    assert not imported.jnt_limited[0]
    assert robot.lower[0] == -np.inf and robot.upper[0] == np.inf and robot.joint("j").type == "continuous"
    assert robot.effort_limit[0] == 5.0 and robot.velocity_limit[0] == 3.0


def test_missing_inertials_get_defaults_with_warning(tmp_path):
    body = ('<link name="a"/><link name="b"/>'
            '<joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>'
            '<limit lower="-1" upper="1" effort="5" velocity="3"/></joint>')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        robot = load_urdf(_urdf(tmp_path, body))
    assert any("no <inertial>" in str(w.message) for w in caught)
    assert robot.link("b").inertial is not None and robot.link("b").inertial.mass > 0
    mujoco.MjModel.from_xml_string(robot.to_mjcf())  # moving bodies have mass, so MuJoCo compiles it


def test_errors_are_akd_errors():
    for cls in (URDFError, MeshNotFoundError, KinematicTreeError, InertiaError, JointLimitError):
        assert issubclass(cls, AKDError)


def test_cli_output_piped_into_a_reader_that_stops_early_is_not_an_error():
    """`akd robots info ... --json | head -c 50`: the closed pipe ends akd quietly with status 0."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "akd_core.cli", "robots", "info", "quadruped", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = proc.stdout.read(50)
    proc.stdout.close()  # the reader leaves before akd has written everything
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, stderr
    assert head.startswith(b"{") and "Traceback" not in stderr and "BrokenPipe" not in stderr


def test_capsules_read_from_a_urdf_and_written_as_standard_shapes(tmp_path):
    """<capsule> is a URDF extension yourdfpy and urdfdom reject: AKD reads it, and writes the same solid as a
    cylinder and two spheres, which every URDF reader knows."""
    body = (f'<link name="a">{INERTIAL.format(m=1)}<collision><origin xyz="0 0 0.1" rpy="0 0 0"/><geometry>'
            '<capsule radius="0.05" length="0.2"/></geometry></collision></link>'
            f'<link name="b">{INERTIAL.format(m=1)}</link><joint name="j" type="revolute"><parent link="a"/>'
            '<child link="b"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="5" velocity="3"/></joint>')
    robot = load_urdf(_urdf(tmp_path, body))
    (cap,) = robot.link("a").collisions
    assert cap.kind == "capsule" and np.allclose(cap.size, [0.05, 0.2]) and np.allclose(cap.origin[:3, 3], [0, 0, 0.1])
    written = tmp_path / "out.urdf"
    robot.to_urdf(written)
    assert "<capsule" not in written.read_text()
    parts = load_urdf(written).link("a").collisions
    assert sorted(g.kind for g in parts) == ["cylinder", "sphere", "sphere"]
    ends = sorted(float(g.origin[2, 3]) for g in parts if g.kind == "sphere")
    assert ends == pytest.approx([0.0, 0.2])
