"""Stair walks of robots with human-like legs (issue 46): up and down stairs, onto and off steps, one tread per step.

The human-like walk (:mod:`akd_core.motion.humanoid`) plans flat ground: heel strike, toe-off and near-straight knees.
On a terrain whose ground along the path is made of level treads with edges between them (stairs, steps, blocks),
:func:`generate_stair_walk` plans the walk from the treads instead (docs/terrain.md, "Bipeds on stairs"):

1. **Footholds, one tread per step.** Along the heading, every position of a sole (its contact points and the
   margin around them) is tested on the terrain: a foothold is *valid* where the whole sole, enlarged by
   ``EDGE_MARGIN`` on every side, lies on one level tread (so its contact points are at least 2 cm from any nosing,
   riser or border). The valid positions of each foot form intervals (a tread's, or a long stretch of floor). The feet
   step alternately; each step puts the swing foot on the farthest interval it may reach: at most ``MAX_LEAD``
   straight-legged heights ahead of the other foot and ``MAX_RISE`` above or below it, in the middle of a tread's
   interval (the sole centred on the tread) or, on a long floor, one flat-ground step ahead. On stairs whose run the
   leg can span that is one tread per step and two runs per stride (step over step); on longer treads the feet meet
   on each tread (one run per stride, step-to).
2. **Swings over the nosings: lift, forward, down.** A swing stays put while its foot lifts, moves forward with a
   minimum-jerk profile, and stops before it sets down. Its height is the lowest rise-hold-fall (minimum-jerk rise to
   a plateau, minimum-jerk fall) that keeps the sole ``SWING_CLEARANCE`` above the highest ground under it (its
   footprint plus a centimetre) wherever it moves forward, the margin fading over the first and last ``TAPER`` m of
   travel on its own treads; the lift and land shares (``SHARES``) are chosen for the lowest peak of the foot's speed,
   its vertical part weighted ``VERTICAL_WEIGHT`` times (the knee lifts the foot).
3. **Flat-footed contact.** The sole is level and flat through the stance (both heel and toe down): no heel strike or
   toe-off on a tread. Where the ankle pitch joint cannot keep it level (:func:`swing_pitch`, by the planar leg
   model), a swing foot pitches as little as it must (raised so its lowest point keeps its path) and a stance foot
   lifts its heel about its toe line (going down: the trailing foot's last frames).
4. **Pelvis height from the treads.** The highest root every leg reaches, in stance or in swing, with its knee bent
   at least ``STAIR_KNEE_MIN_DEG`` (:func:`stair_cap`: the body rises no faster than the trailing foot lifts, and
   comes down for a leg reaching for the tread below), smoothed below (:func:`akd_core.motion.humanoid.smooth_below`,
   ``HEIGHT_STIFFNESS``): the body rises with the leading leg going up and lowers on the stance leg going down, its
   knees as bent as that needs (a crouch, within the joint limits).
5. **Balance.** The ZMP reference runs along the stance sole in single support (the effort-aware range of
   :func:`akd_core.motion.humanoid.zmp_range`), from the trailing foot's front to the leading foot's rear in double
   support, on the plane of the tread under it (blended between the treads in double support); the horizontal CoM is
   the cart-table's with the planned CoM height above that plane (:func:`akd_core.motion.zmp.com_for_zmp`), then the
   multibody ZMP on the support plane is corrected as in the flat walk.
6. **Arms** hang and swing a little (``ARM_SWING`` peak to peak), opposite to the legs; the pelvis does not yaw.
7. **Cadence and speed.** The cadence is the flat walk's for the asked speed (Alexander's), lower when the asked speed
   needs fewer steps; the speed is what the footholds and that cadence give (two runs per cycle on stairs). A clip whose
   joints would pass ``max_velocity_ratio`` of their velocity limits is played slower (the same footholds), with a
   note naming the joint; a clip whose torques pass the effort limits gets a warning (the tracker clamps its
   feedforward).

:func:`stair_course` says whether a terrain is such a course (level treads with steps between them along the path);
elsewhere (slopes, rough ground) the gait library keeps its balanced ZMP walk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from akd_core.io.errors import MotionError
from akd_core.model.legs import rest_link_poses
from akd_core.model.robot import Robot
from akd_core.model.spatial import yaw_quat
from akd_core.motion.clip import Motion
from akd_core.motion.feasibility import centroidal_wrench, effort_ratios, joint_torques
from akd_core.motion.footholds import EDGE_MARGIN, SWING_CLEARANCE
from akd_core.motion.humanoid import (
    ARM_SWING_MIN,
    CONTACT_LABELS,
    EFFORT_RATIO,
    HEIGHT_MARGIN,
    STYLES,
    ZMP_CORRECTIONS_MAX,
    ZMP_INWARD,
    ZMP_ITERATIONS,
    ZMP_PREROLL,
    ZMP_PREVIEW,
    ZMP_TOLERANCE,
    HumanoidBody,
    SpeedLimit,
    WalkGait,
    WalkRequest,
    WalkResult,
    WalkSolver,
    _alexander_cadence,
    _com,
    _minjerk,
    _pitch_up,
    _smoothstep,
    leg_angles,
    lift_swing,
    resolve_walk,
    smooth_below,
    upper_body,
)
from akd_core.motion.zmp import com_for_zmp

GRAVITY = 9.81
STAIR_DUTY = 0.58  # stance fraction of a cycle (double support: 2 x 8 % of it; a longer swing keeps the knee slower)
STAIR_KNEE_MIN_DEG = 15.0  # the stance knee's straightest bend on stairs (a slight crouch: room to push and absorb)
MAX_LEAD = 0.5  # straight-legged heights: the farthest the feet stand apart along the path in double support
MAX_RISE = 0.3  # straight-legged heights: the most one foot stands above the other
START_S = 0.5  # s the robot stands before its first swing (the ZMP moves onto the first stance foot)
ZMP_SHIFT_S = 0.4  # s over which the ZMP moves from between the feet onto the first stance foot
ARM_SWING = ARM_SWING_MIN  # rad peak to peak: the arms swing a little on stairs
LEVEL_TOL = 2e-3  # m: a sole position whose ground (enlarged by EDGE_MARGIN) varies by less is on one tread
GRID = 0.005  # m, the foothold search grid along the path
FOOTPRINT_PAD = 0.01  # m added around the sole when measuring the ground under a swing
TAPER = 0.03  # m of travel over which a swing's clearance margin fades in and out on its own treads
SHARES = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4)  # candidate lift / land shares of a swing (vertical moves only)
SWING_SAMPLES = 201
VERTICAL_WEIGHT = 3.0  # a swing's shares are chosen for the lowest peak of |(x', VERTICAL_WEIGHT z')| (the knee lifts
# the foot: its vertical speed costs the leg more than its forward speed)
ANKLE_MARGIN = 0.05  # rad kept from the ankle pitch joint's limits by a swing foot's pitch
PITCH_SMOOTH = 3  # frames (half width) over which a swing foot's pitch is smoothed
MIN_STEP = 0.01  # m: a terrain with a height jump at least this big along the path is a stair course
ZMP_DT = 0.005  # s, grid of the cart-table stage
HEIGHT_STIFFNESS = 1e-4  # the pelvis height's smoothing (humanoid.smooth_below; the flat walk's 1e-5 lets the body
# spring up by more than g as the trailing leg leaves the lower tread)
VELOCITY_ATTEMPTS = 3


class NoFoothold(MotionError):
    """No foothold of a stair course fits the legs (the gait library then walks the balanced ZMP walk)."""


@dataclass
class StairSwing:
    """One swing of foot ``foot`` from ``start`` to ``end`` (s): sole centre ``a`` -> ``b`` (3,), its profile on a
    normalised time grid (progress ``m`` along a -> b and height ``z``)."""

    foot: int
    start: float
    end: float
    a: np.ndarray
    b: np.ndarray
    m: np.ndarray  # (S,)
    z: np.ndarray  # (S,)
    lift: float  # share of the swing before the foot moves forward
    land: float  # share after it stops


@dataclass
class StairPlan:
    """The footholds and the timing of a stair walk (module docstring, steps 1-2)."""

    frequency: float  # gait cycles per second
    duty: float
    start: np.ndarray  # (K, 3) sole centres at the start
    swings: list[StairSwing]  # in time order, alternating feet
    leads: np.ndarray  # (N,) m, how far each step's foot lands ahead of the other foot
    rises: np.ndarray  # (N,) m, how far above it

    def holds(self, k: int) -> list[tuple[float, float, np.ndarray]]:
        """Foot ``k``'s stances: (touch-down, lift-off, sole centre), -inf / +inf at the ends."""
        out, since, where = [], -np.inf, self.start[k]
        for swing in self.swings:
            if swing.foot != k:
                continue
            out.append((since, swing.start, where))
            since, where = swing.end, swing.b
        out.append((since, np.inf, where))
        return out


