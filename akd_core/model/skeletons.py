"""Built-in creature skeletons: quadruped (dog), ostrich, humanoid, hexapod, each as a :class:`Robot`.

A skeleton is a tree of cuboid bones. Every bone has one box (or a few) used as both visual and collision
geometry, with a colour per body part; its mass and inertia come from a uniform density chosen so the
creature's total mass is realistic (the box inertia about the COM, combined by the parallel-axis theorem).

Conventions (docs/architecture.md, "Conventions"): x forward, y left, z up, SI units.

- In the rest pose (every joint at 0) the creature stands: legs straight down (the hexapod in its natural
  sprawl), and with the root at ``z = STANDING_HEIGHT[name]`` (root orientation identity) the lowest points of
  all feet touch ``z = 0`` and nothing else is lower.
- A 3-DoF compound joint ``<name>`` is emitted as three revolute joints ``<name>_x``, ``<name>_y``, ``<name>_z``
  (axes x, y, z in that order) with two small intermediate links ``<name>_link_x`` and ``<name>_link_y``,
  each carrying 1% of the bone's mass and inertia (MuJoCo and Newton need mass on every moving body).
- Feet are leaf links named ``*_foot``. The quadruped, ostrich and hexapod feet are small pads whose link
  origin is the contact point (foot offset zero); the humanoid's ``left_foot``/``right_foot`` are the sole
  boxes, with the link origin at the ankle and the sole centre at :func:`foot_offsets`.
- Effort limits scale with body weight times leg length (enough to stand and trot); velocity limits are
  10-20 rad/s.
- Bones of bodies that are not parent and child in the simulators (e.g. a thigh and the torso, separated by
  a compound joint's intermediate links) are kept a few millimetres apart in the rest pose, so self-collision
  never starts in penetration.

``build(name)`` makes a Robot; ``emit(name, path)`` writes its URDF atomically (the ``robots/*.urdf`` files
are these, byte for byte: re-emit with ``akd robots emit NAME -o robots/NAME.urdf`` after changing a skeleton).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from akd_core.io.errors import ConfigError
from akd_core.model.robot import Geometry, Inertial, Joint, Link, Robot
from akd_core.model.spatial import make_transform

GRAVITY = 9.81  # m/s^2
INTERMEDIATE_MASS_FRACTION = 0.01  # mass (and inertia) of each compound-joint intermediate link, of its bone
BONE_GAP = 0.005  # m, clearance between bones of bodies that are not parent and child in the simulators

# Root height (m) at which the rest pose's feet touch z = 0 (root orientation identity).
STANDING_HEIGHT: dict[str, float] = {
    "quadruped": 0.555,
    "ostrich": 1.34,
    "humanoid": 0.96,
    "hexapod": 0.14,
}

Limits = tuple[float, float]


# ----------------------------------------------------------------------------- builder
@dataclass
class _Box:
    size: np.ndarray  # (3,) full extents
    origin: np.ndarray  # (4, 4) box frame in the link frame
    material: str


@dataclass
class _LinkSpec:
    name: str
    boxes: list[_Box] = field(default_factory=list)
    proxy_of: str | None = None  # intermediate link: a fraction of this bone's mass and inertia


def _box_inertia(size: np.ndarray, rot: np.ndarray, mass: float) -> np.ndarray:
    """Inertia (3, 3) of a solid box of full extents ``size`` (3,) about its COM, in the frame rotated by ``rot``."""
    a, b, c = (float(s) for s in size)
    local = mass / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    return rot @ local @ rot.T


def _composite_inertial(boxes: Sequence[_Box], density: float) -> Inertial:
    """Mass, COM and inertia about the COM of a union of boxes (parallel-axis theorem)."""
    masses = np.array([density * float(np.prod(box.size)) for box in boxes])
    centres = np.array([box.origin[:3, 3] for box in boxes])  # (B, 3)
    mass = float(masses.sum())
    com = (masses[:, None] * centres).sum(0) / mass
    inertia = np.zeros((3, 3))
    for box, m, centre in zip(boxes, masses, centres):
        d = centre - com
        inertia += _box_inertia(box.size, box.origin[:3, :3], m) + m * (d @ d * np.eye(3) - np.outer(d, d))
    return Inertial(mass=mass, origin=make_transform(com), inertia=inertia)


class _SkeletonBuilder:
    """Collects bones and joints, then scales a uniform density to the creature's total mass."""

    def __init__(self, name: str, total_mass: float, materials: dict[str, Sequence[float]]):
        self.name = name
        self.total_mass = total_mass
        self.materials = {k: np.asarray(v, dtype=np.float64) for k, v in materials.items()}
        self.links: list[_LinkSpec] = []
        self.joints: list[Joint] = []
        self._by_name: dict[str, _LinkSpec] = {}

    def _add_link(self, spec: _LinkSpec) -> str:
        self.links.append(spec)
        self._by_name[spec.name] = spec
        return spec.name

    def bone(self, name: str, *boxes: tuple[Sequence[float], Sequence[float], Sequence[float], str]) -> str:
        """A bone made of boxes ``(size (3,), centre (3,), rpy (3,), material)`` in its link frame."""
        specs = [_Box(np.asarray(size, dtype=np.float64), make_transform(centre, rpy), material)
                 for size, centre, rpy, material in boxes]
        for box in specs:
            if box.material not in self.materials:
                raise ValueError(f"skeleton {self.name}: bone {name} uses unknown material {box.material}")
        return self._add_link(_LinkSpec(name, specs))

    def segment(self, name: str, length: float, width: float, depth: float, direction: Sequence[float],
                material: str, start_gap: float = BONE_GAP) -> str:
        """A bone that runs ``length`` m from its joint along the unit ``direction`` (in the x-z plane, or -z),
        beginning ``start_gap`` m after the joint; ``width`` along y, ``depth`` across the bone in x-z."""
        d = np.asarray(direction, dtype=np.float64)
        d /= np.linalg.norm(d)
        centre = d * (start_gap + length) / 2
        if abs(d[0]) < 1e-12:  # vertical bone: an axis-aligned box reads best in the URDF
            return self.bone(name, ((depth, width, length - start_gap), centre, (0.0, 0.0, 0.0), material))
        pitch = -np.arctan2(d[2], d[0])  # rotates the box's x axis onto d (d has no y component)
        return self.bone(name, ((length - start_gap, width, depth), centre, (0.0, pitch, 0.0), material))

    def revolute(self, name: str, parent: str, child: str, xyz: Sequence[float], axis: Sequence[float],
                 limits: Limits, effort: float, velocity: float, rpy: Sequence[float] = (0.0, 0.0, 0.0)) -> None:
        lower, upper = limits
        self.joints.append(Joint(name=name, type="revolute", parent=parent, child=child,
                                 origin=make_transform(xyz, rpy), axis=np.asarray(axis, dtype=np.float64),
                                 lower=float(lower), upper=float(upper), velocity=float(velocity),
                                 effort=float(effort)))

    def fixed(self, name: str, parent: str, child: str, xyz: Sequence[float]) -> None:
        self.joints.append(Joint(name=name, type="fixed", parent=parent, child=child, origin=make_transform(xyz)))

    def compound(self, name: str, parent: str, child: str, xyz: Sequence[float],
                 limits: tuple[Limits, Limits, Limits], effort: float, velocity: float) -> None:
        """3-DoF joint: ``<name>_x`` -> ``<name>_link_x`` -> ``<name>_y`` -> ``<name>_link_y`` -> ``<name>_z``."""
        link_x = self._add_link(_LinkSpec(f"{name}_link_x", proxy_of=child))
        link_y = self._add_link(_LinkSpec(f"{name}_link_y", proxy_of=child))
        chain = [(parent, link_x, xyz), (link_x, link_y, (0, 0, 0)), (link_y, child, (0, 0, 0))]
        for (a, b, offset), axis, lim, suffix in zip(chain, np.eye(3), limits, "xyz"):
            self.revolute(f"{name}_{suffix}", a, b, offset, axis, lim, effort, velocity)

    def foot(self, name: str, parent: str, xyz: Sequence[float], pad_size: Sequence[float], material: str) -> str:
        """A leaf foot link whose origin is the contact point: a pad box resting on it, welded to ``parent``."""
        size = np.asarray(pad_size, dtype=np.float64)
        self.bone(name, (size, (0.0, 0.0, size[2] / 2), (0.0, 0.0, 0.0), material))
        self.fixed(f"{name}_fixed", parent, name, xyz)
        return name

    def build(self) -> Robot:
        volume_of = {s.name: sum(float(np.prod(b.size)) for b in s.boxes) for s in self.links}
        total_volume = sum(volume_of[s.proxy_of] * INTERMEDIATE_MASS_FRACTION if s.proxy_of else volume_of[s.name]
                           for s in self.links)
        density = self.total_mass / total_volume
        bone_inertial = {s.name: _composite_inertial(s.boxes, density) for s in self.links if s.boxes}
        links = []
        for spec in self.links:
            if spec.proxy_of is not None:
                bone = bone_inertial[spec.proxy_of]
                inertial = Inertial(mass=bone.mass * INTERMEDIATE_MASS_FRACTION, origin=np.eye(4),
                                    inertia=bone.inertia * INTERMEDIATE_MASS_FRACTION)
                links.append(Link(spec.name, inertial=inertial))
                continue
            geoms = [Geometry("box", box.size.copy(), box.origin.copy(), rgba=self.materials[box.material].copy(),
                              material_name=box.material) for box in spec.boxes]
            collisions = [Geometry("box", box.size.copy(), box.origin.copy()) for box in spec.boxes]
            links.append(Link(spec.name, inertial=bone_inertial[spec.name], visuals=geoms, collisions=collisions))
        return Robot(self.name, links, self.joints, materials=self.materials,
                     source=f"built-in skeleton '{self.name}'")


