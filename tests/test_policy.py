"""Policies on tracked motion: the dataset and its references, observations, the randomised world, the MPC expert,
BC, DAgger, the evaluation and the ONNX export.

Fast tests use physically consistent runs made in seconds (tests/policy_runs.py: gait-library trots of the built-in
quadruped tracked by the tracker's feedforward replay in MuJoCo) and share them through module fixtures.
"""

from __future__ import annotations

import dataclasses
import json
import math

import h5py
import numpy as np
import pytest
import torch

from akd_core.cli import main
from akd_core.io.errors import ConfigError, MotionError
from akd_core.io.rundir import REFERENCE, TRACKED
from akd_core.learn import bc as B
from akd_core.learn import env as E
from akd_core.learn import evaluate as V
from akd_core.learn import observation as O
from akd_core.learn.dagger import DaggerConfig, ExpertGateError, expert_gate, train_dagger
from akd_core.learn.dataset import load_dataset
from akd_core.learn.expert import EXPERT_WEIGHTS, ExpertConfig, MPCExpert
from akd_core.learn.onnx_export import OnnxPolicy, export_onnx
from akd_core.learn.policy import FitConfig, TrackingPolicy, check_robot_matches, load_policy, save_policy
from akd_core.learn.reference import ReferenceClip, gait_clock, path_progress, track_progress, yaw_of
from akd_core.model.load import load_robot
from akd_core.model.robot import load_urdf
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.physics import tracker as TR
from akd_core.physics.engines.base import BodyState
from akd_core.physics.targets import substep_targets
from tests.conftest import example_robot_urdf
from tests.policy_runs import dataset_of, feedforward_run

DT = 0.02
CALM = E.Randomisation(push_mps=0.0, push_every_s=0.0, friction=(1.0, 1.0), mass_scale=(1.0, 1.0), obs_noise=0.0,
                       latency_s=(0.0, 0.0))


@pytest.fixture(scope="module")
def quadruped():
    return load_robot("quadruped")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, quadruped):
    root = tmp_path_factory.mktemp("policy_runs")
    return [feedforward_run(root / "trot04", quadruped, "a dog trotting forward at 0.4 m/s", 2.0),
            feedforward_run(root / "trot05", quadruped, "a dog trotting forward at 0.5 m/s", 2.0)]


@pytest.fixture(scope="module")
def dataset_path(runs, tmp_path_factory):
    return dataset_of(runs, tmp_path_factory.mktemp("policy_data") / "trots.hdf5")


@pytest.fixture(scope="module")
def dataset(dataset_path):
    return load_dataset(dataset_path)


@pytest.fixture(scope="module")
def trained(dataset, quadruped):
    policy, meta, metrics = B.train_bc(dataset, quadruped, B.BCConfig(fit=FitConfig(epochs=150)), progress=False)
    return policy, meta, metrics


def _turning_motion(frames: int = 151, yaw_rate: float = 0.5, speed: float = 0.6, hz: float = 2.0) -> Motion:
    t = np.arange(frames) * DT
    yaw = yaw_rate * t
    root = np.stack([speed / yaw_rate * np.sin(yaw), speed / yaw_rate * (1 - np.cos(yaw)), np.full_like(t, 0.4)], -1)
    quat = np.stack([np.zeros_like(yaw), np.zeros_like(yaw), np.sin(yaw / 2), np.cos(yaw / 2)], -1)
    q = np.stack([0.3 * np.sin(2 * np.pi * hz * t), 0.2 * np.cos(2 * np.pi * hz * t)], -1)
    contacts = (np.cos(2 * np.pi * hz * t) > 0)[:, None]
    return Motion(fps=1 / DT, joint_names=["a", "b"], joint_pos=q, root_pos=root, root_quat=quat, foot_names=["f"],
                  foot_offsets=np.zeros((1, 3)), foot_contacts=contacts)


# ----------------------------------------------------------------------------- references
def test_reference_continues_past_its_end_on_the_same_arc_at_the_same_speed():
    clip = ReferenceClip.from_motion(_turning_motion(), DT)
    assert clip.gait_hz == pytest.approx(2.0, abs=0.05) and clip.loop_frames == 25  # one period at 50 Hz
    f = clip.frames(600)
    speed = np.linalg.norm(np.diff(f["root_pos"][:, :2], axis=0), axis=-1) / DT
    np.testing.assert_allclose(speed, 0.6, rtol=1e-3)  # no jump at the seams, same speed 9 s after a 3 s clip
    yaw = np.unwrap(yaw_of(f["root_quat"]))
    np.testing.assert_allclose(np.diff(yaw) / DT, 0.5, rtol=1e-3)  # keeps turning at the same rate
    np.testing.assert_allclose(f["root_pos"][:, :2], np.stack([1.2 * np.sin(0.5 * np.arange(600) * DT),
                                                               1.2 * (1 - np.cos(0.5 * np.arange(600) * DT))], -1),
                               atol=1e-3)  # on the circle the clip drew
    t = np.arange(600) * DT
    np.testing.assert_allclose(f["joint_pos"][:, 0], 0.3 * np.sin(2 * np.pi * 2.0 * t), atol=1e-5)  # the cycle loops
    assert np.allclose(np.sin(f["clock"][151:]), np.sin(f["clock"][126:575]), atol=1e-9)  # the clock loops with it
    np.testing.assert_array_equal(clip.motion(600).joint_pos, f["joint_pos"].astype(np.float32))


