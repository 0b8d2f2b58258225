"""Leg odometry: the base's linear velocity estimated from what the policy already observes (encoders and IMU).

A stance foot does not move on the ground, so in the base frame

    0 = v_B + omega_B x p_i(q) + J_i(q) qdot   =>   v_B = -(J_i(q) qdot + omega_B x p_i(q))

for each foot i in contact, with p_i the foot point in the base frame (forward kinematics of the encoder angles),
omega_B the gyro and J_i qdot the foot's velocity relative to the base (here the central difference
``(p_i(q + h qdot) - p_i(q - h qdot)) / 2h``, exact to O(h^2) and expressible in any runtime). Which feet are in
contact is not measured: the estimate weights the feet by a softmin of their height along the IMU's up axis
(``-gravity_body``), ``w_i = softmax(-(p_i . up) / tau)`` with ``tau = 5 mm``, so the lowest feet (stance) count and a
swinging foot a centimetre higher hardly does. This is the kinematic part of the estimators legged robots run
(e.g. MIT Cheetah's and Pronto's leg odometry), without the filter: the policy network is the filter.

The estimator is part of the policy (:class:`akd_core.learn.policy.TrackingPolicy` appends its 3 numbers to the
observation before the network), so the observation layout and every consumer of it stay as they are; the ONNX
export builds the same computation from the chain below (:func:`onnx_nodes`), so a deployment needs nothing but the
graph. The chain (the links from the base to each foot, with their joint origins and axes) is stored in the policy
file and rebuilt without the URDF.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from akd_core.io.errors import ConfigError
from akd_core.model.robot import Robot

STANCE_TAU_M = 0.005  # softmin temperature of the stance weights (foot height along the IMU's up axis)
DIFF_STEP_S = 0.01  # h of the central difference along qdot


@dataclass
class FootChains:
    """The kinematic tree from the base to the feet: ``M`` links in parent-first order (the base is -1)."""

    parent: np.ndarray  # (M,) int, index into these links, -1: the base
    origin_rot: np.ndarray  # (M, 3, 3) joint frame in the parent link
    origin_pos: np.ndarray  # (M, 3)
    axis: np.ndarray  # (M, 3) unit joint axis (zero for fixed)
    dof: np.ndarray  # (M,) int, the joint's index in the policy's joint order, -1: fixed
    foot_link: np.ndarray  # (K,) int, index into these links
    foot_offset: np.ndarray  # (K, 3) foot point in its link

    @classmethod
    def from_robot(cls, robot: Robot, foot_names: list[str], foot_offsets: np.ndarray) -> FootChains:
        """The chains of ``robot`` from its root link to ``foot_names`` (links), foot points ``foot_offsets``."""
        by_child = {j.child: j for j in robot.joints}
        dof = {n: i for i, n in enumerate(robot.joint_names)}
        unknown = [f for f in foot_names if f not in robot.link_names]
        if unknown or not foot_names:
            raise ConfigError(f"leg odometry needs the feet as links of '{robot.name}'; got {list(foot_names)}"
                              + (f" ({unknown} are not links)" if unknown else ""))
        needed: set[str] = set()
        for foot in foot_names:
            link = foot
            while link != robot.root_link:
                needed.add(link)
                link = by_child[link].parent
        order = [n for n in robot.link_names if n in needed]  # robot.link_names is parent-first
        index = {n: i for i, n in enumerate(order)}
        parent, rot, pos, axis, dofs = [], [], [], [], []
        for name in order:
            joint = by_child[name]
            if joint.type == "prismatic":
                raise ConfigError(f"leg odometry: joint '{joint.name}' of '{robot.name}' is prismatic; only revolute "
                                  "and fixed joints lie between the base and the feet of a supported robot")
            parent.append(index.get(joint.parent, -1))
            rot.append(np.asarray(joint.origin, np.float64)[:3, :3])
            pos.append(np.asarray(joint.origin, np.float64)[:3, 3])
            moving = joint.type in ("revolute", "continuous") and joint.actuated
            axis.append(np.asarray(joint.axis, np.float64) if moving else np.zeros(3))
            dofs.append(dof[joint.name] if moving else -1)
        return cls(parent=np.asarray(parent, np.int64), origin_rot=np.stack(rot), origin_pos=np.stack(pos),
                   axis=np.stack(axis), dof=np.asarray(dofs, np.int64),
                   foot_link=np.asarray([index[f] for f in foot_names], np.int64),
                   foot_offset=np.asarray(foot_offsets, np.float64).reshape(len(foot_names), 3))

    def to_dict(self) -> dict[str, Any]:
        return {k: np.asarray(getattr(self, k)) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FootChains:
        ints = ("parent", "dof", "foot_link")
        return cls(**{k: np.asarray(d[k], np.int64 if k in ints else np.float64) for k in cls.__dataclass_fields__})


def _skew(axis: np.ndarray) -> np.ndarray:
    x, y, z = axis
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


class LegOdometry(nn.Module):
    """(joint_pos, joint_vel, gyro, gravity_body) (N, .) -> estimated base linear velocity in the base frame (N, 3)."""

    def __init__(self, chains: FootChains):
        super().__init__()
        self.chains = chains
        k = np.stack([_skew(a) for a in chains.axis])  # Rodrigues: R(q) = I + sin q K + (1 - cos q) K^2
        self.register_buffer("origin_rot", torch.as_tensor(chains.origin_rot, dtype=torch.float32))
        self.register_buffer("origin_pos", torch.as_tensor(chains.origin_pos, dtype=torch.float32))
        self.register_buffer("skew", torch.as_tensor(k, dtype=torch.float32))
        self.register_buffer("skew2", torch.as_tensor(k @ k, dtype=torch.float32))
        self.register_buffer("foot_offset", torch.as_tensor(chains.foot_offset, dtype=torch.float32))

    def foot_points(self, joint_pos: torch.Tensor) -> torch.Tensor:
        """Foot points (N, K, 3) in the base frame."""
        eye = torch.eye(3, dtype=joint_pos.dtype)
        rots: list[torch.Tensor] = []
        poss: list[torch.Tensor] = []
        n = joint_pos.shape[0]
        for m, p in enumerate(self.chains.parent.tolist()):
            local = self.origin_rot[m].expand(n, 3, 3)
            d = int(self.chains.dof[m])
            if d >= 0:
                q = joint_pos[:, d, None, None]
                local = local @ (eye + torch.sin(q) * self.skew[m] + (1.0 - torch.cos(q)) * self.skew2[m])
            if p < 0:
                rots.append(local)
                poss.append(self.origin_pos[m].expand(n, 3))
            else:
                rots.append(rots[p] @ local)
                poss.append(poss[p] + (rots[p] @ self.origin_pos[m][:, None]).squeeze(-1))
        feet = [poss[f] + (rots[f] @ self.foot_offset[i][:, None]).squeeze(-1)
                for i, f in enumerate(self.chains.foot_link.tolist())]
        return torch.stack(feet, 1)

    def forward(self, joint_pos: torch.Tensor, joint_vel: torch.Tensor, gyro: torch.Tensor,
                gravity_body: torch.Tensor) -> torch.Tensor:
        n = joint_pos.shape[0]
        h = DIFF_STEP_S
        points = self.foot_points(torch.cat([joint_pos, joint_pos + h * joint_vel, joint_pos - h * joint_vel]))
        p, plus, minus = points[:n], points[n:2 * n], points[2 * n:]
        rel_vel = (plus - minus) / (2.0 * h)  # (N, K, 3) foot velocity relative to the base
        base_vel = -(rel_vel + torch.cross(gyro[:, None, :].expand_as(p), p, dim=-1))
        up = -gravity_body / gravity_body.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        height = (p * up[:, None, :]).sum(-1)  # (N, K)
        weight = torch.softmax(-height / STANCE_TAU_M, dim=1)
        return (weight[..., None] * base_vel).sum(1)


def foot_points_numpy(chains: FootChains, joint_pos: np.ndarray) -> np.ndarray:
    """Reference implementation of :meth:`LegOdometry.foot_points` in float64 numpy (N, K, 3)."""
    n = len(joint_pos)
    rots, poss = [], []
    for m, p in enumerate(chains.parent):
        local = np.broadcast_to(chains.origin_rot[m], (n, 3, 3))
        if chains.dof[m] >= 0:
            k = _skew(chains.axis[m])
            q = joint_pos[:, chains.dof[m], None, None]
            local = local @ (np.eye(3) + np.sin(q) * k + (1 - np.cos(q)) * (k @ k))
        if p < 0:
            rots.append(local)
            poss.append(np.broadcast_to(chains.origin_pos[m], (n, 3)))
        else:
            rots.append(rots[p] @ local)
            poss.append(poss[p] + rots[p] @ chains.origin_pos[m])
    return np.stack([poss[f] + rots[f] @ chains.foot_offset[i] for i, f in enumerate(chains.foot_link)], 1)