def _mirror(limits: Limits, side: str) -> Limits:
    """Limits of a roll (x) or yaw (z) axis given for the left side, mirrored for the right side."""
    return limits if side == "left" else (-limits[1], -limits[0])


DOWN = (0.0, 0.0, -1.0)
UP = (0.0, 0.0, 1.0)


# ----------------------------------------------------------------------------- quadruped (dog)
def quadruped() -> Robot:
    """A dog of ~25 kg: body 0.6 m (chest + hips joined by a 3-DoF spine), legs 0.45 m, neck, head, tail.

    Each leg: 3-DoF hip ``<leg>_hip``, knee, ankle, paw, foot pad ``<leg>_foot``; 28 DoF in all.
    Front knees (elbows) flex with the paw moving forward, hind knees (stifles) with the paw moving back.
    """
    mass, leg_length = 25.0, 0.45
    torque = mass * GRAVITY * leg_length  # N m, body weight times leg length
    b = _SkeletonBuilder("quadruped", mass, {
        "fur": (0.55, 0.38, 0.22, 1.0), "fur_dark": (0.36, 0.25, 0.15, 1.0),
        "face": (0.72, 0.55, 0.38, 1.0), "paw": (0.12, 0.1, 0.09, 1.0)})
    body_z = 0.2  # chest and hips height
    b.bone("chest", ((0.355, 0.24, body_z), (0.0025, 0, 0), (0, 0, 0), "fur"))
    b.bone("hips", ((0.24, 0.22, body_z), (-0.125, 0, 0), (0, 0, 0), "fur"))
    hip_z = -body_z / 2 - BONE_GAP
    thigh, shin, paw, pad = 0.18, 0.17, 0.08, 0.02
    for end, parent, hip_x in (("front", "chest", 0.13), ("hind", "hips", -0.13)):
        for side, sign in (("left", 1.0), ("right", -1.0)):
            leg = f"{end}_{side}"
            b.segment(f"{leg}_thigh", thigh, 0.08, 0.08, DOWN, "fur_dark")
            b.compound(f"{leg}_hip", parent, f"{leg}_thigh", (hip_x, sign * 0.09, hip_z),
                       (_mirror((-0.4, 0.6), side), (-1.4, 0.9) if end == "front" else (-1.2, 1.0),
                        _mirror((-0.4, 0.4), side)), 0.5 * torque, 15.0)
            b.segment(f"{leg}_shin", shin, 0.06, 0.06, DOWN, "fur_dark", start_gap=0.0)
            knee = (-2.3, 0.1) if end == "front" else (-0.1, 2.3)
            b.revolute(f"{leg}_knee", f"{leg}_thigh", f"{leg}_shin", (0, 0, -thigh), (0, 1, 0), knee,
                       0.5 * torque, 15.0)
            b.segment(f"{leg}_paw", paw, 0.05, 0.05, DOWN, "paw", start_gap=0.0)
            ankle = (-0.5, 1.7) if end == "front" else (-1.7, 0.5)
            b.revolute(f"{leg}_ankle", f"{leg}_shin", f"{leg}_paw", (0, 0, -shin), (0, 1, 0), ankle,
                       0.3 * torque, 15.0)
            b.foot(f"{leg}_foot", f"{leg}_paw", (0, 0, -paw - pad), (0.06, 0.06, pad), "paw")
    b.compound("spine", "chest", "hips", (-0.18, 0, 0), ((-0.3, 0.3), (-0.4, 0.4), (-0.4, 0.4)), 0.6 * torque, 10.0)
    neck_dir = (np.cos(np.radians(50)), 0.0, np.sin(np.radians(50)))
    neck_length = 0.2
    b.segment("neck", neck_length, 0.08, 0.08, neck_dir, "fur")
    b.compound("neck", "chest", "neck", (0.19, 0, body_z / 2), ((-0.5, 0.5), (-0.8, 1.0), (-1.0, 1.0)),
               0.2 * torque, 10.0)
    b.bone("head", ((0.2, 0.13, 0.13), (0.06, 0, 0), (0, 0, 0), "face"),
           ((0.1, 0.07, 0.07), (0.2, 0, -0.025), (0, 0, 0), "face"))
    b.fixed("head_fixed", "neck", "head", np.asarray(neck_dir) * neck_length)
    tail_dir = (-np.cos(np.radians(30)), 0.0, np.sin(np.radians(30)))
    b.segment("tail_1", 0.15, 0.04, 0.04, tail_dir, "fur_dark", start_gap=0.0)
    b.revolute("tail_1", "hips", "tail_1", (-0.255, 0, 0.06), (0, 0, 1), (-0.8, 0.8), 0.03 * torque, 15.0)
    b.segment("tail_2", 0.15, 0.03, 0.03, tail_dir, "fur_dark", start_gap=0.0)
    b.revolute("tail_2", "tail_1", "tail_2", np.asarray(tail_dir) * 0.15, (0, 1, 0), (-1.0, 1.0),
               0.02 * torque, 15.0)
    return b.build()


