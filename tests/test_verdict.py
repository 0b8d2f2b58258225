"""The verdict on a tracked clip (akd_core.physics.verdict): its motion class and limit read from the reference, and
a clip that did not track -- here a reference whose root runs 3 m/s ahead of what its legs can carry -- marked
failed in manifest.json, with `akd track` and `akd run` exiting 3 and nothing exported unless --keep-failed."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from akd_core.cli import main
from akd_core.io.errors import ConfigError
from akd_core.io.rundir import REFERENCE, RunDir
from akd_core.model.load import load_robot
from akd_core.motion.gait import GaitSpec, generate_gait
from akd_core.physics.verdict import TrackingLimits, body_length_m, judge_tracking, motion_class


@pytest.fixture(scope="module")
def quadruped():
    return load_robot("quadruped")


def test_the_motion_class_comes_from_the_reference_feet_and_flight_phases(quadruped):
    trot = generate_gait(quadruped, GaitSpec(pattern="trot", speed=0.5), duration=1.0)
    # slow enough that no joint's effort limit slows it further (at 1 m/s the effort loop took 35 s of the suite)
    bound = generate_gait(quadruped, GaitSpec(pattern="bound", speed=0.4, duty_factor=0.4), duration=1.0)
    humanoid = load_robot("humanoid")
    walk = generate_gait(humanoid, GaitSpec(pattern="walk", speed=0.4), duration=1.0)
    assert motion_class(quadruped, trot) == "steady" and motion_class(quadruped, bound) == "dynamic"
    assert motion_class(humanoid, walk) == "biped"
    assert TrackingLimits().limit("steady") == 0.03 and TrackingLimits().limit("dynamic") == 0.05
    assert TrackingLimits().limit("biped") == 0.08
    # the quadruped is longer than it is tall; the humanoid's size is its root height
    assert body_length_m(quadruped, trot) > trot.root_pos[0, 2]
    assert body_length_m(humanoid, walk) == pytest.approx(walk.root_pos[0, 2])


def test_the_verdict_names_every_reason_with_its_figure_and_limit(quadruped):
    trot = generate_gait(quadruped, GaitSpec(pattern="trot", speed=0.5), duration=1.0)
    good = {"fell": False, "link_pos_err_m": 0.012, "final_root_err_m": 0.02, "max_tilt_deg": 3.0}
    assert judge_tracking(quadruped, trot, good).passed
    bad = judge_tracking(quadruped, trot, {**good, "fell": True, "max_tilt_deg": 75.0, "link_pos_err_m": 0.031,
                                           "final_root_err_m": 2.5})
    assert not bad.passed and bad.motion_class == "steady" and bad.link_err_limit_m == 0.03
    assert bad.reasons[0] == "the tracked robot fell (max tilt 75 deg)"
    assert bad.reasons[1] == "link error 0.031 m > 0.03 m (the limit for steady clips)"
    assert bad.reasons[2].startswith("the root ends 2.50 m from the reference's end, more than a body length")
    assert judge_tracking(quadruped, trot, {**good, "link_pos_err_m": float("nan")}).reasons  # NaN fails
    own = judge_tracking(quadruped, trot, {**good, "link_pos_err_m": 0.031}, link_err_limit_m=0.04)
    assert own.passed and own.link_err_limit_m == 0.04
    with pytest.raises(ConfigError, match="--link-err-limit"):
        judge_tracking(quadruped, trot, good, link_err_limit_m=0.0)


def _run_ahead_of_its_legs(run_dir, extra_mps: float = 3.0) -> str:
    """Move reference.npz's root forward by ``extra_mps`` x t, as if the body slid ahead of its stepping legs;
    returns the file's new hash."""
    path = run_dir / REFERENCE
    data = dict(np.load(path, allow_pickle=True))
    t = np.arange(len(data["root_pos"])) / float(data["fps"])
    data["root_pos"] = data["root_pos"].copy()
    data["root_pos"][:, 0] += extra_mps * t
    np.savez(path, **data)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_clip_that_cannot_be_tracked_fails_and_exits_3_until_kept(tmp_path, capsys):
    run_dir = tmp_path / "ahead"
    prompt = "a dog trotting forward"
    assert main(["gait", "--robot", "quadruped", "--prompt", prompt, "--duration", "1.5", "--out", str(run_dir)]) == 0
    digest = _run_ahead_of_its_legs(run_dir)

    assert main(["track", str(run_dir), "--samples", "8"]) == 3
    err = capsys.readouterr().err
    assert "the tracked clip FAILED" in err and "more than a body length" in err and "--keep-failed" in err
    manifest = RunDir(run_dir).manifest()
    metrics = manifest["stages"]["track"]["metrics"]
    assert manifest["verdict"]["passed"] is False and metrics["tracking_passed"] is False
    assert metrics["link_pos_err_m"] > 0.03 and metrics["final_root_err_m"] > metrics["body_length_m"]
    assert manifest["verdict"]["reasons"] == metrics["failure_reasons"]
    # the reference is what was asked: tracking never rewrites it
    assert hashlib.sha256((run_dir / REFERENCE).read_bytes()).hexdigest() == digest

    # akd run on the same directory: the failed track is kept, the preview is written, nothing is exported
    assert main(["run", "--robot", "quadruped", "--prompt", prompt, "--out", str(run_dir)]) == 3
    out = capsys.readouterr().out
    assert "FAILED: " in out and "export: skipped, the tracked clip failed" in out
    assert (run_dir / "preview.mp4").is_file() and not (run_dir / "export").exists()
    assert RunDir(run_dir).manifest()["pipeline"]["status"] == "failed"

    # --keep-failed exports it, marked success=False
    import h5py

    assert main(["run", "--robot", "quadruped", "--prompt", prompt, "--out", str(run_dir), "--keep-failed"]) == 0
    with h5py.File(run_dir / "export" / "dataset.hdf5") as f:
        assert bool(f["data/demo_0"].attrs["success"]) is False
    summary = json.loads((run_dir / "manifest.json").read_text())["stages"]["export"]
    assert summary["status"] == "done"