# ----------------------------------------------------------------------------- where the stair walk applies
def stair_course(terrain: Any, body: HumanoidBody, length: float = 6.0) -> bool:
    """Whether ``terrain`` along the path (+x from the start, under the feet, ``length`` m) is a stair course: level
    treads with at least one step of MIN_STEP or more between them, and level ground under the feet at the start."""
    if terrain is None or terrain.is_flat:
        return False
    x = np.arange(-0.2, length, GRID)
    for k in range(len(body.soles)):
        h = terrain.height(x, np.full(len(x), body.nominal[k, 1]))
        if not np.all(np.isfinite(h)):
            return False
        jumps = np.abs(np.diff(h))
        steps = jumps >= MIN_STEP
        if not steps.any():
            return False
        # between the steps the ground is level (no slope, no rough ground): a change per sample this small
        if np.any((jumps > 1e-4) & ~steps):
            return False
    return True


# ----------------------------------------------------------------------------- footholds
def _sole_box(body: HumanoidBody, k: int, pad: float) -> tuple[np.ndarray, np.ndarray]:
    """Sample offsets (x (P,), y (Q,)) over foot ``k``'s sole rectangle enlarged by ``pad`` m on every side."""
    sole = body.soles[k]
    hx, hy = float(sole.half_length) + pad, float(sole.half_width) + pad
    dx = np.linspace(-hx, hx, max(int(math.ceil(2 * hx / 0.01)) + 1, 3))
    dy = np.linspace(-hy, hy, max(int(math.ceil(2 * hy / 0.02)) + 1, 3))
    return dx, dy


