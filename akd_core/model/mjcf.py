"""MuJoCo (MJCF) robots: read through MuJoCo's own compiler into a :class:`~akd_core.model.robot.Robot`, stored
with a run, and turned into the model MuJoCo tracks on.

Reading (:func:`load_mjcf`). The file (a robot's XML or a ``scene.xml`` that includes it) is parsed with
``mujoco.MjSpec.from_file`` and compiled, so ``<default>`` classes, ``<include>``, ``meshdir``/``assetdir``,
``fromto``/``euler``/``axisangle`` orientations and ``autolimits`` mean exactly what they mean in MuJoCo; AKD then
reads the *compiled* ``MjModel``:

- the body with the ``<freejoint>`` is the root link (floating base); every body below it becomes a link of the same
  name (an unnamed body is ``body<id>``). Bodies outside that subtree (a floor, props of a scene) are not part of the
  robot. No free joint, or several, is an error naming the file and the fix.
- ``hinge`` -> revolute (unlimited: continuous), ``slide`` -> prismatic, ``ball`` -> three revolutes
  ``<name>_x``, ``<name>_y``, ``<name>_z`` with two small intermediate links ``<name>_link_x``, ``<name>_link_y`` (as
  AKD's skeletons emit compound joints; a ball's cone limit bounds each of the three). A body without joints is
  welded to its parent by a fixed joint ``<body>_fixed``. Several joints in one body, or a joint whose anchor
  (``pos``) is off the body origin, get intermediate links too, so every link keeps the frame MuJoCo gives its body
  and FK agrees by body name. A joint's ``ref`` is folded into the fixed part of the transform: AKD's joint angle is
  MuJoCo's ``qpos``.
- inertia: MuJoCo's compiled ``body_mass``, ``body_ipos``/``body_iquat`` and principal ``body_inertia`` (so
  ``inertiafromgeom``, ``fullinertia`` and mesh inertia are MuJoCo's). Intermediate links carry 1e-4 of their body's
  mass at the joint anchor (simulators need mass on moving bodies), taken from that body so the total is MuJoCo's.
- geoms that collide (``contype`` or ``conaffinity`` non-zero) are collision geometry, the others visual; a mesh
  geom points at its file (resolved as MuJoCo does: ``meshdir``/``assetdir`` relative to the main file) with the
  geom pose MuJoCo compiled, un-doing the re-centering MuJoCo applies to mesh vertices (``mesh_pos``/``mesh_quat``).
  Ellipsoids become spheres of their mean radius; planes and height fields are skipped.
- joint ``damping``, ``frictionloss`` and ``armature`` are kept on the joints.
- effort limits: the joint's ``actuatorfrcrange`` when limited, else the largest of its actuators' limits: a
  ``forcerange`` (x gear) when force-limited, else for a *motor* (fixed gain, no bias) ``ctrlrange`` x gain x gear.
  A position or velocity servo's ``ctrlrange`` is a target range, never a torque (Menagerie's g1 uses
  ``<position ... inheritrange>`` with its torque limits in ``actuatorfrcrange``). A joint with no actuator and no
  ``actuatorfrcrange`` is still driven by AKD's PD (the reference moves every joint) with the largest effort limit
  found on the model's other joints, and a warning names it; a model where no joint has any limit is an error.
- velocity limits: MJCF has none. AKD uses :data:`~akd_core.model.robot.DEFAULT_VELOCITY` (20 rad/s, the URDF
  default) for hinges and :data:`DEFAULT_SLIDE_VELOCITY` for slides; reference clips keep joint speeds below 0.75 of
  these.

Storing (:func:`save_mjcf`): the run's ``robot.xml`` is the user's model flattened by MuJoCo (``MjSpec.to_xml``:
includes inlined, classes kept) with every asset file named by absolute path, so it compiles from any folder
without copying the meshes (as ``robot.urdf`` names its meshes by absolute path).

Tracking (:func:`tracking_spec`): the same MJCF with its actuators replaced by AKD's PD position actuators; see
there for what is kept and what AKD sets.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from akd_core.io.errors import MeshNotFoundError, MJCFError
from akd_core.io.fileio import write_text_atomic
from akd_core.model.robot import DEFAULT_VELOCITY, Geometry, Inertial, Joint, Link, Robot

log = logging.getLogger(__name__)

DEFAULT_SLIDE_VELOCITY = 2.0  # m/s, for slide joints (MJCF has no velocity limits)
INTERMEDIATE_MASS_FRACTION = 1e-4  # of its body's mass, for links AKD inserts between joints of one body
ROOT_JOINT = "root"  # the free joint's name in the tracking model (the MuJoCo engine looks it up by this name)
GROUND = "ground"
MENAGERIE_HINT = ("point AKD at a local checkout of MuJoCo Menagerie: `git clone "
                  "https://github.com/google-deepmind/mujoco_menagerie` once, then `export MENAGERIE_ROOT=/path/to/"
                  "mujoco_menagerie` (or pass the model's XML path to --robot)")


# ----------------------------------------------------------------------------- detection and names
def is_mjcf(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an XML file whose root element is ``<mujoco>`` (reads only the first element)."""
    from lxml import etree

    try:
        for _, element in etree.iterparse(str(path), events=("start",), remove_comments=True):
            return element.tag == "mujoco"
    except (etree.XMLSyntaxError, OSError):
        return False
    return False


