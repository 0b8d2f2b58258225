"""The ROS 2 nodes with real rclpy + Fast DDS, every node in its own process.

Each test uses its own ROS_DOMAIN_ID and the shared-memory transport only; a recording subscriber
(``python -m akd_ros.monitor``) runs in another process and the replay waits until it is discovered.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from akd_core.io.rundir import TRACKED
from akd_core.motion.clip import TrackedMotion

from .conftest import example_robot_urdf
from .ros_runs import PYTHON, REPO, make_run, monitor_args, replay_args, ros_env, start

pytest.importorskip("rclpy", reason="the ROS 2 wheels are not installed (pip install -e '.[ros]')")

DT = 0.01
STEPS = 100
STREAM_TOPICS = ["/joint_states", "/joint_trajectory_controller/joint_trajectory", "/position_controller/commands",
                 "/effort_controller/commands", "/akd/root_odom"]


def _finish(proc: subprocess.Popen, timeout: float) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"process {proc.args} did not finish within {timeout} s")


def _record_replay(tmp: Path, run_dir: Path, topics: list[str], node_args: list[str], timeout: float = 40.0):
    """Start the monitor, then the node; return (node exit code, node log, recording)."""
    env = ros_env(tmp)
    out = tmp / "recording.json"
    monitor = start(monitor_args(out, topics, timeout), env, tmp / "monitor.log")
    node = start(node_args, env, tmp / "node.log")
    rc = _finish(node, timeout + 10)
    _finish(monitor, timeout + 10)
    log = (tmp / "node.log").read_text()
    assert out.exists(), f"monitor wrote nothing:\n{(tmp / 'monitor.log').read_text()}\nnode:\n{log}"
    return rc, log, json.loads(out.read_text())["topics"]


@pytest.fixture(scope="module")
def replay_session(tmp_path_factory):
    """One full replay of a 100 Hz, 1 s tracked run, every topic recorded in another process."""
    tmp = tmp_path_factory.mktemp("ros_replay")
    run = make_run(tmp / "run", dt=DT, steps=STEPS)
    topics = [f"{STREAM_TOPICS[0]}:joint_state:{STEPS}", f"{STREAM_TOPICS[1]}:trajectory:1",
              f"{STREAM_TOPICS[2]}:float64_array:{STEPS}", f"{STREAM_TOPICS[3]}:float64_array:{STEPS}",
              f"{STREAM_TOPICS[4]}:odometry:{STEPS}", "/robot_description:string:1"]
    node_args = replay_args(run.path, wait_for_subscribers=1, wait_topics=STREAM_TOPICS, linger=0.5)
    rc, log, rec = _record_replay(tmp, run.path, topics, node_args)
    assert rc == 0, log
    return TrackedMotion.load(run.file(TRACKED)), rec, log


def test_joint_states_arrive_at_the_run_rate_with_every_sample_and_its_values(replay_session):
    tracked, rec, _ = replay_session
    msgs = rec["/joint_states"]
    assert len(msgs) == STEPS, f"received {len(msgs)} of {STEPS} JointState messages"
    assert all(m["name"] == tracked.joint_names for m in msgs)
    np.testing.assert_array_equal([m["position"] for m in msgs], tracked.joint_pos.astype(np.float64))
    np.testing.assert_array_equal([m["velocity"] for m in msgs], tracked.joint_vel.astype(np.float64))
    np.testing.assert_array_equal([m["effort"] for m in msgs], tracked.joint_torques.astype(np.float64))
    stamps = np.array([m["stamp_ns"] for m in msgs])
    np.testing.assert_array_equal(np.diff(stamps), round(DT * 1e9))  # samples stamped at their scheduled times
    arrival = np.diff([m["t"] for m in msgs])
    assert abs(np.median(arrival) - DT) < 0.3 * DT, f"median inter-arrival {np.median(arrival) * 1e3:.2f} ms"
    span = msgs[-1]["t"] - msgs[0]["t"]
    assert 0.9 * (STEPS - 1) * DT < span < (STEPS - 1) * DT + 0.25, f"{STEPS} samples took {span:.3f} s"


def test_joint_trajectory_carries_pd_targets_without_effort(replay_session):
    tracked, rec, _ = replay_session
    (traj,) = rec["/joint_trajectory_controller/joint_trajectory"]
    assert traj["joint_names"] == tracked.joint_names
    np.testing.assert_array_equal(traj["positions"], tracked.pd_targets.astype(np.float64))
    pd = tracked.pd_targets.astype(np.float64)
    expected_vel = np.empty_like(pd)
    expected_vel[1:-1] = (pd[2:] - pd[:-2]) / (2 * DT)
    expected_vel[0] = (pd[1] - pd[0]) / DT
    expected_vel[-1] = 0.0  # joint_trajectory_controller rejects a trajectory ending with nonzero velocity
    np.testing.assert_allclose(traj["velocities"], expected_vel, rtol=1e-9, atol=1e-9)
    assert traj["time_from_start_ns"] == [k * round(DT * 1e9) for k in range(STEPS)]
    assert all(e == [] for e in traj["effort"]) and all(a == [] for a in traj["accelerations"])
    assert traj["stamp_ns"] == rec["/joint_states"][0]["stamp_ns"]  # point 0 is due with the first sample


def test_command_streams_and_root_odometry(replay_session):
    tracked, rec, _ = replay_session
    np.testing.assert_array_equal([m["data"] for m in rec["/position_controller/commands"]],
                                  tracked.pd_targets.astype(np.float64))
    np.testing.assert_array_equal([m["data"] for m in rec["/effort_controller/commands"]],
                                  tracked.joint_torques.astype(np.float64))
    odom = rec["/akd/root_odom"]
    assert len(odom) == STEPS and odom[0]["frame_id"] == "odom" and odom[0]["child_frame_id"] == "base"
    np.testing.assert_allclose([m["position"] for m in odom], tracked.root_pos, atol=1e-7)
    np.testing.assert_allclose([m["orientation"] for m in odom], tracked.root_quat, atol=1e-6)
    yaw = 2 * np.arctan2(tracked.root_quat[:, 2], tracked.root_quat[:, 3])  # pure yaw about z
    v = tracked.root_lin_vel
    body = np.stack([np.cos(yaw) * v[:, 0] + np.sin(yaw) * v[:, 1], -np.sin(yaw) * v[:, 0] + np.cos(yaw) * v[:, 1],
                     v[:, 2]], -1)  # world -> body: rotate by -yaw
    np.testing.assert_allclose([m["linear"] for m in odom], body, atol=1e-6)
    np.testing.assert_allclose([m["angular"] for m in odom], tracked.root_ang_vel, atol=1e-6)


def test_robot_description_uses_file_uris_for_meshes(replay_session):
    _, rec, _ = replay_session
    (desc,) = rec["/robot_description"]
    assert 'filename="file:///' in desc["data"] and 'filename="/' not in desc["data"]


def test_late_subscriber_still_gets_robot_description(tmp_path):
    # a reference-only run (replays reference.npz) that is not a whole cycle: looping adds the return segment
    run = make_run(tmp_path / "run", dt=DT, steps=50, tracked=False, freq_hz=1.5)
    env = ros_env(tmp_path)
    node = start(replay_args(run.path, loop=True), env, tmp_path / "node.log")
    try:
        deadline = time.monotonic() + 30
        while "replaying" not in (tmp_path / "node.log").read_text():
            assert node.poll() is None and time.monotonic() < deadline, (tmp_path / "node.log").read_text()
            time.sleep(0.1)
        time.sleep(1.0)  # the description went out long before this subscriber exists
        out = tmp_path / "late.json"
        monitor = start(monitor_args(out, ["/robot_description:string:1", "/joint_states:joint_state:5"], 20),
                        env, tmp_path / "monitor.log")
        _finish(monitor, 30)
    finally:
        node.send_signal(signal.SIGINT)
        rc = _finish(node, 15)
    rec = json.loads(out.read_text())["topics"]
    assert len(rec["/robot_description"]) == 1
    assert rec["/robot_description"][0]["data"].lstrip().startswith("<?xml")
    assert len(rec["/joint_states"]) >= 5 and rec["/joint_states"][0]["effort"] == []  # reference: no torques
    assert rc == 0, (tmp_path / "node.log").read_text()
    assert "sample return" in (tmp_path / "node.log").read_text()


def _unsafe_run(path: Path) -> tuple[Path, float]:
    run = make_run(path, dt=DT, steps=50)
    tracked = TrackedMotion.load(run.file(TRACKED))
    joint = tracked.joint_names.index("FR_calf_joint")
    tracked.pd_targets[20, joint] = -0.5  # the URDF allows [-2.6965, -0.9163]
    tracked.save(run.file(TRACKED))
    return run.path, -0.9163


def test_out_of_limit_trajectory_is_refused_before_anything_is_published(tmp_path):
    run_dir, upper = _unsafe_run(tmp_path / "run")
    proc = subprocess.run([PYTHON, *replay_args(run_dir)], cwd=REPO, env=ros_env(tmp_path), capture_output=True,
                          text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "refusing to publish" in out and "FR_calf_joint" in out and "PD target position" in out
    assert f"{upper:.4f}" in out and "sample 20" in out and "allow_unsafe" in out
    assert "published /robot_description" not in out and "replaying" not in out


def test_allow_unsafe_publishes_with_warnings(tmp_path):
    run_dir, _ = _unsafe_run(tmp_path / "run")
    proc = subprocess.run([PYTHON, *replay_args(run_dir, allow_unsafe=True, rate=1000.0, linger=0.0)], cwd=REPO,
                          env=ros_env(tmp_path), capture_output=True, text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "allow_unsafe is set: publishing anyway" in out and "FR_calf_joint" in out
    assert "replay finished: 50 samples published" in out


def test_akd_ros_replay_cli_publishes_at_the_requested_rate_and_refuses_unsafe_runs(tmp_path):
    run = make_run(tmp_path / "run", dt=DT, steps=60)
    cli = ["-c", "import sys; from akd_core.cli import main; sys.exit(main(sys.argv[1:]))", "ros", "replay"]
    rc, log, rec = _record_replay(tmp_path, run.path, ["/joint_states:joint_state:60"],
                                  [*cli, str(run.path), "--rate", "200", "--wait-for-subscribers", "1"])
    assert rc == 0, log
    msgs = rec["/joint_states"]
    assert len(msgs) == 60
    np.testing.assert_array_equal(np.diff([m["stamp_ns"] for m in msgs]), 5_000_000)  # 200 Hz
    bad_dir, _ = _unsafe_run(tmp_path / "bad")
    proc = subprocess.run([PYTHON, *cli, str(bad_dir)], cwd=REPO, env=ros_env(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "akd ros: error:" in proc.stderr and "FR_calf_joint" in proc.stderr


def test_generator_service_runs_the_pipeline_then_replays(tmp_path):
    """A run whose stages are all done: the pipeline resumes (skips every stage) and the node replays it."""
    run = make_run(tmp_path / "run", dt=DT, steps=50)
    urdf = str(example_robot_urdf("a1"))
    run.update_manifest(robot=urdf, prompt="a dog trotting")
    for stage in ("gait", "track", "crosscheck", "preview", "export"):
        run.set_stage(stage, status="done", seconds=0.0, config={}, metrics={})
    env = ros_env(tmp_path)
    out = tmp_path / "gen.json"
    node = start(["-m", "akd_ros.generator", "--ros-args", "-p", f"robot:={urdf}", "-p", "prompt:=a dog trotting",
                  "-p", f"out:={run.path}", "-p", "wait_for_subscribers:=1"], env, tmp_path / "node.log")
    try:
        monitor = start(monitor_args(out, ["/joint_states:joint_state:50"], 40, trigger="/akd_generator/generate"),
                        env, tmp_path / "monitor.log")
        _finish(monitor, 50)
    finally:
        node.send_signal(signal.SIGINT)
        rc = _finish(node, 15)
    log = (tmp_path / "node.log").read_text()
    result = json.loads(out.read_text())
    assert result["trigger"] is not None and result["trigger"]["success"], (result["trigger"], log)
    assert str(run.path) in result["trigger"]["message"]
    assert "done already (skipped" in log
    tracked = TrackedMotion.load(run.file(TRACKED))
    np.testing.assert_array_equal([m["position"] for m in result["topics"]["/joint_states"]],
                                  tracked.joint_pos.astype(np.float64))
    assert rc == 0, log


def test_looping_replay_stops_on_sigint_even_when_started_with_sigint_ignored(tmp_path):
    """`akd_replay ... &` from a script (or nohup, some CI runners) starts with SIGINT ignored; Ctrl-C and
    ros2 launch's shutdown signal must still stop the node cleanly."""
    run = make_run(tmp_path / "run", dt=DT, steps=50, tracked=False)
    log = tmp_path / "node.log"
    node = subprocess.Popen([PYTHON, *replay_args(run.path, loop=True)], cwd=REPO, env=ros_env(tmp_path),
                            stdout=log.open("w"), stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 30
    while "replaying" not in log.read_text():
        assert node.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    node.send_signal(signal.SIGINT)
    assert _finish(node, 15) == 0, log.read_text()
