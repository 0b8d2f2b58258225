"""Whether a tracked clip is good enough to be used: the verdict `akd track` and `akd run` act on.

A tracked clip fails when the simulated robot fell, when it ended more than a body length from where the reference
ends (it could not keep up, or wandered off, even if it stayed upright), or when its mean link position error is
above the limit of its motion class:

======================  =========  ==========================================================================
class                   limit (m)  which clips
======================  =========  ==========================================================================
``steady``              0.03       three or more feet, no flight phase: walk, crawl, trot, pace, tripod, wave
``dynamic``             0.05       three or more feet with flight phases (all feet off the ground): bound,
                                   gallop, pronk
``biped``               0.08       two feet (or fewer), every gait
======================  =========  ==========================================================================

On a terrain (anything but flat ground: stairs, slopes, steps, rough ground) ``steady`` clips get 0.04 m: the feet
land on nosings and slopes whose contacts the planner cannot place to the millimetre (issue 46).

The class is read from the reference itself (its feet and its intended stance), not from the prompt, so a clip
from SDS or from a user's own file is judged the same way as one from the gait library. ``--link-err-limit M``
replaces the class limit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from akd_core.io.errors import ConfigError
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.robot import Robot
from akd_core.model.terrain import Terrain
from akd_core.motion.clip import Motion
from akd_core.motion.metrics import above_ground
from akd_core.physics.metrics import feet_of

# A clip counts as dynamic when all its feet are off the ground in at least this fraction of its frames (a bound's
# flight is 10-30 % of a stride; a trot's four-feet-lifted instants, from rounding the duty factor, stay below 1 %)
FLIGHT_FRACTION = 0.02
FOOT_DOWN_M = 0.01  # a simulated foot counts as down within this height of where the feet stood at the start


@dataclass(frozen=True)
class TrackingLimits:
    """The largest mean link position error (m) a tracked clip of each motion class may have and still pass."""

    steady_m: float = 0.03
    dynamic_m: float = 0.05
    biped_m: float = 0.08
    terrain_steady_m: float = 0.04  # steady clips on a terrain that is not flat

    def limit(self, motion_class: str, terrain: Terrain | None = None) -> float:
        if motion_class == "steady" and terrain is not None and not terrain.is_flat:
            return self.terrain_steady_m
        return {"steady": self.steady_m, "dynamic": self.dynamic_m, "biped": self.biped_m}[motion_class]


@dataclass
class Verdict:
    """``passed``, and if not, ``reasons`` (one line each, with the figure and the limit)."""

    passed: bool
    motion_class: str
    link_err_limit_m: float
    body_length_m: float
    reasons: list[str] = field(default_factory=list)

    def to_metrics(self) -> dict[str, Any]:
        """The manifest's figures (``stages.track.metrics``): ``tracking_passed``, ``failure_reasons``, ..."""
        out = asdict(self)
        return {"tracking_passed": out.pop("passed"), "failure_reasons": out.pop("reasons"), **out}

    def summary(self) -> str:
        return "passed" if self.passed else "FAILED: " + "; ".join(self.reasons)


def motion_class(robot: Robot, reference: Motion) -> str:
    """"biped", "dynamic" or "steady" (module docstring) from the reference's feet and intended stance."""
    feet, _, contacts = feet_of(robot, reference)
    if 0 < len(feet) <= 2:
        return "biped"
    if contacts is not None and len(contacts):
        airborne = ~np.asarray(contacts, dtype=bool).any(axis=1)
        if airborne.mean() >= FLIGHT_FRACTION:
            return "dynamic"
    return "steady"


def body_length_m(robot: Robot, reference: Motion) -> float:
    """The robot's size on the ground at the clip's first frame: the largest horizontal distance between two of its
    links, or its root height if that is larger (a humanoid is narrow, but a root 0.7 m behind is lost)."""
    fk = ForwardKinematics(robot)
    with torch.no_grad():
        pos, _ = fk(torch.as_tensor(reference.root_pos[:1], dtype=torch.float64),
                    torch.as_tensor(reference.root_quat[:1], dtype=torch.float64),
                    torch.as_tensor(reference.joint_pos[:1], dtype=torch.float64))
    xy = pos[0, :, :2].numpy()
    extent = float(np.max(np.linalg.norm(xy[:, None] - xy[None], axis=-1))) if len(xy) > 1 else 0.0
    return max(extent, float(reference.root_pos[0, 2]))


