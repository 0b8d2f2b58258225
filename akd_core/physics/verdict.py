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
from akd_core.motion.clip import Motion
from akd_core.physics.metrics import feet_of

# A clip counts as dynamic when all its feet are off the ground in at least this fraction of its frames (a bound's
# flight is 10-30 % of a stride; a trot's four-feet-lifted instants, from rounding the duty factor, stay below 1 %)
FLIGHT_FRACTION = 0.02


@dataclass(frozen=True)
class TrackingLimits:
    """The largest mean link position error (m) a tracked clip of each motion class may have and still pass."""

    steady_m: float = 0.03
    dynamic_m: float = 0.05
    biped_m: float = 0.08

    def limit(self, motion_class: str) -> float:
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
                   limits: TrackingLimits = TrackingLimits(), link_err_limit_m: float | None = None) -> Verdict:
    """The verdict on tracked ``metrics`` (:func:`akd_core.physics.metrics.tracking_metrics`) of ``reference``.
    ``link_err_limit_m`` replaces the class limit (``--link-err-limit``)."""
    if link_err_limit_m is not None and not link_err_limit_m > 0:
        raise ConfigError(f"--link-err-limit must be a positive number of metres, got {link_err_limit_m}")
    cls = motion_class(robot, reference)
    limit = float(link_err_limit_m) if link_err_limit_m is not None else limits.limit(cls)
    length = body_length_m(robot, reference)
    reasons = []
    if metrics.get("fell"):
        how = "the simulation blew up" if metrics.get("diverged") else f"max tilt {metrics['max_tilt_deg']:.0f} deg"
        reasons.append(f"the tracked robot fell ({how})")
    err = float(metrics["link_pos_err_m"])
    if not err <= limit:  # `not <=`: NaN fails
        source = "--link-err-limit" if link_err_limit_m is not None else f"the limit for {cls} clips"
        reasons.append(f"link error {err:.3f} m > {limit:g} m ({source})")
    behind = metrics.get("final_root_err_m")
    if behind is not None and not float(behind) <= length:
        reasons.append(f"the root ends {float(behind):.2f} m from the reference's end, more than a body length "
                       f"({length:.2f} m)")
    return Verdict(passed=not reasons, motion_class=cls, link_err_limit_m=limit, body_length_m=length,
                   reasons=reasons)


__all__ = ["FLIGHT_FRACTION", "TrackingLimits", "Verdict", "body_length_m", "judge_tracking", "motion_class"]
