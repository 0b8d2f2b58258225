"""Motion programs (akd_core.motion.program): prompts and command timelines split into segments, one reference clip
with transitions a robot can execute (ramped velocities, phase-continuous gait changes, feet down in a stand), and
the tracked clip judged segment by segment."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from akd_core.cli import main
from akd_core.io.errors import ConfigError
from akd_core.io.rundir import RunDir
from akd_core.model.load import load_robot, load_run_robot
from akd_core.motion.classify import classify_gait
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.motion.program import (
    generate_program,
    is_program_prompt,
    program_from_commands,
    program_from_prompt,
    segment_figures,
    split_prompt,
    transition_figures,
)
from akd_core.physics.tracker import TrackingConfig, build, failing_segments

SEQUENCE = "a dog walks, then trots forward quickly, then stops"


@pytest.fixture(scope="module")
def quadruped():
    return load_robot("quadruped")


@pytest.fixture(scope="module")
def walk_trot_stop(quadruped):
    program = program_from_prompt(SEQUENCE, quadruped)
    return generate_program(quadruped, program, 50.0, prompt=SEQUENCE, max_velocity_ratio=0.75)


def test_a_prompt_that_describes_a_sequence_becomes_segments(quadruped):
    assert split_prompt(SEQUENCE) == ["a dog walks", "trots forward quickly", "stops"]
    assert is_program_prompt(SEQUENCE) and is_program_prompt("a dog trots for 3 seconds")
    assert not is_program_prompt("a dog trotting forward quickly")
    walk, trot, stop = program_from_prompt(SEQUENCE, quadruped).segments
    assert (walk.kind, walk.pattern, trot.kind, trot.pattern, stop.kind, stop.stop) == \
        ("move", "walk", "move", "trot", "stand", True)
    assert trot.level == pytest.approx(0.85) and trot.speed > walk.speed

    # a piece without a gait word keeps the gait and speed before it; "starts" stands first; lengths and backing up
    program = program_from_prompt("a dog starts trotting slowly, then turns left for 3 seconds, then backs up, "
                                  "then speeds up to a gallop, then stands still", quadruped)
    kinds = [(s.kind, s.pattern) for s in program.segments]
    assert kinds == [("stand", None), ("move", "trot"), ("move", "trot"), ("move", "trot"), ("move", "gallop"),
                     ("stand", None)]
    start, trot, turn, back, gallop, stand = program.segments
    assert turn.turn_rate > 0 and turn.duration == 3.0 and turn.speed == pytest.approx(trot.speed)
    assert back.direction == pytest.approx(math.pi) and gallop.explicit_pattern and not stand.stop
    assert any("5 piece" in n for n in program.notes) and any("before the start" in n for n in program.notes)


def test_command_timelines_read_csv_and_yaml_and_name_the_bad_row(tmp_path, quadruped):
    csv = tmp_path / "commands.csv"
    csv.write_text("t,vx,vy,yaw_rate,gait\n0,0,0,0,\n1.5,0.4,0,0,walk\n4,0.6,0.1,0.3,\n6,0,0,0,\n")
    program = program_from_commands(csv, quadruped, prompt="a trotting dog")
    kinds = [(s.kind, s.pattern, s.duration) for s in program.segments]
    assert kinds == [("stand", None, 1.5), ("move", "walk", 2.5), ("move", "trot", 2.0), ("stand", None, None)]
    assert program.segments[2].command == pytest.approx([0.6, 0.1, 0.3])
    assert program.segments[3].stop
    yaml_file = tmp_path / "commands.yaml"
    yaml_file.write_text("commands:\n  - {t: 0, vx: 0.3, vy: 0, yaw_rate: 0}\n"
                         "  - {t: 2, vx: 0, vy: 0, yaw_rate: 0.5}\n")
    assert [s.pattern for s in program_from_commands(yaml_file, quadruped).segments] == ["trot", "trot"]

    for text, words in [("t,vx,vy\n0,0,0\n", ["lacks ['yaw_rate']"]),
                        ("t,vx,vy,yaw_rate\n0,0.3,0,0\n2,fast,0,0\n", ["row 3", "'vx'", "'fast'"]),
                        ("t,vx,vy,yaw_rate\n0,0.3,0,0\n2,0.3,0,0\n1,0,0,0\n", ["row 4", "'t'", "increase"]),
                        ("t,vx,vy,yaw_rate\n1,0.3,0,0\n", ["row 2", "starts at t = 0"]),
                        ("t,vx,vy,yaw_rate,gait\n0,0.3,0,0,moonwalk\n", ["row 2", "'gait'", "moonwalk"])]:
        bad = tmp_path / "bad.csv"
        bad.write_text(text)
        with pytest.raises(ConfigError) as err:
            program_from_commands(bad, quadruped)
        assert str(bad) in str(err.value) and all(w in str(err.value) for w in words), str(err.value)


def test_a_walk_trot_stop_program_ramps_blends_and_ends_standing(quadruped, walk_trot_stop):
    result = walk_trot_stop
    motion = result.motion
    assert [s.segment.kind for s in result.segments] == ["move", "move", "stand"]
    assert motion.duration == pytest.approx(result.segments[-1].end, abs=0.02)
    # every joint within its URDF velocity limit, the feet on their targets
    limit = np.asarray(quadruped.velocity_limit)
    assert (np.abs(motion.joint_vel()).max(0) <= limit).all() and result.ik_error_m < 2e-3
    # no frame-to-frame jump at a transition: joint accelerations within 2 x those inside the segments
    assert transition_figures(motion, result.segments)["transition_acc_ratio"] <= 2.0
    # the root moves at each segment's command in its steady part, and stands still with every foot down at the end
    figures = segment_figures(motion, result.segments)
    for item, fig in zip(result.segments[:2], figures):
        assert fig["vx_mps"] == pytest.approx(item.command[0], rel=0.1)
    assert figures[2]["last_second_speed_mps"] < 0.01 and figures[2]["last_second_feet_down"] == 1.0
    # the feet's pattern reads as the gaits asked for, segment by segment
    for item, gait in zip(result.segments[:2], ("walk", "trot")):
        a, b = (int(round(t * motion.fps)) for t in (item.start + item.ramp, item.end))
        part = Motion(fps=motion.fps, joint_names=motion.joint_names, joint_pos=motion.joint_pos[a:b],
                      root_pos=motion.root_pos[a:b], root_quat=motion.root_quat[a:b], foot_names=motion.foot_names,
                      foot_offsets=motion.foot_offsets)
        assert classify_gait(quadruped, part).gait == gait


def test_gait_changes_keep_every_leg_phase_continuous(walk_trot_stop):
    """Each foot alternates stance and swing with no sliver steps across the walk-to-trot blend: every swing lasts at
    least a third of the shorter gait's own swing."""
    contacts = walk_trot_stop.motion.foot_contacts
    fps = walk_trot_stop.motion.fps
    shortest = min((1 - s.spec.duty_factor) / s.spec.frequency for s in walk_trot_stop.segments[:2])
    for k in range(contacts.shape[1]):
        edges = np.flatnonzero(np.diff(contacts[:, k].astype(int)))
        runs = np.diff(edges) / fps
        swings = runs[0::2] if not contacts[edges[0] + 1, k] else runs[1::2]
        assert swings.min() >= shortest / 3


