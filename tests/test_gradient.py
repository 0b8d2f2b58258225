"""The paper's gradient method (`akd track --method adam`, Newton/Warp): model mapping vs our FK, start state,
gradients vs finite differences, naive vs optimised, effort limits, checkpoint resume."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from akd_core.io.errors import ConfigError
from akd_core.io.rundir import RunDir
from akd_core.model.kinematics import ForwardKinematics, geometry_corners
from akd_core.model.robot import load_urdf
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.physics import gradient as T
from akd_core.physics import metrics as M
from akd_core.physics import params as P
from tests.conftest import example_robot_urdf

A1_FEET = ["FR_foot", "FL_foot", "RR_foot", "RL_foot"]


def trot_in_place(robot, duration: float = 0.5, fps: float = 50.0, amp: float = 0.25, freq: float = 2.0,
                  height: float = 0.3) -> Motion:
    """A1-style trot in place: diagonal legs lift (thigh +amp, calf -2 amp) in antiphase around a standing pose."""
    n = int(round(duration * fps)) + 1
    t = np.arange(n) / fps
    q = np.zeros((n, robot.num_dofs))
    stance = np.stack([np.sin(2 * np.pi * freq * t + (0.0 if foot[:2] in ("FR", "RL") else np.pi)) <= 0.0
                       for foot in A1_FEET], axis=1)  # (F, 4) intended contacts: not lifting
    for j, name in enumerate(robot.joint_names):
        phase = 0.0 if name[:2] in ("FR", "RL") else np.pi
        lift = np.maximum(np.sin(2 * np.pi * freq * t + phase), 0.0)
        if "thigh" in name:
            q[:, j] = 0.8 + amp * lift
        elif "calf" in name:
            q[:, j] = -1.5 - 2 * amp * lift
    return Motion(fps=fps, joint_names=robot.joint_names, joint_pos=q, root_pos=np.tile([0.0, 0.0, height], (n, 1)),
                  root_quat=np.tile([0.0, 0.0, 0.0, 1.0], (n, 1)), foot_names=A1_FEET,
                  foot_offsets=np.zeros((4, 3)), foot_contacts=stance, prompt="trot in place")


@pytest.fixture(scope="module")
def a1():
    return load_urdf(example_robot_urdf("a1"))


@pytest.fixture(scope="module")
def problem(a1):
    return T.build_problem(a1, trot_in_place(a1, duration=0.3), T.AdamConfig())


def test_newton_bodies_match_our_fk_joint_by_name(a1, problem):
    """Random joint angles + a tilted moving root in Newton's coordinates give the same link poses as our FK."""
    rng = np.random.default_rng(0)
    q = rng.uniform(a1.lower, a1.upper)
    quat = np.array([0.1, -0.2, 0.3, 0.9])
    quat /= np.linalg.norm(quat)
    root = np.array([0.1, -0.2, 0.5])
    gq, gqd = problem.sim.generalized_state(root, quat, q, np.zeros(3), np.zeros(3), np.zeros(a1.num_dofs))
    newton_pos = T._bodies_at(problem.sim, gq, gqd)
    link_pos, _ = ForwardKinematics(a1)(torch.tensor(root[None]), torch.tensor(quat[None]),
                                           torch.tensor(q[None]))
    ours = link_pos[0, torch.as_tensor(problem.sim.body_link_ids)].numpy()
    assert len(problem.sim.body_ids) == 13  # base + 12 leg links after collapsing fixed joints
    np.testing.assert_allclose(newton_pos, ours, atol=1e-5)


