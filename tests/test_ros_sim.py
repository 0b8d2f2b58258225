"""ROS 2 in the loop: the MuJoCo simulator node (akd_ros.sim) driven by the replay node and by the policy node, each
in its own process (real rclpy + Fast DDS, shared-memory transport, one ROS_DOMAIN_ID per test)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from akd_core.io.rundir import ROBOT_URDF, TRACKED, RunDir
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.load import load_robot
from akd_core.model.robot import load_urdf
from akd_core.motion.clip import TrackedMotion
from akd_core.physics.engines.base import mass_links

from .policy_runs import dataset_of, feedforward_run
from .ros_runs import monitor_args, replay_args, ros_env, start

pytest.importorskip("rclpy", reason="the ROS 2 wheels are not installed (pip install -e '.[ros]')")

NS = 1_000_000_000
REPLAY_STATES, REPLAY_ODOM = "/akd/replay/joint_states", "/akd/replay/root_odom"  # not the simulator's topics


def _params(module: str, **params: object) -> list[str]:
    args = ["-m", module, "--ros-args"]
    for key, value in params.items():
        value = str(value).lower() if isinstance(value, bool) else value
        args += ["-p", f"{key}:={value}"]
    return args


def _finish(proc: subprocess.Popen, timeout: float, log: Path) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"{proc.args} did not finish within {timeout} s:\n{log.read_text()[-3000:]}")


def _summary(log: str) -> dict[str, int]:
    match = re.search(r"(\d+) commands applied, (\d+) dropped, (\d+) missed, fell: (\w+)", log)
    assert match, log[-3000:]
    return {"applied": int(match[1]), "dropped": int(match[2]), "missed": int(match[3]), "fell": match[4] == "yes"}


def link_error(robot, tracked: TrackedMotion, frames: np.ndarray, joint_pos, root_pos, root_quat) -> np.ndarray:
    """Mean distance (m) per frame between the mass-carrying links of a state sequence and tracked.npz's."""
    fk = ForwardKinematics(robot)
    ids = [robot.link_names.index(n) for n in mass_links(robot)]

    def links(rp, rq, jq):
        with torch.no_grad():
            pos, _ = fk(*(torch.as_tensor(np.asarray(x), dtype=torch.float64) for x in (rp, rq, jq)))
        return pos.numpy()[:, ids]

    a = links(root_pos, root_quat, joint_pos)
    b = links(tracked.root_pos[frames], tracked.root_quat[frames], tracked.joint_pos[frames])
    return np.linalg.norm(a - b, axis=-1).mean(-1)


def replay_through_sim(tmp: Path, run: RunDir, timeout: float = 90.0) -> tuple[dict, str]:
    """The replay node (simulated time, the PD-target JointTrajectory only) drives the sim node (lockstep, started
    at the run's first state); a monitor records /joint_states and /odom. Returns (recording, sim log)."""
    tracked = TrackedMotion.load(run.file(TRACKED))
    frames = tracked.num_steps
    env = ros_env(tmp)
    out = tmp / "rec.json"
    monitor = start(monitor_args(out, [f"/joint_states:joint_state:{frames}", f"/odom:odometry:{frames}"], timeout),
                    env, tmp / "monitor.log")
    sim = start(_params("akd_ros.sim", run_dir=run.path, lockstep=True, duration=(frames - 1) * tracked.dt,
                        wait_for_subscribers=1, lockstep_timeout=timeout, wait_timeout=timeout), env, tmp / "sim.log")
    replay = start(replay_args(run.path, use_sim_time=True, position_commands_topic="''",
                               effort_commands_topic="''", joint_states_topic=REPLAY_STATES,
                               root_odom_topic=REPLAY_ODOM, wait_for_subscribers=1,
                               wait_topics=["/joint_trajectory_controller/joint_trajectory"], linger=0.5),
                   env, tmp / "replay.log")
    assert _finish(sim, timeout + 30, tmp / "sim.log") == 0, (tmp / "sim.log").read_text()
    _finish(replay, 30, tmp / "replay.log")
    _finish(monitor, timeout + 30, tmp / "monitor.log")
    return json.loads(out.read_text())["topics"], (tmp / "sim.log").read_text()