def test_gait_clock_recovers_frequency_and_phase_of_a_contact_pattern():
    t = np.arange(0, 4.0, DT)
    for freq, phase in ((1.7, 0.4), (2.5, -2.0)):
        contacts = (np.cos(2 * np.pi * freq * t - phase) > 0).astype(float)
        est_freq, est_phase = gait_clock(contacts, DT)
        assert est_freq == pytest.approx(freq, abs=0.02)
        assert abs(np.angle(np.exp(1j * (est_phase - phase)))) < 0.1
    assert gait_clock(np.ones(100), DT) == (0.0, 0.0)


def test_path_progress_is_arc_length_of_the_closest_point():
    path = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]])
    assert path_progress(path, np.array([0.5, 0.2])) == pytest.approx(0.5)
    assert path_progress(path, np.array([1.3, 0.4])) == pytest.approx(1.4)
    assert path_progress(path, np.array([-1.0, 0.0])) == 0.0


def test_track_progress_counts_the_laps_of_a_path_that_circles():
    # a turning clip looped for 20 s: 1.25 laps of a 1.5 m circle; the end is where the first lap's quarter is
    angle = np.linspace(0.0, 2.5 * np.pi, 1001)
    path = 1.5 * np.stack([np.sin(angle), 1.0 - np.cos(angle)], -1)
    length = 1.5 * 2.5 * np.pi
    # the closest point of the end alone finds the first lap: the ratio a perfect follower got before
    assert path_progress(path, path[-1]) == pytest.approx(length / 5, rel=1e-3)
    # followed frame by frame, with a small wobble off the path, it is the whole path
    wobble = path + 0.05 * np.sin(np.linspace(0, 40, len(path)))[:, None]
    assert track_progress(path, wobble) == pytest.approx(length, rel=0.01)
    # a robot that walks straight on instead of turning gets only what it shares with the path's start
    straight = np.stack([np.linspace(0.0, 6.0, 300), np.zeros(300)], -1)
    assert track_progress(path, straight) < 0.25 * length
    # standing still: nothing
    assert track_progress(path, np.zeros((50, 2))) == 0.0


# ----------------------------------------------------------------------------- observations
def test_observation_has_only_measurable_terms_and_the_reference():
    names = [n for n, _ in O.observation_layout(3)]
    assert not {"root_pos", "root_lin_vel_body", "root_lin_vel"} & set(names)  # no base position or velocity
    assert names[:6] == ["joint_pos", "joint_vel", "last_target", "gravity_body", "ang_vel_body", "heading_error"]
    assert "ref_clock" in names and "ref_joint_pos_1" in names and "ref_joint_pos_4" in names
    assert O.noise_scales(3).shape == (sum(s for _, s in O.observation_layout(3)),)


def test_observation_is_invariant_to_where_the_robot_is_and_which_way_it_faces():
    """Rotating and shifting robot and reference together changes nothing; pitch shows in gravity; heading error
    is the yaw between reference and robot."""
    motion = _turning_motion()
    clip = ReferenceClip.from_motion(motion, DT)
    yaw0 = 1.1
    c, s = math.cos(yaw0), math.sin(yaw0)
    turned = Motion(fps=motion.fps, joint_names=motion.joint_names, joint_pos=motion.joint_pos,
                    root_pos=motion.root_pos @ np.array([[c, s, 0], [-s, c, 0], [0, 0, 1]]) + [3.0, -2.0, 0.0],
                    root_quat=np.stack([np.zeros(151), np.zeros(151), np.sin((yaw0 + 0.5 * np.arange(151) * DT) / 2),
                                        np.cos((yaw0 + 0.5 * np.arange(151) * DT) / 2)], -1),
                    foot_names=motion.foot_names, foot_offsets=motion.foot_offsets, foot_contacts=motion.foot_contacts)
    clip2 = ReferenceClip.from_motion(turned, DT)
    rng = np.random.default_rng(0)
    q, qd, last = (rng.normal(size=(4, 2)) for _ in range(3))
    gyro = rng.normal(size=(4, 3))
    frames = np.array([0, 10, 200, 400])
    quat1 = clip.frames(401)["root_quat"][frames]
    quat2 = clip2.frames(401)["root_quat"][frames]
    a = O.build_observations(q, qd, last, quat1, gyro, clip, frames)
    b = O.build_observations(q, qd, last, quat2, gyro, clip2, frames)
    np.testing.assert_allclose(a, b, atol=1e-4)
    sl = O.observation_slices(O.observation_layout(2))
    np.testing.assert_allclose(a[:, sl["heading_error"]], [[0.0, 1.0]] * 4, atol=1e-6)  # on the reference heading
    np.testing.assert_allclose(a[:, sl["ref_lin_vel_heading"]], [[0.6, 0.0, 0.0]] * 4, atol=5e-3)
    np.testing.assert_allclose(a[:, sl["ref_yaw_rate"]], 0.5, atol=1e-3)
    pitch = math.radians(30.0)
    quat_pitch = np.array([[0.0, math.sin(pitch / 2), 0.0, math.cos(pitch / 2)]])
    o = O.build_observations(q[:1], qd[:1], last[:1], quat_pitch, gyro[:1], clip, np.array([0]))
    np.testing.assert_allclose(o[0, sl["gravity_body"]], [math.sin(pitch), 0.0, -math.cos(pitch)], atol=1e-6)


