"""Gaits on terrain where they failed before (issue 46): robots with human-like legs walk up and down stairs one tread
per step (akd_core.motion.stairs), and a robot with front and hind legs fits its body to what its legs reach
(akd_core.motion.gait BODY_FITS). Each figure is measured from the plan's or the clip's feet and the terrain's own
heights and edges; g1's clip up the stairs runs by default (seconds), the other clips and the tracking take minutes
(``-m slow``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from akd_core.cli import main
from akd_core.io.errors import MotionError
from akd_core.model.legs import find_legs
from akd_core.model.load import load_robot
from akd_core.model.terrain import parse_terrain_spec
from akd_core.motion import gait as gait_module
from akd_core.motion.feasibility import clip_link_poses, convex_hull_2d, feasibility_summary, signed_distance
from akd_core.motion.footholds import EDGE_MARGIN, SWING_CLEARANCE, fit_to_terrain
from akd_core.motion.gait import GaitSpec, foot_targets, generate_gait_result, resolve_spec, stance_pose
from akd_core.motion.humanoid import humanoid_body
from akd_core.motion.stairs import (
    MAX_LEAD,
    STAIR_DUTY,
    plan_stairs,
    stair_course,
    stair_feet,
    stair_zmp,
)

from .conftest import example_robot_urdf

G1_STAIRS = "stairs:0.1,0.3,up,start=0.2"  # as `akd run --robot g1 --terrain stairs:0.1,0.3` lays it out


@pytest.fixture(scope="module")
def g1():
    robot = load_robot(example_robot_urdf("g1"))
    legs = find_legs(robot)
    return robot, legs, humanoid_body(robot, legs)


def _sole_points(body, k, centre):
    """The contact points (heel and toe lines' ends, their pivot radius out) of foot k's level sole at ``centre``."""
    sole = body.soles[k]
    xs = (sole.heel_sole[0] - sole.pivot_radius, sole.toe_sole[0] + sole.pivot_radius)
    return np.array([[centre[0] + x, centre[1] + y] for x in xs for y in (-sole.half_width, sole.half_width)])


@pytest.mark.parametrize("spec, rise", [(G1_STAIRS, 0.1), ("stairs:0.1,0.3,down,start=0.2", -0.1)])
def test_a_stair_plan_puts_each_step_on_the_next_tread_and_swings_over_the_nosings(g1, spec, rise):
    _, _, body = g1
    terrain = parse_terrain_spec(spec)
    assert stair_course(terrain, body) and not stair_course(parse_terrain_spec("slope:10"), body)
    plan = plan_stairs(terrain, body, 0.9, STAIR_DUTY, 0.35, 3.0)
    swings = plan.swings
    assert [s.foot for s in swings[:6]] == [1, 0, 1, 0, 1, 0]  # alternating
    for swing in swings:
        # the whole sole on one tread, every contact point at least EDGE_MARGIN from an edge
        points = _sole_points(body, swing.foot, swing.b)
        heights = terrain.height(points[:, 0], points[:, 1])
        assert np.ptp(heights) < 1e-9 and heights[0] == pytest.approx(swing.b[2], abs=1e-9)
        assert terrain.edge_distance(points[:, 0], points[:, 1]).min() >= EDGE_MARGIN - 1e-9
    # one tread per step on the stairs: each foot lands one run (0.3 m) and one rise ahead of the other, and strides
    # two runs (step over step)
    on_stairs = np.abs(plan.rises) > 0.01
    assert on_stairs.sum() >= 6
    np.testing.assert_allclose(plan.leads[on_stairs][1:], 0.3, atol=1e-6)
    np.testing.assert_allclose(plan.rises[on_stairs], rise, atol=1e-9)
    strides = np.array([s.b[0] - s.a[0] for s in swings])[on_stairs][2:]
    np.testing.assert_allclose(strides, 0.6, atol=1e-6)
    # swings: lift, then forward, then down, the sole SWING_CLEARANCE over the ground under it while it moves on
    for swing in swings[:8]:
        grid = np.linspace(0.0, 1.0, len(swing.m))
        x = swing.a[0] + (swing.b[0] - swing.a[0]) * swing.m
        sole = body.soles[swing.foot]
        under = np.max([terrain.height(x + dx, swing.a[1] + dy) for dx in np.linspace(-sole.half_length,
                        sole.half_length, 19) for dy in (-sole.half_width, 0.0, sole.half_width)], axis=0)
        assert (swing.z - under).min() > -1e-6  # never into the ground
        travel = np.abs(swing.b[0] - swing.a[0]) * np.minimum(swing.m, 1 - swing.m)
        middle = travel > 0.03
        assert (swing.z - under)[middle].min() >= SWING_CLEARANCE - 1e-3
        assert swing.m[grid < swing.lift].max() < 1e-9 and swing.m[grid > 1 - swing.land].min() > 1 - 1e-9
    # a step up rises before it moves over the nosing; a step down moves over before it descends
    swing = swings[3]
    halfway = np.searchsorted(swing.m, 0.5)
    if rise > 0:
        assert swing.z[halfway] >= swing.b[2] + SWING_CLEARANCE - 1e-3
    else:
        assert swing.z[halfway] >= swing.a[2] + SWING_CLEARANCE - 1e-3
    # the ZMP reference lies on the sole of a foot in stance, on its tread's plane
    times = np.arange(0.0, 3.0, 0.01)
    feet = stair_feet(body, plan, times, math.radians(15.0))
    zmp, plane = stair_zmp(body, plan, times, 0.3, 0.6)
    for t in range(0, len(times), 5):
        corners = np.concatenate([_sole_points(body, k, feet["centre"][t, k]) for k in np.flatnonzero(
            feet["stance"][t])])
        assert signed_distance(zmp[t], convex_hull_2d(corners)) >= -1e-9
    single = feet["stance"].sum(1) == 1
    stance_z = np.max(np.where(feet["stance"], feet["centre"][..., 2], -np.inf), axis=1)
    np.testing.assert_allclose(plane[single], stance_z[single], atol=1e-9)


def test_treads_longer_than_a_step_take_both_feet_each(g1):
    _, _, body = g1
    terrain = parse_terrain_spec("stairs:0.1,0.7,up,start=0.2")
    assert 0.7 > MAX_LEAD * body.straight_height  # longer than the legs may stand apart
    plan = plan_stairs(terrain, body, 0.9, STAIR_DUTY, 0.35, 4.0)
    treads = np.round([s.b[2] for s in plan.swings], 6)
    # step-to: each tread above the floor gets both feet, one after the other (one run per stride)
    climbed = treads[treads > 0]
    climbed = climbed[: len(climbed) // 2 * 2]
    assert len(climbed) >= 4 and np.all(climbed[0::2] == climbed[1::2])
    for swing in plan.swings:
        points = _sole_points(body, swing.foot, swing.b)
        assert terrain.edge_distance(points[:, 0], points[:, 1]).min() >= EDGE_MARGIN - 1e-9


def test_a_quadruped_body_can_share_the_pitch_sit_lower_and_lean_back(a1_urdf):
    robot = load_robot(a1_urdf)
    legs = find_legs(robot)
    stance = stance_pose(robot, legs)
    terrain = parse_terrain_spec("slope:10")
    spec = resolve_spec(GaitSpec(pattern="trot", speed=0.5), legs, stance)
    times = np.arange(151) / 50.0
    plan = foot_targets(spec, stance, times)
    args = (plan, times, terrain, stance.legs, stance.feet_body, stance.leg_length)
    full = fit_to_terrain(*args)
    half = fit_to_terrain(*args, pitch_share=0.5, lower=0.03, lean=1.0)
    np.testing.assert_allclose(half["pitch"], 0.5 * full["pitch"], atol=1e-12)
    np.testing.assert_allclose(half["root_pos"][:, 2], full["root_pos"][:, 2] - 0.03, atol=1e-12)
    # lean: the body moves back by height x sin(pitch) (nose up), its feet where they were
    height = -stance.feet_body[:, 2].mean()
    np.testing.assert_allclose(half["root_pos"][:, 0] - full["root_pos"][:, 0], height * np.sin(half["pitch"]),
                               atol=1e-12)
    np.testing.assert_allclose(half["feet"], full["feet"], atol=1e-12)


# ----------------------------------------------------------------------------- clips
@pytest.mark.parametrize("spec, climb", [(G1_STAIRS, 1),  # ~8 s: the one clip of the default run
                                         pytest.param("stairs:0.1,0.3,down,start=0.2", -1, marks=pytest.mark.slow)])
def test_g1_walks_up_and_down_stairs_one_tread_per_step(g1, spec, climb):
    robot, legs, body = g1
    terrain = parse_terrain_spec(spec)
    asked = 0.77
    result = generate_gait_result(robot, GaitSpec(pattern="walk", speed=asked), 4.0, 50.0, legs,
                                  max_velocity_ratio=0.75, terrain=terrain)
    motion = result.motion
    assert any(n.startswith("stair walk (step over step, flat feet") for n in result.spec.notes)
    assert result.ik_error_m < 1e-3
    assert (np.abs(motion.joint_vel()).max(0) <= 0.75 * np.asarray(robot.velocity_limit) + 1e-6).all()
    assert motion.joint_pos.min(0).round(6).__ge__(np.round(robot.lower, 6)).all()
    assert motion.joint_pos.max(0).round(6).__le__(np.round(robot.upper, 6)).all()
    # speed: at least half the asked one (root displacement over the clip), and it climbs (or descends) the treads
    speed = (motion.root_pos[-1, 0] - motion.root_pos[0, 0]) / 4.0
    assert speed >= 0.5 * asked
    end = terrain.height(motion.root_pos[-1, 0], 0.0)
    assert climb * end >= 0.5 - 1e-9
    # stance soles flat on one tread, contact points >= EDGE_MARGIN from every edge (a heel may lift only as the
    # trailing foot leaves)
    link_pos, link_rot = clip_link_poses(robot, motion)
    feet = [robot.link_index(name) for name in motion.foot_names]
    points = link_pos[:, feet, None] + np.einsum("fkij,kpj->fkpi", link_rot[:, feet], motion.contact_points())
    down = motion.foot_contacts
    parts = motion.contact_parts()
    ground = terrain.height(points[..., 0], points[..., 1])
    on = down[..., None] & parts
    assert np.abs(points[..., 2] - ground)[on].max() < 0.012  # the sole's pivots: radius + its width band
    assert terrain.edge_distance(points[..., 0], points[..., 1])[on].min() >= EDGE_MARGIN - 1e-3
    # flat-footed: going up every stance frame; going down the trailing heel lifts in the last frames of its stance,
    # where the ankle cannot bend further
    assert parts[down].all(axis=-1).mean() >= (0.99 if climb > 0 else 0.7)
    # the pelvis follows the treads: its height above the tread under the stance feet stays within a band
    stance_z = np.sum(np.where(down, points[..., 0, 2], 0.0), axis=1) / down.sum(1)  # the treads under the feet
    above = motion.root_pos[:, 2] - stance_z
    assert np.ptp(above[50:]) < 0.25 * body.straight_height and above.min() > 0.7 * body.straight_height
    # the ZMP in the support, measured on the tread's plane
    assert feasibility_summary(robot, motion)["cop_inside_frac"] >= 0.8


@pytest.mark.slow
def test_akd_run_tracks_g1_up_stairs(tmp_path, capsys):
    run = tmp_path / "g1_stairs"
    assert main(["run", "--robot", str(example_robot_urdf("g1")), "--prompt", "walk up the stairs", "--terrain",
                 "stairs:0.1,0.3", "--out", str(run), "--export", "none"]) == 0
    stages = json.loads((run / "manifest.json").read_text())["stages"]
    gait, track, check = (stages[k]["metrics"] for k in ("gait", "track", "crosscheck"))
    assert track["link_pos_err_m"] <= 0.08 and not track["fell"]
    assert track["penetration_m"] <= 0.005 and track["stance_slip_mps"] <= 0.03
    assert track["feet_on_edges_frac"] == 0.0 and track["sole_on_one_tread_frac"] >= 0.99
    assert track["speed_mps"] >= 0.5 * gait["asked_speed_mps"]
    assert check["passed"]


@pytest.mark.slow
def test_the_built_in_quadruped_fits_its_body_to_a_10_degree_slope():
    robot = load_robot("quadruped")
    legs = find_legs(robot)
    terrain = parse_terrain_spec("slope:10")
    result = generate_gait_result(robot, GaitSpec(pattern="trot", speed=0.8), 3.0, 50.0, legs,
                                  max_velocity_ratio=0.75, terrain=terrain)
    assert result.ik_error_m <= 5e-3
    assert any(n.startswith("terrain slope: the legs reach the footholds") for n in result.spec.notes)
    assert (np.abs(result.motion.joint_vel()).max(0) <= 0.75 * np.asarray(robot.velocity_limit) + 1e-6).all()
    assert result.spec.speed >= 0.25  # it was slowed to 0.02 m/s by the jumps of legs out of reach
    motion = result.motion
    assert terrain.height(motion.root_pos[-1, 0], 0.0) > 0.05  # it went up the slope


@pytest.mark.slow
def test_a_terrain_no_body_fits_is_a_clear_error(monkeypatch):
    robot = load_robot("quadruped")
    legs = find_legs(robot)
    monkeypatch.setattr(gait_module, "MAX_ATTEMPTS", 2)  # the error, not the whole slow-down (minutes)
    with pytest.raises(MotionError, match="on the terrain 'stairs:0.3,0.3.*choose a gentler terrain"):
        generate_gait_result(robot, GaitSpec(pattern="trot", speed=0.5), 1.5, 50.0, legs,
                             max_velocity_ratio=0.75, terrain=parse_terrain_spec("stairs:0.3,0.3,up,start=0.2"))
