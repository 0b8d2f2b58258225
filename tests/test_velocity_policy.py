"""Velocity-command policies: the command box, the observation and its command slot, the library frames and motion
matching, the reward terms, BC + PPO with checkpoint and resume, the evaluation's JSON, the ONNX export and the ROS 2
node following /cmd_vel (separate processes, real rclpy).

The library is a tiny stand-in for `akd library`'s: two gait-library clips of the built-in quadruped tracked by the
feedforward replay (tests/policy_runs.py), each with the command it follows written as ``obs/command``.

Run as ``python -m tests.test_velocity_policy --twist-driver OUT.json ...`` this module is the Twist publisher and
recorder of the ROS test (a process of its own).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from akd_core.cli import main
from akd_core.cli.train_policy import parse_steer
from akd_core.io.errors import ConfigError, MotionError
from akd_core.learn.bc import dataset_physics, demo_starts
from akd_core.learn.command import CommandBox, CommandSchedule, GaitClock, heading_velocity
from akd_core.learn.env import Randomisation
from akd_core.learn.motion_library import (
    LibraryFrames,
    MotionMatcher,
    gait_phase,
    stride_frequency,
    style_segments,
)
from akd_core.learn.observation import (
    ObservationHistory,
    history_frames,
    noise_scales,
    observation_slices,
    stack_history,
    velocity_observation_layout,
    velocity_observations,
)
from akd_core.learn.policy import FitConfig, TrackingPolicy, load_policy, save_policy
from akd_core.learn.ppo import PPOConfig
from akd_core.learn.reference import yaw_of
from akd_core.learn.velocity import (
    VelocityConfig,
    library_feedforward,
    load_library,
    train_velocity,
    velocity_samples,
    velocity_targets,
)
from akd_core.learn.velocity_env import (
    ACTION_RATE_SCALE,
    AIR_TIME_S,
    FEET_WIDTH,
    JOINT_WIDTH,
    LIN_VEL_FINE_WIDTH,
    LIN_VEL_WIDTH,
    YAW_RATE_FINE_WIDTH,
    YAW_RATE_WIDTH,
    VelocityEnvConfig,
    VelocityVecEnv,
)
from akd_core.learn.velocity_eval import (
    VelocityEvalConfig,
    after_change_sums,
    aggregate,
    evaluate_velocity,
    scored_steps,
    yaw_rate_mean,
)
from akd_core.learn.velocity_feedforward import FF_CHUNK
from akd_core.model.legs import find_legs
from akd_core.model.load import load_robot
from akd_core.motion.clip import Motion
from akd_core.physics.engines.base import BodyState
from tests.policy_runs import dataset_of, feedforward_run

CALM = dict(push_mps=0.0, push_every_s=0.0, friction=(1.0, 1.0), mass_scale=(1.0, 1.0), obs_noise=0.0,
            latency_s=(0.0, 0.0))
HISTORY = 2  # control steps of history in the ``trained`` fixture's policy
TINY_PPO = dict(num_envs=4, steps_per_env=8, critic_warmup=1, episode_s=2.0, checkpoint_every=1, threads=1)


def reference_command(run_dir: Path) -> np.ndarray:
    """(3,) the heading-frame velocity and yaw rate the reference keeps over its second half."""
    motion = Motion.load(run_dir / "reference.npz")
    dt = 1.0 / motion.fps
    yaw = np.unwrap(yaw_of(motion.root_quat))
    omega = np.zeros((len(yaw), 3))
    omega[:, 2] = np.gradient(yaw, dt)
    v = heading_velocity(np.gradient(motion.root_pos, dt, axis=0), motion.root_quat, omega)
    return v[len(v) // 2:].mean(0)


@pytest.fixture(scope="module")
def quadruped():
    return load_robot("quadruped")


@pytest.fixture(scope="module")
def library(tmp_path_factory, quadruped) -> Path:
    """HDF5 library of two clips (trot 0.4 m/s ahead; trot 0.4 m/s turning left), each demo's command per frame."""
    root = tmp_path_factory.mktemp("velocity_library")
    runs = [feedforward_run(root / "trot04", quadruped, "a dog trotting forward at 0.4 m/s", 2.0),
            feedforward_run(root / "turn", quadruped, "a dog trotting forward at 0.4 m/s and turning left", 2.0)]
    path = dataset_of(runs, root / "library.hdf5")
    with h5py.File(path, "a") as f:
        for i, run in enumerate(runs):
            demo = f[f"data/demo_{i}"]
            frames = demo["actions"].shape[0]
            ramp = np.clip(np.arange(frames) * 0.02 / 0.5, 0.0, 1.0)[:, None]  # from rest, as a program ramps
            demo.create_dataset("obs/command", data=(ramp * reference_command(run.path)).astype(np.float32))
    return path


def two_worlds(library: Path, robot, randomisation: dict | None = None, **cfg) -> tuple[VelocityVecEnv, LibraryFrames]:
    """Two training worlds on ``library`` (calm unless ``randomisation``, one thread) and the library's frames."""
    dataset, box, _ = load_library(library)
    frames = LibraryFrames.from_dataset(dataset, robot)
    worlds = VelocityEnvConfig(num_envs=2, threads=1, randomisation=Randomisation(**(randomisation or CALM)), **cfg)
    env = VelocityVecEnv(robot, dataset_physics(dataset, robot), frames, [demo_starts(d) for d in dataset.demos], box,
                         worlds)
    return env, frames


@pytest.fixture(scope="module")
def trained(library, quadruped, tmp_path_factory):
    """BC + 2 PPO iterations on the tiny library with motion matching and a history of HISTORY steps, checkpointed
    (the residual fixture has none: both observations are covered)."""
    out = tmp_path_factory.mktemp("velocity_policy")
    cfg = VelocityConfig(fit=FitConfig(epochs=60), imitation="match", ppo=PPOConfig(iterations=2, **TINY_PPO),
                         history=HISTORY, action="absolute")
    policy, meta, metrics = train_velocity(library, quadruped, cfg, checkpoint=out / "v.pt.ckpt", progress=False)
    save_policy(out / "v.pt", policy, meta)
    return out / "v.pt", policy, meta, metrics


# ----------------------------------------------------------------------------- command and observation
def test_command_box_clips_axes_then_the_speed_limit_while_turning():
    box = CommandBox.from_dict({"vx_mps": [-0.5, 0.94], "vy_mps": [-0.3, 0.3], "yaw_rate_radps": [-1.0, 1.0],
                                "speed_max_mps": 0.94, "turning": {"yaw_rate_radps": 0.9, "speed_mps": 0.85}})
    np.testing.assert_allclose(box.clip([2.0, 0.0, 0.0]), [0.94, 0.0, 0.0])
    np.testing.assert_allclose(box.clip([0.2, -1.0, -3.0]), [0.2, -0.3, -1.0])
    turning = box.clip([0.94, 0.0, 0.45])  # half the probe's yaw rate: the limit is halfway, 0.895 m/s
    np.testing.assert_allclose(turning, [0.895, 0.0, 0.45])
    crab = box.clip([0.94, 0.3, 0.0])  # too fast: scaled down to the speed limit, its direction kept
    np.testing.assert_allclose(crab[:2], np.array([0.94, 0.3]) * 0.94 / np.hypot(0.94, 0.3))
    samples = box.sample(np.random.default_rng(0), 500)
    assert np.all(samples >= box.low - 1e-12) and np.all(samples <= box.high + 1e-12)
    assert np.all(np.hypot(samples[:, 0], samples[:, 1]) <= box.speed_limit(samples[:, 2]) + 1e-9)
    assert CommandBox.from_dict(box.to_dict()) == box
    with pytest.raises(ConfigError, match="vx range"):
        CommandBox(vx=(1.0, 0.0), vy=(0.0, 0.0), yaw_rate=(0.0, 0.0))


def test_velocity_observation_has_measured_terms_and_the_command_in_its_slot(quadruped):
    j = quadruped.num_dofs
    layout = velocity_observation_layout(j)
    assert [n for n, _ in layout] == ["joint_pos", "joint_vel", "last_target", "gravity_body", "ang_vel_body",
                                      "command", "clock"]
    slot = observation_slices(layout)["command"]
    assert (slot.start, slot.stop) == (3 * j + 6, 3 * j + 9) and sum(s for _, s in layout) == 3 * j + 11
    rng = np.random.default_rng(0)
    q, qd, last = rng.normal(size=(3, 2, j))
    yaw = np.pi / 3
    quat = np.array([[0, 0, np.sin(yaw / 2), np.cos(yaw / 2)]] * 2)
    command = np.array([[0.5, -0.1, 0.3], [0.0, 0.0, 0.0]])
    obs = velocity_observations(q, qd, last, quat, np.zeros((2, 3)), command, np.array([0.0, np.pi / 2]))
    np.testing.assert_allclose(obs[:, slot], command, atol=1e-7)
    np.testing.assert_allclose(obs[:, observation_slices(layout)["clock"]], [[0, 1], [1, 0]], atol=1e-7)
    np.testing.assert_allclose(obs[:, observation_slices(layout)["gravity_body"]], [[0, 0, -1]] * 2, atol=1e-7)
    assert np.all(noise_scales(j, layout)[3 * j + 6:] == 0.0)  # command and clock are given, not measured