# ----------------------------------------------------------------------------- dataset
def test_dataset_carries_each_demos_reference_through_the_export_reader(dataset, runs, dataset_path, tmp_path):
    assert [d.reference_source for d in dataset.demos] == ["reference", "reference"]
    ref = Motion.load(runs[1].file(REFERENCE))
    np.testing.assert_allclose(dataset.demos[1].reference.joint_pos, ref.joint_pos, atol=1e-6)
    assert dataset.demos[1].reference.foot_names == ref.foot_names
    with h5py.File(dataset_path) as f:
        assert f["data/demo_0/reference/joint_pos"].shape == (101, 28)
        assert json.loads(f["data/demo_0/reference"].attrs["foot_names"]) == ref.foot_names
    bare = tmp_path / "bare.hdf5"
    bare.write_bytes(dataset_path.read_bytes())
    with h5py.File(bare, "a") as f:
        del f["data/demo_0/reference"]
        del f["data/demo_1/reference"]
        f["data/demo_1"].attrs["run"] = str(tmp_path / "gone")
    old = load_dataset(bare)  # an older file: the run's reference.npz, else the tracked motion stands in
    assert [d.reference_source for d in old.demos] == ["run", "tracked"]


@pytest.mark.parametrize("breakage, field", [("no_env_args", "joint_names"), ("short_obs", "obs/root_quat"),
                                             ("missing_obs", "root_ang_vel")])
def test_malformed_dataset_is_refused_naming_the_field(tmp_path, dataset_path, breakage, field):
    bad = tmp_path / "bad.hdf5"
    bad.write_bytes(dataset_path.read_bytes())
    with h5py.File(bad, "a") as f:
        if breakage == "no_env_args":
            f["data"].attrs["env_args"] = json.dumps({"env_name": "akd"})
        elif breakage == "short_obs":
            del f["data/demo_0/obs/root_quat"]
            f["data/demo_0/obs/root_quat"] = np.zeros((5, 4))
        else:
            del f["data/demo_1/obs/root_ang_vel"]
    with pytest.raises(MotionError, match=field):
        load_dataset(bad)
    with pytest.raises(ConfigError, match="akd export"):
        load_dataset(tmp_path / "nope.hdf5")


def test_bc_pairs_state_k_with_target_k_plus_1_and_reference_frame_k(dataset):
    demo = dataset.demos[0]
    obs, targets = B.demo_samples(demo)
    sl = O.observation_slices(O.observation_layout(28))
    np.testing.assert_allclose(targets, demo.actions[1:], atol=1e-6)
    np.testing.assert_allclose(obs[:, sl["last_target"]], demo.actions[:-1], atol=1e-6)
    np.testing.assert_allclose(obs[:, sl["joint_pos"]], demo.joint_pos[:-1], atol=1e-6)
    np.testing.assert_allclose(obs[:, sl["ref_joint_pos_1"]], demo.reference.joint_pos[1:], atol=1e-6)


# ----------------------------------------------------------------------------- the world
def test_world_replays_a_tracked_run_exactly_as_tracking_simulated_it(runs, quadruped, dataset):
    """The evaluation world is the tracking model: the run's PD targets from its first state give its states. That
    takes the tracking's integrator (euler for the quadruped), carried through the dataset's env_args."""
    tracked = TrackedMotion.load(runs[0].file(TRACKED))
    physics = B.dataset_physics(dataset, quadruped)
    assert physics.integrator == "euler" == E.WorldPhysics.from_dict(physics.to_dict()).integrator
    world = E.SimWorld(quadruped, physics)
    assert world.engine.integrator == "euler"
    start, target0 = V.start_state(B.demo_starts(dataset.demos[0]), 0)
    world.reset(start, target0)
    states = [world.step(t) for t in tracked.pd_targets[1:].astype(np.float64)]
    joint = np.array([s.joint_pos for s in states])
    root = np.array([s.root_pos for s in states])
    np.testing.assert_allclose(joint, tracked.joint_pos[1:], atol=1e-4)
    np.testing.assert_allclose(root, tracked.root_pos[1:], atol=1e-4)
    assert root[-1, 0] - root[0, 0] > 0.3  # it walked


def test_latency_delays_the_whole_target_signal():
    rng = np.random.default_rng(1)
    before, current, target = rng.normal(size=(3, 4))
    np.testing.assert_allclose(E.delayed_ramp(before, current, target, 10, DT, 0.0),
                               substep_targets(np.stack([current, target]), 10), atol=1e-12)
    delayed = E.delayed_ramp(before, current, target, 10, DT, 0.006)  # 3 substeps of 2 ms
    signal = np.concatenate([substep_targets(np.stack([before, current, target]), 10), target[None]])
    np.testing.assert_allclose(delayed, signal[10 - 3:20 - 3], atol=1e-12)
    worlds = rng.normal(size=(3, 2, 4))  # many worlds at once (the RL environment's call), each its own latency
    batched = E.delayed_ramp(*worlds, 10, DT, np.array([0.006, 0.0]))
    for i, lat in enumerate((0.006, 0.0)):
        np.testing.assert_allclose(batched[i], E.delayed_ramp(*worlds[:, i], 10, DT, lat), atol=1e-15)


