"""The articulation model: one :class:`Robot` for every body AKD animates.

A Robot is read from any URDF (through yourdfpy), or built by :mod:`akd_core.model.skeletons`
for a creature. It owns links (inertia, visual and collision geometry), joints (revolute,
continuous, prismatic, fixed) with their limits, the actuated-joint order, and the root
link, which is always a 6-DoF floating base. It writes URDF (:meth:`Robot.to_urdf`) and
MJCF (:meth:`Robot.to_mjcf`) so MuJoCo, Newton, ROS and yourdfpy all see the same body.

Mesh URIs (``package://``, ``file://``, relative, absolute) are resolved through the
``--package-path`` folders, ``ROS_PACKAGE_PATH``, ``AMENT_PREFIX_PATH`` (``<prefix>/share``)
and the URDF's own folder and its ancestors.
"""

from __future__ import annotations

import hashlib
import logging
import os
import warnings
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from akd_core.io.errors import InertiaError, JointLimitError, KinematicTreeError, MeshNotFoundError, URDFError
from akd_core.io.fileio import atomic_path, write_text_atomic
from akd_core.model.spatial import fmt, make_transform, matrix_to_quat, matrix_to_rpy, xyzw_to_wxyz

log = logging.getLogger(__name__)

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")
ACTUATED_TYPES = ("revolute", "continuous", "prismatic")
GEOMETRY_KINDS = ("box", "cylinder", "sphere", "capsule", "mesh")
DEFAULT_EFFORT = 100.0  # N m, for URDFs without <limit effort>
DEFAULT_VELOCITY = 20.0  # rad/s
DEFAULT_LINK_MASS = 1e-3  # kg, for moving links without <inertial>
MUJOCO_MESH_SUFFIXES = (".stl", ".obj", ".msh")


# ----------------------------------------------------------------------------- records
@dataclass
class Geometry:
    """A visual or collision shape in its link's frame."""

    kind: str  # box | cylinder | sphere | capsule | mesh
    size: np.ndarray  # box (3,) full extents; cylinder/capsule (radius, length); sphere (radius,); mesh: scale (3,)
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))  # (4, 4) in the link frame
    mesh_uri: str | None = None
    mesh_path: Path | None = None  # resolved file
    rgba: np.ndarray | None = None  # (4,)
    name: str | None = None
    material_name: str | None = None


@dataclass
class Inertial:
    mass: float
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))  # (4, 4) COM frame in the link frame
    inertia: np.ndarray = field(default_factory=lambda: np.eye(3) * 1e-6)  # (3, 3) about the COM, in origin frame


@dataclass
class Link:
    name: str
    inertial: Inertial | None = None
    visuals: list[Geometry] = field(default_factory=list)
    collisions: list[Geometry] = field(default_factory=list)


@dataclass
class Joint:
    name: str
    type: str  # revolute | continuous | prismatic | fixed
    parent: str
    child: str
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))  # (4, 4) child frame in parent frame
    axis: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0]))
    lower: float = -np.inf
    upper: float = np.inf
    velocity: float = DEFAULT_VELOCITY
    effort: float = DEFAULT_EFFORT
    damping: float = 0.0
    friction: float = 0.0
    armature: float = 0.0  # rotor inertia (kg m^2) the model gives (MJCF); 0: unknown, AKD's default applies

    @property
    def actuated(self) -> bool:
        return self.type in ACTUATED_TYPES