def test_velocity_convention_round_trips_root_origin_velocity(problem, a1):
    quat = np.array([0.0, 0.0, np.sin(0.3), np.cos(0.3)])
    lin, ang = np.array([0.4, -0.1, 0.2]), np.array([0.3, 0.5, -0.7])
    gq, gqd = problem.sim.generalized_state(np.zeros(3), quat, np.zeros(a1.num_dofs), lin, ang,
                                            np.arange(a1.num_dofs) * 0.1)
    parts = problem.sim.split_state(gq, gqd)
    np.testing.assert_allclose(parts["root_lin_vel"], lin, atol=1e-12)
    np.testing.assert_allclose(parts["root_ang_vel"], ang, atol=1e-12)
    np.testing.assert_allclose(parts["joint_vel"], np.arange(a1.num_dofs) * 0.1)
    # Newton stores the COM velocity: it differs from the origin velocity by omega x (R com)
    com_world = M.quat_to_matrix(quat) @ problem.sim.root_com
    np.testing.assert_allclose(gqd[problem.sim.free_qd:problem.sim.free_qd + 3], lin + np.cross(ang, com_world))


def test_start_state_lowest_point_touches_ground(a1, problem):
    """The lowest point of the collision geometry (a1's sphere feet exactly: centre minus radius) touches z = 0; every
    corner/pole point of geometry_corners is then above it (the poles of a sphere turned with the shin are not its
    lowest points: placing those on the ground sank the feet 4.3 mm)."""
    from akd_core.physics.targets import support_geometry

    parts = problem.sim.split_state(problem.q0, problem.qd0)
    fk = ForwardKinematics(a1)

    def lowest(idx, pts, radius=0.0):
        world = fk.link_points(torch.tensor(parts["root_pos"][None]), torch.tensor(parts["root_quat"][None]),
                               torch.tensor(parts["joint_pos"][None]), torch.as_tensor(idx), torch.as_tensor(pts))
        return float((world[0, :, 2].numpy() - radius).min())

    idx, pts, radius = support_geometry(a1)
    assert abs(lowest(idx, pts, radius)) < 1e-6
    assert lowest(*geometry_corners(a1)) > -1e-6


def _loss(problem, targets, qd0, clip=1e9):
    q0 = torch.tensor(problem.q0, dtype=torch.float32)
    result = T.rollout(problem.sim, q0, qd0, targets, clip=clip)
    return T.tracking_loss(problem, result, targets)["link_l1_m"]


def test_gradients_in_flight_match_finite_differences(a1):
    """No contact (robot 1 m up): Featherstone + our PD are smooth, so AD must match central differences closely.
    Tolerance 5 % + 4e-5 absolute: float32 rollouts make central differences noisy by ~3e-5 at eps 1e-2 rad
    (measured: the same entries at eps 1e-3 move by up to 4e-4), large entries agree within ~1 %."""
    motion = trot_in_place(a1, duration=0.1)
    problem = T.build_problem(a1, motion, T.AdamConfig())
    problem.q0[problem.sim.free_q + 2] += 1.0
    base = torch.tensor(problem.reference.joint_pos, dtype=torch.float32) + 0.05
    targets = base.clone().requires_grad_(True)
    qd0 = torch.tensor(problem.qd0, dtype=torch.float32, requires_grad=True)
    _loss(problem, targets, qd0).backward()
    eps = 1e-2
    for frame, joint in [(1, 1), (2, 2), (3, 4), (2, 8)]:
        plus, minus = base.clone(), base.clone()
        plus[frame, joint] += eps
        minus[frame, joint] -= eps
        with torch.no_grad():
            fd = (_loss(problem, plus, qd0) - _loss(problem, minus, qd0)) / (2 * eps)
        assert float(targets.grad[frame, joint]) == pytest.approx(float(fd), rel=0.05, abs=4e-5), (frame, joint)


def test_gradients_in_contact_agree_in_direction_with_finite_differences(problem):
    """Standing trot with foot contact: Featherstone's contact gradients are approximate (kf friction, contacts
    fixed per chunk), so we check the directional derivative along the AD gradient: within 30 %."""
    base = torch.tensor(problem.reference.joint_pos, dtype=torch.float32)
    targets = base.clone().requires_grad_(True)
    qd0 = torch.tensor(problem.qd0, dtype=torch.float32)
    _loss(problem, targets, qd0).backward()
    direction = targets.grad / targets.grad.norm()
    eps = 5e-3
    with torch.no_grad():
        fd = (_loss(problem, base + eps * direction, qd0) - _loss(problem, base - eps * direction, qd0)) / (2 * eps)
    ad = float(targets.grad.norm())  # = grad . direction
    assert float(fd) > 0
    assert ad == pytest.approx(float(fd), rel=0.3)


