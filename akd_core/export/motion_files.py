"""Motion files for RL motion-tracking trainers: mjlab, BeyondMimic, GMR, MimicKit, ProtoMotions, LocoMuJoCo and
amp-rsl-rl (docs/formats.md describes every field and what each real loader was checked with).

Every one of these files is indexed by the *trainer's* robot model, most of them by position alone, so the writer
first builds that model in MuJoCo (:class:`TargetModel`) and lays the bodies and joints out in its order:

- MuJoCo order (mjlab, GMR, MimicKit, ProtoMotions, LocoMuJoCo): bodies and joints in the compiled MJCF's id order,
  i.e. depth-first in document order. The model is ``target_model`` (the MJCF the trainer loads), else the run's
  ``robot.xml`` when it has one, else the MJCF AKD builds from the run's URDF (:meth:`Robot.to_mjcf`).
- Isaac Lab / PhysX order (BeyondMimic): see :func:`isaac_body_order`; ``target_model`` is the URDF the trainer
  imports (default: the run's ``robot.urdf``).

A body or joint that the target model has and the run lacks, or the reverse, is a :class:`MotionError` naming it:
a file that silently drops or reorders a body is the "my policy does not converge" kind of bug.

Poses and velocities come from MuJoCo (``mj_kinematics`` / ``mj_comVel``) on the target model, fed with the episode's
states: for a tracked run those are the simulated joint and root velocities (no finite differences of positions);
for ``source="reference"`` the reference clip's. MuJoCo's quaternions are (w, x, y, z); each writer converts to its
trainer's order (noted per field). Nothing here downloads anything.
"""

from __future__ import annotations

import pickle
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from akd_core.export.common import MOTION_FORMATS, Episode, continuous_quats
from akd_core.io.errors import ConfigError, MotionError
from akd_core.io.fileio import atomic_path, save_npz_atomic
from akd_core.io.rundir import ROBOT_MJCF  # a run made from an MJCF robot keeps the model it tracked on
from akd_core.model.robot import Link, Robot, load_urdf

SUFFIX = {"mjlab": ".npz", "beyondmimic": ".npz", "gmr": ".pkl", "mimickit": ".pkl", "protomotions": ".motion",
          "locomujoco": ".npz", "amp-rsl-rl": ".npy"}
MIMICKIT_LOOP_MODES = {"Clamp": 0, "Wrap": 1}  # mimickit.anim.motion.LoopMode


def _mujoco():
    import mujoco

    return mujoco


# ----------------------------------------------------------------------------- the trainer's model
@dataclass
class TargetModel:
    """The articulation a trainer loads, compiled in MuJoCo, and the order its files use.

    ``body_names[i]`` is exported from MuJoCo body ``body_ids[i]``; ``merged[i]`` lists the MuJoCo bodies rigidly
    merged into it (Isaac Lab merges links on fixed joints into their parent; elsewhere just ``[body_ids[i]]``).
    ``joint_names`` are the 1-DoF joints in the trainer's order."""

    source: str  # what the model was built from, for messages
    model: Any  # mujoco.MjModel
    free_joint: int  # id of the floating base's free joint
    body_names: list[str]
    body_ids: list[int]
    merged: list[list[int]]
    joint_names: list[str]


def _compile_robot(robot: Robot):
    """MjModel of AKD's own MJCF of ``robot`` without geometry: kinematics and inertia are all a motion file needs,
    and meshes (slow to compile, perhaps not even resolved) are not. The body tree is the one
    :meth:`Robot.to_mjcf` writes for ``robot`` itself (the same joints in the same order give the same children)."""
    bare = Robot(robot.name, [Link(link.name, link.inertial) for link in robot.links], list(robot.joints))
    return _mujoco().MjModel.from_xml_string(bare.to_mjcf(ground=False))


def _compile_mjcf(path: Path):
    mujoco = _mujoco()
    if not path.is_file():
        raise ConfigError(f"target model {path} does not exist; pass the MJCF (.xml) the trainer loads")
    if path.suffix.lower() == ".urdf":
        raise ConfigError(f"target model {path} is a URDF; this format orders bodies as MuJoCo does and needs the "
                          "MJCF (.xml) the trainer loads (only beyondmimic takes a URDF)")
    try:
        return mujoco.MjModel.from_xml_path(str(path))
    except Exception as exc:  # mujoco raises ValueError with the compiler's message
        raise ConfigError(f"target model {path} does not compile in MuJoCo: {exc}") from exc


