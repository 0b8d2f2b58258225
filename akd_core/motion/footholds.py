"""A gait plan made for flat ground, placed on a terrain (:class:`akd_core.model.terrain.Terrain`).

The gait library and motion programs plan the body path, the footfalls and the swings on z = 0
(:func:`akd_core.motion.gait.foot_targets`, :class:`akd_core.motion.program.Schedule`). :func:`fit_to_terrain` takes
such a plan and returns it on the terrain:

1. **Footholds on the surface, off the edges.** Each stance keeps its foot where the flat plan put it, moved along
   the body's heading (forward first, then back, up to ``EDGE_SEARCH`` leg lengths) to the nearest point at least
   ``EDGE_MARGIN`` m plus the foot's contact radius from any stair nosing, step or border (``Terrain.edge_distance``);
   its height is the surface's there. A foothold also keeps the stance leg's shin ``SHIN_CLEARANCE`` m above the
   ground (``shins``; a foot just past a stair nose going down holds its shin over it), moved the same way where it
   does not. The swings into and out of a moved foothold follow it.
2. **Swings clear the ground.** A swing rises from one foothold's height to the next -- early when it steps up,
   late when it steps down -- with the plan's own lift on top; where that passes less than ``SWING_CLEARANCE`` m
   (plus the contact radius) over the highest ground within a foot's width of its path, the lift is raised until it
   does.
3. **The body follows the ground.** The root rises by the mean surface height under the legs' nominal positions,
   smoothed over ``BODY_SMOOTH_S``, and a robot with front and hind legs pitches with the ground between them (a
   biped's torso stays upright). Where its legs do not reach the footholds so, the gait library refits the body
   (:data:`akd_core.motion.gait.BODY_FITS`): a share of the pitch (``pitch_share``), a higher or lower body
   (``lower``), the hips over the feet along the pitched body's own vertical (``lean``).

Stride and cadence are the gait's: a foothold that would land on a nosing moves instead (stairs whose run is
shorter than the foot's margins on both sides leave it as near the middle of a tread as they allow).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from akd_core.model.legs import Leg

EDGE_MARGIN = 0.02  # m, from a foot's contact point (plus its radius) to any edge
EDGE_SEARCH = 0.6  # leg lengths, the farthest a foothold moves along the heading to get off an edge
SWING_CLEARANCE = 0.03  # m, between a swinging foot's contact point (less its radius) and the ground under its path
BODY_SMOOTH_S = 0.3  # s, the window the body's rise and pitch are smoothed over
RISE_SHARE = 0.5  # of a swing: a step up rises over its first RISE_SHARE, a step down descends over its last
STEP_SHARE = 0.3  # of a swing: a step up starts moving forward after it, a step down ends its forward move before it
LOW_FOOT_SHARE = 0.5  # a foot below the line the body follows lowers it by this share of the gap
PITCH_SHARE = 1.0  # of the ground's slope under the feet that the body pitches by
STEP_MIN = 0.01  # m, a height change between footholds that counts as a step
SHIN_CLEARANCE = 0.03  # m, between the axis of a stance leg's shin (above its lowest quarter) and the ground


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) index pairs (end exclusive) of the True runs of ``flags``."""
    edges = np.diff(np.r_[0, flags.astype(np.int8), 0])
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))


