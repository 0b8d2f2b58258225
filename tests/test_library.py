"""`akd library` (akd_core.library): command timelines planned to fill the cells of the robot's velocity-command box
(every cell visited, transitions a program can ramp, timelines the pipeline reads), clear errors for a bad box,
coverage binned from tracked states, the commanded velocity per frame in the dataset, and a resumable library."""

from __future__ import annotations

import json
import math

import h5py
import numpy as np
import pytest

from akd_core.cli import main
from akd_core.export.common import commanded_velocity
from akd_core.io.errors import ConfigError, MotionError
from akd_core.library import (
    HOLD_S,
    LIBRARY_YAW_RATE_WEIGHT,
    START_S,
    STEADY_S,
    CommandBox,
    CommandGrid,
    coverage_report,
    heading_velocities,
    parse_range,
    plan_library,
)
from akd_core.model.spatial import quat_yaw
from akd_core.motion.program import ACCEL_MAX, RAMP_S, SMOOTHSTEP_PEAK, YAW_ACCEL_MAX, read_commands

# the built-in quadruped's default box: vx -0.5 .. its top trot speed, vy +-0.3 m/s, yaw rate +-1 rad/s
QUADRUPED_BOX = CommandBox(vx=(-0.5, 0.94), vy=(-0.3, 0.3), yaw_rate=(-1.0, 1.0), speed_max=0.94,
                           gaits=(("trot", 0.94),))
STRIDE_S = 0.86


def _ramp_needed(before: np.ndarray, after: np.ndarray) -> float:
    """The program's own ramp between two commands (akd_core.motion.program, within its acceleration limits)."""
    change = np.asarray(after) - np.asarray(before)
    return max(RAMP_S, SMOOTHSTEP_PEAK * math.hypot(change[0], change[1]) / ACCEL_MAX,
               SMOOTHSTEP_PEAK * abs(change[2]) / YAW_ACCEL_MAX)


def test_the_grid_is_centred_on_zero_and_every_target_lies_in_its_cell_the_box_and_the_speed_disk():
    grid = CommandGrid(QUADRUPED_BOX)
    assert grid.shape == (8, 3, 5)
    np.testing.assert_allclose(grid.axes[0], [-0.4, -0.2, 0.0, 0.2, 0.4, 0.6, 0.8, 1.0], atol=1e-9)
    np.testing.assert_allclose(grid.axes[1], [-0.3, 0.0, 0.3], atol=1e-9)
    np.testing.assert_allclose(grid.axes[2], [-0.8, -0.4, 0.0, 0.4, 0.8], atol=1e-9)
    assert tuple(grid.index(np.zeros((1, 3)))[0]) == (2, 1, 2)  # standing is a cell centre, not an edge
    infeasible = 0
    for cell in grid.cells():
        target = grid.target(cell)
        if target is None:
            infeasible += 1
            continue
        assert tuple(grid.index(target[None])[0]) == cell
        assert math.hypot(target[0], target[1]) <= 0.94 + 1e-9
        for value, (lo, hi) in zip(target, QUADRUPED_BOX.ranges):
            assert lo - 1e-9 <= value <= hi + 1e-9
    assert infeasible == 10  # vx 1.0 with vy +-0.3 at any yaw rate: faster than the trot keeps
    # turning costs speed: the trot keeps 0.85 m/s at 0.91 rad/s, so vx 1.0 is out at every yaw rate but zero
    turning = CommandBox(**{**QUADRUPED_BOX.__dict__, "turning": (0.91, 0.85)})
    assert turning.speed_limit(0.0) == pytest.approx(0.94) and turning.speed_limit(-2.0) == pytest.approx(0.85)
    grid = CommandGrid(turning)
    assert sum(grid.target(c) is None for c in grid.cells()) == 14
    assert grid.target((7, 1, 2)) is not None and grid.target((7, 1, 3)) is None