def _robot_subtree(model, source: str) -> tuple[int, list[int], list[int]]:
    """(free joint id, bodies of the floating robot in id order, its 1-DoF joints in id order)."""
    mujoco = _mujoco()
    free = [j for j in range(model.njnt) if int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE)]
    if len(free) != 1:
        raise ConfigError(f"target model {source} has {len(free)} free joints; a motion file describes one "
                          "floating-base robot, so the model needs exactly one <freejoint>")
    root = int(model.jnt_bodyid[free[0]])
    bodies = [b for b in range(1, model.nbody) if b == root or _has_ancestor(model, b, root)]
    joints = []
    for j in range(model.njnt):
        if j == free[0] or int(model.jnt_bodyid[j]) not in bodies:
            continue
        if int(model.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
            raise ConfigError(f"target model {source}: joint '{name}' is a ball joint; AKD robots have 1-DoF joints "
                              "only (model it as three hinges, as AKD's skeletons do)")
        joints.append(j)
    return free[0], bodies, joints


def _has_ancestor(model, body: int, ancestor: int) -> bool:
    while body > 0:
        body = int(model.body_parentid[body])
        if body == ancestor:
            return True
    return False


def _names(model, kind, ids: list[int]) -> list[str]:
    mujoco = _mujoco()
    return [mujoco.mj_id2name(model, kind, i) for i in ids]


def _check_same_names(what: str, target: list[str], run: list[str], source: str, episode: Episode) -> None:
    extra = [n for n in target if n not in set(run)]
    missing = [n for n in run if n not in set(target)]
    if extra or missing:
        parts = []
        if extra:
            parts.append(f"the target model has {what} {extra} that the run's robot lacks")
        if missing:
            parts.append(f"the run's robot has {what} {missing} that the target model lacks")
        one = {"bodies": "body", "joints": "joint"}[what]
        raise MotionError(f"{episode.run_dir}: cannot lay the motion out for {source}: {'; '.join(parts)}. A trainer "
                          f"indexes these files by its own model, so every {one} must match by name: export for the "
                          "model the run was made with, or make the run with the trainer's model")


def mujoco_target(episode: Episode, target_model: str | Path | None = None) -> TargetModel:
    """The trainer's MJCF in MuJoCo order (``target_model``, else the run's robot.xml, else AKD's MJCF of the run's
    robot), checked against the run's bodies and joints."""
    mujoco = _mujoco()
    if target_model is not None:
        source, model = str(target_model), _compile_mjcf(Path(target_model))
    elif (Path(episode.run_dir) / ROBOT_MJCF).is_file():
        source, model = str(Path(episode.run_dir) / ROBOT_MJCF), _compile_mjcf(Path(episode.run_dir) / ROBOT_MJCF)
    else:
        source, model = f"AKD's MJCF of {episode.run_dir}/robot.urdf", _compile_robot(episode.robot)
    free, bodies, joints = _robot_subtree(model, source)
    body_names = _names(model, mujoco.mjtObj.mjOBJ_BODY, bodies)
    joint_names = _names(model, mujoco.mjtObj.mjOBJ_JOINT, joints)
    _check_same_names("bodies", body_names, list(episode.body_names), source, episode)
    _check_same_names("joints", joint_names, list(episode.joint_names), source, episode)
    return TargetModel(source=source, model=model, free_joint=free, body_names=body_names, body_ids=bodies,
                       merged=[[b] for b in bodies], joint_names=joint_names)


def isaac_body_order(robot: Robot, merge_fixed_joints: bool = True) -> tuple[list[str], dict[str, list[str]]]:
    """Isaac Lab's body order of a URDF robot, and for each body the links merged into it.

    The rule, from the sources:

    1. Isaac Lab's URDF converter merges every link attached by a fixed joint into its parent
       (``UrdfConverterCfg.merge_fixed_joints``, default True, as BeyondMimic's G1 uses it); pass
       ``merge_fixed_joints=False`` for an asset converted without merging.
    2. PhysX numbers an articulation's links breadth-first from the root: ``NpScene::addArticulationInternal``
       walks the links with a FIFO queue, appending each link's children in turn, and
       ``omni.physics.tensors`` / ``ArticulationData.body_names`` report that link order.
    3. A link's children come in name order (the URDF importer keeps links and joints in name-sorted maps): ANYmal-C's
       joints in Isaac Lab are ``LF_HAA, LH_HAA, RF_HAA, RH_HAA, LF_HFE, ...`` although its URDF declares LF, RF, LH,
       RH, and G1's are ``left_hip_pitch, right_hip_pitch, waist_yaw, left_hip_roll, ...``.

    Isaac Lab's joint order is the inbound joint of each body in this order (the root has none)."""
    parent_joint = {j.child: j for j in robot.joints}
    kept = [link for link in robot.link_names
            if link == robot.root_link or not merge_fixed_joints or parent_joint[link].type != "fixed"]
    kept_set = set(kept)

    def kept_ancestor(link: str) -> str:
        while link not in kept_set:
            link = parent_joint[link].parent
        return link

    children: dict[str, list[str]] = {link: [] for link in kept}
    merged: dict[str, list[str]] = {link: [link] for link in kept}
    for link in robot.link_names:
        if link == robot.root_link:
            continue
        owner = kept_ancestor(parent_joint[link].parent)
        if link in kept_set:
            children[owner].append(link)
        else:
            merged[kept_ancestor(link)].append(link)
    order, queue = [], deque([robot.root_link])
    while queue:
        link = queue.popleft()
        order.append(link)
        queue.extend(sorted(children[link]))
    return order, merged


def isaac_target(episode: Episode, target_model: str | Path | None = None,
                 merge_fixed_joints: bool = True) -> TargetModel:
    """The URDF the trainer imports into Isaac Lab (``target_model``, default the run's robot.urdf), in PhysX order,
    checked against the run's links and joints; kinematics in MuJoCo on AKD's MJCF of that URDF."""
    mujoco = _mujoco()
    if target_model is None:
        robot, source = episode.robot, f"{episode.run_dir}/robot.urdf"
    else:
        path = Path(target_model)
        if path.suffix.lower() != ".urdf":
            raise ConfigError(f"target model {path}: beyondmimic orders bodies as Isaac Lab imports a URDF; pass the "
                              "URDF (.urdf) the trainer loads")
        robot, source = load_urdf(path, resolve_meshes=False), str(path)
    _check_same_names("bodies", robot.link_names, list(episode.body_names), source, episode)
    _check_same_names("joints", robot.joint_names, list(episode.joint_names), source, episode)
    order, merged = isaac_body_order(robot, merge_fixed_joints)
    model = _compile_robot(robot)
    free, _, _ = _robot_subtree(model, source)

    def body_id(name: str) -> int:
        return int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name))

    parent_joint = {j.child: j for j in robot.joints}
    joints = [parent_joint[link].name for link in order[1:] if parent_joint[link].actuated]
    return TargetModel(source=source, model=model, free_joint=free, body_names=order,
                       body_ids=[body_id(n) for n in order], merged=[[body_id(n) for n in merged[b]] for b in order],
                       joint_names=joints)


