"""bench/bench_zoo.py, the robot zoo: each cell is a real `akd run` whose figures are read back from its manifest and
tracked clip, a re-run is served from the cache without running akd again, a partly filled cache still gives a
valid matrix, docs/zoo.md and its heatmap are generated, and a cell passes only when every criterion holds (a link
error above the class limit, a replaced gait, a missed speed without a named joint limit, an error: each fails)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ["--robots", "quadruped,humanoid", "--gaits", "walk", "--speeds", "default", "--duration", "1.5"]


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_zoo", ROOT / "bench" / "bench_zoo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_zoo", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


Z = _load_bench()


def _bench(cache: Path, *args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_zoo.py"), *SMOKE, "--out", str(cache), *args],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    return done, time.perf_counter() - start


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """Two real cells (the built-in quadruped's and humanoid's "walk forward", 1.5 s clips), run once."""
    folder = tmp_path_factory.mktemp("zoo")
    env = {**os.environ, "AKD_CACHE": str(tmp_path_factory.getbasetemp() / "akd-cache")}
    done, seconds = _bench(folder / "cache", "--json", str(folder / "zoo.json"), "--write-docs", "--docs-dir",
                           str(folder / "docs"), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"folder": folder, "cache": folder / "cache", "env": env, "out": done.stdout, "seconds": seconds,
            "json": json.loads((folder / "zoo.json").read_text())}


def _cells(result: dict) -> dict[tuple[str, str], dict]:
    return {(c["robot"], c["cell"]): c for c in result["cells"]}


def test_the_cells_run_and_their_figures_come_from_their_manifests(zoo):
    cells = _cells(zoo["json"])
    assert set(cells) == {("quadruped", "walk"), ("humanoid", "walk")}
    for (robot, name), fig in cells.items():
        run = zoo["cache"] / robot / name
        manifest = json.loads((run / "manifest.json").read_text())
        track, gait = manifest["stages"]["track"]["metrics"], manifest["stages"]["gait"]
        assert fig["status"] in ("done", "verdict-failed") and fig["exit_code"] in (0, 3)
        assert manifest["pipeline"]["status"] == ("done" if fig["exit_code"] == 0 else "failed")
        assert fig["link_err_m"] == track["link_pos_err_m"] and fig["slip_mps"] == track["stance_slip_mps"]
        assert fig["link_err_limit_m"] == track["link_err_limit_m"] == (0.03 if robot == "quadruped" else 0.08)
        assert fig["fell"] == track["fell"]
        assert fig["crosscheck_passed"] == manifest["stages"]["crosscheck"]["metrics"]["passed"]
        assert fig["chosen_speed_mps"] == gait["metrics"]["speed_command_mps"]
        assert fig["gait_generated"] == gait["config"]["spec"]["pattern"] == "walk"
        assert fig["track_s"] == manifest["stages"]["track"]["seconds"]
        assert fig["asked_speed_mps"] > 0 and 0 < fig["wall_s"] < zoo["seconds"]
        # the achieved speed is the simulated robot's: within a factor 2 of what the tracked clip covers overall
        root = np.load(run / "tracked.npz")["root_pos"]
        overall = np.linalg.norm(root[-1, :2] - root[0, :2]) / 1.5
        assert 0.5 * overall < fig["achieved_speed_mps"] < 2.0 * overall
        assert fig["passed"] == (not fig["reasons"])
        record = json.loads((zoo["cache"] / robot / f"{name}.json").read_text())
        assert record["command"].startswith(f"akd run --robot {robot} --prompt 'walk forward' --out ")
        assert record["command"].endswith("--duration 1.5 --export none")


def test_the_report_holds_the_matrix_and_the_docs_page_and_heatmap_are_written(zoo):
    out = zoo["out"]
    passed = sum(c["passed"] for c in zoo["json"]["cells"])
    assert f"**{passed} / 2 cells passed ({100 * passed / 2:.1f} %)**" in out
    assert "## Quadrupeds\n\n| robot | walk |" in out and "## Bipeds\n\n| robot | walk |" in out
    for fig in zoo["json"]["cells"]:
        mark = ("✓" if fig["passed"] else "✗") + f" {1000 * fig['link_err_m']:.0f}"
        assert f"| {fig['robot']} | {mark} |" in out
        assert f"| walk | walk forward | walk | {fig['link_err_m']:.3f} ({fig['link_err_limit_m']:.2f}) |" in out
    page = (zoo["folder"] / "docs" / "zoo.md").read_text()
    assert page.startswith("# Robot zoo\n")
    assert time.strftime("%Y-%m-%d") in page and f"{os.cpu_count()} vCPUs" in page and "commit " in page
    assert "bench/bench_zoo.py --robots quadruped,humanoid" in page
    assert out.split("\nwrote ")[0].strip() in page  # the page is the printed report under its header
    from PIL import Image

    with Image.open(zoo["folder"] / "docs" / "images" / "zoo_heatmap.png") as image:
        assert image.width >= 500 and image.height > 150


def test_a_rerun_is_served_from_the_cache_without_running_akd(zoo):
    cache = zoo["cache"]
    files = [p for p in cache.rglob("*") if p.is_file()]
    before = {p: p.stat().st_mtime_ns for p in files}
    done, seconds = _bench(cache, "--json", str(zoo["folder"] / "again.json"), env=zoo["env"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert {p: p.stat().st_mtime_ns for p in files} == before  # no manifest, log or record touched
    assert sorted(p for p in cache.rglob("*") if p.is_file()) == sorted(files)
    again = json.loads((zoo["folder"] / "again.json").read_text())
    assert again["cells"] == zoo["json"]["cells"]
    assert seconds < zoo["seconds"]


def test_remeasuring_slip_replays_each_cell_to_its_own_figures_and_the_report_says_so(zoo, tmp_path):
    """--remeasure-slip replays each cached cell's tracked clip in the tracking model its manifest records: on cells
    tracked by today's code the stance slip and touch-down speed come back exactly as tracked (the replay is the
    tracked run); the replaced figure and the commit are kept, and the report names them."""
    import shutil

    cache = tmp_path / "cache"
    shutil.copytree(zoo["cache"], cache)
    before = {(r, n): json.loads((cache / r / n / "manifest.json").read_text())["stages"]["track"]["metrics"]
              for r, n in _cells(zoo["json"])}
    done, _ = _bench(cache, "--remeasure-slip", env=zoo["env"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "re-measured the stance slip of 2 cells" in done.stdout
    assert "Stance slip of 2 of these cells re-measured at " in done.stdout
    for (robot, name), old in before.items():
        track = json.loads((cache / robot / name / "manifest.json").read_text())["stages"]["track"]["metrics"]
        assert track["stance_slip_mps"] == pytest.approx(old["stance_slip_mps"], rel=1e-9, abs=1e-12)
        assert track["touchdown_speed_mps"] == pytest.approx(old["touchdown_speed_mps"], rel=1e-9, abs=1e-12)
        assert track["stance_slip_rescored"]["previous_mps"] == old["stance_slip_mps"]
        assert track["link_pos_err_m"] == old["link_pos_err_m"]  # nothing else is touched


def test_a_partly_filled_cache_still_gives_a_valid_matrix(zoo):
    """--report-only with a gait never run: its cells show '-' and the summary counts them as not run."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_zoo.py"), *SMOKE, "--gaits", "walk,trot",
                           "--out", str(zoo["cache"]), "--report-only"], capture_output=True, text=True, cwd=ROOT,
                          env=zoo["env"], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    passed = sum(c["passed"] for c in zoo["json"]["cells"])
    assert f"**{passed} / 2 cells passed" in done.stdout and "1 of 3 cells not run yet" in done.stdout
    quadruped = next(line for line in done.stdout.splitlines() if line.startswith("| quadruped |"))
    assert quadruped.endswith("| - |")
    assert "| trot | trot forward | - | - | - | - | - | - | - | - | - |" in done.stdout
    assert not (zoo["cache"] / "quadruped" / "trot").exists()


