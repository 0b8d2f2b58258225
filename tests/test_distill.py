"""SDS distillation: losses, a full tiny-CogVideoX iteration on CPU, exact resume, and the known-answer recovery."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from akd_core.io.errors import ConfigError
from akd_core.io.rundir import RunDir
from akd_core.model.load import load_robot
from akd_core.model.spatial.tensor import rotvec_to_matrix
from akd_core.motion.clip import Motion
from akd_core.sds.clip_render import MotionParameters, fit_clip
from akd_core.sds.distill import (
    DistillConfig,
    distill,
    float_loss,
    ground_loss,
    render_motion,
    skate_loss,
    smoothness_loss,
    stage_distill,
)


def test_smoothness_loss_is_mean_abs_laplacian():
    params = torch.tensor([[0.0, 1.0], [1.0, 1.0], [4.0, 1.0], [9.0, 2.0]])
    # second differences: rows (0,1,4) -> 2, (1,4,9) -> 2 ; column 2: (1,1,1) -> 0, (1,1,2) -> 1
    assert float(smoothness_loss(params)) == pytest.approx((2 + 2 + 0 + 1) / 4)
    assert float(smoothness_loss(torch.arange(10.0)[:, None] * 3)) == 0.0  # linear motion is free


def test_ground_loss_counts_only_points_below_ground():
    z = torch.tensor([[0.1, -0.02, 0.0, -0.04]])
    assert float(ground_loss(z)) == pytest.approx(0.06 / 4)


def test_float_loss_is_the_mean_height_of_each_frames_lowest_point():
    z = torch.tensor([[0.10, 0.05, 0.30], [0.0, 0.2, 0.4], [-0.01, 0.5, 0.5]])
    assert float(float_loss(z)) == pytest.approx((0.05 + 0.0 + 0.0) / 3)
    assert float(float_loss(z, clearance=0.02)) == pytest.approx(0.03 / 3)


@pytest.mark.slow  # ~70 s on 2 cores (make test budget); the loss itself has fast known-answer tests above
def test_float_term_brings_a_lifted_body_back_to_the_ground():
    """With the SDS weight at zero, the paper's objective leaves a body lifted 10 cm where it is (L_ground only
    pushes up); AKD's L_float (default weight and 2 cm clearance) sets it back down to within the clearance."""
    from akd_core.sds.clip_render import standing_height
    from akd_core.sds.prior import make_prior

    robot = load_robot("quadruped")
    prior = make_prior("tiny", "a dog trotting", seed=0)
    init = _standing_clip(robot, prior.num_frames, 8.0)
    init.root_pos[:, 2] = standing_height(robot) + 0.10
    lowest = {}
    for name, weight in (("paper", 0.0), ("akd", DistillConfig.lambda_float)):
        config = DistillConfig(iterations=40, n_gaussians=200, width=32, height=32, video_every=0, sds_weight=0.0,
                               lambda_smooth=0.0, lambda_float=weight, lr_final=1.0,
                               lambda_skate=0.0 if name == "paper" else 3e5)
        result = distill(robot, prior, init, config, progress=False)
        lowest[name] = result.history[-1]["float"]
    # history's "float" is L_float: the mean height of each frame's lowest point above the 2 cm clearance
    print("L_float after 40 iterations:", lowest)
    assert lowest["paper"] > 0.10 - DistillConfig.float_clearance - 0.005
    assert lowest["akd"] < 0.005


