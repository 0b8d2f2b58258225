"""Built-in skeletons: they load with equal mass in yourdfpy, MuJoCo and Newton, their compound joints, masses,
inertias and feet follow the conventions, they stand in the rest pose, and robots/*.urdf are up to date."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from akd_core.io.errors import ConfigError
from akd_core.model import skeletons
from akd_core.model.kinematics import ForwardKinematics, geometry_corners
from akd_core.model.load import load_robot
from akd_core.model.robot import load_urdf

mujoco = pytest.importorskip("mujoco")

NAMES = sorted(skeletons.SKELETONS)
ROBOTS_DIR = Path(__file__).resolve().parents[1] / "robots"
EXPECTED_FEET = {
    "quadruped": {"front_left_foot", "front_right_foot", "hind_left_foot", "hind_right_foot"},
    "ostrich": {"left_foot", "right_foot"},
    "humanoid": {"left_foot", "right_foot"},
    "hexapod": {f"{side}_{end}_foot" for side in ("left", "right") for end in ("front", "middle", "rear")},
}
EXPECTED_MASS_KG = {"quadruped": 25.0, "ostrich": 100.0, "humanoid": 70.0, "hexapod": 3.0}


@pytest.fixture(scope="module", params=NAMES)
def skeleton(request, tmp_path_factory):
    """(name, Robot, path of its freshly emitted URDF)."""
    name = request.param
    path = tmp_path_factory.mktemp("skeletons") / f"{name}.urdf"
    skeletons.emit(name, path)
    return name, skeletons.build(name), path


def _rest_points_z(robot, root_height: float) -> tuple[np.ndarray, np.ndarray]:
    """(link index (P,), world z (P,)) of every geometry corner in the rest pose with the root at root_height."""
    fk = ForwardKinematics(robot)
    idx, pts = geometry_corners(robot)
    link_pos, link_rot = fk(torch.tensor([[0.0, 0.0, root_height]], dtype=torch.float64),
                            torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64),
                            torch.zeros(1, robot.num_dofs, dtype=torch.float64))
    world = ForwardKinematics.transform_points(link_pos, link_rot, torch.as_tensor(idx), torch.as_tensor(pts))
    return idx, world[0, :, 2].numpy()


def _newton_model(path: Path):
    newton = pytest.importorskip("newton")
    builder = newton.ModelBuilder()
    builder.add_urdf(str(path), floating=True)
    return builder.finalize(device="cpu")


# ----------------------------------------------------------------------------- loading in every consumer
def test_registry_and_load_robot_by_name():
    assert set(NAMES) >= {"quadruped", "ostrich", "humanoid", "hexapod"}
    for name in NAMES:
        robot = load_robot(name)
        assert robot.name == name
        assert abs(robot.total_mass - EXPECTED_MASS_KG[name]) < 1e-9
        assert 18 <= robot.num_dofs <= 30
        assert skeletons.standing_height(name) == skeletons.STANDING_HEIGHT[name]
    with pytest.raises(ConfigError, match="choose one of"):
        skeletons.build("dragon")


def test_emitted_urdf_loads_everywhere_with_equal_total_mass(skeleton):
    name, robot, path = skeleton
    import yourdfpy

    urdf = yourdfpy.URDF.load(str(path))
    mass_yourdfpy = sum(link.inertial.mass for link in urdf.robot.links if link.inertial is not None)

    spec = mujoco.MjSpec.from_file(str(path))
    spec.worldbody.first_body().add_freejoint()  # URDF roots are fixed by default; ours float
    model_urdf = spec.compile()
    model_mjcf = mujoco.MjModel.from_xml_string(robot.to_mjcf())
    assert model_mjcf.nu == robot.num_dofs
    assert model_urdf.njnt == robot.num_dofs + 1

    newton_model = _newton_model(path)
    mass_newton = float(newton_model.body_mass.numpy().astype(np.float64).sum())
    assert newton_model.body_count == len(robot.links)  # fixed joints are kept, so feet stay bodies
    assert newton_model.joint_dof_count == robot.num_dofs + 6

    masses = {"yourdfpy": mass_yourdfpy, "mujoco_urdf": float(model_urdf.body_subtreemass[0]),
              "mujoco_mjcf": float(model_mjcf.body_subtreemass[0]), "newton": mass_newton}
    for tool, mass in masses.items():
        # Newton stores float32 masses: its sum carries ~1e-7 relative rounding
        assert mass == pytest.approx(robot.total_mass, rel=1e-6), f"{name}: {tool} total mass {mass}"


def test_newton_keeps_our_inertia(skeleton):
    """Newton's importer validates (and may silently correct) inertias: ours must pass unchanged."""
    _, robot, path = skeleton
    model = _newton_model(path)
    labels = [label.split("/")[-1] for label in model.body_label]
    inertia = model.body_inertia.numpy()
    com = model.body_com.numpy()
    for link in robot.links:
        k = labels.index(link.name)
        assert np.allclose(inertia[k], link.inertial.inertia, rtol=1e-5, atol=1e-12), link.name
        assert np.allclose(com[k], link.inertial.origin[:3, 3], atol=1e-6), link.name