# ----------------------------------------------------------------------------- pass / fail on synthetic runs
QUADRUPED = Z.ZooRobot("quadruped", "quadruped", 4, "built-in skeleton")
TROT = next(c for c in Z.cells_for(4) if c.name == "trot")
BOUND = next(c for c in Z.cells_for(4) if c.name == "bound-quick")


def _synthetic_run(cache: Path, cell, *, link_err=0.01, pattern=None, achieved=1.0, asked=1.0, chosen=None,
                   notes=(), fell=False, crosscheck=True, slip=0.01, limit=None, duration=2.0, yaw_rate=0.0,
                   gait_extra=None) -> None:
    """A finished run directory as `akd run` leaves it: manifest.json, and tracked.npz whose root moves at
    ``achieved`` m/s and turns at ``yaw_rate`` rad/s after the 0.5 s ramp."""
    run = cache / QUADRUPED.name / cell.name
    run.mkdir(parents=True)
    dt, frames = 0.02, int(round(duration / 0.02)) + 1
    t = np.arange(frames) * dt
    x = np.where(t < 0.5, 0.0, (t - 0.5) * achieved)
    yaw = np.where(t < 0.5, 0.0, (t - 0.5) * yaw_rate)
    quat = np.stack([0 * yaw, 0 * yaw, np.sin(yaw / 2), np.cos(yaw / 2)], 1)  # xyzw
    np.savez(run / "tracked.npz", dt=np.float32(dt), root_pos=np.stack([x, 0 * x, 0.5 + 0 * x], 1), root_quat=quat)
    gait_metrics = {"speed_command_mps": asked if chosen is None else chosen, **(gait_extra or {})}
    if asked is not None:
        gait_metrics["asked_speed_mps"] = asked
    track = {"link_pos_err_m": link_err, "stance_slip_mps": slip, "fell": fell, "final_root_err_m": 0.02}
    if limit is not None:
        track["link_err_limit_m"] = limit
    manifest = {"robot": QUADRUPED.spec, "prompt": cell.prompt, "pipeline": {"status": "done"}, "stages": {
        "gait": {"status": "done", "config": {"duration": duration, "notes": list(notes),
                                              "spec": {"pattern": pattern or cell.gait, "ramp_time": 0.5}},
                 "metrics": gait_metrics},
        "track": {"status": "done", "metrics": track, "seconds": 1.0},
        "crosscheck": {"status": "done", "metrics": {"passed": crosscheck}}}}
    (run / "manifest.json").write_text(json.dumps(manifest))