def _check_reproduction(run: RunDir, rec: dict, log: str, limit_m: float) -> float:
    tracked = TrackedMotion.load(run.file(TRACKED))
    robot = load_urdf(run.file(ROBOT_URDF))
    js, odom = rec["/joint_states"], rec["/odom"]
    assert len(js) == tracked.num_steps and len(odom) == tracked.num_steps
    frames = np.array([round(m["stamp_ns"] / (tracked.dt * NS)) for m in js])
    np.testing.assert_array_equal(frames, np.arange(tracked.num_steps))  # /clock-stamped, one per control period
    assert [round(m["stamp_ns"] / (tracked.dt * NS)) for m in odom] == list(frames)
    assert js[0]["name"] == tracked.joint_names and odom[0]["frame_id"] == "odom"
    err = link_error(robot, tracked, frames, [m["position"] for m in js], [m["position"] for m in odom],
                     [m["orientation"] for m in odom])
    summary = _summary(log)
    assert summary["applied"] == tracked.num_steps - 1 and summary["dropped"] == 0 and summary["missed"] == 0
    assert err.max() < limit_m, f"link error {err.mean():.4f} m mean, {err.max():.4f} m max"
    return float(err.max())


@pytest.fixture(scope="module")
def trot_run(tmp_path_factory):
    return feedforward_run(tmp_path_factory.mktemp("ros_sim") / "trot", load_robot("quadruped"),
                           "a dog trotting forward at 0.4 m/s", 2.0)


def test_replaying_a_tracked_run_into_the_sim_node_reproduces_it(tmp_path, trot_run):
    rec, log = replay_through_sim(tmp_path, trot_run)
    # the same model, start state and PD-target interpolation as tracking: equal up to float32 storage
    assert _check_reproduction(trot_run, rec, log, 0.03) < 1e-4


def test_sim_drops_commands_outside_the_urdf_limits_and_holds_the_last_targets(tmp_path, trot_run):
    run = RunDir(tmp_path / "bad", create=True)
    for name in (ROBOT_URDF, TRACKED, "reference.npz", "manifest.json"):
        shutil.copy(trot_run.file(name), run.file(name))
    tracked = TrackedMotion.load(run.file(TRACKED))
    robot = load_urdf(run.file(ROBOT_URDF))
    joint = tracked.joint_names.index("front_left_knee")
    tracked.pd_targets[20, joint] = robot.upper[joint] + 0.5
    tracked.save(run.file(TRACKED))
    env = ros_env(tmp_path)
    frames = 40
    sim = start(_params("akd_ros.sim", run_dir=run.path, lockstep=True, duration=(frames - 2) * tracked.dt,
                        lockstep_timeout=60.0), env, tmp_path / "sim.log")
    # the stream starts at sample 0 once the simulator subscribes; in lockstep each sample is one control period
    replay = start(replay_args(run.path, allow_unsafe=True, effort_commands_topic="''",
                               joint_states_topic=REPLAY_STATES, root_odom_topic=REPLAY_ODOM, wait_for_subscribers=1,
                               wait_topics=["/position_controller/commands"], linger=0.5), env,
                   tmp_path / "replay.log")
    assert _finish(sim, 90, tmp_path / "sim.log") == 0
    _finish(replay, 60, tmp_path / "replay.log")
    log = (tmp_path / "sim.log").read_text()
    summary = _summary(log)
    # the trajectory (one bad point) and the one bad streamed sample are refused; every other sample is applied
    assert summary["dropped"] == 2 and summary["missed"] == 0, log[-3000:]
    assert "dropped a command outside the URDF limits" in log and "front_left_knee" in log
    assert "following a trajectory" not in log