# ----------------------------------------------------------------------------- ostrich
def ostrich() -> Robot:
    """A two-legged bird of ~100 kg: big body, long legs, a three-segment neck, head, wings, tail plumes.

    Each leg: 3-DoF hip, knee (flexes with the foot moving back), ankle (the intertarsal joint, flexes with the
    foot moving forward), metatarsus, toe joint, toe, foot pad ``<side>_foot``; 20 DoF in all.
    """
    mass, leg_length = 100.0, 1.135
    torque = mass * GRAVITY * leg_length
    b = _SkeletonBuilder("ostrich", mass, {
        "plumage": (0.1, 0.1, 0.1, 1.0), "white": (0.95, 0.95, 0.92, 1.0), "skin": (0.86, 0.63, 0.56, 1.0),
        "beak": (0.9, 0.8, 0.6, 1.0), "nail": (0.3, 0.28, 0.26, 1.0)})
    body_z = 0.4
    b.bone("body", ((0.8, 0.5, body_z), (0, 0, 0), (0, 0, 0), "plumage"))
    thigh, shank, metatarsus = 0.25, 0.45, 0.40
    hip_x = -0.06  # puts the foot pads under the centre of mass (the neck and head are forward)
    for side, sign in (("left", 1.0), ("right", -1.0)):
        b.segment(f"{side}_thigh", thigh, 0.14, 0.14, DOWN, "plumage")
        b.compound(f"{side}_hip", "body", f"{side}_thigh", (hip_x, sign * 0.15, -body_z / 2 - BONE_GAP),
                   (_mirror((-0.3, 0.5), side), (-1.2, 0.8), _mirror((-0.5, 0.5), side)), 0.5 * torque, 12.0)
        b.segment(f"{side}_shank", shank, 0.08, 0.08, DOWN, "skin", start_gap=0.0)
        b.revolute(f"{side}_knee", f"{side}_thigh", f"{side}_shank", (0, 0, -thigh), (0, 1, 0), (-0.1, 2.2),
                   0.5 * torque, 12.0)
        b.segment(f"{side}_metatarsus", metatarsus, 0.05, 0.05, DOWN, "skin", start_gap=0.0)
        b.revolute(f"{side}_ankle", f"{side}_shank", f"{side}_metatarsus", (0, 0, -shank), (0, 1, 0),
                   (-2.4, 0.1), 0.4 * torque, 12.0)
        b.bone(f"{side}_toe", ((0.18, 0.07, 0.03), (0.05, 0, 0), (0, 0, 0), "skin"))
        b.revolute(f"{side}_toe", f"{side}_metatarsus", f"{side}_toe", (0, 0, -metatarsus), (0, 1, 0),
                   (-1.2, 0.6), 0.3 * torque, 15.0)
        b.foot(f"{side}_foot", f"{side}_toe", (0.04, 0, -0.035), (0.16, 0.08, 0.02), "nail")
    segment = 0.25
    b.segment("neck_1", segment, 0.07, 0.07, UP, "skin")
    b.compound("neck_1", "body", "neck_1", (0.34, 0, body_z / 2), ((-0.4, 0.4), (-0.6, 1.2), (-1.2, 1.2)),
               0.05 * torque, 10.0)
    for k in (2, 3):
        b.segment(f"neck_{k}", segment, 0.06, 0.06, UP, "skin", start_gap=0.0)
        b.revolute(f"neck_{k}", f"neck_{k - 1}", f"neck_{k}", (0, 0, segment), (0, 1, 0), (-0.8, 1.0),
                   0.04 * torque, 10.0)
    b.bone("head", ((0.16, 0.08, 0.08), (0.04, 0, 0.04), (0, 0, 0), "skin"),
           ((0.08, 0.04, 0.03), (0.16, 0, 0.03), (0, 0, 0), "beak"))
    b.revolute("head", "neck_3", "head", (0, 0, segment), (0, 1, 0), (-1.0, 1.0), 0.02 * torque, 10.0)
    for side, sign in (("left", 1.0), ("right", -1.0)):
        b.bone(f"{side}_wing", ((0.4, 0.03, 0.22), (-0.12, sign * 0.02, -0.08), (0, 0, 0), "white"))
        b.revolute(f"{side}_wing", "body", f"{side}_wing", (0.1, sign * 0.255, 0.1), (1, 0, 0),
                   _mirror((-0.1, 1.6), side), 0.03 * torque, 10.0)
    b.bone("tail", ((0.2, 0.3, 0.15), (-0.1, 0, 0.02), (0, 0, 0), "white"))
    b.fixed("tail_fixed", "body", "tail", (-0.4 - BONE_GAP, 0, 0.1))
    return b.build()


