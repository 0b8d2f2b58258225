"""Vectorised leg inverse kinematics: every frame and every leg of a clip in one batch (torch, float64).

:class:`LegIK` solves the joint angles that put each foot's contact point (and, for legs with spare joints, the
foot's orientation) on its target for given root poses. It is what the gait library (:mod:`akd_core.motion.gait`)
and the human-like biped walk (:mod:`akd_core.motion.humanoid`) solve with; the method is documented in
docs/gait.md ("How a clip is made", step 5).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.legs import Leg
from akd_core.model.robot import Robot


class LegIK:
    """Task-priority damped least squares IK of the feet for given root poses, all frames and legs at once.

    Priority 1: contact points on their targets (3 rows per foot); 2: foot orientations (3 rows per foot,
    in the null space of 1: only legs with spare joints keep their soles flat); 3: stay near a reference
    posture (null space of 1 and 2). Legs are independent once the root pose is given, so every matrix is
    per leg (at most a few joints): (F, K, rows, n). Steps are projected onto the joint limits.
    """

    def __init__(self, robot: Robot, legs: Sequence[Leg]):
        self.fk = ForwardKinematics(robot).double()
        self.foot_idx = torch.as_tensor([robot.link_index(leg.foot_link) for leg in legs])
        self.num_dofs = robot.num_dofs
        dof = {n: i for i, n in enumerate(robot.joint_names)}
        joints = {j.name: j for j in robot.joints}
        width = max(len(leg.joint_names) for leg in legs)
        index = np.zeros((len(legs), width), dtype=np.int64)
        valid = np.zeros((len(legs), width))
        child = np.zeros((len(legs), width), dtype=np.int64)
        axis = np.zeros((len(legs), width, 3))
        prismatic = np.zeros((len(legs), width), dtype=bool)
        for k, leg in enumerate(legs):
            for n, name in enumerate(leg.joint_names):
                index[k, n], valid[k, n] = dof[name], 1.0
                child[k, n] = robot.link_index(joints[name].child)
                axis[k, n] = joints[name].axis
                prismatic[k, n] = joints[name].type == "prismatic"
        self.dof_index, self.valid = torch.as_tensor(index), torch.as_tensor(valid)  # (K, n)
        self.child_idx, self.axis = torch.as_tensor(child), torch.as_tensor(axis)  # (K, n), (K, n, 3)
        self.prismatic = torch.as_tensor(prismatic)[..., None]  # (K, n, 1)
        # legs with spare joints keep their feet's orientation (flat soles); 3-joint legs only place the foot
        self.orient_legs = torch.as_tensor([float(len(leg.joint_names) > 3) for leg in legs], dtype=torch.float64)
        self.lower = torch.as_tensor(robot.lower, dtype=torch.float64).clamp(min=-1e3)
        self.upper = torch.as_tensor(robot.upper, dtype=torch.float64).clamp(max=1e3)

    def feet(self, root_pos: torch.Tensor, root_quat: torch.Tensor, q: torch.Tensor, offsets: torch.Tensor):
        link_pos, link_rot = self.fk(root_pos, root_quat, q)
        pts = ForwardKinematics.transform_points(link_pos, link_rot, self.foot_idx, offsets)
        return link_pos, link_rot, pts

    def solve(self, root_pos: np.ndarray, root_quat: np.ndarray, q_init: np.ndarray, q_ref: np.ndarray,
              offsets: np.ndarray, targets: np.ndarray, target_rot: np.ndarray | None = None,
              centres: np.ndarray | None = None, radius: np.ndarray | None = None,
              iterations: int = 100, damping: float = 1e-6) -> tuple[np.ndarray, float]:
        """Joint angles putting each foot's contact point on its target.

        root_pos (F,3), root_quat (F,4), q_init (F,J), q_ref (J,), offsets (K,3) contact points in the foot
        frames, targets (F,K,3), target_rot (F,K,3,3) or None. Spherical feet (centres (K,3) in the foot
        frames, radius (K,)): the contact point's x, y and the sphere centre's height (target z + radius) are
        solved for, so a rolling sphere neither slides nor sinks. Returns joint_pos (F,J) within the limits and
        the max target error (m).
        """
        t = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float64)  # noqa: E731
        root_pos, root_quat, q, q_ref = t(root_pos), t(root_quat), t(q_init).clone(), t(q_ref)
        offsets, targets = t(offsets), t(targets)
        centres = offsets if centres is None else t(centres)
        lift = torch.zeros(len(offsets), dtype=torch.float64) if radius is None else t(radius)
        target_rot = None if target_rot is None else t(target_rot)
        with torch.no_grad():
            lower, upper = self.lower[self.dof_index], self.upper[self.dof_index]  # (K, n)
            active = torch.arange(q.shape[0])  # frames still moving
            for _ in range(iterations):
                if len(active) == 0:
                    break
                q_act = q[active]
                link_pos, link_rot, e_pos, jp = self._position_task(root_pos[active], root_quat[active], q_act,
                                                                    offsets, centres, targets[active], lift)
                jr = e_rot = None
                if target_rot is not None:
                    rot = link_rot[:, self.foot_idx]  # (F, K, 3, 3)
                    e_rot = 0.5 * torch.cross(rot, target_rot[active], dim=-2).sum(-1)  # (F, K, 3) rotation vector
                    jr = self._jacobians(link_pos, link_rot, None)[1]  # (F, K, 3, n)
                q_leg = q_act[:, self.dof_index]  # (F, K, n)
                posture = (q_ref - q_act)[:, self.dof_index] * self.valid
                # active set: a joint at a limit that the step pushes further out is taken out of the tasks,
                # so the other joints of the leg do the work (one re-solve per iteration is enough here)
                free = self.valid.expand_as(q_leg)
                for _ in range(2):
                    step, step_pos = self._priority_step(jp, e_pos, jr, e_rot, posture, free, damping)
                    # blocked: at a limit, pushed outward, and not wanted back inward by the position task
                    # (orientation alone must not lock a joint the feet need)
                    at_lo, at_hi = q_leg <= lower + 1e-9, q_leg >= upper - 1e-9
                    blocked = (at_lo & (step < 0) & (step_pos <= 0)) | (at_hi & (step > 0) & (step_pos >= 0))
                    if not bool(blocked.any()):
                        break
                    free = free * (~blocked)
                step = step * free
                biggest = step.abs().amax(-1, keepdim=True)  # per leg: one stuck leg must not slow the others
                step = step * torch.clamp(0.3 / (biggest + 1e-12), max=1.0)
                full = torch.zeros_like(q_act).index_add_(1, self.dof_index.flatten(), step.flatten(1))
                q_new = torch.minimum(torch.maximum(q_act + full, self.lower), self.upper)
                moved = (q_new - q_act).abs().amax(-1)
                q[active] = q_new
                active = active[moved > 1e-8]
            e_pos = self._position_task(root_pos, root_quat, q, offsets, centres, targets, lift)[2]
            self.frame_errors = e_pos.norm(dim=-1).amax(-1).numpy()  # (F,) of the last solve
        return q.numpy(), float(self.frame_errors.max(initial=0.0))

    def _priority_step(self, jp: torch.Tensor, e_pos: torch.Tensor, jr: torch.Tensor | None,
                       e_rot: torch.Tensor | None, posture: torch.Tensor, free: torch.Tensor,
                       damping: float) -> torch.Tensor:
        """One task-priority step (F, K, n): position, then orientation, then posture, using ``free`` joints.

        Returns the step and its position-task part (both (F, K, n))."""
        cols = free[..., None, :]  # (F, K, 1, n)
        jp = jp * cols
        eye = torch.eye(jp.shape[-1], dtype=jp.dtype)
        pinv_p = _damped_pinv(jp, damping)  # (F, K, n, 3)
        step = step_pos = (pinv_p @ e_pos[..., None]).squeeze(-1)
        null = eye - pinv_p @ jp  # (F, K, n, n)
        if jr is not None and e_rot is not None:
            jr = jr * cols
            jr_null = jr @ null
            # strong damping: directions the position task leaves only through its own damping residue
            # (a 3-joint leg has no real null space) must not fight it
            pinv_r = _damped_pinv(jr_null, 1e-2) * self.orient_legs[:, None, None]
            step = step + (pinv_r @ (e_rot - (jr @ step[..., None]).squeeze(-1))[..., None]).squeeze(-1)
            null = null - pinv_r @ jr_null
        return step + 0.1 * (null @ (posture * free)[..., None]).squeeze(-1), step_pos

    def _position_task(self, root_pos, root_quat, q, offsets, centres, targets, lift):
        """Contact-point x, y and centre z errors (F,K,3) and their Jacobian (F,K,3,n), with the link poses."""
        link_pos, link_rot, pts = self.feet(root_pos, root_quat, q, offsets)
        ctr = ForwardKinematics.transform_points(link_pos, link_rot, self.foot_idx, centres)
        e_pos = torch.cat([targets[..., :2] - pts[..., :2], (targets[..., 2] + lift - ctr[..., 2])[..., None]], -1)
        jac_pts = self._jacobians(link_pos, link_rot, pts)[0]
        jac_ctr = self._jacobians(link_pos, link_rot, ctr)[0]
        return link_pos, link_rot, e_pos, torch.cat([jac_pts[:, :, :2], jac_ctr[:, :, 2:]], 2)

    def _jacobians(self, link_pos: torch.Tensor, link_rot: torch.Tensor, pts: torch.Tensor | None):
        """d(point)/dq and d(foot orientation)/dq per leg, each (F, K, 3, n); pts (F,K,3) or None (foot origins)."""
        rot = link_rot[:, self.child_idx]  # (F, K, n, 3, 3)
        axis_world = (rot @ self.axis[None, ..., None]).squeeze(-1)  # (F, K, n, 3)
        origin = link_pos[:, self.child_idx]  # (F, K, n, 3)
        if pts is None:
            pts = link_pos[:, self.foot_idx]
        lever = pts[:, :, None, :] - origin
        lin = torch.where(self.prismatic, axis_world, torch.cross(axis_world, lever, dim=-1))
        ang = torch.where(self.prismatic, torch.zeros_like(axis_world), axis_world)
        m = self.valid[None, :, :, None]
        return (lin * m).transpose(-1, -2), (ang * m).transpose(-1, -2)


def _damped_pinv(jac: torch.Tensor, damping: float) -> torch.Tensor:
    """Damped pseudo-inverse J^T (J J^T + damping I)^-1 of a batch (..., 3, n) -> (..., n, 3)."""
    gram = jac @ jac.transpose(-1, -2) + damping * torch.eye(3, dtype=jac.dtype)
    return jac.transpose(-1, -2) @ _inverse3(gram)


def _inverse3(m: torch.Tensor) -> torch.Tensor:
    """Closed-form inverse of a batch of 3x3 matrices (..., 3, 3) (much faster than batched LU at this size)."""
    a, b, c = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    d, e, f = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    g, h, i = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    co = torch.stack([e * i - f * h, c * h - b * i, b * f - c * e,
                      f * g - d * i, a * i - c * g, c * d - a * f,
                      d * h - e * g, b * g - a * h, a * e - b * d], -1).reshape(m.shape)
    det = a * co[..., 0, 0] + b * co[..., 1, 0] + c * co[..., 2, 0]
    return co / det[..., None, None]


__all__ = ["LegIK"]