def test_chunk_gradient_clipping_bounds_each_boundary(problem):
    base = torch.tensor(problem.reference.joint_pos, dtype=torch.float32)
    targets = base.clone().requires_grad_(True)
    _loss(problem, targets, torch.tensor(problem.qd0, dtype=torch.float32), clip=1e-4).backward()
    # every chunk's target gradient was clipped to norm <= 1e-4, and each control frame touches two chunks
    per_frame = targets.grad.norm(dim=1)
    assert float(per_frame.max()) <= 2e-4 + 1e-9
    assert float(per_frame.max()) > 0


def test_optimised_tracking_beats_naive_within_effort_limits(a1):
    motion = trot_in_place(a1, duration=0.5)
    tracked, metrics = T.track_adam(a1, motion, T.AdamConfig(iterations=3), progress=False)
    assert metrics["link_pos_err_m"] < metrics["naive_link_pos_err_m"]
    assert metrics["selected_targets"] == "optimised"
    assert not metrics["fell"] and not metrics["naive_fell"]
    effort = np.asarray(a1.effort_limit)
    assert np.all(np.abs(tracked.joint_torques) <= effort + 1e-4)
    assert metrics["max_torque_ratio"] <= 1.0 + 1e-6
    assert tracked.naive is not None
    np.testing.assert_allclose(tracked.naive.pd_targets, motion.joint_pos, atol=1e-6)
    assert tracked.pd_targets.shape == (motion.num_frames, a1.num_dofs)
    assert np.all(tracked.pd_targets >= a1.lower - 1e-6) and np.all(tracked.pd_targets <= a1.upper + 1e-6)
    target_rate = np.abs(np.diff(tracked.pd_targets, axis=0)) * motion.fps
    assert np.all(target_rate <= a1.velocity_limit + 1e-4), "PD targets ask for more than the URDF velocity limit"


def test_optimised_targets_that_track_worse_than_naive_are_not_kept(a1, monkeypatch, caplog):
    """If the (greedy, windowed) optimisation ends worse than plain PD replay of the reference, the reference
    angles are kept as the PD targets, and the metrics and log say so."""
    motion = trot_in_place(a1, duration=0.4)

    def bad_optimise(problem, iterations, checkpoint=None, progress=True, callback=None, time_budget_s=None):
        # targets with the thighs swung 0.3 rad off the reference (within position and velocity limits)
        j = [a1.joint_names.index(n) for n in a1.joint_names if "thigh" in n]
        targets = problem.reference.joint_pos.astype(np.float32).copy()
        targets[:, j] = np.clip(targets[:, j] + 0.3, a1.lower[j], a1.upper[j])
        return targets, problem.qd0, {"iterations": 1, "best_loss": 1.0, "history": [], "windows": 1,
                                      "early_stops": 0}

    monkeypatch.setattr(T, "optimise", bad_optimise)
    with caplog.at_level("WARNING"):
        tracked, metrics = T.track_adam(a1, motion, T.AdamConfig(iterations=1), progress=False)
    assert metrics["selected_targets"] == "naive" and "keeping the naive targets" in caplog.text
    assert metrics["link_pos_err_m"] == metrics["naive_link_pos_err_m"]
    np.testing.assert_allclose(tracked.pd_targets, motion.joint_pos, atol=1e-6)
    assert tracked.naive is not None and tracked.naive is not tracked