# ----------------------------------------------------------------------------- Robot
class Robot:
    """A tree of links and joints with a floating root (see module docstring)."""

    def __init__(self, name: str, links: Sequence[Link], joints: Sequence[Joint], *,
                 urdf_path: Path | None = None, package_paths: Sequence[Path] = (),
                 materials: dict[str, np.ndarray] | None = None, source: str | None = None,
                 mjcf_path: Path | None = None):
        self.name = name
        self.urdf_path = Path(urdf_path) if urdf_path is not None else None
        # the MJCF this robot was read from (akd_core.model.mjcf): MuJoCo then tracks on that model itself
        self.mjcf_path = Path(mjcf_path) if mjcf_path is not None else None
        # links an MJCF reader put between joints of one MuJoCo body (ball joints, several joints in a body): they
        # have no body of their own in the MJCF, so engines on the MJCF cannot report them
        self.inserted_links: frozenset[str] = frozenset()
        self.package_paths = [Path(p) for p in package_paths]
        self.materials = dict(materials or {})
        self._source = source or (str(urdf_path or mjcf_path or "") or f"robot '{name}'")
        link_map = {}
        for link in links:
            if link.name in link_map:
                raise KinematicTreeError(f"{self._source}: link '{link.name}' is defined twice; rename one of them")
            link_map[link.name] = link
        self.root_link, order = _topological_links(link_map, joints, self._source)
        self.links: list[Link] = [link_map[n] for n in order]
        self._link_index = {link.name: i for i, link in enumerate(self.links)}
        # joints ordered like their child links: parents come first, FK runs in this order
        by_child = {j.child: j for j in joints}
        self.joints: list[Joint] = [by_child[n] for n in order[1:]]
        self._joint_by_name = {j.name: j for j in self.joints}
        if len(self._joint_by_name) != len(self.joints):
            dup = sorted({j.name for j in joints if sum(k.name == j.name for k in joints) > 1})
            raise KinematicTreeError(f"{self._source}: joint names {dup} are used more than once; rename them")
        # actuated order: URDF document order (what ROS tools and MuJoCo's URDF import use)
        self.actuated_joints: list[Joint] = [j for j in joints if j.actuated]
        self._document_links = [link.name for link in links]  # to_urdf keeps the source's order
        self._document_joints = [j.name for j in joints]
        for joint in self.actuated_joints:
            if joint.lower > joint.upper:
                raise JointLimitError(
                    f"{self._source}: joint '{joint.name}' has <limit lower=\"{joint.lower}\" upper=\"{joint.upper}\"> "
                    "with lower > upper; swap the two values")
            if not (np.linalg.norm(joint.axis) > 1e-9):
                raise URDFError(f"{self._source}: joint '{joint.name}' has a zero <axis xyz>; give a unit axis")
            joint.axis = np.asarray(joint.axis, dtype=np.float64) / np.linalg.norm(joint.axis)

    # -- lookup -------------------------------------------------------------
    @property
    def link_names(self) -> list[str]:
        return [link.name for link in self.links]

    @property
    def joint_names(self) -> list[str]:
        return [j.name for j in self.actuated_joints]

    @property
    def num_dofs(self) -> int:
        return len(self.actuated_joints)

    def link_index(self, name: str) -> int:
        try:
            return self._link_index[name]
        except KeyError:
            raise URDFError(f"{self._source}: no link named '{name}'; links are {self.link_names}") from None

    def link(self, name: str) -> Link:
        return self.links[self.link_index(name)]

    def joint(self, name: str) -> Joint:
        try:
            return self._joint_by_name[name]
        except KeyError:
            raise URDFError(f"{self._source}: no joint named '{name}'") from None

    def parent_joint(self, link_name: str) -> Joint | None:
        for joint in self.joints:
            if joint.child == link_name:
                return joint
        return None

    def children(self, link_name: str) -> list[Joint]:
        return [j for j in self.joints if j.parent == link_name]

    @property
    def lower(self) -> np.ndarray:
        return np.array([j.lower if j.type != "continuous" else -np.inf for j in self.actuated_joints])

    @property
    def upper(self) -> np.ndarray:
        return np.array([j.upper if j.type != "continuous" else np.inf for j in self.actuated_joints])

    @property
    def velocity_limit(self) -> np.ndarray:
        return np.array([j.velocity for j in self.actuated_joints])

    @property
    def effort_limit(self) -> np.ndarray:
        return np.array([j.effort for j in self.actuated_joints])

    @property
    def source_format(self) -> str:
        """Where the articulation came from: "mjcf", "urdf" or "skeleton" (built by AKD)."""
        return "mjcf" if self.mjcf_path is not None else "urdf" if self.urdf_path is not None else "skeleton"

    @property
    def total_mass(self) -> float:
        return float(sum(link.inertial.mass for link in self.links if link.inertial is not None))

    def default_joint_pos(self) -> np.ndarray:
        """Zero pose clipped into the limits (a zero outside [lower, upper] becomes the nearest bound)."""
        return np.clip(np.zeros(self.num_dofs), self.lower, self.upper)

    def __repr__(self) -> str:
        return (f"Robot({self.name!r}, links={len(self.links)}, dofs={self.num_dofs}, "
                f"mass={self.total_mass:.3f} kg, root={self.root_link!r})")

    # -- loading ------------------------------------------------------------
    @classmethod
    def from_urdf(cls, path: str | os.PathLike, package_paths: Iterable[str | os.PathLike] = ()) -> Robot:
        return load_urdf(path, package_paths)

    # -- writing ------------------------------------------------------------
    def to_urdf(self, path: str | os.PathLike | None = None, mesh_uris: str = "absolute",
                visuals: bool = True) -> str:
        """URDF XML of this robot. ``mesh_uris``: "absolute" (resolved file paths), "original" (URIs as read) or
        "stl" (resolved paths, meshes other than STL/OBJ converted to STL once in the AKD cache). ``visuals=False``
        leaves visual geometry out (for simulators, which need only collisions and inertia)."""
        lines = ['<?xml version="1.0"?>', f"<robot name={quoteattr(self.name)}>"]
        for name, rgba in self.materials.items():
            lines.append(f'  <material name={quoteattr(name)}><color rgba="{fmt(rgba)}"/></material>')
        for name in self._document_links:
            lines.extend(_link_urdf(self.link(name), mesh_uris, visuals))
        for name in self._document_joints:
            lines.extend(_joint_urdf(self.joint(name)))
        lines.append("</robot>")
        text = "\n".join(lines) + "\n"
        if path is not None:
            write_text_atomic(path, text)
        return text

    def to_mjcf(self, path: str | os.PathLike | None = None, *, kp: float | Sequence[float] = 60.0,
                kd: float | Sequence[float] = 2.0, armature: float | Sequence[float] = 0.01,
                timestep: float = 1e-3, friction: float = 1.0, root_height: float | None = None,
                self_collision: bool = False, ground: bool = True, visuals: bool = False,
                mesh_cache: str | os.PathLike | None = None) -> str:
        """MJCF of this robot: free-joint root, ground plane, position actuators.

        Actuators are MuJoCo ``position`` actuators with gains ``kp``/``kd`` per actuated joint (scalar or (J,))
        and the URDF effort limits as force ranges; joint ranges come from the URDF limits. Meshes MuJoCo
        cannot read (e.g. COLLADA) are converted to STL once into ``mesh_cache``.
        """
        return _robot_mjcf(self, path, kp=kp, kd=kd, armature=armature, timestep=timestep, friction=friction,
                           root_height=root_height, self_collision=self_collision, ground=ground, visuals=visuals,
                           mesh_cache=mesh_cache)


