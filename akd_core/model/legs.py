"""Leg discovery: which links of an articulation are feet, the joint chains that move them, and labels.

A leg is a chain from the root to a leaf link (the foot) through at least two actuated joints whose
lowest geometry point, in the rest pose (``robot.default_joint_pos()``), is near the lowest point of
the whole robot. Several leaves on one chain (a foot and a sole frame, a sensor) count once: the one
whose name says foot/toe/sole/ankle wins, else the lowest. ``--feet LINK,...`` overrides detection.

The foot's contact point (``Leg.foot_offset``, in the foot link's frame) is the lowest point of the
foot link's collision geometry in the rest pose (a sphere's centre minus its radius along world z, the
centre of a box's bottom face), or the link origin when it has no geometry.

Labels come from the rest-pose foot positions relative to the feet's centroid: side ``left`` (y > 0) /
``right``; fore-aft ``front`` / ``hind`` (two legs per side), ``front`` / ``middle`` / ``rear`` (three),
or an index along x (more); a short ``label`` such as ``LF``, ``RH``, ``LM``, ``L``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from akd_core.io.errors import AKDError, ConfigError, KinematicTreeError
from akd_core.model.kinematics import ForwardKinematics, geometry_corners
from akd_core.model.robot import Robot

FOOT_WORDS = ("foot", "toe", "sole", "ankle", "paw", "hoof", "tip")
MIN_LEG_JOINTS = 2
SAME_LEVEL_TOLERANCE = 0.15  # fraction of the root's height above the lowest point
# Leg joint limits no motor has: a placeholder in the robot file (e.g. effort="1000" velocity="1000"). An effort limit
# this many times the torque the robot's whole weight puts on a straight leg's hip, or a joint speed above this
# (rad/s at the joint, ~950 rpm), cannot be the robot's; the gait's speed checks would then never slow it.
PLACEHOLDER_EFFORT_FACTOR = 20.0
PLACEHOLDER_VELOCITY_RADPS = 100.0


@dataclass(frozen=True)
class Leg:
    """One leg of a robot.

    foot_link: URDF link name of the foot; foot_offset (3,) contact point in that link's frame (m);
    joint_names: the actuated joints that move only this foot (root side first; joints shared with other
    feet, such as a spine, belong to the body); hip_link: the child link of the first of them;
    side: "left" | "right" | "center"; fore_aft: "front" | "middle" | "rear" | "hind" | "" ;
    label: short name such as "LF".
    """

    foot_link: str
    foot_offset: np.ndarray  # (3,)
    joint_names: tuple[str, ...]
    hip_link: str
    side: str = ""
    fore_aft: str = ""
    label: str = ""
    contact_radius: float = 0.0  # radius of a spherical foot (its centre stays put in stance), else 0


def rest_link_poses(robot: Robot, joint_pos: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Link poses with the root at the origin (identity orientation): (L,3) positions, (L,3,3) rotations."""
    q = robot.default_joint_pos() if joint_pos is None else np.asarray(joint_pos, dtype=np.float64)
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        pos, rot = fk(torch.zeros(1, 3, dtype=torch.float64), torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64),
                      torch.as_tensor(q[None], dtype=torch.float64))
    return pos[0].numpy(), rot[0].numpy()


def chain_joints(robot: Robot, link: str) -> list[str]:
    """Actuated joint names from the root down to ``link`` (root side first)."""
    names = []
    current = link
    while current != robot.root_link:
        joint = robot.parent_joint(current)
        if joint is None:
            break
        if joint.actuated:
            names.append(joint.name)
        current = joint.parent
    return names[::-1]


def welded_links(robot: Robot, link: str) -> list[str]:
    """``link`` and every link rigidly attached to it through fixed joints (parents and children), ``link`` first:
    the one rigid body a foot is (talos' ``left_sole_link`` is a frame welded to ``leg_left_6_link``, which carries
    the sole's geometry)."""
    out, todo = [link], [link]
    while todo:
        current = todo.pop()
        joint = robot.parent_joint(current)
        near = [j.child for j in robot.children(current) if j.type == "fixed"]
        if joint is not None and joint.type == "fixed":
            near.append(joint.parent)
        for name in near:
            if name not in out:
                out.append(name)
                todo.append(name)
    return out