def test_a_blown_up_naive_simulation_is_retried_with_a_finer_step(a1, monkeypatch, caplog):
    """go2's 40 g feet blow the 1 ms simulation up on some trots; track_motion then halves sim_dt (here the blow-up
    is reported by the real simulator wrapped to fail at 1 ms)."""
    motion = trot_in_place(a1, duration=0.3)
    real_simulate = T.simulate
    steps_seen = []

    def simulate_failing_at_1ms(problem, targets, qd0=None):
        result = real_simulate(problem, targets, qd0)
        steps_seen.append(problem.sim.sim_dt)
        if problem.sim.sim_dt > 0.9e-3:
            result = dataclasses.replace(result, diverged_at=5)
        return result

    monkeypatch.setattr(T, "simulate", simulate_failing_at_1ms)
    with caplog.at_level("WARNING"):
        _, metrics = T.track_adam(a1, motion, T.AdamConfig(iterations=0), progress=False)
    assert "retrying at 0.0005 s" in caplog.text
    assert metrics["sim_dt_s"] == pytest.approx(5e-4) and not metrics["naive_diverged"] and not metrics["fell"]
    assert steps_seen[:2] == [pytest.approx(1e-3), pytest.approx(5e-4)]


def test_rate_limit_projection_bounds_steps_and_keeps_slow_sequences():
    max_step = torch.tensor([0.1, 1.0])
    fast = torch.tensor([[0.0, 0.0], [0.5, 0.5], [0.5, 0.6], [-0.5, 0.6]])
    out = T.rate_limited(fast, max_step, previous=torch.tensor([0.05, 0.0]))
    assert torch.all((out[1:] - out[:-1]).abs() <= max_step + 1e-7)
    assert torch.all((out[0] - torch.tensor([0.05, 0.0])).abs() <= max_step + 1e-7)
    np.testing.assert_allclose(out[:, 1].numpy(), fast[:, 1].numpy())  # joint 1 was within its limit
    slow = torch.linspace(0, 0.3, 7)[:, None].repeat(1, 2)
    assert torch.equal(T.rate_limited(slow, max_step), slow)


def test_stage_track_with_method_adam_writes_tracked_npz_and_metrics(a1, tmp_path):
    run = RunDir(tmp_path / "run", create=True)
    a1.to_urdf(run.file("robot.urdf"))
    trot_in_place(a1, duration=0.3).save(run.file("reference.npz"))
    from akd_core.physics.tracker import CHECKPOINT, stage_track

    metrics = stage_track(run, method="adam", iterations=1, window_s=0.2, progress=False)
    assert metrics["method"] == "adam" and metrics["engine"] == "newton"
    assert metrics["iterations"] == 2 and metrics["windows"] == 2 and run.file(CHECKPOINT).exists()
    tracked = TrackedMotion.load(run.file("tracked.npz"))
    assert tracked.naive is not None and tracked.joint_names == a1.joint_names
    assert tracked.dt == pytest.approx(1 / 50)
    stage = run.stage("track")
    assert stage["status"] == "done"
    for key in ("joint_rmse_rad", "link_pos_err_m", "root_pos_err_m", "foot_skate_mps", "penetration_m", "fell",
                "torque_saturation_frac", "contact_schedule_match"):
        assert key in stage["metrics"] and f"naive_{key}" in stage["metrics"]


