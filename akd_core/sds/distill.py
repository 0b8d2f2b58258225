"""SDS distillation of a joint-angle sequence from a video diffusion prior (docs/sds.md, "How SDS works").

Parameters are per-frame joint angles (F, J) and a per-frame root pose (position (F, 3) and a
rotation vector (F, 3) applied on top of the initial orientation). Each iteration:

    FK (akd_core.model.kinematics) -> LBS of the Gaussian asset (akd_core.render.gaussians/skinning)
    -> differentiable splatting over a checkerboard ground (akd_core.render)
    -> VAE encode + SDS gradient of the prior (akd_core.sds.prior)

    L = L_SDS + lambda_smooth * L_smooth + lambda_ground * L_ground + lambda_float * L_float
        + lambda_skate * L_skate

L_smooth is the mean absolute temporal Laplacian of all parameters; L_ground the mean depth of
link-geometry corners below z = 0. L_float (AKD's, not the paper's) is the mean over frames of how far the
lowest corner is above ``float_clearance`` (2 cm): a body that leaves the ground pays for it, one on the ground
(or in a short flight phase) nothing. Without it a weak prior (the tiny CPU one) lets SDS lift the root steadily:
with the follow camera a rising body only moves the ground in the frame, and the paper's L_ground only
penalises going below z = 0. L_skate (AKD's too) is the mean horizontal speed (m/s) of the feet's contact points,
each frame pair weighted by how close the foot is to the ground (a sigmoid of its height, 1 at z = 0, 1/2 at
``skate_height``, 2 cm; the weight itself carries no gradient): a foot on the ground must not slide. Without it
the prior can move the body forward with the feet gliding along, a clip no physics tracker can follow; with it
the only way forward is to step. The timestep upper bound anneals 0.98 -> 0.5 over the first
half (the prior's TimestepSchedule). Joint angles are projected into the URDF limits after every
Adam step. Checkpoints (parameters, optimiser and RNG state) make a killed run resume exactly.

Each iteration looks at the clip through a :class:`RenderView`: the camera (``follow``, the paper's; ``fixed``;
or ``orbit``, a random direction per iteration so every leg gets seen) and an optional coarse-to-fine render
blur. The prior is told the view (``prior.set_view``); the oracle uses it to render its target identically.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from akd_core.io.errors import AKDError, ConfigError
from akd_core.io.fileio import atomic_path
from akd_core.io.rundir import REFERENCE, RunDir
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.legs import find_legs
from akd_core.model.load import load_robot, write_run_robot
from akd_core.model.robot import Robot
from akd_core.model.spatial.tensor import matrix_to_quat
from akd_core.motion.classify import classify_gait
from akd_core.motion.clip import Motion
from akd_core.motion.feasibility import feasibility_summary
from akd_core.motion.gait import generate_gait, phase_offsets
from akd_core.motion.metrics import motion_metrics
from akd_core.motion.prompt import spec_from_prompt
from akd_core.render import write_mp4
from akd_core.sds.clip_render import (
    ClipRenderer,
    MotionParameters,
    RenderView,
    constant_velocity_init,
    fit_clip,
    standing_height,
)
from akd_core.sds.phase import (
    PhaseMotionParameters,
    continue_motion,
    cycle_clip,
    library_cycle,
    pattern_phases,
    random_phases,
    search_phases,
)
from akd_core.sds.prior import OracleVideoPrior, PriorOptions, make_prior, make_prior_from_options
from akd_core.sds.prior.default import MODEL_SETTINGS_FILE, model_settings, prior_prompt, resolve_video_model

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
CAMERA_MODES = ("follow", "fixed", "orbit")
PARAMETRISATIONS = ("frames", "phase")
INITS = ("constant", "standing", "gait")  # akd distill --init
PHASE_SEARCH_SCORES = ("classifier", "contrast", "conditional", "guided")
VIDEO_FPS = 8.0  # CogVideoX generates 8 frames per second (49 frames = 6 s)
DEFAULT_ITERATIONS_CUDA = 10000  # the paper's
DEFAULT_ITERATIONS_CPU = 400


@dataclass
class DistillConfig:
    """Settings of one distillation. The defaults are the paper's per-frame SDS (``param`` "frames") with the
    settings under which the oracle prior's known answer holds from a standing start (a gait-library trot and pace
    to < 0.1 rad mean joint error through the shipped prior's VAE; tests/test_shipped_prior.py): random orbit
    cameras, a 4 px coarse-to-fine blur, the learning rate decaying to a tenth, 2000 Gaussians, 400 iterations on
    CPU, and no smoothness term (at 8 fps a gait's own Laplacian is as large as its swing: the paper's L1 term at
    2e5 held the legs still, and the known answer ended at 0.33 rad with it), the ground term at 1e4 and no skate
    term (the weights the known answer was verified with). A model folder's ``akd.json``
    overrides them (the shipped prior: ``param`` phase, its training view), flags override both
    (:func:`distill_settings`)."""

    iterations: int = 400
    lr_joint: float = 2e-2
    lr_root: float = 5e-3
    lambda_smooth: float = 0.0  # the paper's 2e5 damps the gait itself (see the class docstring)
    smooth_norm: str = "l1"  # paper; "l2": the mean squared Laplacian (no force on small swings)
    lambda_ground: float = 1e4  # the paper's 1e7 was not verified against the known answer (its 1e4 was)
    lambda_float: float = 1e6  # AKD: keeps the body on the ground (0: the paper's objective)
    # metres the lowest corner may sit above z = 0 for free: the term stays silent while the body is on the ground
    # (a strong term that is always active fills Adam's second moments and stalls the SDS steps of the legs)
    float_clearance: float = 0.02
    # AKD: mean speed (m/s) of feet near the ground (0: off, the paper's objective, and the default: the known answer
    # was verified without it). 3e5 kept the tiny prior's per-frame clips from gliding (2026-11-27, 40aebf0): give
    # it when a prior moves the body with the feet sliding
    lambda_skate: float = 0.0
    skate_height: float = 0.02  # m: a foot this high counts half as in contact (the stance threshold of reference.npz)
    sds_weight: float = 1.0
    # rad: std of Gaussian noise added to every joint angle of every frame of the initial clip (seeded by the distill
    # seed, clipped into the limits). A still or gliding start is a symmetric point for periodic motion: every phase
    # of a gait lowers the loss alike, so their gradients cancel there and SDS hardly leaves it. Noise (no gait, no
    # cadence) breaks the tie. 0: the paper's start.
    init_noise: float = 0.0
    # what SDS optimises: "frames" (the paper's per-frame joint angles) or "phase" (akd_core.sds.phase: one leg
    # cycle from the gait library that every leg repeats with its own phase; the phases, the cycle's Fourier
    # coefficients, the root and the joints outside the legs are the parameters, and the start phases are random)
    param: str = "frames"
    lr_phase: float = 0.01  # cycles per Adam step of the leg phases (--param phase)
    # --param phase: rad (m for the root) per Adam step of everything but the phases: the cycle's Fourier
    # coefficients, the body joints and the root pose. 0 (default): SDS moves the phases only and the stride stays
    # the gait library's (with the small CPU prior, 60 steps at 1e-3 raised the body 3 cm and slid the feet at
    # 0.83 m/s against the library stride's 0.15; at lr_joint / lr_root even the oracle's known answer degrades)
    lr_cycle: float = 0.0
    cycle_harmonics: int = 3  # harmonics of the leg cycle (--param phase)
    # --param phase: the start stride's cadence is capped at video_fps / this (the prior's training clips,
    # `akd prior data --min-stride-frames`), its speed slowed with it
    min_stride_frames: float = 4.0
    # --param phase: before the gradient steps, phase.search_phases: every combination of the legs' relative phases
    # on a grid of phase_search_grid per cycle (0: no search), then for each resolution of phase_search_refine up to
    # phase_search_sweeps rounds of one-leg moves on that finer grid; each candidate scored by phase_scorer at these
    # timesteps, phase_search_draws noises each (the same for every candidate), from the configured camera
    phase_search_grid: int = 2
    phase_search_refine: tuple[int, ...] = (4,)
    phase_search_sweeps: int = 2
    phase_search_timesteps: tuple[int, ...] = (100, 250, 400, 550)
    phase_search_draws: int = 2
    # what the search minimises: "classifier" (the prompt-conditional denoising error over the unconditional one:
    # how much the prompt explains the clip, CFG's implicit classifier), "contrast" (the prompt's error over the mean
    # error of the prompt told with each word of its phase_search_contrast group: a diffusion classifier among those
    # captions, e.g. the gaits), "conditional" (the prompt-conditional error alone) or "guided" (the guided error SDS
    # follows); a prior without text (the oracle) always "guided"
    phase_search_score: str = "classifier"
    # "contrast": groups of interchangeable words (e.g. ("trotting", "pacing", "bounding", ...)); the first group with
    # a word in the prompt makes the rival captions, one per word of the group. A prompt with none: "classifier"
    phase_search_contrast: tuple[tuple[str, ...], ...] = ()
    adam_eps: float = 1e-8  # larger values damp parameters whose gradients are tiny (joints the camera barely sees)
    video_fps: float = VIDEO_FPS
    num_frames: int | None = None  # None: the prior's frame count
    width: int | None = None  # None: the prior's resolution
    height: int | None = None
    n_gaussians: int = 2000  # the prior training clips' (akd prior data)
    # follow: re-framed on the asset every iteration (paper); fixed: framed once; orbit (default): re-framed every
    # iteration from a random azimuth in [-180, 180) and elevation in camera_elevation_range (multi-view: the legs a
    # single view hides are seen; one follow camera stalled the pixel known answer at 0.26 rad)
    camera: str = "orbit"
    camera_azimuth_deg: float = -70.0  # direction of the camera from the asset (-90: its right side)
    camera_elevation_deg: float = 20.0
    camera_elevation_range: tuple[float, float] = (10.0, 40.0)  # orbit only
    camera_margin: float = 0.9  # framing: bounding sphere radius x margin fills the narrower field of view
    # coarse to fine: the render is blurred with a Gaussian of blur_px pixels that shrinks linearly to 0 at
    # blur_until x iterations (wide basins first: a leg far from its target still overlaps it when blurred)
    blur_px: float = 4.0
    blur_until: float = 0.6
    # learning rates fall linearly from 1x to lr_final x over the last (1 - lr_decay_start) of the iterations (Adam's
    # steady jitter at lr 2e-2 is ~0.1 rad: the known answer took 0.148 -> 0.035 rad from 200 to 400 iterations)
    lr_final: float = 0.1
    lr_decay_start: float = 0.6
    backend: str = "auto"
    checkpoint_every: int = 25
    video_every: int = 100
    seed: int = 0

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ConfigError(f"--iterations must be >= 1, got {self.iterations}")
        if self.checkpoint_every < 1:
            raise ConfigError(f"--checkpoint-every must be >= 1 iteration, got {self.checkpoint_every}")
        if self.camera not in CAMERA_MODES:
            raise ConfigError(f"camera must be one of {', '.join(CAMERA_MODES)}, got {self.camera!r}")
        lo, hi = self.camera_elevation_range
        if not -89.0 <= lo <= hi <= 89.0:
            raise ConfigError(f"camera_elevation_range must satisfy -89 <= low <= high <= 89 degrees, got {(lo, hi)}")
        if self.smooth_norm not in SMOOTH_NORMS:
            raise ConfigError(f"--smooth-norm must be one of {', '.join(SMOOTH_NORMS)}, got {self.smooth_norm!r}")
        if self.param not in PARAMETRISATIONS:
            raise ConfigError(f"--param must be one of {', '.join(PARAMETRISATIONS)}, got {self.param!r}")
        if self.phase_search_grid < 0 or self.phase_search_sweeps < 1 or self.phase_search_draws < 1 or not all(
                0 < t < 1000 for t in self.phase_search_timesteps) or not self.phase_search_timesteps or not all(
                r >= 2 for r in self.phase_search_refine):
            raise ConfigError("phase_search_grid must be >= 0, phase_search_sweeps and phase_search_draws >= 1, "
                              "phase_search_timesteps in (0, 1000) and phase_search_refine >= 2 each; got "
                              f"{self.phase_search_grid}, {self.phase_search_sweeps}, {self.phase_search_draws}, "
                              f"{self.phase_search_timesteps}, {self.phase_search_refine}")
        if not all(isinstance(g, tuple) and g and all(isinstance(w, str) and w.strip() for w in g)
                   for g in self.phase_search_contrast):
            raise ConfigError("phase_search_contrast must be groups of words, e.g. (('trotting', 'pacing'),), got "
                              f"{self.phase_search_contrast!r}")
        if self.phase_search_score not in PHASE_SEARCH_SCORES:
            raise ConfigError(f"--phase-search-score must be one of {', '.join(PHASE_SEARCH_SCORES)}, got "
                              f"{self.phase_search_score!r}")
        if self.lr_phase <= 0 or self.lr_cycle < 0 or self.cycle_harmonics < 1 or self.min_stride_frames < 0:
            raise ConfigError(f"--lr-phase must be > 0, --lr-cycle >= 0, --cycle-harmonics >= 1 and "
                              f"--min-stride-frames >= 0, got {self.lr_phase}, {self.lr_cycle}, "
                              f"{self.cycle_harmonics}, {self.min_stride_frames}")
        if self.init_noise < 0:
            raise ConfigError(f"--init-noise must be >= 0 rad, got {self.init_noise}")
        if self.lambda_skate < 0 or self.skate_height <= 0:
            raise ConfigError(f"--lambda-skate must be >= 0 and skate_height > 0, got {self.lambda_skate}, "
                              f"{self.skate_height}")
        if self.lambda_float < 0 or self.float_clearance < 0:
            raise ConfigError(f"--lambda-float and float_clearance must be >= 0, got {self.lambda_float}, "
                              f"{self.float_clearance}")
        if self.blur_px < 0 or not 0.0 < self.blur_until <= 1.0:
            raise ConfigError(f"blur_px must be >= 0 and blur_until in (0, 1], got {self.blur_px}, {self.blur_until}")
        if not 0.0 < self.lr_final <= 1.0 or not 0.0 <= self.lr_decay_start < 1.0:
            raise ConfigError(f"lr_final must be in (0, 1] and lr_decay_start in [0, 1), got {self.lr_final}, "
                              f"{self.lr_decay_start}")

    def blur_at(self, step: int) -> float:
        """Render blur (pixels) at iteration ``step``: blur_px falling linearly to 0 at blur_until x iterations."""
        return self.blur_px * max(0.0, 1.0 - step / (self.blur_until * self.iterations))

    def lr_scale(self, step: int) -> float:
        """Learning-rate multiplier at iteration ``step`` (1, then linear to lr_final)."""
        start = self.lr_decay_start * self.iterations
        progress = min(max((step - start) / max(self.iterations - start, 1.0), 0.0), 1.0)
        return 1.0 + (self.lr_final - 1.0) * progress


SMOOTH_NORMS = ("l1", "l2")


def smoothness_loss(params: Tensor, norm: str = "l1") -> Tensor:
    """Mean |Theta_{i-1} - 2 Theta_i + Theta_{i+1}| over interior frames (MAE of the temporal Laplacian, the
    paper's), or with ``norm="l2"`` its mean square. L1 pushes every parameter with the same force however small
    its swing, which holds a still start still; L2's force vanishes with the swing."""
    if params.shape[0] < 3:
        return params.sum() * 0.0
    laplacian = params[:-2] - 2 * params[1:-1] + params[2:]
    return laplacian.abs().mean() if norm == "l1" else laplacian.pow(2).mean()


def ground_loss(corner_z: Tensor) -> Tensor:
    """Mean over geometry corners and frames of max(-height, 0)."""
    return torch.relu(-corner_z).mean()


def float_loss(corner_z: Tensor, clearance: float = 0.0) -> Tensor:
    """Mean over frames of max(lowest corner height - clearance, 0): corner_z (F, K) -> scalar."""
    return torch.relu(corner_z.min(dim=-1).values - clearance).mean()


def skate_loss(feet: Tensor, fps: float, contact_height: float = 0.02, softness: float | None = None) -> Tensor:
    """Mean horizontal speed (m/s) of feet on the ground: feet (F, K, 3) contact points -> scalar.

    Each frame pair (i, i+1) and foot is weighted by sigmoid((contact_height - z) / softness) at the pair's mean
    height z (detached: lifting a foot is not a way to lower the loss, only not sliding it is); softness defaults
    to contact_height / 4, so a foot on the ground weighs 0.98 and one 2 x contact_height up 0.02.
    """
    if feet.shape[0] < 2 or feet.shape[1] == 0:
        return feet.sum() * 0.0
    softness = contact_height / 4.0 if softness is None else softness
    step = feet[1:, :, :2] - feet[:-1, :, :2]
    speed = torch.sqrt((step * step).sum(-1) + 1e-12) * fps  # (F-1, K); smooth at zero
    height = 0.5 * (feet[1:, :, 2] + feet[:-1, :, 2]).detach()
    weight = torch.sigmoid((contact_height - height) / softness)
    return (weight * speed).mean()


# ----------------------------------------------------------------------------- the optimisation
@dataclass
class DistillResult:
    motion: Motion
    history: list[dict[str, float]]
    iterations_run: int
    phase_search: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # --param phase: scored candidates
    phase_params: Any = None  # --param phase: the final PhaseMotionParameters (leg_cycles.continue_motion)


def distill(robot: Robot, prior: Any, init: Motion, config: DistillConfig, out_dir: Path | None = None,
            resume: bool = False, fixed_camera: tuple[Tensor, Tensor] | None = None,
            progress: bool = True, max_steps: int | None = None, frame_on: Tensor | None = None,
            phase_start: tuple[Any, np.ndarray] | None = None) -> DistillResult:
    """Optimise ``init`` (at config.video_fps, prior frame count) under the prior; returns the distilled clip.

    ``config.param == "phase"`` needs ``phase_start``: the (LegCycle, start phases) of akd_core.sds.phase
    (:func:`phase_start_clip` makes both and ``init``).

    out_dir receives checkpoint.pt, losses.csv and periodic videos; with ``resume`` the optimisation
    continues from the checkpoint there (same parameters, optimiser state and random stream).
    ``max_steps`` stops after that many iterations of this call (the schedule still spans ``iterations``).
    ``frame_on`` (F, N, 3): Gaussian means the cameras are framed on instead of the current asset (the oracle
    frames on its target so that both are seen through one camera).
    """
    width = config.width or prior.width
    height = config.height or prior.height
    renderer = ClipRenderer(robot, width, height, config.n_gaussians, config.seed, config.backend, _view(config))
    foot_names, foot_offsets = clip_feet(robot, init)
    renderer.set_feet(foot_names, foot_offsets)
    if config.param == "phase":

        if phase_start is None:
            raise ConfigError("distill(config.param='phase') needs phase_start=(LegCycle, phases); "
                              "see akd_core.sds.distill.phase_start_clip")
        params = PhaseMotionParameters(init, robot, *phase_start)
        groups = [([params.coeffs, params.body_joint_pos, params.root_pos, params.root_rotvec], config.lr_cycle),
                  ([params.phase], config.lr_phase)]
    else:
        params = MotionParameters(init, robot)
        groups = [([params.joint_pos], config.lr_joint), ([params.root_pos, params.root_rotvec], config.lr_root)]
    optimizer = torch.optim.Adam([{"params": p, "lr": lr} for p, lr in groups], eps=config.adam_eps)
    base_lrs = [lr for _, lr in groups]
    generator = torch.Generator(device="cpu").manual_seed(config.seed)
    start, history = 0, []
    ckpt_path = out_dir / CHECKPOINT if out_dir is not None else None
    if resume and ckpt_path is not None and ckpt_path.exists():
        state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        params.load_state_dict(state["params"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        start, history = int(state["iteration"]), list(state["history"])
        log.info("resuming distillation from %s at iteration %d", ckpt_path, start)
    camera = fixed_camera
    if camera is None and config.camera == "fixed":
        with torch.no_grad():
            means, _ = renderer.pose(*renderer.link_poses(params))
        camera = renderer.camera(frame_on if frame_on is not None else means)

    def view_at(step: int, means: Tensor) -> RenderView:
        framing = frame_on if frame_on is not None else means
        if config.camera == "orbit":  # drawn from the checkpointed generator: resumes see the same views
            u = torch.rand(2, generator=generator).tolist()
            lo, hi = config.camera_elevation_range
            viewmats, K = renderer.camera(framing, azimuth_deg=360.0 * u[0] - 180.0,
                                          elevation_deg=lo + (hi - lo) * u[1])
        else:
            viewmats, K = camera if camera is not None else renderer.camera(framing)
        return RenderView(viewmats, K, config.blur_at(step))

    search_rows: list[dict[str, Any]] = []
    if config.param == "phase" and config.phase_search_grid > 0 and start == 0:
        search_rows = _search_start_phases(params, renderer, prior, config, frame_on, camera, progress)
        if out_dir is not None:
            _write_losses(out_dir / "phase_search.csv", [{**r, "phases": " ".join(map(str, r["phases"]))}
                                                         for r in search_rows])

    def save_checkpoint(iteration: int) -> None:
        if ckpt_path is None:
            return
        with atomic_path(ckpt_path) as tmp:
            torch.save({"params": params.state_dict(), "optimizer": optimizer.state_dict(),
                        "generator": generator.get_state(), "iteration": iteration, "history": history,
                        "config": asdict(config)}, tmp)

    stop = config.iterations if max_steps is None else min(config.iterations, start + max_steps)
    bar = tqdm(range(start, stop), initial=start, total=config.iterations, desc="distill",
               disable=not progress, dynamic_ncols=True)
    iteration = start
    try:
        for iteration in bar:
            optimizer.zero_grad(set_to_none=True)
            for group, lr in zip(optimizer.param_groups, base_lrs):
                group["lr"] = lr * config.lr_scale(iteration)
            link_pos, link_rot = renderer.link_poses(params)
            means, covars = renderer.pose(link_pos, link_rot)
            view = view_at(iteration, means)
            video = renderer.render_view(means, covars, view)  # (F, 3, H, W)
            prior.set_view(view)
            sds, info = prior.sds_loss(video, iteration, config.iterations, generator)
            smooth = smoothness_loss(params.all_params(), config.smooth_norm)
            if config.param == "phase":  # the contact terms move the root and body, not the legs' phases and cycle
                link_pos, link_rot = renderer.link_poses(params, detach_legs=True)
            corner_z = renderer.corners_z(link_pos, link_rot)
            ground = ground_loss(corner_z)
            floating = float_loss(corner_z, config.float_clearance)
            skate = skate_loss(renderer.feet(link_pos, link_rot), config.video_fps, config.skate_height)
            loss = (config.sds_weight * sds + config.lambda_smooth * smooth + config.lambda_ground * ground
                    + config.lambda_float * floating + config.lambda_skate * skate)
            loss.backward()
            optimizer.step()
            params.project_to_limits()
            row = {"iteration": iteration, "loss": loss.item(), "sds": sds.item(), "smooth": smooth.item(),
                   "ground": ground.item(), "float": floating.item(), "skate": skate.item(),
                   "timestep": int(info.get("timestep", -1)), "blur_px": view.blur_px}
            if config.param == "phase":  # the legs' phases relative to the first leg, in cycles
                row.update({f"phase_{i}": round(float(p), 4) for i, p in enumerate(params.relative_phases())})
            history.append(row)
            bar.set_postfix(sds=f"{row['sds']:.3g}", smooth=f"{row['smooth']:.2e}", ground=f"{row['ground']:.2e}",
                            t=row["timestep"])
            done = iteration + 1
            if out_dir is not None and (done % config.checkpoint_every == 0 or done in (stop, config.iterations)):
                save_checkpoint(done)
                _write_losses(out_dir / "losses.csv", history)
            if out_dir is not None and config.video_every and (done % config.video_every == 0 or done == 1):
                _write_video(out_dir / f"iter_{done:05d}.mp4", video, config.video_fps)
    except KeyboardInterrupt:
        log.warning("distillation interrupted at iteration %d; the last checkpoint is in %s", iteration, out_dir)
        raise
    with torch.no_grad():
        rot = params.root_rot()
        motion = Motion(fps=init.fps, joint_names=robot.joint_names, joint_pos=params.joint_pos.numpy().copy(),
                        root_pos=params.root_pos.numpy().copy(), root_quat=matrix_to_quat(rot).numpy(),
                        foot_names=foot_names, foot_offsets=foot_offsets, prompt=init.prompt)
    return DistillResult(motion=motion, history=history, iterations_run=stop - start, phase_search=search_rows,
                         phase_params=params if config.param == "phase" else None)


def phase_scorer(params: Any, renderer: ClipRenderer, prior: Any, config: DistillConfig,
                 frame_on: Tensor | None = None, camera: tuple[Tensor, Tensor] | None = None
                 ) -> Callable[[list[np.ndarray]], list[float]]:
    """A batch of phase candidates [(L,), ...] -> the prior's scores of ``params`` (a PhaseMotionParameters, whose
    ``phase`` it sets) rendered with each, lower is better: config.phase_search_score over
    config.phase_search_timesteps x phase_search_draws fixed (timestep, noise) draws and one fixed VAE sample, seen
    from the configured camera without blur (orbit: its base direction). "classifier": mean conditional / mean
    unconditional denoising error; "contrast": the prompt's mean error / the mean error over its rival captions
    (``prior.options.contrast_prompts``, the prompt among them: :func:`contrast_prompts`; a prior without them falls
    back to "classifier"); "conditional": the mean conditional error; "guided": the mean guided error (SDS's; always
    for a prior without text, the oracle). The same draws score every candidate, so differences are
    the clips' (common random numbers). The candidates are rendered one by one and denoised together
    (``prior.denoising_error_table``: batched transformer calls)."""
    mode = config.phase_search_score if getattr(prior, "text_conditioned", True) else "guided"
    own = None
    if mode == "contrast":
        rivals = tuple(getattr(getattr(prior, "options", None), "contrast_prompts", ()))
        lowered = [r.lower() for r in rivals]
        if getattr(prior, "contrast_embeds", None) is None or str(prior.prompt).lower() not in lowered:
            log.warning("phase search: no rival captions for %r (no word of phase_search_contrast in it); scoring "
                        "with the classifier score instead", getattr(prior, "prompt", ""))
            mode = "classifier"
        else:
            own = lowered.index(str(prior.prompt).lower())
    draws: list[tuple[int, Tensor]] = []
    gen = torch.Generator().manual_seed(config.seed * 1000 + 13)

    @torch.no_grad()
    def latents_of(phases: np.ndarray) -> Tensor:
        params.phase.copy_(torch.as_tensor(np.asarray(phases), dtype=params.phase.dtype))
        link_pos, link_rot = renderer.link_poses(params)
        means, covars = renderer.pose(link_pos, link_rot)
        viewmats, K = camera if camera is not None else renderer.camera(frame_on if frame_on is not None else means)
        view = RenderView(viewmats, K, 0.0)
        video = renderer.render_view(means, covars, view)
        prior.set_view(view)
        latents = prior.encode(video, generator=torch.Generator().manual_seed(config.seed))
        if not draws:
            for t in config.phase_search_timesteps:
                for _ in range(config.phase_search_draws):
                    draws.append((int(t), torch.randn(latents.shape, generator=gen)))
        return latents

    @torch.no_grad()
    def score(candidates: list[np.ndarray]) -> list[float]:
        if mode == "guided":  # the oracle re-renders its target per view: one candidate at a time
            values = []
            for phases in candidates:
                latents = latents_of(phases)
                values.append(float(np.mean([prior.denoising_error(latents, t, n.to(latents.device))
                                             for t, n in draws])))
            return values
        latents = torch.cat([latents_of(phases) for phases in candidates])
        if mode == "contrast":  # (C, K): the error under each rival caption, the prompt's among them
            table = prior.denoising_error_table(latents, draws, prior.contrast_embeds).mean(1)
            return (table[:, own] / table.mean(1).clamp_min(1e-12)).tolist()
        table = prior.denoising_error_table(latents, draws).mean(1)  # (C, 2): unconditional, conditional
        if mode == "classifier":
            return (table[:, 1] / table[:, 0].clamp_min(1e-12)).tolist()
        return table[:, 1].tolist()

    return score


def _search_start_phases(params: Any, renderer: ClipRenderer, prior: Any, config: DistillConfig,
                         frame_on: Tensor | None, camera: tuple[Tensor, Tensor] | None,
                         progress: bool) -> list[dict[str, Any]]:
    """Set ``params.phase`` (a PhaseMotionParameters) to the best of phase.search_phases under
    :func:`phase_scorer`; returns the scored candidates."""

    score = phase_scorer(params, renderer, prior, config, frame_on, camera)
    with torch.no_grad():
        start = params.phase.detach().numpy().astype(np.float64)
    best, rows = search_phases(score, start, grid=config.phase_search_grid, refine=config.phase_search_refine,
                               sweeps=config.phase_search_sweeps, progress=progress)
    with torch.no_grad():
        params.phase.copy_(torch.as_tensor(best, dtype=params.phase.dtype))
    log.info("phase search: %d candidates, best %.5g at phases %s", len(rows),
             min(r["score"] for r in rows), np.round(best, 3).tolist())
    return rows


def render_motion(robot: Robot, motion: Motion, config: DistillConfig, width: int, height: int,
                  camera: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """Render a clip exactly as distillation's first iteration does (same asset, seed, camera rule, blur);
    returns (video, camera)."""
    _, render, first = target_view_renderer(robot, motion, config, width, height)
    view = first if camera is None else RenderView(*camera, first.blur_px)
    return render(view), (view.viewmats, view.K)


def target_view_renderer(robot: Robot, motion: Motion, config: DistillConfig, width: int, height: int
                         ) -> tuple[Tensor, Any, RenderView]:
    """The oracle's target: posed Gaussian means (F, N, 3) to frame cameras on, a function view -> the target
    rendered through that view, and the first iteration's view (configured camera framed on the target).

    Uses the asset, seed and rasterizer that distillation renders with, so a motion equal to the target
    renders identically through every view.
    """
    renderer = ClipRenderer(robot, width, height, config.n_gaussians, config.seed, config.backend, _view(config))
    with torch.no_grad():
        means, covars = renderer.pose(*renderer.link_poses(MotionParameters(motion, robot)))

    @torch.no_grad()
    def render_target(view: RenderView) -> Tensor:
        return renderer.render_view(means, covars, view)

    return means, render_target, RenderView(*renderer.camera(means), config.blur_at(0))


def _view(config: DistillConfig) -> tuple[float, float, float]:
    return config.camera_azimuth_deg, config.camera_elevation_deg, config.camera_margin


def _write_losses(path: Path, history: list[dict[str, float]]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as handle:
        fields = list(dict.fromkeys(k for row in history for k in row))  # rows of an older checkpoint lack new keys
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(history)


def _write_video(path: Path, video: Tensor, fps: float) -> None:

    write_mp4(video.detach(), path, fps=fps)


# ----------------------------------------------------------------------------- contacts of the result
def clip_feet(robot: Robot, clip: Motion) -> tuple[list[str], np.ndarray]:
    """The feet of a clip: its own ``foot_names`` / ``foot_offsets``, else the robot's detected legs (none for a
    robot without legs, e.g. an arm: then L_skate is zero and the distilled clip has no feet)."""
    if clip.foot_names:
        return list(clip.foot_names), np.asarray(clip.foot_offsets, dtype=np.float64).reshape(-1, 3)

    try:
        legs = find_legs(robot)
    except AKDError as exc:
        log.info("no feet for the skate term and the stance flags: %s", exc)
        return [], np.zeros((0, 3))
    return [leg.foot_link for leg in legs], np.array([leg.foot_offset for leg in legs], dtype=np.float64).reshape(-1, 3)


def contacts_from_heights(robot: Robot, motion: Motion, threshold: float = 0.02) -> np.ndarray:
    """(F, K) stance flags: a foot is in contact when its contact point is within ``threshold`` of the ground."""
    if not motion.foot_names:
        return np.zeros((motion.num_frames, 0), dtype=bool)
    fk = ForwardKinematics(robot)
    idx = torch.as_tensor([robot.link_index(n) for n in motion.foot_names])
    with torch.no_grad():
        pts = fk.link_points(torch.as_tensor(motion.root_pos), torch.as_tensor(motion.root_quat),
                             torch.as_tensor(motion.joint_pos), idx, torch.as_tensor(motion.foot_offsets))
    return (pts[..., 2] < threshold).numpy()


# ----------------------------------------------------------------------------- the stage
def stage_distill(run: RunDir, robot_spec: str | None = None, prompt: str | None = None, prior: str = "tiny",
                  video_model: str | Path | None = None, target: str | Path | None = None,
                  iterations: int | None = None, init: str | None = None, duration: float | None = None,
                  fps: float = 50.0, seed: int = 0, package_paths: tuple[str, ...] | list[str] = (),
                  resume: bool = False, prior_options: PriorOptions | None = None,
                  config_overrides: dict[str, Any] | None = None, oracle_space: str = "latent") -> dict[str, Any]:
    """`akd distill`: writes RUN/robot.urdf, RUN/distill/*, RUN/reference.npz (at ``fps``) and the manifest.

    prior "cogvideox" without ``video_model`` loads $AKD_VIDEO_MODEL or the shipped models/akd-gaits-tiny
    (:func:`akd_core.sds.prior.default.resolve_video_model`; a clear DependencyError when neither exists), and
    "oracle" without one encodes through that same folder's VAE. ``prior_options`` (guidance, noise schedule, input
    size) apply to a cogvideox prior; None: its defaults.

    The DistillConfig is, in rising precedence: its own defaults (the paper's per-frame SDS, with the settings that
    pass the oracle's known answer), the cogvideox folder's ``akd.json`` (:func:`model_defaults`: e.g. the shipped
    prior's ``param: phase``), then ``config_overrides`` and ``iterations`` (the command's flags). ``init`` None:
    ``standing`` on the target's root path for the oracle, else ``constant`` (a neutral start that holds no gait:
    the rest pose gliding forward, or with ``param`` phase the legs cycling at random phases)."""

    manifest = run.manifest()
    robot_spec = robot_spec or manifest.get("robot")
    prompt = prompt or manifest.get("prompt")
    if not robot_spec:
        raise ConfigError("akd distill needs --robot (built-in name or URDF path)")
    if not prompt or not prompt.strip():
        raise ConfigError("akd distill needs a non-empty --prompt describing the motion")
    if prior in ("cogvideox", "oracle"):
        video_model = resolve_video_model(video_model)
        if prior_options is not None:
            prior_options = dataclasses.replace(prior_options, video_model=video_model)
    robot = load_robot(robot_spec, package_paths)
    config, init, folder_defaults = distill_settings(prior, video_model, iterations, init, config_overrides, seed)
    text = prior_prompt(prompt, video_model) if prior == "cogvideox" else prompt  # what the prior's encoder reads
    target_motion = None
    if prior == "oracle":
        if target is None:
            raise ConfigError("--prior oracle needs --target RUN0 (a run whose reference.npz is the motion to recover)")
        target_motion = Motion.load(RunDir(target).require(REFERENCE, "akd gait --out RUN0 ..."), robot)
    run_config = {"prior": prior, "video_model": str(video_model) if video_model else None, "init": init,
                  "model_settings": dict(folder_defaults) or None, "prior_prompt": text if text != prompt else None,
                  "target": str(target) if target else None,
                  "oracle_space": oracle_space if prior == "oracle" else None, **asdict(config)}
    if prior_options is not None and prior != "oracle":
        run_config.update(guidance_scale=prior_options.guidance_scale, negative_prompt=prior_options.negative_prompt)
        schedule = prior_options.schedule()
        if schedule is not None:
            run_config.update(timestep_schedule=asdict(schedule))
        if prior_options.sds_denoise_steps != 1:
            run_config.update(sds_denoise_steps=prior_options.sds_denoise_steps)
    run.update_manifest(robot=str(robot_spec), robot_format=robot.source_format, prompt=prompt,
                        seeds={"distill": seed})
    with run.running_stage("distill", run_config) as metrics:
        write_run_robot(run, robot)  # robot.urdf, and robot.xml for an MJCF robot
        torch.manual_seed(seed)
        rivals: tuple[str, ...] = ()
        if (config.param == "phase" and config.phase_search_grid > 0 and config.phase_search_score == "contrast"
                and prior != "oracle"):
            rivals = contrast_prompts(text, config.phase_search_contrast)
            run_config.update(contrast_prompts=list(rivals) or None)
        if prior_options is not None and prior != "oracle":
            base_prior = make_prior_from_options(prior_options, text, seed=seed, contrast_prompts=rivals)
        else:  # the oracle encodes through the model folder's VAE
            base_name = prior if prior != "oracle" else "cogvideox"
            base_prior = make_prior(base_name, text, video_model=video_model, seed=seed,
                                    **({"contrast_prompts": rivals} if rivals else {}))
        num_frames = config.num_frames or base_prior.num_frames
        clip_seconds = (num_frames - 1) / config.video_fps
        phase_start = None
        if config.param == "phase":
            init_motion, phase_start = phase_start_clip(robot, prompt, init, num_frames, config, seed)
            run_config.update(cycle_hz=phase_start[0].frequency, cycle_speed=phase_start[0].speed,
                              start_phases=[round(float(p), 4) for p in phase_start[1]])
        else:
            init_motion = _initial_clip(robot, prompt, init, num_frames, config.video_fps, seed, target_motion,
                                        duration or clip_seconds)
        if config.init_noise > 0:
            init_motion = add_init_noise(robot, init_motion, config.init_noise, seed)
        run.set_stage("distill", config=run_config)  # with what was resolved since the stage started
        frame_on = None
        prior_obj = base_prior
        if target_motion is not None:

            target_clip = fit_clip(target_motion, num_frames, config.video_fps)
            frame_on, render_target, first_view = target_view_renderer(
                robot, target_clip, config, config.width or base_prior.width, config.height or base_prior.height)
            prior_obj = OracleVideoPrior.from_prior(base_prior, render_target(first_view),
                                                    target_renderer=render_target, space=oracle_space)
        out_dir = run.file("distill")
        out_dir.mkdir(exist_ok=True)
        result = distill(robot, prior_obj, init_motion, config, out_dir, resume=resume, frame_on=frame_on,
                         phase_start=phase_start)
        motion = result.motion
        motion.prompt = prompt
        if result.phase_params is not None:  # the cycle at every output frame, continued to --duration

            reference = continue_motion(result.phase_params, motion, fps, max(duration or 0.0, motion.duration),
                                        phase_start[0].frequency)
        else:
            reference = motion.resample(fps)
        reference.joint_pos = np.clip(reference.joint_pos, robot.lower, robot.upper)
        reference.foot_contacts = contacts_from_heights(robot, reference)
        reference.save(run.file(REFERENCE))
        final = result.history[-1] if result.history else {}
        metrics.update({"iterations": config.iterations,
                        "initial_sds": result.history[0]["sds"] if result.history else None,
                        "final_sds": final.get("sds"),
                        "final_smooth": final.get("smooth"), "final_ground": final.get("ground"),
                        "frames": motion.num_frames, "video_fps": config.video_fps})
        metrics.update(motion_metrics(robot, reference.root_pos, reference.root_quat, reference.joint_pos,
                                      reference.fps, reference.foot_names, reference.foot_offsets,
                                      reference.foot_contacts))  # foot skating, penetration, ... as `akd gait`
        metrics.update(feasibility_summary(robot, reference))  # of the written reference.npz
        # the distilled frames themselves (reference.npz interpolates them), or with --param phase the reference,
        # which evaluates the distilled cycle at every frame
        gait = classify_gait(robot, reference if result.phase_params is not None else motion)
        metrics.update({"gait_class": gait.gait, "gait_confidence": round(gait.confidence, 3)})
        if phase_start is not None:
            metrics.update(cycle_hz=phase_start[0].frequency, leg_labels=phase_start[0].labels,
                           leg_phases=[final.get(f"phase_{i}") for i in range(len(phase_start[1]))])
            if result.phase_search:
                best = min(result.phase_search, key=lambda r: r["score"])
                metrics.update(phase_search_candidates=len(result.phase_search),
                               phase_search_phases=[round((p - best["phases"][0]) % 1.0, 4) for p in best["phases"]])
        if target_motion is not None:
            target_clip = fit_clip(target_motion, num_frames, config.video_fps)
            err0 = np.abs(init_motion.joint_pos - target_clip.joint_pos).mean()
            err1 = np.abs(motion.joint_pos - target_clip.joint_pos).mean()
            metrics.update({"initial_joint_err_rad": float(err0), "final_joint_err_rad": float(err1),
                            "joint_err_reduction": float(1 - err1 / max(err0, 1e-12))})
    return run.stage("distill").get("metrics", {})


def contrast_prompts(prompt: str, groups: tuple[tuple[str, ...], ...] | list[list[str]]) -> tuple[str, ...]:
    """The rival captions of the phase search's "contrast" score: ``prompt`` told with each word of the first group
    that has a word in it (whole word, case-insensitive; every occurrence replaced), in the group's order, the
    prompt itself (its own word) among them; () when no group has a word in the prompt.

    ("a dog trotting fast forward", (("trotting", "pacing", "bounding"),)) -> ("a dog trotting fast forward",
    "a dog pacing fast forward", "a dog bounding fast forward")."""
    for group in groups:
        for word in group:
            pattern = re.compile(rf"\b{re.escape(word)}\b", re.IGNORECASE)
            if pattern.search(prompt):
                return tuple(pattern.sub(rival, prompt) for rival in group)
    return ()


def distill_settings(prior: str, video_model: str | Path | None, iterations: int | None, init: str | None,
                     config_overrides: dict[str, Any] | None, seed: int = 0,
                     cuda: bool | None = None) -> tuple[DistillConfig, str, dict[str, Any]]:
    """(DistillConfig, init, the folder's akd.json settings) of a `akd distill` run (see :func:`stage_distill`):
    DistillConfig's defaults < the cogvideox folder's akd.json < ``config_overrides`` / ``iterations``.
    ``cuda`` None: whether torch sees a GPU (the iteration default when neither the folder nor the caller sets
    one: 10000 on CUDA, 400 on CPU)."""
    # the oracle borrows the folder's VAE only: the settings its transformer suits are not the oracle's
    folder_defaults = model_defaults(video_model) if prior == "cogvideox" else {}
    settings = {**folder_defaults, **(config_overrides or {})}
    folder_iterations = settings.pop("iterations", None)
    cuda = torch.cuda.is_available() if cuda is None else cuda
    iterations = iterations or folder_iterations or (DEFAULT_ITERATIONS_CUDA if cuda else DEFAULT_ITERATIONS_CPU)
    config = DistillConfig(iterations=iterations, seed=seed, **settings)
    if init is None:
        init = "standing" if prior == "oracle" else "constant"
    if init not in INITS:
        raise ConfigError(f"--init must be one of {', '.join(INITS)}, got {init!r}")
    return config, init, folder_defaults


def model_defaults(folder: str | Path | None) -> dict[str, Any]:
    """The DistillConfig fields a model folder's ``akd.json`` sets (:func:`akd_core.sds.prior.default.model_settings`):
    its ``param`` and its ``distill`` object ({} without the file). ``iterations`` may be among them.

    Raises ConfigError naming the file and the field for a parametrisation or a setting DistillConfig does not
    have, or a value it refuses."""
    settings = model_settings(folder)
    if not settings:
        return {}
    path = Path(folder) / MODEL_SETTINGS_FILE
    values = dict(settings.get("distill", {}))
    if "param" in values:
        raise ConfigError(f"{path}: give 'param' once, at the top level, not inside 'distill'")
    if "param" in settings:
        if settings["param"] not in PARAMETRISATIONS:
            raise ConfigError(f"{path}: field 'param' must be one of {', '.join(PARAMETRISATIONS)}, got "
                              f"{settings['param']!r}")
        values["param"] = settings["param"]
    fields = {f.name: f for f in dataclasses.fields(DistillConfig)}
    for key, value in values.items():
        if key not in fields or key == "seed":
            raise ConfigError(f"{path}: 'distill' has an unknown setting {key!r}; the settings are DistillConfig's "
                              f"fields except seed ({', '.join(k for k in fields if k != 'seed')})")
        if isinstance(value, list):
            values[key] = tuple(tuple(v) if isinstance(v, list) else v for v in value)
    try:
        DistillConfig(**values)
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return values


def add_init_noise(robot: Robot, motion: Motion, std: float, seed: int) -> Motion:
    """A copy of ``motion`` whose joint angles carry i.i.d. Gaussian noise of ``std`` rad (every joint, every
    frame; from the stream (seed, 7)), clipped into the URDF limits (DistillConfig.init_noise)."""
    rng = np.random.default_rng([seed, 7])
    noisy = motion.joint_pos + rng.normal(0.0, std, motion.joint_pos.shape)
    return dataclasses.replace(motion, joint_pos=np.clip(noisy, robot.lower, robot.upper).astype(
        motion.joint_pos.dtype))


def phase_start_clip(robot: Robot, prompt: str, init: str, num_frames: int, config: DistillConfig,
                     seed: int) -> tuple[Motion, tuple[Any, np.ndarray]]:
    """``--param phase``: the start clip and (LegCycle, start phases) of :mod:`akd_core.sds.phase`.

    The cycle is the gait library's stride at the prompt's speed (``standing``: 0, stepping in place), its cadence
    capped at video_fps / min_stride_frames. The phases are random (seeded: no gait preferred) for ``--init
    constant`` / ``standing``, and the prompt's pattern for ``--init gait``."""

    if init not in ("gait", "constant", "standing"):
        raise ConfigError(f"--init must be gait, constant or standing, got {init!r}")
    legs = find_legs(robot)
    spec, _notes = spec_from_prompt(prompt, robot, legs)
    cap = config.video_fps / config.min_stride_frames if config.min_stride_frames > 0 else None
    cycle = library_cycle(robot, legs, 0.0 if init == "standing" else spec.speed, cap, config.cycle_harmonics)
    if init == "gait":
        phases = pattern_phases(cycle, phase_offsets(spec.pattern, legs))
    else:
        phases = random_phases(len(legs), seed)
    return cycle_clip(robot, cycle, phases, num_frames, config.video_fps), (cycle, phases)


def _initial_clip(robot: Robot, prompt: str, init: str, num_frames: int, fps: float, seed: int,
                  target: Motion | None, duration: float) -> Motion:
    height = standing_height(robot)
    if target is not None and init in ("standing", "gait"):
        # known-answer setting: the target's root path (x, y, heading), standing at rest height
        clip = fit_clip(target, num_frames, fps)
        clip.joint_pos = np.tile(robot.default_joint_pos(), (num_frames, 1)).astype(np.float32)
        clip.root_pos[:, 2] = height
        return clip
    if init == "constant":
        return constant_velocity_init(robot, num_frames, fps, speed=0.5, height=height)
    if init == "standing":
        return constant_velocity_init(robot, num_frames, fps, speed=0.0, height=height)
    if init != "gait":
        raise ConfigError(f"--init must be gait, constant or standing, got {init!r}")

    legs = find_legs(robot)
    spec, _notes = spec_from_prompt(prompt, robot, legs)
    motion = generate_gait(robot, spec, duration=max(duration, (num_frames - 1) / fps), fps=fps, legs=legs)
    return fit_clip(motion, num_frames, fps)
