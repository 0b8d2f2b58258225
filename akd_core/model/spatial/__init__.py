"""Rotations and rigid transforms: the one home of AKD's rotation helpers.

numpy (float64) here; their differentiable torch twins in :mod:`akd_core.model.spatial.tensor` (kept apart so that
code which needs no torch, e.g. reading a URDF, does not load it). Quaternions are (x, y, z, w) everywhere; MuJoCo's
and Isaac Lab's (w, x, y, z) only at those boundaries, through :func:`xyzw_to_wxyz`.
"""

from __future__ import annotations

import numpy as np


def rpy_to_matrix(rpy: np.ndarray) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes x, y, z) -> (3, 3) rotation R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def matrix_to_rpy(rot: np.ndarray) -> np.ndarray:
    """(3, 3) rotation -> URDF (roll, pitch, yaw); exact inverse of rpy_to_matrix away from gimbal lock."""
    sp = -rot[2, 0]
    if abs(sp) < 1.0 - 1e-12:
        pitch = np.arcsin(sp)
        roll = np.arctan2(rot[2, 1], rot[2, 2])
        yaw = np.arctan2(rot[1, 0], rot[0, 0])
    else:  # gimbal lock: put everything in yaw
        pitch = np.pi / 2 * np.sign(sp)
        roll = 0.0
        yaw = np.arctan2(-rot[0, 1], rot[1, 1])
    return np.array([roll, pitch, yaw])


def make_transform(xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0)) -> np.ndarray:
    tf = np.eye(4)
    tf[:3, :3] = rpy_to_matrix(np.asarray(rpy, dtype=np.float64))
    tf[:3, 3] = np.asarray(xyz, dtype=np.float64)
    return tf


def matrix_to_quat(rot: np.ndarray) -> np.ndarray:
    """(3, 3) rotation -> unit quaternion (x, y, z, w), w >= 0."""
    m = np.asarray(rot, dtype=np.float64)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = np.sqrt(trace + 1.0) * 2
        q = np.array([(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s])
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        q = np.array([0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s])
    elif m[1, 1] > m[2, 2]:
        s = np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        q = np.array([(m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s])
    else:
        s = np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        q = np.array([(m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s, (m[1, 0] - m[0, 1]) / s])
    q /= np.linalg.norm(q)
    return q if q[3] >= 0 else -q


def xyzw_to_wxyz(q: np.ndarray) -> np.ndarray:
    """Our (x, y, z, w) -> MuJoCo's (w, x, y, z)."""
    q = np.asarray(q)
    return np.concatenate([q[..., 3:4], q[..., :3]], axis=-1)


def fmt(values, precision: int = 17) -> str:
    """Space-separated numbers for XML attributes, exact enough for round trips."""
    return " ".join(f"{float(v):.{precision}g}" for v in np.ravel(values))


# ----------------------------------------------------------------------------- quaternions (xyzw)
# ----------------------------------------------------------------------------- quaternions
def quat_normalize(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def quat_slerp(q0: np.ndarray, q1: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Spherical interpolation of (..., 4) xyzw quaternions, t broadcast over (...)."""
    q0 = quat_normalize(q0)
    q1 = quat_normalize(q1)
    dot = np.sum(q0 * q1, axis=-1, keepdims=True)
    q1 = np.where(dot < 0.0, -q1, q1)
    dot = np.abs(dot)
    t = np.asarray(t)[..., None]
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    sin = np.sin(theta)
    small = sin < 1e-6
    w0 = np.where(small, 1.0 - t, np.sin((1.0 - t) * theta) / np.where(small, 1.0, sin))
    w1 = np.where(small, t, np.sin(t * theta) / np.where(small, 1.0, sin))
    return quat_normalize(w0 * q0 + w1 * q1)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """(..., 4) xyzw -> (..., 3, 3)."""
    x, y, z, w = np.moveaxis(quat_normalize(np.asarray(q, dtype=np.float64)), -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def angular_velocity(root_quat: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity (F,3) from a quaternion sequence (F,4) xyzw by central differences."""
    rot = quat_to_matrix(root_quat)
    drot = np.gradient(rot, dt, axis=0)
    omega_hat = drot @ np.swapaxes(rot, -1, -2)  # dR R^T is skew(omega) in the world frame
    return np.stack([omega_hat[:, 2, 1] - omega_hat[:, 1, 2],
                     omega_hat[:, 0, 2] - omega_hat[:, 2, 0],
                     omega_hat[:, 1, 0] - omega_hat[:, 0, 1]], -1) / 2.0



def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b of (..., 4) xyzw quaternions (broadcast): rotation b first, then a."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz], -1)


def rotvec_quat(rotvec: np.ndarray) -> np.ndarray:
    """Rotation vectors (..., 3) rad (axis x angle) -> (..., 4) xyzw quaternions."""
    rotvec = np.asarray(rotvec, dtype=np.float64)
    angle = np.linalg.norm(rotvec, axis=-1, keepdims=True)
    # sin(angle/2)/angle -> 1/2 as the angle -> 0 (sinc is sin(pi x)/(pi x))
    half = 0.5 * np.sinc(angle / (2 * np.pi))
    return np.concatenate([rotvec * half, np.cos(angle / 2)], -1)


def yaw_quat(yaw: np.ndarray | float) -> np.ndarray:
    """Rotation about +z by ``yaw`` rad (...) -> (..., 4) xyzw."""
    yaw = np.asarray(yaw, dtype=np.float64)
    zero = np.zeros_like(yaw)
    return np.stack([zero, zero, np.sin(yaw / 2), np.cos(yaw / 2)], -1)


def yaw_matrix(yaw: np.ndarray) -> np.ndarray:
    """Rotation about +z by ``yaw`` rad (...) -> (..., 3, 3)."""
    c, s = np.cos(yaw), np.sin(yaw)
    out = np.zeros(np.shape(yaw) + (3, 3))
    out[..., 0, 0], out[..., 0, 1], out[..., 1, 0], out[..., 1, 1], out[..., 2, 2] = c, -s, s, c, 1.0
    return out


def quat_yaw(q: np.ndarray) -> np.ndarray | float:
    """Heading (rotation about +z, rad) of (..., 4) xyzw quaternions."""
    x, y, z, w = np.moveaxis(np.asarray(q, dtype=np.float64), -1, 0)
    yaw = np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return float(yaw) if np.ndim(yaw) == 0 else yaw
