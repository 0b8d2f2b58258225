"""Dynamic feasibility of a reference (akd_core.motion.feasibility): known answers for the centre of pressure, the
support polygon and the residual wrench, an independent check of the centroidal wrench against MuJoCo's inverse
dynamics, and the figures `akd gait` records and prints."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from akd_core.io.errors import MotionError
from akd_core.io.rundir import RunDir
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.legs import find_legs
from akd_core.model.load import load_robot
from akd_core.motion.clip import Motion
from akd_core.motion.feasibility import GRAVITY, centroidal_wrench, convex_hull_2d, feasibility, signed_distance
from akd_core.motion.gait import stance_pose

SUMMARY_KEYS = {"cop_inside_frac", "cop_margin_min_m", "cop_margin_median_m", "residual_wrench_frac_mean",
                "residual_wrench_frac_max", "flight_frac"}


def _rigid_clip(name: str, frames: int = 51, fps: float = 50.0, root_x=None, root_z=None,
                stance: bool = True) -> tuple:
    """The robot in its gait stance pose, held rigid, root path given per frame (default: standing still)."""
    robot = load_robot(name)
    legs = find_legs(robot)
    pose = stance_pose(robot, legs)
    root = np.zeros((frames, 3))
    root[:, 2] = pose.body_height
    if root_x is not None:
        root[:, 0] = root_x
    if root_z is not None:
        root[:, 2] = root_z
    motion = Motion(fps=fps, joint_names=robot.joint_names, joint_pos=np.tile(pose.joint_pos, (frames, 1)),
                    root_pos=root, root_quat=np.tile([0.0, 0.0, 0.0, 1.0], (frames, 1)),
                    foot_names=[leg.foot_link for leg in pose.legs],
                    foot_offsets=np.array([leg.foot_offset for leg in pose.legs]),
                    foot_contacts=np.full((frames, len(pose.legs)), stance))
    return robot, motion


# ----------------------------------------------------------------------------- geometry helpers
def test_convex_hull_and_signed_distance():
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5], [0.5, 0.0]])  # interior and edge points
    hull = convex_hull_2d(square)
    assert len(hull) == 4 and {tuple(p) for p in hull} == {(0, 0), (1, 0), (1, 1), (0, 1)}
    assert signed_distance(np.array([0.5, 0.4]), hull) == pytest.approx(0.4)
    assert signed_distance(np.array([1.3, 0.5]), hull) == pytest.approx(-0.3)
    assert signed_distance(np.array([1.3, 1.4]), hull) == pytest.approx(-0.5)  # nearest is the corner
    segment = convex_hull_2d(np.array([[0, 0], [0.5, 0], [1, 0]]))
    assert len(segment) == 2
    assert signed_distance(np.array([0.5, 0.2]), segment) == pytest.approx(-0.2)
    point = convex_hull_2d(np.array([[2.0, 1.0], [2.0, 1.0]]))
    assert len(point) == 1 and signed_distance(np.array([2.0, 1.5]), point) == pytest.approx(-0.5)


# ----------------------------------------------------------------------------- known answers
@pytest.mark.parametrize("name", ["quadruped", "humanoid"])
def test_standing_still_puts_the_cop_under_the_com(name):
    robot, motion = _rigid_clip(name)
    per_frame, summary = feasibility(robot, motion)
    com = per_frame["com"]
    np.testing.assert_allclose(per_frame["cop"], com[:, :2], atol=1e-3)
    np.testing.assert_allclose(per_frame["force"], np.tile([0, 0, robot.total_mass * GRAVITY], (len(com), 1)),
                               atol=1e-6)
    assert per_frame["margin_m"].min() > 0
    assert summary["cop_inside_frac"] == 1.0 and summary["flight_frac"] == 0.0
    assert summary["residual_wrench_frac_max"] < 1e-9
    assert set(summary) == SUMMARY_KEYS
    json.dumps(summary)


def test_a_flat_sole_supports_with_its_whole_rectangle():
    """Standing on one box foot (0.24 x 0.1 m sole): the polygon is that sole, so the margin is known."""
    robot, motion = _rigid_clip("humanoid")
    motion.foot_contacts[:, 1] = False  # only the left foot in stance
    per_frame, _ = feasibility(robot, motion)
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        pos, _rot = fk(torch.as_tensor(motion.root_pos[:1], dtype=torch.float64),
                       torch.as_tensor(motion.root_quat[:1], dtype=torch.float64),
                       torch.as_tensor(motion.joint_pos[:1], dtype=torch.float64))
    box = robot.link(motion.foot_names[0]).collisions[0]
    centre = (pos[0, robot.link_index(motion.foot_names[0])].numpy() + box.origin[:3, 3])[:2]
    half = np.asarray(box.size)[:2] / 2
    cop = per_frame["cop"][0]
    outside = np.maximum(np.abs(cop - centre) - half, 0.0)  # the CoM (y = 0) is beside the left sole
    expected = -np.linalg.norm(outside) if outside.any() else float(np.min(half - np.abs(cop - centre)))
    assert per_frame["margin_m"][0] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("accel, mu, residual", [(2.0, 1.0, 0.0), (2.0, 0.1, 2.0 / GRAVITY - 0.1),
                                                 (-1.5, 1.0, 0.0)])
def test_constant_horizontal_acceleration_shifts_the_cop(accel, mu, residual):
    """Rigid pose, root x = a t^2 / 2: f = m (a, 0, g), n = 0, so the CoP trails the CoM by c_z a / g."""
    fps, frames = 50.0, 51
    t = np.arange(frames) / fps
    robot, motion = _rigid_clip("quadruped", frames, fps, root_x=0.5 * accel * t ** 2)
    per_frame, summary = feasibility(robot, motion, mu=mu)
    com = per_frame["com"]
    inner = slice(3, -3)  # clear of the one-sided differences at the clip ends
    offset = per_frame["cop"][inner] - com[inner, :2]
    np.testing.assert_allclose(offset[:, 0], -com[inner, 2] * accel / GRAVITY, atol=1e-3)
    np.testing.assert_allclose(offset[:, 1], 0.0, atol=1e-3)
    np.testing.assert_allclose(per_frame["residual_frac"][inner], residual, atol=1e-4)  # float32 root_pos
    assert summary["flight_frac"] == 0.0


def test_free_fall_in_flight_needs_no_wrench_and_hovering_needs_all_of_it():
    fps, frames = 50.0, 26
    t = np.arange(frames) / fps
    robot, falling = _rigid_clip("humanoid", frames, fps, root_z=3.0 - 0.5 * GRAVITY * t ** 2, stance=False)
    per_frame, summary = feasibility(robot, falling)
    assert summary["residual_wrench_frac_max"] < 1e-3  # float32 root_pos: second differences carry ~1e-4 g
    assert summary["flight_frac"] == 1.0 and summary["cop_inside_frac"] is None
    assert np.isnan(per_frame["cop"]).all() and np.isnan(per_frame["margin_m"]).all()
    _robot, hovering = _rigid_clip("humanoid", frames, fps, root_z=np.full(frames, 3.0), stance=False)
    _, summary = feasibility(robot, hovering)
    assert summary["residual_wrench_frac_mean"] == pytest.approx(1.0, abs=1e-9)
    assert summary["residual_wrench_frac_max"] == pytest.approx(1.0, abs=1e-9)
    json.dumps(summary)


def test_feet_in_stance_during_free_fall_have_no_cop_and_count_as_outside():
    fps, frames = 50.0, 26
    t = np.arange(frames) / fps
    robot, motion = _rigid_clip("humanoid", frames, fps, root_z=1.0 - 0.5 * (GRAVITY + 1.0) * t ** 2)
    per_frame, summary = feasibility(robot, motion)  # faster than free fall: the ground would have to pull
    assert (per_frame["force"][:, 2] < 0).all() and np.isnan(per_frame["cop"]).all()
    assert summary["cop_inside_frac"] == 0.0 and summary["cop_margin_min_m"] is None
    np.testing.assert_allclose(per_frame["residual_frac"], 1.0 / GRAVITY, atol=1e-3)


def test_centroidal_wrench_matches_mujoco_inverse_dynamics():
    """An independent check of the CoM, momentum and inertia bookkeeping: MuJoCo's mj_inverse (contacts, joint
    damping and armature off) gives the wrench on the free joint that the motion needs (a smooth random motion of
    every joint with a swaying, yawing, pitching root, at 1 kHz); it must equal (f, n + (c - root) x f)."""
    mujoco = pytest.importorskip("mujoco")
    robot = load_robot("humanoid")
    fps, frames = 1000.0, 401
    t = np.arange(frames) / fps
    rng = np.random.default_rng(0)
    mid = (np.clip(robot.lower, -1, 1) + np.clip(robot.upper, -1, 1)) / 2
    amp = 0.3 * (np.clip(robot.upper, -1, 1) - np.clip(robot.lower, -1, 1)) / 2
    freq, phase = rng.uniform(0.5, 2.0, robot.num_dofs), rng.uniform(0, 2 * np.pi, robot.num_dofs)
    joint_pos = mid + amp * np.sin(2 * np.pi * freq * t[:, None] + phase)
    root_pos = np.stack([0.4 * t, 0.1 * np.sin(3 * t), 1.0 + 0.05 * np.sin(5 * t)], -1)
    yaw, pitch = 0.6 * np.sin(2 * t), 0.2 * np.sin(3 * t)  # yaw about z then pitch about y
    root_quat = np.stack([-np.sin(yaw / 2) * np.sin(pitch / 2), np.cos(yaw / 2) * np.sin(pitch / 2),
                          np.sin(yaw / 2) * np.cos(pitch / 2), np.cos(yaw / 2) * np.cos(pitch / 2)], -1)
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        pos, rot = fk(torch.as_tensor(root_pos), torch.as_tensor(root_quat), torch.as_tensor(joint_pos))
    com, force, moment, mass = centroidal_wrench(robot, pos.numpy(), rot.numpy(), 1.0 / fps)

    model = mujoco.MjModel.from_xml_string(robot.to_mjcf(ground=False))
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    model.dof_damping[:] = 0.0
    model.dof_frictionloss[:] = 0.0
    model.dof_armature[:] = 0.0
    data = mujoco.MjData(model)
    qpos = np.zeros((frames, model.nq))
    qpos[:, :3] = root_pos
    qpos[:, 3:7] = np.c_[root_quat[:, 3], root_quat[:, :3]]  # MuJoCo quaternions are (w, x, y, z)
    for j, name in enumerate(robot.joint_names):
        qpos[:, model.jnt_qposadr[model.joint(name).id]] = joint_pos[:, j]
    qvel = np.zeros((frames, model.nv))
    for k in range(1, frames - 1):  # central differences on the configuration manifold
        mujoco.mj_differentiatePos(model, qvel[k], 2.0 / fps, qpos[k - 1], qpos[k + 1])
    assert model.body_mass.sum() == pytest.approx(mass, rel=1e-9)
    for k in range(2, frames - 2, 50):
        data.qpos[:], data.qvel[:] = qpos[k], qvel[k]
        data.qacc[:] = (qvel[k + 1] - qvel[k - 1]) * fps / 2
        mujoco.mj_inverse(model, data)
        f_mj = data.qfrc_inverse[:3]  # world-frame force on the free joint
        root_rot = data.xmat[1].reshape(3, 3)
        n_mj = root_rot @ data.qfrc_inverse[3:6]  # torque about the root origin, body frame -> world
        n_ours = moment[k] + np.cross(com[k] - root_pos[k], force[k])
        weight = mass * GRAVITY
        # measured: both differ by ~3e-6 m g (N, N m) where the dynamic parts are 0.1-0.25 m g
        assert np.abs(f_mj - force[k]).max() < 1e-4 * weight, (k, f_mj, force[k])
        assert np.abs(n_mj - n_ours).max() < 1e-4 * weight * 1.0, (k, n_mj, n_ours)


def test_mismatched_clip_is_a_motion_error():
    robot, motion = _rigid_clip("quadruped", frames=5)
    with pytest.raises(MotionError, match="joints"):
        feasibility(load_robot("humanoid"), motion)
    with pytest.raises(MotionError, match="mu"):
        feasibility(robot, motion, mu=-1.0)


# ----------------------------------------------------------------------------- the stage and the CLI
@pytest.mark.parametrize("name, prompt", [("quadruped", "a dog trotting forward"), ("humanoid", "walk forward")])
def test_akd_gait_records_and_prints_dynamic_feasibility(tmp_path, capsys, name, prompt):
    from akd_core.cli import main

    out = tmp_path / name
    assert main(["gait", "--robot", name, "--prompt", prompt, "--out", str(out), "--duration", "2",
                 "--no-preview"]) == 0
    printed = capsys.readouterr().out
    assert "dynamic feasibility: CoP inside the support polygon on" in printed
    metrics = json.loads((out / "manifest.json").read_text())["stages"]["gait"]["metrics"]
    assert SUMMARY_KEYS <= set(metrics)
    assert all(isinstance(metrics[k], float) and math.isfinite(metrics[k]) for k in SUMMARY_KEYS), metrics
    assert 0.0 <= metrics["cop_inside_frac"] <= 1.0 and metrics["flight_frac"] == 0.0
    # the reference is recorded as written: the figures of the saved clip, recomputed, are the same
    robot = load_robot(out / "robot.urdf")
    _, again = feasibility(robot, Motion.load(out / "reference.npz", robot))
    assert again == pytest.approx({k: metrics[k] for k in SUMMARY_KEYS}, abs=1e-5)


def test_stage_distill_records_the_figures_of_its_reference(tmp_path):
    from akd_core.sds.distill import stage_distill

    run = RunDir(tmp_path / "sds", create=True)
    metrics = stage_distill(run, robot_spec="quadruped", prompt="a dog trotting forward", prior="tiny", iterations=1,
                            seed=0, config_overrides={"n_gaussians": 400, "width": 32, "height": 32,
                                                      "video_every": 0})
    assert SUMMARY_KEYS <= set(metrics)
    robot = load_robot(run.file("robot.urdf"))
    reference = Motion.load(run.file("reference.npz"), robot)
    _, again = feasibility(robot, reference)
    assert again == pytest.approx({k: metrics[k] for k in SUMMARY_KEYS}, abs=1e-5)
    # and the clip-quality figures `akd gait` records (the run summary's "reference: foot skating ...")
    from akd_core.motion.metrics import motion_metrics

    quality = motion_metrics(robot, reference.root_pos, reference.root_quat, reference.joint_pos, reference.fps,
                             reference.foot_names, reference.foot_offsets, reference.foot_contacts)
    assert len(reference.foot_names) == 4
    for key in ("foot_skate_mps", "penetration_m", "duty_factor"):
        assert metrics[key] == pytest.approx(quality[key], abs=1e-9), key