# ----------------------------------------------------------------------------- kinematics in MuJoCo
@dataclass
class Kinematics:
    """The episode's states set into a target model, frame by frame (T frames, B exported bodies, J joints)."""

    joint_pos: np.ndarray  # (T, J) rad, target joint order
    joint_vel: np.ndarray  # (T, J) rad/s
    body_pos: np.ndarray  # (T, B, 3) m, body (link) frame origins, world
    body_quat_wxyz: np.ndarray  # (T, B, 4) world, sign-continuous in time
    body_lin_vel: np.ndarray  # (T, B, 3) m/s, velocity of the link frame origin, world axes
    body_ang_vel: np.ndarray  # (T, B, 3) rad/s, world axes
    body_com_lin_vel: np.ndarray  # (T, B, 3) m/s, velocity of the body's (merged) centre of mass, world axes
    qpos: np.ndarray  # (T, nq) the whole model
    qvel: np.ndarray  # (T, nv)
    xpos: np.ndarray  # (T, nbody, 3) every MuJoCo body, world included
    xquat: np.ndarray  # (T, nbody, 4) wxyz
    cvel: np.ndarray  # (T, nbody, 6) MuJoCo's com-based velocities [angular, linear]
    subtree_com: np.ndarray  # (T, nbody, 3)
    site_xpos: np.ndarray  # (T, nsite, 3)
    site_xmat: np.ndarray  # (T, nsite, 9)