def _smooth(values: np.ndarray, dt: float, window_s: float) -> np.ndarray:
    """A moving average over ``window_s`` (edges padded with the end values)."""
    n = max(int(round(window_s / max(dt, 1e-9))), 1)
    if n <= 1 or len(values) < 2:
        return values
    kernel = np.ones(n) / n
    pad = np.pad(values, (n // 2, n - 1 - n // 2), mode="edge")
    return np.convolve(pad, kernel, mode="valid")


def _off_edges(terrain: Any, xy: np.ndarray, heading: np.ndarray, margin: float, reach: float,
               clear: Any = None) -> np.ndarray:
    """``xy`` (2,) moved along ``heading`` (2,) to the nearest point at least ``margin`` from every edge (within
    ``reach`` m; the farthest point from the edges found when none is that far). ``clear``: a further test of a
    foothold (its shin off the stair noses), met where a point within reach meets both."""
    ok = clear or (lambda _: True)
    here = terrain.edge_distance(xy[0], xy[1]) >= margin
    if here and ok(xy):
        return xy
    steps = np.linspace(0.0, reach, max(int(reach / 0.005), 2))[1:]
    offsets = np.stack([steps, -steps], -1).ravel()  # forward first, then back, nearest first
    candidates = xy[None] + offsets[:, None] * heading[None]
    distance = terrain.edge_distance(candidates[:, 0], candidates[:, 1])
    good = np.flatnonzero(distance >= margin)
    if not len(good):
        return candidates[int(np.argmax(distance))]
    for g in good:
        if ok(candidates[g]):
            return candidates[g]
    return xy if here else candidates[good[0]]  # none meets ``clear`` within reach: the nearest off the edges


def _shin_clear(terrain: Any, xy: np.ndarray, shin: np.ndarray, heading: np.ndarray, ahead: Sequence[float],
                height: float) -> bool:
    """Whether a foot at ``xy`` (2,) on ``terrain`` keeps its shin SHIN_CLEARANCE above the ground through its stance.
    ``shin`` (3,): contact point to knee in the stance pose (heading frame, x forward; the legs keep near world
    vertical on a terrain, whatever the body's pitch); the leg leans as its foot is ``ahead`` m (each of the stance's
    ends) ahead of its nominal place under a body ``height`` m up: the shin turned about the foot by atan(ahead /
    height)."""
    z = float(terrain.height(xy[0], xy[1]))
    side = np.array([-heading[1], heading[0]])
    fraction = np.linspace(0.25, 1.0, 7)
    for d in ahead:
        lean = np.arctan2(d, height)
        c, s = np.cos(lean), np.sin(lean)
        along, up = c * shin[0] - s * shin[2], s * shin[0] + c * shin[2]
        points = xy[None] + fraction[:, None] * (along * heading + shin[1] * side)[None]
        if np.any(z + fraction * up - terrain.height(points[:, 0], points[:, 1]) < SHIN_CLEARANCE):
            return False
    return True


def fit_to_terrain(traj: dict[str, np.ndarray], times: np.ndarray, terrain: Any, legs: Sequence[Leg],
                   feet_body: np.ndarray, leg_length: float, pitch_body: bool = True,
                   pitch_share: float = PITCH_SHARE, lower: float = 0.0, lean: float = 0.0,
                   shins: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """``traj`` (:func:`akd_core.motion.gait.foot_targets`' layout at ``times``) placed on ``terrain`` (module
    docstring). ``feet_body`` (K,3): the legs' nominal contact points relative to the root; ``pitch_body``: the body
    pitches with the ground (robots with front and hind legs), by ``pitch_share`` of its slope; ``lower`` m: the body
    rides this much lower on its legs (both chosen by :func:`akd_core.motion.gait` where the legs do not reach the
    footholds otherwise); ``shins`` (K,3): each foot's contact point to its knee in the stance (x forward): a foothold
    also keeps the shin SHIN_CLEARANCE m off the ground (a stair nose) where one within reach does. Returns a new
    dict with the same keys plus ``pitch`` (F,) rad about the heading frame's y
    axis (+ noses down). A flat terrain returns the plan unchanged."""
    if terrain is None or terrain.is_flat:
        return traj
    out = {k: np.array(v, copy=True) for k, v in traj.items()}
    feet, contacts, yaw = out["feet"], out["contacts"], out["yaw"]
    frames, num = contacts.shape
    heading = np.stack([np.cos(yaw), np.sin(yaw)], -1)  # (F, 2)
    lift = feet[..., 2].copy()  # the flat plan's swing lift (0 in stance)
    level = np.zeros((frames, num))  # the ground each foot stands on, or moves between in a swing
    normals = np.zeros((frames, num, 3))  # the surface normal under each foot (blended over a swing)
    normals[..., 2] = 1.0
    for k, leg in enumerate(legs):
        radius = float(getattr(leg, "contact_radius", 0.0) or 0.0)
        margin = EDGE_MARGIN + radius
        runs = _runs(contacts[:, k])
        holds = []
        for a, b in runs:
            xy = feet[a, k, :2]
            clear = None
            if shins is not None and np.any(shins[k]):
                ends = (a, b - 1)
                base = [out["root_pos"][i, :2] for i in ends]
                clear = (lambda p, k=k, ends=ends, base=base: _shin_clear(
                    terrain, p, shins[k], heading[ends[0]],
                    [float((p - r) @ heading[i]) - feet_body[k, 0] for i, r in zip(ends, base)],
                    float(-feet_body[k, 2])))
            moved = _off_edges(terrain, xy, heading[a], margin, EDGE_SEARCH * leg_length, clear)
            holds.append((a, b, xy.copy(), moved, float(terrain.height(moved[0], moved[1])),
                          terrain.normal(moved[0], moved[1])))
        # stance: the moved foothold at its surface height
        for a, b, _, moved, z, normal in holds:
            feet[a:b, k, :2] = moved
            feet[a:b, k, 2] = z
            level[a:b, k] = z
            normals[a:b, k] = normal
        # swings: between consecutive stances (and before the first / after the last one, unchanged ends)
        bounds = [(None, holds[0])] if holds and holds[0][0] > 0 else []
        bounds += list(zip(holds[:-1], holds[1:]))
        if holds and holds[-1][1] < frames:
            bounds.append((holds[-1], None))
        for before, after in bounds:
            lo = 0 if before is None else before[1]
            hi = frames if after is None else after[0]
            if hi <= lo:
                continue
            idx = np.arange(lo, hi)
            span = max(hi - lo, 1)
            tau = (idx - lo + 0.5) / span if before is not None and after is not None else np.full(len(idx), 0.5)
            old_a = before[2] if before is not None else feet[lo, k, :2]
            old_b = after[2] if after is not None else feet[hi - 1, k, :2]
            new_a = before[3] if before is not None else old_a
            new_b = after[3] if after is not None else old_b
            ab = old_b - old_a
            length2 = float(ab @ ab)
            progress = np.clip(((feet[idx, k, :2] - old_a) @ ab) / length2, 0.0, 1.0) if length2 > 1e-10 else tau
            z_a = before[4] if before is not None else float(terrain.height(*feet[lo, k, :2]))
            z_b = after[4] if after is not None else float(terrain.height(*feet[hi - 1, k, :2]))
            step = z_b - z_a
            # a step up lifts the foot before it moves over the nosing, a step down moves it over before it descends
            # (a step: the ground between the footholds leaves the straight line between them; not a smooth slope)
            warp = tau.copy()
            if before is not None and after is not None and abs(step) > STEP_MIN:
                path = new_a[None] + (new_b - new_a)[None] * np.linspace(0.0, 1.0, 17)[:, None]
                off_line = terrain.height(path[:, 0], path[:, 1]) - (z_a + step * np.linspace(0.0, 1.0, 17))
                if step > 0 and off_line.max() > STEP_MIN:
                    warp = np.clip((tau - STEP_SHARE) / (1 - STEP_SHARE), 0.0, 1.0)
                elif step < 0 and off_line.min() < -STEP_MIN:
                    warp = np.clip(tau / (1 - STEP_SHARE), 0.0, 1.0)
            s = np.interp(warp, tau, progress) if len(idx) > 1 else progress
            feet[idx, k, :2] = new_a + (new_b - new_a) * s[:, None] if length2 > 1e-10 else \
                feet[idx, k, :2] + (1 - s)[:, None] * (new_a - old_a) + s[:, None] * (new_b - old_b)
            u = np.clip(tau / RISE_SHARE, 0.0, 1.0) if step >= 0 else \
                np.clip((tau - (1 - RISE_SHARE)) / RISE_SHARE, 0.0, 1.0)
            level[idx, k] = z_a + step * s
            base = np.maximum(z_a + step * u * u * (3 - 2 * u), level[idx, k])  # never below the line between them
            n_a = before[5] if before is not None else np.array([0.0, 0.0, 1.0])
            n_b = after[5] if after is not None else n_a
            blend = n_a[None] + (n_b - n_a)[None] * s[:, None]
            normals[idx, k] = blend / np.linalg.norm(blend, axis=-1, keepdims=True)
            bump = np.clip(0.5 * (1 - np.cos(2 * np.pi * tau)), 0.0, 1.0)
            z = base + lift[idx, k]
            # the ground under the path, a foot's width around it
            ground = np.full(len(idx), -np.inf)
            width = max(radius, 0.02)
            for dx, dy in ((0, 0), (width, 0), (-width, 0), (0, width), (0, -width)):
                ground = np.maximum(ground, terrain.height(feet[idx, k, 0] + dx, feet[idx, k, 1] + dy))
            # the clearance grows with the swing's own lift profile (full at mid-swing)
            need = ground + SWING_CLEARANCE * bump - z
            middle = bump >= 0.25
            if middle.any() and need[middle].max() > 0:  # raise the lift until the swing clears
                z = z + float((need[middle] / bump[middle]).max()) * bump
            feet[idx, k, 2] = z
    # the body: up by the ground under the legs, pitched with it
    dt = float(times[1] - times[0]) if len(times) > 1 else 0.02
    # the body rides on its feet: the line (along the heading) that fits the heights of the ground its feet stand on
    # (between two footholds in a swing) against their fore-aft positions sets its rise and, for a robot with front
    # and hind legs, its pitch; a foot below that line (a diagonal pair on two treads) lowers it by LOW_FOOT_SHARE of
    # the gap, so the leg reaching farthest down keeps its reach
    x = feet_body[:, 0] - feet_body[:, 0].mean()
    spread = float(x @ x)
    slope = (level - level.mean(axis=1, keepdims=True)) @ x / spread if spread > 1e-9 else np.zeros(frames)
    if not (pitch_body and spread > 1e-9):
        slope = np.zeros(frames)
    line = level.mean(axis=1)[:, None] + slope[:, None] * x[None]
    below = np.maximum(line - level, 0.0).max(axis=1)
    centre = level.mean(axis=1) - slope * feet_body[:, 0].mean()  # the line at the root (x = 0 of the body)
    rise = _smooth(centre - LOW_FOOT_SHARE * below, dt, BODY_SMOOTH_S)
    out["root_pos"][:, 2] += rise - lower
    # the nose rises with the ground (negative about y), by PITCH_SHARE of its slope: the legs stay near vertical, so
    # every degree of body pitch is a degree off the hips' range
    pitch = -pitch_share * np.arctan(_smooth(slope, dt, BODY_SMOOTH_S))
    if lean:
        # the body moves back (nose up) or forward (nose down) along the heading by ``lean`` of the distance that puts
        # the feet under the hips along the pitched body's own vertical: the legs keep their flat-ground angles
        height = float(-np.mean(feet_body[:, 2]))
        out["root_pos"][:, :2] += lean * height * np.sin(pitch)[:, None] * heading
    out["pitch"] = pitch
    out["feet"] = feet
    out["foot_normal"] = normals
    return out


def tilt_to(normals: np.ndarray) -> np.ndarray:
    """Rotations (..., 3, 3) that turn +z onto the unit ``normals`` (..., 3) by the shortest arc (a foot's sole laid
    on a sloped surface)."""
    n = np.asarray(normals, dtype=np.float64)
    axis = np.stack([-n[..., 1], n[..., 0], np.zeros(n.shape[:-1])], -1)  # z x n
    sin = np.linalg.norm(axis, axis=-1)
    cos = np.clip(n[..., 2], -1.0, 1.0)
    unit = axis / np.maximum(sin, 1e-12)[..., None]
    kx, ky, kz = unit[..., 0], unit[..., 1], unit[..., 2]
    zero = np.zeros_like(kx)
    skew = np.stack([np.stack([zero, -kz, ky], -1), np.stack([kz, zero, -kx], -1), np.stack([-ky, kx, zero], -1)], -2)
    eye = np.broadcast_to(np.eye(3), skew.shape)
    return eye + sin[..., None, None] * skew + (1 - cos)[..., None, None] * (skew @ skew)


def ground_clearance(terrain: Any, points: np.ndarray) -> np.ndarray:
    """Height (...) of ``points`` (..., 3) above the terrain surface under them (negative: below it)."""
    return points[..., 2] - terrain.height(points[..., 0], points[..., 1])


def body_quat(yaw: np.ndarray, pitch: np.ndarray | None) -> np.ndarray:
    """Root orientation (F,4) xyzw: yaw about z, then ``pitch`` about the heading frame's y axis."""
    from akd_core.model.spatial import quat_multiply, yaw_quat

    q = yaw_quat(yaw)
    if pitch is None or not np.any(pitch):
        return q
    half = 0.5 * np.asarray(pitch, dtype=np.float64)
    pitch_q = np.stack([np.zeros_like(half), np.sin(half), np.zeros_like(half), np.cos(half)], -1)
    return quat_multiply(q, pitch_q)


__all__ = ["EDGE_MARGIN", "SWING_CLEARANCE", "PITCH_SHARE", "fit_to_terrain", "ground_clearance", "body_quat",
           "tilt_to"]
