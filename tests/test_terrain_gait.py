"""Gaits on a terrain (akd_core.motion.footholds, the gait stage's --terrain): footholds on the surface and off the
stair nosings, swings that clear the ground, a body that climbs and pitches with it, and the run directory's
terrain.npz that later stages read."""

from __future__ import annotations

import numpy as np
import pytest

from akd_core.cli import main
from akd_core.io.rundir import RunDir
from akd_core.model.legs import find_legs
from akd_core.model.load import load_robot
from akd_core.model.terrain import EDGE_MIN_JUMP, Terrain, parse_terrain_spec, run_terrain
from akd_core.motion.footholds import EDGE_MARGIN, SWING_CLEARANCE
from akd_core.motion.gait import GaitSpec, foot_targets, generate_gait_result, on_terrain, resolve_spec, stance_pose

from .conftest import example_robot_urdf


@pytest.fixture(scope="module")
def a1():
    robot = load_robot(example_robot_urdf("a1"))
    legs = find_legs(robot)
    return robot, legs, stance_pose(robot, legs)


@pytest.mark.parametrize("spec", ["stairs:0.08,0.3", "stairs:0.08,0.3,down", "slope:10"])
def test_a_trot_plan_on_terrain_stands_on_the_surface_clears_it_and_climbs(a1, spec):
    robot, legs, stance = a1
    terrain = parse_terrain_spec(spec)
    gait = resolve_spec(GaitSpec(pattern="trot", speed=0.6), legs, stance)
    times = np.arange(151) / 50.0
    flat = foot_targets(gait, stance, times)
    plan = on_terrain(lambda t: foot_targets(gait, stance, t), times, terrain, stance)
    feet, down = plan["feet"], plan["contacts"]
    ground = terrain.height(feet[..., 0], feet[..., 1])
    # stance feet on the surface, at least EDGE_MARGIN (+ the foot's radius) from every nosing
    assert np.abs(feet[..., 2] - ground)[down].max() < 1e-9
    radius = np.array([leg.contact_radius for leg in stance.legs])
    assert (terrain.edge_distance(feet[..., 0], feet[..., 1]) - radius[None] >= EDGE_MARGIN - 1e-9)[down].all()
    # swings never below the ground under them, and clear it by SWING_CLEARANCE at mid-swing
    assert (feet[..., 2] - ground)[~down].min() > -1e-6
    mid = (~down) & (flat["feet"][..., 2] > 0.9 * flat["feet"][..., 2].max())
    assert (feet[..., 2] - ground)[mid].min() >= SWING_CLEARANCE - 1e-6
    # the body follows the ground under its feet and pitches with it (nose up going up: negative about y)
    rise = plan["root_pos"][:, 2] - flat["root_pos"][:, 2]
    under = terrain.height(plan["root_pos"][:, 0], plan["root_pos"][:, 1])
    assert np.abs(rise - under)[50:].max() < 0.1
    climbing = terrain.height(3.0, 0.0) > terrain.height(0.0, 0.0)
    late = plan["pitch"][100:].mean()
    assert (late < -0.05) if climbing else (late > 0.05)


def test_a1_trots_up_stairs_within_its_limits(a1):
    robot, legs, stance = a1
    terrain = parse_terrain_spec("stairs:0.08,0.3")
    result = generate_gait_result(robot, GaitSpec(pattern="trot", speed=0.8), 3.0, 50.0, legs,
                                  max_velocity_ratio=0.75, terrain=terrain, stance=stance)
    motion = result.motion
    assert result.ik_error_m < 5e-3
    assert (np.abs(motion.joint_vel()).max(0) <= np.asarray(robot.velocity_limit)).all()
    start, end = motion.root_pos[0], motion.root_pos[-1]
    assert end[2] - start[2] == pytest.approx(terrain.height(end[0], 0.0), abs=0.08)  # it climbed the stairs
    assert terrain.height(end[0], 0.0) >= 2 * 0.08 - 1e-9


def test_a1_trotting_down_stairs_keeps_its_shins_off_the_noses(a1):
    """A foot placed just past a nose on the tread below it holds its shin over the nose: a1's calves rested on them in
    41 % of the frames of a "trot down the stairs" reference, up to 41 mm deep. The footholds now keep the shins
    clear (SHIN_CLEARANCE from the shin's axis at both ends of each stance), checked with MuJoCo's collision
    detection on the reference's poses, as the tracked states are."""
    from akd_core.physics.ground_contacts import non_foot_contacts

    robot, legs, stance = a1
    assert stance.shins is not None and (stance.shins[:, 2] > 0.3 * stance.leg_length).all()
    terrain = parse_terrain_spec("stairs:0.1,0.3,down")
    result = generate_gait_result(robot, GaitSpec(pattern="trot", speed=0.6), 3.0, 50.0, legs,
                                  max_velocity_ratio=0.75, terrain=terrain, stance=stance)
    motion = result.motion
    assert result.ik_error_m < 5e-3
    touching = non_foot_contacts(robot, motion.root_pos, motion.root_quat, motion.joint_pos,
                                 [leg.foot_link for leg in legs], terrain)
    assert touching["non_foot_contact_frac"] == 0.0, touching
    assert motion.root_pos[-1, 2] - motion.root_pos[0, 2] < -0.15  # it went down the stairs


def test_the_gait_stage_records_the_terrain_for_the_later_stages(tmp_path, capsys):
    run_dir = tmp_path / "stairs"
    assert main(["gait", "--robot", str(example_robot_urdf("a1")), "--prompt", "a dog trots up the stairs",
                 "--duration", "2", "--out", str(run_dir), "--no-preview"]) == 0
    run = RunDir(run_dir)
    info = run.manifest()["terrain"]
    assert info["kind"] == "stairs" and info["spec"].startswith("stairs:0.1,0.3,up")
    assert any("terrain from the prompt" in n for n in info["notes"])
    terrain = run_terrain(run)
    with np.load(run_dir / "terrain.npz") as data:
        heights, cell, origin = data["heights"], float(data["cell"]), data["origin"]
    assert cell <= 0.02
    i, j = np.meshgrid(np.arange(0, heights.shape[0], 7), np.arange(0, heights.shape[1], 5), indexing="ij")
    x, y = origin[0] + i * cell, origin[1] + j * cell
    # the grid samples the exact terrain (away from the nosings, where a cell straddles two treads)
    away = terrain.edge_distance(x, y) > cell
    assert np.abs(heights[i, j] - terrain.height(x, y))[away].max() < 1e-5
    # --terrain wins over the prompt's words; a flat run writes no terrain.npz
    assert main(["gait", "--robot", "quadruped", "--prompt", "a dog trots up the stairs", "--terrain", "slope:5",
                 "--duration", "1", "--out", str(tmp_path / "slope"), "--no-preview"]) == 0
    assert RunDir(tmp_path / "slope").manifest()["terrain"]["kind"] == "slope"
    assert main(["gait", "--robot", "quadruped", "--prompt", "a dog trots", "--duration", "1",
                 "--out", str(tmp_path / "flat"), "--no-preview"]) == 0
    assert not (tmp_path / "flat" / "terrain.npz").exists()
    assert run_terrain(RunDir(tmp_path / "flat")).is_flat and Terrain.flat().is_flat
    assert EDGE_MIN_JUMP > 0