def test_emitted_urdf_round_trips_through_load_urdf(skeleton):
    _, robot, path = skeleton
    loaded = load_urdf(path)
    assert loaded.joint_names == robot.joint_names
    assert loaded.link_names == robot.link_names
    for a, b in zip(loaded.actuated_joints, robot.actuated_joints):
        assert (a.lower, a.upper, a.effort, a.velocity) == pytest.approx((b.lower, b.upper, b.effort, b.velocity))
        assert np.allclose(a.axis, b.axis) and np.allclose(a.origin, b.origin, atol=1e-12)
    assert loaded.total_mass == pytest.approx(robot.total_mass, rel=1e-12)


# ----------------------------------------------------------------------------- joints, masses, inertia
def test_compound_joints_are_xyz_triples_with_small_intermediate_links(skeleton):
    name, robot, _ = skeleton
    compounds = sorted({j.name[:-2] for j in robot.joints if j.name[-2:] in ("_x", "_y", "_z")})
    if name != "hexapod":
        assert compounds, f"{name} should have 3-DoF compound joints"
    for base in compounds:
        jx, jy, jz = (robot.joint(f"{base}_{s}") for s in "xyz")
        assert [jx.child, jy.parent, jy.child, jz.parent] == [f"{base}_link_x", f"{base}_link_x",
                                                               f"{base}_link_y", f"{base}_link_y"]
        for joint, axis in zip((jx, jy, jz), np.eye(3)):
            assert joint.type == "revolute" and np.allclose(joint.axis, axis)
        assert np.allclose(jy.origin, np.eye(4)) and np.allclose(jz.origin, np.eye(4))
        bone = robot.link(jz.child)
        assert bone.visuals and bone.collisions
        for inter in (jx.child, jy.child):
            link = robot.link(inter)
            assert not link.visuals and not link.collisions
            assert link.inertial.mass == pytest.approx(skeletons.INTERMEDIATE_MASS_FRACTION * bone.inertial.mass)
    assert all(robot.joint(f"{b}_{s}").actuated for b in compounds for s in "xyz")


def test_joint_limits_efforts_and_velocities_are_sensible(skeleton):
    name, robot, _ = skeleton
    for joint in robot.actuated_joints:
        assert joint.type == "revolute"
        assert joint.lower < joint.upper, joint.name
        assert joint.lower <= 0.0 <= joint.upper, f"{joint.name}: the rest pose must lie within the limits"
        assert 10.0 <= joint.velocity <= 20.0
        assert joint.effort > 0
    # the leg joints can hold a good share of body weight at a 0.3 m lever (enough to stand and crouch)
    legs = [j for j in robot.actuated_joints if any(k in j.name for k in ("hip", "knee", "femur"))]
    assert legs
    per_leg_load = robot.total_mass * 9.81 / 2
    lever = {"hexapod": 0.1, "quadruped": 0.2}.get(name, 0.3)
    assert min(j.effort for j in legs) >= 0.5 * per_leg_load * lever