def test_the_plan_visits_every_feasible_cell_with_ramps_the_program_can_make_in_readable_timelines(tmp_path):
    plan = plan_library(CommandGrid(QUADRUPED_BOX), clips=40, seconds=10.0, seed=0, stride_s=STRIDE_S)
    assert len(plan.clips) == 40
    visited = {cell for clip in plan.clips for cell in clip.cells}
    moving = set(plan.targets) - {plan.stand_cell}
    assert visited == moving and len(moving) == 109
    assert plan.planned_seconds()[plan.feasible()].min() >= STEADY_S - 1e-9
    neighbours = steps = stops = 0
    jumps = []
    for clip in plan.clips:
        path = tmp_path / f"{clip.name}.csv"
        path.write_text(clip.csv_text())
        rows = read_commands(path)  # what `akd run --commands` reads
        assert [r["t"] for r in rows] == pytest.approx([r.t for r in clip.rows], abs=1e-3)
        assert rows[0]["t"] == 0 and (rows[0]["vx"], rows[0]["vy"], rows[0]["yaw_rate"]) == (0, 0, 0)
        assert "gait" not in rows[0] and rows[1]["t"] == pytest.approx(START_S)  # every clip starts from a stand
        ends = [r["t"] for r in rows[1:]] + [clip.seconds]
        previous = np.zeros(3)
        for row, end in zip(rows, ends):
            command = np.array([row["vx"], row["vy"], row["yaw_rate"]])
            hold = end - row["t"]
            if row is not rows[0]:
                # at least 1 s of steady command after the ramp into it (a gait blend of a stride between moves)
                blend = STRIDE_S if ("gait" in row and np.any(previous)) else 0.0
                assert hold >= max(_ramp_needed(previous, command), blend) + STEADY_S - 1e-3, (clip.name, row)
                assert hold >= HOLD_S - 1e-3 or "gait" not in row
            previous = command
        stops += "gait" not in rows[-1] and len(rows) > 1
        cells = clip.cells
        for a, b in zip(cells, cells[1:]):
            jumps.append(max(abs(x - y) for x, y in zip(a, b)))
            if clip.round == 0:
                steps += 1
                neighbours += sum(abs(x - y) for x, y in zip(a, b)) == 1
    assert stops == 20  # every second clip ends with a stop
    # the first round tours neighbouring cells (one command changes by one cell; diagonal only around the corners
    # outside the speed disk); the revisits, spread over the box, move at most two cells along any axis
    assert neighbours / steps > 0.9 and max(jumps) <= 2
    assert plan.to_dict()["neighbour_pairs_planned"] > 0.25 * plan.to_dict()["neighbour_pairs"]


def test_few_clips_spread_over_the_box_and_extra_clips_revisit_the_least_covered_cells(monkeypatch):
    grid = CommandGrid(QUADRUPED_BOX)
    few = plan_library(grid, clips=5, seconds=10.0, stride_s=STRIDE_S)
    cells = [c for clip in few.clips for c in clip.cells]
    assert len(few.clips) == 5 and len(set(cells)) == len(cells) >= 12
    assert "about 31 clips would hold them all" in " ".join(few.notes)
    # too few clips for every cell: a stop in every 4th clip (the 4th of 5), not every 2nd, so more cells fit
    assert [clip.rows[-1].kind == "stop" for clip in few.clips] == [False, False, False, True, False]
    assert "every 4th clip ends with a stop" in " ".join(few.notes)
    monkeypatch.setattr("akd_core.library.SPARSE_STOP_EVERY", 2)
    dense = plan_library(grid, clips=5, seconds=10.0, stride_s=STRIDE_S)
    monkeypatch.undo()
    assert len(set(cells)) > len({c for clip in dense.clips for c in clip.cells})
    spread = np.asarray(cells)
    assert all(spread[:, a].min() == 0 and spread[:, a].max() == grid.shape[a] - 1 for a in range(3))
    many = plan_library(grid, clips=80, seconds=10.0, stride_s=STRIDE_S)
    visits = {}
    for clip in many.clips:
        for cell in clip.cells:
            visits[cell] = visits.get(cell, 0) + 1
    assert min(visits.values()) >= 2 and max(visits.values()) <= 3  # rounds: no cell a third time before all twice
    assert {clip.round for clip in many.clips} >= {0, 1, 2}