def lowest_link_points(robot: Robot, link_pos: np.ndarray, link_rot: np.ndarray) -> np.ndarray:
    """Lowest world z (L,) of every link's geometry (its origin if it has none), at the given poses."""
    low = link_pos[:, 2].copy()
    has_geom = np.zeros(len(robot.links), dtype=bool)
    idx, pts = geometry_corners(robot)
    for li, p in zip(idx, pts):
        z = (link_rot[li] @ p + link_pos[li])[2]
        low[li] = z if not has_geom[li] else min(low[li], z)
        has_geom[li] = True
    for li, link in enumerate(robot.links):  # spheres exactly (geometry_corners gives poles only)
        for geom in link.collisions or link.visuals:
            if geom.kind == "sphere":
                z = (link_rot[li] @ geom.origin[:3, 3] + link_pos[li])[2] - geom.size[0]
                low[li] = min(low[li], z)
    return low


def contact_point(robot: Robot, link: str, link_pos: np.ndarray, link_rot: np.ndarray) -> tuple[np.ndarray, float]:
    """Lowest point of ``link``'s geometry at the given poses, in the link's frame, and a sphere radius (or 0).

    link_pos (L,3), link_rot (L,3,3) world poses. A sphere gives centre - radius * z_world; other shapes the
    mean of their corner points within 1 mm of the lowest one (a box's bottom-face centre).
    """
    li = robot.link_index(link)
    rot, pos = link_rot[li], link_pos[li]
    geoms = robot.links[li].collisions or robot.links[li].visuals
    spheres = [g for g in geoms if g.kind == "sphere"]
    if spheres:
        lowest = min(spheres, key=lambda g: (rot @ g.origin[:3, 3])[2] - g.size[0])
        centre = lowest.origin[:3, 3]
        return centre - lowest.size[0] * (rot.T @ np.array([0.0, 0.0, 1.0])), float(lowest.size[0])
    idx, pts = geometry_corners(robot)
    own = pts[idx == li]
    if len(own) == 0:
        return np.zeros(3), 0.0
    world = own @ rot.T + pos
    near = world[:, 2] < world[:, 2].min() + 1e-3
    low_world = world[near].mean(axis=0)
    low_world[2] = world[:, 2].min()
    return rot.T @ (low_world - pos), 0.0


def leg_length(robot: Robot, legs: Sequence[Leg]) -> float:
    """Mean height (m) of the hips above the feet's contact points in the zero pose (legs straight)."""
    link_pos, link_rot = rest_link_poses(robot, np.zeros(robot.num_dofs))
    heights = []
    for leg in legs:
        foot = robot.link_index(leg.foot_link)
        contact = link_rot[foot] @ leg.foot_offset + link_pos[foot]
        heights.append(link_pos[robot.link_index(leg.hip_link), 2] - contact[2])
    return float(np.mean(heights)) if heights else 0.0


def placeholder_limits(robot: Robot, legs: Sequence[Leg]) -> str | None:
    """A warning naming the leg joints whose effort or velocity limits cannot be a real motor's (PLACEHOLDER_*), or
    None. AKD slows a gait to what the joints' limits allow; with placeholders it asks the robot for anything."""
    joints = [j for leg in legs for j in leg.joint_names]
    if not joints:
        return None
    index = [robot.joint_names.index(j) for j in joints]
    effort = np.asarray(robot.effort_limit, dtype=np.float64)[index]
    velocity = np.asarray(robot.velocity_limit, dtype=np.float64)[index]
    weight_torque = robot.total_mass * 9.81 * max(leg_length(robot, legs), 1e-3)
    strong = [j for j, e in zip(joints, effort) if e > PLACEHOLDER_EFFORT_FACTOR * weight_torque]
    fast = [j for j, v in zip(joints, velocity) if v > PLACEHOLDER_VELOCITY_RADPS]
    if not strong and not fast:
        return None

    def which(names: list[str]) -> str:
        return f"every leg joint ({len(names)})" if len(names) == len(joints) else str(names)

    parts = []
    if strong:
        parts.append(f"effort limits up to {effort.max():g} N m on {which(strong)} ({effort.max() / weight_torque:.0f} "
                     f"x the {weight_torque:.1f} N m the robot's weight puts on a straight leg)")
    if fast:
        parts.append(f"velocity limits up to {velocity.max():g} rad/s on {which(fast)}")
    source = robot.urdf_path or robot.mjcf_path or f"robot '{robot.name}'"
    return (f"warning: {source}: leg joints have {' and '.join(parts)}: these look like placeholders, not the motors' "
            "limits, so the gait cannot be slowed to what the robot can do (its speed checks read these limits); "
            "give the robot file its real effort and velocity limits")


