"""Differentiable torch twins of :mod:`akd_core.model.spatial` (quaternions xyzw, batched over leading dims)."""

from __future__ import annotations

import torch
from torch import Tensor


def quat_to_matrix(quat: Tensor) -> Tensor:
    """(..., 4) quaternions (x, y, z, w), normalised here -> (..., 3, 3) rotations."""
    quat = quat / quat.norm(dim=-1, keepdim=True)
    x, y, z, w = quat.unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
        2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
        2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
    ], dim=-1).reshape(*quat.shape[:-1], 3, 3)


def matrix_to_quat(rot: Tensor) -> Tensor:
    """(..., 3, 3) rotations -> (..., 4) quaternions (x, y, z, w) with w >= 0 (differentiable, robust branch pick)."""
    m = rot
    diag = torch.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], -1)
    trace = diag.sum(-1)
    # four candidate solutions; pick the numerically largest denominator per element
    cand_w = torch.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1],
                          1 + trace], -1)
    cand_x = torch.stack([1 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2], m[..., 0, 1] + m[..., 1, 0],
                          m[..., 0, 2] + m[..., 2, 0], m[..., 2, 1] - m[..., 1, 2]], -1)
    cand_y = torch.stack([m[..., 0, 1] + m[..., 1, 0], 1 + m[..., 1, 1] - m[..., 0, 0] - m[..., 2, 2],
                          m[..., 1, 2] + m[..., 2, 1], m[..., 0, 2] - m[..., 2, 0]], -1)
    cand_z = torch.stack([m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1],
                          1 + m[..., 2, 2] - m[..., 0, 0] - m[..., 1, 1], m[..., 1, 0] - m[..., 0, 1]], -1)
    cands = torch.stack([cand_x, cand_y, cand_z, cand_w], -2)  # (..., 4 candidates, 4 comps)
    big = torch.stack([cand_x[..., 0], cand_y[..., 1], cand_z[..., 2], cand_w[..., 3]], -1)
    best = big.argmax(-1)
    q = torch.gather(cands, -2, best[..., None, None].expand(*best.shape, 1, 4)).squeeze(-2)
    q = q / q.norm(dim=-1, keepdim=True)
    return torch.where(q[..., 3:4] < 0, -q, q)


def axis_angle_to_matrix(axis: Tensor, angle: Tensor) -> Tensor:
    """Rodrigues: unit axis (..., 3), angle (...) -> (..., 3, 3)."""
    x, y, z = axis.unbind(-1)
    c, s = torch.cos(angle), torch.sin(angle)
    t = 1 - c
    return torch.stack([
        t * x * x + c, t * x * y - s * z, t * x * z + s * y,
        t * x * y + s * z, t * y * y + c, t * y * z - s * x,
        t * x * z - s * y, t * y * z + s * x, t * z * z + c,
    ], dim=-1).reshape(*angle.shape, 3, 3)


# ----------------------------------------------------------------------------- rotations
def rotvec_to_matrix(rotvec: Tensor) -> Tensor:
    """(..., 3) rotation vectors -> (..., 3, 3); smooth at zero (Taylor-safe Rodrigues)."""
    theta2 = (rotvec * rotvec).sum(-1, keepdim=True)
    theta = torch.sqrt(theta2 + 1e-12)
    small = theta2 < 1e-8
    a = torch.where(small, 1 - theta2 / 6, torch.sin(theta) / theta)
    b = torch.where(small, 0.5 - theta2 / 24, (1 - torch.cos(theta)) / (theta2 + 1e-12))
    x, y, z = rotvec.unbind(-1)
    zero = torch.zeros_like(x)
    skew = torch.stack([zero, -z, y, z, zero, -x, -y, x, zero], -1).reshape(*rotvec.shape[:-1], 3, 3)
    eye = torch.eye(3, dtype=rotvec.dtype, device=rotvec.device).expand_as(skew)
    return eye + a[..., None] * skew + b[..., None] * (skew @ skew)