def _ground(terrain: Any, x: np.ndarray, y: float, dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Terrain heights (N, P, Q) over a rectangle of offsets (dx, dy) around each (x_n, y)."""
    px = x[:, None, None] + dx[None, :, None]
    py = y + dy[None, None, :] + np.zeros_like(px)
    return terrain.height(px, py)


def _intervals(terrain: Any, body: HumanoidBody, k: int, x: np.ndarray) -> list[tuple[float, float, float]]:
    """The valid foothold intervals (x_lo, x_hi, z) of foot ``k``'s sole centre along ``x`` (module docstring, step
    1): the sole enlarged by EDGE_MARGIN on one level tread."""
    dx, dy = _sole_box(body, k, EDGE_MARGIN)
    h = _ground(terrain, x, float(body.nominal[k, 1]), dx, dy).reshape(len(x), -1)
    centre = terrain.height(x, np.full(len(x), body.nominal[k, 1]))
    valid = np.isfinite(centre) & (np.ptp(h, axis=1) < LEVEL_TOL)
    out = []
    i = 0
    while i < len(x):
        if not valid[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(x) and valid[j + 1] and abs(centre[j + 1] - centre[i]) < LEVEL_TOL:
            j += 1
        out.append((float(x[i]), float(x[j]), float(np.median(centre[i:j + 1]))))
        i = j + 1
    return out


def _search_grid(body: HumanoidBody, start: np.ndarray, count: int) -> np.ndarray:
    """The positions (along +x) the footholds of ``count`` steps from ``start`` (K,3) may take."""
    reach = float(start[:, 0].max()) + count * MAX_LEAD * float(body.straight_height) + 1.0
    return np.arange(float(start[:, 0].min()) - 0.5, reach, GRID)


def plan_footholds(terrain: Any, body: HumanoidBody, start: np.ndarray, lead: float, count: int,
                   first: int) -> list[tuple[int, np.ndarray]]:
    """``count`` alternating steps (foot, sole centre (3,)) from the sole centres ``start`` (K,3), foot ``first``
    first (module docstring, step 1); ``lead`` m: a flat-ground step's lead. Raises :class:`NoFoothold` where no
    foothold fits."""
    length = float(body.straight_height)
    max_lead, max_rise = MAX_LEAD * length, MAX_RISE * length
    lead = min(lead, max_lead)
    x = _search_grid(body, start, count)
    spans = [_intervals(terrain, body, k, x) for k in range(len(body.soles))]
    pos = [np.array(p, dtype=np.float64) for p in start]
    steps = []
    for j in range(count):
        k = first if j % 2 == 0 else 1 - first
        other = pos[1 - k]
        lo, hi = float(pos[k][0]), float(other[0]) + max_lead
        best = None
        for a, b, z in spans[k]:
            if abs(z - other[2]) > max_rise + 1e-9 or b < lo - 1e-9 or a > hi + 1e-9:
                continue
            tread = b - a < max_lead  # a tread: the sole centred on it; a long floor: one step ahead
            prefer = 0.5 * (a + b) if tread else float(other[0]) + lead
            candidate = float(np.clip(prefer, max(a, lo), min(b, hi)))
            if best is None or candidate > best[0] + 1e-9:
                best = (candidate, z)
        if best is None:
            raise NoFoothold(f"no foothold for foot {k} within {max_lead:.2f} m ahead of the other foot at "
                             f"x = {other[0]:.2f} m and {max_rise:.2f} m above or below it")
        pos[k] = np.array([best[0], float(body.nominal[k, 1]), best[1]])
        steps.append((k, pos[k].copy()))
    return steps


# ----------------------------------------------------------------------------- swings
def swing_profile(ground: Any, a: np.ndarray, b: np.ndarray, clearance: float, lift: float, duration: float,
                  ) -> tuple[np.ndarray, np.ndarray, float, float]:
    """A swing from sole centre ``a`` to ``b`` (3,) (module docstring, step 2): progress ``m`` (S,) and height ``z``
    (S,) on a normalised time grid, and the lift and land shares chosen. ``ground(x)``: the highest ground under the
    sole (padded) with its centre at x (array); ``clearance``: the margin over it; ``lift``: the least plateau above
    the higher end (a step on the flat)."""
    tau = np.linspace(0.0, 1.0, SWING_SAMPLES)
    length = float(b[0] - a[0])
    za, zb = float(a[2]), float(b[2])
    best = None
    for rise_share in SHARES:
        for land_share in SHARES:
            m = _minjerk((tau - rise_share) / (1.0 - rise_share - land_share))
            x = a[0] + length * m
            moving = (tau > rise_share) & (tau < 1.0 - land_share) if abs(length) > 1e-6 else np.zeros(len(tau), bool)
            travelled = np.abs(length) * np.minimum(m, 1.0 - m)
            taper = np.clip(travelled / TAPER, 0.0, 1.0)
            env = np.where(moving, ground(x) + clearance * taper, -np.inf)
            top = max(float(env.max()), max(za, zb) + lift)
            rising = np.maximum.accumulate(env)
            falling = np.maximum.accumulate(env[::-1])[::-1]
            t_up = 1.0
            for cand in np.linspace(1.0, 0.02, 50):
                up = za + (top - za) * _minjerk(tau / cand)
                if np.all(up >= rising - 1e-9):
                    t_up = cand
                    break
            t_down = 0.0
            for cand in np.linspace(0.0, 0.98, 50):
                down = top + (zb - top) * _minjerk((tau - cand) / (1.0 - cand))
                if np.all(down >= falling - 1e-9):
                    t_down = cand
                    break
            if t_up > t_down:  # no plateau: rise and fall meet halfway (each faster, still clear)
                t_up = t_down = 0.5 * (t_up + t_down)
            up = za + (top - za) * _minjerk(tau / max(t_up, 1e-6))
            down = top + (zb - top) * _minjerk((tau - t_down) / max(1.0 - t_down, 1e-6))
            z = np.where(tau <= t_up, up, np.where(tau >= t_down, down, top))
            speed = np.hypot(np.gradient(x, tau), VERTICAL_WEIGHT * np.gradient(z, tau)).max() / duration
            if best is None or speed < best[0]:
                best = (speed, m, z, rise_share, land_share)
    _, m, z, rise_share, land_share = best
    return m, z, rise_share, land_share


def plan_stairs(terrain: Any, body: HumanoidBody, frequency: float, duty: float, lead: float, duration: float,
                first: int = 1) -> StairPlan:
    """Footholds and swings of a stair walk at ``frequency`` Hz (module docstring, steps 1-2), covering ``duration``
    s plus the ZMP preview; the robot stands until START_S."""
    start = np.c_[body.nominal, np.zeros(len(body.nominal))]
    start[:, 2] = terrain.height(start[:, 0], start[:, 1])
    step = 0.5 / frequency
    count = int(math.ceil((duration + ZMP_PREVIEW + 1.0 - START_S) / step)) + 2
    steps = plan_footholds(terrain, body, start, lead, count, first)
    swing_time = (1.0 - duty) / frequency
    # the highest ground under each foot's sole (padded) with its centre at x, on the search grid
    x = _search_grid(body, start, count)
    footprint = [_ground(terrain, x, float(body.nominal[k, 1]), *_sole_box(body, k, FOOTPRINT_PAD)).reshape(
        len(x), -1).max(1) for k in range(len(body.soles))]
    pos = [p.copy() for p in start]
    swings, leads, rises = [], [], []
    for j, (k, target) in enumerate(steps):
        a = pos[k]

        def ground(xs: np.ndarray, under=footprint[k]) -> np.ndarray:
            return np.interp(xs, x, under)

        m, z, rise_share, land_share = swing_profile(ground, a, target, SWING_CLEARANCE, SWING_CLEARANCE, swing_time)
        begin = START_S + j * step
        swings.append(StairSwing(foot=k, start=begin, end=begin + swing_time, a=a.copy(), b=target.copy(), m=m, z=z,
                                 lift=rise_share, land=land_share))
        leads.append(float(target[0] - pos[1 - k][0]))
        rises.append(float(target[2] - pos[1 - k][2]))
        pos[k] = target
    return StairPlan(frequency=frequency, duty=duty, start=start, swings=swings, leads=np.array(leads),
                     rises=np.array(rises))


# ----------------------------------------------------------------------------- feet, ZMP and height over time
def stair_feet(body: HumanoidBody, plan: StairPlan, times: np.ndarray, knee_min: float) -> dict[str, np.ndarray]:
    """The feet at ``times`` in the layout of :func:`akd_core.motion.humanoid.foot_plan` (the keys the reach cap, the
    swing lift and the IK read): flat soles, level, heading +x."""
    steps, num = len(times), len(body.soles)
    centre = np.zeros((steps, num, 3))
    stance = np.zeros((steps, num), bool)
    tau = np.full((steps, num), np.nan)
    for k in range(num):
        for since, until, where in plan.holds(k):
            on = (times >= since) & (times < until)
            centre[on, k] = where
            stance[on, k] = True
        for swing in plan.swings:
            if swing.foot != k:
                continue
            on = (times >= swing.start) & (times < swing.end)
            if not on.any():
                continue
            u = (times[on] - swing.start) / (swing.end - swing.start)
            grid = np.linspace(0.0, 1.0, len(swing.m))
            m = np.interp(u, grid, swing.m)
            centre[on, k, :2] = swing.a[None, :2] + (swing.b - swing.a)[None, :2] * m[:, None]
            centre[on, k, 2] = np.interp(u, grid, swing.z)
            tau[on, k] = u
    ankle = centre + np.array([sole.ankle_sole for sole in body.soles])[None]
    rot = np.broadcast_to(np.array([sole.link_rot for sole in body.soles])[None], (steps, num, 3, 3)).copy()
    lowest = centre[..., 2].copy()
    return {"centre": centre, "ankle": ankle, "rot": rot, "stance": stance, "tau": tau, "lowest": lowest,
            "pitch": np.zeros((steps, num)),
            "push_off": np.zeros((steps, num)), "push_knee": knee_min, "min_knee": knee_min,
            "parts": np.repeat(stance[..., None], 2, axis=-1), "times": times}


def stair_zmp(body: HumanoidBody, plan: StairPlan, times: np.ndarray, rear: float,
              front: float) -> tuple[np.ndarray, np.ndarray]:
    """ZMP reference (T,2) and the height of its support plane (T,) (module docstring, step 5)."""
    half = np.array([sole.half_length for sole in body.soles])
    inward = np.array([-np.sign(body.nominal[k, 1]) * ZMP_INWARD * sole.half_width
                       for k, sole in enumerate(body.soles)])

    def point(k: int, where: np.ndarray, along: np.ndarray | float) -> np.ndarray:
        along = np.broadcast_to(np.asarray(along, dtype=np.float64), (len(times),))
        return np.stack([where[0] + along * half[k], np.full(len(times), where[1] + inward[k])], -1)

    zmp = np.zeros((len(times), 2))
    plane = np.zeros(len(times))
    swings = plan.swings
    first = swings[0]
    stand = 1 - first.foot
    # standing: between the feet, moving onto the first stance foot (its rear) before the first swing
    middle = 0.5 * (point(0, plan.start[0], 0.5 * (front - rear)) + point(1, plan.start[1], 0.5 * (front - rear)))
    before = times < first.start
    shift = _smoothstep((times - (first.start - ZMP_SHIFT_S)) / ZMP_SHIFT_S)[:, None]
    zmp[before] = ((1 - shift) * middle + shift * point(stand, plan.start[stand], -rear))[before]
    plane[before] = ((1 - shift[:, 0]) * plan.start[:, 2].mean() + shift[:, 0] * plan.start[stand, 2])[before]
    where = [p.copy() for p in plan.start]
    for j, swing in enumerate(swings):
        o = 1 - swing.foot
        nxt = swings[j + 1].start if j + 1 < len(swings) else np.inf
        single = (times >= swing.start) & (times < swing.end)
        u = np.clip((times - swing.start) / (swing.end - swing.start), 0.0, 1.0)
        zmp[single] = point(o, where[o], -rear + (rear + front) * u)[single]
        plane[single] = where[o][2]
        double = (times >= swing.end) & (times < nxt)
        p = _smoothstep((times - swing.end) / max(nxt - swing.end, 1e-6)) if np.isfinite(nxt) else \
            np.ones(len(times))
        lead = swing.b
        zmp[double] = ((1 - p)[:, None] * point(o, where[o], front) + p[:, None] * point(swing.foot, lead, -rear))[
            double]
        plane[double] = ((1 - p) * where[o][2] + p * lead[2])[double]
        where[swing.foot] = swing.b
    return zmp, plane


def ankle_signs(robot: Robot, body: HumanoidBody, legs: Any) -> np.ndarray:
    """Per leg (K,): +1 where a positive ankle pitch angle raises the toes, -1 where it lowers them (FK of the zero
    pose with the ankle turned a little)."""
    out = np.ones(len(body.soles))
    base = rest_link_poses(robot, np.zeros(robot.num_dofs))[1]
    for k, sole in enumerate(body.soles):
        q = np.zeros(robot.num_dofs)
        q[body.ankle[k]] = 0.1
        turned = rest_link_poses(robot, q)[1]
        li = robot.link_index(legs[k].foot_link)
        toe = sole.toe_link - sole.heel_link
        out[k] = 1.0 if (turned[li] @ toe)[2] > (base[li] @ toe)[2] else -1.0
    return out


def swing_pitch(body: HumanoidBody, feet: dict[str, np.ndarray], root_pos: np.ndarray, signs: np.ndarray,
                lower: np.ndarray, upper: np.ndarray, dt: float) -> dict[str, np.ndarray]:
    """``feet`` with each foot pitched as little as its ankle pitch joint allows from level (its range less
    ANKLE_MARGIN) for the planned pelvis ``root_pos`` (T,3): by the planar leg model, the foot's pitch is the shank's
    plus the ankle's (``signs`` (K,): :func:`ankle_signs`; ``lower`` / ``upper`` (K,) the ankles' limits). A level
    sole behind the body (the trailing foot about to lift off, a step down) or under a folded knee would need more
    ankle flexion than the joint has. A swing foot's centre rises by what the pitch lowers its heel or toe, so its
    lowest point keeps the planned path (the clearance); a stance foot only lifts its heel, rolling about its toe line
    (its heel leaves the ground: ``parts``), and only where its ankle needs it."""
    half = np.array([sole.half_length for sole in body.soles])
    ankle_sole = np.array([sole.ankle_sole for sole in body.soles])
    toe_sole = np.array([sole.toe_sole for sole in body.soles])
    a_lo = np.minimum(signs * lower, signs * upper) + ANKLE_MARGIN
    a_hi = np.maximum(signs * lower, signs * upper) - ANKLE_MARGIN
    stance = feet["stance"]
    hips = root_pos[:, None, :] + body.hip_root[None]
    flat_centre = feet["centre"]
    pitch = np.zeros(stance.shape)

    def place(theta: np.ndarray) -> np.ndarray:
        """Sole centres (T,K,3) for pitches ``theta``: raised (swing) or rolled about the toe (stance)."""
        rolled = flat_centre + toe_sole[None] - np.einsum("tkij,kj->tki", _pitch_up(theta), toe_sole)
        raised = flat_centre.copy()
        raised[..., 2] += half[None] * np.abs(np.sin(theta))
        return np.where(stance[..., None], rolled, raised)

    for _ in range(2):  # the ankle moves with the pitch
        ankle = place(pitch) + np.einsum("tkij,kj->tki", _pitch_up(pitch), ankle_sole)
        shank = leg_angles(body, hips, ankle, np.zeros(len(root_pos)))[..., 2]
        need = np.clip(0.0, shank + a_lo[None], shank + a_hi[None])
        pitch = np.where(stance, np.minimum(need, 0.0), need)
        if len(pitch) > 2 * PITCH_SMOOTH and np.any(pitch):
            kernel = np.hanning(2 * PITCH_SMOOTH + 3)[1:-1]
            kernel /= kernel.sum()
            pitch = np.stack([np.convolve(np.pad(pitch[:, k], PITCH_SMOOTH, mode="edge"), kernel, mode="valid")
                              for k in range(pitch.shape[1])], -1)
            pitch = np.where(stance, np.minimum(pitch, 0.0), pitch)
    if not np.any(pitch):
        return feet
    rot = _pitch_up(pitch)
    out = dict(feet)
    out["centre"] = place(pitch)
    out["ankle"] = out["centre"] + np.einsum("tkij,kj->tki", rot, ankle_sole)
    out["rot"] = rot @ np.array([sole.link_rot for sole in body.soles])[None]
    out["pitch"] = pitch
    parts = feet["parts"].copy()
    parts[..., 0] &= ~(stance & (pitch < -1e-3))  # the heel is up
    out["parts"] = parts
    return out


def stair_cap(body: HumanoidBody, feet: dict[str, np.ndarray], root_xy: np.ndarray) -> np.ndarray:
    """Highest root (T,) with every leg, in stance or in swing, reaching its foot with the knee bent at least the
    stair knee (``feet["min_knee"]``): the body rises no faster than the trailing foot lifts behind it."""
    reach = body.reach(float(feet["min_knee"]))  # (K,)
    hips = np.c_[root_xy, np.zeros(len(root_xy))][:, None, :] + body.hip_root[None]
    d = np.linalg.norm(hips[..., :2] - feet["ankle"][..., :2], axis=-1)  # (T,K)
    cap = feet["ankle"][..., 2] + np.sqrt(np.maximum(reach ** 2 - d ** 2, 0.0)) - body.hip_root[:, 2]
    return cap.min(1)


def _height(body: HumanoidBody, feet: dict[str, np.ndarray], root_xy: np.ndarray, dt: float) -> np.ndarray:
    """Root height (T,): the reach cap of :func:`stair_cap` less HEIGHT_MARGIN, smoothed below."""
    return smooth_below(stair_cap(body, feet, root_xy) - HEIGHT_MARGIN, dt, HEIGHT_STIFFNESS)


def _multibody_zmp(robot: Robot, link_pos: np.ndarray, link_rot: np.ndarray, dt: float,
                   plane: np.ndarray) -> np.ndarray:
    """ZMP (F,2) of the whole-body motion on the support plane at height ``plane`` (F,)."""
    com, force, moment, _ = centroidal_wrench(robot, link_pos, link_rot, dt)
    fz = np.maximum(force[:, 2], 1e-6)
    above = com[:, 2] - plane
    return np.stack([com[:, 0] - (above * force[:, 0] + moment[:, 1]) / fz,
                     com[:, 1] - (above * force[:, 1] - moment[:, 0]) / fz], -1)


# ----------------------------------------------------------------------------- the clip
def build_stair_clip(robot: Robot, body: HumanoidBody, solver: WalkSolver, plan: StairPlan, gait: WalkGait,
                     duration: float, fps: float, prompt: str) -> tuple[Motion, float, dict[str, Any]]:
    """The clip of a stair walk (module docstring, steps 3-6), its IK error (m) and figures."""
    knee_min = math.radians(STAIR_KNEE_MIN_DEG)
    frames = int(round(duration * fps)) + 1
    times = np.arange(frames) / fps
    frame_dt = 1.0 / fps
    sub = max(int(math.ceil(frame_dt / ZMP_DT - 1e-9)), 1)
    dt = frame_dt / sub
    fine = -ZMP_PREROLL + np.arange(int(round((duration + ZMP_PREROLL + ZMP_PREVIEW) / dt)) + 1) * dt
    feet_fine = stair_feet(body, plan, fine, knee_min)
    feet = stair_feet(body, plan, times, knee_min)
    zmp_fine, plane_fine = stair_zmp(body, plan, fine, gait.zmp_rear, gait.zmp_front)
    zmp_frames, plane_frames = stair_zmp(body, plan, times, gait.zmp_rear, gait.zmp_front)
    q = np.tile(solver.q_init, (frames, 1))
    upper_body(robot, body, gait, times, q)  # arms; the pelvis does not yaw (gait.pelvis_yaw = 0)
    yaw = np.zeros(frames)
    root_quat = yaw_quat(yaw)
    com_off = body.com_root
    # stage 1: the cart-table CoM over the support plane, with the planned height (twice: the height depends on where
    # the root goes)
    root_xy = zmp_fine - com_off[:2]
    com = zmp_fine
    for _ in range(2):
        z_fine = _height(body, feet_fine, root_xy, dt)
        c_z = z_fine + com_off[2]
        hdd = np.clip(np.gradient(np.gradient(c_z, dt), dt), -0.4 * GRAVITY, None)
        com = com_for_zmp(zmp_fine, dt, c_z - plane_fine, hdd)
        root_xy = com - com_off[:2]
    goal = np.stack([np.interp(times, fine, com[:, d]) for d in range(2)], -1)
    root_xy = np.stack([np.interp(times, fine, root_xy[:, d]) for d in range(2)], -1)
    root_pos = np.c_[root_xy, _height(body, feet, root_xy, frame_dt)]
    signs = ankle_signs(robot, body, solver.legs)
    lo, hi = np.asarray(robot.lower)[body.ankle], np.asarray(robot.upper)[body.ankle]

    def targets(root: np.ndarray) -> dict[str, np.ndarray]:
        return swing_pitch(body, lift_swing(body, feet, root, yaw), root, signs, lo, hi, frame_dt)

    q, error = solver.solve_legs(root_pos, root_quat, q, targets(root_pos), 150)
    weight = np.ones(frames)
    weight[:2] = weight[-2:] = 0.0
    best = (np.inf, root_pos.copy(), q.copy(), error)
    cop = zmp_frames
    stage = 0
    for stage in range(ZMP_CORRECTIONS_MAX + 1):
        if stage:
            pad = int(round(1.0 * fps))
            err = np.pad(zmp_frames - cop, ((pad, pad), (0, 0)))
            w = np.pad(weight, pad, constant_values=1.0)
            c_z = np.pad(root_pos[:, 2] + com_off[2], pad, mode="edge")
            h = c_z - np.pad(plane_frames, pad, mode="edge")
            hdd = np.clip(np.gradient(np.gradient(c_z, frame_dt), frame_dt), -0.4 * GRAVITY, None)
            goal = goal + com_for_zmp(err, frame_dt, h, hdd, weight=w)[pad:-pad]
        for _ in range(ZMP_ITERATIONS):
            link_pos, link_rot = solver.link_poses(root_pos, root_quat, q)
            root_pos[:, :2] += goal - _com(robot, link_pos, link_rot)[:, :2]
            root_pos[:, 2] = np.minimum(root_pos[:, 2], _height(body, feet, root_pos[:, :2], frame_dt))
            q, error = solver.solve_legs(root_pos, root_quat, q, targets(root_pos), 60)
        link_pos, link_rot = solver.link_poses(root_pos, root_quat, q)
        cop = _multibody_zmp(robot, link_pos, link_rot, frame_dt, plane_frames)
        zmp_error = float(np.linalg.norm(zmp_frames - cop, axis=-1)[weight > 0].mean())
        improved = zmp_error < 0.8 * best[0]
        if zmp_error < best[0]:
            best = (zmp_error, root_pos.copy(), q.copy(), error)
        if stage and (zmp_error < ZMP_TOLERANCE or not improved):
            break
    zmp_error, root_pos, q, error = best
    final = targets(root_pos)
    motion = Motion(fps=fps, joint_names=robot.joint_names, joint_pos=q, root_pos=root_pos, root_quat=root_quat,
                    foot_names=[leg.foot_link for leg in solver.legs], foot_offsets=solver.offsets,
                    foot_contacts=feet["stance"], prompt=prompt,
                    foot_contact_points=np.array([[s.heel_link, s.toe_link] for s in body.soles]),
                    foot_contact_parts=final["parts"], foot_contact_labels=list(CONTACT_LABELS))
    knee = np.abs(q[:, body.knee])
    under = np.max(np.where(feet["stance"], feet["centre"][..., 2], -np.inf), axis=1)
    figures = {"pelvis_height_frac": float(np.mean(root_pos[:, 2] - under) / body.straight_height),
               "zmp_error_m": zmp_error, "zmp_corrections": stage,
               "stance_knee_max_deg": float(np.degrees(np.where(feet["stance"], knee, 0.0).max())),
               "heel_up_frac": float((feet["stance"] & ~final["parts"][..., 0]).sum() / max(feet["stance"].sum(), 1)),
               "arm_swing_rad": gait.arm_swing, "heel_strike_rad": 0.0, "toe_off_rad": 0.0,
               "pelvis_yaw_rad": 0.0}
    return motion, error, figures


# ----------------------------------------------------------------------------- the walk
@dataclass
class StairResult:
    """A stair walk: the clip and its figures (:class:`akd_core.motion.humanoid.WalkResult`) and the plan."""

    walk: WalkResult
    plan: StairPlan
    speed: float  # m/s along the path in the steady part (two steps' leads per cycle)
    climb: float  # m/s upward (negative: down) in the steady part


def generate_stair_walk(robot: Robot, legs: Any, body: HumanoidBody, terrain: Any, speed: float, duration: float,
                        fps: float, prompt: str = "", max_velocity_ratio: float = 1.0, ramp_time: float = 0.5,
                        frequency: float | None = None, slow_down: bool = True) -> StairResult:
    """A stair walk of a robot with human-like legs at up to ``speed`` m/s (module docstring). Raises
    :class:`NoFoothold` where no foothold fits the legs (the caller falls back to another walk), MotionError
    (``slow_down`` False) where the joints' velocity limits would need a slower walk."""
    length = float(body.straight_height)
    solver = WalkSolver(robot, legs, body)
    limit = np.asarray(robot.velocity_limit, dtype=np.float64)
    finite = np.isfinite(limit) & (limit > 0)
    notes: list[str] = []
    cadence = float(frequency) if frequency else _alexander_cadence(max(speed, 1e-3), length)
    flat_lead = speed / (2 * cadence)
    plan = plan_stairs(terrain, body, cadence, STAIR_DUTY, flat_lead, duration)
    # the stair geometry sets the leads: the cadence is the flat walk's unless the asked speed needs fewer steps
    stairs = np.abs(plan.rises) > MIN_STEP
    lead = float(np.mean(plan.leads[stairs])) if stairs.any() else float(np.mean(plan.leads))
    wanted = speed / (2 * max(lead, 1e-3))
    if frequency is None and wanted < cadence:
        cadence = wanted
        plan = plan_stairs(terrain, body, cadence, STAIR_DUTY, flat_lead, duration)
    asked_cadence = cadence
    speed_limit: SpeedLimit | None = None
    for attempt in range(VELOCITY_ATTEMPTS + 1):
        gait = _arm_gait(robot, body, legs, plan, max_velocity_ratio, ramp_time, max(speed, 1e-3))
        motion, error, figures = build_stair_clip(robot, body, solver, plan, gait, duration, fps, prompt)
        vel = np.abs(motion.joint_vel().astype(np.float64)).max(0)
        ratios = np.where(finite, vel / np.where(finite, limit, 1.0), 0.0)
        ratio, joint = float(ratios.max()), int(ratios.argmax())
        if ratio <= max_velocity_ratio or attempt == VELOCITY_ATTEMPTS:
            break
        scale = 0.97 * max_velocity_ratio / ratio
        message = (f"stair walk at {plan.frequency:.2f} Hz needs joint '{robot.joint_names[joint]}' at {ratio:.2f} x "
                   f"its URDF velocity limit ({limit[joint]:.1f} rad/s; allowed {max_velocity_ratio:.2f} x)")
        if not slow_down:
            raise MotionError(f"{message}; ask for a slower walk or raise the limit")
        if speed_limit is None:
            speed_limit = SpeedLimit(joint=robot.joint_names[joint], ratio=ratio, kind="velocity")
        notes.append(f"{message}: steps slowed to {plan.frequency * scale:.2f} Hz")
        plan = plan_stairs(terrain, body, plan.frequency * scale, STAIR_DUTY, flat_lead, duration)
    torques = joint_torques(robot, motion)
    efforts = effort_ratios(robot, torques)
    effort = float(efforts.max(initial=0.0))
    if effort > EFFORT_RATIO:
        worst = int(efforts.argmax())
        notes.append(f"warning: stair walk needs joint '{robot.joint_names[worst]}' at {effort:.2f} x its URDF effort "
                     f"limit ({robot.effort_limit[worst]:.1f} N m; allowed {EFFORT_RATIO:.2f} x); the tracker clamps "
                     "its feedforward there")
    stairs = np.abs(plan.rises) > MIN_STEP
    lead = float(np.mean(plan.leads[stairs])) if stairs.any() else float(np.mean(plan.leads))
    rise = float(np.mean(plan.rises[stairs])) if stairs.any() else 0.0
    stride = 2 * lead
    walked = stride * plan.frequency
    pattern = "step over step" if stairs.any() and np.all(plan.leads[stairs] > 1e-3) else "step-to"
    why = (f"the joints' velocity limits ('{speed_limit.joint}')" if speed_limit is not None else
           "the asked speed" if frequency is None and asked_cadence < _alexander_cadence(max(speed, 1e-3), length)
           else f"the flat walk's cadence at {speed:.2f} m/s")
    heel = figures["heel_up_frac"]
    feet_note = "flat feet" + (f", the trailing heel lifting where its ankle needs it ({heel:.0%} of stance)"
                               if heel > 0 else "")
    notes.insert(0, f"stair walk ({pattern}, {feet_note}): {lead:.2f} m and {rise:+.2f} m per step, stride "
                    f"{stride:.2f} m at {plan.frequency:.2f} Hz -> {walked:.2f} m/s along the path "
                    f"({walked / max(speed, 1e-9):.0%} of the asked {speed:.2f} m/s), {rise * 2 * plan.frequency:+.2f} "
                    f"m/s up; limited by the treads (one per step) and {why}")
    figures.update(stair_lead_m=lead, stair_rise_m=rise, stair_cadence_hz=plan.frequency, stair_speed_mps=walked,
                   ik_error_m=error)
    walk_gait = replace(gait, speed=walked, notes=notes)
    # slower than asked: the joint whose velocity limit slowed the steps, else the treads (one per step at the flat
    # walk's cadence)
    limited = speed_limit if speed_limit is not None else (
        SpeedLimit(joint=f"treads ({lead:.2f} m per step)", ratio=float(speed / max(walked, 1e-9)), kind="terrain")
        if walked < speed - 1e-9 else None)
    result = WalkResult(motion=motion, gait=walk_gait, ik_error_m=error, joint_velocity_ratio=ratio, figures=figures,
                        limit=limited, effort_ratio=effort)
    return StairResult(walk=result, plan=plan, speed=walked, climb=rise * 2 * plan.frequency)