def test_randomised_world_changes_friction_mass_and_takes_pushes(quadruped, dataset):
    physics = B.dataset_physics(dataset, quadruped)
    heavy = E.SimWorld(quadruped, physics, friction=0.7, mass_scale=1.1)
    nominal = E.SimWorld(quadruped, physics)
    root = heavy.model.body(quadruped.root_link).id
    base_mass = quadruped.link(quadruped.root_link).inertial.mass
    assert heavy.model.body_mass[root] - nominal.model.body_mass[root] == pytest.approx(0.1 * base_mass)
    assert heavy.robot.total_mass == pytest.approx(quadruped.total_mass + 0.1 * base_mass)
    assert np.allclose(heavy.model.geom_friction[:, 0], 0.7) and np.allclose(nominal.model.geom_friction[:, 0], 1.0)
    start, target0 = V.start_state(B.demo_starts(dataset.demos[0]), 0)
    heavy.reset(start, target0)
    v0 = heavy.state().root_lin_vel
    heavy.push(np.array([0.4, -0.3]))
    np.testing.assert_allclose(heavy.state().root_lin_vel - v0, [0.4, -0.3, 0.0], atol=1e-9)
    assert quadruped.link(quadruped.root_link).inertial.mass == base_mass  # the robot itself is not touched


def test_episode_draws_depend_only_on_seed_and_index():
    rand = E.Randomisation()
    a = E.draw_episode(rand, 7, 3, 4, 1000, DT)
    assert a == E.draw_episode(rand, 7, 3, 4, 1000, DT)
    assert a != E.draw_episode(rand, 7, 4, 4, 1000, DT)
    assert a.push_frames == list(range(100, 1000, 100)) and len(a.push_dirs) == 9
    assert 0.6 <= a.friction <= 1.2 and 0.9 <= a.mass_scale <= 1.1 and 0.0 <= a.latency_s <= 0.02
    with pytest.raises(ConfigError, match="friction"):
        E.Randomisation(friction=(1.2, 0.6)).check()


def test_episode_row_leaves_out_the_half_second_after_each_push():
    clip = ReferenceClip.from_motion(_turning_motion(), DT)
    ref = clip.frames(201)
    traj = {"joint_pos": ref["joint_pos"].copy(), "root_pos": ref["root_pos"].copy()}
    traj["joint_pos"][51:76] += 1.0  # off by 1 rad in the 0.5 s after a push at frame 50
    traj["joint_pos"][150:] += 0.1
    draw = E.EpisodeDraw(index=0, clip=0, friction=1.0, mass_scale=1.0, latency_s=0.0, push_frames=[50],
                         push_dirs=[0.0])
    row = V.episode_row(clip, draw, traj, 200, DT, fell=False)
    assert row["joint_rmse_rad"] == pytest.approx(0.1 * math.sqrt(51 / 175), rel=1e-6)
    assert row["distance_ratio"] == pytest.approx(1.0, abs=1e-6)
    assert row["mean_speed_mps"] == pytest.approx(0.6, rel=1e-4)
    traj["root_pos"] = traj["root_pos"][:101]  # fell half way
    traj["joint_pos"] = traj["joint_pos"][:101]
    row = V.episode_row(clip, draw, traj, 200, DT, fell=True)
    assert row["distance_ratio"] == pytest.approx(0.5, abs=1e-3) and row["upright_s"] == pytest.approx(2.0)
    summary = V.aggregate([row, {**row, "fell": False}])
    assert summary["falls"] == 1 and summary["distance_ratio"] == pytest.approx(0.5, abs=1e-3)


# ----------------------------------------------------------------------------- BC and the policy file
def test_bc_policy_walks_the_demo_closed_loop_and_the_metric_can_fail(trained, quadruped):
    policy, meta, metrics = trained
    assert metrics["target_rmse_rad"] < 0.03
    cfg = V.EvalConfig(seconds=3.0, episodes=2, randomisation=CALM)
    physics = E.WorldPhysics.from_dict(meta.physics)
    report, _ = V.evaluate(quadruped, physics, meta.clips, meta.starts, V.PolicyController(policy, 0.0), cfg,
                           progress=False)
    assert report["falls"] == 0 and report["joint_rmse_rad"] < 0.08
    assert 0.8 < report["distance_ratio"] < 1.2
    untrained = TrackingPolicy(policy.obs_mean.numel(), quadruped.num_dofs)
    untrained.load_state_dict(policy.state_dict())
    for p in untrained.net.parameters():
        torch.nn.init.zeros_(p)
    worse, _ = V.evaluate(quadruped, physics, meta.clips, meta.starts, V.PolicyController(untrained, 0.0), cfg,
                          progress=False)
    assert worse["falls"] > 0 or worse["joint_rmse_rad"] > 1.5 * report["joint_rmse_rad"]


def test_policy_file_round_trip_and_refusals(trained, quadruped, tmp_path, dataset):
    policy, meta, _ = trained
    obs, _ = B.training_arrays(dataset)
    loaded, loaded_meta = load_policy(save_policy(tmp_path / "p.pt", policy, meta))
    np.testing.assert_array_equal(loaded.act(obs), policy.act(obs))
    assert loaded_meta.joint_names == quadruped.joint_names and loaded_meta.method == "bc"
    assert [c.name for c in loaded_meta.clips] == ["demo_0", "demo_1"]
    np.testing.assert_allclose(loaded_meta.clips[0].joint_pos, meta.clips[0].joint_pos, atol=1e-6)
    a1 = load_urdf(example_robot_urdf("a1"))
    with pytest.raises(MotionError, match=r"28 joints in the policy vs 12 in robot 'a1'.*train-policy"):
        check_robot_matches(meta.joint_names, a1, "the policy")
    with pytest.raises(MotionError, match="dataset"):
        B.train_bc(dataset, a1, progress=False)
    torch.save({"weights": 1}, tmp_path / "x.pt")
    with pytest.raises(ConfigError, match="akd train-policy"):
        load_policy(tmp_path / "x.pt")