def test_knees_flex_one_way(skeleton):
    name, robot, _ = skeleton
    knees = [j for j in robot.actuated_joints if j.name.endswith("_knee")]
    if name == "hexapod":
        assert not knees
        return
    for knee in knees:
        assert min(abs(knee.lower), abs(knee.upper)) <= 0.1 < max(abs(knee.lower), abs(knee.upper)), knee.name


def test_masses_positive_and_inertias_physical(skeleton):
    _, robot, _ = skeleton
    for link in robot.links:
        assert link.inertial is not None and link.inertial.mass > 0, link.name
        inertia = link.inertial.inertia
        assert np.allclose(inertia, inertia.T)
        eig = np.linalg.eigvalsh(inertia)
        assert eig.min() > 0, link.name
        assert eig[0] + eig[1] >= eig[2] * (1 - 1e-12), f"{link.name}: triangle inequality"


def test_bone_inertia_matches_trimesh_box_reference():
    """Single-box and two-box bones against trimesh's mass properties of the same solids (independent code)."""
    import trimesh

    robot = skeletons.build("quadruped")
    density = None
    for name in ("chest", "front_left_thigh", "neck", "head"):
        link = robot.link(name)
        meshes = [trimesh.creation.box(extents=g.size, transform=g.origin) for g in link.collisions]
        volume = sum(m.volume for m in meshes)
        density = link.inertial.mass / volume if density is None else density
        assert link.inertial.mass / volume == pytest.approx(density, rel=1e-9)  # one density for every bone
        union = trimesh.util.concatenate(meshes)  # the head's boxes do not overlap: the sum is the union
        union.density = density
        assert union.mass == pytest.approx(link.inertial.mass, rel=1e-9)
        assert np.allclose(union.center_mass, link.inertial.origin[:3, 3], atol=1e-12)
        assert np.allclose(union.moment_inertia, link.inertial.inertia, rtol=1e-9, atol=1e-12), name


# ----------------------------------------------------------------------------- feet and rest pose
def test_feet_are_named_leaf_links(skeleton):
    name, robot, _ = skeleton
    feet = {n for n in robot.link_names if "foot" in n}
    assert feet == EXPECTED_FEET[name]
    for foot in feet:
        assert robot.children(foot) == [], f"{foot} must be a leaf link"
    assert set(skeletons.foot_offsets(name)) == feet


def test_rest_pose_stands_with_feet_on_the_ground(skeleton):
    name, robot, _ = skeleton
    height = skeletons.standing_height(name)
    idx, z = _rest_points_z(robot, height)
    names = robot.link_names
    foot_idx = {robot.link_index(f) for f in EXPECTED_FEET[name]}
    for foot in foot_idx:
        assert abs(z[idx == foot].min()) < 1e-9, f"{names[foot]} lowest point is at z={z[idx == foot].min()}"
    others = np.array([i not in foot_idx for i in idx])
    assert z[others].min() > 0.005, "only the feet may touch the ground at rest"
    # the declared contact point of every foot is on the ground too
    fk = ForwardKinematics(robot)
    offsets = skeletons.foot_offsets(name)
    feet = sorted(offsets)
    points = fk.link_points(torch.tensor([[0.0, 0.0, height]], dtype=torch.float64),
                            torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64),
                            torch.zeros(1, robot.num_dofs, dtype=torch.float64),
                            torch.as_tensor([robot.link_index(f) for f in feet]),
                            torch.as_tensor(np.stack([offsets[f] for f in feet])))
    assert np.allclose(points[0, :, 2].numpy(), 0.0, atol=1e-9)