# ----------------------------------------------------------------------------- loading
def package_search_paths(urdf_path: Path | None, package_paths: Iterable[str | os.PathLike] = ()) -> list[Path]:
    """Folders searched for ``package://NAME/...``, in order.

    Explicit ``--package-path`` folders, ``ROS_PACKAGE_PATH``, ``<AMENT_PREFIX_PATH>/share``, then the URDF's
    folder and up to six of its ancestors (finds the package when the URDF sits inside it).
    """
    folders: list[Path] = [Path(p).expanduser() for p in package_paths]
    folders += [Path(p) for p in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if p]
    folders += [Path(p) / "share" for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if urdf_path is not None:
        here = Path(urdf_path).resolve().parent
        folders += [here, *list(here.parents)[:6]]
    return list(dict.fromkeys(folders))


def resolve_mesh_uri(uri: str, urdf_path: Path | None, package_paths: Iterable[str | os.PathLike] = (),
                     element: str = "mesh") -> Path:
    """The file a mesh URI names, or MeshNotFoundError listing every path tried."""
    tried: list[Path] = []
    base = Path(urdf_path).resolve().parent if urdf_path is not None else Path.cwd()
    if uri.startswith("package://"):
        rest = uri[len("package://"):]
        package, _, relative = rest.partition("/")
        for folder in package_search_paths(urdf_path, package_paths):
            for candidate in (folder / package / relative, folder / relative if folder.name == package else None):
                if candidate is None:
                    continue
                tried.append(candidate)
                if candidate.is_file():
                    return candidate
    else:
        plain = uri[len("file://"):] if uri.startswith("file://") else uri
        candidate = Path(plain) if os.path.isabs(plain) else base / plain
        tried.append(candidate)
        if candidate.is_file():
            return candidate
    source = str(urdf_path) if urdf_path else "URDF"
    searched = "\n  ".join(str(t) for t in tried) or "(no search folders)"
    raise MeshNotFoundError(
        f"{source}: {element} '{uri}' not found. Searched:\n  {searched}\n"
        "Fix: pass --package-path DIR (the folder that contains the package folder), or set ROS_PACKAGE_PATH / "
        "AMENT_PREFIX_PATH, or correct the filename in the URDF.")


def load_urdf(path: str | os.PathLike, package_paths: Iterable[str | os.PathLike] = (),
              resolve_meshes: bool = True) -> Robot:
    """Parse a URDF into a Robot (see module docstring for URI resolution)."""
    import yourdfpy
    from lxml import etree

    path = Path(path).expanduser()
    package_paths = [Path(p) for p in package_paths]
    if not path.is_file():
        raise URDFError(f"URDF file {path} does not exist; check the path")
    try:
        xml_root = etree.parse(str(path), etree.XMLParser(remove_comments=True)).getroot()
    except etree.XMLSyntaxError as exc:
        raise URDFError(f"{path}: malformed XML ({exc}); fix the file (e.g. check it with `xmllint {path}`)") from exc
    if xml_root.tag != "robot":
        raise URDFError(f"{path}: the root element is <{xml_root.tag}>, a URDF needs <robot>; "
                        "if this is a xacro file, expand it first with `xacro file.urdf.xacro > file.urdf`")
    for joint_el in xml_root.findall("joint"):
        jtype = joint_el.get("type")
        if jtype not in JOINT_TYPES + ("floating",):
            raise URDFError(f"{path}: joint '{joint_el.get('name')}' has type '{jtype}', which AKD does not support; "
                            f"use one of {', '.join(JOINT_TYPES)} (a 'floating' joint is allowed only at the root)")
    capsules = _capsules_by_link(xml_root)
    source = str(path)
    if capsules:  # yourdfpy rejects <capsule> (a common extension): parse a copy with spheres in their place
        import io

        for cap in xml_root.iter("capsule"):
            cap.tag, cap.attrib["radius"] = "sphere", cap.get("radius", "0")
            cap.attrib.pop("length", None)
        source = io.BytesIO(etree.tostring(xml_root))
    try:
        urdf = yourdfpy.URDF.load(source, build_scene_graph=False, load_meshes=False,
                                  filename_handler=lambda fname: fname)
    except Exception as exc:
        raise URDFError(f"{path}: yourdfpy could not parse it ({type(exc).__name__}: {exc}); "
                        "check the element named in the message") from exc
    robot_el = urdf.robot
    materials = {m.name: np.asarray(m.color.rgba, dtype=np.float64)
                 for m in robot_el.materials if m.name and m.color is not None}
    links: list[Link] = []
    missing_inertial: list[str] = []
    for link_el in robot_el.links:
        link = Link(name=link_el.name)
        if link_el.inertial is not None and link_el.inertial.mass is not None:
            link.inertial = _checked_inertial(link_el.inertial, link_el.name, path)
        if link.inertial is None:
            missing_inertial.append(link_el.name)
        for kind, items in (("visual", link_el.visuals), ("collision", link_el.collisions)):
            for index, item in enumerate(items):
                geom = _geometry_from_yourdfpy(item, kind, materials, path, package_paths, resolve_meshes,
                                               capsules.get((link_el.name, kind, index)))
                if geom is not None:
                    (link.visuals if kind == "visual" else link.collisions).append(geom)
        links.append(link)
    joints: list[Joint] = []
    floating_root: str | None = None
    for joint_el in robot_el.joints:
        if joint_el.type == "floating":
            floating_root = joint_el.child
            continue
        joints.append(_joint_from_yourdfpy(joint_el, path))
    if floating_root is not None:  # drop the world link: our root is always floating
        parents = {j.parent for j in robot_el.joints if j.type == "floating"}
        links = [link for link in links if link.name not in parents]
        joints = [j for j in joints if j.parent not in parents]
    _fill_missing_inertials(links, joints, missing_inertial, path)
    return Robot(robot_el.name or path.stem, links, joints, urdf_path=path, package_paths=package_paths,
                 materials=materials, source=str(path))


def _checked_inertial(inertial, link_name: str, path: Path) -> Inertial | None:
    """The link's Inertial, None for an explicitly massless link (mass 0), InertiaError for impossible values.

    Real robot URDFs often carry inertias that break the triangle inequality by rounding; those are
    accepted with a warning (MuJoCo's ``balanceinertia`` and Newton cope). Negative moments are errors.
    """
    mass = float(inertial.mass)
    inertia = np.asarray(inertial.inertia if inertial.inertia is not None else np.zeros((3, 3)), dtype=np.float64)
    origin = np.asarray(inertial.origin if inertial.origin is not None else np.eye(4), dtype=np.float64)
    if not np.isfinite(mass) or mass < 0:
        raise InertiaError(f"{path}: link '{link_name}' has <mass value=\"{mass}\">; a mass must be positive "
                           "(remove the <inertial> of a massless link instead)")
    if mass == 0:
        return None
    if not np.all(np.isfinite(inertia)):
        raise InertiaError(f"{path}: link '{link_name}' has a non-finite <inertia>; give finite ixx..izz")
    eig = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    tol = 1e-9 * max(1.0, float(np.max(np.abs(eig))))
    if np.min(eig) < -tol:
        raise InertiaError(
            f"{path}: link '{link_name}' has an invalid <inertia> (principal moments {np.round(eig, 9).tolist()}); "
            "moments must be non-negative; recompute it from the link's geometry (e.g. a box of the link's size)")
    if eig[0] + eig[1] < eig[2] * (1 - 1e-6) - tol:
        warnings.warn(f"{path}: link '{link_name}' <inertia> violates the triangle inequality "
                      f"(principal moments {np.round(eig, 9).tolist()}); simulators will rebalance it", stacklevel=4)
    return Inertial(mass=mass, origin=origin, inertia=inertia)


def _fill_missing_inertials(links: list[Link], joints: list[Joint], missing: list[str], path: Path) -> None:
    """Give moving bodies without any mass a small default (MuJoCo and Newton need mass on moving bodies).

    A moving body is the root (floating) or the child of a non-fixed joint, together with the links welded to
    it by fixed joints; massless links welded to a massive one are fine and stay massless.
    """
    by_name = {link.name: link for link in links}
    parent_joint = {j.child: j for j in joints}
    welded_children: dict[str, list[str]] = {}
    for joint in joints:
        if joint.type == "fixed":
            welded_children.setdefault(joint.parent, []).append(joint.child)

    def welded_mass(name: str) -> float:
        own = by_name[name].inertial.mass if by_name[name].inertial is not None else 0.0
        return own + sum(welded_mass(child) for child in welded_children.get(name, []))

    defaulted = []
    for link in links:
        joint = parent_joint.get(link.name)
        moving = joint is None or joint.type != "fixed"
        if moving and link.name in missing and welded_mass(link.name) <= 0.0:
            link.inertial = Inertial(mass=DEFAULT_LINK_MASS, inertia=np.eye(3) * 1e-7)
            defaulted.append(link.name)
    if defaulted:
        warnings.warn(f"{path}: links {defaulted} have no <inertial>; using {DEFAULT_LINK_MASS} kg defaults. "
                      "Add inertials to the URDF for realistic physics.", stacklevel=3)


def _capsules_by_link(xml_root) -> dict[tuple[str, str, int], tuple[np.ndarray, float, float]]:
    """<capsule> (a common URDF extension yourdfpy rejects): (link, kind, index) -> (origin, radius, length)."""
    found = {}
    for link_el in xml_root.findall("link"):
        for kind in ("visual", "collision"):
            for index, item in enumerate(link_el.findall(kind)):
                cap = item.find("geometry/capsule")
                if cap is None:
                    continue
                origin_el = item.find("origin")
                xyz = [float(v) for v in (origin_el.get("xyz", "0 0 0") if origin_el is not None else "0 0 0").split()]
                rpy = [float(v) for v in (origin_el.get("rpy", "0 0 0") if origin_el is not None else "0 0 0").split()]
                found[(link_el.get("name"), kind, index)] = (make_transform(xyz, rpy), float(cap.get("radius")),
                                                             float(cap.get("length")))
    return found


def _geometry_from_yourdfpy(item, kind: str, materials: dict, path: Path, package_paths: list[Path],
                            resolve_meshes: bool, capsule) -> Geometry | None:
    origin = np.asarray(item.origin if item.origin is not None else np.eye(4), dtype=np.float64)
    rgba = None
    material_name = None
    material = getattr(item, "material", None)
    if material is not None:
        material_name = material.name
        if material.color is not None:
            rgba = np.asarray(material.color.rgba, dtype=np.float64)
        elif material.name in materials:
            rgba = materials[material.name]
    g = item.geometry
    if capsule is not None:
        cap_origin, radius, length = capsule
        return Geometry("capsule", np.array([radius, length]), cap_origin, rgba=rgba, name=item.name,
                        material_name=material_name)
    if g is None:
        return None
    if g.box is not None:
        return Geometry("box", np.asarray(g.box.size, dtype=np.float64), origin, rgba=rgba, name=item.name,
                        material_name=material_name)
    if g.cylinder is not None:
        return Geometry("cylinder", np.array([g.cylinder.radius, g.cylinder.length], dtype=np.float64), origin,
                        rgba=rgba, name=item.name, material_name=material_name)
    if g.sphere is not None:
        return Geometry("sphere", np.array([g.sphere.radius], dtype=np.float64), origin, rgba=rgba, name=item.name,
                        material_name=material_name)
    if g.mesh is not None:
        scale = g.mesh.scale
        scale = np.ones(3) if scale is None else np.broadcast_to(np.asarray(scale, dtype=np.float64), (3,)).copy()
        mesh_path = resolve_mesh_uri(g.mesh.filename, path, package_paths, f"{kind} mesh") if resolve_meshes else None
        return Geometry("mesh", scale, origin, mesh_uri=g.mesh.filename, mesh_path=mesh_path, rgba=rgba,
                        name=item.name, material_name=material_name)
    return None


def _joint_from_yourdfpy(joint_el, path: Path) -> Joint:
    limit = joint_el.limit
    jtype = joint_el.type
    if jtype in ("revolute", "prismatic") and (limit is None or limit.lower is None or limit.upper is None):
        if limit is None:
            raise URDFError(f"{path}: {jtype} joint '{joint_el.name}' has no <limit>; add "
                            "<limit lower=... upper=... effort=... velocity=...> (or make it 'continuous')")
    lower = float(limit.lower) if limit is not None and limit.lower is not None else (
        -np.inf if jtype == "continuous" else 0.0)
    upper = float(limit.upper) if limit is not None and limit.upper is not None else (
        np.inf if jtype == "continuous" else 0.0)
    if jtype == "revolute" and lower == upper:
        # A <limit> without lower/upper (URDF defaults both to 0) or with equal ones: MuJoCo's URDF importer ignores
        # such a range ("equal lower and upper limits, limit ignored"), and so do we, so that the joint AKD plans
        # with is the one a simulator runs. A joint meant to be rigid is a fixed joint.
        warnings.warn(f"{path}: revolute joint '{joint_el.name}' has lower == upper ({lower:g}) in its <limit>; "
                      "read as unlimited (continuous), as MuJoCo reads it. Give it its real range "
                      "(<limit lower=... upper=...>), or make it type=\"fixed\" if it should not move",
                      stacklevel=2)
        jtype = "continuous"
    if jtype == "continuous":
        lower, upper = -np.inf, np.inf
    effort = float(limit.effort) if limit is not None and limit.effort else DEFAULT_EFFORT
    velocity = float(limit.velocity) if limit is not None and limit.velocity else DEFAULT_VELOCITY
    dyn = joint_el.dynamics
    return Joint(
        name=joint_el.name, type=jtype, parent=joint_el.parent, child=joint_el.child,
        origin=np.asarray(joint_el.origin if joint_el.origin is not None else np.eye(4), dtype=np.float64),
        axis=np.asarray(joint_el.axis if joint_el.axis is not None else [1.0, 0.0, 0.0], dtype=np.float64),
        lower=lower, upper=upper, velocity=velocity, effort=effort,
        damping=float(dyn.damping or 0.0) if dyn is not None else 0.0,
        friction=float(dyn.friction or 0.0) if dyn is not None else 0.0,
    )


def _topological_links(links: dict[str, Link], joints: Sequence[Joint], source: str) -> tuple[str, list[str]]:
    """(root, links in breadth-first order) or KinematicTreeError for loops, several roots, dangling joints."""
    children: dict[str, list[str]] = {name: [] for name in links}
    parent_of: dict[str, str] = {}
    for joint in joints:
        for end in (joint.parent, joint.child):
            if end not in links:
                raise KinematicTreeError(f"{source}: joint '{joint.name}' refers to link '{end}', which is not "
                                         "defined; add the <link> or fix the joint's parent/child")
        if joint.child in parent_of:
            raise KinematicTreeError(
                f"{source}: link '{joint.child}' is the child of two joints (via '{parent_of[joint.child]}' and "
                f"'{joint.parent}'): a kinematic loop. URDF describes trees; remove one joint (close loops with "
                "constraints in the simulator instead)")
        parent_of[joint.child] = joint.parent
        children[joint.parent].append(joint.child)
    roots = [name for name in links if name not in parent_of]
    if not roots:
        raise KinematicTreeError(f"{source}: every link has a parent: the joints form a loop; a URDF needs one "
                                 "root link")
    if len(roots) > 1:
        raise KinematicTreeError(f"{source}: several root links {roots}; connect them with joints so exactly one "
                                 "link has no parent")
    order, queue = [], deque([roots[0]])
    while queue:
        name = queue.popleft()
        order.append(name)
        queue.extend(children[name])
    if len(order) != len(links):
        stray = sorted(set(links) - set(order))
        raise KinematicTreeError(f"{source}: links {stray} are not reachable from the root '{roots[0]}' "
                                 "(a loop among them); make the joints a tree")
    return roots[0], order


# ----------------------------------------------------------------------------- URDF writing
def _origin_xml(tf: np.ndarray, indent: str) -> str:
    return f'{indent}<origin xyz="{fmt(tf[:3, 3])}" rpy="{fmt(matrix_to_rpy(tf[:3, :3]))}"/>'


def _geometry_urdf(geom: Geometry, tag: str, mesh_uris: str) -> list[str]:
    name = f" name={quoteattr(geom.name)}" if geom.name else ""
    out = [f"    <{tag}{name}>", _origin_xml(geom.origin, "      "), "      <geometry>"]
    if geom.kind == "box":
        out.append(f'        <box size="{fmt(geom.size)}"/>')
    elif geom.kind == "cylinder":
        out.append(f'        <cylinder radius="{fmt(geom.size[0])}" length="{fmt(geom.size[1])}"/>')
    elif geom.kind == "sphere":
        out.append(f'        <sphere radius="{fmt(geom.size[0])}"/>')
    elif geom.kind == "capsule":
        out.append(f'        <capsule radius="{fmt(geom.size[0])}" length="{fmt(geom.size[1])}"/>')
    else:
        if mesh_uris == "original" or geom.mesh_path is None:
            uri = geom.mesh_uri
        elif mesh_uris == "stl":  # for importers that only read STL/OBJ (COLLADA converted once, as for MJCF)
            uri = str(_mujoco_mesh_file(geom, _mesh_cache(None)))
        else:
            uri = str(geom.mesh_path)
        out.append(f'        <mesh filename={quoteattr(uri)} scale="{fmt(geom.size)}"/>')
    out.append("      </geometry>")
    if tag == "visual" and geom.rgba is not None:
        mname = quoteattr(geom.material_name or f"rgba_{'_'.join(f'{c:.3g}' for c in geom.rgba)}")
        out.append(f'      <material name={mname}><color rgba="{fmt(geom.rgba)}"/></material>')
    out.append(f"    </{tag}>")
    return out


def _standard_shapes(geom: Geometry) -> list[Geometry]:
    """Shapes standard URDF has: a capsule (not in the URDF spec; yourdfpy and urdfdom reject it) becomes its
    cylinder and two end spheres, the same solid."""
    if geom.kind != "capsule":
        return [geom]
    radius, length = float(geom.size[0]), float(geom.size[1])
    parts = [Geometry("cylinder", np.array([radius, length]), geom.origin, rgba=geom.rgba, name=geom.name,
                      material_name=geom.material_name)]
    for end, sign in (("a", 1.0), ("b", -1.0)):
        cap = geom.origin @ make_transform((0.0, 0.0, sign * length / 2))
        parts.append(Geometry("sphere", np.array([radius]), cap, rgba=geom.rgba,
                              name=f"{geom.name}_cap_{end}" if geom.name else None,
                              material_name=geom.material_name))
    return parts


def _link_urdf(link: Link, mesh_uris: str, visuals: bool = True) -> list[str]:
    out = [f"  <link name={quoteattr(link.name)}>"]
    if link.inertial is not None:
        i = link.inertial.inertia
        out += ["    <inertial>", _origin_xml(link.inertial.origin, "      "),
                f'      <mass value="{fmt(link.inertial.mass)}"/>',
                f'      <inertia ixx="{fmt(i[0, 0])}" ixy="{fmt(i[0, 1])}" ixz="{fmt(i[0, 2])}" '
                f'iyy="{fmt(i[1, 1])}" iyz="{fmt(i[1, 2])}" izz="{fmt(i[2, 2])}"/>',
                "    </inertial>"]
    for geom in link.visuals if visuals else ():
        for part in _standard_shapes(geom):
            out += _geometry_urdf(part, "visual", mesh_uris)
    for geom in link.collisions:
        for part in _standard_shapes(geom):
            out += _geometry_urdf(part, "collision", mesh_uris)
    out.append("  </link>")
    return out


def _joint_urdf(joint: Joint) -> list[str]:
    out = [f"  <joint name={quoteattr(joint.name)} type={quoteattr(joint.type)}>",
           _origin_xml(joint.origin, "    "),
           f"    <parent link={quoteattr(joint.parent)}/>",
           f"    <child link={quoteattr(joint.child)}/>"]
    if joint.type != "fixed":
        out.append(f'    <axis xyz="{fmt(joint.axis)}"/>')
        if joint.type == "continuous":
            out.append(f'    <limit effort="{fmt(joint.effort)}" velocity="{fmt(joint.velocity)}"/>')
        else:
            out.append(f'    <limit lower="{fmt(joint.lower)}" upper="{fmt(joint.upper)}" '
                       f'effort="{fmt(joint.effort)}" velocity="{fmt(joint.velocity)}"/>')
        if joint.damping or joint.friction:
            out.append(f'    <dynamics damping="{fmt(joint.damping)}" friction="{fmt(joint.friction)}"/>')
    out.append("  </joint>")
    return out


# ----------------------------------------------------------------------------- MJCF writing
def _per_joint(value: float | Sequence[float], n: int, name: str) -> np.ndarray:
    arr = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,)) if np.ndim(value) == 0 else np.asarray(value)
    if arr.shape != (n,):
        raise URDFError(f"{name} must be a scalar or have one value per actuated joint ({n}), got shape {arr.shape}")
    return arr