# ----------------------------------------------------------------------------- humanoid
def humanoid() -> Robot:
    """A ~70 kg, ~1.8 m human: pelvis root, 3-DoF spine to the torso, 3-DoF neck, head, 3-DoF shoulders,
    elbows, hands, 3-DoF hips, knees, 2-DoF ankles (pitch then roll), feet ``left_foot``/``right_foot``; 26 DoF.
    """
    mass, leg_length = 70.0, 0.88
    torque = mass * GRAVITY * leg_length
    b = _SkeletonBuilder("humanoid", mass, {
        "shirt": (0.2, 0.35, 0.6, 1.0), "trousers": (0.25, 0.25, 0.3, 1.0), "skin": (0.87, 0.72, 0.6, 1.0),
        "shoes": (0.15, 0.12, 0.1, 1.0)})
    pelvis_z = 0.15
    b.bone("pelvis", ((0.2, 0.3, pelvis_z), (0, 0, 0), (0, 0, 0), "trousers"))
    thigh, shin, ankle_height = 0.40, 0.40, 0.08
    for side, sign in (("left", 1.0), ("right", -1.0)):
        b.segment(f"{side}_thigh", thigh, 0.13, 0.13, DOWN, "trousers")
        b.compound(f"{side}_hip", "pelvis", f"{side}_thigh", (0, sign * 0.09, -pelvis_z / 2 - BONE_GAP),
                   (_mirror((-0.45, 0.8), side), (-2.0, 0.5), _mirror((-0.7, 0.7), side)), 0.5 * torque, 12.0)
        b.segment(f"{side}_shin", shin, 0.1, 0.1, DOWN, "trousers", start_gap=0.0)
        b.revolute(f"{side}_knee", f"{side}_thigh", f"{side}_shin", (0, 0, -thigh), (0, 1, 0), (-0.05, 2.4),
                   0.5 * torque, 12.0)
        b._add_link(_LinkSpec(f"{side}_ankle_link", proxy_of=f"{side}_foot"))
        b.revolute(f"{side}_ankle_pitch", f"{side}_shin", f"{side}_ankle_link", (0, 0, -shin), (0, 1, 0),
                   (-0.8, 0.6), 0.3 * torque, 12.0)
        sole = ankle_height - 0.01
        b.bone(f"{side}_foot", ((0.24, 0.1, sole), (0.05, 0, -ankle_height + sole / 2), (0, 0, 0), "shoes"))
        b.revolute(f"{side}_ankle_roll", f"{side}_ankle_link", f"{side}_foot", (0, 0, 0), (1, 0, 0),
                   (-0.35, 0.35), 0.15 * torque, 12.0)
    b.bone("torso", ((0.2, 0.34, 0.45), (0, 0, 0.005 + 0.225), (0, 0, 0), "shirt"))
    b.compound("spine", "pelvis", "torso", (0, 0, pelvis_z / 2 + BONE_GAP), ((-0.4, 0.4), (-0.4, 1.0), (-0.8, 0.8)),
               0.5 * torque, 10.0)
    b.segment("neck", 0.09, 0.08, 0.08, UP, "skin")
    b.compound("neck", "torso", "neck", (0, 0, 0.455 + BONE_GAP), ((-0.6, 0.6), (-0.6, 0.9), (-1.2, 1.2)),
               0.08 * torque, 10.0)
    b.bone("head", ((0.2, 0.16, 0.22), (0.01, 0, 0.11), (0, 0, 0), "skin"))
    b.fixed("head_fixed", "neck", "head", (0, 0, 0.09))
    upper_arm, forearm = 0.29, 0.25
    for side, sign in (("left", 1.0), ("right", -1.0)):
        b.segment(f"{side}_upper_arm", upper_arm, 0.08, 0.08, DOWN, "shirt")
        b.compound(f"{side}_shoulder", "torso", f"{side}_upper_arm", (0, sign * 0.225, 0.40),
                   (_mirror((-0.4, 2.6), side), (-3.0, 1.0), _mirror((-1.4, 1.4), side)), 0.15 * torque, 12.0)
        b.segment(f"{side}_forearm", forearm, 0.07, 0.07, DOWN, "skin", start_gap=0.0)
        b.revolute(f"{side}_elbow", f"{side}_upper_arm", f"{side}_forearm", (0, 0, -upper_arm), (0, 1, 0),
                   (-2.5, 0.05), 0.1 * torque, 12.0)
        b.bone(f"{side}_hand", ((0.08, 0.03, 0.16), (0, 0, -0.08), (0, 0, 0), "skin"))
        b.fixed(f"{side}_hand_fixed", f"{side}_forearm", f"{side}_hand", (0, 0, -forearm))
    return b.build()