def find_legs(robot: Robot, feet: Sequence[str] | None = None) -> list[Leg]:
    """The legs of ``robot``, labelled and ordered front to back, left before right.

    feet: foot link names to use instead of detection (``--feet``). Raises KinematicTreeError naming the
    fix when no legs are found (e.g. a robot arm, or a drone whose joints are all fixed) and ConfigError for
    unknown foot names.
    """
    if robot.num_dofs == 0:
        source = robot.mjcf_path or robot.urdf_path or f"robot '{robot.name}'"
        raise KinematicTreeError(
            f"{source}: robot '{robot.name}' has no legs: none of its {len(robot.joints)} joints is actuated (all "
            f"fixed), so no chain of >= {MIN_LEG_JOINTS} actuated joints ends in a foot, and --feet cannot name one "
            f"either. AKD animates legged robots; if this one has legs, give their joints their real type (revolute, "
            f"continuous or prismatic, with <limit>) in the robot file")
    link_pos, link_rot = rest_link_poses(robot)
    if feet:
        unknown = [f for f in feet if f not in robot.link_names]
        if unknown:
            raise ConfigError(f"--feet names links {unknown} that robot '{robot.name}' does not have; "
                              f"choose among its links: {robot.link_names}")
        names = list(dict.fromkeys(feet))
        short = [f for f in names if len(chain_joints(robot, f)) < 1]
        if short:
            raise ConfigError(f"--feet link(s) {short} are not moved by any actuated joint of robot "
                              f"'{robot.name}'; name links at the ends of the legs")
    else:
        names = _detect_feet(robot, link_pos, link_rot)
    chains = {name: chain_joints(robot, name) for name in names}
    counts: dict[str, int] = {}
    for joints in chains.values():
        for j in joints:
            counts[j] = counts.get(j, 0) + 1
    legs = []
    for name in names:
        # joints shared with other feet (a spine, a pelvis) belong to the body, not to this leg
        joints = [j for j in chains[name] if counts[j] == 1]
        if not joints:
            raise ConfigError(f"foot '{name}' of robot '{robot.name}' has no actuated joint of its own (all of "
                              f"{chains[name]} also move other feet); pass one foot link per leg with --feet LINK,...")
        offset, radius = contact_point(robot, name, link_pos, link_rot)
        legs.append(Leg(foot_link=name, foot_offset=offset, joint_names=tuple(joints),
                        hip_link=robot.joint(joints[0]).child, contact_radius=radius))
    return _label(legs, link_pos, link_rot, robot)


def _detect_feet(robot: Robot, link_pos: np.ndarray, link_rot: np.ndarray) -> list[str]:
    low = lowest_link_points(robot, link_pos, link_rot)
    ground = float(low.min())
    height = max(float(link_pos[0, 2] - ground), 1e-3)
    tolerance = max(0.02, SAME_LEVEL_TOLERANCE * height)
    leaves = [link.name for link in robot.links if not robot.children(link.name) and link.name != robot.root_link]
    groups: dict[str, list[str]] = {}
    for leaf in leaves:
        joints = chain_joints(robot, leaf)
        if len(joints) < MIN_LEG_JOINTS or low[robot.link_index(leaf)] > ground + tolerance:
            continue
        groups.setdefault(joints[-1], []).append(leaf)
    if not groups:
        raise KinematicTreeError(
            f"robot '{robot.name}' has no detectable legs: no leaf link moved by >= {MIN_LEG_JOINTS} actuated "
            f"joints has its lowest point near the robot's lowest point in the rest pose (links: "
            f"{robot.link_names}); name the foot links yourself with --feet LINK,LINK,...")

    def rank(leaf: str) -> tuple[int, float]:
        named = any(w in leaf.lower() for w in FOOT_WORDS)
        return (0 if named else 1, float(low[robot.link_index(leaf)]))

    return [min(group, key=rank) for group in groups.values()]


