"""Phase-space clip parameters for SDS (``akd distill --param phase``).

A gait is, to first order, one leg cycle that every leg repeats at a shared cadence, each leg with its own phase:
trot = diagonal pairs half a cycle apart, pace = lateral pairs, bound = front and hind pairs, walk = four beats.
The per-frame joint angles of the paper's SDS (``--param frames``) can represent any of these, but from a still or
gliding start every phase of a gait lowers the prior's loss alike, the pulls cancel, and no run here has stepped
(docs/sds.md, "What did not work"). This module optimises in the space where the gait's identity lives:

    q_d(t) = c_d0 + sum_h [a_dh cos(2 pi h u) + b_dh sin(2 pi h u)],   u = f t + phi_leg(d)

for every actuated joint d of a leg (``akd_core.model.legs``), with ``phi`` (one phase per leg, in cycles), the Fourier
coefficients (the cycle's shape: H harmonics, so the swing is smooth by construction and no Laplacian penalty has to
hold it down), the per-frame root pose and the per-frame angles of joints outside the legs (a spine, a tail) as the
parameters. The start cycle comes from the gait library: the prompt's speed, the cadence capped at
``video_fps / min_stride_frames`` (what the prior was trained on, ``akd prior data --min-stride-frames``), every
leg's joint angles over one steady stride with all legs in phase (so each leg's cycle is its own, whatever pattern
the prompt names). The start phases are random (seeded): neutral with respect to the gait, which SDS then picks.
Each leg keeps its stance sweep, so a foot on the ground moves backward under the body at the body's speed
whatever the phases: re-phasing the legs does not make the feet slide.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from akd_core.io.errors import ConfigError
from akd_core.model.legs import Leg
from akd_core.model.robot import Robot
from akd_core.model.spatial.tensor import quat_to_matrix, rotvec_to_matrix
from akd_core.motion.clip import Motion
from akd_core.motion.gait import PATTERNS_BY_LEGS, GaitSpec, generate_gait_result, resolve_spec, stance_pose

log = logging.getLogger(__name__)

CYCLE_SAMPLES = 64  # samples of the library stride the Fourier fit reads
DEFAULT_HARMONICS = 3


@dataclass
class LegCycle:
    """One stride of every leg joint as Fourier coefficients, and how fast it repeats.

    frequency Hz; speed m/s (the body speed that stride sweeps the stance feet at); body_height m;
    dofs (D,) robot joint indices; dof_leg (D,) leg index of each; coeffs (D, 1 + 2H): [mean, cos_1..H, sin_1..H]
    in rad of the cycle with phase u in [0, 1) (u = 0: the start of stance); labels: the legs' labels."""

    frequency: float
    speed: float
    body_height: float
    dofs: np.ndarray
    dof_leg: np.ndarray
    coeffs: np.ndarray
    labels: list[str]

    @property
    def harmonics(self) -> int:
        return (self.coeffs.shape[1] - 1) // 2

    def evaluate(self, phase: np.ndarray) -> np.ndarray:
        """Joint angles (..., D) of every leg dof at its leg's cycle phase: phase (..., L) in cycles."""
        u = np.asarray(phase, dtype=np.float64)[..., self.dof_leg]
        return fourier_series(torch.as_tensor(u), torch.as_tensor(self.coeffs)).numpy()


def fourier_series(u: Tensor, coeffs: Tensor) -> Tensor:
    """sum over harmonics of the (D, 1 + 2H) coefficients at phases u (..., D) (cycles) -> (..., D)."""
    h = (coeffs.shape[-1] - 1) // 2
    k = torch.arange(1, h + 1, dtype=u.dtype, device=u.device)
    angle = 2.0 * torch.pi * u[..., None] * k  # (..., D, H)
    cos = (torch.cos(angle) * coeffs[:, 1:h + 1]).sum(-1)
    return coeffs[:, 0] + cos + (torch.sin(angle) * coeffs[:, h + 1:]).sum(-1)