FOOT_OFFSET_HUMANOID = (0.05, 0.0, -0.08)  # sole centre in the foot frame (origin at the ankle)


# ----------------------------------------------------------------------------- hexapod
def hexapod() -> Robot:
    """An insect-like six-legged walker of ~3 kg in its natural sprawl: coxa out, femur level, tibia down.

    Each leg ``<side>_<front|middle|rear>``: coxa (yaw, axis z), femur (pitch), tibia (pitch), foot pad
    ``<leg>_foot``; 18 DoF. A leg's frame is yawed so its x axis points outward along the leg: the pitch
    axes are that frame's y axis, positive angles lower the femur tip and swing the foot toward the body.
    """
    mass, leg_length = 3.0, 0.28
    torque = mass * GRAVITY * leg_length
    b = _SkeletonBuilder("hexapod", mass, {
        "chassis": (0.25, 0.3, 0.35, 1.0), "coxa": (0.85, 0.5, 0.1, 1.0), "limb": (0.3, 0.3, 0.32, 1.0),
        "foot": (0.08, 0.08, 0.08, 1.0)})
    b.bone("body", ((0.24, 0.14, 0.05), (0, 0, 0), (0, 0, 0), "chassis"))
    coxa, femur, tibia, pad = 0.04, 0.10, 0.13, 0.01
    for side, sign in (("left", 1.0), ("right", -1.0)):
        for end, x, yaw_deg in (("front", 0.09, 45.0), ("middle", 0.0, 90.0), ("rear", -0.09, 135.0)):
            leg = f"{side}_{end}"
            b.bone(f"{leg}_coxa", ((coxa, 0.03, 0.03), (coxa / 2, 0, 0), (0, 0, 0), "coxa"))
            b.revolute(f"{leg}_coxa", "body", f"{leg}_coxa", (x, sign * 0.07, 0), (0, 0, 1), (-0.7, 0.7),
                       0.3 * torque, 20.0, rpy=(0, 0, sign * np.radians(yaw_deg)))
            b.bone(f"{leg}_femur", ((femur, 0.03, 0.025), (femur / 2, 0, 0), (0, 0, 0), "limb"))
            b.revolute(f"{leg}_femur", f"{leg}_coxa", f"{leg}_femur", (coxa, 0, 0), (0, 1, 0), (-1.3, 1.0),
                       0.5 * torque, 20.0)
            b.segment(f"{leg}_tibia", tibia, 0.02, 0.02, DOWN, "limb", start_gap=0.0)
            b.revolute(f"{leg}_tibia", f"{leg}_femur", f"{leg}_tibia", (femur, 0, 0), (0, 1, 0), (-1.0, 1.4),
                       0.4 * torque, 20.0)
            b.foot(f"{leg}_foot", f"{leg}_tibia", (0, 0, -tibia - pad), (0.02, 0.02, pad), "foot")
    return b.build()


