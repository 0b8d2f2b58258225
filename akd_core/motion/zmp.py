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

**Varying CoM height** (:func:`com_for_zmp`, the human-like biped walk of :mod:`akd_core.motion.humanoid`, whose CoM
rises and falls with the stride): the cart-table with a known height ``h(t)`` above the ground and vertical
acceleration ``h''(t)`` has the ZMP ``p = c - h c'' / (g + h'')`` (the vertical force is ``m (g + h'')``; the
pendulum's angular momentum about its CoM is neglected as before). For a known ``h(t)`` this is linear in the
horizontal CoM path ``c``, so the optimal tracking problem over the whole horizon is one sparse linear least-squares
problem (linear MPC solved once over the whole clip, Wieber 2006), in place of the recursive preview controller::

    min_c  sum_k w_k (p_k - p_ref_k)^2 + R sum_k (jerk_k)^2,   c''_k = (c_{k+1} - 2 c_k + c_{k-1}) / dt^2

with the same weights as the preview controller (``w = 1``, ``R = 1e-6``); with a constant height it gives the
preview controller's CoM over an infinite preview. The start of the horizon has no initial condition: like the
preview controller's pre-roll, the caller starts it early enough (stepping in place) that the clip sees a settled
sway.
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


def com_for_zmp(zmp_ref: np.ndarray, dt: float, height: np.ndarray | float, height_acc: np.ndarray | float = 0.0,
                jerk_weight: float = 1e-6, weight: np.ndarray | None = None) -> np.ndarray:
    """Horizontal CoM (T,D) whose cart-table ZMP ``c - h c'' / (g + h'')`` tracks ``zmp_ref`` (T,D) (module
    docstring, "Varying CoM height"). ``height`` (T,) or scalar m: the CoM height above the ground; ``height_acc``
    (T,) or scalar m/s^2; ``weight`` (T,) per-sample weight of the ZMP error (default 1). Each column of
    ``zmp_ref`` is an independent axis."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import spsolve

    ref = np.asarray(zmp_ref, dtype=np.float64)
    ref = ref[:, None] if ref.ndim == 1 else ref
    steps = len(ref)
    if steps < 5 or not dt > 0:
        raise ValueError(f"com_for_zmp: needs >= 5 samples and dt > 0, got {steps} and {dt}")
    h = np.broadcast_to(np.asarray(height, dtype=np.float64), (steps,))
    hdd = np.broadcast_to(np.asarray(height_acc, dtype=np.float64), (steps,))
    if np.any(GRAVITY + hdd <= 0.5 * GRAVITY):
        raise ValueError("com_for_zmp: the CoM height accelerates downward at more than g/2; no cart-table ZMP")
    w = np.ones(steps) if weight is None else np.asarray(weight, dtype=np.float64)
    k = np.arange(1, steps - 1)
    alpha = h[k] / (GRAVITY + hdd[k]) / dt ** 2
    # ZMP rows at the interior samples: p_k = c_k - alpha_k (c_{k+1} - 2 c_k + c_{k-1})
    rows = np.repeat(np.arange(len(k)), 3)
    cols = np.stack([k - 1, k, k + 1], -1).ravel()
    vals = np.stack([-alpha, 1 + 2 * alpha, -alpha], -1).ravel()
    zmp_rows = sp.csr_matrix((vals, (rows, cols)), shape=(len(k), steps))
    j = np.arange(steps - 3)
    jerk_rows = sp.csr_matrix((np.tile([-1.0, 3.0, -3.0, 1.0], len(j)) / dt ** 3,
                               (np.repeat(j, 4), (j[:, None] + np.arange(4)).ravel())), shape=(len(j), steps))
    normal = (zmp_rows.T @ sp.diags(w[k]) @ zmp_rows + jerk_weight * jerk_rows.T @ jerk_rows).tocsc()
    rhs = zmp_rows.T @ (w[k, None] * ref[k])
    com = np.stack([spsolve(normal, rhs[:, d]) for d in range(ref.shape[1])], -1)
    return com if np.ndim(zmp_ref) > 1 else com[:, 0]


def cart_table_zmp(com: np.ndarray, dt: float, height: np.ndarray | float,
                   height_acc: np.ndarray | float = 0.0) -> np.ndarray:
    """The cart-table ZMP (T,D) of a horizontal CoM path ``com`` (T,D) at CoM height ``height`` (T,) or scalar
    (central differences; the end samples repeat their neighbours' acceleration)."""
    c = np.asarray(com, dtype=np.float64)
    c2 = c[:, None] if c.ndim == 1 else c
    acc = np.zeros_like(c2)
    acc[1:-1] = (c2[2:] - 2 * c2[1:-1] + c2[:-2]) / dt ** 2
    acc[0], acc[-1] = acc[1], acc[-2]
    h = np.broadcast_to(np.asarray(height, dtype=np.float64), (len(c2),))
    hdd = np.broadcast_to(np.asarray(height_acc, dtype=np.float64), (len(c2),))
    p = c2 - (h / (GRAVITY + hdd))[:, None] * acc
    return p if c.ndim > 1 else p[:, 0]


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


__all__ = ["PreviewGains", "preview_gains", "preview_com", "com_for_zmp", "cart_table_zmp", "zmp_reference"]
