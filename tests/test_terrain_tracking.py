"""Tracking and the cross-check on a terrain (issue 46, item 3): the MuJoCo tracking engine stands on the terrain's
geoms (the planner's model too), `akd track` and `akd crosscheck` simulate on the run's terrain, and the figures are
measured from its surface: no penetration or fall for a robot standing on a lower level, feet near stair nosings
counted, a steady clip on a terrain held to 0.04 m."""

from __future__ import annotations

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
    assert climbed >= 0.08 and tracked.root_pos[-1, 2] - tracked.root_pos[0, 2] == pytest.approx(climbed, abs=0.04)
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