def test_observation_history_holds_the_steps_before_newest_first_and_a_start_repeats_its_first(quadruped):
    j = quadruped.num_dofs
    size = 3 * j + 6
    layout = velocity_observation_layout(j, 3)
    assert layout[-1] == ("history", 3 * size) and history_frames(layout, j) == 3
    assert history_frames(velocity_observation_layout(j), j) == 0
    assert history_frames(layout[:-1] + [("history", 3 * size + 1)], j) == -1
    steps = np.arange(6 * 2 * (3 * j + 11), dtype=np.float32).reshape(6, 2, 3 * j + 11)  # 6 steps of 2 robots
    history = ObservationHistory(2, 3, j)
    out = [history.observe(steps[0])]
    np.testing.assert_array_equal(out[0][:, 3 * j + 11:], np.tile(steps[0][:, :size], 3))  # a start: its first
    for t in range(1, 4):
        out.append(history.observe(steps[t]))
    np.testing.assert_array_equal(out[3][:, :3 * j + 11], steps[3])
    np.testing.assert_array_equal(out[3][:, 3 * j + 11:], np.concatenate([steps[2][:, :size], steps[1][:, :size],
                                                                          steps[0][:, :size]], axis=1))
    history.reset([1])  # robot 1 restarts: its past is forgotten, robot 0's kept
    after = history.observe(steps[4])
    np.testing.assert_array_equal(after[1, 3 * j + 11:], np.tile(steps[4][1, :size], 3))
    np.testing.assert_array_equal(after[0, 3 * j + 11:3 * j + 11 + size], steps[3][0, :size])
    # a demo's sequence at once is what the steps give one by one
    np.testing.assert_array_equal(stack_history(steps[:4, 0], 3, j), np.stack([o[0] for o in out]))


def test_training_worlds_see_their_own_past_and_forget_it_when_they_restart(library, quadruped):
    env, _ = two_worlds(library, quadruped, history=2)
    j, size = quadruped.num_dofs, 3 * quadruped.num_dofs + 6
    first, _ = env.observations()
    assert first.shape[1] == 3 * j + 11 + 2 * size
    env.step(env.targets[:, 1].copy())
    second, _ = env.observations()
    np.testing.assert_allclose(second[:, 3 * j + 11:3 * j + 11 + size], first[:, :size], atol=1e-6)
    env.step(env.targets[:, 1].copy())
    env.reset_world(0)
    third, _ = env.observations()
    np.testing.assert_allclose(third[0, 3 * j + 11:], np.tile(third[0, :size], 2), atol=1e-6)  # restarted
    np.testing.assert_allclose(third[1, 3 * j + 11 + size:], first[1, :size], atol=1e-6)  # two steps back


def test_a_policy_file_with_a_broken_history_is_refused(trained, tmp_path):
    path, _, _, _ = trained
    payload = torch.load(path, weights_only=False)
    payload["obs_layout"][-1] = ["history", payload["obs_layout"][-1][1] + 1]
    torch.save(payload, tmp_path / "broken.pt")
    with pytest.raises(ConfigError, match="observation layout"):
        load_policy(tmp_path / "broken.pt")


def test_heading_velocity_is_the_base_velocity_in_the_yaw_frame():
    yaw = np.pi / 2
    quat = np.array([[0, 0, np.sin(yaw / 2), np.cos(yaw / 2)]])
    np.testing.assert_allclose(heading_velocity(np.array([[0.0, 1.0, 0.2]]), quat, np.array([[0.1, 0.0, 0.7]])),
                               [[1.0, 0.0, 0.7]], atol=1e-12)


def test_command_schedule_from_a_timeline_and_the_half_second_after_each_change_left_out():
    schedule = CommandSchedule.from_rows([{"t": 0.0, "vx": 0.0, "vy": 0.0, "yaw_rate": 0.0},
                                          {"t": 1.0, "vx": 0.5, "vy": 0.0, "yaw_rate": 0.2}])
    np.testing.assert_allclose(schedule.at(0.98), [0, 0, 0])
    np.testing.assert_allclose(schedule.at(1.0), [0.5, 0, 0.2])
    keep = scored_steps(schedule, 100, 0.02, 0.5)
    assert keep.sum() == 75 and not keep[50:75].any() and keep[75] and keep[:50].all()


def test_gait_clock_runs_at_the_librarys_stride_frequency_and_stops_for_a_stand():
    commands = np.array([[0.2, 0.0, 0.0], [0.4, 0.0, 0.0], [0.6, 0.0, 0.5], [0.8, 0.1, 0.0]] * 10)
    hz = 1.0 + 1.5 * np.hypot(commands[:, 0], commands[:, 1]) + 0.2 * np.abs(commands[:, 2])
    clock = GaitClock.fit(commands, hz)
    assert (clock.hz0, clock.per_mps, clock.per_radps) == pytest.approx((1.0, 1.5, 0.2))
    assert clock.frequency(np.zeros(3)) == 0.0 and clock.frequency([0.0, 0.0, 0.01]) == 0.0
    assert clock.frequency([5.0, 0.0, 0.0]) == pytest.approx(hz.max())  # clipped to the library's range
    phase = clock.advance(6.0, [0.4, 0.0, 0.0], 0.02)
    assert phase == pytest.approx(np.mod(6.0 + 2 * np.pi * 1.6 * 0.02, 2 * np.pi))
    assert clock.advance(1.0, np.zeros(3), 0.02) == 1.0
    assert GaitClock.from_dict(clock.to_dict()) == clock


def test_gait_phase_rises_between_touchdowns_and_holds_through_stands():
    down = np.array([1] * 10 + [0, 0, 1, 1] * 4 + [1] * 6, bool)  # a stand, four strides of 4 frames, a stand
    moving = np.array([False] * 10 + [True] * 16 + [False] * 6)
    phase = gait_phase(down, moving)
    touch = np.flatnonzero(down[1:] & ~down[:-1]) + 1
    np.testing.assert_allclose(phase[touch], 0.0, atol=1e-12)
    np.testing.assert_allclose(phase[touch[0] + 1], 2 * np.pi / 4)
    assert np.all(phase[:10] == phase[10]) and np.all(phase[26:] == phase[25])  # held over both stands


# ----------------------------------------------------------------------------- library and rewards
def test_library_frames_carry_commands_feet_and_strides(library, quadruped):
    dataset, box, source = load_library(library)
    assert "commands of" in source and box.vx[1] == pytest.approx(0.4, abs=0.02)
    frames = LibraryFrames.from_dataset(dataset, quadruped)
    assert frames.size == sum(d.num_frames for d in dataset.demos)
    assert frames.foot_height.shape == (frames.size, 4) and frames.contacts.any(0).all()
    assert (frames.contacts.mean(0) > 0.3).all() and (frames.contacts.mean(0) < 0.9).all()  # trotting feet
    moving = frames.stride_hz[frames.stride_hz > 0]
    assert 1.0 < np.median(moving) < 4.0
    strides = np.array([1, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1], bool)[:, None]  # a one-frame lift is not a stride
    np.testing.assert_allclose(stride_frequency(strides, 0.5), [0, 0, 0, 0, 0.5, 0.5, 0.5, 0.5, 0, 0, 0, 0])
    obs, targets = velocity_samples(dataset, frames)
    assert obs.shape[0] == targets.shape[0] == dataset.num_samples and obs.shape[1] == 3 * quadruped.num_dofs + 11


def test_motion_matching_finds_the_frame_itself_and_prefers_the_command(library, quadruped):
    dataset, _, _ = load_library(library)
    frames = LibraryFrames.from_dataset(dataset, quadruped)
    matcher = MotionMatcher(frames)
    rows = np.array([30, 80, frames.size - 20])
    np.testing.assert_array_equal(matcher.match(frames.command[rows], frames.phase[rows], frames.joint_pos[rows]),
                                  rows)
    # the straight trot's pose asked for the turn's command matches a frame of the turning clip at that phase
    straight = int(np.flatnonzero(frames.demo == 0)[80])
    turn_command = frames.command[frames.demo == 1][-1]
    found = matcher.match(turn_command[None], frames.phase[straight][None], frames.joint_pos[straight][None])
    assert frames.demo[found[0]] == 1
    gap = np.angle(np.exp(1j * (frames.phase[found[0]] - frames.phase[straight])))
    assert abs(gap) < 0.3


