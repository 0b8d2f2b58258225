"""The oracle prior: a "denoiser" that knows the answer, for testing distillation end to end.

Given a target video, its latents z* are encoded once with the same VAE and fitting as
the CogVideoX prior. The oracle's velocity is the one that makes x0_hat = z*:

    z_t = sqrt(a) z + sqrt(1-a) eps,   x0_hat = sqrt(a) z_t - sqrt(1-a) v
    =>  v = (sqrt(a) z_t - z*) / sqrt(1-a)

so the SDS gradient is exactly z - z*, for every t and eps: minimising the SDS loss pulls the
rendered video's latents onto the target's. Everything except :meth:`predict_v` (encoding,
timestep schedule, noising, gradient, loss) is the inherited CogVideoX code.

With a ``target_renderer`` the target is not one fixed video but the target motion seen through
the view of each iteration (:meth:`set_view`: random orbit cameras, coarse-to-fine blur), so the
oracle is a known answer for multi-view distillation too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from akd_core.io.errors import ConfigError
from akd_core.sds.prior.cogvideox import CogVideoXPrior

ORACLE_SPACES = ("latent", "pixels")


class OracleVideoPrior(CogVideoXPrior):
    """CogVideoXPrior whose v prediction returns the target latents as x0_hat.

    Args (besides CogVideoXPrior's):
        target_video: Tensor  # (F, 3, H, W) in [0, 1]; fitted and encoded like any render
        target_renderer: view -> target video through that view (multi-view / blurred known answers)
        space: "latent" (default: through the VAE, the real chain) or "pixels" (the "latents" are the fitted
            frames themselves, (1, F, 3, H, W): separates what the renders can show from what the VAE keeps)
    The oracle encodes with the VAE posterior mean by default (``sample_posterior=False`` in
    ``options``, set by :meth:`from_prior`), so a render equal to the target has zero gradient.
    """

    text_conditioned = False  # its prediction is the target's, whatever the prompt

    def __init__(
        self,
        *args: Any,
        target_video: Tensor,
        target_renderer: Callable[[Any], Tensor] | None = None,
        space: str = "latent",
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if space not in ORACLE_SPACES:
            raise ConfigError(f"oracle prior: space must be one of {', '.join(ORACLE_SPACES)}, got {space!r}")
        self.space = space
        self.target_renderer = target_renderer
        self._last_view: Any = None
        self._set_target(target_video)

    def encode(self, video: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """The VAE latents (space "latent"), or the fitted frames as (1, F, 3, H, W) float32 (space "pixels")."""
        if self.space == "pixels":
            return self.fit_video(video).to(self.device).float().unsqueeze(0)
        return super().encode(video, generator)

    def _set_target(self, video: Tensor) -> None:
        self.target_video = video.detach()
        with torch.no_grad():
            self.target_latents = self.encode(self.target_video)  # (1, F', C, h, w)

    @classmethod
    def from_prior(
        cls,
        prior: CogVideoXPrior,
        target_video: Tensor,
        sample_posterior: bool = False,
        target_renderer: Callable[[Any], Tensor] | None = None,
        space: str = "latent",
    ) -> OracleVideoPrior:
        """An oracle sharing ``prior``'s VAE, schedule, options and fitting.

        target_renderer: view -> target video (F, 3, H, W) seen through that view; when given, every
        :meth:`set_view` re-renders and re-encodes the target (``target_video`` is the first one).
        """
        parts = prior.components()
        parts["options"] = replace(parts["options"], sample_posterior=sample_posterior)
        return cls(**parts, target_video=target_video, target_renderer=target_renderer, space=space)

    def components(self) -> dict[str, Any]:
        return {**super().components(), "target_video": self.target_video, "target_renderer": self.target_renderer,
                "space": self.space}

    def set_view(self, view: Any) -> None:
        """Re-render the target through ``view`` (when built with a target_renderer) and encode it.

        A view equal to the previous one (fixed camera after the blur has ended) reuses the target latents.
        """
        if self.target_renderer is None or _same_view(view, self._last_view):
            return
        self._set_target(self.target_renderer(view))
        self._last_view = view

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


def _same_view(a: Any, b: Any) -> bool:
    """Views (objects with viewmats, K, blur_px) that render identically."""
    if a is None or b is None:
        return False
    return (a.blur_px == b.blur_px and a.viewmats.shape == b.viewmats.shape and torch.equal(a.viewmats, b.viewmats)
            and torch.equal(a.K, b.K))
