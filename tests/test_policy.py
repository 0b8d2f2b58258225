"""Behaviour cloning from an exported HDF5 dataset and its closed-loop MuJoCo evaluation.

Fast tests use small datasets made in MuJoCo itself (a quadruped stepping in place under sinusoidal PD targets),
so the data's transitions are exactly the evaluation environment's. The slow test runs the real pipeline
(gait -> Newton tracking -> export) on several trot clips and asserts the policy walks for 10 s.
"""

from __future__ import annotations

import argparse
import json
import math

import h5py
import numpy as np
import pytest
import torch

from akd_core.cli.policy import add_train_arguments, run_train
from akd_core.io.errors import AKDError, ConfigError, MotionError
from akd_core.learn import policy as P
from akd_core.model.load import load_robot
from akd_core.model.robot import load_urdf
from akd_core.model.skeletons import standing_height
from akd_core.motion.clip import TrackedMotion
from akd_core.physics.engines.base import BodyState
from akd_core.physics.params import default_physics
from tests.conftest import example_robot_urdf

DT = 0.02


@pytest.fixture(scope="module")
def quadruped():
    return load_robot("quadruped")


@pytest.fixture(scope="module")
def gains(quadruped):
    physics = default_physics(quadruped)
    return physics.kp, physics.kd


def stepping_targets(robot, seconds: float, freq: float, amp: float, phase: float) -> np.ndarray:
    """(T, J) PD targets: rest pose, knees of diagonal leg pairs flexing alternately at ``freq`` Hz."""
    n = int(round(seconds / DT)) + 1
    t = np.arange(n) * DT
    targets = np.tile(robot.default_joint_pos(), (n, 1))
    for leg, sign in (("front_left", 1), ("hind_right", 1), ("front_right", -1), ("hind_left", -1)):
        flex = -1.0 if leg.startswith("front") else 1.0  # front knees flex negative, hind positive
        targets[:, robot.joint_names.index(f"{leg}_knee")] += flex * amp * np.maximum(
            0.0, sign * np.sin(2 * np.pi * freq * t + phase))
    return targets


def mujoco_demo(robot, kp, kd, targets: np.ndarray) -> dict[str, np.ndarray]:
    """Roll PD targets (T, J) out in the policy's MuJoCo env from standing; states (T, .) + actions (T, J)."""
    env = P.MujocoEnv(robot, kp, kd, DT, P.default_physics(robot, DT))
    state = env.reset(targets[0], np.zeros(robot.num_dofs), np.array([0.0, 0.0, standing_height("quadruped")]),
                      np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(3), np.zeros(3), targets[0])
    states = [state] + [env.step(target) for target in targets[1:]]
    return {**{k: np.array([s[k] for s in states]) for k in state}, "actions": targets}


def write_hdf5(path, robot, kp, kd, demos: list[dict[str, np.ndarray]]) -> None:
    """The robomimic / Isaac Lab layout of `akd export --format hdf5` (docs/formats.md)."""
    env_args = {"env_name": "akd", "type": 2, "robot": robot.name, "fps": 1.0 / DT,
                "joint_names": robot.joint_names, "kp": np.asarray(kp).tolist(), "kd": np.asarray(kd).tolist()}
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps(env_args)
        data.attrs["total"] = sum(len(d["actions"]) for d in demos)
        for i, demo in enumerate(demos):
            group = data.create_group(f"demo_{i}")
            group.attrs["num_samples"] = len(demo["actions"])
            group.create_dataset("actions", data=demo["actions"].astype(np.float32))
            for key in P.OBS_KEYS:
                group.create_dataset(f"obs/{key}", data=demo[key].astype(np.float32))


@pytest.fixture(scope="module")
def stepping_dataset(tmp_path_factory, quadruped, gains):
    """Three 3 s stepping demos (2 Hz, phases 0 / 2 / 4 rad, amplitudes 0.5-0.7 rad) in one HDF5."""
    kp, kd = gains
    demos = [mujoco_demo(quadruped, kp, kd, stepping_targets(quadruped, 3.0, 2.0, amp, phase))
             for amp, phase in ((0.5, 0.0), (0.6, 2.0), (0.7, 4.0))]
    path = tmp_path_factory.mktemp("bc") / "stepping.hdf5"
    write_hdf5(path, quadruped, kp, kd, demos)
    return path, demos