# ----------------------------------------------------------------------------- registry
SKELETONS: dict[str, Callable[[], Robot]] = {
    "quadruped": quadruped,
    "ostrich": ostrich,
    "humanoid": humanoid,
    "hexapod": hexapod,
}


def _check_name(name: str) -> None:
    if name not in SKELETONS:
        raise ConfigError(f"unknown built-in skeleton '{name}'; choose one of {sorted(SKELETONS)} "
                          "(`akd robots list`), or pass a URDF path")


def build(name: str) -> Robot:
    """The Robot of built-in skeleton ``name`` (one of :data:`SKELETONS`)."""
    _check_name(name)
    return SKELETONS[name]()


def emit(name: str, path: str | os.PathLike | None = None) -> str:
    """URDF XML of skeleton ``name``; written atomically to ``path`` when given."""
    return build(name).to_urdf(path)


def standing_height(name: str) -> float:
    """Root height (m) at which skeleton ``name`` stands in its rest pose with its feet on z = 0."""
    _check_name(name)
    return STANDING_HEIGHT[name]


def foot_offsets(name: str) -> dict[str, np.ndarray]:
    """Foot link name -> contact point (3,) in that link's frame (zeros where the link origin is the contact)."""
    robot = build(name)
    feet = [n for n in robot.link_names if n.endswith("_foot")]
    offset = np.asarray(FOOT_OFFSET_HUMANOID) if name == "humanoid" else np.zeros(3)
    return {foot: offset.copy() for foot in feet}


__all__ = ["SKELETONS", "STANDING_HEIGHT", "build", "emit", "standing_height", "foot_offsets",
           "quadruped", "ostrich", "humanoid", "hexapod"]
