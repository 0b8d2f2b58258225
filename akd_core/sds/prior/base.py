"""The video-prior interface: Score Distillation Sampling (SDS) with a v-prediction model.

A :class:`VideoPrior` scores a rendered video (F, 3, H, W) in [0, 1] and returns a scalar
loss whose gradient w.r.t. the video's latents is the SDS gradient (docs/sds.md, "How SDS works"; v-prediction
as in CogVideoX):

    z_t    = sqrt(a_t) z + sqrt(1 - a_t) eps
    x0_hat = sqrt(a_t) z_t - sqrt(1 - a_t) v(z_t; t, y)        v with classifier-free guidance
    grad   = z - x0_hat                                       (the v-weighting 1/(1-a_t) cancels)

The loss uses the usual reparametrisation ``0.5 * ||z - stop_grad(z - grad)||^2``:

- ``reduction="sum"`` (default): d(loss)/d(z) == grad exactly (threestudio's convention, batch 1).
  The loss value is 0.5 * ||grad||^2 and scales with the latent size.
- ``reduction="mean"``: the same divided by z.numel(); d(loss)/d(z) == grad / z.numel().

Subclasses provide the latent encoder (:meth:`VideoPrior.encode`) and the guided velocity
(:meth:`VideoPrior.predict_v`); timestep sampling, noising and the gradient live here, once.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from akd_core.io.errors import ConfigError

REDUCTIONS = ("sum", "mean")


@dataclass(frozen=True)
class TimestepSchedule:
    """t ~ U[t_start, t_end(step)] as fractions of the model's num_train_timesteps.

    t_end decays linearly from ``t_end_initial`` to ``t_end_final`` over the first
    ``anneal_fraction`` of the iterations, then stays there (paper: 0.98 -> 0.5 over the
    first 5000 of 10,000 iterations; t_start 0.02).
    """

    t_start: float = 0.02
    t_end_initial: float = 0.98
    t_end_final: float = 0.5
    anneal_fraction: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.t_start <= self.t_end_final <= self.t_end_initial <= 1.0:
            raise ConfigError(
                "timestep schedule: need 0 <= t_start <= t_end_final <= t_end_initial <= 1, got "
                f"t_start={self.t_start}, t_end_final={self.t_end_final}, t_end_initial={self.t_end_initial}; "
                "fix the prior's schedule options"
            )
        if not 0.0 <= self.anneal_fraction <= 1.0:
            raise ConfigError(f"timestep schedule: anneal_fraction must be in [0, 1], got {self.anneal_fraction}")

    def t_end(self, step: int, total_steps: int) -> float:
        """Upper bound (fraction) at iteration ``step`` of ``total_steps``."""
        anneal_steps = self.anneal_fraction * max(total_steps, 1)
        progress = 1.0 if anneal_steps <= 0 else min(max(step, 0) / anneal_steps, 1.0)
        return self.t_end_initial + (self.t_end_final - self.t_end_initial) * progress

    def bounds(self, step: int, total_steps: int, num_train_timesteps: int) -> tuple[int, int]:
        """Inclusive integer timestep range [lo, hi] at this iteration."""
        hi = min(int(self.t_end(step, total_steps) * num_train_timesteps), num_train_timesteps - 1)
        lo = min(int(self.t_start * num_train_timesteps), hi)
        return lo, hi

    def sample(
        self, step: int, total_steps: int, num_train_timesteps: int, generator: torch.Generator | None = None
    ) -> int:
        """One integer timestep drawn uniformly from :meth:`bounds`."""
        lo, hi = self.bounds(step, total_steps, num_train_timesteps)
        device = generator.device if generator is not None else "cpu"
        return int(torch.randint(lo, hi + 1, (1,), generator=generator, device=device).item())


def classifier_free_guidance(v_uncond: Tensor, v_cond: Tensor, scale: float) -> Tensor:
    """v = v_uncond + scale * (v_cond - v_uncond); scale 1 gives v_cond. Shapes broadcast alike."""
    return v_uncond + scale * (v_cond - v_uncond)


def guided_prediction(
    model: Callable[[Tensor, Tensor, Tensor], Tensor],
    noisy_latents: Tensor,  # (B, ...)
    timestep: Tensor,  # (B,)
    cond_embeds: Tensor,  # (B, S, D)
    uncond_embeds: Tensor,  # (B, S, D)
    scale: float,
) -> Tensor:
    """Classifier-free guidance in ONE batched model call on [uncond, cond].

    ``model(latents (2B, ...), embeds (2B, S, D), timestep (2B,)) -> (2B, ...)``.
    """
    latents_in = torch.cat([noisy_latents, noisy_latents], dim=0)
    embeds_in = torch.cat([uncond_embeds, cond_embeds], dim=0)
    out = model(latents_in, embeds_in, torch.cat([timestep, timestep], dim=0))
    v_uncond, v_cond = out.chunk(2, dim=0)
    return classifier_free_guidance(v_uncond, v_cond, scale)


def sds_surrogate_loss(latents: Tensor, grad: Tensor, reduction: str = "sum") -> Tensor:
    """Scalar whose gradient w.r.t. ``latents`` is ``grad`` (sum) or ``grad / numel`` (mean)."""
    if reduction not in REDUCTIONS:
        raise ConfigError(f"SDS reduction must be one of {REDUCTIONS}, got {reduction!r}")
    target = (latents - grad).detach()
    loss = 0.5 * (latents - target).pow(2).sum()
    return loss / latents.numel() if reduction == "mean" else loss


class VideoPrior(ABC):
    """A text-conditioned video diffusion prior that scores videos by SDS.

    Attributes set by subclasses:
        alphas_cumprod: Tensor  # (num_train_timesteps,) float64, the model's cumulative alphas
        schedule: TimestepSchedule
        guidance_scale: float
        reduction: "sum" | "mean"
    """

    alphas_cumprod: Tensor
    schedule: TimestepSchedule
    guidance_scale: float
    reduction: str
    prompt: str
    denoise_steps: int = 1  # DDIM steps to SDS's target (:meth:`denoise`); 1: the paper's one-step x0_hat

    @property
    def num_train_timesteps(self) -> int:
        return int(self.alphas_cumprod.shape[0])

    @abstractmethod
    def set_prompt(self, prompt: str) -> None:
        """Encode ``prompt`` (and the unconditional prompt) once; later calls reuse the embeddings."""

    def set_view(self, view: Any) -> None:
        """The camera and blur the next scored video was rendered with (``akd_core.sds.distill.RenderView``).

        Text-conditioned priors ignore it; the oracle renders its target through the same view.
        """
        del view  # text conditioning does not depend on the camera

    @abstractmethod
    def encode(self, video: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Differentiable: video (F, 3, H, W) in [0, 1] -> latents (1, F', C, h, w) float32."""

    @abstractmethod
    def predict_v(self, noisy_latents: Tensor, timestep: int) -> Tensor:
        """Guided velocity v(z_t; t, y) for latents (1, F', C, h, w); no gradient; float32, same shape."""

    def _alpha(self, timestep: int) -> tuple[float, float]:
        """(sqrt(a_t), sqrt(1 - a_t)) as Python floats (float64 precision)."""
        if not 0 <= timestep < self.num_train_timesteps:
            raise ConfigError(f"timestep {timestep} outside [0, {self.num_train_timesteps - 1}]")
        a = float(self.alphas_cumprod[timestep])
        return math.sqrt(a), math.sqrt(max(1.0 - a, 0.0))

    def add_noise(self, latents: Tensor, noise: Tensor, timestep: int) -> Tensor:
        """z_t = sqrt(a_t) z + sqrt(1 - a_t) eps."""
        sqrt_a, sqrt_1ma = self._alpha(timestep)
        return sqrt_a * latents + sqrt_1ma * noise

    def x0_from_v(self, noisy_latents: Tensor, v: Tensor, timestep: int) -> Tensor:
        """x0_hat = sqrt(a_t) z_t - sqrt(1 - a_t) v (v-prediction parametrisation)."""
        sqrt_a, sqrt_1ma = self._alpha(timestep)
        return sqrt_a * noisy_latents - sqrt_1ma * v

    def denoise_timesteps(self, timestep: int, steps: int) -> list[int]:
        """The timesteps a ``steps``-step denoise from ``timestep`` predicts at: ``timestep`` and then every
        (timestep + 1) / steps below it ("trailing" spacing, as CogVideoX's scheduler from t = 999)."""
        stride = max((timestep + 1) / max(steps, 1), 1.0)
        return sorted({max(round(timestep - k * stride), 0) for k in range(max(steps, 1))}, reverse=True)

    @torch.no_grad()
    def denoise(self, noisy_latents: Tensor, timestep: int, steps: int = 1) -> Tensor:
        """x0 reached from z_t by ``steps`` deterministic DDIM steps (eta 0) of the guided velocity.

        steps = 1 is SDS's one-step x0_hat (the posterior mean). More steps land on one sharp sample of the prior
        instead of the mean of all the videos z_t could have come from (at high noise, a mean over every phase of a
        gait is a body whose legs do not move); the last step's x0 prediction is returned, as the scheduler's
        final step does with alphas_cumprod[-1] = 1.
        """
        x = noisy_latents.float()
        times = self.denoise_timesteps(timestep, steps)
        for k, t in enumerate(times):
            v = self.predict_v(x, t).float()
            x0 = self.x0_from_v(x, v, t)
            if k + 1 < len(times):
                sqrt_a, sqrt_1ma = self._alpha(t)
                eps = sqrt_1ma * x + sqrt_a * v
                sqrt_a_next, sqrt_1ma_next = self._alpha(times[k + 1])
                x = sqrt_a_next * x0 + sqrt_1ma_next * eps
        return x0

    @torch.no_grad()
    def sds_grad(self, latents: Tensor, timestep: int, noise: Tensor) -> tuple[Tensor, Tensor]:
        """SDS gradient on latents (1, F', C, h, w) at a fixed timestep and noise -> (grad, x0_hat).

        x0_hat is :meth:`denoise` with the prior's ``denoise_steps`` (1: the paper's SDS)."""
        latents = latents.detach().float()
        noisy = self.add_noise(latents, noise.float(), timestep)
        x0_hat = self.denoise(noisy, timestep, self.denoise_steps)
        grad = torch.nan_to_num(latents - x0_hat, nan=0.0, posinf=0.0, neginf=0.0)
        return grad, x0_hat

    # False for a prior whose prediction ignores the prompt (the oracle): phase search then scores the guided error
    text_conditioned: bool = True

    @torch.no_grad()
    def predict_v_parts(self, noisy_latents: Tensor, timestep: int) -> tuple[Tensor, Tensor]:
        """(unconditional v, prompt-conditional v) for (1, F', C, h, w): the two halves of classifier-free
        guidance, here as :meth:`predict_v` at guidance 0 and 1 (CogVideoXPrior gets both from one batched call)."""
        scale = self.guidance_scale
        try:
            self.guidance_scale = 0.0
            v_uncond = self.predict_v(noisy_latents, timestep).float()
            self.guidance_scale = 1.0
            v_cond = self.predict_v(noisy_latents, timestep).float()
        finally:
            self.guidance_scale = scale
        return v_uncond, v_cond

    @torch.no_grad()
    def denoising_errors(self, latents: Tensor, timestep: int, noise: Tensor) -> tuple[float, float]:
        """(unconditional, conditional) :meth:`denoising_error` from one batched prediction: how well the prior
        denoises the clip without and with the prompt. Their ratio < 1 says the prompt explains the clip (the
        implicit classifier of classifier-free guidance)."""
        noisy = self.add_noise(latents.detach().float(), noise.float(), timestep)
        v_uncond, v_cond = self.predict_v_parts(noisy, timestep)
        clean = latents.detach().float()
        return tuple(float((clean - self.x0_from_v(noisy, v.float(), timestep)).pow(2).mean())
                     for v in (v_uncond, v_cond))

    @torch.no_grad()
    def denoising_error_table(self, latents: Tensor, draws: list[tuple[int, Tensor]],
                              embeds: Tensor | None = None) -> Tensor:
        """(B, D, 2) unconditional and prompt-conditional :meth:`denoising_error` of each of B clips' latents
        (B, F', C, h, w) at each of D (timestep, noise (1, F', C, h, w)) draws, the same draws for every clip
        (common random numbers). Here one :meth:`denoising_errors` per clip and draw; CogVideoXPrior batches them
        and also scores other text embeddings (``embeds`` (K, S, D')), which this generic version cannot."""
        if embeds is not None:
            raise ConfigError(f"{type(self).__name__} cannot score other text embeddings")
        table = torch.zeros(latents.shape[0], len(draws), 2, dtype=torch.float64)
        for b in range(latents.shape[0]):
            for d, (t, noise) in enumerate(draws):
                table[b, d] = torch.tensor(self.denoising_errors(latents[b:b + 1], t, noise))
        return table

    @torch.no_grad()
    def denoising_error(self, latents: Tensor, timestep: int, noise: Tensor) -> float:
        """Mean squared distance from latents (1, F', C, h, w) to the prior's one-step x0 estimate from z_t
        (``timestep``, ``noise``): the quantity whose gradient SDS follows (guided, as SDS is), equal to
        (1 - a_t) x the v-prediction MSE. Lower: the prior finds the clip more likely under the prompt. With the
        same timestep and noise it compares clips (common random numbers: akd_core.sds.phase' phase search)."""
        noisy = self.add_noise(latents.detach().float(), noise.float(), timestep)
        x0_hat = self.x0_from_v(noisy, self.predict_v(noisy, timestep).float(), timestep)
        return float((latents.detach().float() - x0_hat).pow(2).mean())

    def sds_loss_latents(
        self,
        latents: Tensor,  # (1, F', C, h, w)
        step: int = 0,
        total_steps: int = 1,
        generator: torch.Generator | None = None,
        timestep: int | None = None,
        noise: Tensor | None = None,
    ) -> tuple[Tensor, dict[str, Any]]:
        """SDS loss on latents; ``timestep``/``noise`` are drawn from the schedule/generator when None."""
        if timestep is None:
            timestep = self.schedule.sample(step, total_steps, self.num_train_timesteps, generator)
        if noise is None:
            gen_device = generator.device if generator is not None else latents.device
            noise = torch.randn(latents.shape, generator=generator, device=gen_device, dtype=torch.float32)
        noise = noise.to(device=latents.device, dtype=torch.float32)
        grad, x0_hat = self.sds_grad(latents, timestep, noise)
        loss = sds_surrogate_loss(latents.float(), grad, self.reduction)
        lo, hi = self.schedule.bounds(step, total_steps, self.num_train_timesteps)
        info = {
            "timestep": timestep,
            "t_bounds": (lo, hi),
            "grad_norm": float(grad.norm()),
            "latents_norm": float(latents.detach().norm()),
            "latents": latents.detach(),
            "noise": noise,
            "x0_hat": x0_hat,
            "grad": grad,
        }
        return loss, info

    def sds_loss(
        self,
        video: Tensor,  # (F, 3, H, W) in [0, 1]
        step: int = 0,
        total_steps: int = 1,
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, dict[str, Any]]:
        """Encode ``video`` and return (SDS loss scalar, info). Backward reaches ``video`` through the encoder.

        info: timestep (int), t_bounds (lo, hi), grad_norm, latents_norm (floats), and the detached
        tensors latents, noise, x0_hat, grad (1, F', C, h, w).
        """
        latents = self.encode(video, generator=generator)
        return self.sds_loss_latents(latents, step, total_steps, generator)