def test_interrupted_optimisation_resumes_to_the_same_result(a1, tmp_path):
    """Ctrl-C in the second window saves the checkpoint; a re-run continues there and ends bit-identical to an
    uninterrupted run (the rollout and Adam are deterministic on CPU)."""
    motion = trot_in_place(a1, duration=0.3)
    cfg = T.AdamConfig(window_s=0.2, patience=100)
    problem = T.build_problem(a1, motion, cfg)
    straight, qd_straight, _ = T.optimise(problem, 2, progress=False)
    checkpoint = tmp_path / "ckpt.pt"

    def interrupt(info):
        if info["window"] == 1 and info["iteration"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        T.optimise(problem, 2, checkpoint, progress=False, callback=interrupt)
    saved = torch.load(checkpoint, weights_only=False)
    assert saved["state"]["window_index"] == 1 and saved["state"]["iterations"] == 3
    calls = []
    resumed, qd_resumed, info = T.optimise(problem, 2, checkpoint, progress=False, callback=calls.append)
    assert len(calls) == 1 and info["iterations"] == 4  # only the one missing iteration ran
    np.testing.assert_array_equal(resumed, straight)
    np.testing.assert_array_equal(qd_resumed, qd_straight)
    assert not np.allclose(resumed, problem.reference.joint_pos)  # the optimiser did change the targets


def test_a_toppled_robot_is_reported_as_fallen(a1, problem):
    """fell is computed from the simulated root: a clip whose root rolls onto its side reads fell = True."""
    result = T.simulate(problem, problem.reference.joint_pos)
    tracked = T.to_tracked(problem, result, problem.reference.joint_pos)
    assert not T.adam_metrics(problem, tracked, result.torque_peak)["fell"]
    roll = np.linspace(0.0, np.pi / 2, tracked.num_steps)  # rolls 90 deg about x over the clip
    tracked.root_quat = np.stack([np.sin(roll / 2), 0 * roll, 0 * roll, np.cos(roll / 2)], axis=-1)
    metrics = T.adam_metrics(problem, tracked, result.torque_peak)
    assert metrics["fell"] and metrics["max_tilt_deg"] == pytest.approx(90.0, abs=1e-3)


def test_bad_options_name_the_option(a1, tmp_path):
    with pytest.raises(ConfigError, match="kp"):
        P.default_physics(a1, kp=[1.0, 2.0])
    from akd_core.physics.tracker import stage_track

    with pytest.raises(ConfigError, match="unknown tracking options"):
        stage_track(RunDir(tmp_path), bogus=1)


def test_default_gains_scale_with_mass_and_inertia(a1):
    physics = P.default_physics(a1)
    np.testing.assert_allclose(physics.kp, 4.5 * a1.total_mass)
    inertia = P.subtree_inertia_about_joints(a1)
    # hips carry the whole leg, calves only the shank: hip inertia > calf inertia, so kd_hip > kd_calf
    hip, calf = a1.joint_names.index("FR_hip_joint"), a1.joint_names.index("FR_calf_joint")
    assert inertia[hip] > inertia[calf] > 0
    assert physics.kd[hip] > physics.kd[calf]


# 4 s forward gait clips of generate_gait: (robot, pattern, speed m/s, frequency Hz or None = the gait's own)
GAIT_CLIPS = {
    "quadruped-trot": ("quadruped", "trot", 0.4, 1.6),
    "quadruped-walk": ("quadruped", "walk", 0.3, 1.0),
    "a1-trot": ("a1", "trot", 0.6, None),
    "a1-walk": ("a1", "walk", 0.3, None),
}


def gait_robot(name: str):
    from akd_core.model.load import load_robot

    return load_urdf(example_robot_urdf("a1")) if name == "a1" else load_robot(name)


def gait_clip(robot, pattern: str, speed: float, frequency: float | None, duration: float = 4.0) -> Motion:
    """A forward-moving reference clip from the procedural gait library."""
    from akd_core.motion.gait import GaitSpec, generate_gait

    return generate_gait(robot, GaitSpec(pattern=pattern, speed=speed, frequency=frequency), duration=duration,
                         fps=50.0, prompt=f"{pattern} forward")


@pytest.mark.slow
@pytest.mark.parametrize("case", ["quadruped-trot", "a1-trot"])
def test_adam_on_a_four_second_gait_beats_naive_within_effort_limits(case):
    """The gradient method on real gait clips: upright, optimised link error < naive, torques within limits."""
    name, pattern, speed, frequency = GAIT_CLIPS[case]
    robot = gait_robot(name)
    motion = gait_clip(robot, pattern, speed, frequency)
    tracked, metrics = T.track_adam(robot, motion, T.AdamConfig(), progress=False)
    assert not metrics["fell"], metrics
    assert metrics["link_pos_err_m"] < 0.75 * metrics["naive_link_pos_err_m"]
    effort = np.asarray(robot.effort_limit)
    assert np.all(np.abs(tracked.joint_torques) <= effort + 1e-4)
