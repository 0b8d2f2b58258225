"""One place for the physics both engines share: the PD law's gains, effort limits, armature, and the contact
material (friction coefficient plus each engine's realisation of a stiff, non-sinking contact).

PD law, in every engine: ``tau = clamp(kp (q* - q) - kd qdot, -effort, effort)`` with ``q*`` the PD target,
linearly interpolated between control frames (:func:`akd_core.physics.engines.base.substep_targets`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from akd_core.io.errors import ConfigError
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.robot import Robot

log = logging.getLogger(__name__)

# the 12-DoF quadruped our contact/gain defaults were measured on (docs/architecture.md, "Backends")
REFERENCE_MASS_KG = 13.0
GRAVITY = 9.81
KP_PER_KG = 4.5  # N m/(rad kg): PD stiffness per kg of robot, the gradient method's (its contact gradients were
# measured with it)
KP_PER_KG_MPC = 18.0  # sampling MPC: 4x stiffer. Measured on the built-in quadruped's demo trot (1.33 m/s): at 4.5
# the joints lag under stance load and the body falls behind (velocity-feedforward replay 0.90 m link error; MPC
# could not recover it), at 9 0.26 m, at 18 0.13 m with 0.1 % of torque samples at the effort limit.


@dataclass
class ContactParams:
    """Ground contact. ``mu`` is Coulomb friction in both engines. The rest realises a stiff contact per engine:

    MuJoCo (soft constraints, true Coulomb cone): elliptic cones, ``impratio`` (tangential/normal impedance ratio:
    > 1 lets the cone hold a stance foot instead of creeping), ``solref_timeconst_s`` (contact time constant:
    0.02 s, MuJoCo's default, lets these robots sink 8-15 mm; 4 ms keeps it under 5 mm at 2 ms steps).
    Newton Featherstone (penalty springs): normal stiffness ``ke`` N/m, damping ``kd`` N s/m, and friction as a
    viscous slope ``kf`` N s/m capped at ``mu`` times the normal force (it creeps where MuJoCo sticks).
    """

    mu: float = 1.0
    impratio: float = 10.0
    solref_timeconst_s: float = 0.004
    ke: float = 2e4
    kd: float = 5e2
    kf: float = 1e2


@dataclass
class PhysicsParams:
    """Resolved per-robot physics: gains (J,), armature, effort limits, contact material."""

    kp: np.ndarray  # (J,) N m/rad
    kd: np.ndarray  # (J,) N m s/rad
    armature: np.ndarray  # (J,) kg m^2
    effort: np.ndarray  # (J,) N m
    contact: ContactParams

    def to_dict(self) -> dict:
        c = self.contact
        return {"kp": self.kp.tolist(), "kd": self.kd.tolist(), "armature": self.armature.tolist(),
                "contact": {"mu": c.mu, "impratio": c.impratio, "solref_timeconst_s": c.solref_timeconst_s,
                            "ke": c.ke, "kd": c.kd, "kf": c.kf}}


def subtree_inertia_about_joints(robot: Robot) -> np.ndarray:
    """(J,) moment of inertia (kg m^2) of each actuated joint's child subtree about the joint axis at the
    reference pose (zero angles), using point masses at link COMs plus each link's own inertia about the axis."""
    fk = ForwardKinematics(robot)
    frames = torch.zeros(1, 3, dtype=torch.float64)
    quat = torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    link_pos, link_rot = fk(frames, quat, torch.zeros(1, robot.num_dofs, dtype=torch.float64))
    link_pos, link_rot = link_pos[0].numpy(), link_rot[0].numpy()
    index = {name: i for i, name in enumerate(robot.link_names)}
    children: dict[str, list[str]] = {}
    for joint in robot.joints:
        children.setdefault(joint.parent, []).append(joint.child)

    def subtree(link: str) -> list[str]:
        out = [link]
        for child in children.get(link, []):
            out += subtree(child)
        return out

    inertias = np.zeros(robot.num_dofs)
    for j, name in enumerate(robot.joint_names):
        joint = robot.joint(name)
        parent_i = index[joint.parent]
        anchor = link_pos[parent_i] + link_rot[parent_i] @ joint.origin[:3, 3]
        axis = link_rot[index[joint.child]] @ np.asarray(joint.axis, dtype=np.float64)
        axis = axis / max(np.linalg.norm(axis), 1e-12)
        total = 0.0
        for link_name in subtree(joint.child):
            inertial = robot.link(link_name).inertial
            if inertial is None or inertial.mass <= 0:
                continue
            li = index[link_name]
            rot = link_rot[li] @ inertial.origin[:3, :3]
            com = link_pos[li] + link_rot[li] @ inertial.origin[:3, 3]
            r = com - anchor
            dist2 = float(r @ r - (r @ axis) ** 2)
            total += inertial.mass * dist2 + float(axis @ (rot @ inertial.inertia @ rot.T) @ axis)
        inertias[j] = total
    return inertias


def default_physics(robot: Robot, kp=None, kd=None, armature=None, contact: ContactParams | None = None,
                    contact_mu: float | None = None, kp_per_kg: float = KP_PER_KG) -> PhysicsParams:
    """Robot-scaled defaults, overridable one by one (scalars or one value per joint).

    With M the total mass and I_j the subtree inertia about joint j (:func:`subtree_inertia_about_joints`):
      kp_j = kp_per_kg * M: 4.5 N m/(rad kg) (60 N m/rad for a 13 kg quadruped, the measured STACK setting and the
             gradient method's), or KP_PER_KG_MPC for sampling MPC (see there)
      armature_j = the joint's own armature when the robot's model gives one (an MJCF's ``armature``: the rotor
             inertia its makers measured wins over AKD's guess), else 0.01 kg m^2 * M / 13 kg
      kd_j = 2 sqrt(kp_j (I_j + armature_j))  (critically damped joint with its subtree), floored at 0.02 s * kp_j
      Newton contact ke = 2e4 N/m * M / 13, kd = 5e2 N s/m * M / 13, kf = 1e2 N s/m * M / 13; mu = 1.
    """
    n = robot.num_dofs
    mass = max(robot.total_mass, 1e-3)
    scale = mass / REFERENCE_MASS_KG

    def per_joint(value, default: np.ndarray, name: str) -> np.ndarray:
        if value is None:
            return default
        arr = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,)).copy() if np.ndim(value) == 0 else \
            np.asarray(value, dtype=np.float64)
        if arr.shape != (n,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ConfigError(f"tracking option '{name}' must be a non-negative scalar or {n} values (one per joint "
                              f"{robot.joint_names}), got {value!r}")
        return arr

    kp_arr = per_joint(kp, np.full(n, kp_per_kg * mass), "kp")
    own_armature = np.array([j.armature for j in robot.actuated_joints], dtype=np.float64)
    armature_arr = per_joint(armature, np.where(own_armature > 0, own_armature, 0.01 * scale), "armature")
    inertia = subtree_inertia_about_joints(robot)
    kd_arr = per_joint(kd, np.maximum(2.0 * np.sqrt(kp_arr * (inertia + armature_arr)), 0.02 * kp_arr), "kd")
    effort = np.asarray(robot.effort_limit, dtype=np.float64).copy()
    bad = ~np.isfinite(effort) | (effort <= 0)
    if np.any(bad):  # URDF effort 0 / missing means "unspecified": allow what the PD can ask at 1 rad
        log.warning("joints %s have no effort limit in the URDF; using kp * 1 rad",
                    [robot.joint_names[i] for i in np.flatnonzero(bad)])
        effort[bad] = kp_arr[bad]
    if contact is None:
        contact = ContactParams(ke=2e4 * scale, kd=5e2 * scale, kf=1e2 * scale)
    if contact_mu is not None:
        if not (np.isfinite(contact_mu) and contact_mu > 0):
            raise ConfigError(f"tracking option 'contact_mu' must be a positive friction coefficient, got "
                              f"{contact_mu!r}")
        contact.mu = float(contact_mu)
    return PhysicsParams(kp=kp_arr, kd=kd_arr, armature=armature_arr, effort=effort, contact=contact)


def physics_from_dict(robot: Robot, saved: dict) -> PhysicsParams:
    """The PhysicsParams a track stage recorded in the manifest (``PhysicsParams.to_dict``)."""
    contact = ContactParams(**saved["contact"]) if "contact" in saved else None
    return default_physics(robot, kp=saved.get("kp"), kd=saved.get("kd"), armature=saved.get("armature"),
                           contact=contact)