def _mesh_cache(mesh_cache: str | os.PathLike | None) -> Path:
    """Folder for converted meshes: ``mesh_cache``, else $AKD_CACHE or ~/.cache/akd, /mjcf_meshes."""
    cache = Path(mesh_cache) if mesh_cache else Path(os.environ.get("AKD_CACHE", Path.home() / ".cache" / "akd"))
    return cache / "mjcf_meshes"


def is_ascii_stl(path: Path) -> bool:
    """Whether an .stl file is ASCII ("solid ..." text), which MuJoCo cannot read (its decoder takes binary STL
    only). A binary STL may also begin with "solid": it is told apart by its size, 84 bytes + 50 per face."""
    with open(path, "rb") as f:
        head = f.read(84)
    if not head.lstrip().lower().startswith(b"solid"):
        return False
    return len(head) < 84 or path.stat().st_size != 84 + 50 * int.from_bytes(head[80:84], "little")


def _mujoco_mesh_file(geom: Geometry, cache: Path) -> Path:
    """A file MuJoCo can read for this mesh (binary STL, OBJ, MSH as is; anything else, ASCII STL included,
    converted to binary STL once)."""
    if geom.mesh_path is None:
        raise MeshNotFoundError(f"mesh '{geom.mesh_uri}' was not resolved to a file; load the URDF with mesh "
                                "resolution (and --package-path) to export MJCF")
    suffix = geom.mesh_path.suffix.lower()
    if suffix in MUJOCO_MESH_SUFFIXES and not (suffix == ".stl" and is_ascii_stl(geom.mesh_path)):
        return geom.mesh_path
    import trimesh

    digest = hashlib.sha1(f"{geom.mesh_path.resolve()}:{geom.mesh_path.stat().st_mtime_ns}".encode()).hexdigest()[:16]
    out = cache / f"{geom.mesh_path.stem}-{digest}.stl"
    if not out.exists():
        mesh = trimesh.load(geom.mesh_path, force="mesh")
        cache.mkdir(parents=True, exist_ok=True)
        with atomic_path(out) as tmp:
            mesh.export(tmp, file_type="stl")
    return out