def test_cells_the_clips_cannot_hold_scatter_over_the_box_instead_of_leaving_a_column_out():
    """26 clips hold 97 of the quadruped box's 109 moving cells: the 12 left out lie among planned cells, not in one
    yaw-rate column (the end of the first round's order), so a policy sees every yaw rate at every speed band."""
    plan = plan_library(CommandGrid(QUADRUPED_BOX), clips=26, seconds=10.0, stride_s=STRIDE_S)
    left = np.asarray(plan.to_dict()["cells_unplanned"])
    assert len(left) == 12
    assert np.bincount(left[:, 2]).max() <= len(left) / 2  # no yaw-rate column holds most of them
    planned = {c for clip in plan.clips for c in clip.cells}
    for cell in map(tuple, left):  # each one lies next to planned cells along at least two of the three axes
        axes = [any(tuple(int(v) for v in np.add(cell, np.eye(3, dtype=int)[a] * step)) in planned for step in (-1, 1))
                for a in range(3)]
        assert sum(axes) >= 2, cell


def test_bad_boxes_and_options_are_clear_errors(tmp_path, capsys):
    assert parse_range("-0.5,1.0", "--vx") == (-0.5, 1.0) and parse_range(None, "--vx") is None
    with pytest.raises(ConfigError, match=r"--vx='1,0': LO \(1\) must be below HI \(0\)"):
        parse_range("1,0", "--vx")
    with pytest.raises(ConfigError, match="give two numbers LO,HI"):
        parse_range("fast", "--yaw")
    out = tmp_path / "lib"
    assert main(["library", "--robot", "quadruped", "--out", str(out), "--vx=1,0"]) == 2
    assert "akd library: error: --vx='1,0': LO (1) must be below HI (0), e.g. --vx=0,1" in capsys.readouterr().err
    assert main(["library", "--robot", "quadruped", "--out", str(out), "--seconds", "1"]) == 2
    assert "a clip needs at least 3 s" in capsys.readouterr().err
    assert main(["library", "--robot", "quadruped", "--out", str(out), "--gaits", "tripod"]) == 2
    assert "--gaits tripod: gait pattern 'tripod' does not apply to a robot with 4 legs" in capsys.readouterr().err
    assert main(["library", "--robot", "quadruped", "--out", str(out), "--export", "hdf6"]) == 2
    assert "unknown export format 'hdf6'" in capsys.readouterr().err
    assert not (out / "runs").exists()


def _states(heading_v: tuple[float, float], yaw_rate: float, yaw0: float, seconds: float, dt: float = 0.02):
    """Tracked root states of a body moving at ``heading_v`` (heading frame) while turning at ``yaw_rate``."""
    times = np.arange(int(round(seconds / dt))) * dt
    yaw = yaw0 + yaw_rate * times
    c, s = np.cos(yaw), np.sin(yaw)
    vel = np.stack([c * heading_v[0] - s * heading_v[1], s * heading_v[0] + c * heading_v[1],
                    np.zeros_like(yaw)], -1)
    quat = np.stack([np.zeros_like(yaw), np.zeros_like(yaw), np.sin(yaw / 2), np.cos(yaw / 2)], -1)  # xyzw
    return vel, quat, dt