def judge_tracking(robot: Robot, reference: Motion, metrics: dict[str, Any],
                   limits: TrackingLimits = TrackingLimits(), link_err_limit_m: float | None = None,
                   segments: list[dict[str, Any]] | None = None, terrain: Terrain | None = None) -> Verdict:
    """The verdict on tracked ``metrics`` (:func:`akd_core.physics.metrics.tracking_metrics`) of ``reference``.
    ``link_err_limit_m`` replaces the class limit (``--link-err-limit``). ``segments``: a motion program's
    per-segment figures (:func:`judge_segments`); each must pass its own limit too. ``terrain``: the ground it was
    tracked on (None: flat; a steady clip on anything else gets ``limits.terrain_steady_m``)."""
    if link_err_limit_m is not None and not link_err_limit_m > 0:
        raise ConfigError(f"--link-err-limit must be a positive number of metres, got {link_err_limit_m}")
    cls = motion_class(robot, reference)
    limit = float(link_err_limit_m) if link_err_limit_m is not None else limits.limit(cls, terrain)
    length = body_length_m(robot, reference)
    reasons = []
    if metrics.get("fell"):
        how = "the simulation blew up" if metrics.get("diverged") else f"max tilt {metrics['max_tilt_deg']:.0f} deg"
        reasons.append(f"the tracked robot fell ({how})")
    err = float(metrics["link_pos_err_m"])
    if not err <= limit:  # `not <=`: NaN fails
        ground = "" if terrain is None or terrain.is_flat else f" on {terrain.kind}"
        source = "--link-err-limit" if link_err_limit_m is not None else f"the limit for {cls} clips{ground}"
        reasons.append(f"link error {err:.3f} m > {limit:g} m ({source})")
    behind = metrics.get("final_root_err_m")
    if behind is not None and not float(behind) <= length:
        reasons.append(f"the root ends {float(behind):.2f} m from the reference's end, more than a body length "
                       f"({length:.2f} m)")
    for seg in segments or []:
        if not seg["passed"]:
            reasons.append(f"segment {seg['segment']} ({seg['pattern']}, {seg['start_s']:.1f}-{seg['end_s']:.1f} s): "
                           f"link error {seg['link_pos_err_m']:.3f} m > {seg['link_err_limit_m']:g} m (the limit for "
                           f"its {seg['motion_class']} class)")
    return Verdict(passed=not reasons, motion_class=cls, link_err_limit_m=limit, body_length_m=length,
                   reasons=reasons)


def segment_class(robot: Robot, reference: Motion, segment: dict[str, Any]) -> str:
    """The motion class of one segment of a motion program: by its gait (a stand is steady)."""
    from akd_core.motion.gait import PATTERNS, pattern_key

    feet, _, _ = feet_of(robot, reference)
    if 0 < len(feet) <= 2:
        return "biped"
    pattern = segment.get("pattern")
    if pattern in (None, "stand"):
        return "steady"
    return "dynamic" if PATTERNS[pattern_key(pattern, len(feet))].flight else "steady"


