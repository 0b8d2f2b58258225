"""Whole-body inverse dynamics of a reference: the joint torques that make the reference happen, with the ground
carrying the floating base.

For every control frame, MuJoCo's ``mj_inverse`` (contacts disabled) gives the generalised force
``Q = M(q) qdd + c(q, qd)`` the reference needs. Its six floating-base rows cannot come from the motors; they must
come from the ground through the stance feet (the reference's own contact schedule). Each stance foot k may push
with a wrench ``w_k = (f_k, n_k)`` at its contact point ``p_k``; the wrenches are the weighted least-norm solution of

    sum_k Jb_k^T w_k = Q_base          (Jb_k: the base columns of the foot point's 6 x nv Jacobian)

with moments weighted as forces at a lever of :data:`SOLE_LEVER_M` (a moment is ``(1 / SOLE_LEVER_M)^2`` times as
expensive as a force of the same number), so point feet push and flat feet use their soles only where the forces
alone cannot balance the base (single support). The joint torques are then

    tau = Q_joints - sum_k Jj_k^T w_k

clamped to the effort limits. What the ground cannot supply (flight, or an infeasible reference) is left out: the
torques still move the limbs as the reference does.

The tracker adds ``tau / kp`` to its PD targets (:func:`akd_core.physics.tracker.feedforward_targets`): with
``tau_pd = kp (q* - q) - kd qd``, the target ``q* = q_ref + (kd qd_ref + tau) / kp`` produces exactly ``tau`` along
the reference, where plain position targets sag under gravity and lag the swing.
"""

from __future__ import annotations

import numpy as np

from akd_core.model.robot import Robot
from akd_core.motion.clip import Motion
from akd_core.physics.engines.base import Feet
from akd_core.physics.engines.mujoco import build_mujoco, import_mujoco
from akd_core.physics.params import PhysicsParams

SOLE_LEVER_M = 0.05  # m: a foot moment costs as much as a force at this lever (see the module docstring)
EQUALITY_WEIGHT = 1e6  # the base rows are enforced this much harder than the wrench norm is kept small


def reference_qpos(robot: Robot, model, reference: Motion, root_pos: np.ndarray, qpos_adr: np.ndarray,
                   root_q: int) -> np.ndarray:
    """(T, nq) MuJoCo positions of the reference (root xyzw -> wxyz)."""
    qpos = np.zeros((reference.num_frames, model.nq))
    qpos[:, root_q:root_q + 3] = root_pos
    quat = np.asarray(reference.root_quat, dtype=np.float64)
    qpos[:, root_q + 3:root_q + 7] = np.roll(quat / np.linalg.norm(quat, axis=1, keepdims=True), 1, axis=1)
    qpos[:, qpos_adr] = reference.joint_pos
    return qpos


def inverse_dynamics_torques(robot: Robot, reference: Motion, physics: PhysicsParams, feet: Feet,
                             root_pos: np.ndarray | None = None,
                             stance: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, float]]:
    """(T, J) joint torques along ``reference`` (robot joint order) and a summary: ``base_residual_frac`` (mean
    unsupplied base force over m g, flight included) and ``torque_clamped_frac``.

    ``root_pos`` (T, 3) overrides the reference's root (the tracker raises it onto the ground); ``stance`` (T, K)
    overrides the reference's contact schedule (``feet`` order); without either the reference's are used.
    """

    mujoco, _ = import_mujoco()
    model, data = build_mujoco(robot, physics, reference.dt)
    model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    joint = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in robot.joint_names]
    root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "root")
    qpos_adr = np.array([model.jnt_qposadr[i] for i in joint], dtype=int)
    dof_adr = np.array([model.jnt_dofadr[i] for i in joint], dtype=int)
    root_q, root_v = int(model.jnt_qposadr[root]), int(model.jnt_dofadr[root])
    base = np.arange(root_v, root_v + 6)
    frames, dt = reference.num_frames, reference.dt
    qpos = reference_qpos(robot, model, reference, reference.root_pos if root_pos is None else root_pos,
                          qpos_adr, root_q)

    # velocities between frames (free joint: world linear, body angular), then central values and accelerations
    half = np.zeros((max(frames - 1, 0), model.nv))
    for t in range(frames - 1):
        mujoco.mj_differentiatePos(model, half[t], dt, qpos[t], qpos[t + 1])
    qvel, qacc = np.zeros((frames, model.nv)), np.zeros((frames, model.nv))
    if frames > 1:
        qvel[0], qvel[-1] = half[0], half[-1]
        qvel[1:-1] = 0.5 * (half[:-1] + half[1:])
        qacc[1:-1] = (half[1:] - half[:-1]) / dt
        qacc[0], qacc[-1] = qacc[min(1, frames - 1)], qacc[max(frames - 2, 0)]

    if stance is None:
        names = list(reference.foot_names)
        stance = np.zeros((frames, len(feet.names)), dtype=bool)
        for k, name in enumerate(feet.names):
            if name in names and reference.foot_contacts is not None:
                stance[:, k] = reference.foot_contacts[:, names.index(name)]
    body_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in feet.names]
    weight = robot.total_mass * 9.81
    effort = np.asarray(physics.effort, dtype=np.float64)
    tau = np.zeros((frames, robot.num_dofs))
    residual, clamped = np.zeros(frames), 0
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    for t in range(frames):
        data.qpos[:], data.qvel[:], data.qacc[:] = qpos[t], qvel[t], qacc[t]
        mujoco.mj_inverse(model, data)
        q_force = data.qfrc_inverse.copy()
        jacobians = []
        for k in np.flatnonzero(stance[t]):
            point = data.xpos[body_ids[k]] + data.xmat[body_ids[k]].reshape(3, 3) @ feet.points[k]
            mujoco.mj_jac(model, data, jacp, jacr, point, body_ids[k])
            jacobians.append(np.vstack([jacp, jacr]))  # (6, nv): wrench (f, n) -> generalised force J^T w
        if jacobians:
            jac = np.vstack(jacobians)  # (6K, nv)
            a = jac[:, base].T  # (6, 6K)
            w_cost = np.tile(np.r_[np.ones(3), np.full(3, 1.0 / SOLE_LEVER_M ** 2)], len(jacobians)) / weight ** 2
            lhs = EQUALITY_WEIGHT * a.T @ a / weight ** 2 + np.diag(w_cost)
            wrench = np.linalg.solve(lhs, EQUALITY_WEIGHT * a.T @ q_force[base] / weight ** 2)
            q_force = q_force - jac.T @ wrench
        residual[t] = np.linalg.norm(q_force[base[:3]]) / weight
        joint_tau = q_force[dof_adr]
        over = np.abs(joint_tau) > effort
        clamped += int(over.sum())
        tau[t] = np.clip(joint_tau, -effort, effort)
    return tau, {"base_residual_frac": float(residual.mean()),
                 "torque_clamped_frac": clamped / max(tau.size, 1)}