def test_coverage_bins_the_tracked_heading_velocities_into_their_cells():
    plan = plan_library(CommandGrid(QUADRUPED_BOX), clips=40, seconds=10.0, stride_s=STRIDE_S)
    grid = plan.grid
    cases = {"ahead": ((0.45, 0.0), 0.0, math.pi / 2, 2.0),  # facing +y in the world: 0.45 m/s ahead
             "turn": ((0.2, -0.25), 0.5, 0.3, 3.0),  # crabbing right while turning left
             "back": ((-0.6, 0.0), 0.0, 0.0, 1.0)}  # outside the box
    clips = {}
    for name, (velocity, rate, yaw0, seconds) in cases.items():
        vel, quat, dt = _states(velocity, rate, yaw0, seconds)
        clips[name] = (heading_velocities(vel, quat, dt), dt)
        np.testing.assert_allclose(clips[name][0][:, :2], np.tile(velocity, (len(vel), 1)), atol=1e-9)
        np.testing.assert_allclose(clips[name][0][:, 2], rate, atol=1e-9)
    report = coverage_report(plan, clips)
    seconds = np.asarray(report["seconds_per_cell"])
    ahead = tuple(grid.index(np.array([[0.45, 0.0, 0.0]]))[0])
    turn = tuple(grid.index(np.array([[0.2, -0.25, 0.5]]))[0])
    assert ahead == (4, 1, 2) and turn == (3, 0, 3)
    assert seconds[ahead] == pytest.approx(2.0) and seconds[turn] == pytest.approx(3.0)
    assert seconds.sum() == pytest.approx(5.0) and report["seconds_outside"] == pytest.approx(1.0)
    assert report["covered_cells"] == 2 and report["covered_fraction"] == pytest.approx(2 / 110, abs=1e-4)
    cell = next(c for c in report["per_cell"] if tuple(c["index"]) == turn)
    assert cell["covered"] and cell["feasible"] and cell["planned_s"] >= STEADY_S


def test_the_command_per_frame_ramps_as_the_segments_and_single_gaits_do():
    segments = [{"start_s": 0.0, "ramp_s": 0.5, "command": {"vx_mps": 0.0, "vy_mps": 0.0, "yaw_rate_radps": 0.0}},
                {"start_s": 1.0, "ramp_s": 0.8, "command": {"vx_mps": 0.4, "vy_mps": 0.1, "yaw_rate_radps": -0.4}},
                {"start_s": 3.0, "ramp_s": 0.5, "command": {"vx_mps": 0.0, "vy_mps": 0.0, "yaw_rate_radps": 0.0}}]
    manifest = {"stages": {"gait": {"config": {"segments": segments}}}}
    times = np.arange(0, 4.0, 0.02)
    command = commanded_velocity(manifest, times)
    assert command.shape == (200, 3)
    np.testing.assert_allclose(command[times < 1.0], 0.0)
    np.testing.assert_allclose(command[(times >= 1.8) & (times < 3.0)], [[0.4, 0.1, -0.4]] * 60, atol=1e-12)
    np.testing.assert_allclose(command[times >= 3.5], 0.0, atol=1e-12)
    assert command[np.searchsorted(times, 1.4), 0] == pytest.approx(0.2, abs=1e-9)  # smoothstep midway
    single = {"stages": {"gait": {"config": {"spec": {"speed": 0.5, "direction": math.pi / 2, "turn_rate": 0.2,
                                                      "ramp_time": 0.5}}}}}
    np.testing.assert_allclose(commanded_velocity(single, np.array([0.0, 0.25, 1.0])),
                               [[0, 0, 0], [0, 0.25, 0.1], [0, 0.5, 0.2]], atol=1e-12)
    assert commanded_velocity({"stages": {"distill": {}}}, times) is None  # an SDS clip follows no command