def library_cycle(robot: Robot, legs: Sequence[Leg], speed: float, max_cadence: float | None,
                  harmonics: int = DEFAULT_HARMONICS) -> LegCycle:
    """The gait library's stride at ``speed`` m/s (cadence capped at ``max_cadence`` Hz, speed slowed with it) as a
    :class:`LegCycle` of ``harmonics`` harmonics. All legs are generated in phase, so each leg's cycle is read
    directly at u = f t; the pattern only sets the duty factor (the leg count's default pattern: trot, walk,
    tripod, else wave)."""

    if not legs:
        raise ConfigError("--param phase needs a robot with legs (none were found); use --param frames")
    if harmonics < 1 or 2 * harmonics >= CYCLE_SAMPLES:
        raise ConfigError(f"--cycle-harmonics must be in [1, {CYCLE_SAMPLES // 2 - 1}], got {harmonics}")
    pattern = PATTERNS_BY_LEGS.get(len(legs), ("wave",))[0]
    stance = stance_pose(robot, legs)
    spec = GaitSpec(pattern=pattern, speed=float(speed))
    natural = resolve_spec(spec, legs, stance).frequency
    if max_cadence is not None:
        spec = spec.slowed_to(max_cadence, natural)
    spec = dataclasses.replace(spec, frequency=spec.frequency or natural, bounce=0.0, ramp_time=0.0,
                               phase_offsets={leg.label: 0.0 for leg in legs})
    result = generate_gait_result(robot, spec, duration=2.0 / spec.frequency, fps=CYCLE_SAMPLES * spec.frequency,
                                  legs=legs)
    used = result.spec  # the library may have slowed it further (URDF velocity limits)
    fps = CYCLE_SAMPLES * spec.frequency
    per_cycle = fps / used.frequency  # frames per stride of the clip as generated
    frames = result.motion.joint_pos
    u = np.arange(CYCLE_SAMPLES) / CYCLE_SAMPLES
    sample_t = (1.0 + u) * per_cycle  # the second stride: the first may still settle
    index = {name: i for i, name in enumerate(robot.joint_names)}
    dofs, dof_leg = [], []
    for i, leg in enumerate(legs):
        for name in leg.joint_names:
            dofs.append(index[name])
            dof_leg.append(i)
    dofs_a = np.asarray(dofs, dtype=np.int64)
    idx = np.arange(frames.shape[0])
    stride = np.stack([np.interp(sample_t, idx, frames[:, d]) for d in dofs_a], -1)  # (S, D)
    spectrum = np.fft.rfft(stride, axis=0) / CYCLE_SAMPLES
    coeffs = np.concatenate([spectrum[:1].real, 2 * spectrum[1:harmonics + 1].real,
                             -2 * spectrum[1:harmonics + 1].imag], 0).T  # (D, 1 + 2H)
    return LegCycle(frequency=float(used.frequency), speed=float(used.speed),
                    body_height=float(result.motion.root_pos[:, 2].mean()), dofs=dofs_a,
                    dof_leg=np.asarray(dof_leg, dtype=np.int64), coeffs=coeffs.astype(np.float64),
                    labels=[leg.label for leg in legs])


def random_phases(num_legs: int, seed: int) -> np.ndarray:
    """Start phases (cycles) drawn uniformly from the stream (seed, 11): no gait preferred."""
    return np.random.default_rng([seed, 11]).uniform(0.0, 1.0, num_legs)


def pattern_phases(cycle: LegCycle, offsets: dict[str, float]) -> np.ndarray:
    """Start phases of a gait-library pattern (``akd_core.motion.gait.phase_offsets``) for the cycle's legs."""
    return np.array([offsets[label] for label in cycle.labels], dtype=np.float64)


def cycle_clip(robot: Robot, cycle: LegCycle, phases: np.ndarray, num_frames: int, fps: float) -> Motion:
    """The start clip: the root at the cycle's body height moving along +x at its speed, the legs cycling at
    ``phases``, every other joint at the robot's default."""
    t = np.arange(num_frames) / fps
    joint_pos = np.tile(robot.default_joint_pos(), (num_frames, 1))
    joint_pos[:, cycle.dofs] = cycle.evaluate(cycle.frequency * t[:, None] + np.asarray(phases)[None])
    root_pos = np.stack([cycle.speed * t, np.zeros_like(t), np.full_like(t, cycle.body_height)], -1)
    return Motion(fps=fps, joint_names=robot.joint_names, joint_pos=np.clip(joint_pos, robot.lower, robot.upper),
                  root_pos=root_pos, root_quat=np.tile([0.0, 0.0, 0.0, 1.0], (num_frames, 1)))