def judge_segments(robot: Robot, reference: Motion, tracked: Any, metrics: dict[str, Any],
                   segments: list[dict[str, Any]], limits: TrackingLimits = TrackingLimits(),
                   link_err_limit_m: float | None = None, terrain: Terrain | None = None) -> list[dict[str, Any]]:
    """Per segment of a motion program (the gait stage's ``segments``): the tracked link error over its frames
    against its own class's limit (a walk inside a clip with a gallop is held to the walk's; on ``terrain``), and
    the velocity and yaw rate the tracked root achieved in its steady part beside the asked and commanded ones.
    Foot heights (``last_second_feet_down``) are measured from the terrain under each foot (None: z = 0)."""
    from akd_core.motion.program import segment_figures

    fk = ForwardKinematics(robot)
    steps = min(len(tracked.root_pos), reference.num_frames)
    shift = float(metrics.get("height_shift_m") or 0.0)
    with torch.no_grad():
        ref_root = torch.as_tensor(reference.root_pos[:steps], dtype=torch.float64) + \
            torch.tensor([0.0, 0.0, shift], dtype=torch.float64)
        ref_pos, _ = fk(ref_root, torch.as_tensor(reference.root_quat[:steps], dtype=torch.float64),
                        torch.as_tensor(reference.joint_pos[:steps], dtype=torch.float64))
        sim_pos, _ = fk(torch.as_tensor(tracked.root_pos[:steps], dtype=torch.float64),
                        torch.as_tensor(tracked.root_quat[:steps], dtype=torch.float64),
                        torch.as_tensor(tracked.joint_pos[:steps], dtype=torch.float64))
    per_frame = np.linalg.norm((sim_pos - ref_pos).numpy(), axis=-1).mean(-1)  # (T,)
    achieved = segment_figures(reference, segments, root_pos=np.asarray(tracked.root_pos[:steps]),
                               root_quat=np.asarray(tracked.root_quat[:steps]))
    from akd_core.motion.classify import classify_gait, clip_legs, foot_heights

    sim = Motion(fps=reference.fps, joint_names=reference.joint_names, joint_pos=tracked.joint_pos[:steps],
                 root_pos=tracked.root_pos[:steps], root_quat=tracked.root_quat[:steps],
                 foot_names=reference.foot_names, foot_offsets=reference.foot_offsets)
    legs = clip_legs(robot, reference)
    heights = foot_heights(robot, sim, legs) if legs else np.zeros((steps, 0))
    if legs and terrain is not None and not terrain.is_flat:
        heights = above_ground(_foot_points(robot, sim, legs), terrain)
    ground = heights[:1].min(initial=0.0) if heights.size else 0.0
    out = []
    for n, (seg, got) in enumerate(zip(segments, achieved)):
        a = int(round(seg["start_s"] * reference.fps))
        b = max(min(int(round(seg["end_s"] * reference.fps)), steps), a + 1)
        steady = min(int(round((seg["start_s"] + seg.get("ramp_s", 0.0)) * reference.fps)), b - 1)
        gait = None
        if seg.get("pattern") not in (None, "stand") and b - steady >= 2:
            part = Motion(fps=sim.fps, joint_names=sim.joint_names, joint_pos=sim.joint_pos[steady:b],
                          root_pos=sim.root_pos[steady:b], root_quat=sim.root_quat[steady:b],
                          foot_names=sim.foot_names, foot_offsets=sim.foot_offsets)
            seen = classify_gait(robot, part, legs)
            gait = {"gait": seen.gait, "confidence": float(seen.confidence)}
        last = max(b - int(round(reference.fps)), a)
        # every foot down in the last second: the simulated contact points within 1 cm of their height at the start
        down = float((heights[last:b] - ground < FOOT_DOWN_M).all(-1).mean()) if heights.size and b > last else None
        cls = segment_class(robot, reference, seg)
        limit = float(link_err_limit_m) if link_err_limit_m is not None else limits.limit(cls, terrain)
        err = float(per_frame[a:b].mean()) if b <= steps and a < steps else float("nan")
        out.append({"segment": n + 1, "pattern": seg.get("pattern"), "start_s": seg["start_s"],
                    "end_s": seg["end_s"], "motion_class": cls, "link_err_limit_m": limit, "link_pos_err_m": err,
                    "passed": bool(err <= limit), "asked": seg.get("asked"), "command": seg.get("command"),
                    "achieved": got, "gait_seen": gait, "last_second_feet_down": down})
    return out


def _foot_points(robot: Robot, motion: Motion, legs: list[Any]) -> np.ndarray:
    """(F, K, 3) world contact points of ``legs`` (as :func:`akd_core.motion.classify.foot_heights` measures them)."""
    offsets = [motion.foot_offsets[list(motion.foot_names).index(leg.foot_link)]
               if leg.foot_link in motion.foot_names else leg.foot_offset for leg in legs]
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        points = fk.link_points(*(torch.as_tensor(np.ascontiguousarray(a, dtype=np.float64))
                                  for a in (motion.root_pos, motion.root_quat, motion.joint_pos)),
                                torch.as_tensor([robot.link_index(leg.foot_link) for leg in legs]),
                                torch.as_tensor(np.asarray(offsets, dtype=np.float64)))
    return points.numpy()


__all__ = ["FLIGHT_FRACTION", "TrackingLimits", "Verdict", "body_length_m", "judge_segments", "judge_tracking",
           "motion_class", "segment_class"]