def _label(legs: list[Leg], link_pos: np.ndarray, link_rot: np.ndarray, robot: Robot) -> list[Leg]:
    feet = np.array([link_rot[robot.link_index(leg.foot_link)] @ leg.foot_offset
                     + link_pos[robot.link_index(leg.foot_link)] for leg in legs])  # (K, 3)
    centre = feet.mean(axis=0)
    span = max(float(np.ptp(feet[:, 1])), 1e-6)
    sides = ["left" if y - centre[1] > 0.05 * span else "right" if y - centre[1] < -0.05 * span else "center"
             for y in feet[:, 1]]
    if len(legs) == 1:
        sides = ["center"]
    fore_aft = [""] * len(legs)
    for side in ("left", "right", "center"):
        members = [i for i, s in enumerate(sides) if s == side]
        members.sort(key=lambda i: -feet[i, 0])
        words = {2: ("front", "hind"), 3: ("front", "middle", "rear")}.get(len(members))
        for rank, i in enumerate(members):
            if len(members) > 1:
                fore_aft[i] = words[rank] if words else f"{rank}"
    labelled = []
    for leg, side, fa in zip(legs, sides, fore_aft):
        label = {"left": "L", "right": "R", "center": "C"}[side] + (fa[:1].upper() if fa and not fa.isdigit() else fa)
        labelled.append(Leg(leg.foot_link, leg.foot_offset, leg.joint_names, leg.hip_link, side, fa, label,
                            leg.contact_radius))
    order = {"left": 0, "center": 1, "right": 2}
    idx = sorted(range(len(legs)), key=lambda i: (-round(float(feet[i, 0]), 3), order[sides[i]]))
    return [labelled[i] for i in idx]


# ----------------------------------------------------------------------------- which way the robot faces
FRONT_WORDS, HIND_WORDS = ("front", "fore"), ("hind", "back", "rear")


def _front_or_hind(name: str) -> int:
    """+1 for a foot named as a front one (FR_foot, LF_FOOT, front_left), -1 for a hind one (BL, RH, hind_left), 0."""
    import re

    tokens = [t for t in re.split(r"[^a-z]+", name.lower()) if t]
    if any(t in FRONT_WORDS or (len(t) == 2 and "f" in t and set(t) <= set("flr")) for t in tokens):
        return 1
    if any(t in HIND_WORDS or (len(t) == 2 and set(t) & set("hb") and set(t) <= set("hblr")) for t in tokens):
        return -1
    return 0


def facing_turn(robot: Robot, legs: Sequence[Leg]) -> np.ndarray | None:
    """The base frame a robot that faces along its base's y axis walks in: (3, 3), the orientation of the robot
    file's base frame in a frame whose x points where the robot faces (a turn of -90 deg about z when it faces +y,
    +90 when -y); None for a robot with three or more legs none of which hinges about the base's y axis but each
    about its x (example-robot-data's "quadroped": legs at +-0.2 m in y, named FL, FR, BL, BR, hips and knees
    about x). AKD walks robots along their base's +x (REP 103); such a robot is planned in the turned frame.
    It faces +y unless its front feet (by name: F, front, fore) lie at lower y than its hind ones."""
    if len(legs) < 3:
        return None
    _, rot = rest_link_poses(robot, np.zeros(robot.num_dofs))
    joints = {j.name: j for j in robot.joints}
    hinges = []
    for leg in legs:
        axes = [rot[robot.link_index(joints[n].child)] @ joints[n].axis for n in leg.joint_names]
        hinges.append((any(abs(a[1]) > 0.7 for a in axes), any(abs(a[0]) > 0.7 for a in axes)))
    if any(about_y for about_y, _ in hinges) or not all(about_x for _, about_x in hinges):
        return None
    link_pos, _ = rest_link_poses(robot, np.zeros(robot.num_dofs))
    sides = {+1: [], -1: []}
    for leg in legs:
        kind = _front_or_hind(leg.foot_link) or _front_or_hind(leg.hip_link)
        if kind:
            sides[kind].append(link_pos[robot.link_index(leg.foot_link), 1])
    forward = -1.0 if sides[1] and sides[-1] and np.mean(sides[1]) < np.mean(sides[-1]) else 1.0
    angle = -forward * np.pi / 2
    c, s_ = np.cos(angle), np.sin(angle)
    return np.array([[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]])