class PhaseMotionParameters(torch.nn.Module):
    """The :class:`akd_core.sds.distill.MotionParameters` interface over a leg cycle: per-leg phases, the cycle's
    Fourier coefficients, per-frame root pose and per-frame angles of the joints outside the legs.

    ``joint_pos`` is computed (F, J), clamped into the URDF limits."""

    def __init__(self, init: Motion, robot: Robot, cycle: LegCycle, phases: np.ndarray):
        super().__init__()
        f = init.num_frames
        self.phase = torch.nn.Parameter(torch.as_tensor(np.asarray(phases, dtype=np.float32)).clone())
        self.coeffs = torch.nn.Parameter(torch.as_tensor(cycle.coeffs, dtype=torch.float32).clone())
        self.body_joint_pos = torch.nn.Parameter(torch.as_tensor(init.joint_pos, dtype=torch.float32).clone())
        self.root_pos = torch.nn.Parameter(torch.as_tensor(init.root_pos, dtype=torch.float32).clone())
        self.root_rotvec = torch.nn.Parameter(torch.zeros(f, 3))
        self.register_buffer("root_rot0", quat_to_matrix(torch.as_tensor(init.root_quat, dtype=torch.float32)))
        self.register_buffer("cycles", torch.as_tensor(cycle.frequency * np.arange(f) / init.fps, dtype=torch.float32))
        self.register_buffer("dofs", torch.as_tensor(cycle.dofs))
        self.register_buffer("dof_leg", torch.as_tensor(cycle.dof_leg))
        body = np.ones(len(robot.joint_names), dtype=bool)
        body[cycle.dofs] = False
        self.register_buffer("body_dofs", torch.as_tensor(np.flatnonzero(body)))
        self.register_buffer("lower", torch.as_tensor(np.nan_to_num(robot.lower, neginf=-1e6), dtype=torch.float32))
        self.register_buffer("upper", torch.as_tensor(np.nan_to_num(robot.upper, posinf=1e6), dtype=torch.float32))

    @property
    def joint_pos(self) -> Tensor:
        u = self.cycles[:, None] + self.phase[self.dof_leg][None]  # (F, D)
        legs = fourier_series(u, self.coeffs)
        q = self.body_joint_pos.index_copy(1, self.dofs, legs)
        return torch.minimum(torch.maximum(q, self.lower), self.upper)

    def root_rot(self) -> Tensor:

        return rotvec_to_matrix(self.root_rotvec) @ self.root_rot0

    @torch.no_grad()
    def project_to_limits(self) -> None:
        self.body_joint_pos.copy_(torch.minimum(torch.maximum(self.body_joint_pos, self.lower), self.upper))
        self.phase.copy_(torch.remainder(self.phase, 1.0))

    def all_params(self) -> Tensor:
        """The per-frame parameters, for the smoothness loss: the cycle is smooth by construction (H harmonics)
        and its stride's own Laplacian is the gait, which a Laplacian penalty would hold still."""
        return torch.cat([self.body_joint_pos[:, self.body_dofs], self.root_pos, self.root_rotvec], -1)

    def relative_phases(self) -> np.ndarray:
        """(L,) phases relative to the first leg, in [0, 1)."""
        with torch.no_grad():
            return torch.remainder(self.phase - self.phase[0], 1.0).numpy().astype(np.float64)