def test_streamed_commands_are_checked_against_the_one_before_so_a_late_one_is_not_a_jump():
    """Two commands of a smooth stream that arrive in one control period (the first a period late) both pass, the
    later applies; a step beyond the velocity limit from the command before it is dropped; after a reset the stream
    starts again from the start target."""
    import rclpy
    from std_msgs.msg import Float64MultiArray

    from akd_ros.sim import SimNode, SimOptions

    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    try:
        node = SimNode(SimOptions(robot="quadruped"), context=context)
        start = node.world.last_target.copy()
        joint = int(np.argmax(node.limits.upper - start))  # the joint with the most room above its start
        step = np.zeros_like(start)
        step[joint] = 0.9 * node.limits.velocity[joint] * node.physics.dt  # 90 % of its limit in one period
        assert start[joint] + 5 * step[joint] < node.limits.upper[joint]
        send = lambda values: node._on_command(Float64MultiArray(data=[float(v) for v in values]))  # noqa: E731
        send(start + step)
        send(start + 2 * step)  # a period late: two steps from the target applied, one from the command before
        assert node.dropped == 0 and np.allclose(node.pending, start + 2 * step)
        node.step()
        np.testing.assert_allclose(node.world.last_target, start + 2 * step)
        send(start + 5 * step)  # three steps from the command before: a jump
        assert node.dropped == 1 and node.pending is None
        node.reset()
        send(start + 3 * step)  # one step from the last command, three from the start target it was reset to
        assert node.dropped == 2
        send(start + step)
        assert node.dropped == 2 and np.allclose(node.pending, start + step)
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


RESET_CLIENT = """
import sys, time, rclpy
from std_srvs.srv import Trigger
rclpy.init()
node = rclpy.create_node("reset_client")
client = node.create_client(Trigger, "/akd_sim/reset")
assert client.wait_for_service(timeout_sec=60.0), "no /akd_sim/reset service"
for _ in range(2):
    future = client.call_async(Trigger.Request())
    rclpy.spin_until_future_complete(node, future, timeout_sec=10.0)
    print("reply", future.result().success, future.result().message, flush=True)
    time.sleep(0.5)
"""


def test_sim_reset_service_puts_the_robot_back_and_the_summary_counts_resets_and_falls(tmp_path, trot_run):
    """`/akd_sim/reset` (std_srvs/Trigger) from another process: the node resets before its next control period,
    logs it, and its summary counts the resets and falls (what bench/bench_soak.py relies on to go on after a fall)."""
    env = ros_env(tmp_path)
    sim = start(_params("akd_ros.sim", run_dir=trot_run.path, real_time_factor=1.0, duration=10.0), env,
                tmp_path / "sim.log")
    client = start(["-c", RESET_CLIENT], env, tmp_path / "client.log")
    assert _finish(client, 90, tmp_path / "client.log") == 0, (tmp_path / "client.log").read_text()
    assert _finish(sim, 90, tmp_path / "sim.log") == 0
    replies = (tmp_path / "client.log").read_text()
    assert replies.count("reply True the robot returns to its start state") == 2, replies
    log = (tmp_path / "sim.log").read_text()
    assert len(re.findall(r"reset to the start state at t = [\d.]+ s", log)) == 2, log[-3000:]
    assert "fell: no (0 falls, 2 resets)" in log and not _summary(log)["fell"]


@pytest.fixture(scope="module")
def onnx_policy(tmp_path_factory, trot_run):
    from akd_core.learn.bc import BCConfig, train_bc
    from akd_core.learn.dataset import load_dataset
    from akd_core.learn.onnx_export import export_onnx
    from akd_core.learn.policy import FitConfig

    root = tmp_path_factory.mktemp("ros_policy")
    robot = load_robot("quadruped")
    dataset = load_dataset(dataset_of([trot_run], root / "trot.hdf5"))
    policy, meta, _ = train_bc(dataset, robot, BCConfig(fit=FitConfig(epochs=150)), progress=False)
    return export_onnx(policy, meta, root / "trot.onnx")