def target_kinematics(episode: Episode, target: TargetModel) -> Kinematics:
    """Set each frame's root pose, joint positions and (simulated) velocities into the target model and read every
    body's pose and velocity back (mj_kinematics, mj_comPos, mj_comVel)."""
    mujoco = _mujoco()
    m = target.model
    d = mujoco.MjData(m)
    run_index = {n: i for i, n in enumerate(episode.joint_names)}
    cols = np.array([run_index[n] for n in target.joint_names], dtype=int)
    jids = [int(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)) for n in target.joint_names]
    qadr = np.array([m.jnt_qposadr[j] for j in jids], dtype=int)
    vadr = np.array([m.jnt_dofadr[j] for j in jids], dtype=int)
    rq, rv = int(m.jnt_qposadr[target.free_joint]), int(m.jnt_dofadr[target.free_joint])
    root = int(m.jnt_bodyid[target.free_joint])
    num = episode.num_samples
    out = {k: [] for k in ("qpos", "qvel", "xpos", "xquat", "cvel", "subtree_com", "xipos", "site_xpos", "site_xmat")}
    for t in range(num):
        quat_xyzw = np.asarray(episode.root_quat[t], dtype=np.float64)
        quat_xyzw = quat_xyzw / np.linalg.norm(quat_xyzw)
        rot = _quat_xyzw_to_matrix(quat_xyzw)
        d.qpos[:] = m.qpos0
        d.qvel[:] = 0.0
        d.qpos[rq:rq + 3] = episode.root_pos[t]
        d.qpos[rq + 3:rq + 7] = np.roll(quat_xyzw, 1)  # MuJoCo (w, x, y, z)
        d.qpos[qadr] = episode.joint_pos[t, cols]
        d.qvel[rv:rv + 3] = episode.root_lin_vel[t]  # free joint: linear velocity of the body origin, world axes
        d.qvel[rv + 3:rv + 6] = rot.T @ np.asarray(episode.root_ang_vel[t], dtype=np.float64)  # angular: body axes
        d.qvel[vadr] = episode.joint_vel[t, cols]
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_comVel(m, d)
        for key in out:
            out[key].append(np.array(getattr(d, key), dtype=np.float64))
    arr = {k: np.stack(v) for k, v in out.items()}
    arr["site_xmat"] = arr["site_xmat"].reshape(num, m.nsite, 9)
    ang = arr["cvel"][..., :3]  # (T, nbody, 3)
    lin_at_com = arr["cvel"][..., 3:]  # linear velocity of the point at subtree_com[root], world axes

    def velocity_at(points: np.ndarray) -> np.ndarray:  # (T, nbody, 3) points rigidly on each body
        return lin_at_com + np.cross(ang, points - arr["subtree_com"][:, root:root + 1])

    link_vel, com_vel = velocity_at(arr["xpos"]), velocity_at(arr["xipos"])
    mass = np.asarray(m.body_mass, dtype=np.float64)
    ids = target.body_ids
    com_lin = np.stack([_mass_weighted(com_vel, mass, group) if mass[group].sum() > 0 else link_vel[:, body]
                        for body, group in zip(ids, target.merged)], axis=1)
    return Kinematics(
        joint_pos=arr["qpos"][:, qadr], joint_vel=arr["qvel"][:, vadr], body_pos=arr["xpos"][:, ids],
        body_quat_wxyz=continuous_quats(arr["xquat"][:, ids]), body_lin_vel=link_vel[:, ids],
        body_ang_vel=ang[:, ids], body_com_lin_vel=com_lin, qpos=arr["qpos"], qvel=arr["qvel"], xpos=arr["xpos"],
        xquat=arr["xquat"], cvel=arr["cvel"], subtree_com=arr["subtree_com"], site_xpos=arr["site_xpos"],
        site_xmat=arr["site_xmat"])


def _mass_weighted(values: np.ndarray, mass: np.ndarray, group: list[int]) -> np.ndarray:
    weights = mass[group] / mass[group].sum()
    return np.einsum("tbi,b->ti", values[:, group], weights)


def _quat_xyzw_to_matrix(q: np.ndarray) -> np.ndarray:
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    return np.concatenate([q[..., 1:], q[..., :1]], axis=-1)


def _finite(episode: Episode, fmt: str, **arrays: np.ndarray) -> None:
    for name, value in arrays.items():
        if not np.all(np.isfinite(value)):
            raise MotionError(f"{episode.run_dir}: the {fmt} field '{name}' contains NaN or inf values; the "
                              f"{episode.source} clip is broken (re-run `akd track {episode.run_dir}`)")


