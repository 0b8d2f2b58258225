"""Zero-moment-point (ZMP) reference from a foot schedule and cart-table preview control of the CoM (Kajita 2003).

Used by :mod:`akd_core.motion.gait` to
make biped walks dynamically consistent: the body's centre of mass (CoM) follows a
linear inverted pendulum whose ZMP tracks a reference that lies on the stance foot.

**ZMP reference** (:func:`zmp_reference`), per sample of a foot schedule (contact points ``feet`` (T,K,3) and
intended stance ``contacts`` (T,K) on a time grid): with one foot down, that foot's contact point (x, y); with two
or more, a smoothstep transfer from the foot down longest (trailing) to the one down shortest (leading), by the
fraction of the double-support interval elapsed; with none (flight), the centre of all feet.

**Cart-table model** (per horizontal axis, sample time ``dt``): state ``x = [c, c', c'']``, input the jerk ``u``::

    x_{k+1} = A x_k + B u_k,   A = [[1, dt, dt^2/2], [0, 1, dt], [0, 0, 1]],   B = [dt^3/6, dt^2/2, dt]
    p_k = C x_k,               C = [1, 0, -z_c / g]                   (ZMP of a point mass at height z_c)

**Preview control** (Katayama 1985; Kajita et al. 2003): the servo system augmented with the ZMP error
``e_k = p_k - p_ref_k`` (state ``[e_k, dx_k]``, ``dx_k = x_k - x_{k-1}``, input ``du_k``) minimises
``sum Q_e e_k^2 + R du_k^2``; the discrete Riccati equation (``scipy.linalg.solve_discrete_are``) gives ``P`` and::

    u_k = -G_i sum_{i<=k} e_i - G_x x_k - sum_{j=1..N} G_p(j) p_ref_{k+j}

with ``K = (R + B~' P B~)^-1``, ``G_i = K B~' P I~``, ``G_x = K B~' P F~``, ``A_c = A~ - B~ K B~' P A~``,
``G_p(1) = -G_i``, ``X_1 = -A_c' P I~``, ``G_p(j) = K B~' X_{j-1}``, ``X_j = A_c' X_{j-1}``
(``A~ = [[1, C A], [0, A]]``, ``B~ = [C B; B]``, ``I~ = [1; 0]``, ``F~ = [C A; A]``). The reference beyond the
last sample is padded with its last value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GRAVITY = 9.81


@dataclass(frozen=True)
class PreviewGains:
    """Gains of the cart-table preview controller for one sample time, CoM height and horizon."""

    a: np.ndarray  # (3,3)
    b: np.ndarray  # (3,)
    c: np.ndarray  # (3,)
    gi: float  # integral gain
    gx: np.ndarray  # (3,) state feedback
    gp: np.ndarray  # (N,) preview gains on p_ref[k+1 .. k+N]


def preview_gains(dt: float, z_c: float, preview_time: float = 1.6, q_e: float = 1.0,
                  r: float = 1e-6) -> PreviewGains:
    """Preview-control gains for sample time ``dt`` (s), CoM height ``z_c`` (m) and a horizon of ``preview_time`` s."""
    from scipy.linalg import solve_discrete_are

    if not (dt > 0 and z_c > 0 and preview_time > 0):
        raise ValueError(f"preview_gains: dt, z_c and preview_time must be positive, got {dt}, {z_c}, {preview_time}")
    a = np.array([[1.0, dt, dt * dt / 2], [0.0, 1.0, dt], [0.0, 0.0, 1.0]])
    b = np.array([dt ** 3 / 6, dt * dt / 2, dt])
    c = np.array([1.0, 0.0, -z_c / GRAVITY])
    at = np.zeros((4, 4))
    at[0, 0], at[0, 1:], at[1:, 1:] = 1.0, c @ a, a
    bt = np.r_[c @ b, b][:, None]  # (4,1)
    it = np.array([[1.0], [0.0], [0.0], [0.0]])
    ft = np.r_[(c @ a)[None], a]  # (4,3)
    q = np.diag([q_e, 0.0, 0.0, 0.0])
    p = solve_discrete_are(at, bt, q, np.array([[r]]))
    k = 1.0 / (r + (bt.T @ p @ bt).item())
    gi = k * (bt.T @ p @ it).item()
    gx = k * (bt.T @ p @ ft)[0]
    ac = at - k * bt @ bt.T @ p @ at
    steps = max(int(round(preview_time / dt)), 1)
    gp = np.zeros(steps)
    gp[0] = -gi
    x = -ac.T @ p @ it
    for j in range(1, steps):
        gp[j] = k * (bt.T @ x).item()
        x = ac.T @ x
    return PreviewGains(a, b, c, gi, gx, gp)


def preview_com(zmp_ref: np.ndarray, dt: float, z_c: float, preview_time: float = 1.6,
                com0: np.ndarray | None = None, gains: PreviewGains | None = None) -> tuple[np.ndarray, np.ndarray]:
    """CoM (T,D) and its model ZMP (T,D) that track ``zmp_ref`` (T,D) (each column an independent axis).

    The pendulum starts at rest over ``com0`` (D,) (default: the first reference sample). Samples beyond the end
    of the reference (for the preview) repeat its last value.
    """
    ref = np.asarray(zmp_ref, dtype=np.float64)
    ref = ref[:, None] if ref.ndim == 1 else ref
    g = preview_gains(dt, z_c, preview_time) if gains is None else gains
    steps, n = len(ref), len(g.gp)
    padded = np.concatenate([ref, np.repeat(ref[-1:], n + 1, axis=0)])
    x = np.zeros((3, ref.shape[1]))
    x[0] = ref[0] if com0 is None else np.asarray(com0, dtype=np.float64)
    err_sum = np.zeros(ref.shape[1])
    com, zmp = np.zeros_like(ref), np.zeros_like(ref)
    for k in range(steps):
        p = g.c @ x
        com[k], zmp[k] = x[0], p
        err_sum += p - ref[k]
        u = -g.gi * err_sum - g.gx @ x - g.gp @ padded[k + 1:k + 1 + n]
        x = g.a @ x + g.b[:, None] * u[None]
    return (com, zmp) if np.ndim(zmp_ref) > 1 else (com[:, 0], zmp[:, 0])


def zmp_reference(feet: np.ndarray, contacts: np.ndarray) -> np.ndarray:
    """ZMP reference (T,2) from contact points ``feet`` (T,K,3) and intended stance ``contacts`` (T,K) on a uniform
    time grid (module docstring): the stance foot in single support, a smoothstep transfer from the trailing to
    the leading foot in double support, the feet's centre in flight."""
    feet = np.asarray(feet, dtype=np.float64)[..., :2]
    contacts = np.asarray(contacts, dtype=bool)
    steps, num = contacts.shape
    since = _run_position(contacts)  # samples since touch-down (0 at the first stance sample)
    until = _run_position(contacts[::-1])[::-1]  # samples until lift-off (0 at the last stance sample)
    ref = feet.mean(axis=1)  # flight / no information: the centre of the feet
    down = contacts.sum(1)
    single = down == 1
    ref[single] = feet[single, contacts[single].argmax(1)]
    for t in np.flatnonzero(down >= 2):
        on = np.flatnonzero(contacts[t])
        lead = on[np.argmin(since[t, on])]
        trail = on[np.argmax(since[t, on])]
        if lead == trail:
            ref[t] = feet[t, on].mean(0)
            continue
        # fraction of the double support elapsed: since the leading foot landed / until the trailing one lifts
        w = (since[t, lead] + 0.5) / (since[t, lead] + until[t, trail] + 1.0)
        s = w * w * (3 - 2 * w)
        ref[t] = (1 - s) * feet[t, trail] + s * feet[t, lead]
    return ref


def _run_position(flags: np.ndarray) -> np.ndarray:
    """For a boolean (T,K) array: how many samples each True has been True before it in its run (0, 1, ...); a run
    already on at the first sample counts from a large number (it began long ago)."""
    out = np.zeros(flags.shape, dtype=np.float64)
    count = np.full(flags.shape[1], 1e6)
    for t in range(len(flags)):
        count = np.where(flags[t], count + 1, -1.0)
        out[t] = np.maximum(count, 0.0)
    out[~flags] = 0.0
    return out


__all__ = ["PreviewGains", "preview_gains", "preview_com", "zmp_reference"]