def _geom_mjcf(geom: Geometry, name: str, cls: str, meshes: dict[str, tuple[Path, np.ndarray]], cache: Path) -> str:
    pos = fmt(geom.origin[:3, 3])
    quat = fmt(xyzw_to_wxyz(matrix_to_quat(geom.origin[:3, :3])))  # MuJoCo quaternions are (w, x, y, z)
    rgba = f' rgba="{fmt(geom.rgba)}"' if geom.rgba is not None else ""
    common = f'name={quoteattr(name)} class="{cls}" pos="{pos}" quat="{quat}"{rgba}'
    if geom.kind == "box":
        return f'<geom {common} type="box" size="{fmt(np.asarray(geom.size) / 2)}"/>'
    if geom.kind == "cylinder":
        return f'<geom {common} type="cylinder" size="{fmt([geom.size[0], geom.size[1] / 2])}"/>'
    if geom.kind == "capsule":
        return f'<geom {common} type="capsule" size="{fmt([geom.size[0], geom.size[1] / 2])}"/>'
    if geom.kind == "sphere":
        return f'<geom {common} type="sphere" size="{fmt(geom.size[:1])}"/>'
    mesh_file = _mujoco_mesh_file(geom, cache)
    key = f"mesh_{hashlib.sha1(f'{mesh_file}{geom.size}'.encode()).hexdigest()[:12]}"
    meshes[key] = (mesh_file, np.asarray(geom.size))
    return f'<geom {common} type="mesh" mesh="{key}"/>'