def test_a_program_tracks_segment_by_segment_and_the_manifest_says_so(tmp_path, capsys):
    run_dir = tmp_path / "program"
    assert main(["gait", "--robot", "quadruped", "--prompt", "a dog trots, then stops", "--out", str(run_dir),
                 "--no-preview"]) == 0
    out = capsys.readouterr().out
    assert "segment 1:" in out and "segment 2:" in out
    gait = RunDir(run_dir).stage("gait")
    segments = gait["config"]["segments"]
    assert [s["pattern"] for s in segments] == ["trot", "stand"]
    assert gait["metrics"]["num_segments"] == 2
    assert main(["track", str(run_dir)]) == 0
    track = json.loads((run_dir / "manifest.json").read_text())["stages"]["track"]["metrics"]
    trot, stop = track["segments"]
    assert trot["passed"] and stop["passed"] and trot["motion_class"] == "steady"
    assert trot["link_pos_err_m"] <= 0.03 and trot["gait_seen"]["gait"] == "trot"
    assert trot["achieved"]["vx_mps"] == pytest.approx(trot["command"]["vx_mps"], rel=0.15)
    assert stop["achieved"]["last_second_speed_mps"] < 0.05 and stop["last_second_feet_down"] >= 0.9
    # each segment's stance slip, from the engine's contacts over its own steps
    assert 0 <= trot["stance_slip_mps"] <= 0.03 and 0 <= stop["stance_slip_mps"] <= 0.03
    assert stop["stance_slip_mps"] < trot["stance_slip_mps"] + 0.01
    # a segment that misses its limit is found (it makes the MPC plan the clip again): the stop moved 0.1 m off
    robot = load_run_robot(RunDir(run_dir))
    motion = Motion.load(run_dir / "reference.npz", robot)
    setup = build(robot, motion, TrackingConfig())
    tracked = TrackedMotion.load(run_dir / "tracked.npz")
    assert failing_segments(setup, tracked, segments, setup.cfg) == []
    a = int(round(segments[1]["start_s"] * motion.fps))
    tracked.root_pos[a:, 0] += 0.1
    assert failing_segments(setup, tracked, segments, setup.cfg) == [2]


def test_commands_without_a_prompt_and_a_duration_that_cuts_the_program(tmp_path, capsys):
    csv = tmp_path / "c.csv"
    csv.write_text("t,vx,vy,yaw_rate\n0,0.3,0,0\n2,0.3,0,0.5\n")
    run_dir = tmp_path / "timeline"
    assert main(["gait", "--robot", "quadruped", "--commands", str(csv), "--duration", "3", "--out", str(run_dir),
                 "--no-preview"]) == 0
    motion = Motion.load(run_dir / "reference.npz")
    assert motion.duration == pytest.approx(3.0, abs=0.03)
    assert RunDir(run_dir).manifest()["prompt"] == "command timeline c.csv"
    # neither a prompt nor a timeline: a clear error, nothing written
    assert main(["gait", "--robot", "quadruped", "--out", str(tmp_path / "none")]) == 2
    assert "--commands FILE" in capsys.readouterr().err