@pytest.mark.slow
def test_policy_node_drives_the_sim_node_10s_without_falling(tmp_path, onnx_policy):
    """~60 s on 2 loaded cores (a BC fit, three processes that each import torch and MuJoCo), hence slow."""
    env = ros_env(tmp_path)
    out = tmp_path / "rec.json"
    seconds, frames = 10.0, 501
    monitor = start(monitor_args(out, [f"/odom:odometry:{frames}", f"/joint_states:joint_state:{frames}"], 120), env,
                    tmp_path / "monitor.log")
    sim = start(_params("akd_ros.sim", robot="quadruped", policy=onnx_policy, lockstep=True, duration=seconds,
                        wait_for_subscribers=2, lockstep_timeout=30.0, wait_timeout=60.0), env, tmp_path / "sim.log")
    policy = start(_params("akd_ros.policy_node", policy=onnx_policy, duration=seconds, use_sim_time=True), env,
                   tmp_path / "policy.log")
    assert _finish(sim, 150, tmp_path / "sim.log") == 0
    _finish(policy, 60, tmp_path / "policy.log")
    _finish(monitor, 150, tmp_path / "monitor.log")
    summary = _summary((tmp_path / "sim.log").read_text())
    assert summary == {"applied": 500, "dropped": 0, "missed": 0, "fell": False}, summary
    assert "published 500 PD-target commands" in (tmp_path / "policy.log").read_text()
    odom = json.loads(out.read_text())["topics"]["/odom"]
    pos = np.array([m["position"] for m in odom])
    assert len(pos) == frames and pos[:, 2].min() > 0.5 * pos[0, 2]
    assert pos[-1, 0] - pos[0, 0] > 2.0  # it walked (the clip trots at 0.4 m/s)


@pytest.mark.slow
def test_replaying_the_demo_into_the_sim_node_reproduces_tracked_npz_within_3cm(tmp_path):
    """The issue's acceptance: `akd run`'s demo ("a dog trotting forward", sampling MPC), replayed into the sim."""
    from akd_core.cli import main

    run_dir = tmp_path / "demo"
    assert main(["gait", "--robot", "quadruped", "--prompt", "a dog trotting forward", "--out", str(run_dir),
                 "--no-preview"]) == 0
    assert main(["track", str(run_dir)]) == 0
    run = RunDir(run_dir)
    rec, log = replay_through_sim(tmp_path, run, timeout=120.0)
    print(f"demo replay through akd_sim: max link error {_check_reproduction(run, rec, log, 0.03):.2e} m")


def test_sim_setup_takes_the_runs_physics_and_start_or_the_default_pose(trot_run):
    from akd_ros.sim import SimOptions, resolve_setup

    setup = resolve_setup(SimOptions(run_dir=str(trot_run.path)))
    tracked = TrackedMotion.load(trot_run.file(TRACKED))
    metrics = trot_run.manifest()["stages"]["track"]["metrics"]
    np.testing.assert_allclose(setup.physics.kp, tracked.kp)
    np.testing.assert_allclose(setup.physics.kd, tracked.kd)
    np.testing.assert_allclose(setup.physics.armature, metrics["armature"])
    assert setup.physics.dt == pytest.approx(tracked.dt) and setup.physics.sim_dt == pytest.approx(metrics["sim_dt_s"])
    assert setup.physics.integrator == metrics["integrator"] == "euler"
    np.testing.assert_allclose(setup.state.joint_pos, tracked.joint_pos[0]) and np.testing.assert_allclose(
        setup.target, tracked.pd_targets[0])
    default = resolve_setup(SimOptions(robot="quadruped"))
    robot = load_robot("quadruped")
    np.testing.assert_allclose(default.state.joint_pos, robot.default_joint_pos())
    assert default.physics.dt == pytest.approx(0.02) and default.state.root_pos[2] > 0.2