def _positive_definite(inertia: np.ndarray, floor: float = 1e-9) -> np.ndarray:
    """Clamp principal moments to a tiny positive floor (real URDFs carry degenerate inertias MuJoCo rejects)."""
    sym = 0.5 * (inertia + inertia.T)
    eig, vec = np.linalg.eigh(sym)
    if eig.min() > floor:
        return sym
    return (vec * np.maximum(eig, floor)) @ vec.T


def _robot_mjcf(robot: Robot, path, *, kp, kd, armature, timestep, friction, root_height, self_collision,
                ground, visuals, mesh_cache) -> str:
    n = robot.num_dofs
    kp_arr, kd_arr, arm_arr = (_per_joint(v, n, k) for v, k in ((kp, "kp"), (kd, "kd"), (armature, "armature")))
    cache = _mesh_cache(mesh_cache)
    meshes: dict[str, tuple[Path, np.ndarray]] = {}
    dof_index = {name: i for i, name in enumerate(robot.joint_names)}
    children: dict[str, list[Joint]] = {}
    for joint in robot.joints:
        children.setdefault(joint.parent, []).append(joint)

    def body(link: Link, joint: Joint | None, depth: int) -> list[str]:
        pad = "  " * depth
        if joint is None:
            height = root_height if root_height is not None else 0.0
            head = f'{pad}<body name={quoteattr(link.name)} pos="0 0 {fmt(height)}">'
            inner = [f'{pad}  <freejoint name="root"/>']
        else:
            quat = fmt(xyzw_to_wxyz(matrix_to_quat(joint.origin[:3, :3])))  # MuJoCo (w, x, y, z)
            head = f'{pad}<body name={quoteattr(link.name)} pos="{fmt(joint.origin[:3, 3])}" quat="{quat}">'
            inner = []
            if joint.actuated:
                i = dof_index[joint.name]
                jtype = "slide" if joint.type == "prismatic" else "hinge"
                limited = joint.type != "continuous"
                rng = f' range="{fmt([joint.lower, joint.upper])}"' if limited else ""
                inner.append(
                    f'{pad}  <joint name={quoteattr(joint.name)} type="{jtype}" axis="{fmt(joint.axis)}"'
                    f' limited="{"true" if limited else "false"}"{rng} armature="{fmt(arm_arr[i])}"'
                    f' damping="{fmt(joint.damping)}" frictionloss="{fmt(joint.friction)}"/>')
        if link.inertial is not None and link.inertial.mass > 0:
            com = link.inertial.origin
            rot = com[:3, :3]
            inertia = _positive_definite(rot @ link.inertial.inertia @ rot.T)  # body frame, for fullinertia
            full = [inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2], inertia[1, 2]]
            inner.append(f'{pad}  <inertial pos="{fmt(com[:3, 3])}" mass="{fmt(link.inertial.mass)}" '
                         f'fullinertia="{fmt(full)}"/>')
        for k, geom in enumerate(link.collisions):
            inner.append(pad + "  " + _geom_mjcf(geom, f"{link.name}_collision_{k}", "collision", meshes, cache))
        if visuals:
            for k, geom in enumerate(link.visuals):
                inner.append(pad + "  " + _geom_mjcf(geom, f"{link.name}_visual_{k}", "visual", meshes, cache))
        for child_joint in children.get(link.name, []):
            inner += body(robot.link(child_joint.child), child_joint, depth + 1)
        return [head, *inner, f"{pad}</body>"]

    tree = body(robot.link(robot.root_link), None, 2)
    robot_contype, robot_conaffinity = (1, 1) if self_collision else (1, 0)
    lines = [
        f"<mujoco model={quoteattr(robot.name)}>",
        "  <!-- written by AKD from the URDF; quaternions here are MuJoCo's (w, x, y, z) -->",
        '  <compiler angle="radian" autolimits="true" inertiafromgeom="false" balanceinertia="true"/>',
        f'  <option timestep="{fmt(timestep)}" gravity="0 0 -9.81" integrator="implicitfast"/>',
        "  <default>",
        f'    <default class="collision"><geom contype="{robot_contype}" conaffinity="{robot_conaffinity}" '
        f'group="3" friction="{fmt(friction)} 0.005 0.0001"/></default>',
        '    <default class="visual"><geom contype="0" conaffinity="0" group="1"/></default>',
        "  </default>",
        "  <asset>",
        '    <texture name="checker" type="2d" builtin="checker" rgb1="0.8 0.8 0.8" rgb2="0.5 0.5 0.5" '
        'width="256" height="256"/>',
        '    <material name="ground" texture="checker" texrepeat="8 8" texuniform="true"/>',
    ]
    worldbody = ["  <worldbody>", '    <light pos="0 0 4" dir="0 0 -1" directional="true"/>']
    if ground:
        worldbody.append(f'    <geom name="ground" type="plane" size="0 0 1" material="ground" contype="1" '
                         f'conaffinity="1" friction="{fmt(friction)} 0.005 0.0001"/>')
    worldbody += tree + ["  </worldbody>"]
    for key, (file, scale) in meshes.items():
        lines.append(f"    <mesh name={quoteattr(key)} file={quoteattr(str(file))} scale=\"{fmt(scale)}\"/>")
    lines.append("  </asset>")
    lines += worldbody
    lines.append("  <actuator>")
    for i, joint in enumerate(robot.actuated_joints):
        lines.append(
            f'    <position name={quoteattr(joint.name)} joint={quoteattr(joint.name)} kp="{fmt(kp_arr[i])}" '
            f'kv="{fmt(kd_arr[i])}" forcelimited="true" forcerange="{fmt([-joint.effort, joint.effort])}"/>')
    lines += ["  </actuator>", "</mujoco>"]
    text = "\n".join(lines) + "\n"
    if path is not None:
        write_text_atomic(path, text)
    return text


__all__ = ["Robot", "Link", "Joint", "Geometry", "Inertial", "load_urdf", "resolve_mesh_uri",
           "package_search_paths"]