def _arm_gait(robot: Robot, body: HumanoidBody, legs: Any, plan: StairPlan, max_velocity_ratio: float,
              ramp_time: float, speed: float) -> WalkGait:
    """The walk parameters the arms, the ZMP range and the notes read: flat feet, no pelvis yaw, a small arm swing,
    leg phases that match the plan's swings (a foot lifts when its phase passes the duty factor)."""
    request = WalkRequest(speed=speed, ramp_time=ramp_time, duty_factor=plan.duty)
    gait = resolve_walk(robot, body, legs, request, plan.frequency, max_velocity_ratio, STYLES[-1])
    first = plan.swings[0]
    phases = np.zeros(len(body.soles))
    phases[first.foot] = (plan.duty - plan.frequency * first.start) % 1.0
    phases[1 - first.foot] = (phases[first.foot] + 0.5) % 1.0
    return replace(gait, phases=phases, pelvis_yaw=0.0, arm_swing=min(ARM_SWING, gait.arm_swing),
                   heel_strike=0.0, toe_off=0.0, duty_factor=plan.duty)


__all__ = ["NoFoothold", "StairPlan", "StairSwing", "StairResult", "stair_course", "plan_footholds", "plan_stairs",
           "swing_profile", "stair_feet", "stair_zmp", "stair_cap", "swing_pitch", "ankle_signs", "build_stair_clip",
           "generate_stair_walk", "STAIR_KNEE_MIN_DEG", "MAX_LEAD", "MAX_RISE", "STAIR_DUTY"]