def search_phases(score: Callable[[list[np.ndarray]], list[float]], phases: np.ndarray, grid: int = 2,
                  refine: Sequence[int] = (4,), sweeps: int = 1, max_global: int = 256, progress: bool = True
                  ) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Search the legs' phases coarse to fine under ``score`` (a batch of candidates (L,) -> their scores, lower is
    better); returns the best phases and one row per scored candidate (stage, leg, phases, score).

    Global stage: every combination of the other legs' phases relative to the first leg's (kept at its start
    phase) on a grid of ``grid`` per cycle, scored as one batch: grid^(L-1) candidates (8 for a quadruped at 2: the
    legs in phase or half a cycle apart, among them trot, pace, bound and pronk and none preferred; 64 at 4, with
    the four-beat walks). Skipped when there would be more than ``max_global``. Then, for each resolution of
    ``refine`` (finer grids, e.g. (4,): quarter cycles, for the four-beat gaits), up to ``sweeps`` rounds that move
    one leg at a time to every other phase of that grid around the cycle from the current best (the first leg too: a
    shift of all phases is the same gait but not the same clip), scored as one batch, plus, when several legs improve
    on their own, all their best moves at once (trot -> walk moves two legs a quarter cycle); the round keeps the
    best, and a round that finds nothing better ends the resolution. The start is not scored (it is random: nothing
    to keep).

    Gradient steps on a phase only see the nearby pose, and one leg at a time is not enough either: even the
    oracle prior, whose loss is the distance to a trot's latents, leads Adam from random phases to a pattern with
    one pair half a cycle wrong, and the learnt priors' landscapes have such minima between the gaits too."""
    start = np.remainder(np.asarray(phases, dtype=np.float64), 1.0)
    num = len(start)
    cache: dict[tuple[int, ...], float] = {}
    rows: list[dict[str, Any]] = []

    def key(candidate: np.ndarray) -> tuple[int, ...]:
        return tuple(int(round(v * 1e6)) % 1_000_000 for v in np.remainder(candidate, 1.0))

    def evaluate(candidates: list[np.ndarray], stage: str, legs: list[int]) -> list[float]:
        """Scores of ``candidates``, the new ones scored in one batch."""
        todo, seen = [], set()
        for candidate, leg in zip(candidates, legs):
            k = key(candidate)
            if k not in cache and k not in seen:
                seen.add(k)
                todo.append((candidate, leg))
        if todo:
            values = score([c for c, _ in todo])
            for (candidate, leg), value in zip(todo, values):
                cache[key(candidate)] = float(value)
                rows.append({"stage": stage, "leg": leg, "phases": [round(float(v), 4) for v in candidate],
                             "score": float(value)})
            bar.update(len(todo))
        return [cache[key(c)] for c in candidates]

    combos = grid ** (num - 1) if num > 1 and grid > 0 else 1
    use_global = 1 < combos <= max_global
    bar = tqdm(total=(combos if use_global else 0) + sweeps * num * sum(max(r - 1, 0) for r in refine),
               desc="phase search", disable=not progress, dynamic_ncols=True)
    best, current = start, np.inf
    if use_global:
        candidates = []
        for index in range(combos):
            steps = np.array([(index // grid ** k) % grid for k in range(num - 1)], dtype=np.float64)
            candidate = start.copy()
            candidate[1:] = np.remainder(start[0] + steps / grid, 1.0)
            candidates.append(candidate)
        values = evaluate(candidates, "global", [-1] * len(candidates))
        pick = int(np.argmin(values))
        best, current = candidates[pick], values[pick]
        bar.set_postfix(score=f"{current:.4g}")
    for resolution in refine:
        for _sweep in range(sweeps):
            candidates, legs = [], []
            for leg in range(num):
                for k in range(1, resolution):
                    candidate = best.copy()
                    candidate[leg] = (best[leg] + k / resolution) % 1.0
                    candidates.append(candidate)
                    legs.append(leg)
            values = evaluate(candidates, f"refine{resolution}", legs)
            # every leg's best move, and, when several legs improve on their own, all of those moves at once
            moves = {}
            for candidate, leg, value in zip(candidates, legs, values):
                if value < current - 1e-12 and value < moves.get(leg, (None, np.inf))[1]:
                    moves[leg] = (candidate[leg], value)
            if len(moves) > 1:
                combined = best.copy()
                for leg, (phase, _value) in moves.items():
                    combined[leg] = phase
                candidates.append(combined)
                values = values + evaluate([combined], f"refine{resolution}", [-1])
            pick = int(np.argmin(values))
            if not values[pick] < current - 1e-12:
                break
            best, current = candidates[pick], values[pick]
            bar.set_postfix(score=f"{current:.4g}")
    if not np.isfinite(current):  # nothing searched (one leg, or grid 0 and no refinement)
        current = evaluate([start], "start", [-1])[0]
    bar.close()
    return best, rows


@torch.no_grad()
def continue_motion(params: PhaseMotionParameters, clip: Motion, fps: float, duration: float,
                    frequency: float) -> Motion:
    """The distilled phase-space clip at ``fps`` over ``duration`` s (longer than the clip: the gait continues).

    The legs come from the cycle itself at every output frame (not interpolated between the video's 4 frames per
    stride, which would cut the swing's corners and slide the feet); the root pose and the body joints are the
    clip's, interpolated, and past its end the root keeps the clip's mean velocity and last orientation and the
    body joints their last angles. ``frequency``: the cycle's cadence (Hz)."""
    dense = clip.resample(fps)
    n = int(np.floor(duration * fps + 1e-9)) + 1
    t = np.arange(n) / fps
    if n > dense.num_frames:
        extra = t[dense.num_frames:] - clip.duration
        velocity = (clip.root_pos[-1] - clip.root_pos[0]) / max(clip.duration, 1e-9)
        velocity[2] = 0.0
        root_pos = np.concatenate([dense.root_pos, clip.root_pos[-1] + extra[:, None] * velocity], 0)
        hold = lambda a, k: np.concatenate([a, np.repeat(a[-1:], k, 0)], 0)  # noqa: E731
        k = n - dense.num_frames
        dense = dataclasses.replace(dense, joint_pos=hold(dense.joint_pos, k), root_pos=root_pos,
                                    root_quat=hold(dense.root_quat, k), foot_contacts=hold(dense.foot_contacts, k))
    else:
        dense = dataclasses.replace(dense, joint_pos=dense.joint_pos[:n], root_pos=dense.root_pos[:n],
                                    root_quat=dense.root_quat[:n], foot_contacts=dense.foot_contacts[:n])
    u = torch.as_tensor(frequency * t, dtype=torch.float32)[:, None] + params.phase[params.dof_leg][None]
    legs = fourier_series(u, params.coeffs).numpy()
    joint_pos = dense.joint_pos.copy()
    dofs = params.dofs.numpy()
    joint_pos[:, dofs] = np.clip(legs, params.lower.numpy()[dofs], params.upper.numpy()[dofs])
    return dataclasses.replace(dense, joint_pos=joint_pos.astype(dense.joint_pos.dtype))
