"""Synthetic run directories for the ROS tests (a1 from example-robot-data, motion within its limits),
and helpers to start rclpy processes isolated from each other (SHM transport, one domain id per test)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from akd_core.io.rundir import REFERENCE, ROBOT_URDF, TRACKED, RunDir
from akd_core.model.robot import load_urdf
from akd_core.motion.clip import Motion, TrackedMotion

from .conftest import example_robot_urdf

PYTHON = sys.executable
REPO = Path(__file__).resolve().parents[1]


def _domain_base() -> int:
    """First ROS_DOMAIN_ID of this test process: $AKD_TEST_DOMAIN_BASE, else a block of 24 per pytest-xdist worker
    (gw0: 10-33, gw1: 34-57, ...: the whole suite takes fewer ids than that, so blocks never overlap; `make test`
    runs at most 8 workers: 10-201, inside Fast DDS's 0-232), else one derived from the pid."""
    if "AKD_TEST_DOMAIN_BASE" in os.environ:
        return int(os.environ["AKD_TEST_DOMAIN_BASE"])
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw"):
        return 10 + 24 * (int(worker[2:]) % 9)
    return 40 + os.getpid() % 100


_DOMAINS = itertools.count(_domain_base())


def make_run(path: Path, dt: float = 0.01, steps: int = 100, seed: int = 0, tracked: bool = True,
             freq_hz: float = 1.5) -> RunDir:
    """A run dir of the a1 robot: robot.urdf, reference.npz and (optionally) tracked.npz, within every limit.

    Joints swing around mid-range at ``freq_hz`` (|v| < 21 rad/s up to 3 Hz; periodic when steps * dt * freq_hz
    is an integer, so a looping replay does not jump), torques reach 60% of the effort limit,
    the root walks forward at 0.3 m/s while yawing at 0.5 rad/s (so body-frame odometry differs from world).
    """
    rng = np.random.default_rng(seed)
    robot = load_urdf(example_robot_urdf("a1"))
    run = RunDir(path, create=True)
    robot.to_urdf(run.file(ROBOT_URDF))
    t = np.arange(steps) * dt
    mid = (robot.lower + robot.upper) / 2
    half = (robot.upper - robot.lower) / 2
    phase = rng.uniform(0, 2 * np.pi, robot.num_dofs)
    omega = 2 * np.pi * freq_hz
    q = mid + 0.4 * half * np.sin(omega * t[:, None] + phase)
    qd = 0.4 * half * omega * np.cos(omega * t[:, None] + phase)
    yaw = 0.5 * t
    root_quat = np.stack([np.zeros_like(yaw), np.zeros_like(yaw), np.sin(yaw / 2), np.cos(yaw / 2)], -1)
    root_pos = np.stack([0.3 * t, np.zeros_like(t), np.full_like(t, 0.3)], -1)
    motion = Motion(fps=1.0 / dt, joint_names=robot.joint_names, joint_pos=q, root_pos=root_pos, root_quat=root_quat,
                    prompt="a dog trotting")
    motion.save(run.file(REFERENCE))
    if tracked:
        torques = 0.6 * robot.effort_limit * np.sin(omega * t[:, None] + phase + 0.3)
        pd = q + 0.02 * half * np.cos(omega * t[:, None] + phase)
        lin_vel = np.tile([0.3, 0.0, 0.0], (steps, 1))
        ang_vel = np.tile([0.0, 0.0, 0.5], (steps, 1))
        TrackedMotion(dt=dt, joint_names=robot.joint_names, pd_targets=pd, joint_torques=torques, joint_pos=q,
                      joint_vel=qd, root_pos=root_pos, root_quat=root_quat, root_lin_vel=lin_vel,
                      root_ang_vel=ang_vel, kp=np.full(robot.num_dofs, 40.0),
                      kd=np.full(robot.num_dofs, 1.0)).save(run.file(TRACKED))
    return run


def ros_env(tmp_path: Path, domain: int | None = None) -> dict[str, str]:
    """Environment of an isolated rclpy process: shared memory transport only, its own domain, logs in tmp."""
    env = dict(os.environ)
    env.update(FASTDDS_BUILTIN_TRANSPORTS="SHM", ROS_DOMAIN_ID=str(next(_DOMAINS) if domain is None else domain),
               ROS_LOG_DIR=str(tmp_path / "ros-logs"), PYTHONPATH=str(REPO), RCUTILS_LOGGING_BUFFERED_STREAM="0")
    env.pop("ROS_LOCALHOST_ONLY", None)
    return env


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start ``python args...`` in the repo root with stdout+stderr to ``log``."""
    return subprocess.Popen([PYTHON, *args], cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def monitor_args(out: Path, topics: list[str], timeout: float, trigger: str | None = None,
                 times_only: bool = False) -> list[str]:
    args = ["-m", "akd_ros.monitor", "--out", str(out), "--timeout", str(timeout)]
    for topic in topics:
        args += ["--topic", topic]
    if trigger:
        args += ["--trigger", trigger]
    if times_only:
        args.append("--times-only")
    return args


def replay_args(run_dir: Path, **params: object) -> list[str]:
    """``python -m akd_ros.replay --ros-args -p run_dir:=... -p k:=v ...``"""
    args = ["-m", "akd_ros.replay", "--ros-args", "-p", f"run_dir:={run_dir}"]
    for key, value in params.items():
        if isinstance(value, bool):
            value = str(value).lower()
        elif isinstance(value, (list, tuple)):
            value = "[" + ",".join(f"'{v}'" for v in value) + "]"
        args += ["-p", f"{key}:={value}"]
    return args