def _judged(cache: Path, cell, duration=2.0) -> dict:
    return Z.cell_figures(cache, QUADRUPED, cell, duration)


def test_a_clean_cell_passes_and_each_criterion_fails_it(tmp_path):
    cases = {
        "clean": ({}, []),
        "link error": ({"link_err": 0.04}, ["link error 0.040 m > 0.03 m"]),
        "slip": ({"slip": 0.05}, ["stance slip 0.050 m/s > 0.03 m/s"]),
        "fell": ({"fell": True}, ["fell"]),
        "cross-check": ({"crosscheck": False}, ["cross-check failed"]),
        "replaced gait": ({"pattern": "walk"}, ["gait replaced: asked trot, generated walk"]),
        "too slow": ({"achieved": 0.7}, ["speed 0.70 m/s < 0.8 x asked 1.00 m/s, no joint named as the limit"]),
    }
    for name, (kwargs, reasons) in cases.items():
        cache = tmp_path / name
        _synthetic_run(cache, TROT, **kwargs)
        fig = _judged(cache, TROT)
        assert fig["status"] == "done", name
        assert (fig["passed"], fig["reasons"]) == (not reasons, reasons), name


def test_a_speed_limited_by_a_named_joint_passes_and_the_manifest_limit_is_used(tmp_path):
    note = ("gait bound at 1.80 m/s, 2.90 Hz needs joint 'FR_calf' at 1.32 x its URDF velocity limit (21.0; allowed "
            "0.75 x): slowed down by 0.54")
    _synthetic_run(tmp_path / "a", BOUND, achieved=0.9, asked=1.8, chosen=0.97, notes=[note], link_err=0.045)
    fig = _judged(tmp_path / "a", BOUND)
    assert fig["passed"] and fig["speed_limiter"] == ["FR_calf", 1.32] and fig["link_err_limit_m"] == 0.05
    assert "0.90 / 1.80 (0.97, FR_calf 1.32x)" in Z.speed_text(fig)
    # the manifest's own limit (`akd track --link-err-limit`) wins over the class limit
    _synthetic_run(tmp_path / "b", BOUND, link_err=0.045, limit=0.04)
    assert _judged(tmp_path / "b", BOUND)["reasons"] == ["link error 0.045 m > 0.04 m"]


TURN = next(c for c in Z.cells_for(4) if c.turn)


