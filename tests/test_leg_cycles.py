"""Phase-space SDS parameters (akd_core.sds.phase, `akd distill --param phase`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from akd_core.io.errors import ConfigError
from akd_core.model.legs import find_legs
from akd_core.model.load import load_robot
from akd_core.motion.classify import classify_gait
from akd_core.motion.gait import GaitSpec, generate_gait_result, phase_offsets
from akd_core.motion.metrics import motion_metrics
from akd_core.sds.distill import DistillConfig, distill
from akd_core.sds.phase import (
    CYCLE_SAMPLES,
    PhaseMotionParameters,
    cycle_clip,
    fourier_series,
    library_cycle,
    pattern_phases,
    random_phases,
    search_phases,
)


@pytest.fixture(scope="module")
def quad():
    robot = load_robot("quadruped")
    legs = find_legs(robot)
    return robot, legs, library_cycle(robot, legs, 0.6, 2.0)


def test_fourier_series_matches_the_formula():
    coeffs = torch.tensor([[0.3, 0.5, -0.2, 0.1, 0.4]], dtype=torch.float64)  # mean, cos1, cos2, sin1, sin2
    u = torch.linspace(0, 1, 7, dtype=torch.float64)[:, None]
    w = 2 * np.pi * u[:, 0].numpy()
    expected = 0.3 + 0.5 * np.cos(w) - 0.2 * np.cos(2 * w) + 0.1 * np.sin(w) + 0.4 * np.sin(2 * w)
    np.testing.assert_allclose(fourier_series(u, coeffs)[:, 0].numpy(), expected, atol=1e-12)


def test_the_cycle_reproduces_the_library_stride(quad):
    """Evaluated at every phase, the Fourier cycle matches the gait library's own joint angles over a stride
    (generated here independently with the legs in phase) to within the truncated harmonics."""
    robot, legs, _ = quad
    cycle = library_cycle(robot, legs, 0.6, 2.0, harmonics=CYCLE_SAMPLES // 2 - 1)
    spec = GaitSpec(pattern="trot", speed=cycle.speed, frequency=cycle.frequency, bounce=0.0, ramp_time=0.0,
                    phase_offsets={leg.label: 0.0 for leg in legs})
    fps = 40 * cycle.frequency
    motion = generate_gait_result(robot, spec, duration=2.0 / cycle.frequency, fps=fps, legs=legs).motion
    second = np.arange(40, 80)  # the second stride, u = k / 40
    expected = motion.joint_pos[second][:, cycle.dofs]
    got = cycle.evaluate(np.tile((second - 40)[:, None] / 40.0, (1, len(legs))))
    assert np.abs(got - expected).max() < 0.02
    three = library_cycle(robot, legs, 0.6, 2.0)  # the default 3 harmonics keep the stride's shape
    assert np.abs(three.evaluate(np.tile((second - 40)[:, None] / 40.0, (1, len(legs)))) - expected).mean() < 0.03
    assert cycle.frequency <= 2.0 + 1e-9  # the cadence cap


@pytest.mark.parametrize("pattern", ["trot", "pace", "bound"])
def test_pattern_phases_give_the_pattern(quad, pattern):
    """The leg cycle with a pattern's phases is that gait to the gait classifier, and its stance feet do not slide
    (the stance sweep is the body speed whatever the phases)."""
    robot, legs, cycle = quad
    clip = cycle_clip(robot, cycle, pattern_phases(cycle, phase_offsets(pattern, legs)), 101, 50.0)
    result = classify_gait(robot, clip)
    assert result.gait == pattern, result
    feet = [leg.foot_link for leg in legs]
    offsets = np.array([leg.foot_offset for leg in legs])
    skate = motion_metrics(robot, clip.root_pos, clip.root_quat, clip.joint_pos, clip.fps, feet, offsets,
                           None)["foot_skate_mps"]
    assert skate < 0.25 * cycle.speed, skate  # a gliding body: 1.0 x speed; the library trot itself: 0.13 x


def test_random_phases_do_not_slide_the_feet_either(quad):
    robot, legs, cycle = quad
    clip = cycle_clip(robot, cycle, random_phases(len(legs), 3), 101, 50.0)
    feet = [leg.foot_link for leg in legs]
    offsets = np.array([leg.foot_offset for leg in legs])
    skate = motion_metrics(robot, clip.root_pos, clip.root_quat, clip.joint_pos, clip.fps, feet, offsets,
                           None)["foot_skate_mps"]
    assert skate < 0.25 * cycle.speed, skate  # a gliding body: 1.0 x speed; the library trot itself: 0.13 x
    assert not np.allclose(random_phases(4, 0), random_phases(4, 1))
    np.testing.assert_array_equal(random_phases(4, 5), random_phases(4, 5))


def test_phase_parameters_render_the_start_clip_and_differentiate_in_phase(quad):
    robot, legs, cycle = quad
    phases = random_phases(len(legs), 0)
    clip = cycle_clip(robot, cycle, phases, 9, 8.0)
    params = PhaseMotionParameters(clip, robot, cycle, phases)
    np.testing.assert_allclose(params.joint_pos.detach().numpy(), clip.joint_pos, atol=1e-5)
    assert params.all_params().shape == (9, len(robot.joint_names) - len(cycle.dofs) + 6)
    # gradient of a smooth function of the joint angles with respect to a leg's phase, against finite differences
    weights = torch.linspace(-1, 1, params.joint_pos.numel()).reshape(params.joint_pos.shape)

    def f() -> torch.Tensor:
        return (torch.sin(params.joint_pos) * weights).sum()

    f().backward()
    grad = params.phase.grad.clone()
    eps = 1e-3
    for leg in range(len(legs)):
        with torch.no_grad():
            params.phase[leg] += eps
            up = float(f())
            params.phase[leg] -= 2 * eps
            down = float(f())
            params.phase[leg] += eps
        assert grad[leg].item() == pytest.approx((up - down) / (2 * eps), rel=2e-2, abs=1e-3)
    assert grad.abs().min() > 0  # every leg's phase reaches the output


def test_phase_distill_runs_and_keeps_limits(quad):
    from akd_core.sds.prior import make_prior

    robot, legs, cycle = quad
    prior = make_prior("tiny", "a dog trotting forward", seed=0)
    phases = random_phases(len(legs), 0)
    clip = cycle_clip(robot, cycle, phases, prior.num_frames, 8.0)
    config = DistillConfig(iterations=3, param="phase", n_gaussians=800, video_every=0, phase_search_grid=2,
                           phase_search_sweeps=1, phase_search_timesteps=(300,), phase_search_draws=1, lr_cycle=1e-3)
    result = distill(robot, prior, clip, config, progress=False, phase_start=(cycle, phases))
    q = result.motion.joint_pos
    assert np.all(q >= robot.lower - 1e-6) and np.all(q <= robot.upper + 1e-6)
    assert "phase_3" in result.history[-1]
    # the search scored the 2^3 half-cycle patterns around the first leg's start phase, then one round of quarter
    # steps per leg (those not scored already) and perhaps their combination
    assert 8 < len(result.phase_search) <= 8 + 3 * len(legs) + 1
    assert {r["stage"] for r in result.phase_search} == {"global", "refine4"}
    assert result.phase_search[0]["phases"][0] == pytest.approx(phases[0], abs=1e-4)
    with pytest.raises(ConfigError, match="phase_start"):
        distill(robot, prior, clip, config, progress=False)


def test_phase_parameters_need_legs():
    robot = load_robot("quadruped")
    with pytest.raises(ConfigError, match="--param frames"):
        library_cycle(robot, [], 0.5, 2.0)
    with pytest.raises(ConfigError, match="--param"):
        DistillConfig(param="joints")


def test_search_phases_finds_a_known_pattern_from_any_start():
    """A score with one minimum (the circular distance to a pace), a start off the grid: the global stage (every
    half-cycle pattern relative to the first leg, one batch) gets every leg within an eighth of a cycle, no quarter
    move helps, and the eighth-cycle round lands exactly on the pace by moving all four legs at once (each improves
    alone); each candidate is scored once, in batches."""
    target = np.array([0.3, 0.8, 0.3, 0.8])
    start = np.array([0.425, 0.05, 0.6, 0.41])
    batches = []

    def one(phases):
        d = np.remainder(np.asarray(phases) - target + 0.5, 1.0) - 0.5
        return float(np.sum(d * d))

    def score(candidates):
        batches.append([np.array(c) for c in candidates])
        return [one(c) for c in candidates]

    best, rows = search_phases(score, start, grid=2, refine=(4, 8), sweeps=3, progress=False)
    np.testing.assert_allclose(best, target, atol=1e-9)
    assert [r["stage"] for r in rows[:8]] == ["global"] * 8 and len(batches[0]) == 8
    assert {tuple(np.round(np.remainder(np.array(r["phases"][1:]) - r["phases"][0], 1.0), 6)) for r in rows[:8]} == \
        {(a, b, c) for a in (0.0, 0.5) for b in (0.0, 0.5) for c in (0.0, 0.5)}
    assert min(r["score"] for r in rows) < 1e-12
    assert len(rows) == sum(len(b) for b in batches)  # every distinct candidate scored once
    keys = [tuple(np.round(r["phases"], 4)) for r in rows]
    assert len(keys) == len(set(keys))
    # without the global stage (too many combinations) the refinements alone still walk a separable score home
    best, rows = search_phases(score, np.array([0.425, 0.05, 0.675, 0.55]), grid=4, refine=(8,), sweeps=4,
                               max_global=10, progress=False)
    np.testing.assert_allclose(best, target, atol=1e-9)
    assert not any(r["stage"] == "global" for r in rows)


def test_contact_terms_do_not_reach_the_leg_phases(quad):
    """With --param phase the ground, float and skate terms see the legs' angles detached: they move the root and
    body joints, never the gait's phases (the oracle's known answer degrades when they do)."""
    from akd_core.sds.clip_render import ClipRenderer

    robot, legs, cycle = quad
    phases = random_phases(len(legs), 0)
    params = PhaseMotionParameters(cycle_clip(robot, cycle, phases, 5, 8.0), robot, cycle, phases)
    renderer = ClipRenderer(robot, 16, 16, 100, 0, "torch")
    link_pos, _ = renderer.link_poses(params, detach_legs=True)
    link_pos[..., 2].sum().backward()
    assert params.phase.grad is None or torch.all(params.phase.grad == 0)
    assert params.root_pos.grad is not None and params.root_pos.grad[:, 2].abs().min() > 0
    params.zero_grad()
    link_pos, _ = renderer.link_poses(params)
    link_pos[..., 2].sum().backward()
    assert params.phase.grad.abs().max() > 0


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("pattern", ["trot", "pace"])
def test_oracle_phase_distill_recovers_the_pattern_from_random_phases(pattern):
    """Known answer for --param phase: the oracle prior (latent space of the tiny model) whose target is the leg
    cycle with a pattern's phases; from random start phases the search and 20 gradient steps end on that gait
    (classified from foot heights) with the oracle's loss a tenth of the start's."""
    from akd_core.sds.distill import target_view_renderer
    from akd_core.sds.prior import OracleVideoPrior, make_prior

    robot = load_robot("quadruped")
    legs = find_legs(robot)
    cycle = library_cycle(robot, legs, 0.6, 2.0)
    base = make_prior("tiny", "a dog", seed=0)
    target = cycle_clip(robot, cycle, pattern_phases(cycle, phase_offsets(pattern, legs)), base.num_frames, 8.0)
    phases = random_phases(len(legs), 0)
    start = cycle_clip(robot, cycle, phases, base.num_frames, 8.0)
    config = DistillConfig(iterations=20, param="phase", n_gaussians=1500, width=48, height=48, video_every=0,
                           lambda_skate=0.0, camera="follow", camera_margin=1.4, blur_px=0.0, lr_final=1.0)
    frame_on, render_target, first = target_view_renderer(robot, target, config, 48, 48)
    oracle = OracleVideoPrior.from_prior(base, render_target(first), target_renderer=render_target)
    result = distill(robot, oracle, start, config, progress=False, frame_on=frame_on, phase_start=(cycle, phases))
    unsearched = distill(robot, oracle, start, DistillConfig(**{**config.__dict__, "iterations": 1,
                                                                "phase_search_grid": 0}),
                         progress=False, frame_on=frame_on, phase_start=(cycle, phases))
    print(pattern, "search best", min(result.phase_search, key=lambda r: r["score"]), "sds at the random start",
          unsearched.history[0]["sds"], "then", [round(h["sds"], 3) for h in result.history])
    assert result.history[-1]["sds"] < 0.1 * unsearched.history[0]["sds"]
    assert classify_gait(robot, result.motion.resample(50.0)).gait == pattern


def test_continued_motion_evaluates_the_cycle_at_every_frame(quad):
    """reference.npz of --param phase: the legs from the cycle itself at 50 fps (not interpolated between the 8 fps
    frames), the gait continued past the clip at its speed, every frame within the limits."""
    from akd_core.sds.phase import continue_motion

    robot, legs, _ = quad
    cycle = library_cycle(robot, legs, 0.8, 2.0)  # the prompt "a dog trotting forward": 2 Hz, 4 video frames a stride
    phases = pattern_phases(cycle, phase_offsets("trot", legs))
    clip = cycle_clip(robot, cycle, phases, 9, 8.0)
    params = PhaseMotionParameters(clip, robot, cycle, phases)
    dense = continue_motion(params, clip, 50.0, 3.0, cycle.frequency)
    assert dense.num_frames == 151 and dense.fps == 50.0
    np.testing.assert_allclose(dense.joint_pos, cycle_clip(robot, cycle, phases, 151, 50.0).joint_pos, atol=1e-5)
    np.testing.assert_allclose(dense.root_pos[:, 0], cycle.speed * np.arange(151) / 50.0, atol=1e-5)
    assert np.all(dense.joint_pos >= robot.lower - 1e-6) and np.all(dense.joint_pos <= robot.upper + 1e-6)
    assert classify_gait(robot, dense).gait == "trot"
    feet = [leg.foot_link for leg in legs]
    offsets = np.array([leg.foot_offset for leg in legs])
    lerped = motion_metrics(robot, *(clip.resample(50.0).__dict__[k] for k in ("root_pos", "root_quat", "joint_pos")),
                            50.0, feet, offsets, None)["foot_skate_mps"]
    exact = motion_metrics(robot, dense.root_pos[:51], dense.root_quat[:51], dense.joint_pos[:51], 50.0, feet,
                           offsets, None)["foot_skate_mps"]
    assert exact < 0.5 * lerped, (exact, lerped)