# ----------------------------------------------------------------------------- ONNX
@pytest.mark.parametrize("mode", ["reference", "absolute"])
def test_onnxruntime_gives_the_torch_policys_targets_to_1e5(dataset, quadruped, tmp_path, mode):
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install onnx onnxruntime)")
    policy, meta, _ = B.train_bc(dataset, quadruped, B.BCConfig(action_mode=mode, fit=FitConfig(epochs=3)),
                                 progress=False)
    exported = OnnxPolicy(export_onnx(policy, meta, tmp_path / "p.onnx"))
    obs, _ = B.training_arrays(dataset)
    obs = np.concatenate([obs, obs + np.random.default_rng(0).normal(size=obs.shape).astype(np.float32)])
    np.testing.assert_allclose(exported.act(obs), policy.act(obs), atol=1e-5, rtol=0)
    m = exported.meta
    assert m["joint_names"] == quadruped.joint_names and m["control_hz"] == pytest.approx(50.0)
    assert m["observation_layout"] == [[n, s] for n, s in O.observation_layout(28)] and m["action_mode"] == mode
    np.testing.assert_allclose(m["kp"], meta.kp) and np.testing.assert_allclose(m["kd"], meta.kd)
    np.testing.assert_allclose(m["default_pose"], meta.starts[0]["actions"][0], atol=1e-6)
    np.testing.assert_allclose(exported.limits["upper"], quadruped.upper)
    np.testing.assert_allclose(exported.clips[1].joint_pos, meta.clips[1].joint_pos, atol=1e-6)
    assert "absolute PD targets" in m["action"]


# ----------------------------------------------------------------------------- the MPC expert
def test_the_experts_default_weights_are_part_of_its_checkpoint_keys(monkeypatch):
    """A change of EXPERT_WEIGHTS must not resume an earlier expert's evaluation episodes, gate or DAgger run: the
    key of each holds the default weights spelled out."""
    from akd_core.learn import expert as X
    from akd_core.physics.cost import CostWeights

    before = (V.ExpertController(ExpertConfig()).settings(), DaggerConfig().to_dict())
    assert before[0]["default_weights"]["legged"] == dataclasses.asdict(TR.LEGGED_WEIGHTS)
    monkeypatch.setitem(X.EXPERT_WEIGHTS, False, CostWeights())
    after = (V.ExpertController(ExpertConfig()).settings(), DaggerConfig().to_dict())
    assert after[0] != before[0] and after[1] != before[1]
    given = ExpertConfig(weights=CostWeights(link=2.0)).settings()
    assert "default_weights" not in given and given["weights"]["link"] == 2.0


def test_expert_replans_warm_started_and_tracks_the_clip(dataset, quadruped):
    physics = B.dataset_physics(dataset, quadruped)
    world = E.SimWorld(quadruped, physics)
    start, target0 = V.start_state(B.demo_starts(dataset.demos[0]), 0)
    state = world.reset(start, target0)
    clip = dataset.demos[0].reference
    expert = MPCExpert(world, clip, 60, ExpertConfig(samples=8, replan_frames=2))
    for k in range(25):
        target = expert.act(k, world.engine_state(), world.last_target)
        state = world.step(target)
    assert expert.plans == 13  # every second frame, the plan's next target used in between
    assert expert.setup.engine.integrator == world.engine.integrator == "euler"  # planned as the world steps
    assert expert.setup.weights == EXPERT_WEIGHTS[False] == TR.LEGGED_WEIGHTS  # the tracker's, drift-correcting
    assert all(f > 24 for f in expert.knots) and expert.knots  # knots kept past the present warm-start the next plan
    ref = clip.frames(26)
    assert not world.fallen(state)
    assert np.abs(state.joint_pos - ref["joint_pos"][25]).mean() < 0.05
    # a target it did not plan (a policy drove) makes it re-plan from the state it is given
    expert.act(25, world.engine_state(), world.last_target + 0.01)
    assert expert.plans == 14 and expert.plan_frame == 25
    # re-anchoring: a base 0.3 m to the side of the reference moves the reference by the excess over the radius
    moved = BodyState(start.root_pos + [0.0, 0.3, 0.0], start.root_quat, start.joint_pos, start.root_lin_vel,
                      start.root_ang_vel, start.joint_vel)
    world.reset(moved, target0)
    anchored = MPCExpert(world, clip, 10, ExpertConfig(samples=4, anchor_radius_m=0.05))
    anchored.act(0, world.engine_state(), world.last_target)
    np.testing.assert_allclose(anchored.shift, [0.0, 0.25], atol=1e-3)
    np.testing.assert_allclose(anchored.setup.ref.root_pos[:, 1] - anchored.base_ref.root_pos[:, 1], 0.25, atol=1e-3)
    np.testing.assert_allclose(anchored.setup.ref.link_pos[..., 2], anchored.base_ref.link_pos[..., 2])