def test_a_turn_is_judged_by_its_yaw_rate_unless_a_limit_is_named(tmp_path):
    assert TURN.prompt == "trot forward turning left" and Z.TURN_FRACTION == 0.8
    asked = {"asked_turn_rate_radps": 0.6}
    _synthetic_run(tmp_path / "turns", TURN, yaw_rate=0.55, gait_extra=asked)
    fig = _judged(tmp_path / "turns", TURN)
    assert fig["passed"] and fig["achieved_turn_rate_radps"] == pytest.approx(0.55, rel=1e-3)
    _synthetic_run(tmp_path / "straight", TURN, yaw_rate=0.3, gait_extra=asked)
    assert _judged(tmp_path / "straight", TURN)["reasons"] == [
        "turn rate +0.30 rad/s < 0.8 x asked +0.60 rad/s, no limit named"]
    _synthetic_run(tmp_path / "wrong way", TURN, yaw_rate=-0.6, gait_extra=asked)
    assert not _judged(tmp_path / "wrong way", TURN)["passed"]
    # legs without a hip roll: the gait stage lowered the turn and said why
    why = {**asked, "turn_limited_by": "turning at 0.60 rad/s moves the stance feet sideways ... (no hip roll)"}
    _synthetic_run(tmp_path / "sagittal", TURN, yaw_rate=0.05, gait_extra=why)
    fig = _judged(tmp_path / "sagittal", TURN)
    assert fig["passed"] and fig["turn_limiter"] == why["turn_limited_by"]
    # older runs: the asked turn from the prompt's note; a right turn is negative
    _synthetic_run(tmp_path / "old", TURN, yaw_rate=-0.2, notes=["turning right at 0.50 rad/s"])
    fig = _judged(tmp_path / "old", TURN)
    assert fig["asked_turn_rate_radps"] == -0.5 and fig["reasons"] == [
        "turn rate -0.20 rad/s < 0.8 x asked -0.50 rad/s, no limit named"]


def test_the_asked_speed_comes_from_the_prompt_when_the_manifest_lacks_it(tmp_path):
    from akd_core.model.legs import find_legs
    from akd_core.model.load import load_robot
    from akd_core.motion.prompt import spec_from_prompt

    robot = load_robot("quadruped")
    asked = spec_from_prompt("trot forward", robot, find_legs(robot))[0].speed
    _synthetic_run(tmp_path, TROT, asked=None, chosen=0.5, achieved=0.5)
    fig = _judged(tmp_path, TROT)
    assert fig["asked_speed_mps"] == pytest.approx(asked) and asked > 0.5 / 0.8
    assert fig["reasons"] == [f"speed 0.50 m/s < 0.8 x asked {asked:.2f} m/s, no joint named as the limit"]


def test_an_error_is_a_failed_cell_with_its_message_and_an_unrun_cell_is_neither(tmp_path):
    message = "gait pronk at 1.00 m/s: the feet cannot reach their targets; ask for a slower gait"
    (tmp_path / "quadruped").mkdir()
    (tmp_path / "quadruped" / "trot.json").write_text(json.dumps({
        "robot": "quadruped", "robot_spec": "quadruped", "cell": "trot", "prompt": TROT.prompt, "duration": 2.0,
        "exit_code": 2, "status": "error", "wall_s": 3.0, "message": message}))
    fig = _judged(tmp_path, TROT)
    assert (fig["passed"], fig["reasons"]) == (False, [f"error (exit 2): {message}"])
    assert Z.mark(fig) == "✗ err"
    assert Z.cache_state(tmp_path, QUADRUPED, TROT, 2.0) == "cached"  # an error is a result too
    assert Z.cache_state(tmp_path, QUADRUPED, TROT, 2.0, retry=True) == "new"
    assert Z.cache_state(tmp_path, QUADRUPED, TROT, 4.0) == "new"  # another clip length is another cell
    unrun = _judged(tmp_path, BOUND)
    assert unrun["status"] == "not run" and unrun["passed"] is None and Z.mark(unrun) == "-"


def test_robots_whose_feet_cannot_touch_the_ground_are_left_out_with_the_reason():
    """simple_humanoid has collision geometry on its body but none on (or fixed to) its feet; a1's feet collide."""
    from .conftest import example_robot_data_dir, example_robot_urdf

    with pytest.raises(Z.NotSimulable, match=r"its feet \['l_ankle', 'r_ankle'\] have no <collision> geometry"):
        Z._legs_of(example_robot_data_dir() / "simple_humanoid_description/urdf/simple_humanoid.urdf")
    assert Z._legs_of(example_robot_urdf("a1"))[0] == 4