def test_skate_loss_is_the_mean_speed_of_feet_on_the_ground():
    fps = 10.0
    t = torch.arange(5.0)[:, None]
    planted = torch.stack([torch.full((5, 1), 0.3), torch.zeros(5, 1), torch.zeros(5, 1)], -1)  # (F, K=1, 3)
    sliding = torch.stack([0.05 * t, 0.0 * t, 0.0 * t], -1)  # 0.05 m per frame at 10 fps: 0.5 m/s on the ground
    lifted = sliding + torch.tensor([0.0, 0.0, 0.10])  # the same slide 10 cm up: a swing, not a slide
    assert float(skate_loss(planted, fps)) == pytest.approx(0.0, abs=1e-5)
    # weight sigmoid((0.02 - 0) / 0.005) = 0.982 on the ground, 1e-7 at 10 cm
    assert float(skate_loss(sliding, fps)) == pytest.approx(0.5 * torch.sigmoid(torch.tensor(4.0)).item(), rel=1e-4)
    assert float(skate_loss(lifted, fps)) < 1e-6
    both = torch.cat([sliding, lifted], 1)  # two feet: the mean over feet
    assert float(skate_loss(both, fps)) == pytest.approx(float(skate_loss(sliding, fps)) / 2, rel=1e-4)
    # the contact weight carries no gradient: raising a sliding foot is not a way to lower the loss
    feet = sliding.clone().requires_grad_(True)
    skate_loss(feet, fps).backward()
    assert torch.all(feet.grad[..., 2] == 0) and feet.grad[..., 0].abs().sum() > 0


def test_skate_weight_must_be_non_negative():
    with pytest.raises(ConfigError, match="lambda-skate"):
        DistillConfig(lambda_skate=-1.0)


@pytest.mark.slow  # ~40 s on 2 cores (make test budget)
def test_skate_term_stops_feet_sliding_under_a_gliding_body():
    """A rest pose carried forward at 0.3 m/s (the paper's constant-velocity init) slides all four feet. With the
    SDS weight at zero, the paper's objective keeps the slide; AKD's L_skate removes it (the body stops, or the legs
    swing back under it). The distilled clip carries the detected feet, so reference.npz has stance flags."""
    from akd_core.sds.prior import make_prior

    robot = load_robot("quadruped")
    prior = make_prior("tiny", "a dog trotting", seed=0)
    init = _standing_clip(robot, prior.num_frames, 8.0)
    assert not init.foot_names  # the constant-velocity init names no feet: distill finds them
    skate = {}
    for name, weight in (("paper", 0.0), ("akd", 3e5)):
        config = DistillConfig(iterations=40, n_gaussians=200, width=32, height=32, video_every=0, sds_weight=0.0,
                               lambda_smooth=0.0, lambda_skate=weight, lr_final=1.0)
        result = distill(robot, prior, init, config, progress=False)
        skate[name] = (result.history[0]["skate"], result.history[-1]["skate"])
    print("L_skate (m/s) first -> last iteration:", skate)
    assert sorted(result.motion.foot_names) == sorted(
        ["front_left_foot", "front_right_foot", "hind_left_foot", "hind_right_foot"])
    assert skate["paper"][0] == pytest.approx(0.3 * torch.sigmoid(torch.tensor(4.0)).item(), rel=0.05)
    assert skate["paper"][1] > 0.25
    assert skate["akd"][1] < 0.06  # 0.038 measured: a fifth of the slide left after 40 Adam steps


