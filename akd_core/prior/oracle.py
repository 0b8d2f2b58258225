"""The oracle prior: a "denoiser" that knows the answer, for testing distillation end to end.

Given a target video, its latents z* are encoded once with the same VAE and fitting as
the CogVideoX prior. The oracle's velocity is the one that makes x0_hat = z*:

    z_t = sqrt(a) z + sqrt(1-a) eps,   x0_hat = sqrt(a) z_t - sqrt(1-a) v
    =>  v = (sqrt(a) z_t - z*) / sqrt(1-a)

so the SDS gradient is exactly z - z*, for every t and eps: minimising the SDS loss pulls the
rendered video's latents onto the target's. Everything except :meth:`predict_v` (encoding,
timestep schedule, noising, gradient, loss) is the inherited CogVideoX code.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from akd_core.errors import ConfigError
from akd_core.prior.cogvideox import CogVideoXPrior


class OracleVideoPrior(CogVideoXPrior):
    """CogVideoXPrior whose v prediction returns the target latents as x0_hat.

    Args (besides CogVideoXPrior's):
        target_video: Tensor  # (F, 3, H, W) in [0, 1]; fitted and encoded like any render
    The oracle encodes with the VAE posterior mean by default (``sample_posterior=False`` in
    ``options``, set by :meth:`from_prior`), so a render equal to the target has zero gradient.
    """

    def __init__(self, *args: Any, target_video: Tensor, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.target_video = target_video.detach()
        with torch.no_grad():
            self.target_latents = self.encode(self.target_video)  # (1, F', C, h, w)

    @classmethod
    def from_prior(
        cls, prior: CogVideoXPrior, target_video: Tensor, sample_posterior: bool = False
    ) -> OracleVideoPrior:
        """An oracle sharing ``prior``'s VAE, schedule, options and fitting."""
        parts = prior.components()
        parts["options"] = replace(parts["options"], sample_posterior=sample_posterior)
        return cls(**parts, target_video=target_video)

    def components(self) -> dict[str, Any]:
        return {**super().components(), "target_video": self.target_video}

    @torch.no_grad()
    def predict_v(self, noisy_latents: Tensor, timestep: int) -> Tensor:
        """v = (sqrt(a_t) z_t - z*) / sqrt(1 - a_t); float32, shape of ``noisy_latents``."""
        sqrt_a, sqrt_1ma = self._alpha(timestep)
        if sqrt_1ma == 0.0:
            raise ConfigError(f"oracle prior: timestep {timestep} has alpha_cumprod 1 (no noise); use t > 0")
        target = self.target_latents.to(noisy_latents.device)
        if target.shape != noisy_latents.shape:
            raise ConfigError(
                f"oracle prior: target latents {tuple(target.shape)} and render latents "
                f"{tuple(noisy_latents.shape)} differ; both go through the same fitting, so this is a bug"
            )
        return (sqrt_a * noisy_latents.float() - target) / sqrt_1ma
