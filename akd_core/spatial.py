"""Small rigid-transform helpers in numpy (float64). Quaternions are (x, y, z, w)."""

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


def wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    """MuJoCo's (w, x, y, z) -> our (x, y, z, w)."""
    q = np.asarray(q)
    return np.concatenate([q[..., 1:4], q[..., 0:1]], axis=-1)


def fmt(values, precision: int = 17) -> str:
    """Space-separated numbers for XML attributes, exact enough for round trips."""
    return " ".join(f"{float(v):.{precision}g}" for v in np.ravel(values))