# ----------------------------------------------------------------------------- writers
def _tracking_npz(episode: Episode, path: str | Path, target: TargetModel, velocity: str, fmt: str) -> Path:
    kin = target_kinematics(episode, target)
    lin_vel = kin.body_com_lin_vel if velocity == "com" else kin.body_lin_vel
    _finite(episode, fmt, body_pos_w=kin.body_pos, body_lin_vel_w=lin_vel, joint_vel=kin.joint_vel)
    # the velocity command the clip follows (vx, vy, yaw rate; heading frame), for command-conditioned trainers: an
    # extra key the trainers' loaders do not read
    extra = {} if episode.command is None else {"command": episode.command.astype(np.float32)}
    return save_npz_atomic(
        path,
        fps=np.array([episode.fps], dtype=np.float64),  # a 1-element array, as both projects' csv_to_npz write it
        joint_pos=kin.joint_pos.astype(np.float32),
        joint_vel=kin.joint_vel.astype(np.float32),
        body_pos_w=kin.body_pos.astype(np.float32),
        body_quat_w=kin.body_quat_wxyz.astype(np.float32),  # (w, x, y, z)
        body_lin_vel_w=lin_vel.astype(np.float32),
        body_ang_vel_w=kin.body_ang_vel.astype(np.float32),
        body_names=np.array(target.body_names, dtype=str),
        joint_names=np.array(target.joint_names, dtype=str),
        **extra,
    )


def write_mjlab(episode: Episode, path: str | Path, target_model: str | Path | None = None) -> Path:
    """mjlab tracking npz (``mjlab.tasks.tracking.mdp.commands.MotionLoader``): bodies and joints in MuJoCo order,
    body velocities of the link frame origin (mjlab's ``body_link_lin_vel_w``)."""
    return _tracking_npz(episode, path, mujoco_target(episode, target_model), "link", "mjlab")


def write_beyondmimic(episode: Episode, path: str | Path, target_model: str | Path | None = None,
                      merge_fixed_joints: bool = True) -> Path:
    """BeyondMimic (whole_body_tracking) npz: Isaac Lab/PhysX body and joint order (:func:`isaac_body_order`),
    body linear velocities of the centre of mass (Isaac Lab's ``body_lin_vel_w``)."""
    return _tracking_npz(episode, path, isaac_target(episode, target_model, merge_fixed_joints), "com",
                         "beyondmimic")


def _pickle_atomic(path: str | Path, obj: Any) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            pickle.dump(obj, f)
    return Path(path)