# ----------------------------------------------------------------------------- evaluation
def test_eval_report_schema_same_draws_for_every_controller_and_resume(trained, quadruped, tmp_path):
    policy, meta, _ = trained
    physics = E.WorldPhysics.from_dict(meta.physics)
    cfg = V.EvalConfig(seconds=2.5, episodes=2, seed=3)
    ckpt = tmp_path / "eval.ckpt"
    report, _ = V.evaluate(quadruped, physics, meta.clips, meta.starts, V.PolicyController(policy, 1.0), cfg,
                           checkpoint=ckpt, progress=False)
    for key in ("episodes", "falls", "joint_rmse_rad", "distance_ratio", "mean_speed_mps", "per_episode"):
        assert key in report
    assert report["episodes"] == 2 and len(report["per_episode"]) == 2
    assert [r["pushes"] for r in report["per_episode"]] == [1 if not r["fell"] or r["upright_s"] > 2.0 else 0
                                                            for r in report["per_episode"]]
    again, _ = V.evaluate(quadruped, physics, meta.clips, meta.starts, V.PolicyController(policy, 1.0), cfg,
                          checkpoint=ckpt, progress=False)  # resumed: both episodes come from the checkpoint
    assert again["per_episode"] == report["per_episode"] and again["wall_seconds"] < report["wall_seconds"]
    other = TrackingPolicy(policy.obs_mean.numel(), quadruped.num_dofs)
    other.load_state_dict(policy.state_dict())
    with torch.no_grad():
        next(other.net.parameters()).mul_(0.5)  # a retrained policy of the same name never resumes this one's
    assert V.PolicyController(other, 1.0).settings() != V.PolicyController(policy, 1.0).settings()
    draws = [(r["clip"], r["friction"], r["mass_scale"], r["latency_s"]) for r in report["per_episode"]]
    short = V.EvalConfig(seconds=0.1, episodes=2, seed=3)
    expert_ckpt = tmp_path / "expert.ckpt"
    V.evaluate(quadruped, physics, meta.clips, meta.starts, V.ExpertController(ExpertConfig(samples=4)), short,
               checkpoint=expert_ckpt, progress=False)
    expert, _ = V.evaluate(quadruped, physics, meta.clips, meta.starts, V.ExpertController(ExpertConfig(samples=5)),
                           short, checkpoint=expert_ckpt, progress=False)  # another expert: evaluated afresh
    assert json.loads(expert_ckpt.read_text())["key"]["settings"]["samples"] == 5
    assert draws == [(r["clip"], r["friction"], r["mass_scale"], r["latency_s"]) for r in expert["per_episode"]]
    assert expert["controller"] == "mpc" and expert["clips"] == ["demo_0", "demo_1"]


def test_cli_train_bc_alias_eval_and_export(dataset_path, tmp_path, capsys):
    out = tmp_path / "p.pt"
    assert main(["train-bc", str(dataset_path), "--robot", "quadruped", "-o", str(out), "--epochs", "2"]) == 0
    assert load_policy(out)[1].method == "bc"
    report = tmp_path / "r.json"
    code = main(["eval-policy", str(out), "--robot", "quadruped", "--seconds", "0.4", "--episodes", "2", "--json",
                 str(report)])
    data = json.loads(report.read_text())
    assert code in (0, 1) and data["episodes"] == 2 and data["seconds"] == 0.4 and data["controller"] == "bc"
    assert data["randomisation"]["friction"] == [0.6, 1.2] and not (tmp_path / "r.json.ckpt").exists()
    assert main(["export-policy", str(out), "-o", str(tmp_path / "p.onnx")]) == 0
    code = main(["eval-policy", str(out), "--robot", str(example_robot_urdf("a1")), "--seconds", "0.2"])
    err = capsys.readouterr().err
    assert code != 0 and "different robot" in err and "Traceback" not in err
    assert main(["train-policy", str(dataset_path), "--robot", "quadruped", "-o", str(out), "--hidden", "a"]) == 2


# ----------------------------------------------------------------------------- DAgger
def _expert_report(path, **changes):
    report = {"controller": "mpc", "robot": "quadruped", "clips": ["demo_0", "demo_1"], "episodes": 10, "falls": 0,
              "joint_rmse_rad": 0.05, "distance_ratio": 1.0, **changes}
    path.write_text(json.dumps(report))
    return path


def test_dagger_labels_the_states_the_policy_visits_and_resumes(dataset, quadruped, tmp_path):
    cfg = DaggerConfig(iterations=1, episodes=2, episode_s=0.2, label_every=2, beta0=0.0,
                       bc=B.BCConfig(fit=FitConfig(epochs=3)), fit=FitConfig(epochs=2),
                       expert=ExpertConfig(samples=4))
    ckpt = tmp_path / "d.ckpt"
    report = _expert_report(tmp_path / "mpc.json")
    policy, meta, metrics = train_dagger(dataset, quadruped, cfg, checkpoint=ckpt, expert_report=report,
                                         progress=False)
    assert metrics["labels"] == 2 * 5 and metrics["history"][0]["total_labels"] == 10  # every second of 10 frames
    assert metrics["num_samples"] == dataset.num_samples + 10 and meta.method == "dagger"
    assert metrics["expert_gate"]["controller"] == "mpc"
    state = torch.load(ckpt, weights_only=False)
    assert state["iteration"] == 2 and state["label_obs"][0].shape == (5, 5 * 28 + 17)
    again, _, metrics2 = train_dagger(dataset, quadruped, cfg, checkpoint=ckpt, expert_report=report,
                                      progress=False)  # everything was done: the checkpoint gives it back
    assert metrics2["labels"] == 10 and metrics2["history"] == metrics["history"]
    obs, _ = B.training_arrays(dataset)
    np.testing.assert_array_equal(again.act(obs), policy.act(obs))
    # more iterations on the finished run: it goes on from iteration 2, keeping iteration 1's labels
    _, _, metrics3 = train_dagger(dataset, quadruped, dataclasses.replace(cfg, iterations=2), checkpoint=ckpt,
                                  expert_report=report, progress=False)
    assert metrics3["history"][0] == metrics["history"][0] and len(metrics3["history"]) == 2
    assert metrics3["labels"] == 20 and torch.load(ckpt, weights_only=False)["iteration"] == 3