def test_rotvec_matrix_matches_rodrigues_and_is_smooth_at_zero():
    v = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64)
    angle = v.norm()
    axis = v / angle
    skew = torch.tensor([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    expected = torch.eye(3, dtype=torch.float64) + torch.sin(angle) * skew + (1 - torch.cos(angle)) * skew @ skew
    assert torch.allclose(rotvec_to_matrix(v), expected, atol=1e-12)
    zero = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    rotvec_to_matrix(zero).sum().backward()
    assert torch.isfinite(zero.grad).all()


def _standing_clip(robot, frames: int, fps: float) -> Motion:
    from akd_core.sds.clip_render import constant_velocity_init, standing_height

    return constant_velocity_init(robot, frames, fps, speed=0.3, height=standing_height(robot))


def test_parameters_respect_joint_limits_after_projection():
    robot = load_robot("quadruped")
    params = MotionParameters(_standing_clip(robot, 5, 8.0), robot)
    with torch.no_grad():
        params.joint_pos += 10.0
    params.project_to_limits()
    assert torch.all(params.joint_pos <= torch.as_tensor(robot.upper, dtype=torch.float32) + 1e-6)


def test_tiny_cogvideox_runs_a_full_iteration_on_cpu(tmp_path):
    from akd_core.sds.prior import make_prior

    robot = load_robot("quadruped")
    prior = make_prior("tiny", "a dog trotting", seed=0)
    init = _standing_clip(robot, prior.num_frames, 8.0)
    config = DistillConfig(iterations=2, n_gaussians=500, width=32, height=32, checkpoint_every=1, video_every=0)
    result = distill(robot, prior, init, config, out_dir=tmp_path, progress=False)
    assert len(result.history) == 2 and all(np.isfinite(list(r.values())).all() for r in result.history)
    assert not np.allclose(result.motion.joint_pos, init.joint_pos), "SDS gradients moved the joints"
    assert (tmp_path / "checkpoint.pt").exists() and (tmp_path / "losses.csv").exists()


@pytest.mark.parametrize("camera", ["follow", "orbit"])
def test_resume_continues_with_identical_parameters(tmp_path, camera):
    from akd_core.sds.prior import make_prior

    robot = load_robot("quadruped")
    prior = make_prior("tiny", "a dog trotting", seed=0)
    init = _standing_clip(robot, prior.num_frames, 8.0)
    config = DistillConfig(iterations=4, n_gaussians=400, width=32, height=32, checkpoint_every=2, video_every=0,
                           camera=camera, blur_px=2.0, lr_final=0.5, lr_decay_start=0.25)
    straight = distill(robot, prior, init, config, out_dir=tmp_path / "a", progress=False)
    # stop ("kill") after 2 of the 4 iterations, then resume from the checkpoint
    first = distill(robot, prior, init, config, out_dir=tmp_path / "b", progress=False, max_steps=2)
    state = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=False)
    assert state["iteration"] == 2
    np.testing.assert_array_equal(state["params"]["joint_pos"].numpy(), first.motion.joint_pos)
    resumed = distill(robot, prior, init, config, out_dir=tmp_path / "b", resume=True, progress=False)
    assert resumed.iterations_run == 2
    np.testing.assert_allclose(resumed.motion.joint_pos, straight.motion.joint_pos, atol=1e-6)
    np.testing.assert_allclose(resumed.motion.root_pos, straight.motion.root_pos, atol=1e-6)


@pytest.mark.slow
def test_oracle_distillation_descends_to_the_target_latents(tmp_path):
    """Known answer in latent space: distil a gait-library trot from a standing start on the same root path
    through FK -> LBS -> render -> tiny VAE encode -> SDS gradient -> Adam with the oracle prior, whose SDS
    gradient is exactly z - z*. The latent distance to the target must fall by at least a third (measured 8.78 ->
    5.25, -40 %, since issue 16's gait-library cadence changed the target trot; it plateaus there through the random
    VAE, and fell by more than half against the earlier target).

    (Recovering the joint angles themselves is NOT asserted: with one camera at 64 px and a random tiny VAE the
    legs' hidden degrees of freedom are not identifiable; see docs/benchmarks.md for the measured joint errors.)"""
    from akd_core.motion.stage import stage_gait
    from akd_core.sds.prior.tiny import save_tiny_pretrained

    target = RunDir(tmp_path / "target", create=True)
    stage_gait(target, robot_spec="quadruped", prompt="a dog trotting forward", duration=1.2, fps=50, seed=0)
    run = RunDir(tmp_path / "recover", create=True)
    tiny = save_tiny_pretrained(tmp_path / "tiny", seed=0)  # the oracle encodes through this folder's VAE
    metrics = stage_distill(run, robot_spec="quadruped", prompt="a dog trotting forward", prior="oracle",
                            target=target.path, iterations=60, init="standing", seed=0, video_model=tiny,
                            config_overrides={"n_gaussians": 2000, "camera": "fixed", "video_every": 0,
                                              "lambda_smooth": 0.0, "lambda_ground": 1e4, "lambda_skate": 0.0,
                                              "camera_margin": 1.4, "blur_px": 0.0, "lr_final": 1.0})
    print("oracle distillation:", metrics)
    assert metrics["final_sds"] < (2 / 3) * metrics["initial_sds"]
    assert Motion.load(run.file("reference.npz")).num_frames > 9


def test_blur_and_learning_rate_schedules():
    config = DistillConfig(iterations=100, blur_px=4.0, blur_until=0.5, lr_final=0.1, lr_decay_start=0.6)
    assert [config.blur_at(i) for i in (0, 25, 50, 90)] == pytest.approx([4.0, 2.0, 0.0, 0.0])
    assert [config.lr_scale(i) for i in (0, 60, 80, 100)] == pytest.approx([1.0, 1.0, 0.55, 0.1])
    for bad in ({"camera": "spin"}, {"blur_px": -1.0}, {"lr_final": 0.0}, {"camera_elevation_range": (50.0, 10.0)}):
        with pytest.raises(ConfigError):
            DistillConfig(**bad)


def test_gaussian_blur_matches_scipy_and_keeps_flat_images():
    from scipy.ndimage import gaussian_filter

    from akd_core.render import gaussian_blur

    frames = torch.rand(2, 3, 20, 24, dtype=torch.float64)
    ours = gaussian_blur(frames, 1.7).numpy()
    ref = gaussian_filter(frames.numpy(), sigma=(0, 0, 1.7, 1.7), mode="nearest", truncate=6 / 1.7)
    np.testing.assert_allclose(ours, ref, atol=1e-12)
    flat = torch.full((1, 3, 8, 8), 0.3)
    assert torch.allclose(gaussian_blur(flat, 3.0), flat)
    assert gaussian_blur(frames, 0.0) is frames


def test_oracle_sees_the_target_through_every_orbit_view():
    """Multi-view known answer: the oracle re-renders its target through each iteration's random camera and blur,
    so a clip equal to the target has zero SDS gradient in every view, while a standing clip is pulled towards it."""
    from akd_core.sds.distill import target_view_renderer
    from akd_core.sds.prior import OracleVideoPrior, make_prior

    robot = load_robot("quadruped")
    base = make_prior("tiny", "a dog trotting", seed=0)
    standing = _standing_clip(robot, base.num_frames, 8.0)
    target = fit_clip(standing, base.num_frames, 8.0)
    knees = [i for i, name in enumerate(robot.joint_names) if name.endswith("knee")]
    phase = np.arange(base.num_frames)[:, None] + np.arange(len(knees))[None]
    target.joint_pos[:, knees] = np.clip(0.8 * np.sin(phase), robot.lower[knees], robot.upper[knees])
    config = DistillConfig(iterations=1, n_gaussians=400, width=32, height=32, camera="orbit", blur_px=3.0,
                           lambda_smooth=0.0, lambda_ground=0.0, video_every=0)
    frame_on, render_target, first = target_view_renderer(robot, target, config, 32, 32)
    views = []

    def recording_renderer(view):
        views.append(view)
        return render_target(view)

    oracle = OracleVideoPrior.from_prior(base, render_target(first), target_renderer=recording_renderer)
    # one step each: Adam turns float noise into full-size steps, so the first SDS losses are what to compare
    same = distill(robot, oracle, target, config, progress=False, frame_on=frame_on)
    config.iterations = 3
    moved = distill(robot, oracle, standing, config, progress=False, frame_on=frame_on)
    assert same.history[0]["sds"] < 1e-9 * moved.history[0]["sds"]
    # both runs draw the same first view from the same seed, so the oracle renders it once (cached)
    assert len(views) == 3 and len({float(v.viewmats[0, 0, 0]) for v in views}) == 3, "a new camera each step"
    assert [v.blur_px for v in views] == pytest.approx([config.blur_at(i) for i in range(3)])
    assert not np.allclose(moved.motion.joint_pos, standing.joint_pos)
    views.clear()
    fixed = DistillConfig(iterations=3, n_gaussians=400, width=32, height=32, camera="fixed", blur_px=0.0,
                          video_every=0)
    distill(robot, oracle, standing, fixed, progress=False, frame_on=frame_on)
    assert len(views) == 1, "one camera, no blur: the target is rendered and encoded once"


def test_pixel_oracle_encodes_the_fitted_frames():
    from akd_core.sds.prior import OracleVideoPrior, make_prior

    base = make_prior("tiny", "a dog trotting", seed=0)
    video = torch.rand(5, 3, 32, 32)
    oracle = OracleVideoPrior.from_prior(base, video, space="pixels")
    assert oracle.target_latents.shape == (1, base.num_frames, 3, base.height, base.width)
    assert torch.equal(oracle.target_latents[0], base.fit_video(video))
    with pytest.raises(ConfigError, match="space must be one of latent, pixels"):
        OracleVideoPrior.from_prior(base, video, space="rgb")


@pytest.mark.slow
@pytest.mark.timeout(2400)  # 400 iterations: ~10 min alone on 2 cores, more on a loaded machine
def test_pixel_oracle_recovers_the_trot_from_orbiting_cameras(tmp_path):
    """The known-answer criterion of the SDS issue, on pixels: render a gait-library trot of the built-in quadruped
    as the target, start standing on the same root path, distil with the oracle prior through FK -> LBS -> render
    -> SDS gradient -> Adam, with a random camera per iteration, a coarse-to-fine blur and a decaying learning
    rate. The mean joint error must fall by at least 70 % and below 0.1 rad (measured 0.307 -> 0.035 rad).

    The same run through the random tiny VAE does NOT recover the joints (0.307 -> 0.39 rad, docs/benchmarks.md):
    a random video VAE's encoder does not keep the pose; that part waits for trained VAE weights."""
    from akd_core.motion.stage import stage_gait

    target = RunDir(tmp_path / "target", create=True)
    stage_gait(target, robot_spec="quadruped", prompt="a dog trotting forward", duration=1.2, fps=50, seed=0)
    run = RunDir(tmp_path / "recover", create=True)
    metrics = stage_distill(run, robot_spec="quadruped", prompt="a dog trotting forward", prior="oracle",
                            target=target.path, iterations=400, init="standing", seed=0, oracle_space="pixels",
                            config_overrides={"n_gaussians": 2000, "camera": "orbit", "camera_margin": 0.9,
                                              "blur_px": 4.0, "lr_final": 0.1, "video_every": 0,
                                              "lambda_smooth": 0.0, "lambda_ground": 1e4, "lambda_skate": 0.0})
    print("pixel oracle distillation:", metrics)
    assert metrics["joint_err_reduction"] >= 0.7, metrics
    assert metrics["final_joint_err_rad"] < 0.1, metrics


def test_fit_clip_holds_the_last_frame():
    robot = load_robot("quadruped")
    clip = _standing_clip(robot, 4, 8.0)
    fitted = fit_clip(clip, 9, 8.0)
    assert fitted.num_frames == 9 and np.allclose(fitted.root_pos[-1], clip.root_pos[-1])


def test_render_motion_is_deterministic():
    robot = load_robot("quadruped")
    clip = _standing_clip(robot, 3, 8.0)
    config = DistillConfig(n_gaussians=500)
    a, cam = render_motion(robot, clip, config, 32, 32)
    b, _ = render_motion(robot, clip, config, 32, 32, camera=cam)
    assert torch.equal(a, b) and a.shape == (3, 3, 32, 32)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_killed_or_interrupted_distill_stops_through_its_checkpoint(tmp_path, sig):
    """`akd distill ... &` from a script starts with SIGINT ignored, and schedulers stop jobs with SIGTERM: both must
    end the command the way Ctrl-C does (exit 130, the resume hint, the checkpoint kept), and --resume continues
    (checked after SIGTERM)."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "akd_core.cli", "distill", "--robot", "quadruped", "--prompt", "a dog trotting",
           "--prior", "tiny", "--out", str(out), "--n-gaussians", "200", "--width", "32", "--height", "32",
           "--checkpoint-every", "5"]
    proc = subprocess.Popen([*cmd, "--iterations", "100000"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    checkpoint = out / "distill" / "checkpoint.pt"
    deadline = time.monotonic() + 420  # the first checkpoint (5 iterations) on a loaded 2-core machine
    while not checkpoint.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
        time.sleep(0.2)
    proc.send_signal(getattr(signal, sig))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted; re-run the same command to resume" in stderr
    done = torch.load(checkpoint, weights_only=False)["iteration"]
    assert done >= 5 and done % 5 == 0
    if sig == "SIGINT":
        return  # the same checkpoint either way: --resume is checked once, after SIGTERM
    resumed = subprocess.run([*cmd, "--iterations", str(done + 1), "--resume"], capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert torch.load(checkpoint, weights_only=False)["iteration"] == done + 1


def test_init_noise_perturbs_every_joint_within_the_limits():
    """--init-noise: the start gets i.i.d. noise of the given std on every joint and frame (reproducible from the
    seed, clipped into the URDF limits); the root path is untouched; a negative std is refused."""
    from akd_core.sds.clip_render import constant_velocity_init, standing_height
    from akd_core.sds.distill import add_init_noise

    robot = load_robot("quadruped")
    start = constant_velocity_init(robot, 49, 8.0, speed=0.5, height=standing_height(robot))
    noisy = add_init_noise(robot, start, 0.1, seed=3)
    delta = noisy.joint_pos - start.joint_pos
    assert abs(float(delta.std()) - 0.1) < 0.02 and (np.abs(delta) > 1e-6).mean() > 0.5
    assert (noisy.joint_pos >= robot.lower - 1e-6).all() and (noisy.joint_pos <= robot.upper + 1e-6).all()
    np.testing.assert_array_equal(noisy.root_pos, start.root_pos)
    np.testing.assert_array_equal(add_init_noise(robot, start, 0.1, seed=3).joint_pos, noisy.joint_pos)
    assert not np.array_equal(add_init_noise(robot, start, 0.1, seed=4).joint_pos, noisy.joint_pos)
    np.testing.assert_array_equal(start.joint_pos, np.tile(robot.default_joint_pos(), (49, 1)))  # not modified
    with pytest.raises(ConfigError, match="--init-noise"):
        DistillConfig(init_noise=-0.1)


def test_l2_smoothness_has_no_dead_zone_at_a_still_start():
    """--smooth-norm l2: the mean squared temporal Laplacian. Its gradient on a small swing shrinks with the swing,
    where the paper's L1 pushes back with the same force however small (so a still start stays still)."""
    params = torch.tensor([[0.0], [1.0], [0.0], [1.0]])
    assert float(smoothness_loss(params, "l2")) == pytest.approx((4 + 4) / 2)  # Laplacians -2, 2
    swing = torch.sin(torch.arange(9.0) * torch.pi / 2 + torch.pi / 4)[:, None]  # 2 Hz at 8 fps: 4 frames/stride

    def grad_norm(norm: str, amplitude: float) -> float:
        x = (amplitude * swing).requires_grad_(True)
        smoothness_loss(x, norm).backward()
        return float(x.grad.norm())

    assert grad_norm("l1", 1e-3) == pytest.approx(grad_norm("l1", 1e-1))
    assert grad_norm("l2", 1e-3) == pytest.approx(grad_norm("l2", 1e-1) / 100)
    with pytest.raises(ConfigError, match="--smooth-norm"):
        DistillConfig(smooth_norm="huber")