def test_a_library_used_from_another_folder_finds_its_robot_in_its_own_runs(library, quadruped, tmp_path,
                                                                            monkeypatch):
    """`akd library --out lib` records each demo's run relative to where it ran (lib/runs/clip_000); a URDF robot's
    library used from elsewhere finds the run in its own runs/ folder."""
    import json
    import shutil

    from akd_core.learn.velocity import library_robot

    folder = tmp_path / "lib"
    (folder / "dataset").mkdir(parents=True)
    shutil.copy(library, folder / "dataset" / "dataset.hdf5")
    with h5py.File(library, "r") as f:
        run = Path(str(f["data/demo_0"].attrs["run"]))
    shutil.copytree(run, folder / "runs" / "clip_000")
    with h5py.File(folder / "dataset" / "dataset.hdf5", "a") as f:
        env = json.loads(f["data"].attrs["env_args"])
        f["data"].attrs["env_args"] = json.dumps({**env, "robot": "my_dog"})  # not a built-in name
        for name in f["data"]:
            f[f"data/{name}"].attrs["run"] = "lib/runs/clip_000"  # as recorded by `akd library --out lib`
    monkeypatch.chdir(folder / "dataset")  # where lib/runs/clip_000 is not
    robot = library_robot(folder)
    assert robot.joint_names == quadruped.joint_names
    shutil.rmtree(folder / "runs")
    with pytest.raises(ConfigError, match="give --robot ROBOT"):
        library_robot(folder)


def test_a_dataset_without_commands_is_refused_naming_the_fix(tmp_path, quadruped, library):
    plain = tmp_path / "plain.hdf5"
    plain.write_bytes(library.read_bytes())
    with h5py.File(plain, "a") as f:
        for name in f["data"]:
            del f[f"data/{name}/obs/command"]
    with pytest.raises(MotionError, match="akd library"):
        load_library(plain)


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_command_changes_come_with_a_push_at_the_asked_share(library, quadruped, share):
    """push_with_change 1: each command change kicks the base at that step and restarts the pushes' 2 s beat there;
    0: the pushes keep their beat, whatever the commands do."""
    env, _ = two_worlds(library, quadruped, {**CALM, "push_mps": 0.4, "push_every_s": 2.0}, resample_s=(0.3, 0.5),
                        push_with_change=share)
    period = env.push_every
    beat = env.next_push.copy()
    changes = 0
    for _ in range(30):
        before = env.command.copy()
        _, fell, timeout, _ = env.step(env.targets[:, 1].copy())
        changed = np.flatnonzero(~(fell | timeout) & np.any(env.command != before, axis=1))
        changes += len(changed)
        for i in changed:
            if share == 1.0:
                assert env.next_push[i] == env.steps[i] + period  # pushed now, the next one a period on
            else:
                assert (env.next_push[i] - beat[i]) % period == 0  # still on its first beat
    assert changes >= 2