def test_left_and_right_are_mirror_images(skeleton):
    _, robot, _ = skeleton
    fk = ForwardKinematics(robot)
    link_pos, _ = fk(torch.zeros(1, 3, dtype=torch.float64), torch.tensor([[0.0, 0.0, 0.0, 1.0]]),
                     torch.zeros(1, robot.num_dofs, dtype=torch.float64))
    pos = link_pos[0].numpy()
    pairs = [(n, n.replace("left", "right")) for n in robot.link_names if "left" in n]
    assert pairs
    for left, right in pairs:
        a, b = robot.link_index(left), robot.link_index(right)
        assert pos[a] == pytest.approx(pos[b] * np.array([1.0, -1.0, 1.0]), abs=1e-12), (left, right)
        assert robot.link(left).inertial.mass == pytest.approx(robot.link(right).inertial.mass, rel=1e-12)


def test_rest_pose_has_no_self_penetration_in_mujoco(skeleton):
    """With self-collision on, the only contacts at rest are feet on the ground (all of them)."""
    name, robot, _ = skeleton
    sunk = skeletons.standing_height(name) - 1e-4  # 0.1 mm into the ground, so every foot registers a contact
    model = mujoco.MjModel.from_xml_string(robot.to_mjcf(self_collision=True, root_height=sunk))
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    ground = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "ground")
    touching = set()
    for contact in data.contact[:data.ncon]:
        assert ground in (contact.geom1, contact.geom2), "robot geometries overlap at rest"
        other = contact.geom2 if contact.geom1 == ground else contact.geom1
        touching.add(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, model.geom_bodyid[other]))
    assert touching == EXPECTED_FEET[name]


def test_stands_for_two_seconds_in_mujoco_under_rest_pose_pd(skeleton):
    """PD on the rest pose (gains that saturate the effort limit at 0.05 rad error) holds the creature up."""
    name, robot, _ = skeleton
    height = skeletons.standing_height(name)
    effort = robot.effort_limit
    kp = effort / 0.05
    model = mujoco.MjModel.from_xml_string(robot.to_mjcf(kp=kp, kd=kp / 20, armature=0.01, self_collision=True,
                                                         root_height=height + 0.002))
    data = mujoco.MjData(model)
    peak = 0.0
    for _ in range(2000):
        mujoco.mj_step(model, data)
        peak = max(peak, float(np.max(np.abs(data.actuator_force) / effort)))
    assert abs(data.qpos[2] - height) < 0.02, f"{name} root height {data.qpos[2]:.3f} vs {height}"
    tilt = 2 * np.arccos(min(1.0, abs(data.qpos[3])))  # MuJoCo quaternion (w, x, y, z)
    assert tilt < 0.05, f"{name} tilted {tilt:.3f} rad"
    assert peak < 0.6, f"{name} needed {peak:.0%} of its effort limits just to stand"


# ----------------------------------------------------------------------------- committed files
@pytest.mark.parametrize("name", NAMES)
def test_committed_urdf_is_not_stale(name):
    path = ROBOTS_DIR / f"{name}.urdf"
    assert path.is_file(), f"{path} missing: run `akd robots emit {name} -o robots/{name}.urdf`"
    if path.read_text() != skeletons.build(name).to_urdf():
        pytest.fail(f"{path} differs from the skeleton in akd_core/model/skeletons.py: "
                    f"run `akd robots emit {name} -o robots/{name}.urdf` and commit it")


def test_robots_readme_lists_every_skeleton():
    text = (ROBOTS_DIR / "README.md").read_text()
    for name in NAMES:
        assert f"{name}.urdf" in text


def test_emit_writes_atomically_and_returns_the_text(tmp_path):
    path = tmp_path / "sub" / "dog.urdf"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean skeleton loads without yourdfpy/robot warnings
        text = skeletons.emit("quadruped", path)
        assert path.read_text() == text
        assert load_urdf(path).num_dofs == 28
    assert [p.name for p in path.parent.iterdir()] == ["dog.urdf"]