def _root_frames(episode: Episode, target: TargetModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(root_pos (T,3), root_quat_xyzw (T,4) sign-continuous, joint_pos (T,J) in the target's joint order)."""
    cols = [list(episode.joint_names).index(n) for n in target.joint_names]
    quat = episode.root_quat.astype(np.float64)
    quat = continuous_quats(quat / np.linalg.norm(quat, axis=-1, keepdims=True))
    return episode.root_pos.astype(np.float64), quat, episode.joint_pos[:, cols].astype(np.float64)


def write_gmr(episode: Episode, path: str | Path, target_model: str | Path | None = None) -> Path:
    """GMR robot-motion pickle (``general_motion_retargeting.data_loader.load_robot_motion``)."""
    target = mujoco_target(episode, target_model)
    root_pos, root_quat, dof_pos = _root_frames(episode, target)
    kin = target_kinematics(episode, target)
    rot = np.stack([_quat_xyzw_to_matrix(q) for q in root_quat])  # (T, 3, 3) root -> world
    local = np.einsum("tji,tbj->tbi", rot, kin.body_pos - root_pos[:, None])  # bodies in the root frame
    _finite(episode, "gmr", root_pos=root_pos, dof_pos=dof_pos)
    return _pickle_atomic(path, {
        "fps": float(episode.fps),
        "root_pos": root_pos.astype(np.float32),
        "root_rot": root_quat.astype(np.float32),  # (x, y, z, w)
        "dof_pos": dof_pos.astype(np.float32),
        "local_body_pos": local.astype(np.float32),
        "link_body_list": list(target.body_names),
    })


def write_mimickit(episode: Episode, path: str | Path, target_model: str | Path | None = None,
                   loop_mode: str = "Wrap") -> Path:
    """MimicKit motion pickle (``mimickit.anim.motion.load_motion``): frames = root pos, root exp-map, dofs."""
    if loop_mode not in MIMICKIT_LOOP_MODES:
        raise ConfigError(f"MimicKit loop mode must be one of {list(MIMICKIT_LOOP_MODES)}, got {loop_mode!r}")
    from scipy.spatial.transform import Rotation

    target = mujoco_target(episode, target_model)
    root_pos, root_quat, dof_pos = _root_frames(episode, target)
    # MimicKit's quat_to_exp_map: w made non-negative, angle in [0, pi], exp map = axis * angle (SciPy's rotvec)
    exp_map = Rotation.from_quat(root_quat).as_rotvec()
    frames = np.concatenate([root_pos, exp_map, dof_pos], axis=1)
    _finite(episode, "mimickit", frames=frames)
    # as MimicKit's own Motion.save writes it: plain Python lists, loop mode as its integer value
    return _pickle_atomic(path, {"loop_mode": MIMICKIT_LOOP_MODES[loop_mode], "fps": float(episode.fps),
                                 "frames": frames.tolist()})


def foot_contacts_per_body(episode: Episode, body_names: list[str]) -> np.ndarray:
    """(T, B) bool: each body's contact flag; a foot link's comes from the episode's foot contacts (lowest point within
    CONTACT_HEIGHT_M of the ground), every other body is False."""
    contacts = np.zeros((episode.num_samples, len(body_names)), dtype=bool)
    for k, foot in enumerate(episode.foot_names):
        if foot in body_names:
            contacts[:, body_names.index(foot)] |= episode.foot_contacts[:, k]
    return contacts


def write_protomotions(episode: Episode, path: str | Path, target_model: str | Path | None = None) -> Path:
    """ProtoMotions ``.motion`` (``torch.save`` of a ``RobotState.to_dict()``, read by ``MotionLib._load_motions``)."""
    import torch

    target = mujoco_target(episode, target_model)
    kin = target_kinematics(episode, target)
    _finite(episode, "protomotions", rigid_body_pos=kin.body_pos, rigid_body_vel=kin.body_lin_vel)

    def f32(value: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32))

    motion = {
        "fps": float(episode.fps),
        "dof_pos": f32(kin.joint_pos),
        "dof_vel": f32(kin.joint_vel),
        "rigid_body_pos": f32(kin.body_pos),
        "rigid_body_rot": f32(_wxyz_to_xyzw(kin.body_quat_wxyz)),  # (x, y, z, w): ProtoMotions' common state
        "rigid_body_vel": f32(kin.body_lin_vel),
        "rigid_body_ang_vel": f32(kin.body_ang_vel),
        "rigid_body_contacts": torch.from_numpy(foot_contacts_per_body(episode, target.body_names)),
    }
    with atomic_path(path) as tmp:
        torch.save(motion, str(tmp))
    return Path(path)


def write_locomujoco(episode: Episode, path: str | Path, target_model: str | Path | None = None) -> Path:
    """LocoMuJoCo 1.0 ``Trajectory`` npz, laid out as ``Trajectory.save`` writes it (info, model and data fields
    flattened into one npz) so that ``Trajectory.load`` reads it."""
    mujoco = _mujoco()
    target = mujoco_target(episode, target_model)
    kin = target_kinematics(episode, target)
    m = target.model
    _finite(episode, "locomujoco", qpos=kin.qpos, qvel=kin.qvel)
    num = episode.num_samples
    body_names = _names(m, mujoco.mjtObj.mjOBJ_BODY, list(range(m.nbody)))  # every body, "world" first
    site_names = _names(m, mujoco.mjtObj.mjOBJ_SITE, list(range(m.nsite)))
    none = np.array(None, dtype=object)  # how np.savez stores a None field of Trajectory.save
    return save_npz_atomic(
        path,
        # TrajectoryInfo
        joint_names=np.array(_names(m, mujoco.mjtObj.mjOBJ_JOINT, list(range(m.njnt))), dtype=str),
        frequency=np.float64(episode.fps),
        body_names=np.array(body_names, dtype=str),
        site_names=np.array(site_names, dtype=str) if site_names else none,
        metadata=none,
        # TrajectoryModel (what ExtendTrajData records of the MjModel)
        njnt=np.int64(m.njnt), jnt_type=np.array(m.jnt_type), nbody=np.int64(m.nbody),
        body_rootid=np.array(m.body_rootid), body_weldid=np.array(m.body_weldid),
        body_mocapid=np.array(m.body_mocapid), body_pos=np.array(m.body_pos), body_quat=np.array(m.body_quat),
        body_ipos=np.array(m.body_ipos), body_iquat=np.array(m.body_iquat), nsite=np.int64(m.nsite),
        site_bodyid=np.array(m.site_bodyid), site_pos=np.array(m.site_pos), site_quat=np.array(m.site_quat),
        # TrajectoryData: one trajectory, samples [0, T)
        qpos=kin.qpos, qvel=kin.qvel, xpos=kin.xpos, xquat=kin.xquat, cvel=kin.cvel, subtree_com=kin.subtree_com,
        site_xpos=kin.site_xpos, site_xmat=kin.site_xmat, split_points=np.array([0, num], dtype=np.int64),
    )


def write_amp_rsl_rl(episode: Episode, path: str | Path, target_model: str | Path | None = None) -> Path:
    """amp-rsl-rl ``.npy`` dict (``amp_rsl_rl.utils.motion_loader.AMPLoader``), joints named (the loader reorders them
    by name to its environment's order; it differentiates positions itself, so no velocities are stored)."""
    del target_model  # the loader matches joints by name
    quat = episode.root_quat.astype(np.float64)
    quat = continuous_quats(quat / np.linalg.norm(quat, axis=-1, keepdims=True))
    _finite(episode, "amp-rsl-rl", joint_positions=episode.joint_pos, root_position=episode.root_pos)
    data = {
        "joints_list": list(episode.joint_names),
        "joint_positions": [row.astype(np.float64) for row in episode.joint_pos],  # one (J,) array per frame
        "root_position": [row.astype(np.float64) for row in episode.root_pos],
        "root_quaternion": [row for row in quat],  # (x, y, z, w), SciPy's order
        "fps": float(episode.fps),
    }
    with atomic_path(path, suffix=".npy") as tmp:
        np.save(tmp, np.array(data, dtype=object), allow_pickle=True)
    return Path(path)


WRITERS = {"mjlab": write_mjlab, "beyondmimic": write_beyondmimic, "gmr": write_gmr, "mimickit": write_mimickit,
           "protomotions": write_protomotions, "locomujoco": write_locomujoco, "amp-rsl-rl": write_amp_rsl_rl}


def write_motion_file(episode: Episode, fmt: str, path: str | Path, *, target_model: str | Path | None = None,
                      loop_mode: str = "Wrap") -> Path:
    """One episode as a ``fmt`` motion file (``MOTION_FORMATS``); ``loop_mode`` ("Wrap" | "Clamp") is MimicKit's."""
    if fmt not in WRITERS:
        raise ConfigError(f"unknown motion-file format {fmt!r}; choose from {', '.join(MOTION_FORMATS)}")
    if fmt == "mimickit":
        return write_mimickit(episode, path, target_model, loop_mode=loop_mode)
    return WRITERS[fmt](episode, path, target_model)


# ----------------------------------------------------------------------------- readers (AKD's own, for checks)
def read_motion_file(path: str | Path, fmt: str) -> dict[str, Any]:
    """The fields of a motion file as written (numpy arrays; ProtoMotions tensors converted)."""
    path = Path(path)
    try:
        if fmt in ("mjlab", "beyondmimic", "locomujoco"):
            with np.load(path, allow_pickle=fmt == "locomujoco") as data:
                return {k: data[k] for k in data.files}
        if fmt in ("gmr", "mimickit"):
            with open(path, "rb") as f:
                return pickle.load(f)
        if fmt == "protomotions":
            import torch

            data = torch.load(path, weights_only=False)
            return {k: v.numpy() if hasattr(v, "numpy") else v for k, v in data.items()}
        if fmt == "amp-rsl-rl":
            return np.load(path, allow_pickle=True).item()
    except (OSError, ValueError, pickle.UnpicklingError, EOFError) as exc:
        raise MotionError(f"{path} is not a readable {fmt} motion file ({exc})") from exc
    raise ConfigError(f"unknown motion-file format {fmt!r}; choose from {', '.join(MOTION_FORMATS)}")


__all__ = ["MOTION_FORMATS", "SUFFIX", "TargetModel", "Kinematics", "mujoco_target", "isaac_target",
           "isaac_body_order", "target_kinematics", "write_motion_file", "read_motion_file", "write_mjlab",
           "write_beyondmimic", "write_gmr", "write_mimickit", "write_protomotions", "write_locomujoco",
           "write_amp_rsl_rl", "foot_contacts_per_body"]