# ----------------------------------------------------------------------------- observations and dataset
def test_observations_are_body_frame_and_heading_invariant():
    rng = np.random.default_rng(0)
    joint_pos, joint_vel, last = (rng.normal(size=(1, 5)) for _ in range(3))
    lin, ang = np.array([[1.0, 0.0, 0.0]]), np.array([[0.0, 0.0, 0.5]])
    yaw = math.radians(90.0)
    quat_yaw = np.array([[0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)]])  # xyzw
    identity = np.array([[0.0, 0.0, 0.0, 1.0]])
    # world +x velocity for a robot facing +y is sideways (body -y); forward motion along +y is body +x
    obs = P.build_observations(joint_pos, joint_vel, last, quat_yaw, lin, ang, np.array([0.3]), 0.7)
    layout = dict(P.observation_layout(5))
    assert obs.shape == (1, sum(layout.values())) and obs.dtype == np.float32
    offsets = np.cumsum([0] + [s for _, s in P.observation_layout(5)])
    term = {name: obs[0, offsets[i]:offsets[i + 1]] for i, (name, _) in enumerate(P.observation_layout(5))}
    np.testing.assert_allclose(term["root_lin_vel_body"], [0.0, -1.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(term["root_ang_vel_body"], [0.0, 0.0, 0.5], atol=1e-6)
    np.testing.assert_allclose(term["gravity_body"], [0.0, 0.0, -1.0], atol=1e-6)
    np.testing.assert_allclose(term["gait_clock"], [math.sin(0.3), math.cos(0.3)], atol=1e-6)
    np.testing.assert_allclose(term["command_speed"], [0.7])
    np.testing.assert_allclose(term["joint_pos"], joint_pos[0], atol=1e-6)
    np.testing.assert_allclose(term["last_target"], last[0], atol=1e-6)
    # facing +y and moving +y = facing +x and moving +x
    a = P.build_observations(joint_pos, joint_vel, last, quat_yaw, np.array([[0.0, 2.0, 0.0]]), ang, [0.3], 0.7)
    b = P.build_observations(joint_pos, joint_vel, last, identity, np.array([[2.0, 0.0, 0.0]]), ang, [0.3], 0.7)
    np.testing.assert_allclose(a, b, atol=1e-6)
    # pitched forward by 30 deg about y: gravity in the body frame tilts towards +x
    pitch = math.radians(30.0)
    quat_pitch = np.array([[0.0, math.sin(pitch / 2), 0.0, math.cos(pitch / 2)]])
    obs = P.build_observations(joint_pos, joint_vel, last, quat_pitch, lin, ang, [0.0], 0.0)
    np.testing.assert_allclose(obs[0, offsets[3]:offsets[4]], [math.sin(pitch), 0.0, -math.cos(pitch)], atol=1e-6)


def test_gait_clock_recovers_frequency_and_phase_of_a_contact_pattern():
    t = np.arange(0, 4.0, DT)
    for freq, phase in ((1.7, 0.4), (2.5, -2.0)):
        contacts = (np.cos(2 * np.pi * freq * t - phase) > 0).astype(float)  # square wave, 50% duty
        est_freq, est_phase = P.gait_clock(contacts, DT)
        assert est_freq == pytest.approx(freq, abs=0.02)
        assert abs(np.angle(np.exp(1j * (est_phase - phase)))) < 0.1
        assert P.gait_clock(contacts, DT, gait_hz=freq)[0] == freq  # a given frequency is kept
    assert P.gait_clock(np.ones(100), DT) == (0.0, 0.0)


def test_dataset_reader_pairs_state_k_with_target_k_plus_1(stepping_dataset, quadruped):
    path, demos = stepping_dataset
    dataset = P.load_dataset(path)
    assert dataset.robot == "quadruped" and dataset.joint_names == quadruped.joint_names
    assert dataset.dt == pytest.approx(DT) and len(dataset.demos) == 3
    assert [d.name for d in dataset.demos] == ["demo_0", "demo_1", "demo_2"]
    demo = dataset.demos[1]
    assert demo.gait_hz == pytest.approx(2.0, abs=0.05)  # from the joint angles (no foot contacts in this file)
    obs, joint_pos, targets = P.demo_samples(demo, dataset.dt)
    assert obs.shape == (demo.num_frames - 1, 3 * quadruped.num_dofs + 12)
    np.testing.assert_allclose(targets, demos[1]["actions"][1:], atol=1e-6)
    np.testing.assert_allclose(joint_pos, demos[1]["joint_pos"][:-1], atol=1e-6)
    np.testing.assert_allclose(obs[:, 2 * quadruped.num_dofs:3 * quadruped.num_dofs], demos[1]["actions"][:-1],
                               atol=1e-6)
    assert dataset.num_samples == sum(len(d["actions"]) - 1 for d in demos)


@pytest.mark.parametrize("breakage, field", [("no_env_args", "joint_names"), ("short_obs", "obs/root_quat"),
                                             ("missing_obs", "root_ang_vel")])
def test_malformed_dataset_is_refused_naming_the_field(tmp_path, stepping_dataset, breakage, field):
    path, _ = stepping_dataset
    bad = tmp_path / "bad.hdf5"
    bad.write_bytes(path.read_bytes())
    with h5py.File(bad, "a") as f:
        if breakage == "no_env_args":
            f["data"].attrs["env_args"] = json.dumps({"env_name": "akd"})
        elif breakage == "short_obs":
            del f["data/demo_0/obs/root_quat"]
            f["data/demo_0/obs/root_quat"] = np.zeros((5, 4))
        else:
            del f["data/demo_2/obs/root_ang_vel"]
    with pytest.raises(MotionError, match=field):
        P.load_dataset(bad)
    with pytest.raises(ConfigError, match="akd export"):
        P.load_dataset(tmp_path / "nope.hdf5")


# ----------------------------------------------------------------------------- environment
def test_env_matches_the_tracking_engine_on_the_same_targets(quadruped, gains):
    """The policy's MuJoCo env steps exactly as the tracking engine executes tracked data (same model, contact,
    interpolation)."""
    from akd_core.physics.crosscheck import tracked_states
    from akd_core.physics.engines.base import Feet
    from akd_core.physics.engines.mujoco import MujocoEngine
    from akd_core.physics.tracker import execute

    kp, kd = gains
    demo = mujoco_demo(quadruped, kp, kd, stepping_targets(quadruped, 1.0, 2.0, 0.6, 1.0))
    tracked = TrackedMotion(dt=DT, joint_names=quadruped.joint_names, pd_targets=demo["actions"],
                            joint_torques=np.zeros_like(demo["actions"]),
                            **{k: demo[k] for k in P.OBS_KEYS}, kp=kp, kd=kd)
    physics = P.default_physics(quadruped, DT)
    params = default_physics(quadruped, kp=kp, kd=kd, armature=physics["armature"], contact_mu=physics["friction"])
    steps = int(round(DT / physics["sim_dt"]))
    engine = MujocoEngine(quadruped, params, physics["sim_dt"], steps, Feet((), np.zeros((0, 3))))
    record, _ = execute(engine, tracked_states(tracked)[0], tracked.pd_targets.astype(np.float64))
    states = BodyState.concat([tracked_states(tracked)[:1]] + record.states)
    out = {"joint_pos": states.joint_pos, "root_pos": states.root_pos}
    # TrackedMotion stores float32: the replay starts from the rounded state, so agreement is to ~1e-4, not bitwise
    np.testing.assert_allclose(out["joint_pos"], demo["joint_pos"], atol=2e-3)
    np.testing.assert_allclose(out["root_pos"], demo["root_pos"], atol=2e-3)
    assert np.abs(demo["root_pos"][-1] - demo["root_pos"][0]).max() > 1e-3  # the motion did something


# ----------------------------------------------------------------------------- policy file
def test_policy_file_round_trip_keeps_normalisation_and_outputs(tmp_path, stepping_dataset, quadruped):
    path, _ = stepping_dataset
    dataset = P.load_dataset(path)
    policy, meta, metrics = P.train_bc(dataset, quadruped, epochs=1, progress=False)
    obs, joint_pos, targets = P.training_arrays(dataset)
    # normalisation = statistics of the training data (not left at identity)
    np.testing.assert_allclose(policy.obs_mean.numpy(), obs.mean(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(policy.obs_std.numpy(), np.maximum(obs.std(0), P.DEFAULT_STD_FLOOR), rtol=1e-4)
    np.testing.assert_allclose(policy.act_mean.numpy(), targets.mean(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(policy.act_std.numpy(), np.maximum(targets.std(0), P.DEFAULT_STD_FLOOR), rtol=1e-4)
    assert policy.obs_std.min() >= P.DEFAULT_STD_FLOOR and (policy.obs_std > P.DEFAULT_STD_FLOOR).any()
    assert metrics["num_samples"] == len(obs) and metrics["epochs"] == 1
    file = P.save_policy(tmp_path / "p.pt", policy, meta)
    loaded, loaded_meta = P.load_policy(file)
    for name in ("obs_mean", "obs_std", "act_mean", "act_std"):
        torch.testing.assert_close(getattr(loaded, name), getattr(policy, name))
    with torch.no_grad():
        torch.testing.assert_close(loaded(torch.as_tensor(obs), torch.as_tensor(joint_pos)),
                                   policy(torch.as_tensor(obs), torch.as_tensor(joint_pos)))
    assert loaded_meta.joint_names == quadruped.joint_names and loaded_meta.robot == "quadruped"
    assert loaded_meta.dt == pytest.approx(DT) and loaded_meta.obs_layout == P.observation_layout(quadruped.num_dofs)
    np.testing.assert_allclose(loaded_meta.kp, dataset.kp)
    np.testing.assert_allclose(loaded_meta.physics["armature"], P.default_physics(quadruped, DT)["armature"])
    assert len(loaded_meta.references) == 3 and loaded.action_mode == "absolute"


def test_policy_denormalises_absolute_and_residual_actions(quadruped, tmp_path):
    j = quadruped.num_dofs
    joint_pos = torch.randn(4, j)
    for mode, expected in (("absolute", torch.full((4, j), 0.1)), ("residual", joint_pos + 0.1)):
        policy = P.BCPolicy(3 * j + 12, j, hidden=(8,), action_mode=mode)
        for p in policy.net.parameters():
            torch.nn.init.zeros_(p)
        torch.nn.init.constant_(policy.net[-1].bias, 0.5)  # normalised output 0.5 -> 0.5 * std + mean
        policy.act_mean.fill_(-0.9)
        policy.act_std.fill_(2.0)
        torch.testing.assert_close(policy(torch.randn(4, 3 * j + 12), joint_pos), expected)
        meta = P.PolicyMeta("quadruped", quadruped.joint_names, DT, np.ones(j), np.ones(j),
                            P.observation_layout(j), (8,), [], {"armature": np.zeros(j), "sim_dt": 1e-3})
        loaded, _ = P.load_policy(P.save_policy(tmp_path / f"{mode}.pt", policy, meta))
        assert loaded.action_mode == mode
    with pytest.raises(ConfigError, match="action mode"):
        P.BCPolicy(10, 2, action_mode="delta")


def test_not_a_policy_file_is_refused(tmp_path):
    bad = tmp_path / "x.pt"
    torch.save({"weights": 1}, bad)
    with pytest.raises(ConfigError, match="akd train-bc"):
        P.load_policy(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        P.load_policy(tmp_path / "missing.pt")


# ----------------------------------------------------------------------------- robot mismatch
def test_policy_on_another_robot_is_refused(tmp_path, stepping_dataset, quadruped):
    path, _ = stepping_dataset
    policy, meta, _ = P.train_bc(P.load_dataset(path), quadruped, epochs=1, progress=False)
    a1 = load_urdf(example_robot_urdf("a1"))
    with pytest.raises(MotionError, match=r"28 joints in the policy vs 12 in robot 'a1'.*train-bc"):
        P.evaluate_policy(policy, meta, a1, seconds=0.1, progress=False)
    with pytest.raises(MotionError, match="different robot"):
        P.check_robot_matches(list(reversed(quadruped.joint_names)), quadruped, "the policy")
    # training on a dataset of another robot is refused too
    with pytest.raises(MotionError, match="dataset"):
        P.train_bc(P.load_dataset(path), a1, epochs=1, progress=False)


def test_cli_refuses_mismatched_robot_with_clean_message(tmp_path, stepping_dataset, quadruped, capsys):
    from akd_core.cli import main

    path, _ = stepping_dataset
    out = tmp_path / "p.pt"
    assert main(["train-bc", str(path), "--robot", "quadruped", "-o", str(out), "--epochs", "1"]) == 0
    assert out.is_file()
    code = main(["eval-policy", str(out), "--robot", str(example_robot_urdf("a1")), "--seconds", "0.2"])
    err = capsys.readouterr().err
    assert code != 0 and "different robot" in err and "Traceback" not in err


# ----------------------------------------------------------------------------- closed loop (fast)
def test_cloned_stepping_policy_reproduces_demo_in_closed_loop(tmp_path, stepping_dataset, quadruped):
    """Trained for a few seconds on 3 MuJoCo demos, the policy re-enacts one of them closed-loop: upright for the
    whole clip, joints within a few degrees of the demo, and the metrics file/JSON are consistent."""
    path, demos = stepping_dataset
    policy, meta, metrics = P.train_bc(P.load_dataset(path), quadruped, epochs=60, obs_noise=0.05, progress=False)
    assert metrics["target_rmse_rad"] < 0.05
    result, traj = P.evaluate_policy(policy, meta, quadruped, seconds=3.0, demo=1, progress=False)
    assert not result["fell"] and result["upright_seconds"] == pytest.approx(3.0)
    assert result["reference_demo"] == "demo_1" and result["joint_rmse_seconds"] == pytest.approx(3.0)
    assert result["joint_rmse_rad"] < 0.05
    assert traj["joint_pos"].shape == (151, quadruped.num_dofs)
    # an untrained policy (zero residuals around act_mean) is measurably worse: the metric can fail
    untrained = P.BCPolicy(policy.obs_mean.numel(), quadruped.num_dofs)
    untrained.load_state_dict(policy.state_dict())
    for p in untrained.net.parameters():
        torch.nn.init.zeros_(p)
    worse, _ = P.evaluate_policy(untrained, meta, quadruped, seconds=3.0, demo=1, progress=False)
    assert worse["fell"] or worse["joint_rmse_rad"] > 2 * result["joint_rmse_rad"]


def test_rollout_metrics_distance_along_start_heading():
    n = 51
    yaw = math.radians(90.0)
    quat = np.tile([0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)], (n, 1))
    root = np.zeros((n, 3))
    root[:, 1] = np.linspace(0.0, 0.5, n)  # 0.5 m along +y = forward for a robot facing +y
    traj = {"root_pos": root, "root_quat": quat, "joint_pos": np.zeros((n, 2))}
    ref = {"speed_mps": 1.0, "joint_pos": np.full((20, 2), 0.1), "name": "demo_0", "gait_hz": 2.0}
    m = P.rollout_metrics(traj, ref, DT, 1.0, False, 1.0, 1.0)
    assert m["distance_m"] == pytest.approx(0.5) and m["forward_speed_mps"] == pytest.approx(0.5)
    assert m["distance_ratio"] == pytest.approx(0.5) and m["joint_rmse_rad"] == pytest.approx(0.1)
    assert m["joint_rmse_seconds"] == pytest.approx(19 * DT)


def test_train_cli_options_are_checked(tmp_path, stepping_dataset):
    path, _ = stepping_dataset
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    args = parser.parse_args([str(path), "--robot", "quadruped", "-o", str(tmp_path / "p.pt"), "--hidden", "a,b"])
    with pytest.raises(ConfigError, match="--hidden"):
        run_train(args)
    args = parser.parse_args([str(path), "--robot", "quadruped", "-o", str(tmp_path / "p.pt"), "--epochs", "0"])
    with pytest.raises(AKDError, match="--epochs"):
        run_train(args)
    assert not (tmp_path / "p.pt").exists()


# ----------------------------------------------------------------------------- real pipeline (slow)
TROT_LEGS = (("front_left", 0.0), ("hind_right", 0.0), ("front_right", np.pi), ("hind_left", np.pi))


def forward_trot(robot, speed: float, phase: float = 0.0, freq: float = 2.0, duration: float = 4.0, fps: float = 50.0,
                 lift: float = 0.8):
    """A procedural trot reference of the built-in quadruped: diagonal pairs swing the hips (stride for ``speed``
    m/s with 0.45 m legs) and flex knee + ankle in swing; the root moves forward at ``speed``."""
    from akd_core.motion.clip import Motion

    n = int(round(duration * fps)) + 1
    t = np.arange(n) / fps
    amp = float(np.arcsin(min(speed / (4.0 * freq * 0.45), 0.5)))
    q = np.tile(robot.default_joint_pos(), (n, 1))
    contacts = np.zeros((n, len(TROT_LEGS)), bool)
    for k, (leg, offset) in enumerate(TROT_LEGS):
        theta = 2 * np.pi * freq * t + phase + offset
        swing = np.maximum(0.0, -np.cos(theta))
        flex = -1.0 if leg.startswith("front") else 1.0
        q[:, robot.joint_names.index(f"{leg}_hip_y")] = amp * np.sin(theta)
        q[:, robot.joint_names.index(f"{leg}_knee")] = flex * lift * swing
        q[:, robot.joint_names.index(f"{leg}_ankle")] = -0.5 * flex * lift * swing
        contacts[:, k] = np.cos(theta) > 0
    root = np.zeros((n, 3))
    root[:, 0] = speed * t
    root[:, 2] = standing_height("quadruped")
    return Motion(fps=fps, joint_names=robot.joint_names, joint_pos=q, root_pos=root,
                  root_quat=np.tile([0.0, 0.0, 0.0, 1.0], (n, 1)), foot_names=[f"{leg}_foot" for leg, _ in TROT_LEGS],
                  foot_offsets=np.zeros((len(TROT_LEGS), 3)), foot_contacts=contacts, prompt=f"trot {speed} m/s")


def tracked_trot_runs(root, robot, clips, iterations: int = 0) -> list:
    """Run directories (robot.urdf, reference.npz, tracked.npz from the real Newton tracking stage) of trot clips
    ``clips`` = [(speed, phase), ...]."""
    from akd_core.io.rundir import REFERENCE, ROBOT_URDF, RunDir
    from akd_core.physics.tracker import stage_track

    runs = []
    for speed, phase in clips:
        run = RunDir(root / f"trot_{speed:.2f}_{phase:.2f}", create=True)
        if not run.stage_done("track"):
            robot.to_urdf(run.file(ROBOT_URDF))
            forward_trot(robot, speed, phase).save(run.file(REFERENCE))
            # iterations=0: the feedforward replay on Newton (cheap); these tests need tracked data, not its quality
            stage_track(run, method="adam", iterations=iterations, device="cpu", progress=False)
        runs.append(run)
    return runs


def write_hdf5_from_runs(path, runs) -> None:
    """robomimic layout from tracked runs: obs = simulated states, actions = PD targets, foot contacts of the
    reference (same rate)."""
    from akd_core.motion.clip import Motion

    tracked = [TrackedMotion.load(r.file("tracked.npz")) for r in runs]
    first = tracked[0]
    env_args = {"env_name": "akd", "type": 2, "robot": "quadruped", "fps": 1.0 / first.dt,
                "joint_names": first.joint_names, "kp": first.kp.tolist(), "kd": first.kd.tolist()}
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps(env_args)
        for i, (run, tm) in enumerate(zip(runs, tracked)):
            group = data.create_group(f"demo_{i}")
            group.create_dataset("actions", data=tm.pd_targets)
            for key in P.OBS_KEYS:
                group.create_dataset(f"obs/{key}", data=getattr(tm, key))
            contacts = Motion.load(run.file("reference.npz")).foot_contacts
            group.create_dataset("obs/foot_contacts", data=contacts[:tm.num_steps])


@pytest.mark.slow
def test_bc_policy_trained_on_tracked_trots_walks_10s_in_mujoco(tmp_path_factory, quadruped):
    """Done criterion of issue 9: trot clips at several speeds and phases, tracked in Newton, exported to HDF5; BC
    trains in minutes on CPU; closed-loop in MuJoCo the policy stays upright 10 s and covers >= 60 % of the
    reference's distance."""
    import time

    root = tmp_path_factory.mktemp("bc_trots")
    runs = tracked_trot_runs(root, quadruped, [(0.6, 0.0), (0.8, 0.0), (0.8, 1.5), (1.0, 0.0)])
    dataset_path = root / "trots.hdf5"
    write_hdf5_from_runs(dataset_path, runs)
    dataset = P.load_dataset(dataset_path)
    assert all(d.gait_hz == pytest.approx(2.0, abs=0.1) for d in dataset.demos)
    start = time.perf_counter()
    policy, meta, metrics = P.train_bc(dataset, quadruped, progress=False)
    assert time.perf_counter() - start < 300
    policy_path = P.save_policy(root / "trot.pt", policy, meta)
    policy, meta = P.load_policy(policy_path)
    for demo in range(len(meta.references)):
        result, _ = P.evaluate_policy(policy, meta, quadruped, seconds=10.0, demo=demo, progress=False)
        print(f"demo {demo}: {json.dumps(result)}")
        assert not result["fell"] and result["upright_seconds"] == pytest.approx(10.0)
        assert result["reference_speed_mps"] > 0.05  # the data really walk forward
        assert result["distance_ratio"] >= 0.6