def test_dagger_expert_takes_over_a_rollout_in_danger_and_labels_every_period(dataset, quadruped, trained):
    """SafeDAgger-like take-over: past the tilt (or below the height) the expert drives and labels every control
    period; below it the policy drives and every second period is labelled. The danger test on a 30 deg tilt."""
    from types import SimpleNamespace

    from akd_core.learn.dagger import LabellingRollout

    clips = [d.reference for d in dataset.demos]
    starts = [B.demo_starts(d) for d in dataset.demos]
    physics = B.dataset_physics(dataset, quadruped)
    draw = E.draw_episode(CALM, 0, 0, len(clips), 10, DT)
    counts = {}
    for tilt in (1e-3, 59.0):  # always in danger / never
        cfg = DaggerConfig(beta0=0.0, takeover_tilt_deg=tilt, takeover_height_frac=0.0, takeover_s=0.1,
                           expert=ExpertConfig(samples=4), randomisation=CALM)
        rollout = LabellingRollout(trained[0], cfg, 0.0, np.random.default_rng(0))
        V.run_episode(quadruped, physics, clips[draw.clip], starts[draw.clip], draw, rollout, 10, 0.0)
        counts[tilt] = (len(rollout.obs), rollout.expert_steps, rollout.takeovers)
    assert counts[59.0] == (5, 0, 0)
    labels, driven, takeovers = counts[1e-3]
    assert labels == 10 and takeovers == 1 and driven >= 9  # the start itself may be level to 1e-3 deg
    rollout = LabellingRollout(trained[0], DaggerConfig(), 0.0, np.random.default_rng(0))
    world = SimpleNamespace(start_height=0.4)
    half = math.radians(30.0) / 2
    tilted = BodyState(np.array([0.0, 0.0, 0.4]), np.array([math.sin(half), 0.0, 0.0, math.cos(half)]),
                       np.zeros(28), np.zeros(3), np.zeros(3), np.zeros(28))
    level = BodyState(**{**tilted.__dict__, "root_quat": np.array([0.0, 0.0, 0.0, 1.0])})
    sunk = BodyState(**{**level.__dict__, "root_pos": np.array([0.0, 0.0, 0.25])})
    assert rollout.in_danger(world, tilted) and rollout.in_danger(world, sunk) and not rollout.in_danger(world, level)
    with pytest.raises(ConfigError, match="--takeover-tilt"):
        DaggerConfig(takeover_tilt_deg=-1.0).check()


def test_expert_gate_refuses_an_expert_that_fails_or_a_foreign_report(dataset, quadruped, tmp_path):
    clips = [d.reference for d in dataset.demos]
    starts = [B.demo_starts(d) for d in dataset.demos]
    physics = B.dataset_physics(dataset, quadruped)
    path = _expert_report(tmp_path / "mpc.json", falls=3)
    with pytest.raises(ExpertGateError, match="3 falls in 10"):
        expert_gate(quadruped, physics, clips, starts, DaggerConfig(), path)
    _expert_report(path, falls=1)
    assert expert_gate(quadruped, physics, clips, starts, DaggerConfig(), path)["falls"] == 1
    _expert_report(path, controller="bc")
    with pytest.raises(ConfigError, match="not an MPC-expert evaluation"):
        expert_gate(quadruped, physics, clips, starts, DaggerConfig(), path)


def test_body_state_helper_round_trip(dataset):
    state, target = V.start_state(B.demo_starts(dataset.demos[0]), 3)
    assert isinstance(state, BodyState) and target.shape == (28,)
    np.testing.assert_allclose(state.joint_pos, dataset.demos[0].joint_pos[3], atol=1e-6)


# ----------------------------------------------------------------------------- PPO fine-tuning
def test_vec_env_steps_every_world_as_the_evaluation_world_does(dataset, quadruped):
    """The RL worlds (in-place randomised model copies, one multi-threaded rollout per control period) give the
    states SimWorld gives at the same friction, base mass, latency and targets."""
    from akd_core.learn.rl_env import RLEnvConfig, TrackingVecEnv

    physics = B.dataset_physics(dataset, quadruped)
    clips = [d.reference for d in dataset.demos]
    starts = [B.demo_starts(d) for d in dataset.demos]
    env = TrackingVecEnv(quadruped, physics, clips, starts, RLEnvConfig(num_envs=2, randomisation=CALM, threads=2))
    draws = [(0, 5, 0.7, 1.1, 0.008), (1, 20, 1.2, 0.9, 0.0)]
    worlds = []
    for i, (clip, frame, mu, mass, lat) in enumerate(draws):
        env.place(i, clip, frame, mu, mass, lat)
        world = E.SimWorld(quadruped, physics, friction=mu, mass_scale=mass, latency_s=lat)
        world.reset(*V.start_state(starts[clip], frame), frame)
        worlds.append(world)
    for k in range(1, 16):
        targets = np.stack([starts[c]["actions"][f + k] for c, f, *_ in draws]).astype(np.float64)
        env.step(targets)
        states = [w.step(t) for w, t in zip(worlds, targets)]
    body = env._body()  # to 2e-5 rad after 15 periods: the rollout starts each period without the solver warm start
    np.testing.assert_allclose(body.joint_pos, [s.joint_pos for s in states], atol=1e-4)
    np.testing.assert_allclose(body.root_pos, [s.root_pos for s in states], atol=1e-4)
    assert np.all(env.frame == [20, 35]) and np.all(env.steps == 15)