def resolve_menagerie(spec: str) -> Path:
    """``menagerie:NAME[/FILE.xml]`` -> the model file, from ``$MENAGERIE_ROOT/NAME`` or the ``mujoco-menagerie``
    package's cache (``$MENAGERIE_CACHE_DIR``, else ``$XDG_CACHE_HOME`` or ~/.cache, ``/mujoco_menagerie/models``).
    Without FILE: ``scene.xml`` when the folder has one, else its only XML. Nothing is downloaded."""
    rest = spec.split(":", 1)[1].strip().strip("/")
    name, _, entry = rest.partition("/")
    if not name:
        raise MJCFError(f"--robot {spec!r}: name a Menagerie model, e.g. menagerie:unitree_go2 or "
                        "menagerie:unitree_g1/g1.xml")
    folders: list[Path] = []
    root = os.environ.get("MENAGERIE_ROOT")
    if root:
        folders.append(Path(root).expanduser() / name)
    cache = Path(os.environ.get("MENAGERIE_CACHE_DIR")
                 or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mujoco_menagerie")
    folders += sorted((cache / "models").glob(f"{name}-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    folders = [f for f in folders if f.is_dir() and (f.parent != cache / "models" or (f / ".complete").is_file())]
    if not folders:
        where = f"$MENAGERIE_ROOT={root}" if root else "$MENAGERIE_ROOT is not set"
        raise MJCFError(f"--robot {spec!r}: no Menagerie model '{name}' on this machine ({where}; the "
                        f"mujoco-menagerie cache {cache / 'models'} has none) and AKD never downloads at run time. "
                        f"Fix: {MENAGERIE_HINT}")
    folder = folders[0]
    if entry:
        path = folder / (entry if entry.endswith(".xml") else f"{entry}.xml")
        if not path.is_file():
            raise MJCFError(f"--robot {spec!r}: {path} does not exist; the model's XML files are "
                            f"{sorted(p.name for p in folder.glob('*.xml'))}")
        return path
    if (folder / "scene.xml").is_file():
        return folder / "scene.xml"
    xmls = sorted(folder.glob("*.xml"))
    if len(xmls) != 1:
        raise MJCFError(f"--robot {spec!r}: {folder} has no scene.xml and {len(xmls)} XML files "
                        f"{[p.name for p in xmls]}; name one: menagerie:{name}/FILE.xml")
    return xmls[0]


# ----------------------------------------------------------------------------- reading
def _import_mujoco():
    import mujoco

    return mujoco


def mjcf_spec(path: str | os.PathLike):
    """``MjSpec`` of an MJCF file, its asset files checked; MJCFError / MeshNotFoundError naming file and element."""
    mujoco = _import_mujoco()
    path = Path(path).expanduser()
    if not path.is_file():
        raise MJCFError(f"MJCF file {path} does not exist; check the path")
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except ValueError as exc:
        raise MJCFError(f"{path}: MuJoCo cannot parse it: {_mujoco_message(exc)}. Fix the element named there "
                        "(an <include> that includes itself, directly or through another file, is a cycle)") from None
    for kind, elements, folder in (("mesh", spec.meshes, spec.meshdir), ("texture", spec.textures, spec.texturedir),
                                   ("hfield", spec.hfields, spec.meshdir)):
        for element in elements:
            if not element.file:
                continue
            file = _asset_path(spec, folder, element.file)
            if not file.is_file():
                raise MeshNotFoundError(
                    f"{path}: <{kind} name='{element.name}' file='{element.file}'> not found (looked for {file}; "
                    f"relative files resolve against <compiler meshdir/assetdir> from the main file's folder "
                    f"{spec.modelfiledir}). Fix: correct the file name or the compiler's meshdir/assetdir")
    _name_unnamed(spec)
    return spec


def _name_unnamed(spec) -> None:
    """Name unnamed bodies ``body<k>`` (k: the body's index, MuJoCo's body id) and unnamed joints
    ``<body>_joint<k>``: links and joints are named in every AKD file, and the stored robot.xml keeps the names."""
    mujoco = _import_mujoco()
    taken = {b.name for b in spec.bodies if b.name} | {j.name for j in spec.joints if j.name}

    def fresh(wanted: str) -> str:
        name, k = wanted, 1
        while name in taken:
            k += 1
            name = f"{wanted}_{k}"
        taken.add(name)
        return name

    for k, body in enumerate(spec.bodies):
        if k > 0 and not body.name:
            body.name = fresh(f"body{k}")
    for body in spec.bodies[1:]:
        for k, joint in enumerate(body.joints):
            if not joint.name and joint.type != mujoco.mjtJoint.mjJNT_FREE:
                joint.name = fresh(f"{body.name}_joint{k}")


def _asset_path(spec, folder: str, file: str) -> Path:
    if os.path.isabs(file):
        return Path(file)
    base = Path(folder) if os.path.isabs(folder or "") else Path(spec.modelfiledir) / (folder or "")
    return (base / file).resolve()


def _mujoco_message(exc: Exception) -> str:
    return " ".join(str(exc).replace("\n", " ").split())


def compile_spec(spec, path: Path):
    """``spec.compile()`` with MuJoCo's error (which names the element and line) wrapped in an MJCFError."""
    try:
        return spec.compile()
    except ValueError as exc:
        raise MJCFError(f"{path}: MuJoCo cannot compile it: {_mujoco_message(exc)}. Fix the element named "
                        "there") from None


def load_mjcf(path: str | os.PathLike) -> Robot:
    """Read an MJCF robot (or a scene that includes one) into a Robot (module docstring)."""
    mujoco = _import_mujoco()
    path = Path(path).expanduser()
    spec = mjcf_spec(path)
    model = compile_spec(spec, path)
    free = [j for j in range(model.njnt) if int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE)]
    if not free:
        raise MJCFError(f"{path}: no <freejoint> (or <joint type=\"free\">): AKD animates floating-base robots and "
                        "the body with the free joint is the root. Fix: add <freejoint/> as the first child of the "
                        "robot's root <body> (a fixed-base robot, e.g. an arm, cannot walk)")
    if len(free) > 1:
        owners = [_body_name(model, int(model.jnt_bodyid[j])) for j in free]
        raise MJCFError(f"{path}: {len(free)} free joints (bodies {owners}); AKD needs one robot. Fix: pass the "
                        "robot's own XML, or a scene without other free bodies")
    root = int(model.jnt_bodyid[free[0]])
    if model.body_jntnum[root] != 1:
        raise MJCFError(f"{path}: body '{_body_name(model, root)}' has a free joint and other joints; give the "
                        "root body only the <freejoint/> and move the other joints to a child body")
    bodies = _subtree(model, root)
    names = _Names(model, bodies)
    links: list[Link] = []
    joints: list[Joint] = []
    for b in bodies:
        links.append(_body_link(model, b, names, path))
    effort = _effort_limits(model, path)
    for b in bodies:
        if b == root:
            continue
        joints += _body_joints(model, b, names, effort, links)
    actuated = [j for j in joints if j.actuated]
    if not actuated:
        raise MJCFError(f"{path}: the robot under body '{names.body(root)}' has no hinge, slide or ball joint: "
                        "nothing AKD could move. Fix: give its bodies joints (and actuators)")
    limited = [j for j in actuated if np.isfinite(j.effort)]
    if not limited:
        raise MJCFError(f"{path}: no joint is actuated: the model has no <actuator> on a hinge/slide joint and no "
                        "joint has actuatorfrcrange. Fix: add <motor joint=\"NAME\" ctrlrange=\"-T T\"/> per joint "
                        "(or actuatorfrcrange=\"-T T\" on each joint)")
    fallback = max(j.effort for j in limited)
    unlimited = [j.name for j in actuated if not np.isfinite(j.effort)]
    if unlimited:
        warnings.warn(f"{path}: joints {unlimited} have no actuator and no actuatorfrcrange; AKD drives them with "
                      f"its PD at the model's largest effort limit, {fallback:g}", stacklevel=2)
        for joint in actuated:
            if not np.isfinite(joint.effort):
                joint.effort = fallback
    # a scene's model name is often "<robot> scene": the robot is the name
    name = re.sub(r"[\s_-]*scene$", "", spec.modelname.strip(), flags=re.IGNORECASE)
    name = re.sub(r"\s+", "_", name) or path.stem
    robot = Robot(name, links, joints, package_paths=(), source=str(path), mjcf_path=path.resolve())
    robot.inserted_links = frozenset(set(robot.link_names) - set(names.body(b) for b in bodies))
    return robot


def _subtree(model, root: int) -> list[int]:
    """Bodies of ``root``'s subtree in MuJoCo's order (depth-first, as written)."""
    inside = {root}
    for b in range(root + 1, model.nbody):
        if int(model.body_parentid[b]) in inside:
            inside.add(b)
    return sorted(inside)


def _body_name(model, b: int) -> str:
    return model.body(b).name or f"body{b}"


class _Names:
    """Unique link and joint names: body and joint names as MuJoCo has them, generated ones made unique."""

    def __init__(self, model, bodies: list[int]):
        self.model = model
        self.used: set[str] = set()
        self._body = {}
        for b in bodies:
            self._body[b] = self.take(_body_name(model, b))
        for j in range(model.njnt):
            if int(model.jnt_bodyid[j]) in self._body and model.joint(j).name:
                self.used.add(model.joint(j).name)

    def body(self, b: int) -> str:
        return self._body[b]

    def take(self, wanted: str) -> str:
        name, k = wanted, 1
        while name in self.used:
            k += 1
            name = f"{wanted}_{k}"
        self.used.add(name)
        return name


def _transform(pos: np.ndarray, quat_wxyz: np.ndarray | None = None) -> np.ndarray:
    from akd_core.model.spatial import quat_to_matrix

    tf = np.eye(4)
    tf[:3, 3] = pos
    if quat_wxyz is not None:  # MuJoCo quaternions are (w, x, y, z)
        q = np.asarray(quat_wxyz, dtype=np.float64)
        tf[:3, :3] = quat_to_matrix(np.array([q[1], q[2], q[3], q[0]]))
    return tf


def _axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    from akd_core.model.spatial import quat_to_matrix

    tf = np.eye(4)
    axis = np.asarray(axis, dtype=np.float64) / max(np.linalg.norm(axis), 1e-12)
    half = 0.5 * angle
    tf[:3, :3] = quat_to_matrix(np.array([*(np.sin(half) * axis), np.cos(half)]))
    return tf


def _body_link(model, b: int, names: _Names, path: Path) -> Link:
    mujoco = _import_mujoco()
    link = Link(name=names.body(b))
    mass = float(model.body_mass[b])
    if mass > 0:
        link.inertial = Inertial(mass=mass, origin=_transform(model.body_ipos[b], model.body_iquat[b]),
                                 inertia=np.diag(np.asarray(model.body_inertia[b], dtype=np.float64)))
    for g in np.flatnonzero(model.geom_bodyid == b):
        geom = _geometry(model, int(g), path, mujoco)
        if geom is None:
            continue
        collides = model.geom_contype[g] != 0 or model.geom_conaffinity[g] != 0
        (link.collisions if collides else link.visuals).append(geom)
    return link


def _geometry(model, g: int, path: Path, mujoco) -> Geometry | None:
    kind = int(model.geom_type[g])
    size = np.asarray(model.geom_size[g], dtype=np.float64)
    origin = _transform(model.geom_pos[g], model.geom_quat[g])
    mat = int(model.geom_matid[g])
    rgba = np.asarray(model.mat_rgba[mat] if mat >= 0 else model.geom_rgba[g], dtype=np.float64).copy()
    name = model.geom(g).name or None
    t = mujoco.mjtGeom
    if kind == int(t.mjGEOM_BOX):
        return Geometry("box", 2.0 * size, origin, rgba=rgba, name=name)
    if kind == int(t.mjGEOM_SPHERE):
        return Geometry("sphere", size[:1].copy(), origin, rgba=rgba, name=name)
    if kind == int(t.mjGEOM_CAPSULE):
        return Geometry("capsule", np.array([size[0], 2.0 * size[1]]), origin, rgba=rgba, name=name)
    if kind == int(t.mjGEOM_CYLINDER):
        return Geometry("cylinder", np.array([size[0], 2.0 * size[1]]), origin, rgba=rgba, name=name)
    if kind == int(t.mjGEOM_ELLIPSOID):  # no ellipsoid in URDF: a sphere of the mean radius
        return Geometry("sphere", np.array([float(np.mean(size))]), origin, rgba=rgba, name=name)
    if kind == int(t.mjGEOM_MESH):
        mesh = int(model.geom_dataid[g])
        file = _mesh_file(model, mesh, path)
        # MuJoCo moves mesh vertices into the mesh's inertial frame: v_compiled = R^T (scale * v_file - p) with
        # (p, R) = (mesh_pos, mesh_quat), and compensates in the geom pose; the file's frame is that pose times
        # the inverse
        recenter = _transform(model.mesh_pos[mesh], model.mesh_quat[mesh])
        return Geometry("mesh", np.asarray(model.mesh_scale[mesh], dtype=np.float64).copy(),
                        origin @ np.linalg.inv(recenter), mesh_uri=str(file), mesh_path=file, rgba=rgba, name=name)
    return None  # plane, height field, SDF: not part of a link's shape


def _mesh_file(model, mesh: int, path: Path) -> Path:
    adr = int(model.mesh_pathadr[mesh])
    if adr < 0:
        raise MJCFError(f"{path}: <mesh name='{model.mesh(mesh).name}'> has no file (vertices given inline); AKD "
                        "needs mesh files for URDF and rendering. Fix: save the mesh as an STL/OBJ file")
    raw = model.paths[adr:].split(b"\x00", 1)[0].decode()
    return Path(raw) if os.path.isabs(raw) else Path(raw).resolve()


def _effort_limits(model, path: Path) -> np.ndarray:
    """(njnt,) effort limit per joint (inf where the model gives none), module docstring's rules."""
    mujoco = _import_mujoco()
    effort = np.full(model.njnt, np.inf)
    from_actuators = np.zeros(model.njnt)
    for a in range(model.nu):
        joint_transmission = (int(mujoco.mjtTrn.mjTRN_JOINT), int(mujoco.mjtTrn.mjTRN_JOINTINPARENT))
        if int(model.actuator_trntype[a]) not in joint_transmission:
            continue
        j = int(model.actuator_trnid[a, 0])
        gear = abs(float(model.actuator_gear[a, 0]))
        limit = 0.0
        if model.actuator_forcelimited[a]:
            limit = float(np.max(np.abs(model.actuator_forcerange[a]))) * gear
        motor = (int(model.actuator_gaintype[a]) == int(mujoco.mjtGain.mjGAIN_FIXED)
                 and int(model.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_NONE)
                 and int(model.actuator_dyntype[a]) == int(mujoco.mjtDyn.mjDYN_NONE))
        if motor and model.actuator_ctrllimited[a]:  # a servo's ctrlrange is a target, not a torque
            gain = abs(float(model.actuator_gainprm[a, 0]))
            torque = float(np.max(np.abs(model.actuator_ctrlrange[a]))) * gain * gear
            limit = min(limit, torque) if limit > 0 else torque
        from_actuators[j] = max(from_actuators[j], limit)
    effort[from_actuators > 0] = from_actuators[from_actuators > 0]
    own = model.jnt_actfrclimited.astype(bool)
    effort[own] = np.max(np.abs(model.jnt_actfrcrange[own]), axis=1)
    bad = np.flatnonzero(effort <= 0)
    if len(bad):
        raise MJCFError(f"{path}: joint '{model.joint(int(bad[0])).name}' has a zero effort limit (actuatorfrcrange "
                        "or actuator forcerange/ctrlrange of 0); give it a positive range")
    return effort


def _body_joints(model, b: int, names: _Names, effort: np.ndarray, links: list[Link]) -> list[Joint]:
    """The URDF joints (and intermediate links, appended to ``links``) that put body ``b`` on its parent."""
    mujoco = _import_mujoco()
    t = mujoco.mjtJoint
    child = names.body(b)
    parent = names.body(int(model.body_parentid[b]))
    prefix = _transform(model.body_pos[b], model.body_quat[b])  # body frame in the parent body's frame
    # one elementary DoF per entry: name, URDF type, anchor, axis, ref, lower, upper, MuJoCo joint, MuJoCo dof,
    # and the name of the link it moves when more joints follow in this body
    dofs: list[tuple] = []
    for j in range(int(model.body_jntadr[b]), int(model.body_jntadr[b] + model.body_jntnum[b])):
        jtype = int(model.jnt_type[j])
        jname = model.joint(j).name or names.take(f"{child}_joint")
        anchor = np.asarray(model.jnt_pos[j], dtype=np.float64)
        limited = bool(model.jnt_limited[j])
        dof = int(model.jnt_dofadr[j])
        if jtype == int(t.mjJNT_BALL):  # three revolutes x, y, z (intrinsic), as AKD's skeletons' compound joints
            bound = float(model.jnt_range[j, 1]) if limited else np.inf
            for k, axis in enumerate(np.eye(3)):
                dofs.append((f"{jname}_{'xyz'[k]}", "revolute" if limited else "continuous", anchor, axis, 0.0,
                             -bound, bound, j, dof + k, f"{jname}_link_{'xyz'[k]}"))
            continue
        lo, hi = (float(model.jnt_range[j, 0]), float(model.jnt_range[j, 1])) if limited else (-np.inf, np.inf)
        kind = "prismatic" if jtype == int(t.mjJNT_SLIDE) else "revolute" if limited else "continuous"
        dofs.append((jname, kind, anchor, np.asarray(model.jnt_axis[j], dtype=np.float64),
                     float(model.qpos0[model.jnt_qposadr[j]]), lo, hi, j, dof, f"{jname}_link"))
    if not dofs:
        return [Joint(name=names.take(f"{child}_fixed"), type="fixed", parent=parent, child=child, origin=prefix)]
    out: list[Joint] = []
    current = parent
    for k, (jname, kind, anchor, axis, ref, lo, hi, j, dof, link_name) in enumerate(dofs):
        # MuJoCo moves the body frame F by  F T(anchor) R(axis, q - ref) T(-anchor)  (slide: F T(axis (q - ref)));
        # a URDF joint turns by q about its axis at its own frame: T(anchor) R(axis, -ref) goes into its origin
        if kind == "prismatic":
            origin, rest = prefix @ _transform(-ref * axis / max(np.linalg.norm(axis), 1e-12)), np.eye(4)
        else:
            origin, rest = prefix @ _transform(anchor) @ _axis_angle(axis, -ref), _transform(-anchor)
        if k == len(dofs) - 1 and np.allclose(rest, np.eye(4)):
            next_link = child
        else:
            next_link = names.take(link_name)
            links.append(_intermediate_link(next_link, links, child, float(model.body_mass[b])))
        out.append(Joint(
            name=jname, type=kind, parent=current, child=next_link, origin=origin, axis=axis,
            lower=lo if kind != "continuous" else -np.inf, upper=hi if kind != "continuous" else np.inf,
            velocity=DEFAULT_SLIDE_VELOCITY if kind == "prismatic" else DEFAULT_VELOCITY,
            effort=float(effort[j]), damping=float(model.dof_damping[dof]),
            friction=float(model.dof_frictionloss[dof]), armature=float(model.dof_armature[dof])))
        current, prefix = next_link, rest
    if current != child:
        out.append(Joint(name=names.take(f"{child}_fixed"), type="fixed", parent=current, child=child, origin=prefix))
    return out


def _intermediate_link(name: str, links: list[Link], body: str, body_mass: float) -> Link:
    """A link between two joints of one body, carrying INTERMEDIATE_MASS_FRACTION of the body's mass (taken from
    the body, so the robot's total mass stays MuJoCo's)."""
    owner = next(link for link in links if link.name == body)
    mass = INTERMEDIATE_MASS_FRACTION * max(body_mass, 1e-3)
    if owner.inertial is not None and owner.inertial.mass > 2 * mass:
        owner.inertial.mass -= mass
    return Link(name=name, inertial=Inertial(mass=mass, inertia=np.eye(3) * mass * 1e-4))


# ----------------------------------------------------------------------------- storing
def save_mjcf(robot: Robot, path: str | os.PathLike) -> Path:
    """Write the MJCF ``robot`` was read from to ``path``: flattened by MuJoCo, asset files by absolute path
    (module docstring). Written atomically; the source is compiled first, so a broken model writes nothing."""
    if robot.mjcf_path is None:
        raise MJCFError(f"robot '{robot.name}' was not read from an MJCF; write robot.to_mjcf(...) instead")
    spec = mjcf_spec(robot.mjcf_path)
    _absolute_assets(spec)
    compile_spec(spec, robot.mjcf_path)
    return write_text_atomic(path, spec.to_xml())


def _absolute_assets(spec) -> None:
    for elements, folder in ((spec.meshes, spec.meshdir), (spec.hfields, spec.meshdir), (spec.skins, spec.meshdir),
                             (spec.textures, spec.texturedir)):
        for element in elements:
            if element.file:
                element.file = str(_asset_path(spec, folder, element.file))
    spec.meshdir = ""
    spec.texturedir = ""


# ----------------------------------------------------------------------------- the tracking model
def tracking_spec(robot: Robot, *, kp: Sequence[float], kd: Sequence[float], armature: Sequence[float],
                  effort: Sequence[float], timestep: float, friction: float, impratio: float,
                  contact_timeconst: float, ground: bool = True, explicit_inertia: bool = False):
    """The ``MjSpec`` MuJoCo tracks an MJCF robot on: its own model with AKD's PD actuators and AKD's ground.

    Kept from the MJCF: bodies, inertias, joints with their damping, frictionloss, stiffness, ``actuatorfrcrange``
    and ``ref``; geoms with their contact settings (contype/conaffinity, condim, friction, solref/solimp, margin),
    ``<contact>`` pairs and excludes, tendons and equality constraints, gravity compensation, the model's option
    flags and gravity. Replaced: every actuator, by one ``position`` actuator per actuated joint (named as the joint)
    with ``kp`` / ``kd`` (J,) and force range +-``effort`` (J,); ``armature`` (J,) on the joints (AKD's physics
    defaults keep the model's own armature where it gives one); sensors and keyframes (they index the old
    actuators) are removed. Set by AKD: ``timestep``, the ``implicitfast`` integrator, elliptic friction cones and
    ``impratio``; the scene around the robot (a floor, props, other bodies on the world) gives way to one ground
    plane ``ground`` at z = 0 whose material (Coulomb ``friction``, contact time constant ``contact_timeconst``)
    wins every robot-ground contact (``priority`` above the robot's geoms), so tracking figures compare across
    robots and with Newton (``ground=False``: no ground, for engines that add their own). A ball joint becomes the
    three hinges ``<name>_x/_y/_z`` of the Robot. The free joint is named ``root``. ``explicit_inertia`` writes
    MuJoCo's compiled mass and inertia into every body (for readers without MuJoCo's ``inertiafromgeom``); the spec
    is then compiled.
    """
    mujoco = _import_mujoco()
    path = robot.mjcf_path
    if path is None:
        raise MJCFError(f"robot '{robot.name}' was not read from an MJCF; use robot.to_mjcf(...)")
    spec = mjcf_spec(path)
    _absolute_assets(spec)  # so the spec can be saved anywhere (Newton reads it from a temporary file)
    for group in (spec.actuators, spec.sensors, spec.keys):
        for element in list(group):
            spec.delete(element)
    free = [j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_FREE]
    if len(free) != 1:
        raise MJCFError(f"{path}: expected one free joint, found {len(free)}; load the robot with load_mjcf first")
    root = free[0].parent
    for other in [j for j in spec.joints if j.name == ROOT_JOINT and j is not free[0]]:
        other.name = f"{ROOT_JOINT}_mjcf"  # rare: the engine's name for the free joint is taken
    free[0].name = ROOT_JOINT
    for geom in list(spec.worldbody.geoms):
        spec.delete(geom)
    for body in list(spec.worldbody.bodies):
        if body.name != root.name:
            spec.delete(body)
    for body in spec.bodies:
        if any(j.type == mujoco.mjtJoint.mjJNT_BALL for j in body.joints):
            _ball_to_hinges(spec, body, mujoco)
    spec.option.timestep = timestep
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = impratio
    priority = max([int(g.priority) for g in spec.geoms] + [0]) + 1
    if ground:
        spec.worldbody.add_geom(name=GROUND, type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 1.0],
                                friction=[friction, 0.005, 0.0001], solref=[contact_timeconst, 1.0], condim=3,
                                priority=priority, contype=0x7FFFFFFF, conaffinity=0x7FFFFFFF)
    kp, kd, armature, effort = (np.asarray(v, dtype=np.float64) for v in (kp, kd, armature, effort))
    for i, name in enumerate(robot.joint_names):
        joint = spec.joint(name)
        if joint is None:
            raise MJCFError(f"{path}: joint '{name}' of robot '{robot.name}' is not in the MJCF; the run's robot.xml "
                            "and robot.urdf disagree: re-create the run (`akd gait --robot ... --out RUN`)")
        joint.armature = float(armature[i])
        actuator = spec.add_actuator(name=name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        actuator.set_to_position(kp=float(kp[i]), kv=float(kd[i]))
        actuator.ctrllimited = False
        actuator.forcelimited = True
        actuator.forcerange = [-float(effort[i]), float(effort[i])]
    if explicit_inertia:
        model = compile_spec(spec, path)
        for body in spec.bodies[1:]:
            b = body.id if body.id >= 0 else model.body(body.name).id
            body.explicitinertial = True
            body.mass = float(model.body_mass[b])
            body.ipos = np.asarray(model.body_ipos[b], dtype=np.float64)
            body.iquat = np.asarray(model.body_iquat[b], dtype=np.float64)
            body.inertia = np.asarray(model.body_inertia[b], dtype=np.float64)
        compile_spec(spec, path)
    return spec


def _ball_to_hinges(spec, body, mujoco) -> None:
    """Replace a body's ball joint by three hinges x, y, z at its anchor (the other joints keep their order)."""
    joints = list(body.joints)
    saved = []
    for joint in joints:
        fields = {k: getattr(joint, k) for k in ("name", "type", "pos", "axis", "range", "limited", "ref", "damping",
                                                 "armature", "frictionloss", "stiffness", "springref",
                                                 "actfrclimited", "actfrcrange")}
        saved.append(fields)
        spec.delete(joint)
    for fields in saved:
        if fields["type"] != mujoco.mjtJoint.mjJNT_BALL:
            body.add_joint(**fields)
            continue
        bound = float(fields["range"][1])
        for k, axis in enumerate(np.eye(3)):
            hinge = dict(fields, name=f"{fields['name']}_{'xyz'[k]}", type=mujoco.mjtJoint.mjJNT_HINGE, axis=axis,
                         range=[-bound, bound], ref=0.0)
            body.add_joint(**hinge)


__all__ = ["load_mjcf", "is_mjcf", "resolve_menagerie", "mjcf_spec", "save_mjcf", "tracking_spec",
           "DEFAULT_SLIDE_VELOCITY"]