def test_a_tiny_library_runs_curates_exports_the_command_and_resumes(tmp_path, capsys):
    """One 4 s clip of the built-in quadruped in a small box: its run folder, one dataset per format with the
    commanded velocity per frame, the coverage report; a second invocation runs nothing."""
    out = tmp_path / "lib"
    args = ["library", "--robot", "quadruped", "--out", str(out), "--clips", "1", "--seconds", "4", "--vx=0,0.4",
            "--vy=-0.1,0.1", "--yaw=-0.3,0.3", "--fast", "--export", "hdf5,lerobot,mjlab"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "1 clips (1 run now), 1 kept, 0 left out" in printed and "time per clip:" in printed
    run = out / "runs" / "clip_000"
    assert (run / "tracked.npz").is_file() and (out / "commands" / "clip_000.csv").is_file()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["pipeline"]["status"] == "done"
    # library clips are tracked with the cost's yaw-rate term (a policy learns their way of turning)
    assert manifest["stages"]["track"]["config"]["yaw_rate_weight"] == LIBRARY_YAW_RATE_WEIGHT > 0
    with h5py.File(out / "dataset" / "dataset.hdf5", "r") as f:
        demo = f["data/demo_0"]
        command = demo["obs/command"][()]
        assert json.loads(demo.attrs["command_names"]) == ["vx", "vy", "yaw_rate"]
        assert command.shape == (demo.attrs["num_samples"], 3) and command.dtype == np.float32
    times = np.arange(len(command)) / 50.0
    np.testing.assert_allclose(command, commanded_velocity(manifest, times), atol=1e-6)
    # a trot's reference body follows its commands: the reference's heading-frame velocity is the command
    reference = np.load(run / "reference.npz")
    yaw = np.unwrap(quat_yaw(reference["root_quat"].astype(np.float64)))
    vel = np.gradient(reference["root_pos"][:, :2].astype(np.float64), 0.02, axis=0)
    forward = np.cos(yaw) * vel[:, 0] + np.sin(yaw) * vel[:, 1]
    np.testing.assert_allclose(forward, command[:, 0], atol=5e-3)
    np.testing.assert_allclose(np.gradient(yaw, 0.02), command[:, 2], atol=5e-3)
    info = json.loads((out / "dataset" / "lerobot" / "meta" / "info.json").read_text())
    assert info["features"]["observation.command"]["names"] == ["vx", "vy", "yaw_rate"]
    with np.load(out / "dataset" / "mjlab" / "clip_000.npz") as mjlab:
        np.testing.assert_allclose(mjlab["command"], command)
    coverage = json.loads((out / "coverage.json").read_text())
    assert coverage["covered_cells"] >= 2 and coverage["clips"] == ["clip_000"]
    assert (out / "coverage.png").stat().st_size > 1000
    summary = json.loads((out / "summary.json").read_text())
    assert summary["library"]["clips_kept"] == 1 and summary["library"]["covered_fraction"] > 0
    # the clips' own command tracking, scored as eval-policy scores a policy, recomputed from the HDF5 demo: the
    # heading-frame base velocity and yaw rate against the command, over the frames whose command held for 0.5 s
    followed = summary["library"]["command_tracking"]
    with h5py.File(out / "dataset" / "dataset.hdf5", "r") as f:
        demo = f["data/demo_0"]
        v, w = demo["obs/root_lin_vel"][()].astype(np.float64), demo["obs/root_ang_vel"][()].astype(np.float64)
        x, y, z, qw = demo["obs/root_quat"][()].astype(np.float64).T
    heading = np.arctan2(2 * (qw * z + x * y), 1 - 2 * (y * y + z * z))
    measured = np.stack([np.cos(heading) * v[:, 0] + np.sin(heading) * v[:, 1],
                         -np.sin(heading) * v[:, 0] + np.cos(heading) * v[:, 1], w[:, 2]], 1)
    held = np.array([i >= 25 and np.ptp(command[i - 25:i + 1], axis=0).max() < 1e-6 for i in range(len(command))])
    expected = np.sqrt(np.mean((measured - command)[held] ** 2, 0))
    assert followed["steps"] == held.sum() > 50
    np.testing.assert_allclose([followed["vx_rmse_mps"], followed["vy_rmse_mps"], followed["yaw_rate_rmse_radps"]],
                               expected, atol=1e-3)
    assert 0 < followed["yaw_rate_split"]["stride_rmse_radps"] < 0.3 and "the clips' own command tracking" in printed

    stamp = (run / "tracked.npz").stat().st_mtime_ns
    assert main(args) == 0  # resumes: nothing is run again
    assert "1 clips finished already (kept as they are), 0 to run" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["library"]["clips_run_now"] == 0 and summary["runs"][0]["status"] == "skipped"
    assert (run / "tracked.npz").stat().st_mtime_ns == stamp


def test_a_lerobot_dataset_holds_the_command_only_when_every_episode_has_one(tmp_path):
    """Appending a commanded clip to a dataset written without the feature keeps the dataset's features (and the
    reverse is an error naming the features); HDF5 demos carry obs/command where their run has one."""
    from akd_core.export import export_runs
    from akd_core.export.lerobot import read_lerobot

    from .test_export import make_run

    plain = make_run(tmp_path / "plain", "a dog trotting", 1)
    commanded = make_run(tmp_path / "commanded", "a dog trotting", 2)
    commanded.set_stage("gait", status="done", config={"spec": {"speed": 0.2, "direction": 0.0, "turn_rate": 0.4,
                                                                "ramp_time": 0.5}})
    both = export_runs([commanded.path, commanded.path], "lerobot", tmp_path / "both", progress=False)[0]
    info = json.loads((both / "meta" / "info.json").read_text())
    assert info["features"]["observation.command"]["shape"] == [3]
    episode = read_lerobot(both)[0]
    np.testing.assert_allclose(episode.frames["observation.command"][-1], [0.2, 0.0, 0.4], atol=1e-6)
    mixed = export_runs([plain.path, commanded.path], "lerobot", tmp_path / "mixed", progress=False)[0]
    assert "observation.command" not in json.loads((mixed / "meta" / "info.json").read_text())["features"]
    export_runs([plain.path], "lerobot", tmp_path / "grown", progress=False)
    export_runs([commanded.path], "lerobot", tmp_path / "grown", progress=False)  # appended without the command
    assert len(read_lerobot(tmp_path / "grown")) == 2
    with pytest.raises(MotionError, match="features"):
        export_runs([plain.path], "lerobot", tmp_path / "both", progress=False)
    path = export_runs([plain.path, commanded.path], "hdf5", tmp_path / "d.hdf5", progress=False)[0]
    with h5py.File(path, "r") as f:
        assert "command" not in f["data/demo_0/obs"] and f["data/demo_1/obs/command"].shape == (50, 3)


def test_a_clip_already_run_keeps_its_timeline_and_a_changed_plan_names_it(tmp_path):
    from akd_core.library import LibraryConfig, write_plan

    grid = CommandGrid(QUADRUPED_BOX)
    cfg = LibraryConfig(robot="quadruped", out=tmp_path / "lib", clips=3, seconds=10.0)
    paths = write_plan(cfg, plan_library(grid, 3, 10.0, stride_s=STRIDE_S))
    assert sorted(p.name for p in paths.values()) == ["clip_000.csv", "clip_001.csv", "clip_002.csv"]
    saved = json.loads((tmp_path / "lib" / "plan.json").read_text())
    assert saved["inputs"]["clips"] == 3 and len(saved["clips"]) == 3
    (tmp_path / "lib" / "runs" / "clip_000").mkdir(parents=True)
    (tmp_path / "lib" / "runs" / "clip_000" / "manifest.json").write_text("{}")
    write_plan(cfg, plan_library(grid, 3, 10.0, stride_s=STRIDE_S))  # the same plan again: fine
    longer = LibraryConfig(robot="quadruped", out=tmp_path / "lib", clips=3, seconds=12.0)
    with pytest.raises(ConfigError, match=r"runs/clip_000 was run from another plan"):
        write_plan(longer, plan_library(grid, 3, 12.0, stride_s=STRIDE_S))