def test_vec_env_rewards_tracking_and_punishes_a_push(dataset, quadruped):
    from akd_core.learn.rl_env import REWARD_TERMS, RLEnvConfig, TrackingVecEnv

    physics = B.dataset_physics(dataset, quadruped)
    starts = [B.demo_starts(d) for d in dataset.demos]
    rand = dataclasses.replace(CALM, push_mps=1.0, push_every_s=0.2)
    env = TrackingVecEnv(quadruped, physics, [d.reference for d in dataset.demos], starts,
                         RLEnvConfig(num_envs=2, randomisation=rand, threads=1))
    for i in range(2):
        env.place(i, 0, 0, 1.0, 1.0, 0.0)
    env.next_push[:] = [5, -1]  # world 0 is kicked after 5 periods, world 1 never
    rewards, terms = [], []
    for k in range(1, 10):
        targets = np.repeat(starts[0]["actions"][k][None].astype(np.float64), 2, axis=0)
        r, fell, timeout, t = env.step(targets)
        rewards.append(r)
        terms.append(t)
        assert not fell.any() and not timeout.any()
    assert sum(w for w, _ in REWARD_TERMS.values()) == pytest.approx(1.0)
    assert min(r[1] for r in rewards) > 0.8  # the demo's own targets track its reference
    assert terms[5]["velocity"][0] < 0.05 < 0.5 < terms[5]["velocity"][1]  # 0.75-1.25 m/s off the reference
    obs, privileged = env.observations(noisy=False)
    assert obs.shape == (2, 5 * quadruped.num_dofs + 17) and privileged.shape == (2, 6)
    np.testing.assert_allclose(privileged[:, 4:], [[1.0, 1.0], [1.0, 1.0]])


def test_ppo_starts_from_the_policy_exactly_resumes_and_writes_a_policy(dataset, dataset_path, quadruped, trained,
                                                                         tmp_path):
    """The actor is the policy's network (its mean action decodes to the policy's targets); with the actor frozen
    (critic warm-up) the weights come back unchanged; a re-run with more iterations resumes from the checkpoint; the
    CLI writes an ordinary policy file."""
    from akd_core.learn.ppo import PPOConfig, _models, _Observer, decode, train_ppo
    from akd_core.learn.rl_env import RLEnvConfig, TrackingVecEnv

    policy, meta, _ = trained
    init = save_policy(tmp_path / "bc.pt", policy, meta)
    cfg = PPOConfig(iterations=2, critic_warmup=2, num_envs=4, steps_per_env=4, threads=1, randomisation=CALM)
    env = TrackingVecEnv(quadruped, B.dataset_physics(dataset, quadruped), meta.clips, meta.starts,
                         RLEnvConfig(num_envs=4, randomisation=CALM, threads=1))
    raw, obs = _Observer(policy, 4)(env)
    actor, _ = _models(policy, obs, cfg, quadruped.num_dofs)
    with torch.no_grad():
        np.testing.assert_allclose(decode(policy, raw, actor(obs)), policy.act(raw), atol=1e-5)
    ckpt = tmp_path / "ppo.pt.ckpt"
    frozen, _, metrics = train_ppo(dataset, quadruped, cfg, init=init, checkpoint=ckpt, progress=False)
    assert [h["critic_only"] for h in metrics["history"]] == [True, True]
    for a, b in zip(frozen.state_dict().values(), policy.state_dict().values()):
        torch.testing.assert_close(a, b)
    more, _, metrics3 = train_ppo(dataset, quadruped, dataclasses.replace(cfg, iterations=3), init=init,
                                  checkpoint=ckpt, progress=False)
    assert metrics3["history"][:2] == metrics["history"] and not metrics3["history"][2]["critic_only"]
    assert metrics3["env_steps"] == 3 * 4 * 4
    assert not torch.equal(more.net[0].weight, policy.net[0].weight)  # the actor learnt
    out = tmp_path / "cli.pt"
    assert main(["train-policy", str(dataset_path), "--robot", "quadruped", "--method", "ppo", "--init", str(init),
                 "--ppo-iterations", "1", "--envs", "2", "--steps-per-env", "4", "--critic-warmup", "0",
                 "--ppo-kl", "0.02", "-o", str(out)]) == 0
    cli_policy, cli_meta = load_policy(out)
    assert cli_meta.method == "ppo" and cli_meta.train["start"]["init"] == str(init)
    assert cli_meta.train["config"]["desired_kl"] == 0.02 and cli_meta.train["config"]["num_envs"] == 2
    assert cli_policy.act(raw).shape == (4, quadruped.num_dofs)
