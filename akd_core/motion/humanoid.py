"""Human-like biped walks (``akd gait`` on a humanoid, issue 31): heel strike and toe-off, near-straight stance knees
with a CoM that rises and falls with the stride, arm swing and pelvis yaw, at the asked speed, in seconds.

The gait library (:mod:`akd_core.motion.gait`) hands biped walks of robots with human-like legs to
:func:`generate_walk`. Human-like (:func:`humanoid_body`): two legs whose zero pose is straight and vertical, with
exactly three pitch joints each (hip, knee, ankle: axes lateral in the zero pose), a knee that flexes at least a
radian, and a flat sole at least ``MIN_SOLE_LENGTH`` long (the geometry of the foot link, or of the links welded to
it). Other bipeds (the ostrich, point-footed bolt) keep the crouched ZMP walk of the gait library.

How a clip is made (docs/gait.md, "Human-like biped walks"):

1. **Feet.** Leg ``k`` is in stance while ``frac(f t + phase_k) < duty`` (``HUMAN_DUTY``). Each stance has one flat
   pose of its sole (the body pose at mid-stance composed with the zero-pose foot position, on the ground), and the
   foot rolls: it lands on its heel line pitched up ``heel_strike`` rad, rolls flat about that line during the first
   ``LEAD_FLAT`` of the double support, stays flat through single support (a rigid sole on one edge is a line
   contact with no room for the CoP), and rolls onto its toe line from ``TRAIL_HEEL_OFF`` of the next double
   support on, leaving the ground pitched down ``toe_off`` rad. Rolls are minimum-jerk (zero pitch rate and
   acceleration at both ends), so a foot touches down and lifts off at rest; the roll angles are capped so the
   roll's pitch rate stays within ``ROLL_RATE_USE`` of the ankle's allowed speed. The swing is a minimum-jerk path
   of the sole centre, pitch and yaw between the lift-off and touch-down poses, lifted by ``step_height``
   (``16 tau^2 (1 - tau)^2``). The clip records which part is down (``Motion.foot_contact_parts``: heel, toe).
2. **Height.** The pelvis height is the highest the legs allow (:func:`reach_cap`): per stance leg
   ``z_root <= z_ankle + sqrt(l^2 - d^2) - z_hip`` (``l`` the hip-ankle distance from the thigh and shank lengths
   with the knee bent ``KNEE_MIN_DEG``, rising to ``KNEE_PUSH_OFF_DEG`` over the toe roll; ``d`` the horizontal
   hip-ankle distance), and the same for a leg in terminal swing reaching for the ground; a smooth fit below that
   cap (:func:`smooth_below`) makes the body vault over the stance leg and dip in double support. A swing foot whose
   path would leave its reach from that pelvis is lifted instead (:func:`lift_swing`; the swing knee stays at
   least as bent as at toe-off until it straightens for touch-down).
3. **Upper body.** Pelvis yaw ``-PELVIS_YAW sqrt(Fr / 0.25) cos(2 pi (f t + phase_L))`` (the swing side's hip
   forward), the waist yaw joint counter-rotating ``WAIST_COUNTER`` times it, and the arms: each hangs in a rest pose
   found from the kinematics whatever the zero pose is (:func:`_arm`: upper arm down, forearm ``ELBOW_REST`` forward,
   by a small IK) and swings about it opposite to its own leg (sampled poses, interpolated) with a peak-to-peak
   ``min(ARM_SWING_MAX, max(ARM_SWING_MIN, ARM_SWING_PER_FROUDE sqrt(Fr)))`` (speed-scaled; ramped in with the
   speed), the elbow flexing a little more on the forward swing. Pelvis yaw and arm swing keep their joints within
   ``UPPER_BODY_SPEED_USE`` of the allowed speed.
4. **Balance.** The ZMP reference follows the rolling contact (:func:`zmp_plan`): in single support it runs along the
   flat sole from ``ZMP_REAR`` of its half length behind the centre to ``ZMP_FRONT`` ahead, in double support it moves
   (smoothstep) from the trailing foot's front point to the leading foot's rear point; laterally it is moved toward
   the body by ``ZMP_INWARD`` of the sole's half width. The horizontal CoM comes from the cart-table with the
   planned, varying CoM height (:func:`akd_core.motion.zmp.com_for_zmp`, one least-squares solve over the clip with
   2 s of stepping in place, or standing where a stand covers them, before it and 1.6 s of walking after it); the
   root follows (IK, FK of the whole-body CoM, shift: two iterations), then the multibody ZMP (centroidal dynamics of
   every link, arms and pelvis yaw included) minus the reference is corrected the same way (Kajita 2003's second
   stage), again while its mean error improves by a fifth (at most ``ZMP_CORRECTIONS_MAX`` times, or until it is
   below ``ZMP_TOLERANCE``): the swinging legs' angular momentum alone moves g1's ZMP by ~10 cm.
5. **Style, cadence and speed before the solve** (issue 44). :data:`STYLES` are tried in order at the asked
   speed, each over its cadence candidates (:func:`cadence_candidates`): the first whose steady cycle the planar leg
   model predicts (:func:`predict_cycle`, :func:`leg_angles`; no IK) within the velocity limits and near-straight
   (``TARGET_HEIGHT``, ``TARGET_KNEE_DEG``) is taken, else the first within the limits. Only a speed that no style
   keeps within the limits is lowered (bisection), with a note naming the joint and its limit; one IK cycle then
   checks it. Effort limits narrow the single-support ZMP range (:func:`zmp_range`) and delay the trailing heel's lift
   (:func:`heel_off_for_effort`) before the solve. Then the clip is solved once; time-scaled (the same stride,
   slower) only if the full clip still passes a velocity limit the probe missed; and its inverse-dynamics torques
   (:func:`akd_core.motion.feasibility.joint_torques`) are checked against the effort limits (``EFFORT_RATIO``): one
   slower clip where the dynamics pass them, a warning where the poses alone do.
6. **Stands** (a program's: :attr:`WalkRequest.stands`, the spans in which the body is at rest). A swing that lifts
   off in a stand is cancelled (:func:`foot_plan`) when its foothold would move less than ``STAND_STEP_TOLERANCE`` of
   the straight-legged height (``STAND_YAW_TOLERANCE`` in heading), or when it would touch down after the stand: the
   foot stays down flat with both parts down, with no toe-off before and no heel strike after, and the footholds after
   it stay where it is. So once the body is at rest each foot takes at most the one step that brings it beside the
   other, and a start lifts its first foot from both feet flat once the body moves. Foot rolls, arm swing and pelvis
   yaw fade out over ``ramp_time`` before a stand and back in after it (the arms hang at rest). In a stand's double
   support the ZMP reference stays between the feet, moving there from the foot that stood alone before and on to the
   one that stands alone after over ``ZMP_SHIFT_S`` (:func:`zmp_plan`). The cadence is predicted on a cycle of the
   walk (``WalkRequest.steady_from``), not of a stand.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from akd_core.model.legs import Leg, chain_joints, rest_link_poses, welded_links
from akd_core.model.robot import Robot
from akd_core.model.spatial import yaw_quat
from akd_core.motion.clip import Motion
from akd_core.motion.feasibility import centroidal_wrench
from akd_core.motion.ik import LegIK
from akd_core.motion.metrics import geometry_points
from akd_core.motion.zmp import com_for_zmp

log = logging.getLogger("akd.gait")

GRAVITY = 9.81
CONTACT_LABELS = ("heel", "toe")  # the parts of a foot in ``Motion.foot_contact_parts``
HEEL, TOE = 0, 1
MIN_SOLE_LENGTH = 0.08  # m: shorter soles have no heel and toe to roll on
SOLE_BAND = 0.01  # m: geometry within this height of a foot's lowest point is its sole
STRAIGHT_TOLERANCE_DEG = 10.0  # a zero-pose leg this close to straight and vertical counts as straight
HUMAN_DUTY = 0.62  # stance fraction (a person walking: 0.6-0.62)
STEP_HEIGHT = 0.05  # swing lift of the sole centre above its heel-to-toe path, in straight-legged heights
HEEL_STRIKE_RAD = 0.25  # sole pitched up at heel strike (at most; a person: ~0.2-0.3)
TOE_OFF_RAD = 0.5  # sole pitched down at toe-off (at most; a person: ~0.5-0.7)
ROLL_RATE_USE = 0.5  # a foot roll's peak pitch rate may use this much of the ankle's allowed speed
LEAD_FLAT = 0.5  # fraction of the double support after which the leading foot is flat
TRAIL_HEEL_OFF = 0.35  # fraction of the double support at which the trailing heel lifts (the ZMP is past its toes)
HEEL_OFF_LATEST = 0.7  # ... at the latest (weak ankles: the toe line carries less of the weight later)
KNEE_MIN_DEG = 8.0  # the stance knee is kept at least this bent (a straight knee is a singular IK)
KNEE_PUSH_OFF_DEG = 25.0  # ... and this bent at toe-off (a person: ~35-40 deg)
HEIGHT_MARGIN = 0.004  # m kept below the reach cap (IK of the real leg vs the planar thigh-shank model)
HEIGHT_STIFFNESS = 1e-5  # weight of the pelvis height's squared vertical acceleration (per second of clip)
HEIGHT_PULL = 1e-2  # weight pulling the pelvis height up toward the reach cap where it is below it
HEIGHT_PUSH = 1e4  # weight pushing it down where it is above
TARGET_HEIGHT = 0.95  # a cycle's mean pelvis height, of the straight-legged height, the cadence aims for
TARGET_KNEE_DEG = 22.0  # a cycle's predicted mean stance knee angle the cadence aims for
MAX_CADENCE_GAIN = 1.6  # the cadence may rise to this multiple of Alexander's
MIN_CADENCE_GAIN = 0.65  # ... and, in an adapted style, fall to this multiple (slow joints: longer, slower steps)
ZMP_REAR, ZMP_FRONT = 0.3, 0.6  # single-support ZMP from 30 % of the half sole behind its centre to 60 % ahead
ZMP_INWARD = 0.5  # the ZMP reference moves toward the body by this much of the sole's half width
ZMP_DT = 0.005  # s, grid of the first (cart-table) stage
ZMP_PREROLL = 2.0  # s of stepping in place (or standing, in a stand) before the clip
ZMP_PREVIEW = 1.6  # s of walking after the clip
ZMP_ITERATIONS = 2  # root-shift / IK fixed-point iterations per stage
ZMP_CORRECTIONS_MAX = 6  # multibody-ZMP correction stages, at most (fewer once the error stops improving)
ZMP_TOLERANCE = 0.005  # m: mean multibody-ZMP error at which the corrections stop
ARM_SWING_PER_FROUDE = math.radians(80.0)  # arm swing peak-to-peak per sqrt(Froude number)
ARM_SWING_MAX = math.radians(45.0)
ARM_SWING_MIN = math.radians(12.0)  # ... but at least this much in a forward walk (a person's arms swing when slow too)
ARM_SWING_IN_PLACE = 0.3  # fraction of the arm swing kept while stepping in place (before the speed ramps in)
ELBOW_REST = 0.3  # rad: the elbow's flexion while walking (relaxed arms hang slightly bent)
ELBOW_SWING = 0.3  # extra elbow flexion per rad of forward arm swing (less on the back swing)
ARM_ABDUCTION = math.radians(6.0)  # hanging arms: the upper arm and forearm this far out from vertical
ARM_SWING_RANGE = math.radians(30.0)  # the arm's swing poses are sampled this far forward and back
ARM_SWING_SAMPLES = 6  # samples each way
ARM_REGULARISATION = 0.02  # m per rad: the hanging pose's IK pulls the arm joints toward zero (wrists stay)
ARM_SWING_REGULARISATION = 0.1  # m per rad: the swing's IK pulls them toward the hanging pose (an arm with no
# sagittal shoulder joint, talos', swings what it can instead of turning its upper arm about itself)
PELVIS_YAW = 0.10  # rad of pelvis yaw amplitude at Froude 0.25 (scaled by sqrt(Fr / 0.25)); a person: ~0.07
WAIST_COUNTER = 1.5  # the waist yaw joint turns the chest back by this many times the pelvis yaw
JOINT_MARGIN = 0.02  # rad kept from the joint limits by the planned upper-body joints
UPPER_BODY_SPEED_USE = 0.9  # pelvis yaw and arm swing use at most this much of their joints' allowed speed
EFFORT_RATIO = 0.9  # feedforward torques of a reference keep within this much of the effort limits (the tracker's PD
# corrections need the rest)
ZMP_EFFORT_USE = 0.75  # the ZMP's static lever about the ankle uses at most this much of that: the vertical force
# peaks above m g when the body vaults, and the foot has its own dynamics
ZMP_MIN_SPAN = 0.2  # of the half sole: the narrowest single-support ZMP range
PROBE_STEP = 0.9  # an IK cycle that passes a limit the prediction missed lowers the speed by at most this factor
SPEED_BISECTIONS = 6  # halvings of the speed range when no style fits the asked speed
PREDICT_MARGIN = 0.95  # the planar model's joint speeds must keep this far inside the allowed ones (the ZMP sway and
# the real legs add a little; an IK cycle then checks)
STAND_STEP_TOLERANCE = 0.025  # of the straight-legged height: in a stand, a foot whose next foothold is this close
# stays down (g1: 2 cm)
STAND_YAW_TOLERANCE = 0.05  # rad, the same for the foot's heading
ZMP_SHIFT_S = 0.4  # s: in a stand the ZMP moves between the middle of the feet and a foot over this long


# ----------------------------------------------------------------------------- the body
@dataclass(frozen=True)
class Sole:
    """One foot's sole. Points in the foot link's frame (``*_link``) and in the sole frame (``*_sole``: origin on the
    ground at the sole's centre, axes as the world's in the zero pose: x forward, z up)."""

    centre_link: np.ndarray  # (3,) the sole centre on the ground (the clip's foot_offset)
    heel_link: np.ndarray  # (3,) the heel line's middle: the foot rolls about it at heel strike
    toe_link: np.ndarray  # (3,) the toe line's middle (toe-off)
    heel_sole: np.ndarray  # (3,)
    toe_sole: np.ndarray  # (3,)
    ankle_sole: np.ndarray  # (3,) the ankle pitch joint
    link_rot: np.ndarray  # (3, 3) the foot link's orientation in the sole frame
    half_length: float  # m, heel line to centre (= centre to toe line)
    half_width: float  # m
    pivot_radius: float  # m: pivots of spherical sole elements are sphere centres, this far above the ground


@dataclass(frozen=True)
class Arm:
    """An arm that hangs and swings (:func:`_arm`): its joints, its hanging rest pose and its poses along the swing.

    The swing is sampled: ``poses[i]`` are the arm's joint angles with the upper arm swung ``swing[i]`` rad forward
    (about the lateral axis through the shoulder) from hanging, the elbow flexing with it; a walk interpolates them.
    """

    side: int  # +1 left, -1 right
    joints: tuple[int, ...]  # dof indices of the arm chain, shoulder first
    rest: np.ndarray  # (n,) the hanging rest pose
    swing: np.ndarray  # (S,) swing angles sampled, rad (+ forward), increasing
    poses: np.ndarray  # (S, n) joint angles at those swing angles
    shoulder: int  # dof index of the joint that swings the arm most (the sagittal shoulder joint, if any)
    forward: float  # +1 / -1: the sign of that joint's angle swinging the arm forward
    elbow: int | None  # dof index of the elbow joint
    speed: float  # largest |d q_j / d swing| / velocity limit_j over the arm's joints (1/(rad/s) of swing rate)
    upper_arm: tuple[str, str] = ("", "")  # the links whose origins are the shoulder and the elbow (the upper arm)

    def at(self, theta: np.ndarray) -> np.ndarray:
        """Joint angles (T, n) of the arm swung ``theta`` (T,) rad forward (linear between the samples)."""
        return np.stack([np.interp(theta, self.swing, self.poses[:, j]) for j in range(len(self.joints))], -1)


@dataclass(frozen=True)
class HumanoidBody:
    """What the human-like walk needs to know of a robot (:func:`humanoid_body`); per leg k (legs' order)."""

    soles: tuple[Sole, ...]
    hip_root: np.ndarray  # (K, 3) the hip pitch axis at the ankle's lateral position, in the root frame
    thigh: np.ndarray  # (K,) m, sagittal hip-knee distance
    shank: np.ndarray  # (K,) m, sagittal knee-ankle distance
    straight_height: float  # m, root height standing on straight legs (the zero pose), soles flat on z = 0
    nominal: np.ndarray  # (K, 2) sole centres relative to the root in the zero pose (body frame)
    knee: np.ndarray  # (K,) dof index of the knee
    knee_flex: np.ndarray  # (K,) +1 / -1: the sign of the knee angle that flexes it
    ankle: np.ndarray  # (K,) dof index of the ankle pitch joint
    hip: np.ndarray  # (K,) dof index of the hip pitch joint
    hip_yaw: np.ndarray  # (K,) dof index of the leg's vertical-axis joint (-1 without one): it turns with the pelvis
    arms: tuple[Arm, ...]
    waist_yaw: int | None  # dof index of a vertical-axis joint between the pelvis and the arms
    waist_sign: float  # +1 / -1: the sign that turns the chest like a positive root yaw
    com_root: np.ndarray  # (3,) whole-body CoM relative to the root, zero pose with the arms at rest, root frame

    def reach(self, knee_rad: float | np.ndarray) -> np.ndarray:
        """Hip-ankle distance (K,) or (..., K) with the knee bent ``knee_rad`` (a scalar or (..., K))."""
        c = np.cos(np.asarray(knee_rad, dtype=np.float64))
        return np.sqrt(self.thigh ** 2 + self.shank ** 2 + 2 * self.thigh * self.shank * c)

    def knee_angle(self, distance: np.ndarray) -> np.ndarray:
        """Knee bend (rad) giving a hip-ankle ``distance`` (..., K) (0 when the leg would have to be longer)."""
        c = (distance ** 2 - self.thigh ** 2 - self.shank ** 2) / (2 * self.thigh * self.shank)
        return np.arccos(np.clip(c, -1.0, 1.0))


def humanoid_body(robot: Robot, legs: Sequence[Leg]) -> HumanoidBody | None:
    """The human-like walk's view of ``robot`` (module docstring), or None when its legs are not human-like."""
    if len(legs) != 2:
        return None
    zero = np.zeros(robot.num_dofs)
    pos, rot = rest_link_poses(robot, zero)
    joints = {j.name: j for j in robot.joints}
    dof = {n: i for i, n in enumerate(robot.joint_names)}
    geo_idx, geo_pts, geo_rad = geometry_points(robot)

    def world_axis(name: str) -> np.ndarray:
        return rot[robot.link_index(joints[name].child)] @ joints[name].axis

    def origin(name: str) -> np.ndarray:
        return pos[robot.link_index(joints[name].child)]

    soles, hips, thighs, shanks, knees, flexes, ankles, lowest = [], [], [], [], [], [], [], []
    hip_pitch, hip_yaw = [], []
    for leg in legs:
        pitch = [n for n in leg.joint_names if abs(world_axis(n)[1]) > 0.9]
        if len(pitch) != 3:
            return None
        hip, knee, ankle = (origin(n) for n in pitch)
        thigh_v, shank_v = (knee - hip)[[0, 2]], (ankle - knee)[[0, 2]]
        tol = math.radians(STRAIGHT_TOLERANCE_DEG)
        if any(abs(math.atan2(v[0], -v[1])) > tol for v in (thigh_v, shank_v)):
            return None  # not straight and vertical in the zero pose
        sweep = np.cross(world_axis(pitch[1]), ankle - knee)
        flex = -1.0 if sweep[0] > 0 else 1.0  # flexing moves the ankle backward
        j_knee = joints[pitch[1]]
        room = (j_knee.upper if flex > 0 else -j_knee.lower)
        if not room > 1.0:
            return None  # a knee that cannot flex a radian is no walking knee
        sole = _sole(robot, leg, pos, rot, geo_idx, geo_pts, geo_rad, ankle)
        if sole is None:
            return None
        soles.append(sole[0])
        lowest.append(sole[1])
        hips.append(np.array([hip[0], ankle[1], hip[2]]))
        thighs.append(float(np.linalg.norm(thigh_v)))
        shanks.append(float(np.linalg.norm(shank_v)))
        knees.append(dof[pitch[1]])
        flexes.append(flex)
        ankles.append(dof[pitch[2]])
        hip_pitch.append(dof[pitch[0]])
        hip_yaw.append(next((dof[n] for n in leg.joint_names if abs(world_axis(n)[2]) > 0.9), -1))
    straight = -float(min(lowest))
    nominal = np.array([(pos[robot.link_index(leg.foot_link)] + rot[robot.link_index(leg.foot_link)]
                         @ sole.centre_link)[:2] for leg, sole in zip(legs, soles)])
    leg_dofs = {dof[n] for leg in legs for n in leg.joint_names}
    arms, waist, waist_sign = _arms_and_waist(robot, legs, pos, rot, leg_dofs, float(np.mean([h[2] for h in hips])))
    com = _zero_pose_com(robot, pos, rot, arms)
    return HumanoidBody(soles=tuple(soles), hip_root=np.array(hips), thigh=np.array(thighs), shank=np.array(shanks),
                        straight_height=straight, nominal=nominal, knee=np.array(knees), knee_flex=np.array(flexes),
                        ankle=np.array(ankles), hip=np.array(hip_pitch), hip_yaw=np.array(hip_yaw), arms=tuple(arms),
                        waist_yaw=waist, waist_sign=waist_sign, com_root=com)


def _sole(robot: Robot, leg: Leg, pos: np.ndarray, rot: np.ndarray, geo_idx: np.ndarray, geo_pts: np.ndarray,
          geo_rad: np.ndarray, ankle: np.ndarray) -> tuple[Sole, float] | None:
    """The sole of ``leg``'s foot (the geometry of its link and the links welded to it) and its lowest height in the
    zero pose, or None when it is no flat sole at least MIN_SOLE_LENGTH long."""
    li = robot.link_index(leg.foot_link)
    group = [robot.link_index(n) for n in welded_links(robot, leg.foot_link)]
    own = np.isin(geo_idx, group)
    if not own.any():
        return None
    centres = np.einsum("pij,pj->pi", rot[geo_idx[own]], geo_pts[own]) + pos[geo_idx[own]]  # (P,3) world
    radius = geo_rad[own]
    bottom = centres[:, 2] - radius
    low = float(bottom.min())
    on = bottom <= low + SOLE_BAND
    sole_c, sole_r = centres[on], radius[on]
    x_lo, x_hi = float((sole_c[:, 0] - sole_r).min()), float((sole_c[:, 0] + sole_r).max())
    y_lo, y_hi = float((sole_c[:, 1] - sole_r).min()), float((sole_c[:, 1] + sole_r).max())
    if x_hi - x_lo < MIN_SOLE_LENGTH:
        return None
    r = float(sole_r.max())
    centre = np.array([(x_lo + x_hi) / 2, (y_lo + y_hi) / 2, low])
    heel = np.array([x_lo + r, centre[1], low + r])  # the rear pivot: a sphere's centre, a box's bottom edge
    toe = np.array([x_hi - r, centre[1], low + r])
    to_link = lambda p: rot[li].T @ (p - pos[li])  # noqa: E731
    sole = Sole(centre_link=to_link(centre), heel_link=to_link(heel), toe_link=to_link(toe),
                heel_sole=heel - centre, toe_sole=toe - centre, ankle_sole=ankle - centre, link_rot=rot[li].copy(),
                half_length=(x_hi - x_lo) / 2, half_width=(y_hi - y_lo) / 2, pivot_radius=r)
    return sole, low


def _arms_and_waist(robot: Robot, legs: Sequence[Leg], pos: np.ndarray, rot: np.ndarray, leg_dofs: set[int],
                    hip_z: float) -> tuple[list[Arm], int | None, float]:
    """Arms (per side, the longest chain to a leaf that is no foot, beside the body above the hips; :func:`_arm`) and
    a waist yaw joint (a vertical axis on the body's midline that carries both shoulders)."""
    joints = {j.name: j for j in robot.joints}
    dof = {n: i for i, n in enumerate(robot.joint_names)}
    feet = {n for leg in legs for n in welded_links(robot, leg.foot_link)}
    parents = {j.parent for j in robot.joints}
    leaves = [link.name for link in robot.links if link.name not in parents and link.name not in feet]
    best: dict[int, tuple[list[str], str]] = {}
    for leaf in leaves:
        chain = [n for n in chain_joints(robot, leaf) if dof[n] not in leg_dofs]
        limb = [n for n in chain if abs(pos[robot.link_index(joints[n].child)][1]) > 0.05
                and pos[robot.link_index(joints[n].child)][2] > hip_z + 0.1]
        if not limb:
            continue
        side = 1 if pos[robot.link_index(joints[limb[0]].child)][1] > 0 else -1
        if len(limb) > len(best.get(side, ([], ""))[0]):
            best[side] = (chain, leaf)
    arms, carriers = [], []
    for side, (chain, leaf) in sorted(best.items(), reverse=True):
        first = next(i for i, n in enumerate(chain) if abs(pos[robot.link_index(joints[n].child)][1]) > 0.05)
        arm = _arm(robot, side, chain[first:], leaf, pos, rot)
        if arm is not None:
            arms.append(arm)
            carriers.append(set(chain))
    waist, sign = None, 1.0
    if carriers:
        shared = set.intersection(*carriers)
        for name in (n for n in robot.joint_names if n in shared):
            a = rot[robot.link_index(joints[name].child)] @ joints[name].axis
            if abs(a[2]) > 0.9 and abs(pos[robot.link_index(joints[name].child)][1]) < 0.02:
                waist, sign = dof[name], (1.0 if a[2] > 0 else -1.0)
                break
    return arms, waist, sign


class _ArmChain:
    """Forward kinematics of one arm chain alone (numpy, batched), the torso fixed in the zero pose (root level at
    the origin): the world positions of chosen points on its links for joint angles (B, n)."""

    def __init__(self, robot: Robot, names: Sequence[str], leaf: str, pos: np.ndarray, rot: np.ndarray):
        first = robot.joint(names[0])
        base = np.eye(4)
        base[:3, :3], base[:3, 3] = rot[robot.link_index(first.parent)], pos[robot.link_index(first.parent)]
        self.base = base
        path = []  # joints from the first arm joint down to the leaf (fixed ones included)
        link = leaf
        while link != first.parent:
            joint = robot.parent_joint(link)
            path.append(joint)
            link = joint.parent
        self.path = path[::-1]
        dof = {n: i for i, n in enumerate(names)}
        self.slot = [dof.get(j.name) if j.actuated else None for j in self.path]
        self.links = [j.child for j in self.path]

    def frames(self, q: np.ndarray) -> list[np.ndarray]:
        """(B, 4, 4) world transforms of the chain's child links, chain order."""
        from scipy.spatial.transform import Rotation

        batch = len(q)
        current = np.broadcast_to(self.base, (batch, 4, 4))
        out = []
        for joint, slot in zip(self.path, self.slot):
            local = np.broadcast_to(joint.origin, (batch, 4, 4)).copy()
            if slot is not None:
                motion = np.tile(np.eye(4), (batch, 1, 1))
                if joint.type == "prismatic":
                    motion[:, :3, 3] = q[:, slot, None] * joint.axis
                else:
                    motion[:, :3, :3] = Rotation.from_rotvec(q[:, slot, None] * joint.axis).as_matrix()
                local = local @ motion
            current = current @ local
            out.append(current)
        return out


def _arm(robot: Robot, side: int, names: Sequence[str], leaf: str, pos: np.ndarray, rot: np.ndarray) -> Arm | None:
    """The arm of joints ``names`` (shoulder first, down to ``leaf``): its hanging rest pose and its swing, from the
    kinematics, whatever the zero pose is (g1 holds its forearms out, romeo its whole arms straight forward, op3 out
    to the sides).

    Points (zero pose): the **hand** is the point of the chain's links (origins, inertial centres, collision
    geometry) farthest from the first joint; the **elbow** is the joint where the chain of joint origins bends by
    more than 30 deg (the most, between a quarter and four fifths of the way along the arm: a bent arm), else the
    joint nearest the middle of the arm along that chain (a straight one); the **shoulder** is the last joint before
    the elbow at least half as far from it as the first joint (talos' first joint turns a shoulder bracket).
    Hanging means the upper arm (shoulder -> elbow) points down, ARM_ABDUCTION out from the body, and the forearm
    (elbow -> hand) too, flexed ELBOW_REST forward. Each swing sample turns both about the lateral axis through the
    shoulder by the swing angle (the elbow flexing ELBOW_SWING times it more). The joint angles come from a small
    least-squares IK within the joint limits: elbow and hand on those targets, the shoulder where it is in the zero
    pose, the joints near zero (the rest pose, ARM_REGULARISATION) or near the rest pose (the swing,
    ARM_SWING_REGULARISATION), warm-started sample to sample from the rest pose outward, so the swing is continuous.
    None for a chain that is no arm (shorter than 5 cm, no elbow)."""
    from scipy.optimize import least_squares

    dof = {n: i for i, n in enumerate(robot.joint_names)}
    chain = _ArmChain(robot, names, leaf, pos, rot)
    n = len(names)
    zero = chain.frames(np.zeros((1, n)))
    origins = np.array([f[0, :3, 3] for f in zero])  # (links, 3)
    joint_at = {j.name: i for i, j in enumerate(chain.path)}
    start = origins[joint_at[names[0]]]
    # candidate hand points: the chain's link origins, inertial centres and collision points
    geo_idx, geo_pts, _ = geometry_points(robot)
    candidates = []  # (index of the chain link, point in that link's frame)
    for i, link_name in enumerate(chain.links):
        li = robot.link_index(link_name)
        candidates.append((i, np.zeros(3)))
        inertial = robot.links[li].inertial
        if inertial is not None:
            candidates.append((i, inertial.origin[:3, 3]))
        candidates += [(i, p) for p in geo_pts[geo_idx == li]]
    world = np.array([zero[i][0, :3, :3] @ p + zero[i][0, :3, 3] for i, p in candidates])
    hand_i = int(np.argmax(np.linalg.norm(world - start, axis=1)))
    hand_link, hand_local = candidates[hand_i]
    hand = world[hand_i]
    length = float(np.linalg.norm(hand - start))
    if length < 0.05:
        return None
    actuated = [nm for nm in names if robot.joint(nm).type in ("revolute", "continuous", "prismatic")]
    place = {nm: origins[joint_at[nm]] for nm in actuated}
    # the elbow: the joint farthest from both ends of the arm (the first joint and the hand), along the chain
    along = np.cumsum([0.0] + [float(np.linalg.norm(place[b] - place[a])) for a, b in zip(actuated, actuated[1:])])
    total = along[-1] + float(np.linalg.norm(hand - place[actuated[-1]]))
    elbow = actuated[int(np.argmax(np.minimum(along, total - along)))]  # a straight arm: the middle joint
    points = [place[nm] for nm in actuated] + [hand]
    bends = {}
    for i, nm in enumerate(actuated):  # a bent arm: the joint it bends at
        inward = next((points[i] - p for p in points[i::-1] if np.linalg.norm(points[i] - p) > 0.02), None)
        outward = next((p - points[i] for p in points[i + 1:] if np.linalg.norm(p - points[i]) > 0.02), None)
        if inward is not None and outward is not None and 0.25 * total <= along[i] <= 0.8 * total:
            bends[nm] = math.acos(np.clip(inward @ outward / np.linalg.norm(inward) / np.linalg.norm(outward), -1, 1))
    if bends and max(bends.values()) > math.radians(30.0):
        elbow = max(bends, key=bends.get)
    elbow = next(nm for nm in actuated if np.linalg.norm(place[nm] - place[elbow]) < 0.02)  # the first one there
    reach = float(np.linalg.norm(place[elbow] - start))
    # the shoulder: the last joint before the elbow at least half the first joint's distance from it
    before = [nm for nm in actuated[:actuated.index(elbow)] if np.linalg.norm(place[nm] - place[elbow]) >= 0.5 * reach]
    if not before or reach < 0.2 * length:
        return None
    shoulder_name = before[-1]
    shoulder0, elbow0 = place[shoulder_name], place[elbow]
    upper = float(np.linalg.norm(elbow0 - shoulder0))
    fore = float(np.linalg.norm(hand - elbow0))
    i_sh, i_el = joint_at[shoulder_name], joint_at[elbow]
    slots = np.array([dof[nm] for nm in names])
    lower = np.array([robot.joint(nm).lower for nm in names], dtype=np.float64)
    upper_lim = np.array([robot.joint(nm).upper for nm in names], dtype=np.float64)
    lower = np.where(np.isfinite(lower), lower + JOINT_MARGIN, -math.pi)
    upper_lim = np.where(np.isfinite(upper_lim), upper_lim - JOINT_MARGIN, math.pi)
    lower, upper_lim = np.minimum(lower, 0.0), np.maximum(upper_lim, 0.0)  # a zero pose outside: keep it feasible
    out = np.array([0.0, side * math.sin(ARM_ABDUCTION), -math.cos(ARM_ABDUCTION)])
    axes = [None if slot is None else (j.type == "prismatic", j.axis) for j, slot in zip(chain.path, chain.slot)]

    def targets(theta: float) -> tuple[np.ndarray, np.ndarray]:
        flex = ELBOW_REST + ELBOW_SWING * theta
        e = shoulder0 + upper * (_pitch_up(np.array(theta)) @ out)
        h = e + fore * (_pitch_up(np.array(theta + flex)) @ out)
        return e, h

    def solve(theta: float, q0: np.ndarray, q_pull: np.ndarray, pull: float) -> tuple[np.ndarray, float]:
        e_goal, h_goal = targets(theta)
        cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

        def evaluate(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            key = q.tobytes()
            if key not in cache:
                frames = [f[0] for f in chain.frames(q[None])]
                pts = [frames[i_sh][:3, 3], frames[i_el][:3, 3], frames[hand_link][:3, :3] @ hand_local
                       + frames[hand_link][:3, 3]]
                jac = np.zeros((3, 3, n))  # (point, xyz, joint): a joint moves the points below it
                for i, (frame, spec) in enumerate(zip(frames, axes)):
                    if spec is None:
                        continue
                    prismatic, axis = spec
                    w = frame[:3, :3] @ axis
                    for k, (point, below) in enumerate(zip(pts, (i_sh, i_el, hand_link))):
                        if i <= below:
                            jac[k, :, chain.slot[i]] = w if prismatic else np.cross(w, point - frame[:3, 3])
                residual = np.r_[pts[1] - e_goal, pts[2] - h_goal, 2.0 * (pts[0] - shoulder0), pull * (q - q_pull)]
                cache.clear()
                cache[key] = (residual, np.vstack([jac[1], jac[2], 2.0 * jac[0], pull * np.eye(n)]))
            return cache[key]

        result = least_squares(lambda q: evaluate(q)[0], np.clip(q0, lower, upper_lim), jac=lambda q: evaluate(q)[1],
                               bounds=(lower, upper_lim), xtol=1e-9, ftol=1e-9, max_nfev=100)
        return result.x, float(result.cost)

    # the rest pose: from the zero pose and from each shoulder joint turned a quarter either way (a straight-forward
    # or sideways zero pose: the least-squares descent alone may stall at a gimbal lock), the best
    seeds = [np.zeros(n)]
    for nm in before:
        for sign in (1.0, -1.0):
            seed = np.zeros(n)
            seed[names.index(nm)] = sign * math.pi / 2
            seeds.append(seed)
    rest, cost = min((solve(0.0, seed, np.zeros(n), ARM_REGULARISATION) for seed in seeds), key=lambda r: r[1])
    swing = np.linspace(-ARM_SWING_RANGE, ARM_SWING_RANGE, 2 * ARM_SWING_SAMPLES + 1)
    poses = np.zeros((len(swing), n))
    middle = ARM_SWING_SAMPLES
    poses[middle] = rest
    for step in (1, -1):
        q = rest
        for i in range(middle + step, len(swing) if step > 0 else -1, step):
            q = solve(float(swing[i]), q, rest, ARM_SWING_REGULARISATION)[0]
            poses[i] = q
    slope = np.gradient(poses, swing, axis=0)  # (S, n)
    limit = np.array([robot.joint(nm).velocity for nm in names], dtype=np.float64)
    limit = np.where(np.isfinite(limit) & (limit > 0), limit, np.inf)
    travel = np.ptp(poses, axis=0) * np.array([robot.joint(nm).type != "prismatic" for nm in names])
    main = int(np.argmax(travel))
    return Arm(side=side, joints=tuple(int(i) for i in slots), rest=rest, swing=swing, poses=poses,
               shoulder=int(slots[main]), forward=1.0 if poses[-1, main] > poses[0, main] else -1.0,
               elbow=int(dof[elbow]), speed=float((np.abs(slope) / limit).max()),
               upper_arm=(robot.joint(shoulder_name).child, robot.joint(elbow).child))


def _zero_pose_com(robot: Robot, pos: np.ndarray, rot: np.ndarray, arms: Sequence[Arm]) -> np.ndarray:
    """Whole-body CoM (3,) relative to the root in the zero pose with the arms hanging (root at the origin, level)."""
    if arms:
        pos, rot = rest_link_poses(robot, rest_pose(robot.num_dofs, arms))
    masses, points = [], []
    for i, link in enumerate(robot.links):
        if link.inertial is not None and link.inertial.mass > 0:
            masses.append(link.inertial.mass)
            points.append(pos[i] + rot[i] @ link.inertial.origin[:3, 3])
    m = np.array(masses)
    return (m[:, None] * np.array(points)).sum(0) / m.sum()


def rest_pose(num_dofs: int, arms: Sequence[Arm]) -> np.ndarray:
    """Joint angles (J,): zero but the arms, which hang (:class:`Arm`)."""
    q = np.zeros(num_dofs)
    for arm in arms:
        q[list(arm.joints)] = arm.rest
    return q


# ----------------------------------------------------------------------------- the walk's parameters
@dataclass
class WalkRequest:
    """What to walk: the fields of :class:`akd_core.motion.gait.GaitSpec` this walk reads (None = choose)."""

    speed: float
    direction: float = 0.0
    turn_rate: float = 0.0
    ramp_time: float = 0.5
    frequency: float | None = None
    duty_factor: float | None = None
    step_height: float | None = None
    phase_offsets: dict[str, float] | None = None
    stands: tuple[tuple[float, float], ...] = ()  # (start, end) s: the body at rest, the feet down (+-inf: open)
    steady_from: float | None = None  # s: a steady cycle of the walk starts here (None: after the ramp from rest)


@dataclass(frozen=True)
class WalkStyle:
    """How a walk fits a robot's joints (issue 44): the human style first; a robot whose joints it would pass the
    velocity limits of walks the next style at the asked speed, and slows down only when the last one does not fit.

    duty: stance fraction (a longer swing: the hip swings the leg forward over more time); swing_ramp: the swing's
    profile (0: minimum jerk, peak 1.875 x the mean speed; r: a flat top ramped in and out over r of the swing, peak
    1 / (1 - r) x); step: the swing's lift, of STEP_HEIGHT; knee_min_deg /
    push_off_deg: the stance knee's straightest bend (mid-stance) and its bend at toe-off (a flatter vault: the knee
    and hip turn less in stance); rolls: heel strike and toe-off, or a flat foot (weak ankles: a foot on its toe
    line carries its share of the weight 10 cm or more ahead of the ankle)."""

    name: str
    duty: float
    swing_ramp: float
    step: float
    knee_min_deg: float
    push_off_deg: float
    rolls: bool = True  # heel strike and toe-off (False: the foot lands and lifts flat, its whole sole down)


STYLES = (WalkStyle("human", HUMAN_DUTY, 0.0, 1.0, KNEE_MIN_DEG, KNEE_PUSH_OFF_DEG),
          WalkStyle("even swing", HUMAN_DUTY, 0.3, 1.0, KNEE_MIN_DEG, KNEE_PUSH_OFF_DEG),
          WalkStyle("flat-footed long even swing", 0.58, 0.25, 0.5, 12.0, 25.0, False),
          WalkStyle("flat-footed longest even swing", 0.55, 0.2, 0.25, 16.0, 28.0, False))


@dataclass
class WalkGait:
    """The resolved walk: cadence, stance fraction, leg phases (K,), swing lift and the foot roll angles."""

    speed: float
    direction: float
    turn_rate: float
    ramp_time: float
    frequency: float
    duty_factor: float
    phases: np.ndarray  # (K,) cycle phase of each leg
    step_height: float
    heel_strike: float  # rad
    toe_off: float  # rad
    arm_swing: float  # rad, shoulder swing peak-to-peak at full speed
    pelvis_yaw: float  # rad amplitude at full speed
    style: str = "human"  # the WalkStyle's name
    swing_ramp: float = 0.0  # the swing's profile: 0 minimum jerk, else a flat top ramped in this fraction
    knee_min: float = math.radians(KNEE_MIN_DEG)  # rad, the stance knee's straightest bend
    push_off: float = math.radians(KNEE_PUSH_OFF_DEG)  # rad, its bend at toe-off
    zmp_rear: float = ZMP_REAR  # single-support ZMP from this fraction of the half sole behind its centre ...
    zmp_front: float = ZMP_FRONT  # ... to this fraction ahead
    heel_off: float = TRAIL_HEEL_OFF  # fraction of the double support at which the trailing heel lifts
    stands: tuple[tuple[float, float], ...] = ()  # (start, end) s in which the body is at rest (WalkRequest.stands)
    steady_from: float | None = None  # s: where a steady cycle starts (None: max(2 ramp_time, 1 s))
    notes: list[str] = field(default_factory=list)

    @property
    def double_support(self) -> float:
        """Fraction of a stance spent in each of its two double supports."""
        return max(self.duty_factor - 0.5, 1e-3) / self.duty_factor


def froude(speed: float, leg_length: float) -> float:
    return speed ** 2 / (GRAVITY * leg_length)


def _alexander_cadence(speed: float, leg_length: float) -> float:
    """Gait cycles per second for ``speed``: Alexander's relative stride 2.3 Fr^0.3 (the gait library's rule),
    never below a slow pendulum-like stepping."""
    natural = 0.25 * math.sqrt(GRAVITY / leg_length)
    stride = leg_length * 2.3 * max(froude(speed, leg_length), 1e-6) ** 0.3
    return max(natural, speed / stride)


def resolve_walk(robot: Robot, body: HumanoidBody, legs: Sequence[Leg], request: WalkRequest, frequency: float,
                 max_velocity_ratio: float, style: WalkStyle = STYLES[0]) -> WalkGait:
    """The walk at ``frequency`` in ``style``: roll angles within the ankles' speed budget, arm swing and pelvis yaw
    for the speed and within the arm, hip-yaw and waist joints' speed limits, and a single-support ZMP range on the
    sole whose lever about the ankle its effort limit can carry (forward walks only: sideways and backward walks keep
    flat feet, still arms and a still pelvis)."""
    duty = style.duty if request.duty_factor is None else float(request.duty_factor)
    leg_length = float(body.straight_height)
    sigma = max(duty - 0.5, 1e-3) / duty
    stance = duty / frequency
    velocity = np.asarray(robot.velocity_limit, dtype=np.float64)
    velocity = np.where(np.isfinite(velocity) & (velocity > 0), velocity, np.inf)
    rate = ROLL_RATE_USE * max_velocity_ratio * float(np.min(np.minimum(velocity[body.ankle], 1e3)))
    # minimum-jerk rolls peak at 1.875 x their mean rate
    heel_off = heel_off_for_effort(robot, body)
    toe_time, heel_time = (1 - heel_off) * sigma * stance, LEAD_FLAT * sigma * stance
    forward = math.cos(request.direction) > 0.9 and request.speed > 0
    fr = froude(request.speed, leg_length) if forward else 0.0
    phases = np.array([(request.phase_offsets or {}).get(leg.label, 0.0 if leg.side == "left" else 0.5)
                       for leg in legs])
    step_height = style.step * STEP_HEIGHT * leg_length if request.step_height is None else float(request.step_height)
    # the upper body's speed budgets: the pelvis yaw turns the hip yaw joints (and the waist, WAIST_COUNTER x), the
    # arm swing the arm joints (Arm.speed), sinusoidally at the cadence
    omega = 2 * math.pi * frequency
    budget = UPPER_BODY_SPEED_USE * max_velocity_ratio
    waist = [velocity[body.waist_yaw] / WAIST_COUNTER] if body.waist_yaw is not None else []
    yaw_limit = min([velocity[d] for d in body.hip_yaw if d >= 0] + waist, default=np.inf)
    pelvis_yaw = min(PELVIS_YAW, PELVIS_YAW * math.sqrt(fr / 0.25), budget * yaw_limit / omega)
    arm_speed = max((arm.speed for arm in body.arms), default=0.0)
    arm_swing = min(max(ARM_SWING_PER_FROUDE * math.sqrt(fr), ARM_SWING_MIN if forward else 0.0), ARM_SWING_MAX,
                    2 * budget / (arm_speed * omega) if arm_speed > 0 else np.inf)
    rear, front = zmp_range(robot, body)
    return WalkGait(speed=request.speed, direction=request.direction, turn_rate=request.turn_rate,
                    ramp_time=request.ramp_time, frequency=frequency, duty_factor=duty, phases=phases,
                    step_height=step_height,
                    heel_strike=min(HEEL_STRIKE_RAD, rate * heel_time / 1.875) if forward and style.rolls else 0.0,
                    toe_off=min(TOE_OFF_RAD, rate * toe_time / 1.875) if forward and style.rolls else 0.0,
                    arm_swing=arm_swing, pelvis_yaw=pelvis_yaw, style=style.name, swing_ramp=style.swing_ramp,
                    knee_min=math.radians(style.knee_min_deg),
                    push_off=math.radians(style.push_off_deg), zmp_rear=rear, zmp_front=front, heel_off=heel_off,
                    stands=tuple((float(a), float(b)) for a, b in request.stands), steady_from=request.steady_from)


def heel_off_for_effort(robot: Robot, body: HumanoidBody) -> float:
    """When the trailing heel lifts (fraction of the double support): TRAIL_HEEL_OFF, later where the trailing foot,
    then on its toe line with the share of the weight the ZMP has not yet moved to the other foot (1 - smoothstep of
    the double support's progress), would need more than ZMP_EFFORT_USE x EFFORT_RATIO of its ankle's effort limit
    (g1's 35 N m ankles carry its 33 kg 11 cm behind the toe line: the heel lifts at 42 % instead of 35 %); at most
    HEEL_OFF_LATEST."""
    effort = np.asarray(robot.effort_limit, dtype=np.float64)[body.ankle]
    effort = float(np.min(np.where(np.isfinite(effort) & (effort > 0), effort, np.inf)))
    lever = max(float(sole.toe_sole[0] - sole.ankle_sole[0]) for sole in body.soles)
    share = ZMP_EFFORT_USE * EFFORT_RATIO * effort / (robot.total_mass * GRAVITY * max(lever, 1e-6))
    for heel_off in np.arange(TRAIL_HEEL_OFF, HEEL_OFF_LATEST + 1e-9, 0.01):
        if 1.0 - float(_smoothstep(np.array(heel_off))) <= share:
            return float(heel_off)
    return HEEL_OFF_LATEST


def zmp_range(robot: Robot, body: HumanoidBody) -> tuple[float, float]:
    """The single-support ZMP range on the sole (fractions of its half length behind and ahead of its centre):
    ZMP_REAR and ZMP_FRONT, narrowed toward the ankle where the whole weight at that lever would need more than
    ZMP_EFFORT_USE x EFFORT_RATIO of the ankle pitch joint's effort limit (romeo's 25.8 N m ankles carry 40 kg at
    5 cm; its sole reaches 12 cm ahead of them)."""
    effort = np.asarray(robot.effort_limit, dtype=np.float64)[body.ankle]
    effort = float(np.min(np.where(np.isfinite(effort) & (effort > 0), effort, np.inf)))
    lever = ZMP_EFFORT_USE * EFFORT_RATIO * effort / (robot.total_mass * GRAVITY)
    half = min(sole.half_length for sole in body.soles)
    ankle_x = [float(sole.ankle_sole[0]) for sole in body.soles]
    front = min(ZMP_FRONT, (min(ankle_x) + lever) / half)
    rear = min(ZMP_REAR, (lever - max(ankle_x)) / half)
    if front + rear < ZMP_MIN_SPAN:  # keep a forward-moving ZMP, centred on the ankles
        middle = float(np.mean(ankle_x)) / half
        front, rear = middle + ZMP_MIN_SPAN / 2, ZMP_MIN_SPAN / 2 - middle
    return float(rear), float(front)


# ----------------------------------------------------------------------------- feet
def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3 - 2 * x)


def _minjerk(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x ** 3 * (10 - 15 * x + 6 * x * x)


# ----------------------------------------------------------------------------- stands (a program's)
def _ramp(gait: WalkGait, times: np.ndarray) -> np.ndarray:
    """The walk's ramp from rest at t = 0 (T,): 0 before, smoothstep over ``ramp_time``."""
    return _smoothstep(times / gait.ramp_time) if gait.ramp_time > 0 else (times >= 0).astype(float)


def _rest(gait: WalkGait, times: np.ndarray) -> np.ndarray:
    """How much the body stands (T,): 1 inside a stand, fading over ``ramp_time`` before it (the body slowing to
    rest) and after it (starting to walk); 0 in a walk without stands."""
    fade = max(gait.ramp_time, 1e-9)
    out = np.zeros(len(times))
    for start, end in gait.stands:
        before = _smoothstep(1.0 - (start - times) / fade) if np.isfinite(start) else np.ones(len(times))
        after = 1.0 - _smoothstep((times - end) / fade) if np.isfinite(end) else np.ones(len(times))
        out = np.maximum(out, np.where(times < start, before, np.where(times > end, after, 1.0)))
    return out


def _activity(gait: WalkGait, times: np.ndarray) -> np.ndarray:
    """How much the walk walks (T,): its ramp from rest, held at 0 in the stands (what the foot rolls, the arm swing
    and the pelvis yaw scale with)."""
    ramp = _ramp(gait, times)
    return np.minimum(ramp, 1.0 - _rest(gait, times)) if gait.stands else ramp


def _in_stand(gait: WalkGait, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Whether each interval [start, end] (N,) lies inside one stand (N,) bool."""
    out = np.zeros(np.shape(start), bool)
    for a, b in gait.stands:
        out |= (start >= a) & (end <= b)
    return out


def _steady_start(gait: WalkGait) -> float:
    """Where a steady cycle of the walk starts (s): after its ramp from rest, or where a program says."""
    return gait.steady_from if gait.steady_from is not None else max(2.0 * gait.ramp_time, 1.0)


SWING_LIFT_SMOOTH = 2  # frames (half width) over which a swing foot's reach lift is smoothed
TERMINAL_SWING = 0.75  # from this swing progress on the leg reaching for the ground caps the pelvis too
def _rot_z(yaw: np.ndarray) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    out = np.zeros(np.shape(yaw) + (3, 3))
    out[..., 0, 0], out[..., 0, 1], out[..., 1, 0], out[..., 1, 1], out[..., 2, 2] = c, -s, s, c, 1.0
    return out


def _pitch_up(theta: np.ndarray) -> np.ndarray:
    """Rotation (..., 3, 3) pitching a sole's toes up by ``theta`` rad (about -y)."""
    c, s = np.cos(theta), np.sin(theta)
    out = np.zeros(np.shape(theta) + (3, 3))
    out[..., 0, 0], out[..., 0, 2], out[..., 1, 1], out[..., 2, 0], out[..., 2, 2] = c, -s, 1.0, s, c
    return out


def _rolled(point: np.ndarray, pivot: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Sole-frame points (..., 3) of a foot pitched up ``theta`` (...) about sole-frame ``pivot`` (..., 3)."""
    return pivot + (_pitch_up(theta) @ (point - pivot)[..., None])[..., 0]


def foot_plan(body: HumanoidBody, gait: WalkGait, path: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
              times: np.ndarray) -> dict[str, np.ndarray]:
    """The feet at ``times`` (T,) (module docstring, step 1); ``path(t) -> (xy (T,2), yaw (T,))`` is the body path.

    Returns ``centre`` (T,K,3) sole-centre targets, ``rot`` (T,K,3,3) foot link orientations, ``ankle`` (T,K,3),
    ``stance`` (T,K) bool, ``parts`` (T,K,2) bool (heel, toe down), ``s`` (T,K) stance progress in [0,1) (NaN in
    swing; 1 or more where a stand cancelled the swing), ``flat`` (T,K,2) and ``flat_yaw`` (T,K) the current (stance)
    or next (swing) flat sole pose, ``pitch`` (T,K) the sole's pitch (toes up), ``since`` / ``until`` (T,K) when the
    current stance began and ends (s; NaN in swing), ``merged`` (T,K) bool: that stance holds a cancelled swing,
    ``times`` (T,), ``min_knee`` / ``push_knee`` the style's stance knee bends (rad).

    In the gait's stands (:attr:`WalkGait.stands`) a swing that lifts off in a stand is cancelled when it would touch
    down after the stand (the body has not started yet) or its foothold would move less than STAND_STEP_TOLERANCE
    (STAND_YAW_TOLERANCE): the foot stays down flat, with no toe-off before and no heel strike after, and the
    footholds after it stay where it is. So once the body is at rest each foot takes at most the one step that brings
    it beside the other, and a start lifts the first foot, from both feet flat, once the body moves."""
    f, duty = gait.frequency, gait.duty_factor
    sigma = gait.double_support
    s_flat, s_heel_off = LEAD_FLAT * sigma, 1 - (1 - gait.heel_off) * sigma
    activity = _activity(gait, times)
    tolerance = STAND_STEP_TOLERANCE * float(body.straight_height)
    num, steps = len(body.soles), len(times)
    out = {"centre": np.zeros((steps, num, 3)), "rot": np.zeros((steps, num, 3, 3)), "ankle": np.zeros((steps, num, 3)),
           "stance": np.zeros((steps, num), bool), "parts": np.zeros((steps, num, 2), bool),
           "s": np.full((steps, num), np.nan), "flat": np.zeros((steps, num, 2)), "flat_yaw": np.zeros((steps, num)),
           "lowest": np.zeros((steps, num)), "push_off": np.zeros((steps, num)), "tau": np.full((steps, num), np.nan),
           "pitch": np.zeros((steps, num)), "since": np.full((steps, num), np.nan),
           "until": np.full((steps, num), np.nan), "merged": np.zeros((steps, num), bool), "times": times,
           "min_knee": gait.knee_min, "push_knee": gait.push_off}
    for k, sole in enumerate(body.soles):
        offset = gait.phases[k]
        cycles = np.arange(math.floor(f * times.min() + offset) - 2, math.ceil(f * times.max() + offset) + 2)
        mids = (cycles - offset) / f + duty / (2 * f)
        mid_xy, mid_yaw = path(mids)
        rz = _rot_z(mid_yaw)
        holds = mid_xy + (rz[:, :2, :2] @ body.nominal[k])  # (N, 2) flat sole centres
        # rolls grow with the speed (and vanish in a stand)
        size = np.clip(np.interp(mids, times, activity, left=0.0, right=activity[-1]), 0.0, 1.0)
        lands = mids - duty / (2 * f)  # (N,) each stance's touch-down and lift-off (s)
        lifts = mids + duty / (2 * f)
        cancel = np.zeros(len(cycles), bool)  # the swing after stance i stays down
        quiet = _in_stand(gait, mids, mids)  # stance i is in a stand: flat, both parts down
        if gait.stands:
            holds, mid_yaw = holds.copy(), mid_yaw.copy()
            lifted = _in_stand(gait, lifts[:-1], lifts[:-1])  # swing i lifts off in a stand ...
            landed = _in_stand(gait, lifts[:-1], lands[1:])  # ... and touches down in it
            for i in np.flatnonzero(lifted):
                turn = (mid_yaw[i + 1] - mid_yaw[i] + np.pi) % (2 * np.pi) - np.pi
                small = np.linalg.norm(holds[i + 1] - holds[i]) < tolerance and abs(turn) < STAND_YAW_TOLERANCE
                if small or not landed[i]:  # a step in place, or one starting before the body does
                    cancel[i] = True
                    holds[i + 1], mid_yaw[i + 1] = holds[i], mid_yaw[i]
            size = np.where(quiet, 0.0, size)
        after_cancel = np.r_[False, cancel[:-1]]
        since, until = lands.copy(), lifts.copy()  # the merged stance each stance belongs to
        for i in np.flatnonzero(cancel):
            since[i + 1] = since[i]
        for i in np.flatnonzero(cancel)[::-1]:
            until[i] = until[i + 1]
        phase = f * times + offset
        n = np.floor(phase).astype(int) - int(cycles[0])
        within = phase - np.floor(phase)
        held = cancel[n] & (within >= duty)  # a cancelled swing: the foot stays down
        stance = (within < duty) | held
        s = within / duty
        tau = np.clip((within - duty) / (1 - duty), 0.0, 1.0)
        nxt = np.minimum(n + 1, len(holds) - 1)
        heel_up = gait.heel_strike * np.where(after_cancel, 0.0, size)
        toe_down = gait.toe_off * np.where(cancel, 0.0, size)
        # stance: heel roll, flat, toe roll
        in_heel = stance & (s < s_flat)
        in_toe = stance & (s >= s_heel_off) & ~held
        theta = np.zeros(steps)
        theta[in_heel] = heel_up[n[in_heel]] * (1 - _minjerk(s[in_heel] / s_flat))
        theta[in_toe] = -toe_down[n[in_toe]] * _minjerk((s[in_toe] - s_heel_off) / (1 - s_heel_off))
        pivot = np.where(in_toe[:, None], sole.toe_sole, sole.heel_sole)
        local = _rolled(np.zeros(3), pivot, theta)  # the sole centre, sole frame
        ankle_local = _rolled(sole.ankle_sole, pivot, theta)
        # swing: from the lift-off pose (toe pivot, toes down) to the touch-down pose (heel, toes up), minimum jerk or
        # with a flat top (the style's swing_ramp)
        m = swing_profile(tau, gait.swing_ramp)
        th_a, th_b = -toe_down[n], heel_up[nxt]
        lift_c = _rolled(np.zeros(3), np.broadcast_to(sole.toe_sole, (steps, 3)), th_a)
        land_c = _rolled(np.zeros(3), np.broadcast_to(sole.heel_sole, (steps, 3)), th_b)
        world_a = np.c_[holds[n], np.zeros(steps)] + (_rot_z(mid_yaw[n]) @ lift_c[..., None])[..., 0]
        world_b = np.c_[holds[nxt], np.zeros(steps)] + (_rot_z(mid_yaw[nxt]) @ land_c[..., None])[..., 0]
        swing_c = world_a + (world_b - world_a) * m[:, None]
        swing_c[:, 2] += gait.step_height * 16 * tau ** 2 * (1 - tau) ** 2
        swing_yaw = mid_yaw[n] + (mid_yaw[nxt] - mid_yaw[n]) * m
        swing_theta = th_a + (th_b - th_a) * m
        yaw = np.where(stance, mid_yaw[n], swing_yaw)
        theta = np.where(stance, theta, swing_theta)
        stance_c = np.c_[holds[n], np.zeros(steps)] + (_rot_z(mid_yaw[n]) @ local[..., None])[..., 0]
        centre = np.where(stance[:, None], stance_c, swing_c)
        rot_sole = _rot_z(yaw) @ _pitch_up(theta)  # sole frame -> world
        # the swing's ankle: rigidly with the sole centre
        ankle = centre + (rot_sole @ sole.ankle_sole[:, None])[..., 0]
        ankle_stance = np.c_[holds[n], np.zeros(steps)] + (_rot_z(mid_yaw[n]) @ ankle_local[..., None])[..., 0]
        ankle = np.where(stance[:, None], ankle_stance, ankle)
        heel_w = centre + (rot_sole @ sole.heel_sole[:, None])[..., 0]
        toe_w = centre + (rot_sole @ sole.toe_sole[:, None])[..., 0]
        out["centre"][:, k] = centre
        out["rot"][:, k] = rot_sole @ sole.link_rot
        out["ankle"][:, k] = ankle
        out["stance"][:, k] = stance
        flat_foot = gait.heel_strike == 0 and gait.toe_off == 0  # no rolls: the whole sole down through the stance
        out["parts"][:, k, HEEL] = stance & ((s < s_heel_off) | flat_foot | cancel[n] | quiet[n])
        out["parts"][:, k, TOE] = stance & ((s >= s_flat) | flat_foot | after_cancel[n] | quiet[n])
        out["s"][stance, k] = s[stance]
        out["since"][stance, k] = since[n][stance]
        out["until"][stance, k] = until[n][stance]
        out["merged"][:, k] = stance & ((since[n] < lands[n]) | (until[n] > lifts[n]))
        out["flat"][:, k] = np.where(stance[:, None], holds[n], holds[nxt])
        out["flat_yaw"][:, k] = np.where(stance, mid_yaw[n], mid_yaw[nxt])
        out["lowest"][:, k] = np.minimum(heel_w[:, 2], toe_w[:, 2]) - sole.pivot_radius
        # the knee bends for the push-off over the toe roll (none before a cancelled swing: the foot stays down)
        out["push_off"][:, k] = np.where(in_toe & ~cancel[n], _smoothstep((s - s_heel_off) / (1 - s_heel_off)), 0.0)
        out["tau"][~stance, k] = tau[~stance]
        out["pitch"][:, k] = theta
    return out


def swing_profile(tau: np.ndarray, ramp: float) -> np.ndarray:
    """Progress (0..1) of a swing at ``tau`` (0..1): minimum jerk for ``ramp`` 0, else the integral of a flat-topped
    speed ramped in and out by smoothsteps over ``ramp`` of the swing (zero speed at both ends, peak 1 / (1 - ramp) x
    the mean: a joint that swings the leg forward moves at an even pace)."""
    tau = np.clip(tau, 0.0, 1.0)
    if ramp <= 0:
        return _minjerk(tau)
    r = min(float(ramp), 0.5)
    ramp_area = lambda x: r * (x ** 3 - x ** 4 / 2)  # noqa: E731  (integral of smoothstep(u / r) du from 0 to r x)
    rising = ramp_area(np.clip(tau / r, 0.0, 1.0))
    flat = np.clip(tau - r, 0.0, 1.0 - 2 * r)
    falling = r / 2 - ramp_area(np.clip((1 - tau) / r, 0.0, 1.0))
    return (rising + flat + np.where(tau > 1 - r, falling, 0.0)) / (1 - r)


def leg_angles(body: HumanoidBody, hips: np.ndarray, ankles: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """Sagittal angles (..., K, 3) of the planar thigh-shank model: thigh (from straight down, its knee end forward
    positive), knee flexion and shank (its ankle end forward positive), for hip and ankle points (..., K, 3) and the
    heading ``yaw`` (...) of the sagittal plane. The pitch joints' speeds follow from these to within a few percent of
    the IK's (``predict_cycle``); the ankle pitch joint is the foot's pitch minus the shank angle."""
    d3 = ankles - hips
    forward = np.stack([np.cos(yaw), np.sin(yaw)], -1)[..., None, :]
    x = np.sum(d3[..., :2] * forward, -1)
    z = d3[..., 2]
    dist = np.maximum(np.sqrt(x ** 2 + z ** 2), 1e-9)
    knee = body.knee_angle(dist)
    thigh_line = np.clip((body.thigh ** 2 + dist ** 2 - body.shank ** 2) / (2 * body.thigh * dist), -1.0, 1.0)
    thigh = np.arctan2(x, -z) + np.arccos(thigh_line)
    return np.stack([thigh, knee, thigh - knee], -1)


def zmp_plan(body: HumanoidBody, gait: WalkGait, feet: dict[str, np.ndarray]) -> np.ndarray:
    """ZMP reference (T,2) on the rolling contact (module docstring, step 4) for a :func:`foot_plan`.

    A stand's double support (both feet down, one of them holding a cancelled swing, longer than two of the walk's)
    keeps the ZMP between the feet (the middle of their single-support ranges): it moves there from the front of the
    foot that stood alone before, and from there to the rear of the foot that will stand alone after, each over at
    most ZMP_SHIFT_S (smoothstep)."""
    sigma = gait.double_support
    stance, s = feet["stance"], feet["s"]
    steps, num = stance.shape
    half = np.array([sole.half_length for sole in body.soles])
    inward = np.array([-np.sign(body.nominal[k, 1]) * ZMP_INWARD * sole.half_width
                       for k, sole in enumerate(body.soles)])

    def point(k: int, along: np.ndarray) -> np.ndarray:  # (T,2) a point on foot k's flat sole
        local = np.stack([along * half[k], np.full(steps, inward[k])], -1)
        yaw = feet["flat_yaw"][:, k]
        c, sn = np.cos(yaw), np.sin(yaw)
        return feet["flat"][:, k] + np.stack([c * local[:, 0] - sn * local[:, 1], sn * local[:, 0] + c * local[:, 1]],
                                             -1)

    ref = feet["flat"].mean(1)
    down = stance.sum(1)
    for k in range(num):
        single = (down == 1) & stance[:, k]
        u = np.clip((np.nan_to_num(s[:, k]) - sigma) / max(1 - 2 * sigma, 1e-6), 0.0, 1.0)
        along = -gait.zmp_rear + (gait.zmp_rear + gait.zmp_front) * u
        ref[single] = point(k, along)[single]
    if num == 2:
        both = down == 2
        lead = np.where(np.nan_to_num(s[:, 0], nan=1.0) < np.nan_to_num(s[:, 1], nan=1.0), 0, 1)
        trail = 1 - lead
        rows = np.arange(steps)
        progress = _smoothstep(np.nan_to_num(s[rows, lead]) / sigma)
        fronts = [point(k, np.full(steps, gait.zmp_front)) for k in range(2)]
        rears = [point(k, np.full(steps, -gait.zmp_rear)) for k in range(2)]
        front = np.where((trail == 0)[:, None], fronts[0], fronts[1])
        rear = np.where((lead == 0)[:, None], rears[0], rears[1])
        ref[both] = ((1 - progress)[:, None] * front + progress[:, None] * rear)[both]
        # a stand: from the foot down first (its front) to the middle, and on to the foot down last (its rear)
        begun, ends = np.max(feet["since"], 1), np.min(feet["until"], 1)  # the double support's ends (NaN: not one)
        length = ends - begun
        walking = (gait.duty_factor - 0.5) / gait.frequency  # a walk's double support (s)
        standing = both & feet["merged"].any(1) & (np.nan_to_num(length) > 2 * walking)
        if standing.any():
            times = feet["times"]
            middle = 0.5 * (point(0, np.full(steps, 0.5 * (gait.zmp_front - gait.zmp_rear)))
                            + point(1, np.full(steps, 0.5 * (gait.zmp_front - gait.zmp_rear))))
            first = np.argmin(np.nan_to_num(feet["since"]), 1)
            last = np.argmax(np.nan_to_num(feet["until"]), 1)
            shift = np.minimum(ZMP_SHIFT_S, 0.5 * np.where(standing, length, 1.0))
            arrived = _smoothstep((times - np.where(standing, begun, 0.0)) / shift)[:, None]
            staying = _smoothstep((np.where(standing, ends, 0.0) - times) / shift)[:, None]
            start = np.where((first == 0)[:, None], fronts[0], fronts[1])
            finish = np.where((last == 0)[:, None], rears[0], rears[1])
            stand_ref = middle + (1 - arrived) * (start - middle) + (1 - staying) * (finish - middle)
            ref[standing] = stand_ref[standing]
    return ref


# ----------------------------------------------------------------------------- height
def reach_cap(body: HumanoidBody, feet: dict[str, np.ndarray], root_xy: np.ndarray, yaw: np.ndarray,
              knee_rad: float) -> np.ndarray:
    """Highest root (T,) with every stance leg's knee bent at least ``knee_rad``, rising to KNEE_PUSH_OFF_DEG over
    the toe roll (module docstring, step 2)."""
    # the knee bends from knee_rad to KNEE_PUSH_OFF_DEG while the foot rolls onto its toe (a person's pre-swing):
    # a leg that leaves the ground straight would have to fold at once as the body moves on
    push = feet["push_off"]
    knee = knee_rad + (feet["push_knee"] - knee_rad) * push  # (T,K)
    terminal = np.nan_to_num(feet["tau"], nan=0.0) >= TERMINAL_SWING
    knee = np.where(terminal, _swing_knee(feet), knee)
    reach = body.reach(knee)
    rz = _rot_z(yaw)  # (T,3,3)
    hips = np.c_[root_xy, np.zeros(len(yaw))][:, None, :] + np.einsum("tij,kj->tki", rz, body.hip_root)
    d = np.linalg.norm(hips[..., :2] - feet["ankle"][..., :2], axis=-1)  # (T,K)
    cap = feet["ankle"][..., 2] + np.sqrt(np.maximum(reach ** 2 - d ** 2, 0.0)) - body.hip_root[:, 2]
    # a swing foot is lifted to suit the pelvis (lift_swing), except in terminal swing, where the leg reaches for
    # the ground and the pelvis must come down in time
    cap = np.where(feet["stance"] | terminal, cap, np.inf)
    out = cap.min(1)
    return np.where(np.isfinite(out), out, body.straight_height)


def _swing_knee(feet: dict[str, np.ndarray]) -> np.ndarray:
    """The straightest a swing knee may be (rad) at swing progress ``tau`` (T,K): as bent as at toe-off (the style's
    push-off knee), straightening to its stance knee toward touch-down (stance frames: the stance knee)."""
    progress = _smoothstep(np.nan_to_num(feet["tau"], nan=1.0))
    return feet["push_knee"] + (feet["min_knee"] - feet["push_knee"]) * progress


def lift_swing(body: HumanoidBody, feet: dict[str, np.ndarray], root_pos: np.ndarray,
               yaw: np.ndarray) -> dict[str, np.ndarray]:
    """``feet`` with each swing foot raised wherever its planned path is out of its leg's reach from the planned
    pelvis ``root_pos`` (T,3), with the knee kept at least as bent as at toe-off (KNEE_PUSH_OFF_DEG) and
    straightening to KNEE_MIN_DEG only toward touch-down: a foot left behind at toe-off while the body vaults
    forward over the new stance leg, or one held low ahead before touch-down, is lifted instead of pulling the
    pelvis down (a person's swing knee flexes for that). The lift is smoothed over SWING_LIFT_SMOOTH
    frames and is zero in stance."""
    reach = body.reach(_swing_knee(feet))  # (T,K)
    hips = root_pos[:, None, :] + np.einsum("tij,kj->tki", _rot_z(yaw), body.hip_root)
    d = np.linalg.norm(hips[..., :2] - feet["ankle"][..., :2], axis=-1)
    need = hips[..., 2] - np.sqrt(np.maximum(reach ** 2 - d ** 2, 0.0)) - feet["ankle"][..., 2]  # (T,K)
    swing = ~feet["stance"]
    extra = np.where(swing, np.maximum(need, 0.0), 0.0)
    if len(extra) > 2 * SWING_LIFT_SMOOTH:
        kernel = np.hanning(2 * SWING_LIFT_SMOOTH + 3)[1:-1]
        kernel /= kernel.sum()
        extra = np.stack([np.convolve(np.pad(extra[:, k], SWING_LIFT_SMOOTH, mode="edge"), kernel, mode="valid")
                          for k in range(extra.shape[1])], -1)
    extra = np.where(swing, extra, 0.0)
    out = dict(feet)
    out["centre"] = feet["centre"].copy()
    out["ankle"] = feet["ankle"].copy()
    out["centre"][..., 2] += extra
    out["ankle"][..., 2] += extra
    out["lowest"] = feet["lowest"] + extra
    return out


def smooth_below(cap: np.ndarray, dt: float, stiffness: float = None) -> np.ndarray:
    """A smooth curve (T,) under ``cap`` (T,): asymmetric least squares (Eilers and Boelens 2005), the
    penalised fit ``min sum_k w_k (z_k - cap_k)^2 + stiffness sum_k (z''_k)^2 dt`` whose weights are HEIGHT_PUSH
    where the fit is above the cap and ``HEIGHT_PULL`` where it is below, iterated until the weights settle; whatever
    still pokes above the cap is clipped (a fraction of a millimetre). The fit hugs the smooth parts of the cap (the
    body vaulting over a stance leg) and bridges its kinks (double support, where the lower leg takes over) with
    bounded vertical acceleration."""
    from scipy.linalg import solveh_banded

    stiffness = HEIGHT_STIFFNESS if stiffness is None else stiffness
    cap = np.asarray(cap, dtype=np.float64)
    steps = len(cap)
    if steps < 3:
        return cap.copy()
    # stiffness dt D2^T D2 (D2: second differences / dt^2) in the upper banded form of solveh_banded: a
    # pentadiagonal matrix, so each reweighted solve is O(T)
    scale = stiffness * dt / dt ** 4
    diag = np.full(steps, 6.0)
    diag[[0, -1]], diag[[1, -2]] = 1.0, 5.0
    off1 = np.full(steps - 1, -4.0)
    off1[[0, -1]] = -2.0
    banded = np.zeros((3, steps))
    banded[0, 2:] = 1.0
    banded[1, 1:] = off1
    banded[2] = diag
    banded *= scale
    weight = np.full(steps, HEIGHT_PULL)
    z = cap
    for _ in range(50):
        system = banded.copy()
        system[2] += weight
        z = solveh_banded(system, weight * cap)
        new = np.where(z > cap, HEIGHT_PUSH, HEIGHT_PULL)
        if np.array_equal(new, weight):
            break
        weight = new
    return np.minimum(z, cap)


def height_plan(body: HumanoidBody, feet: dict[str, np.ndarray], root_xy: np.ndarray, yaw: np.ndarray,
                dt: float) -> np.ndarray:
    """Root height (T,): the reach cap with the stance knee at the style's straightest (KNEE_MIN_DEG in the human
    style), less HEIGHT_MARGIN, smoothed below."""
    cap = reach_cap(body, feet, root_xy, yaw, float(feet["min_knee"])) - HEIGHT_MARGIN
    return smooth_below(np.minimum(cap, body.straight_height), dt)


def predicted_knee(body: HumanoidBody, feet: dict[str, np.ndarray], root: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """Knee bend (T,K) rad the planar leg model predicts for root positions (T,3) (NaN in swing)."""
    hips = root[:, None, :] + np.einsum("tij,kj->tki", _rot_z(yaw), body.hip_root)
    knee = body.knee_angle(np.linalg.norm(hips - feet["ankle"], axis=-1))
    return np.where(feet["stance"], knee, np.nan)


# ----------------------------------------------------------------------------- upper body
def upper_body(robot: Robot, body: HumanoidBody, gait: WalkGait, times: np.ndarray,
               joint_pos: np.ndarray) -> np.ndarray:
    """Pelvis yaw (T,) added to the path's yaw, and the arm and waist joints written into ``joint_pos`` (T,J)
    (module docstring, step 3). In a stand both fade out (:func:`_rest`): the arms hang at rest."""
    ramp = _ramp(gait, times)
    left = int(np.argmax(body.nominal[:, 1])) if len(body.nominal) else 0
    pelvis = _pelvis_only(body, gait, times)
    lower, upper = robot.lower + JOINT_MARGIN, robot.upper - JOINT_MARGIN
    amplitude = 0.5 * gait.arm_swing * (ARM_SWING_IN_PLACE + (1 - ARM_SWING_IN_PLACE) * ramp)
    if gait.stands:
        amplitude = amplitude * (1.0 - _rest(gait, times))
    for arm in body.arms:
        leg = left if arm.side > 0 else 1 - left
        swing = -np.cos(2 * np.pi * (gait.frequency * times + gait.phases[leg]))  # forward while its leg is back
        joint_pos[:, list(arm.joints)] = arm.at(amplitude * swing)
    if body.waist_yaw is not None:
        joint_pos[:, body.waist_yaw] = np.clip(-WAIST_COUNTER * body.waist_sign * pelvis, lower[body.waist_yaw],
                                               upper[body.waist_yaw])
    return pelvis


# ----------------------------------------------------------------------------- cadence before the solve
def cadence_candidates(base: float, lowest: float = 1.0) -> list[float]:
    """Cadences (Hz) from ``base`` up in steps of 1/0.92, at most MAX_CADENCE_GAIN x ``base``; with ``lowest`` < 1 also
    down to that fraction of it, in steps of 0.92 (lowest first)."""
    out = [base]
    while out[-1] / 0.92 <= MAX_CADENCE_GAIN * base:
        out.append(out[-1] / 0.92)
    while out[0] * 0.92 >= lowest * base - 1e-12:
        out.insert(0, out[0] * 0.92)
    return out


def predict_cycle(body: HumanoidBody, gait: WalkGait, path: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                  velocity_limit: np.ndarray | None = None, dt: float = 0.02) -> dict[str, float]:
    """Mean pelvis height (of the straight-legged height) and mean stance knee (deg) of one steady cycle by the reach
    model of step 2 (no IK, no sway; sampled every 10 ms); with ``velocity_limit`` (J,) also the largest speed of a
    hip pitch, knee or ankle pitch joint over its limit (``ratio``) and that joint's dof (``joint``), by the planar leg
    model (:func:`leg_angles`; within a few percent of the IK's, in a millisecond), sampled at the clip's frame time
    ``dt`` (the pelvis height's smoothing depends on it)."""

    def plan(step: float) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        times = _steady_start(gait) + np.arange(0.0, 2.0 / gait.frequency, step)
        feet = foot_plan(body, gait, path, times)
        xy, yaw = path(times)
        yaw = yaw + _pelvis_only(body, gait, times)
        xy = root_guess(body, xy, yaw)
        return feet, np.c_[xy, height_plan(body, feet, xy, yaw, step)], yaw

    feet, root, yaw = plan(0.01)
    knee = predicted_knee(body, feet, root, yaw)
    out = {"height_frac": float(root[:, 2].mean() / body.straight_height),
           "knee_deg": float(np.degrees(np.nanmean(knee)))}
    if velocity_limit is not None:
        feet, root, yaw = plan(dt)
        feet = lift_swing(body, feet, root, yaw)
        hips = root[:, None, :] + np.einsum("tij,kj->tki", _rot_z(yaw), body.hip_root)
        angles = leg_angles(body, hips, feet["ankle"], yaw)  # (T, K, 3)
        joints = np.stack([angles[..., 0], angles[..., 1], feet["pitch"] - angles[..., 2]], -1)
        speed = np.abs(np.gradient(joints, dt, axis=0))[1:-1].max(0)  # (K, 3)
        dofs = np.stack([body.hip, body.knee, body.ankle], -1)  # (K, 3)
        limit = np.asarray(velocity_limit, dtype=np.float64)[dofs]
        ratio = np.where(np.isfinite(limit) & (limit > 0), speed / np.where(limit > 0, limit, 1.0), 0.0)
        worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        out.update(ratio=float(ratio[worst]), joint=int(dofs[worst]))
    return out


def meets_targets(prediction: dict[str, float]) -> bool:
    return prediction["height_frac"] >= TARGET_HEIGHT and prediction["knee_deg"] <= TARGET_KNEE_DEG


def root_guess(body: HumanoidBody, path_xy: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """Root xy (T,2) before balancing: the whole-body CoM over the middle of the feet's nominal positions (the
    ZMP's mean), i.e. the path moved by the feet's mean offset minus the CoM's offset from the root."""
    shift = body.nominal.mean(0) - body.com_root[:2]
    return path_xy + np.einsum("tij,j->ti", _rot_z(yaw)[:, :2, :2], shift)


def _pelvis_only(body: HumanoidBody, gait: WalkGait, times: np.ndarray) -> np.ndarray:
    """The pelvis yaw (T,) of :func:`upper_body`: with the swing side's hip forward, scaled by the walk's activity."""
    left = int(np.argmax(body.nominal[:, 1])) if len(body.nominal) else 0
    return -gait.pelvis_yaw * _activity(gait, times) * np.cos(2 * np.pi * (gait.frequency * times + gait.phases[left]))


# ----------------------------------------------------------------------------- the clip
@dataclass
class WalkResult:
    motion: Motion
    gait: WalkGait
    ik_error_m: float
    joint_velocity_ratio: float
    figures: dict[str, Any]
    limit: SpeedLimit | None = None  # what made the walk slower than asked (None: it walks at the asked speed)
    effort_ratio: float = 0.0  # the clip's largest feedforward torque over its joint's effort limit


@dataclass(frozen=True)
class SpeedLimit:
    """Why a walk is slower than asked: the joint whose limit it would pass at the asked speed in every style and
    cadence, how many times that limit the asked walk needed, and which limit (``"velocity"`` or ``"effort"``)."""

    joint: str
    ratio: float
    kind: str


def _com(robot: Robot, link_pos: np.ndarray, link_rot: np.ndarray) -> np.ndarray:
    massive = [(i, link.inertial) for i, link in enumerate(robot.links)
               if link.inertial is not None and link.inertial.mass > 0]
    idx = np.array([i for i, _ in massive])
    mass = np.array([inertial.mass for _, inertial in massive])
    local = np.stack([inertial.origin[:3, 3] for _, inertial in massive])
    pts = link_pos[:, idx] + np.einsum("fnij,nj->fni", link_rot[:, idx], local)
    return np.einsum("n,fni->fi", mass, pts) / mass.sum()


def _multibody_zmp(robot: Robot, link_pos: np.ndarray, link_rot: np.ndarray, dt: float) -> np.ndarray:
    com, force, moment, _ = centroidal_wrench(robot, link_pos, link_rot, dt)
    fz = np.maximum(force[:, 2], 1e-6)
    return np.stack([com[:, 0] - (com[:, 2] * force[:, 0] + moment[:, 1]) / fz,
                     com[:, 1] - (com[:, 2] * force[:, 1] - moment[:, 0]) / fz], -1)


class WalkSolver:
    """Builds one clip of the walk (module docstring, steps 1-4) for a robot and its legs."""

    def __init__(self, robot: Robot, legs: Sequence[Leg], body: HumanoidBody):
        self.robot, self.legs, self.body = robot, list(legs), body
        self.ik = LegIK(robot, legs)
        self.fk = self.ik.fk
        self.offsets = np.array([sole.centre_link for sole in body.soles])
        q0 = rest_pose(robot.num_dofs, body.arms)  # the arms hang
        q0[body.knee] = body.knee_flex * 0.4  # start IK with the knees bent the right way
        self.q_init = np.clip(q0, robot.lower, robot.upper)

    def link_poses(self, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray):
        with torch.no_grad():
            pos, rot = self.fk(torch.as_tensor(root_pos), torch.as_tensor(root_quat), torch.as_tensor(joint_pos))
        return pos.numpy(), rot.numpy()

    def solve_legs(self, root_pos: np.ndarray, root_quat: np.ndarray, q: np.ndarray, feet: dict[str, np.ndarray],
                   iterations: int) -> tuple[np.ndarray, float]:
        return self.ik.solve(root_pos, root_quat, q, self.q_init, self.offsets, feet["centre"], feet["rot"],
                             iterations=iterations)

    def probe(self, gait: WalkGait, path: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
              fps: float) -> np.ndarray:
        """Joint speeds (J,) rad/s over one steady cycle (no ZMP sway): what the velocity check predicts from."""
        times = _steady_start(gait) + np.arange(int(math.ceil(fps / gait.frequency)) + 3) / fps
        feet = foot_plan(self.body, gait, path, times)
        xy, yaw = path(times)
        q = np.tile(self.q_init, (len(times), 1))
        yaw = yaw + upper_body(self.robot, self.body, gait, times, q)
        xy = root_guess(self.body, xy, yaw)
        z = height_plan(self.body, feet, xy, yaw, 1.0 / fps)
        feet = lift_swing(self.body, feet, np.c_[xy, z], yaw)
        q, _ = self.solve_legs(np.c_[xy, z], yaw_quat(yaw), q, feet, 120)
        # between frames that both converged (a frame at the edge of the reach is a jump, not a joint speed)
        good = self.ik.frame_errors < 1e-4
        pairs = good[1:] & good[:-1]
        speed = np.abs(np.diff(q, axis=0)) * fps
        return speed[pairs].max(0) if pairs.any() else speed.max(0)

    def build(self, gait: WalkGait, path: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], duration: float,
              fps: float, prompt: str) -> tuple[Motion, float, dict[str, Any]]:
        """The clip (steps 1-4 of the module docstring), its IK error (m) and figures of the plan."""
        robot, body = self.robot, self.body
        frames = int(round(duration * fps)) + 1
        times = np.arange(frames) / fps
        frame_dt = 1.0 / fps
        sub = max(int(math.ceil(frame_dt / ZMP_DT - 1e-9)), 1)
        dt = frame_dt / sub
        fine = times[0] - ZMP_PREROLL + np.arange(int(round((duration + ZMP_PREROLL + ZMP_PREVIEW) / dt)) + 1) * dt
        feet_fine = foot_plan(body, gait, path, fine)
        feet = foot_plan(body, gait, path, times)
        q = np.tile(self.q_init, (frames, 1))
        pelvis = upper_body(robot, body, gait, times, q)
        xy_fine, yaw_fine = path(fine)
        yaw_fine = yaw_fine + _pelvis_only(body, gait, fine)
        _, yaw = path(times)
        yaw = yaw + pelvis
        root_quat = yaw_quat(yaw)
        zmp_fine = zmp_plan(body, gait, feet_fine)
        zmp_frames = zmp_plan(body, gait, feet)
        # stage 1: cart-table CoM with the planned height (twice: the height depends on where the root goes)
        com_off = np.einsum("tij,j->ti", _rot_z(yaw_fine), body.com_root)  # (T,3) CoM - root
        root_xy = root_guess(body, xy_fine, yaw_fine)
        for _ in range(2):
            z_fine = height_plan(body, feet_fine, root_xy, yaw_fine, dt)
            h = z_fine + com_off[:, 2]
            hdd = np.clip(np.gradient(np.gradient(h, dt), dt), -0.4 * GRAVITY, None)
            com = com_for_zmp(zmp_fine, dt, h, hdd)
            root_xy = com - com_off[:, :2]
        goal = np.stack([np.interp(times, fine, com[:, d]) for d in range(2)], -1)
        root_xy = np.stack([np.interp(times, fine, root_xy[:, d]) for d in range(2)], -1)
        z = height_plan(body, feet, root_xy, yaw, frame_dt)
        root_pos = np.c_[root_xy, z]
        com_off_z = float(body.com_root[2])
        q, error = self.solve_legs(root_pos, root_quat, q, lift_swing(body, feet, root_pos, yaw), 150)
        # root shifts: the whole-body CoM (FK) onto the plan; then the multibody ZMP corrections (the legs' and arms'
        # angular momentum moves the ZMP by centimetres), until its error stops improving
        weight = np.ones(frames)
        weight[:2] = weight[-2:] = 0.0  # one-sided differences at the ends
        best = (np.inf, root_pos.copy(), q.copy(), error)
        cop = zmp_frames
        for stage in range(ZMP_CORRECTIONS_MAX + 1):
            if stage:
                pad = int(round(1.0 * fps))
                err = np.pad(zmp_frames - cop, ((pad, pad), (0, 0)))
                w = np.pad(weight, pad, constant_values=1.0)  # no correction before and after the clip
                h = np.pad(root_pos[:, 2] + com_off_z, pad, mode="edge")
                hdd = np.clip(np.gradient(np.gradient(h, frame_dt), frame_dt), -0.4 * GRAVITY, None)
                goal = goal + com_for_zmp(err, frame_dt, h, hdd, weight=w)[pad:-pad]
            for _ in range(ZMP_ITERATIONS):
                link_pos, link_rot = self.link_poses(root_pos, root_quat, q)
                root_pos[:, :2] += goal - _com(robot, link_pos, link_rot)[:, :2]
                root_pos[:, 2] = np.minimum(root_pos[:, 2], height_plan(body, feet, root_pos[:, :2], yaw, frame_dt))
                q, error = self.solve_legs(root_pos, root_quat, q, lift_swing(body, feet, root_pos, yaw), 60)
            link_pos, link_rot = self.link_poses(root_pos, root_quat, q)
            cop = _multibody_zmp(robot, link_pos, link_rot, frame_dt)
            zmp_error = float(np.linalg.norm(zmp_frames - cop, axis=-1)[weight > 0].mean())
            improved = zmp_error < 0.8 * best[0]
            if zmp_error < best[0]:
                best = (zmp_error, root_pos.copy(), q.copy(), error)
            if stage and (zmp_error < ZMP_TOLERANCE or not improved):
                break
        zmp_error, root_pos, q, error = best
        motion = Motion(fps=fps, joint_names=robot.joint_names, joint_pos=q, root_pos=root_pos, root_quat=root_quat,
                        foot_names=[leg.foot_link for leg in self.legs], foot_offsets=self.offsets,
                        foot_contacts=feet["stance"], prompt=prompt,
                        foot_contact_points=np.array([[s.heel_link, s.toe_link] for s in body.soles]),
                        foot_contact_parts=feet["parts"], foot_contact_labels=list(CONTACT_LABELS))
        figures = {"pelvis_height_frac": float(root_pos[:, 2].mean() / body.straight_height),
                   "zmp_error_m": zmp_error, "zmp_corrections": stage,
                   "heel_strike_rad": gait.heel_strike, "toe_off_rad": gait.toe_off,
                   "arm_swing_rad": gait.arm_swing, "pelvis_yaw_rad": gait.pelvis_yaw}
        return motion, error, figures


def _style(name: str) -> WalkStyle:
    return next(style for style in STYLES if style.name == name)


def walk_velocity_limits(robot: Robot) -> tuple[np.ndarray, np.ndarray]:
    """(J,) the joint speeds a walk plans its style and cadence within, and (J,) which of them its joints' damping
    sets. A joint with viscous damping b (the robot file's) turns no faster than its no-load speed tau_max / b, where
    the damping alone takes the whole effort limit; that is its velocity limit where the file's is higher
    (robotis_op3's Dynamixel servos, 5 N m and b 1.084: 4.6 rad/s, their datasheet's no-load speed, against the
    20 rad/s AKD assumes without a limit in the MJCF). The walk's effort check then counts the damping's torque
    too (:func:`akd_core.motion.feasibility.motor_torques`)."""
    limit = np.asarray(robot.velocity_limit, dtype=np.float64).copy()
    damping = np.array([j.damping for j in robot.actuated_joints], dtype=np.float64)
    effort = np.asarray(robot.effort_limit, dtype=np.float64)
    no_load = np.where((damping > 0) & np.isfinite(effort) & (effort > 0), effort / np.maximum(damping, 1e-12),
                       np.inf)
    damped = no_load < limit
    return np.where(damped, no_load, limit), damped


def effort_speed_factor(robot: Robot, motion: Motion, torques: np.ndarray,
                        percentile: float = 100.0) -> float | None:
    """The largest speed factor s <= 1 at which ``motion`` played s times as fast (the same poses; the body's torques
    ``tau_static + s^2 (tau - tau_static)``, exact for the joint-space dynamics, and the joints' own damping ~ s,
    rotor inertia ~ s^2, :func:`akd_core.motion.feasibility.motor_torques`) keeps every joint within
    EFFORT_RATIO of its effort limit (``percentile``: as :func:`akd_core.motion.feasibility.effort_ratios`); None
    when even its static torques (the poses held still) do not. ``torques``: :func:`joint_torques` of ``motion``
    (motors included)."""
    from akd_core.motion.feasibility import effort_ratios, joint_torques, motor_torques

    still = Motion(fps=motion.fps * 1e-3, joint_names=motion.joint_names, joint_pos=motion.joint_pos,
                   root_pos=motion.root_pos, root_quat=motion.root_quat, foot_names=motion.foot_names,
                   foot_offsets=motion.foot_offsets, foot_contacts=motion.foot_contacts,
                   foot_contact_points=motion.foot_contact_points, foot_contact_parts=motion.foot_contact_parts,
                   foot_contact_labels=motion.foot_contact_labels)
    static = joint_torques(robot, still, motors=False)
    body = torques - motor_torques(robot, motion)
    for factor in np.linspace(0.95, 0.1, 18):
        scaled = static + factor ** 2 * (body - static) + motor_torques(robot, motion, factor)
        if effort_ratios(robot, scaled, percentile=percentile).max(initial=0.0) <= EFFORT_RATIO:
            return float(factor)
    return None


def generate_walk(robot: Robot, legs: Sequence[Leg], body: HumanoidBody, request: WalkRequest,
                  path_for: Callable[[WalkGait], Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]],
                  duration: float, fps: float, prompt: str = "", max_velocity_ratio: float = 1.0,
                  slow_down: bool = True) -> WalkResult:
    """A human-like walk of ``robot`` (module docstring). ``path_for(gait)`` returns the body path function of a
    resolved walk (the gait library's ``body_path``). Raises nothing for an asked speed it cannot keep: the style
    adapts first (:data:`STYLES`, the cadence), then the speed, with a note naming the joint and its limit
    (``slow_down=False``: a MotionError naming it)."""
    from akd_core.io.errors import MotionError
    from akd_core.motion.feasibility import effort_ratios, joint_torques

    leg_length = float(body.straight_height)
    solver = WalkSolver(robot, legs, body)
    notes: list[str] = []
    limit, damped = walk_velocity_limits(robot)
    finite = np.isfinite(limit) & (limit > 0)
    budget = PREDICT_MARGIN * max_velocity_ratio
    styles = STYLES if request.duty_factor is None else STYLES[:2]  # an asked duty factor keeps its swing's length
    asked = request.speed
    speed_limit: SpeedLimit | None = None

    def worst(speeds: np.ndarray) -> tuple[float, int]:
        ratios = np.where(finite, speeds / np.where(finite, limit, 1.0), 0.0)
        return float(ratios.max()), int(ratios.argmax())

    def at_speed(req: WalkRequest, speed: float) -> WalkRequest:
        scale = speed / req.speed if req.speed > 0 else 1.0
        return replace(req, speed=speed, turn_rate=req.turn_rate * scale)

    def choose(req: WalkRequest, among: Sequence[WalkStyle] = styles) -> tuple[WalkGait | None, dict[str, Any],
                                                                                list[str]]:
        """The walk at this speed: the first style with a cadence whose steady cycle the planar leg model predicts
        within the velocity limits and near-straight (the lowest such cadence), else the first with one within the
        limits (the straightest); None and the least demanding candidate's prediction when none is."""
        base = req.frequency or _alexander_cadence(req.speed, leg_length)
        least: dict[str, Any] = {"ratio": np.inf}
        fitting: list[tuple[WalkGait, dict[str, Any]]] = []
        for style in among:
            # an adapted style may also step slower than Alexander's cadence (longer, slower steps)
            candidates = ([float(base)] if req.frequency is not None else
                          cadence_candidates(base, MIN_CADENCE_GAIN if style is not STYLES[0] else 1.0))
            walks = [resolve_walk(robot, body, legs, req, f, max_velocity_ratio, style) for f in candidates]
            preds = [predict_cycle(body, g, path_for(g), limit, 1.0 / fps) for g in walks]
            for g, p in zip(walks, preds):
                if p["ratio"] < least["ratio"]:
                    least = dict(p, gait=g, style=style)
            fits = [i for i, p in enumerate(preds) if p["ratio"] <= budget]
            straight = [i for i in fits if meets_targets(preds[i])]
            if straight:
                i = straight[0]
                out = []
                if candidates[i] != base:
                    out.append(f"cadence {'raised' if candidates[i] > base else 'lowered'} from {base:.2f} to "
                               f"{candidates[i]:.2f} Hz ({'shorter' if candidates[i] > base else 'longer'} steps at "
                               f"{req.speed:.2f} m/s) so the legs stay near-straight and within their velocity "
                               "limits: predicted pelvis height "
                               f"{100 * preds[i]['height_frac']:.0f} % of standing, stance knee "
                               f"{preds[i]['knee_deg']:.0f} deg")
                return walks[i], preds[i], out
            if fits:
                i = max(fits, key=lambda j: preds[j]["height_frac"])
                fitting.append((walks[i], preds[i]))
        if fitting:
            g, p = fitting[0]
            return g, p, [f"cadence {g.frequency:.2f} Hz: longer steps keep the joints within their velocity limits "
                          f"(predicted pelvis height {100 * p['height_frac']:.0f} %, stance knee "
                          f"{p['knee_deg']:.0f} deg)"]
        return None, least, []

    def lower(req: WalkRequest, speed: float, ratio: float, joint: int, kind: str, how: str) -> WalkRequest:
        """The request at ``speed``, with a note naming the joint and the limit that made it slower."""
        nonlocal speed_limit
        name = robot.joint_names[joint]
        if speed_limit is None:
            speed_limit = SpeedLimit(joint=name, ratio=float(ratio), kind=kind)
        value, unit = (limit[joint], "rad/s") if kind == "velocity" else (robot.effort_limit[joint], "N m")
        allowed = max_velocity_ratio if kind == "velocity" else EFFORT_RATIO
        what = (f"velocity limit ({value:.1f} {unit}, where its damping takes its whole effort limit; allowed "
                if kind == "velocity" and damped[joint] else f"URDF {kind} limit ({value:.1f} {unit}; allowed ")
        message = f"walk at {req.speed:.2f} m/s needs joint '{name}' at {ratio:.2f} x its {what}{allowed:.2f} x) {how}"
        if not slow_down:
            raise MotionError(f"{message}; ask for a slower walk or raise the limit")
        notes.append(f"{message}: slowed to {speed:.2f} m/s")
        log.warning(notes[-1])
        return at_speed(req, speed)

    moving = request.speed > 0 or request.turn_rate != 0
    # the style and cadence before the solve, by the planar leg model; the speed only where no style fits: the
    # highest that one does (bisection over the style that asked the least of its joints)
    gait, pred, cadence_notes = choose(request)
    if gait is None and moving:
        easiest = list(dict.fromkeys([pred["style"], styles[-1]]))
        lo, hi, found = 0.0, request.speed, None
        for _ in range(SPEED_BISECTIONS):
            mid = 0.5 * (lo + hi)
            trial = choose(at_speed(request, mid), easiest)
            if trial[0] is not None:
                lo, found = mid, trial
            else:
                hi = mid
        speed = lo if found is not None else 0.5 * hi
        request = lower(request, speed, pred["ratio"], pred["joint"], "velocity",
                        f"in every walk style ({', '.join(s.name for s in styles)}) and cadence")
        gait, pred, cadence_notes = choose(request)
        if gait is None:
            gait, pred, cadence_notes = found or (pred["gait"], pred, [])
    elif gait is None:
        gait = pred["gait"]
    # one IK cycle checks the prediction (the real legs, out of the sagittal plane too)
    for _ in range(4):
        ratio, joint = worst(solver.probe(gait, path_for(gait), fps))
        if ratio <= max_velocity_ratio or not moving:
            break
        # a tenth slower at a time (the style and cadence chosen again): joint speeds are not proportional to it
        request = lower(request, request.speed * max(0.97 * max_velocity_ratio / ratio, PROBE_STEP), ratio, joint,
                        "velocity", f"at {gait.frequency:.2f} Hz in the walk style '{gait.style}' (one cycle solved "
                        "by IK)")
        found_gait, pred, cadence_notes = choose(request)
        gait = found_gait or pred["gait"]
    if gait.style != STYLES[0].name:
        plain = resolve_walk(robot, body, legs, request, gait.frequency, max_velocity_ratio, STYLES[0])
        why = predict_cycle(body, plain, path_for(plain), limit, 1.0 / fps)
        notes.append(f"walk style '{gait.style}' (stance {100 * gait.duty_factor:.0f} % of the cycle, "
                     + ("minimum-jerk swing" if gait.swing_ramp == 0 else
                        f"even swing ramped over {100 * gait.swing_ramp:.0f} %")
                     + ("" if gait.heel_strike or gait.toe_off else ", flat feet")
                     + f", steps {100 * gait.step_height / leg_length:.1f} % of the leg high): the human style would "
                     f"need joint '{robot.joint_names[why['joint']]}' at {why['ratio']:.2f} x its "
                     + ("" if damped[why['joint']] else "URDF ") + f"velocity limit ({limit[why['joint']]:.1f} rad/s"
                     + (", its damping's" if damped[why['joint']] else "") + f"; allowed {max_velocity_ratio:.2f} x)")
        log.info(notes[-1])
    notes += cadence_notes
    # the clip, solved once; time-scaled (the same stride, slower) only if the full clip, sway and all, still passes a
    # limit the one-cycle probe missed; then the feedforward torques against the effort limits
    effort, effort_changed = 0.0, False
    for attempt in range(4):
        motion, error, figures = solver.build(gait, path_for(gait), duration, fps, prompt)
        ratio, joint = worst(np.abs(motion.joint_vel().astype(np.float64)).max(0))
        last = attempt == 3 or not moving
        if ratio > max_velocity_ratio and not last:
            scale = 0.97 * max_velocity_ratio / ratio
            request = lower(request, request.speed * scale, ratio, joint, "velocity",
                            f"at {gait.frequency:.2f} Hz (the full clip, sway included)")
            gait = resolve_walk(robot, body, legs, request, gait.frequency * scale, max_velocity_ratio,
                                _style(gait.style))
            continue
        torques = joint_torques(robot, motion)
        efforts = effort_ratios(robot, torques)
        effort = float(efforts.max(initial=0.0))
        e_joint = int(efforts.argmax()) if efforts.size else 0
        if effort <= EFFORT_RATIO:
            break
        factor = None if (last or effort_changed) else effort_speed_factor(robot, motion, torques)
        if factor is None:
            message = (f"walk at {gait.speed:.2f} m/s needs joint '{robot.joint_names[e_joint]}' at {effort:.2f} x "
                       f"its URDF effort limit ({robot.effort_limit[e_joint]:.1f} N m; allowed {EFFORT_RATIO:.2f} x)"
                       + ("" if effort_changed or last else ": its poses alone need that much") + "; the tracker "
                       "clamps its feedforward there")
            if not slow_down:
                raise MotionError(f"{message}; raise the limit")
            notes.append(f"warning: {message}")
            log.warning(message)
            break
        # one slower clip: the effort limit's share of the speed, the style kept (its cadence chosen again)
        effort_changed = True
        request = lower(request, request.speed * factor, effort, e_joint, "effort", f"at {gait.frequency:.2f} Hz")
        found_gait, _, _ = choose(request, [_style(gait.style)])
        gait = found_gait or resolve_walk(robot, body, legs, request, gait.frequency * factor, max_velocity_ratio,
                                          _style(gait.style))
    gait.notes = notes
    figures["ik_error_m"] = error
    return WalkResult(motion=motion, gait=gait, ik_error_m=error, joint_velocity_ratio=ratio, figures=figures,
                      limit=speed_limit if gait.speed < asked - 1e-9 else None, effort_ratio=effort)


__all__ = ["CONTACT_LABELS", "HumanoidBody", "Sole", "Arm", "WalkRequest", "WalkGait", "WalkResult", "WalkStyle",
           "STYLES", "SpeedLimit", "effort_speed_factor", "humanoid_body", "rest_pose", "swing_profile", "leg_angles",
           "zmp_range", "heel_off_for_effort",
           "resolve_walk", "foot_plan", "zmp_plan", "reach_cap", "smooth_below", "height_plan", "upper_body",
           "cadence_candidates", "predict_cycle", "generate_walk"]