def test_reward_terms_against_hand_computed_values(library, quadruped):
    env, frames = two_worlds(library, quadruped, imitation="match")
    eng, n, s = env.engine, 2, env.physics.substeps
    row = int(np.flatnonzero(frames.demo == 1)[70])  # a turning frame: its command, pose and feet
    env.command[:] = [[0.5, 0.0, 0.0], frames.command[row]]
    env.phase[:] = frames.phase[row]
    yaw = 0.3
    body = BodyState(root_pos=np.array([[0.0, 0.0, 0.5], [0.0, 0.0, frames.base_height[row] + 0.02]]),
                     root_quat=np.array([[0, 0, np.sin(yaw / 2), np.cos(yaw / 2)], [0, 0, 0, 1.0]]),
                     joint_pos=np.stack([frames.joint_pos[row] + 0.1, frames.joint_pos[row]]),
                     root_lin_vel=np.array([[0.2 * np.cos(yaw) - 0.1 * np.sin(yaw), 0.2 * np.sin(yaw)
                                             + 0.1 * np.cos(yaw), 0.1], [0, 0, 0]]),
                     root_ang_vel=np.array([[0.0, 0.0, 0.3], [0.2, 0.0, frames.command[row, 2]]]),
                     joint_vel=np.stack([frames.joint_vel[row], frames.joint_vel[row]]))
    sensors = np.zeros((n, s, eng.model.nsensordata))
    sensors[:, :, eng.tau_adr] = 0.5 * env.effort  # half the effort limit everywhere
    sensors[:, :, eng.footpos_adr + 2] = frames.foot_height[row]
    sensors[0, :, eng.footforce_adr[0] + 3] = 50.0  # world 0: foot 0 down, sliding at 0.1 m/s
    sensors[0, :, eng.footvel_adr[0]] = 0.1
    env.down[:] = False
    env.air_time[:] = 0.0
    env.air_time[0, 0] = 0.4 - env.dt  # foot 0 of world 0 lands after 0.4 s in the air
    terms = env.reward_terms(body, sensors, np.array([0.25, 0.0]))
    np.testing.assert_allclose(terms["lin_vel"][0], np.exp(-(np.hypot(0.3, 0.1) / LIN_VEL_WIDTH) ** 2))
    np.testing.assert_allclose(terms["yaw_rate"][0], np.exp(-(0.3 / YAW_RATE_WIDTH) ** 2))
    np.testing.assert_allclose(terms["lin_vel"][1], np.exp(-(np.linalg.norm(frames.command[row, :2])
                                                             / LIN_VEL_WIDTH) ** 2))
    np.testing.assert_allclose(terms["yaw_rate"][1], 1.0)
    np.testing.assert_allclose(terms["yaw_rate_fine"], [np.exp(-(0.3 / YAW_RATE_FINE_WIDTH) ** 2), 1.0])
    assert terms["yaw_rate_fine"][0] < 0.2 < terms["yaw_rate"][0]  # 0.3 rad/s off: the narrow kernel pays little
    np.testing.assert_allclose(terms["lin_vel_fine"][0], np.exp(-(np.hypot(0.3, 0.1) / LIN_VEL_FINE_WIDTH) ** 2))
    assert terms["lin_vel_fine"][0] < 0.1 < 0.6 < terms["lin_vel"][0]  # 0.32 m/s off: the narrow kernel pays little
    np.testing.assert_allclose(terms["lin_vel_z"], [0.01, 0.0])
    np.testing.assert_allclose(terms["ang_vel_xy"], [0.0, 0.04], atol=1e-12)
    np.testing.assert_allclose(terms["orientation"], [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(terms["torques"], [0.25, 0.25])
    np.testing.assert_allclose(terms["action_rate"], [0.25, 0.0])
    np.testing.assert_allclose(terms["feet_slip"], [0.01, 0.0])
    np.testing.assert_allclose(terms["feet_air_time"], [0.4 - AIR_TIME_S, 0.0])  # the command moves: it pays
    # world 1 is the library frame itself: a perfect match; world 0 is 0.1 rad off in every joint
    assert terms["match"][1] == row
    np.testing.assert_allclose(terms["joint"][1], 1.0)
    np.testing.assert_allclose(terms["feet"][1], 1.0)
    np.testing.assert_allclose(terms["height"][1], 0.02 ** 2, rtol=1e-6)
    q_err = np.sqrt(np.mean((body.joint_pos[0] - frames.joint_pos[terms["match"][0]]) ** 2))
    np.testing.assert_allclose(terms["joint"][0], np.exp(-(q_err / JOINT_WIDTH) ** 2))
    assert terms["joint"][0] < 0.9
    h_err = np.sqrt(np.mean((frames.foot_height[row] - frames.foot_height[terms["match"][0]]) ** 2))
    np.testing.assert_allclose(terms["feet"][0], np.exp(-(h_err / FEET_WIDTH) ** 2))
    assert env.air_time[0, 0] == 0.0 and env.down[0, 0]  # landed: its air time starts over


# ----------------------------------------------------------------------------- training, evaluation, export
def test_bc_then_ppo_checkpoints_and_resumes(trained, library, quadruped, tmp_path):
    path, policy, meta, metrics = trained
    assert meta.task == "velocity" and meta.action_mode == "absolute" and meta.clips == []
    assert metrics["iterations"] == 2 and len(metrics["history"]) == 2 and metrics["method"] == "velocity-ppo"
    assert {"lin_vel", "yaw_rate", "joint", "feet", "torques"} <= set(metrics["history"][0]["reward_terms"])
    loaded, meta2 = load_policy(path)
    assert meta2.task == "velocity" and meta2.command["indices"] == [3 * quadruped.num_dofs + 6,
                                                                      3 * quadruped.num_dofs + 9]
    assert meta2.command["units"] == ["m/s", "m/s", "rad/s"] and meta2.library["contacts"].shape[1] == 4
    obs = np.random.default_rng(0).normal(size=(3, sum(s for _, s in meta.obs_layout))).astype(np.float32)
    np.testing.assert_allclose(loaded.act(obs), policy.act(obs))
    # the same run with one iteration more goes on from the checkpoint: the first two iterations are not redone
    checkpoint = path.with_name(path.name + ".ckpt")
    cfg = VelocityConfig(fit=FitConfig(epochs=60), imitation="match", ppo=PPOConfig(iterations=3, **TINY_PPO),
                         history=HISTORY, action="absolute")
    _, _, resumed = train_velocity(library, quadruped, cfg, checkpoint=checkpoint, progress=False)
    assert len(resumed["history"]) == 3
    assert resumed["history"][:2] == metrics["history"]
    # another configuration does not resume it
    other = VelocityConfig(fit=FitConfig(epochs=60), imitation="match", ppo=PPOConfig(iterations=1, **TINY_PPO),
                           history=HISTORY, zero_share=0.3, action="absolute")
    _, _, fresh = train_velocity(library, quadruped, other, checkpoint=checkpoint, progress=False)
    assert len(fresh["history"]) == 1


def test_amp_imitation_trains_its_discriminator_beside_ppo(library, quadruped, tmp_path):
    cfg = VelocityConfig(fit=FitConfig(epochs=5), imitation="amp", ppo=PPOConfig(iterations=2, **TINY_PPO),
                         action="absolute")
    _, meta, metrics = train_velocity(library, quadruped, cfg, checkpoint=tmp_path / "amp.ckpt", progress=False)
    first, last = metrics["history"]
    assert {"style", "lin_vel"} <= set(last["reward_terms"]) and "joint" not in last["reward_terms"]
    assert 0.0 <= last["reward_terms"]["style"] <= 1.0
    assert {"disc_loss", "d_library", "d_policy"} <= set(last["shaper"])
    assert "shaper" in torch.load(tmp_path / "amp.ckpt", weights_only=False)  # the discriminator resumes too
    assert meta.train["imitation"] == "amp"


def test_eval_json_has_the_command_tracking_figures(trained, quadruped, tmp_path, capsys):
    path, policy, meta, _ = trained
    commands = tmp_path / "commands.csv"
    commands.write_text("t,vx,vy,yaw_rate\n0,0.3,0,0\n1.0,0.4,0,0.4\n")
    out = tmp_path / "eval.json"
    main(["eval-policy", str(path), "--task", "velocity", "--episodes", "2", "--seconds", "2", "--commands",
          str(commands), "--json", str(out), "--push-every", "0", "--obs-noise", "0"])
    report = json.loads(out.read_text())
    for key in ("falls", "episodes", "vx_rmse_mps", "vy_rmse_mps", "yaw_rate_rmse_radps"):
        assert key in report
    assert report["episodes"] == 2 and report["task"] == "velocity" and "style" in report
    gait = report["gait_windows"]
    assert gait["windows"] == sum(len(r["gait_windows"]) for r in report["per_episode"])
    assert gait["share"] is None or 0.0 <= gait["share"] <= 1.0
    assert "RMSE vx" in capsys.readouterr().out
    # the figures are the pooled RMSE of the measured heading-frame velocity, the settle time left out
    cfg = VelocityEvalConfig(seconds=2.0, episodes=1, randomisation=Randomisation(**CALM),
                             commands=CommandSchedule.from_rows([{"t": 0.0, "vx": 0.3, "vy": 0.0, "yaw_rate": 0.0},
                                                                        {"t": 1.0, "vx": 0.4, "vy": 0.0,
                                                                         "yaw_rate": 0.4}]))
    report, (traj,) = evaluate_velocity(quadruped, policy, meta, cfg, progress=False, keep_trajectories=1)
    keep = scored_steps(cfg.commands, len(traj["command"]), meta.dt, 0.5)
    err = (traj["measured"] - traj["command"])[keep]
    np.testing.assert_allclose([report["vx_rmse_mps"], report["vy_rmse_mps"], report["yaw_rate_rmse_radps"]],
                               np.sqrt((err ** 2).mean(0)), rtol=1e-9)
    turn = yaw_rate_mean(traj["measured"][:, 2], meta.dt)
    assert report["before_falls"]["steps"] == (75 if report["falls"] else 0)  # 1.5 s at 50 Hz
    split = report["yaw_rate_split"]
    np.testing.assert_allclose([split["turn_rmse_radps"], split["stride_rmse_radps"]],
                               [np.sqrt(np.mean((turn - traj["command"][:, 2])[keep] ** 2)),
                                np.sqrt(np.mean((traj["measured"][:, 2] - turn)[keep] ** 2))], rtol=1e-9)
    after = report["after_change"]  # the bins share out the scored steps and their squared errors
    assert sum(after["steps"]) == report["scored_steps"]
    for a in ("vx_rmse_mps", "vy_rmse_mps", "yaw_rate_rmse_radps"):
        axis = a.replace("_rmse", "")
        pooled = sum(n * (after[axis][b] or 0.0) ** 2 for b, n in enumerate(after["steps"]))
        assert np.sqrt(pooled / report["scored_steps"]) == pytest.approx(report[a], rel=1e-9)
    if not report["falls"]:
        assert report["scored_steps"] == 75
    assert main(["eval-policy", str(path), "--task", "reference", "--episodes", "1", "--seconds", "1"]) != 0
    assert "evaluate it with --task velocity" in capsys.readouterr().err


def test_the_yaw_rate_split_separates_a_short_turn_from_a_swing_within_each_stride():
    """A body turning at 0.4 rad/s asked for 0.5, swinging +-0.3 rad/s at 2 Hz (one swing per 0.5 s window): the
    turn's part is the 0.1 rad/s shortfall, the stride's the swing's RMS (0.3 / sqrt 2), away from the series' ends."""
    dt = 0.02
    t = np.arange(500) * dt
    measured = 0.4 + 0.3 * np.sin(2 * np.pi * 2.0 * t)
    turn = yaw_rate_mean(measured, dt)
    inner = slice(25, -25)  # whole periods
    np.testing.assert_allclose(turn[inner], 0.4, atol=1e-12)
    np.testing.assert_allclose(np.sqrt(np.mean((turn - 0.5)[inner] ** 2)), 0.1, rtol=1e-9)
    np.testing.assert_allclose(np.sqrt(np.mean((measured - turn)[inner] ** 2)), 0.3 / np.sqrt(2), rtol=1e-9)
    assert yaw_rate_mean(np.full(3, 0.7), dt) == pytest.approx([0.7] * 3)  # shorter than the window: its mean


def test_the_error_is_binned_by_the_time_since_the_command_changed():
    """Commands at 0 and 4 s, 6 s at 50 Hz, the 0.5 s after the change left out: a yaw-rate error of 0.4 rad/s in
    the first second after each command (the start's first second too), 0.2 in the next, none from 2 s on; a steady
    vx error of 0.1 m/s throughout."""
    dt = 0.02
    schedule = CommandSchedule(times=np.array([0.0, 4.0]), commands=np.zeros((2, 3)))
    steps = 300
    t = np.arange(steps) * dt
    keep = scored_steps(schedule, steps, dt, 0.5)
    since = np.where(t < 4.0 - 1e-9, t, t - 4.0)
    err = np.zeros((steps, 3))
    err[:, 0] = 0.1
    err[:, 2] = np.where(since < 1.0 - 1e-9, 0.4, np.where(since < 2.0 - 1e-9, 0.2, 0.0))
    sums = after_change_sums(schedule, err, 0.5 * err[:, 2], keep, dt)
    assert sums["steps"] == [50 + 25, 50 + 50, 100 + 0]  # the start's 1 s, the change's 0.5-1 s; 1-2 s; 2-4 s
    report = aggregate([{"scored_steps": int(keep.sum()), "sq_sum": (err[keep] ** 2).sum(0).tolist(),
                         "yaw_split_sq_sum": [0.0, 0.0], "style": [], "out_of_box_steps": 0, "fell": False,
                         "fall_tail": {"steps": 0, "sq_sum": [0.0] * 3}, "after_change": sums}])
    after = report["after_change"]
    assert after["bins_s"] == [[0.0, 1.0], [1.0, 2.0], [2.0, None]] and after["steps"] == [75, 100, 100]
    np.testing.assert_allclose(after["yaw_rate_radps"], [0.4, 0.2, 0.0], atol=1e-12)
    np.testing.assert_allclose(after["turn_radps"], [0.2, 0.1, 0.0], atol=1e-12)
    np.testing.assert_allclose(after["vx_mps"], [0.1] * 3, rtol=1e-12)
    assert after["vy_mps"] == [0.0] * 3


def test_the_error_before_falls_is_reported_apart_from_the_other_steps():
    """Two episodes: one tracks within 0.1 m/s and rad/s over 100 steps, one tracks as well for 50 steps and then,
    in the 75 steps (1.5 s) before its fall, spins 2 rad/s off: that tail's share of the squared error and the RMSE
    over the other 150 steps."""
    def row(steps, tail_steps, tail_err, fell):
        sq = np.array([0.1 ** 2] * 3) * (steps - tail_steps) + np.array([0.0, 0.0, tail_err ** 2]) * tail_steps
        return {"scored_steps": steps, "sq_sum": sq.tolist(), "yaw_split_sq_sum": [0.0, 0.0], "style": [],
                "out_of_box_steps": 0,
                "fall_tail": {"steps": tail_steps, "sq_sum": [0.0, 0.0, tail_err ** 2 * tail_steps]}, "fell": fell}

    report = aggregate([row(100, 0, 0.0, False), row(125, 75, 2.0, True)])
    tails = report["before_falls"]
    assert tails["steps"] == 75 and tails["window_s"] == 1.5
    assert tails["sq_error_share"]["vx_mps"] == 0.0
    assert tails["sq_error_share"]["yaw_rate_radps"] == pytest.approx(300.0 / (300.0 + 150 * 0.01))
    assert tails["rmse_other_steps"]["yaw_rate_radps"] == pytest.approx(0.1)
    assert report["yaw_rate_rmse_radps"] == pytest.approx(np.sqrt((300.0 + 1.5) / 225))


def test_style_compares_duty_factor_and_contact_patterns_with_the_library():
    table = {"dt": 0.02, "command": np.tile([0.5, 0.0, 0.0], (100, 1)),
             "contacts": np.tile([[1, 0, 0, 1], [0, 1, 1, 0]], (50, 1)).astype(np.uint8),
             "stride_hz": np.full(100, 2.0)}
    trot = np.tile([[1, 0, 0, 1]] * 5 + [[0, 1, 1, 0]] * 5, (10, 1)).astype(bool)  # 5 Hz... 10 frames a stride
    pronk = np.tile([[1, 1, 1, 1]] * 5 + [[0, 0, 0, 0]] * 5, (10, 1)).astype(bool)
    rows = style_segments(table, [{"command": [0.5, 0, 0], "contacts": trot, "dt": 0.02},
                                  {"command": [0.5, 0, 0], "contacts": pronk, "dt": 0.02}])
    assert rows[0]["pattern_match"] == 1.0 and rows[1]["pattern_match"] == 0.0
    assert rows[0]["duty_factor_error"] == pytest.approx(0.0) and rows[0]["stride_hz"] == pytest.approx(5.0)
    assert rows[0]["library_stride_hz"] == 2.0


def test_gait_windows_read_the_rollouts_feet_as_the_librarys_gait(trained, quadruped):
    """1 s windows at gait speeds are read by the foot-phase classifier: a trot reads as the library's gait (its box
    knows none: the robot's default, trot), a pace does not; commands below the gait speed are not judged."""
    from akd_core.learn.velocity_eval import GAIT_WINDOW_S, expected_gait, gait_windows
    from akd_core.motion.gait import generate_gait
    from akd_core.motion.prompt import spec_from_prompt

    _, _, meta, _ = trained
    box = CommandBox.from_dict(meta.command["box"])
    legs = find_legs(quadruped)
    seen = {}
    for prompt in ("a dog trotting forward at 0.4 m/s", "a dog pacing forward at 0.4 m/s"):
        spec, _ = spec_from_prompt(prompt, quadruped, legs)
        motion = generate_gait(quadruped, spec, duration=3.02, fps=50.0, legs=legs, prompt=prompt)
        traj = {"root_pos": motion.root_pos, "root_quat": motion.root_quat, "joint_pos": motion.joint_pos,
                "command": np.zeros((len(motion.root_pos) - 1, 3))}
        schedule = CommandSchedule(times=np.array([0.0, 2.0]), commands=np.array([[0.4, 0.0, 0.0], [0.1, 0, 0]]))
        windows = gait_windows(quadruped, meta, traj, schedule, box, 0.02, 0.5)
        assert [w["t"] for w in windows] == [0.5]  # 1.5 s steady at 0.4 m/s; the creeping 0.1 m/s is not judged
        assert windows[0]["expected"] == "trot" and GAIT_WINDOW_S == 1.0
        seen[spec.pattern] = windows[0]["seen"]
    assert seen == {"trot": "trot", "pace": "pace"}
    walk_trot = CommandBox(vx=(-0.5, 1.0), vy=(-0.3, 0.3), yaw_rate=(-1, 1), gaits=(("walk", 0.3), ("trot", 1.0)))
    assert [expected_gait(meta, walk_trot, v) for v in (0.2, 0.5, 1.4)] == ["walk", "trot", "trot"]
    assert CommandBox.from_dict(walk_trot.to_dict()).gaits == walk_trot.gaits


def test_onnx_export_carries_the_command_slot_and_matches_torch(trained, tmp_path, capsys):
    path, policy, meta, _ = trained
    out = tmp_path / "v.onnx"
    assert main(["export-policy", str(path), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "the command vx, vy, yaw_rate" in printed and f"the {HISTORY} steps before at obs[" in printed
    from akd_core.learn.onnx_export import OnnxPolicy

    onnx_policy = OnnxPolicy(out)
    assert onnx_policy.task == "velocity" and onnx_policy.clips == []
    assert onnx_policy.command["indices"] == meta.command["indices"]
    assert onnx_policy.command["units"] == ["m/s", "m/s", "rad/s"] and onnx_policy.command["frame"] == "heading"
    assert onnx_policy.meta["reference_offsets"] == []
    assert onnx_policy.layout[-1] == ("history", HISTORY * (3 * len(meta.joint_names) + 6))
    assert onnx_policy.meta["history"]["steps"] == HISTORY and onnx_policy.meta["history"]["terms"][0] == "joint_pos"
    obs = np.random.default_rng(1).normal(size=(16, onnx_policy.obs_dim)).astype(np.float32)
    obs[:, slice(*meta.command["indices"])] = [0.4, 0.0, 0.2]
    with torch.no_grad():
        np.testing.assert_allclose(onnx_policy.act(obs), policy.act(obs), atol=1e-5)


def test_library_feedforward_blends_frames_by_command_and_phase_and_stands_at_zero(library, quadruped):
    dataset, _, _ = load_library(library)
    frames = LibraryFrames.from_dataset(dataset, quadruped)
    ff = library_feedforward(dataset, frames)
    j = quadruped.num_dofs
    slot = observation_slices(velocity_observation_layout(j))

    def obs_at(command, phase):
        obs = np.zeros((len(phase), 3 * j + 11), np.float32)
        obs[:, slot["command"]] = command
        obs[:, slot["clock"]] = np.stack([np.sin(phase), np.cos(phase)], -1)
        return torch.as_tensor(obs)

    with torch.no_grad():
        # a moving library frame's own command and phase: the frames near it in command and phase
        row = int(np.flatnonzero(np.abs(frames.command).max(1) > 0.3)[40])
        weights = ff.weights(obs_at(frames.command[row], np.array([frames.phase[row]])))[0].numpy()
        assert np.abs(weights @ frames.command - frames.command[row]).max() < 0.1
        assert abs(np.angle(weights @ np.exp(1j * (frames.phase - frames.phase[row])))) < 0.2
        assert weights[np.abs(np.angle(np.exp(1j * (frames.phase - frames.phase[row])))) < 0.6].sum() > 0.9
        # a zero command: the library's stands whatever the clock says
        out = ff(obs_at(np.zeros(3), np.linspace(0, 6, 7))).numpy()
        np.testing.assert_allclose(out, out[:1].repeat(7, 0), atol=1e-5)
        weights = ff.weights(obs_at(np.zeros(3), np.array([2.0])))[0].numpy()
        assert weights @ np.abs(frames.command).max(1) < 0.03  # the stands (and the first frames of the ramps)
        # a small change of the command moves the feedforward a little (blending, no jump)
        a = ff(obs_at([0.20, 0.0, 0.0], np.array([1.0]))).numpy()
        b = ff(obs_at([0.21, 0.0, 0.0], np.array([1.0]))).numpy()
        assert np.abs(a - b).max() < 0.02
        # a batch longer than a chunk (the residual's BC targets, every library frame) is weighed chunk by chunk,
        # each row as it is alone
        rows = np.random.default_rng(0).integers(0, len(frames.command), FF_CHUNK + 37)
        batch = obs_at(frames.command[rows], frames.phase[rows])
        np.testing.assert_allclose(ff(batch).numpy(), (ff.weights(batch) @ ff.targets).numpy(), atol=1e-6)
    # a policy with zero residual plays the feedforward
    policy = TrackingPolicy(3 * j + 11, j, (16,), "residual", task="velocity", feedforward=ff)
    for m in policy.net:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.zeros_(m.weight)
            torch.nn.init.zeros_(m.bias)
    obs = obs_at([0.3, 0.0, 0.1], np.array([0.5, 2.0]))
    with torch.no_grad():
        np.testing.assert_allclose(policy(obs).numpy(), ff(obs).numpy(), atol=1e-6)


def test_learning_loops_flush_subnormal_floats_to_zero():
    """The feedforward's softmax underflows through the subnormal range, ~100 cycles an operand unless flushed
    (akd_core.io.threads.flush_subnormals, called by train_velocity and run_ppo)."""
    from akd_core.io.threads import flush_subnormals

    flush_subnormals()
    tiny = torch.tensor([1e-30]) * torch.tensor([1e-10])  # 1e-40: a float32 subnormal
    assert tiny.item() == 0.0


def test_residual_zero_start_reports_the_error_of_its_own_targets(library, quadruped):
    """The bare feedforward's error, computed once from the library frames, is what the policy sends."""
    cfg = VelocityConfig(action="residual", ppo=PPOConfig(iterations=0, **TINY_PPO))
    policy, _, metrics = train_velocity(library, quadruped, cfg, progress=False)
    dataset, _, _ = load_library(library)
    obs, targets = velocity_samples(dataset, LibraryFrames.from_dataset(dataset, quadruped))
    rmse = float(np.sqrt(np.mean((policy.act(obs) - targets) ** 2)))
    assert metrics["bc"]["method"] == "feedforward" and rmse > 0.0
    assert metrics["bc"]["target_rmse_rad"] == pytest.approx(rmse, rel=1e-5)


def test_the_residual_rate_is_the_change_of_the_residual_alone_and_starts_at_zero(library, quadruped):
    """The PD-target rate holds the library gait's own motion; ``residual_rate`` only the policy's residual's."""
    cfg = VelocityConfig(action="residual", ppo=PPOConfig(iterations=0, **TINY_PPO))
    policy, _, _ = train_velocity(library, quadruped, cfg, progress=False)
    env, _ = two_worlds(library, quadruped, imitation="none")
    raw, _ = env.observations(noisy=False)
    actions = [torch.full((2, quadruped.num_dofs), 0.3), torch.full((2, quadruped.num_dofs), -0.2)]
    rates, residuals = [], []
    for action in actions:
        targets = velocity_targets(policy, raw, action, env)
        np.testing.assert_allclose(targets, policy.decode(torch.as_tensor(raw, dtype=torch.float32), action).numpy(),
                                   atol=1e-6)
        residuals.append(env.pending_residual.copy())
        _, fell, timeout, terms = env.step(targets)
        assert not (fell | timeout).any()
        rates.append(terms["residual_rate"])
        raw, _ = env.observations(noisy=False)
    bound = policy.feedforward.bound.numpy()
    np.testing.assert_allclose(residuals[0], np.broadcast_to(bound * np.tanh(0.3), (2, quadruped.num_dofs)),
                               rtol=1e-5)
    np.testing.assert_allclose(rates[0], 0.0)  # an episode's first step: nothing to change from
    expected = np.mean(((bound * (np.tanh(-0.2) - np.tanh(0.3))) / ACTION_RATE_SCALE) ** 2)
    np.testing.assert_allclose(rates[1], [expected, expected], rtol=1e-5)
    assert expected > 0.1
    env.reset_world(1)  # a new episode starts from zero change again
    env.note_residual(residuals[0])
    _, _, _, terms = env.step(velocity_targets(policy, env.observations(noisy=False)[0], actions[0]))
    assert terms["residual_rate"][1] == 0.0 and terms["residual_rate"][0] == pytest.approx(expected, rel=1e-5)
    _, _, _, terms = env.step(velocity_targets(policy, env.observations(noisy=False)[0], actions[0]))
    assert "residual_rate" not in terms  # nothing noted: no term


def test_an_entropy_bonus_keeps_the_exploration_std_up(library, quadruped):
    """Without one, PPO's std only shrinks over a run (0.10 -> 0.03 in 2000 iterations of a1's residual)."""
    stds = {}
    for coef in (0.0, 0.5):
        cfg = VelocityConfig(action="residual", ppo=PPOConfig(iterations=3, entropy=coef, **TINY_PPO))
        _, _, metrics = train_velocity(library, quadruped, cfg, progress=False)
        stds[coef] = metrics["history"][-1]["action_std"]
    assert stds[0.5] > stds[0.0]
    with pytest.raises(ConfigError, match="--entropy"):
        PPOConfig(entropy=-0.1).check()


def test_the_command_line_trains_velocity_policies_with_the_measured_recipe(library, monkeypatch, tmp_path, capsys):
    """--task velocity: the residual action, 2000 iterations, the entropy bonus and the narrow yaw kernel, no
    steering; reference-tracking PPO keeps 1500 iterations and no bonus. (The trainers are stopped at their config.)"""
    seen = {}

    def stop(name):
        def capture(*args, **kwargs):
            seen[name] = args[2] if len(args) > 2 else kwargs.get("cfg")
            raise ConfigError("stopped at the config")
        return capture

    monkeypatch.setattr("akd_core.cli.train_policy.train_velocity", stop("velocity"))
    monkeypatch.setattr("akd_core.cli.train_policy.train_ppo", stop("ppo"))
    assert main(["train-policy", str(library), "--task", "velocity", "-o", str(tmp_path / "v.pt")]) != 0
    assert main(["train-policy", str(library), "--robot", "quadruped", "--method", "ppo",
                 "-o", str(tmp_path / "r.pt")]) != 0
    capsys.readouterr()
    velocity, reference = seen["velocity"], seen["ppo"]
    assert velocity.action == "residual" and velocity.steer is None and velocity.ppo.init_std == 0.1
    assert velocity.ppo.iterations == 2000 and velocity.ppo.entropy == 0.0025
    assert velocity.weights["yaw_rate_fine"] == 0.75 and velocity.weights["lin_vel_fine"] == 0.0
    # terms added after checkpoints were written leave no trace at weight 0, so those checkpoints resume
    assert not {"residual_rate", "lin_vel_fine"} & set(velocity.to_dict()["weights"])
    velocity.weights["lin_vel_fine"] = 0.5
    assert velocity.to_dict()["weights"]["lin_vel_fine"] == 0.5
    assert reference.iterations == 1500 and reference.entropy == 0.0
    assert main(["train-policy", str(library), "--task", "velocity", "--ppo-iterations", "7", "--entropy", "0",
                 "-o", str(tmp_path / "v.pt")]) != 0
    assert seen["velocity"].ppo.iterations == 7 and seen["velocity"].ppo.entropy == 0.0


@pytest.fixture(scope="module")
def residual(library, quadruped, tmp_path_factory):
    """A residual policy: the library feedforward + 2 PPO iterations (AMP), checkpointed."""
    out = tmp_path_factory.mktemp("velocity_residual")
    cfg = VelocityConfig(action="residual", ppo=PPOConfig(iterations=2, **TINY_PPO))
    policy, meta, metrics = train_velocity(library, quadruped, cfg, checkpoint=out / "r.pt.ckpt", progress=False)
    save_policy(out / "r.pt", policy, meta)
    return out / "r.pt", policy, meta, metrics


def test_residual_policy_trains_saves_evaluates_and_exports_with_its_library_table(residual, quadruped, tmp_path,
                                                                                    capsys):
    path, policy, meta, metrics = residual
    assert meta.action_mode == "residual" and metrics["action"] == "residual" and len(metrics["history"]) == 2
    assert metrics["bc"]["method"] == "feedforward"
    loaded, _ = load_policy(path)
    assert loaded.action_mode == "residual" and loaded.feedforward.keys.shape == policy.feedforward.keys.shape
    obs = np.random.default_rng(2).normal(size=(8, sum(s for _, s in meta.obs_layout))).astype(np.float32)
    np.testing.assert_allclose(loaded.act(obs), policy.act(obs))
    with torch.no_grad():  # the residual is bounded
        residual_rad = loaded(torch.as_tensor(obs)) - loaded.feedforward(torch.as_tensor(obs))
    assert float(residual_rad.abs().max()) <= float(loaded.feedforward.bound.max()) + 1e-6
    # closed loop at the evaluation's defaults (short)
    cfg = VelocityEvalConfig(seconds=1.0, episodes=1, randomisation=Randomisation(**CALM))
    report, _ = evaluate_velocity(quadruped, loaded, meta, cfg, progress=False)
    assert report["episodes"] == 1 and report["vx_rmse_mps"] is not None
    # ONNX: the table travels inside the graph; onnxruntime gives the torch targets
    out = tmp_path / "r.onnx"
    assert main(["export-policy", str(path), "-o", str(out)]) == 0
    capsys.readouterr()
    from akd_core.learn.onnx_export import OnnxPolicy

    onnx_policy = OnnxPolicy(out)
    assert onnx_policy.meta["action_mode"] == "residual" and "softmax" in onnx_policy.meta["feedforward"]["rule"]
    obs[:, slice(*meta.command["indices"])] = [[0.4, 0.0, 0.2]] * 4 + [[0.0, 0.0, 0.0]] * 4
    phase = np.linspace(0.0, 6.0, 8)
    obs[:, slice(*meta.command["clock"]["indices"])] = np.stack([np.sin(phase), np.cos(phase)], -1)
    np.testing.assert_allclose(onnx_policy.act(obs), loaded.act(obs), atol=1e-5)


def test_a_steering_policy_queries_the_library_at_the_command_it_shifts(library, quadruped, tmp_path, capsys):
    """--steer: the action's last three components shift the command the feedforward is read at (the observation's
    command slot unchanged); zero steering plays the plain feedforward. Trained (2 PPO iterations), saved, loaded
    and exported, the ONNX graph gives the torch targets."""
    steer = (0.3, 0.2, 0.4)
    cfg = VelocityConfig(action="residual", steer=steer, ppo=PPOConfig(iterations=2, **TINY_PPO))
    policy, meta, metrics = train_velocity(library, quadruped, cfg, checkpoint=tmp_path / "s.pt.ckpt", progress=False)
    j = quadruped.num_dofs
    assert policy.action_dim == j + 3 and metrics["config"]["steer"] == list(steer)
    ff = policy.feedforward
    np.testing.assert_allclose(ff.steer_bound.numpy(), steer, rtol=1e-6)
    slot = observation_slices(meta.obs_layout)
    obs = np.zeros((6, sum(s for _, s in meta.obs_layout)), np.float32)
    obs[:, slot["command"]] = [[0.3, 0.0, 0.0]] * 3 + [[0.2, 0.1, -0.3]] * 3
    phase = np.linspace(0.0, 5.0, 6)
    obs[:, slot["clock"]] = np.stack([np.sin(phase), np.cos(phase)], -1)
    obs_t = torch.as_tensor(obs)
    u = torch.tensor([[0.0, 0.0, 0.0], [1.0, -0.5, 0.3], [-2.0, 0.7, 1.5]] * 2)
    action = torch.cat([torch.zeros(6, j), u], 1)
    with torch.no_grad():
        got = policy.decode(obs_t, action).numpy()
        shifted = obs.copy()
        shifted[:, slot["command"]] += np.asarray(steer, np.float32) * np.tanh(u.numpy())
        np.testing.assert_allclose(got, ff(torch.as_tensor(shifted)).numpy(), atol=1e-5)  # the shifted command's
        np.testing.assert_allclose(got[[0, 3]], ff(obs_t[[0, 3]]).numpy(), atol=1e-6)  # zero steering: the plain one
        assert np.abs(got[1] - got[0]).max() > 1e-3  # steering changes the targets
    save_policy(tmp_path / "s.pt", policy, meta)
    loaded, _ = load_policy(tmp_path / "s.pt")
    assert loaded.action_dim == j + 3 and loaded.feedforward.steer_dims == 3
    rng = np.random.default_rng(3)
    obs[:, :slot["command"].start] = rng.normal(size=(6, slot["command"].start)).astype(np.float32) * 0.1
    np.testing.assert_allclose(loaded.act(obs), policy.act(obs))
    out = tmp_path / "s.onnx"
    assert main(["export-policy", str(tmp_path / "s.pt"), "-o", str(out)]) == 0
    capsys.readouterr()
    from akd_core.learn.onnx_export import OnnxPolicy

    onnx_policy = OnnxPolicy(out)
    assert onnx_policy.meta["feedforward"]["steer_bound"] == pytest.approx(list(steer))
    np.testing.assert_allclose(onnx_policy.act(obs), loaded.act(obs), atol=1e-5)
    for bad in (dict(action="absolute", steer=steer), dict(action="residual", steer=(0.3, -0.1, 0.2)),
                dict(action="residual", steer=(0.0, 0.0, 0.0))):
        with pytest.raises(ConfigError, match="--steer"):
            VelocityConfig(**bad).check()
    # the defaults: the residual action, no steering
    assert VelocityConfig().action == "residual" and VelocityConfig().steer is None
    assert parse_steer(None) is None and parse_steer("0.1,0,0.2") == (0.1, 0.0, 0.2)
    for text in ("0.3,0.3", "0.3,x,0.4"):  # the command line names the form it takes
        assert main(["train-policy", str(library), "--task", "velocity", "--action", "residual", "--steer", text,
                     "-o", str(tmp_path / "bad.pt")]) != 0
        assert "--steer takes VX,VY,YAW" in capsys.readouterr().err


# ----------------------------------------------------------------------------- ROS 2: /cmd_vel
TWIST_PHASES = ((3.0, (0.3, 0.0, 0.0)), (2.0, (5.0, 0.0, 2.0)))  # seconds, Twist (vx, vy, yaw rate); then silence
SILENCE_S = 2.5


def twist_driver(out: Path, phases, silence_s: float, timeout: float) -> None:
    """Publish /cmd_vel phases at 20 Hz once the policy's first command is seen, then stop publishing; record
    /akd_policy/command and /odom with steady arrival times."""
    import rclpy
    from geometry_msgs.msg import Twist, TwistStamped
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    node = Node("twist_driver", context=context)
    commands, odom = [], []
    node.create_subscription(TwistStamped, "/akd_policy/command", lambda m: commands.append(
        {"t": time.monotonic(), "command": [m.twist.linear.x, m.twist.linear.y, m.twist.angular.z]}), 100)
    node.create_subscription(Odometry, "/odom", lambda m: odom.append(
        {"t": time.monotonic(), "stamp_ns": m.header.stamp.sec * 10**9 + m.header.stamp.nanosec,
         "position": [m.pose.pose.position.x, m.pose.pose.position.y, m.pose.pose.position.z],
         "linear": [m.twist.twist.linear.x, m.twist.twist.linear.y, m.twist.twist.linear.z],
         "angular": [m.twist.twist.angular.x, m.twist.twist.angular.y, m.twist.twist.angular.z]}), 100)
    pub = node.create_publisher(Twist, "/cmd_vel", 10)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    end = time.monotonic() + timeout
    while not commands and time.monotonic() < end:
        executor.spin_once(timeout_sec=0.02)
    sent = []
    start = time.monotonic()
    for seconds, (vx, vy, wz) in phases:
        phase_end = time.monotonic() + seconds
        while time.monotonic() < phase_end:
            msg = Twist()
            msg.linear.x, msg.linear.y, msg.angular.z = float(vx), float(vy), float(wz)
            pub.publish(msg)
            sent.append({"t": time.monotonic(), "twist": [vx, vy, wz]})
            tick = time.monotonic() + 0.05
            while time.monotonic() < tick:
                executor.spin_once(timeout_sec=0.01)
    silence_end = time.monotonic() + silence_s
    while time.monotonic() < silence_end:
        executor.spin_once(timeout_sec=0.02)
    node.destroy_node()
    rclpy.shutdown(context=context)
    out.write_text(json.dumps({"start": start, "sent": sent, "commands": commands, "odom": odom}))


def _ros_run(tmp_path: Path, onnx: Path, seconds: float):
    from tests.ros_runs import ros_env, start

    env = ros_env(tmp_path)
    out = tmp_path / "driver.json"
    # the driver first: it waits for the policy's first command, so a driver that imports slowly on a loaded machine
    # cannot miss the start of the simulator's fixed-length run
    driver = start(["-m", "tests.test_velocity_policy", "--twist-driver", str(out), "--timeout", "90"], env,
                   tmp_path / "driver.log")
    sim = start(["-m", "akd_ros.sim", "--ros-args", "-p", "robot:=quadruped", "-p", f"policy:={onnx}",
                 "-p", f"duration:={seconds}", "-p", "wait_for_subscribers:=1", "-p", "wait_timeout:=60.0"],
                env, tmp_path / "sim.log")
    policy = start(["-m", "akd_ros.policy_node", "--ros-args", "-p", f"policy:={onnx}", "-p", "cmd_vel:=true",
                    "-p", "use_sim_time:=true", "-p", f"duration:={seconds - 0.1}"], env, tmp_path / "policy.log")
    for proc, log, limit in ((driver, "driver.log", 150), (sim, "sim.log", 60), (policy, "policy.log", 10)):
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            if proc is policy:  # its duration runs on the simulator's clock from its own first state, which on a
                # loaded machine comes late: the clock stops before it ends, and Ctrl-C ends it with its summary
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=20)
                    continue
                except subprocess.TimeoutExpired:
                    pass
            proc.kill()
            proc.wait()
            pytest.fail(f"{proc.args} did not finish:\n{(tmp_path / log).read_text()[-3000:]}")
    assert out.exists(), (tmp_path / "driver.log").read_text()
    return json.loads(out.read_text()), (tmp_path / "sim.log").read_text(), (tmp_path / "policy.log").read_text()


def _phase_windows(rec, margin: float = 0.3):
    """Steady-time windows (lo, hi) of each Twist phase and of the silence after the watchdog's 0.5 s."""
    t0, windows = rec["start"], []
    for seconds, twist in TWIST_PHASES:
        windows.append((t0 + margin, t0 + seconds - margin, np.array(twist)))
        t0 += seconds
    last = rec["sent"][-1]["t"]
    windows.append((last + 0.5 + margin, last + SILENCE_S - margin, np.zeros(3)))
    return windows, last


@pytest.fixture(scope="module")
def onnx_policy(trained, tmp_path_factory):
    from akd_core.learn.onnx_export import export_onnx

    _, policy, meta, _ = trained
    return export_onnx(policy, meta, tmp_path_factory.mktemp("velocity_onnx") / "v.onnx")


def test_cmd_vel_reaches_the_policy_clipped_and_the_watchdog_zeroes_it(tmp_path, onnx_policy, trained):
    """The plumbing, with the tiny policy (2 PPO iterations: it cannot yet walk where it is told): a changing Twist
    stream in another process arrives at the policy node, is clipped into the trained box, and 0.5 s after the last
    Twist the command is zero; the simulator runs the whole time on the policy's targets."""
    pytest.importorskip("rclpy", reason="the ROS 2 wheels are not installed (pip install -e '.[ros]')")
    _, _, meta, _ = trained
    box = CommandBox.from_dict(meta.command["box"])
    seconds = sum(s for s, _ in TWIST_PHASES) + SILENCE_S + 5.0  # the driver starts once the policy runs
    rec, sim_log, policy_log = _ros_run(tmp_path, onnx_policy, seconds)
    windows, last = _phase_windows(rec)
    times = np.array([c["t"] for c in rec["commands"]])
    values = np.array([c["command"] for c in rec["commands"]])
    for lo, hi, twist in windows:
        inside = (times > lo) & (times < hi)
        assert inside.sum() > 5, (lo - rec["start"], hi - rec["start"], policy_log[-2000:])
        np.testing.assert_allclose(values[inside], np.tile(box.clip(twist), (inside.sum(), 1)), atol=1e-6)
    assert np.abs(values[times > last + 0.5 + 0.3]).max() == 0.0  # the watchdog zeroed it
    assert "Twist messages received" in policy_log and "watchdog zeroed the command" in policy_log
    # the simulator ran in real time on the policy's targets: most periods got a new one (on a loaded machine the
    # node misses some, and without lockstep a command arriving in the same period as the next can be dropped by the
    # simulator's step-rate check)
    match = re.search(r"simulated ([\d.]+) s: (\d+) commands applied, (\d+) dropped", sim_log)
    assert match and int(match[2]) > 0.5 * float(match[1]) / meta.dt, sim_log[-2000:]


@pytest.mark.slow
def test_a_trained_policy_follows_cmd_vel_and_stands_when_it_stops(tmp_path):
    """With a trained velocity policy (AKD_VELOCITY_POLICY=/path/policy.onnx): the simulated base velocity follows
    the Twist stream and the robot stays up; after the watchdog it stands still."""
    import os

    onnx = os.environ.get("AKD_VELOCITY_POLICY")
    if not onnx:
        pytest.skip("set AKD_VELOCITY_POLICY to a trained velocity policy's ONNX export")
    pytest.importorskip("rclpy", reason="the ROS 2 wheels are not installed (pip install -e '.[ros]')")
    from akd_core.learn.onnx_export import OnnxPolicy

    box = CommandBox.from_dict(OnnxPolicy(onnx).command["box"])
    seconds = sum(s for s, _ in TWIST_PHASES) + SILENCE_S + 5.0
    rec, sim_log, _ = _ros_run(tmp_path, Path(onnx), seconds)
    assert "fell: no" in sim_log, sim_log[-2000:]
    windows, _ = _phase_windows(rec, margin=0.5)  # the 2 s phase: its second half-second to its last
    t = np.array([o["t"] for o in rec["odom"]])
    linear = np.array([o["linear"] for o in rec["odom"]])  # base frame
    yaw_rate = np.array([o["angular"][2] for o in rec["odom"]])
    for lo, hi, twist in windows:
        inside = (t > lo) & (t < hi)
        assert inside.sum() >= 25, (lo, hi, twist)  # at least 0.5 s of /odom at 50 Hz in every window
        want = box.clip(twist)
        assert abs(linear[inside, 0].mean() - want[0]) < 0.15, (twist, linear[inside, 0].mean())
        assert abs(yaw_rate[inside].mean() - want[2]) < 0.3, (twist, yaw_rate[inside].mean())


# ----------------------------------------------------------------------------- bench/bench_soak.py (issue 47, item 5)
def _bench_soak():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "bench" / "bench_soak.py"
    spec = importlib.util.spec_from_file_location("bench_soak", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def _soak_window(t_s, rate_hz=50.0, sim_mb=300.0, policy_mb=250.0, fell=False):
    axes = {"vx": 0.3, "vy": 0.0, "yaw_rate": 0.0}
    return {"t_s": t_s, "window_s": 10.0, "rate_hz": rate_hz, "odom_hz": rate_hz,
            "rss_mb": {"sim": sim_mb, "policy": policy_mb}, "cmd": axes, "measured": axes, "used": axes,
            "settled_rmse": {"vx": 0.0, "yaw_rate": 0.0}, "min_height_m": 0.3, "max_tilt_deg": 2.0, "fell": fell}


def test_soak_verdict_compares_minute_two_with_the_last_and_fails_on_rate_memory_or_a_fall():
    soak, _ = _bench_soak()
    assert soak.spans(1800.0) == ((60.0, 120.0), (1740.0, 1800.0))  # minute 2 vs the last minute
    assert soak.spans(30.0) == ((10.0, 20.0), (20.0, 30.0))  # short runs: thirds
    times = np.arange(10.0, 301.0, 10.0)  # 5 min of 10 s windows
    flat = [_soak_window(t, sim_mb=300.0 + (50.0 if t <= 60 else 0.0)) for t in times]  # warm-up growth ignored
    v = soak.verdict(flat, 50.0, 300.0, sim_fell=False)
    assert v["pass"] and v["rss"]["nodes"]["sim"]["growth_pct"] == pytest.approx(0.0)
    leaking = [_soak_window(t, policy_mb=250.0 * (1.0 + 0.06 * (t > 240))) for t in times]
    v = soak.verdict(leaking, 50.0, 300.0, sim_fell=False)
    assert not v["pass"] and not v["rss"]["pass"] and v["rss"]["nodes"]["policy"]["growth_pct"] == pytest.approx(6.0)
    slow = [_soak_window(t, rate_hz=47.0 if t == 150 else 50.0) for t in times]  # one window under 95 %
    v = soak.verdict(slow, 50.0, 300.0, sim_fell=False)
    assert not v["pass"] and not v["rate"]["pass"] and v["rate"]["min_hz"] == 47.0 and v["rss"]["pass"]
    assert not soak.verdict([_soak_window(t, fell=t == 290) for t in times], 50.0, 300.0, False)["fall"]["pass"]
    assert not soak.verdict(flat, 50.0, 300.0, sim_fell=True)["pass"]  # the simulator's own log says it fell
    rows = soak.per_minute(flat)
    assert [r["minute"] for r in rows] == [1, 2, 3, 4, 5] and rows[0]["windows"] == 6
    assert rows[0]["rss_sim_mb"] == pytest.approx(350.0) and rows[1]["rss_sim_mb"] == pytest.approx(300.0)
    commands = soak.command_schedule(CommandBox.from_dict({"vx_mps": [-0.5, 1.0], "vy_mps": [-0.3, 0.3],
                                                            "yaw_rate_radps": [-1.0, 1.0], "speed_max_mps": 0.9}),
                                     0, 12)
    assert np.all(commands[[5, 11]] == 0.0) and np.all(np.abs(commands[:5]).sum(1) > 0)
    assert np.hypot(commands[:, 0], commands[:, 1]).max() <= 0.9 + 1e-9


def test_soak_bench_cmd_vel_short_run_reports_rate_memory_and_the_commanded_velocity(tmp_path, onnx_policy, trained):
    """bench/bench_soak.py for 18 s with the tiny policy (it may fall: the verdict is not asserted, its figures
    are): three processes, the control rate near nominal, RSS per node, and the drawn commands reached the policy."""
    pytest.importorskip("rclpy", reason="the ROS 2 wheels are not installed (pip install -e '.[ros]')")
    from tests.ros_runs import ros_env

    _, _, meta, _ = trained
    _, script = _bench_soak()
    out = tmp_path / "soak.json"
    domain = ros_env(tmp_path)["ROS_DOMAIN_ID"]  # one of the tests' domains, not the bench's default
    done = subprocess.run([sys.executable, str(script), str(onnx_policy), "--minutes", "0.3", "--sample", "3",
                           "--every", "3", "--seed", "1", "--domain", domain, "--logs", str(tmp_path / "logs"),
                           "--json", str(out)], capture_output=True, text=True, timeout=150)
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: a verdict failed; 2 / a traceback: broken
    rec = json.loads(out.read_text())
    assert rec["nominal_hz"] == pytest.approx(1.0 / meta.dt) and rec["robot"] == "quadruped"
    assert len(rec["windows"]) == 6 and rec["per_minute"][0]["windows"] == 6
    for w in rec["windows"]:
        assert isinstance(w["rate_hz"], float) and isinstance(w["odom_hz"], float)
        assert all(isinstance(w["rss_mb"][n], float) and w["rss_mb"][n] > 20.0 for n in ("sim", "policy"))
    assert min(w["rate_hz"] for w in rec["windows"]) > 0.5 * rec["nominal_hz"], done.stdout
    for name in ("rate", "rss", "fall"):
        assert isinstance(rec["verdict"][name]["pass"], bool)
    assert set(rec["verdict"]["rss"]["nodes"]) == {"sim", "policy"}
    assert rec["verdict"]["pass"] == (done.returncode == 0)
    # the drawn commands were sent and the policy node used them (clipped into the box; the 6th is zero)
    cmd = np.array([w["cmd"]["vx"] for w in rec["windows"]])
    used = np.array([w["used"]["vx"] for w in rec["windows"]])
    assert np.abs(cmd[:5]).max() > 0.05 and abs(cmd[5]) < 1e-9
    np.testing.assert_allclose(used, cmd, atol=0.08)
    assert rec["policy_node"]["twists"] > 100 and rec["sim"]["applied"] > 0.5 * 18.0 * rec["nominal_hz"]
    assert "verdict: " in done.stdout and "control rate: min" in done.stdout


def _driver_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.test_velocity_policy")
    parser.add_argument("--twist-driver", type=Path, required=True, help="JSON to write")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    twist_driver(args.twist_driver, TWIST_PHASES, SILENCE_S, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(_driver_main(sys.argv[1:]))
