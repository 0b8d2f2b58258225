"""Body motion that the feet can carry: the centroidal dynamics of gaits with flight phases.

A bound, a gallop or a pronk of the gait library places the feet and moves the body level at a steady speed. The feet
cannot carry that: while only the front pair is down, nothing balances the pitch moment of the weight about it; in
flight the body must fall; a gallop's staggered footfalls roll it; and a body whose speed never changes asks the
stance feet for horizontal forces that integrate to nothing. A real bounding body pitches, heaves and surges a little
every stride. This module finds that motion.

**Model** (per frame, in the heading frame of the clip: x forward, y left, z up; float64). The clip's whole-body
motion fixes the ground wrench it needs (:func:`akd_core.motion.feasibility.centroidal_wrench`: force ``f`` and
moment ``n`` about the CoM ``c``). Small deviations of the body from the clip, a translation ``d`` (surge, sway,
heave) and a rotation ``a`` (roll, pitch, yaw about the heading frame's axes), change it by ``m d''`` and
``I a''`` (``I``: the whole-body inertia about the CoM at the first frame, in the heading frame). The feet in
intended stance supply forces inside a linearised friction cone, each a non-negative combination of the pyramid's
four edges ``(+-mu, 0, 1)``, ``(0, +-mu, 1)``, with the lever arms of the clip's footholds about its CoM. The
deviations and forces solve the bounded least squares

    min  sum_t  |wrench residual_t|^2 / (m g)^2  +  w_dev (|d_t|^2 + (l |a_t|)^2) / l^2
                + w_end |deviation (start) and deviation rates (start, end)|^2  +  w_force |forces|^2 / (m g)^2

(``l``: the leg length; moments per ``l``; accelerations by second differences), a sparse convex QP solved by
Clarabel. Its solution keeps the footholds and the steps and changes only the body's path.
The lever arms move with the solution, so the caller solves it again from the corrected clip
(:func:`akd_core.motion.gait`'s ``CARRY_PASSES``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from akd_core.io.errors import MotionError
from akd_core.model.robot import Robot
from akd_core.motion.feasibility import GRAVITY, centroidal_wrench

FRICTION = 0.6  # the friction the plan may use: below the simulators' 1.0, so tracking keeps a margin
DEVIATION_WEIGHT = 1e-2  # a deviation of one leg length (or one rad) costs as much as 0.1 body weight of residual
END_WEIGHT = 10.0  # the clip starts as generated (no deviation, no rate) and ends with no deviation rate
FORCE_WEIGHT = 1e-4  # a small pull toward even forces between the stance feet
AXES = 6  # surge, sway, heave, roll, pitch, yaw


@dataclass
class BodyCorrection:
    """Per frame: the body's translation ``shift`` (F,3) m and small rotation ``turn`` (F,3) rad (about the
    heading frame's forward, left and up axes; + pitch noses down), both in the heading frame, and the wrench the
    stance feet still cannot supply with them (F,) (fraction of the body weight; moments per leg length)."""

    shift: np.ndarray
    turn: np.ndarray
    residual: np.ndarray


def _nonneg_least_squares(matrix: sparse.csc_matrix, rhs: np.ndarray, first_nonneg: int) -> np.ndarray:
    """argmin |matrix x - rhs|^2 with x[first_nonneg:] >= 0, as a sparse convex QP for Clarabel (an interior-point
    solver: a 3 s clip's ~3000 unknowns in a fraction of a second, where bounded-variable least squares took
    minutes)."""
    import clarabel

    n = matrix.shape[1]
    hessian = sparse.triu(2.0 * (matrix.T @ matrix)).tocsc()
    linear = -2.0 * (matrix.T @ rhs)
    nonneg = n - first_nonneg
    # -x_f + s = 0, s >= 0
    constraints = sparse.csc_matrix((-np.ones(nonneg), (np.arange(nonneg), np.arange(first_nonneg, n))),
                                    shape=(nonneg, n))
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    solver = clarabel.DefaultSolver(hessian, linear, constraints, np.zeros(nonneg),
                                    [clarabel.NonnegativeConeT(nonneg)], settings)
    solution = solver.solve()
    if str(solution.status) not in ("Solved", "AlmostSolved"):
        raise MotionError(f"the body motion of a gait with flight phases could not be solved ({solution.status}); "
                          "ask for a slower speed or another gait")
    return np.asarray(solution.x)


def body_inertia(robot: Robot, link_pos: np.ndarray, link_rot: np.ndarray) -> np.ndarray:
    """The whole-body inertia tensor (3,3) about the CoM, in the world frame, for one frame's FK link poses (L,3),
    (L,3,3)."""
    items = []
    for i, link in enumerate(robot.links):
        inertial = link.inertial
        if inertial is None or inertial.mass <= 0:
            continue
        rot = link_rot[i] @ inertial.origin[:3, :3]
        centre = link_pos[i] + link_rot[i] @ inertial.origin[:3, 3]
        items.append((inertial.mass, centre, rot @ inertial.inertia @ rot.T))
    total = sum(mass for mass, _, _ in items)
    com = sum(mass * p for mass, p, _ in items) / total
    out = np.zeros((3, 3))
    for mass, p, inertia in items:
        r = p - com
        out += inertia + mass * (float(r @ r) * np.eye(3) - np.outer(r, r))
    return out


def body_correction(robot: Robot, link_pos: np.ndarray, link_rot: np.ndarray, feet: np.ndarray,
                    contacts: np.ndarray, heading: np.ndarray, dt: float, leg_length: float,
                    mu: float = FRICTION) -> BodyCorrection:
    """The body motion (module docstring) for a clip's FK link poses (F,L,3), (F,L,3,3), its contact points
    ``feet`` (F,K,3) in intended stance where ``contacts`` (F,K), its heading directions (F,2) and frame step
    ``dt`` (s)."""
    frames = len(link_pos)
    com, force, moment, mass = centroidal_wrench(robot, link_pos, link_rot, dt)
    weight = mass * GRAVITY
    # heading frames (F,3,3): rows forward, left, up
    frame = np.zeros((frames, 3, 3))
    frame[:, 0, :2], frame[:, 1, :2], frame[:, 2, 2] = heading, np.c_[-heading[:, 1], heading[:, 0]], 1.0
    need = np.concatenate([np.einsum("fij,fj->fi", frame, force),
                           np.einsum("fij,fj->fi", frame, moment) / leg_length], 1) / weight  # (F,6)
    inertia = frame[0] @ body_inertia(robot, link_pos[0], link_rot[0]) @ frame[0].T / leg_length  # heading frame

    stance = np.argwhere(contacts)  # (S, 2): frame, foot
    edges = np.array([[mu, 0.0, 1.0], [-mu, 0.0, 1.0], [0.0, mu, 1.0], [0.0, -mu, 1.0]])
    n_dev, n_force = AXES * frames, len(edges) * len(stance)
    rows, cols, vals, rhs = [], [], [], []

    def add(row: int, col: int, value: float) -> None:
        rows.append(row)
        cols.append(col)
        vals.append(value)

    # wrench rows (6 per frame, in body weights): forces - mass x accelerations = what the clip needs
    for t in range(frames):
        lo = min(max(t - 1, 0), frames - 3)  # second differences; the ends take their neighbour's stencil
        for k, c in zip((lo, lo + 1, lo + 2), (1.0, -2.0, 1.0)):
            for axis in range(3):
                add(AXES * t + axis, AXES * k + axis, -mass * c / dt ** 2 / weight)
                for other in range(3):
                    if inertia[axis, other] != 0.0:
                        add(AXES * t + 3 + axis, AXES * k + 3 + other, -inertia[axis, other] * c / dt ** 2 / weight)
        rhs.extend(need[t])
    for s, (t, k) in enumerate(stance):
        lever = frame[t] @ (feet[t, k] - com[t])
        for e, edge in enumerate(edges):
            col = n_dev + len(edges) * s + e
            torque = np.cross(lever, edge) / leg_length
            for axis in range(3):
                add(AXES * t + axis, col, edge[axis] / weight)
                add(AXES * t + 3 + axis, col, torque[axis] / weight)
    row = AXES * frames
    dev_w = np.sqrt(DEVIATION_WEIGHT)  # deviations in leg lengths and rad
    units = np.r_[np.full(3, leg_length), np.ones(3)]
    for t in range(frames):
        for axis in range(AXES):
            add(row, AXES * t + axis, dev_w / units[axis])
            rhs.append(0.0)
            row += 1
    end_w = np.sqrt(END_WEIGHT)
    for axis in range(AXES):
        add(row, axis, end_w / units[axis])
        rhs.append(0.0)
        row += 1
        for first in (0, frames - 2):
            add(row, AXES * (first + 1) + axis, end_w / units[axis])
            add(row, AXES * first + axis, -end_w / units[axis])
            rhs.append(0.0)
            row += 1
    force_w = np.sqrt(FORCE_WEIGHT)
    for s in range(n_force):
        add(row, n_dev + s, force_w / weight)
        rhs.append(0.0)
        row += 1
    matrix = sparse.csr_matrix((vals, (rows, cols)), shape=(row, n_dev + n_force))
    # force unknowns in body weights keep the problem well scaled
    scale = sparse.diags(np.r_[np.ones(n_dev), np.full(n_force, weight)])
    x = scale @ _nonneg_least_squares((matrix @ scale).tocsc(), np.asarray(rhs), first_nonneg=n_dev)
    dev = x[:n_dev].reshape(frames, AXES)
    residual = (matrix @ x - np.asarray(rhs))[:n_dev].reshape(frames, AXES)
    world = np.swapaxes(frame, 1, 2)  # heading frame -> world
    return BodyCorrection(shift=np.einsum("fij,fj->fi", world, dev[:, :3]),
                          turn=dev[:, 3:], residual=np.linalg.norm(residual, axis=1))


__all__ = ["BodyCorrection", "FRICTION", "body_correction", "body_inertia"]