def forward_axis(robot: Robot, feet: Sequence[str] | None = None) -> np.ndarray:
    """(3,) the direction the robot faces, in its base frame: +x (REP 103), or +-y for a robot
    :func:`facing_turn` turns (legs found from ``feet``, else detected; +x when none are found)."""
    key = tuple(feet or ())
    cache = robot.__dict__.setdefault("_akd_forward", {})
    if key not in cache:
        try:
            turn = facing_turn(robot, find_legs(robot, list(feet) if feet else None))
        except AKDError:
            turn = None
        cache[key] = np.array([1.0, 0.0, 0.0]) if turn is None else turn.T @ np.array([1.0, 0.0, 0.0])
    return cache[key]


def turned_base(robot: Robot, turn: np.ndarray) -> Robot:
    """``robot`` with its root link's frame turned: the same bodies, the root link's geometry, inertia and child
    joints expressed in a frame in which the file's base frame has orientation ``turn`` (3, 3). A pose of the
    turned robot with root orientation R is the file's robot with root orientation R @ turn (same root origin)."""
    import dataclasses

    from akd_core.model.robot import Link

    t = np.eye(4)
    t[:3, :3] = turn
    root = robot.root_link

    def moved(geoms):
        return [dataclasses.replace(g, origin=t @ g.origin) for g in geoms]

    links = []
    for link in robot.links:
        if link.name == root:
            inertial = None if link.inertial is None else dataclasses.replace(link.inertial,
                                                                             origin=t @ link.inertial.origin)
            link = Link(link.name, inertial, moved(link.visuals), moved(link.collisions))
        links.append(link)
    joints = [dataclasses.replace(j, origin=t @ j.origin) if j.parent == root else dataclasses.replace(j)
              for j in robot.joints]
    order_links = {name: i for i, name in enumerate(robot._document_links)}
    order_joints = {name: i for i, name in enumerate(robot._document_joints)}
    links.sort(key=lambda link: order_links.get(link.name, len(order_links)))
    joints.sort(key=lambda j: order_joints.get(j.name, len(order_joints)))
    out = Robot(robot.name, links, joints, urdf_path=robot.urdf_path, package_paths=robot.package_paths,
                materials=robot.materials, source=robot._source)
    out.inserted_links = robot.inserted_links
    return out


__all__ = ["Leg", "find_legs", "facing_turn", "forward_axis", "turned_base", "leg_length", "chain_joints",
           "contact_point", "rest_link_poses", "lowest_link_points",
           "welded_links", "robot_info"]


def robot_info(robot, with_feet: bool = True, feet: Sequence[str] | None = None) -> dict:
    """Joints (type, limits), links, total mass and feet (detected, or ``feet`` as ``--feet`` gives them) of a
    Robot, as plain data. ``format`` says where it came from (urdf, mjcf, skeleton)."""
    info = {
        "name": robot.name,
        "format": robot.source_format,
        "urdf": str(robot.urdf_path) if robot.urdf_path else None,
        "mjcf": str(robot.mjcf_path) if robot.mjcf_path else None,
        "root_link": robot.root_link,
        "total_mass_kg": round(robot.total_mass, 6),
        "num_dofs": robot.num_dofs,
        "links": robot.link_names,
        "joints": [
            {"name": j.name, "type": j.type, "parent": j.parent, "child": j.child,
             "lower": None if j.type in ("fixed", "continuous") else j.lower,
             "upper": None if j.type in ("fixed", "continuous") else j.upper,
             "velocity": None if j.type == "fixed" else j.velocity,
             "effort": None if j.type == "fixed" else j.effort}
            for j in robot.joints
        ],
        "actuated_joints": robot.joint_names,
        "feet": None,
    }
    if with_feet:
        try:
            info["feet"] = [leg.foot_link for leg in find_legs(robot, feet)]
        except AKDError as exc:
            info["feet_note"] = str(exc).split("\n")[0]
    return info
