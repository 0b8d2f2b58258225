"""CogVideoX as an SDS prior, loaded from a LOCAL diffusers folder (2B, 5B, or a tiny test model).

The prior VAE-encodes a rendered video to latents z (with gradients, through the encoder),
noises them with the model's own schedule (v-prediction, zero-terminal-SNR rescaling, SNR
shift: ``alphas_cumprod`` is taken from ``CogVideoXDDIMScheduler`` so it matches the
sampler exactly), runs the transformer on [uncond, cond] in one call and returns the SDS
gradient z - x0_hat (see :mod:`akd_core.sds.prior.base`).

Renders are fitted to the model first: the frame count to ``num_frames`` (8n+1, the
VAE's frame batching; default the transformer's ``sample_frames``, 49 for CogVideoX), the
size to ``height`` x ``width`` (default ``sample_height*8`` x ``sample_width*8``, 480x720).

Weights are never downloaded: every load passes ``local_files_only=True``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from akd_core.io.errors import ConfigError, DependencyError
from akd_core.sds.prior.base import TimestepSchedule, VideoPrior, guided_prediction

FRAME_FITS = ("resample", "pad")
SIZE_FITS = ("letterbox", "stretch")

# The folder layout `from_pretrained` needs: (relative path, what it is).
REQUIRED_ENTRIES = (
    ("model_index.json", "pipeline index"),
    ("transformer/config.json", "CogVideoXTransformer3DModel config (+ weights)"),
    ("vae/config.json", "AutoencoderKLCogVideoX config (+ weights)"),
    ("scheduler/scheduler_config.json", "CogVideoXDDIMScheduler / CogVideoXDPMScheduler config"),
    ("text_encoder/config.json", "T5EncoderModel config (+ weights)"),
    ("tokenizer", "T5 tokenizer folder"),
)


class PromptEncoder(Protocol):
    """Text -> the transformer's ``encoder_hidden_states``: list of B prompts -> (B, S, D)."""

    def __call__(self, prompts: list[str]) -> Tensor: ...


@dataclass(frozen=True)
class CogVideoXOptions:
    """How renders are fitted to the model and how SDS is run.

    num_frames: frames fed to the VAE (8n+1); None -> transformer.config.sample_frames.
    height, width: pixels (multiples of 8 * patch_size); None -> transformer sample size * 8.
    frame_fit: "resample" (linear in time) or "pad" (repeat the last frame; longer clips are resampled).
    size_fit: "letterbox" (scale to fit, keep aspect, pad by replicating edges) or "stretch".
    sample_posterior: z = VAE posterior sample (True, as the pipelines do) or its mean (False).
    """

    num_frames: int | None = None
    height: int | None = None
    width: int | None = None
    frame_fit: str = "resample"
    size_fit: str = "letterbox"
    guidance_scale: float = 100.0
    schedule: TimestepSchedule = field(default_factory=TimestepSchedule)
    reduction: str = "sum"
    negative_prompt: str = ""
    sample_posterior: bool = True
    denoise_steps: int = 1  # DDIM steps from z_t to SDS's x0_hat (1: the paper's one-step prediction)
    # more prompts encoded with the prompt (before the text encoder is freed): ``CogVideoXPrior.contrast_embeds``,
    # the captions the phase search's "contrast" score compares the prompt with (akd_core.sds.distill)
    contrast_prompts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.frame_fit not in FRAME_FITS:
            raise ConfigError(f"prior option frame_fit must be one of {FRAME_FITS}, got {self.frame_fit!r}")
        if self.size_fit not in SIZE_FITS:
            raise ConfigError(f"prior option size_fit must be one of {SIZE_FITS}, got {self.size_fit!r}")
        if self.denoise_steps < 1:
            raise ConfigError(f"--sds-denoise-steps must be >= 1, got {self.denoise_steps}")


# ----------------------------------------------------------------------------- video fitting


def fit_frames(video: Tensor, num_frames: int, mode: str = "resample") -> Tensor:
    """(F, 3, H, W) -> (num_frames, 3, H, W), differentiable.

    "resample": linear interpolation in time (first and last frames kept).
    "pad": repeat the last frame when F < num_frames; a longer clip is resampled.
    """
    count = video.shape[0]
    if count == num_frames:
        return video
    if mode == "pad" and count < num_frames:
        return torch.cat([video, video[-1:].expand(num_frames - count, *video.shape[1:])], dim=0)
    pos = torch.linspace(0.0, count - 1, num_frames, device=video.device, dtype=torch.float64)
    lo = pos.floor().long().clamp(max=count - 1)
    hi = (lo + 1).clamp(max=count - 1)
    frac = (pos - lo).to(video.dtype).view(-1, 1, 1, 1)
    return video[lo] * (1.0 - frac) + video[hi] * frac


def fit_size(video: Tensor, height: int, width: int, mode: str = "letterbox") -> Tensor:
    """(F, 3, H, W) -> (F, 3, height, width), differentiable (bilinear; antialiased when shrinking)."""
    src_h, src_w = video.shape[-2:]
    if (src_h, src_w) == (height, width):
        return video
    if mode == "stretch":
        new_h, new_w = height, width
    else:
        scale = min(height / src_h, width / src_w)
        new_h, new_w = max(1, round(src_h * scale)), max(1, round(src_w * scale))
    antialias = new_h < src_h or new_w < src_w
    out = F.interpolate(video, size=(new_h, new_w), mode="bilinear", align_corners=False, antialias=antialias)
    if (new_h, new_w) == (height, width):
        return out
    top, left = (height - new_h) // 2, (width - new_w) // 2
    pad = (left, width - new_w - left, top, height - new_h - top)
    return F.pad(out, pad, mode="replicate")


# ----------------------------------------------------------------------------- prompt encoding


class T5PromptEncoder:
    """CogVideoX's text path: T5 tokenizer (pad to max length, truncate) + T5 encoder, no mask."""

    def __init__(self, tokenizer: Any, text_encoder: torch.nn.Module, max_sequence_length: int) -> None:
        self.tokenizer = tokenizer
        self.text_encoder = text_encoder
        self.max_sequence_length = max_sequence_length

    @torch.no_grad()
    def __call__(self, prompts: list[str]) -> Tensor:
        ids = self.tokenizer(
            prompts,
            padding="max_length",
            max_length=self.max_sequence_length,
            truncation=True,
            add_special_tokens=True,
            return_tensors="pt",
        ).input_ids
        device = next(self.text_encoder.parameters()).device
        return self.text_encoder(ids.to(device))[0]


def check_model_folder(folder: str | Path) -> Path:
    """Raise DependencyError naming every missing entry of a diffusers CogVideoX folder."""
    folder = Path(folder)
    expected = "\n".join(f"  {name:34s} {what}" for name, what in REQUIRED_ENTRIES)
    if not folder.is_dir():
        raise DependencyError(
            f"video model folder {folder} does not exist. --video-model must name a LOCAL diffusers CogVideoX "
            f"folder (e.g. a download of THUDM/CogVideoX-2b or -5b) containing:\n{expected}\n"
            "Weights are never downloaded at run time; use --prior tiny or --prior oracle to run without one."
        )
    missing = [name for name, _ in REQUIRED_ENTRIES if not (folder / name).exists()]
    if missing:
        raise DependencyError(
            f"video model folder {folder} is incomplete: missing {', '.join(missing)}. "
            f"A diffusers CogVideoX folder contains:\n{expected}\nRe-copy the complete model folder."
        )
    return folder


def _load_component(folder: Path, what: str, loader: Callable[[], Any]) -> Any:
    try:
        return loader()
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise DependencyError(
            f"cannot load the {what} from video model folder {folder}: {exc}. "
            "Check that the folder is a complete diffusers CogVideoX model (config and weight files)."
        ) from exc


# ----------------------------------------------------------------------------- the prior


class CogVideoXPrior(VideoPrior):
    """SDS with a CogVideoX transformer + VAE. Build with :meth:`from_pretrained` or :func:`make_tiny_prior`.

    Args:
        transformer: CogVideoXTransformer3DModel (frozen here).
        vae: AutoencoderKLCogVideoX (frozen here).
        alphas_cumprod: Tensor  # (num_train_timesteps,) from the model's scheduler
        prompt: text prompt; encoded once with ``prompt_encoder`` (or taken from ``prompt_embeds``).
        prompt_encoder: list[str] -> (B, S, D); dropped after encoding unless ``keep_prompt_encoder``.
        prompt_embeds: (cond (1, S, D), uncond (1, S, D)) to use instead of encoding.
        contrast_embeds: (K, S, D) of ``options.contrast_prompts`` to use instead of encoding them.
    """

    def __init__(
        self,
        transformer: torch.nn.Module,
        vae: torch.nn.Module,
        alphas_cumprod: Tensor,
        prompt: str,
        prompt_encoder: PromptEncoder | None = None,
        prompt_embeds: tuple[Tensor, Tensor] | None = None,
        options: CogVideoXOptions | None = None,
        keep_prompt_encoder: bool = False,
        contrast_embeds: Tensor | None = None,
    ) -> None:
        self.options = options or CogVideoXOptions()
        self.transformer = transformer.eval().requires_grad_(False)
        self.vae = vae.eval().requires_grad_(False)
        self.alphas_cumprod = alphas_cumprod.detach().to("cpu", torch.float64)
        self.schedule = self.options.schedule
        self.guidance_scale = float(self.options.guidance_scale)
        self.denoise_steps = int(self.options.denoise_steps)
        self.reduction = self.options.reduction
        self.spatial_factor = 2 ** (len(vae.config.block_out_channels) - 1)
        self.frame_multiple = int(getattr(vae, "num_sample_frames_batch_size", 8))
        self.num_frames, self.height, self.width = self._resolve_shape()
        self._rotary_cache: dict[tuple[int, int, int], tuple[Tensor, Tensor]] = {}
        self.prompt_encoder = prompt_encoder
        if prompt_embeds is not None:
            self.prompt = prompt
            self.cond_embeds, self.uncond_embeds = (e.to(self.device, self.dtype) for e in prompt_embeds)
        else:
            self.set_prompt(prompt)
        # (K, S, D) of options.contrast_prompts
        self.contrast_embeds: Tensor | None = None if contrast_embeds is None else contrast_embeds.to(self.device,
                                                                                                      self.dtype)
        if self.options.contrast_prompts and self.contrast_embeds is None:
            if self.prompt_encoder is None:
                raise ConfigError("contrast_prompts need the prior's text encoder; build the prior from a model "
                                  "folder (or with a prompt encoder), not from precomputed embeddings")
            self.contrast_embeds = self.prompt_encoder(list(self.options.contrast_prompts)).to(self.device,
                                                                                               self.dtype)
        if not keep_prompt_encoder:
            self.prompt_encoder = None  # frees the T5 encoder (~10 GB for the real model)

    # -- configuration -------------------------------------------------------------------

    @property
    def device(self) -> torch.device:
        return next(self.transformer.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.transformer.parameters()).dtype

    def _resolve_shape(self) -> tuple[int, int, int]:
        cfg = self.transformer.config
        opts = self.options
        num_frames = opts.num_frames or int(cfg.sample_frames)
        height = opts.height or int(cfg.sample_height) * self.spatial_factor
        width = opts.width or int(cfg.sample_width) * self.spatial_factor
        if (num_frames - 1) % self.frame_multiple != 0:
            raise ConfigError(
                f"prior num_frames={num_frames}: the CogVideoX VAE needs {self.frame_multiple}n+1 frames "
                f"(e.g. 9, 17, 49); choose such a count"
            )
        pixel_multiple = self.spatial_factor * int(cfg.patch_size)
        if height % pixel_multiple or width % pixel_multiple:
            raise ConfigError(
                f"prior resolution {height}x{width}: height and width must be multiples of {pixel_multiple} "
                f"(VAE factor {self.spatial_factor} x patch size {cfg.patch_size})"
            )
        return num_frames, height, width

    def set_prompt(self, prompt: str) -> None:
        """Encode ``prompt`` and the negative prompt in one call; needs the prompt encoder."""
        if self.prompt_encoder is None:
            raise ConfigError(
                "this prior's text encoder was freed after the first prompt; construct the prior with "
                "keep_prompt_encoder=True to change prompts"
            )
        embeds = self.prompt_encoder([prompt, self.options.negative_prompt])
        self.prompt = prompt
        self.cond_embeds, self.uncond_embeds = (e.unsqueeze(0).to(self.device, self.dtype) for e in embeds)

    # -- encoding ------------------------------------------------------------------------

    def fit_video(self, video: Tensor) -> Tensor:
        """(F, 3, H, W) -> (num_frames, 3, height, width) with the configured fits."""
        if video.ndim != 4 or video.shape[1] != 3 or video.shape[0] < 1:
            raise ConfigError(f"prior input video must be (F, 3, H, W) in [0, 1], got shape {tuple(video.shape)}")
        video = fit_frames(video, self.num_frames, self.options.frame_fit)
        return fit_size(video, self.height, self.width, self.options.size_fit)

    def encode(self, video: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """video (F, 3, H, W) in [0, 1] -> latents (1, F', C, h, w) float32, differentiable through the VAE."""
        video = self.fit_video(video).to(self.device, self.vae.dtype)
        pixels = (video * 2.0 - 1.0).permute(1, 0, 2, 3).unsqueeze(0)  # (1, 3, F, H, W) in [-1, 1]
        posterior = self.vae.encode(pixels).latent_dist
        latents = posterior.sample(generator) if self.options.sample_posterior else posterior.mode()
        latents = latents * self.vae.config.scaling_factor
        return latents.permute(0, 2, 1, 3, 4).float()  # (1, F', C, h, w): the transformer's layout

    @torch.no_grad()
    def decode(self, latents: Tensor) -> Tensor:
        """latents (1, F', C, h, w) -> video (F, 3, H, W) in [0, 1] (previews of x0_hat)."""
        latents = latents.to(self.device, self.vae.dtype).permute(0, 2, 1, 3, 4) / self.vae.config.scaling_factor
        frames = self.vae.decode(latents).sample  # (1, 3, F, H, W) in [-1, 1]
        return ((frames[0].permute(1, 0, 2, 3).float() + 1.0) / 2.0).clamp(0.0, 1.0)

    # -- denoiser ------------------------------------------------------------------------

    def rotary_embeddings(self, latent_frames: int, latent_h: int, latent_w: int) -> tuple[Tensor, Tensor] | None:
        """As CogVideoXPipeline._prepare_rotary_positional_embeddings; None when the model has no RoPE."""
        cfg = self.transformer.config
        if not cfg.use_rotary_positional_embeddings:
            return None
        key = (latent_frames, latent_h, latent_w)
        if key not in self._rotary_cache:
            self._rotary_cache[key] = rotary_embeddings(cfg, latent_frames, latent_h, latent_w, self.device)
        return self._rotary_cache[key]

    def _transformer_call(self, latents: Tensor, embeds: Tensor, timestep: Tensor) -> Tensor:
        """latents (B, F', C, h, w) -> v (B, F', C, h, w); pads latent frames to patch_size_t (CogVideoX 1.5)."""
        p_t = self.transformer.config.patch_size_t
        extra = 0 if p_t is None else (-latents.shape[1]) % p_t
        if extra:  # the 1.5 pipeline pads at the front and discards those frames afterwards
            latents = torch.cat([latents[:, :1].expand(-1, extra, -1, -1, -1), latents], dim=1)
        rotary = self.rotary_embeddings(latents.shape[1], latents.shape[3], latents.shape[4])
        v = self.transformer(
            hidden_states=latents,
            encoder_hidden_states=embeds,
            timestep=timestep,
            image_rotary_emb=rotary,
            return_dict=False,
        )[0]
        return v[:, extra:]

    @torch.no_grad()
    def v_mse(self, latents: Tensor, noise: Tensor, timestep: int, embeds: Tensor) -> float:
        """Unguided v-prediction MSE of the prompt ``embeds`` (1, S, D) on z_t = add_noise(latents, noise, t): the
        diffusion loss that prompt gives the clip (lower: the prompt fits it better). The benches that ask which
        prompt a model prefers for a clip (bench_prior_captions.py, bench_prior_renders.py) compare these."""
        sqrt_a, sqrt_1ma = self._alpha(timestep)
        z_t = (sqrt_a * latents + sqrt_1ma * noise).to(self.device, self.dtype)
        v = (sqrt_a * noise - sqrt_1ma * latents).to(self.device, self.dtype)
        t = torch.full((z_t.shape[0],), timestep, device=self.device, dtype=torch.long)
        return float(((self._transformer_call(z_t, embeds, t) - v).float() ** 2).mean())

    @torch.no_grad()
    def predict_v(self, noisy_latents: Tensor, timestep: int) -> Tensor:
        """Guided v for (1, F', C, h, w), one batched transformer call on [uncond, cond]."""
        z_t = noisy_latents.to(self.device, self.dtype)
        t = torch.full((z_t.shape[0],), timestep, device=self.device, dtype=torch.long)
        v = guided_prediction(self._transformer_call, z_t, t, self.cond_embeds, self.uncond_embeds, self.guidance_scale)
        return v.float()

    @torch.no_grad()
    def predict_v_parts(self, noisy_latents: Tensor, timestep: int) -> tuple[Tensor, Tensor]:
        """(v_uncond, v_cond) for (1, F', C, h, w) from the same batched call :meth:`predict_v` makes."""
        z_t = noisy_latents.to(self.device, self.dtype)
        t = torch.full((2 * z_t.shape[0],), timestep, device=self.device, dtype=torch.long)
        out = self._transformer_call(torch.cat([z_t, z_t]), torch.cat([self.uncond_embeds, self.cond_embeds]), t)
        v_uncond, v_cond = out.float().chunk(2, dim=0)
        return v_uncond, v_cond

    max_batch: int = 32  # transformer samples per call in :meth:`denoising_error_table`

    @torch.no_grad()
    def denoising_error_table(self, latents: Tensor, draws: list[tuple[int, Tensor]],
                              embeds: Tensor | None = None) -> Tensor:
        """(B, D, K) denoising errors of B clips (B, F', C, h, w) at D (timestep, noise) draws under K text
        embeddings ``embeds`` (K, S, D'), by default [unconditional, prompt] (K = 2, as the base class), from
        transformer calls of up to :attr:`max_batch` samples (per-sample timesteps)."""
        if embeds is None:
            embeds = torch.cat([self.uncond_embeds, self.cond_embeds])
        clean = latents.detach().float()
        b, d = clean.shape[0], len(draws)
        noisy, times, sqrt_a, sqrt_1ma = [], [], [], []
        for t, noise in draws:
            a, one_minus = self._alpha(t)
            noisy.append(a * clean + one_minus * noise.to(clean.device).float())  # (B, ...)
            times.append(t)
            sqrt_a.append(a)
            sqrt_1ma.append(one_minus)
        z = torch.stack(noisy, 1).reshape(b * d, *clean.shape[1:])  # clip-major: (B * D, ...)
        t_all = torch.tensor(times, device=self.device).repeat(b)
        ca = torch.tensor(sqrt_a, dtype=torch.float32, device=clean.device).repeat(b).view(-1, 1, 1, 1, 1)
        c1 = torch.tensor(sqrt_1ma, dtype=torch.float32, device=clean.device).repeat(b).view(-1, 1, 1, 1, 1)
        target = clean.repeat_interleave(d, 0)
        errors = torch.zeros(b * d, embeds.shape[0], dtype=torch.float64)
        for which in range(embeds.shape[0]):
            embed = embeds[which:which + 1].to(self.device, self.dtype)
            for lo in range(0, b * d, self.max_batch):
                hi = min(lo + self.max_batch, b * d)
                z_t = z[lo:hi].to(self.device, self.dtype)
                v = self._transformer_call(z_t, embed.expand(hi - lo, -1, -1), t_all[lo:hi]).float()
                x0 = ca[lo:hi] * z[lo:hi] - c1[lo:hi] * v.to(clean.device)
                errors[lo:hi, which] = (target[lo:hi] - x0).pow(2).flatten(1).mean(1).double().cpu()
        return errors.reshape(b, d, embeds.shape[0])

    # -- loading -------------------------------------------------------------------------

    @classmethod
    def from_pretrained(
        cls,
        folder: str | Path,
        prompt: str,
        dtype: torch.dtype = torch.bfloat16,
        device: str | torch.device = "cuda",
        options: CogVideoXOptions | None = None,
        vae_gradient_checkpointing: bool = True,
        vae_slicing: bool = False,
        vae_tiling: bool = False,
        keep_prompt_encoder: bool = False,
    ) -> CogVideoXPrior:
        """Load a LOCAL diffusers CogVideoX folder (model_index.json, transformer/, vae/, scheduler/,
        text_encoder/, tokenizer/); never downloads. A missing or incomplete folder -> DependencyError."""
        from diffusers import AutoencoderKLCogVideoX, CogVideoXDDIMScheduler, CogVideoXTransformer3DModel
        from transformers import AutoTokenizer, T5EncoderModel

        folder = check_model_folder(folder)
        local = {"local_files_only": True}
        scheduler = _load_component(
            folder, "scheduler", lambda: CogVideoXDDIMScheduler.from_pretrained(folder, subfolder="scheduler", **local)
        )
        if scheduler.config.prediction_type != "v_prediction":
            raise ConfigError(
                f"{folder}/scheduler: prediction_type is {scheduler.config.prediction_type!r}; "
                "the SDS prior needs a v_prediction CogVideoX model"
            )
        transformer = _load_component(
            folder,
            "transformer",
            lambda: CogVideoXTransformer3DModel.from_pretrained(
                folder, subfolder="transformer", torch_dtype=dtype, **local
            ),
        ).to(device)
        vae = _load_component(
            folder,
            "VAE",
            lambda: AutoencoderKLCogVideoX.from_pretrained(folder, subfolder="vae", torch_dtype=dtype, **local),
        ).to(device)
        if vae_gradient_checkpointing:
            vae.enable_gradient_checkpointing()
        if vae_slicing:
            vae.enable_slicing()
        if vae_tiling:
            vae.enable_tiling()
        tokenizer = _load_component(
            folder, "tokenizer", lambda: AutoTokenizer.from_pretrained(folder / "tokenizer", **local)
        )
        text_encoder = _load_component(
            folder,
            "text encoder",
            lambda: T5EncoderModel.from_pretrained(folder / "text_encoder", dtype=dtype, **local),
        ).to(device)
        encoder = T5PromptEncoder(tokenizer, text_encoder.eval(), int(transformer.config.max_text_seq_length))
        return cls(
            transformer,
            vae,
            scheduler.alphas_cumprod,
            prompt,
            prompt_encoder=encoder,
            options=options,
            keep_prompt_encoder=keep_prompt_encoder,
        )

    def components(self) -> dict[str, Any]:
        """Constructor arguments to build another prior (e.g. the oracle) on the same modules."""
        return {
            "transformer": self.transformer,
            "vae": self.vae,
            "alphas_cumprod": self.alphas_cumprod,
            "prompt": self.prompt,
            "prompt_embeds": (self.cond_embeds, self.uncond_embeds),
            "options": self.options,
            "contrast_embeds": self.contrast_embeds,
        }

    def with_options(self, **changes: Any) -> CogVideoXPrior:
        """A prior of the same class sharing modules and embeddings, with some options changed."""
        parts = self.components()
        parts["options"] = replace(self.options, **changes)
        return type(self)(**parts)


def rotary_embeddings(cfg: Any, latent_frames: int, latent_h: int, latent_w: int, device: torch.device):
    """CogVideoX RoPE tables (cos, sin), each (latent_frames * grid_h * grid_w, attention_head_dim)."""
    from diffusers.models.embeddings import get_3d_rotary_pos_embed
    from diffusers.pipelines.cogvideo.pipeline_cogvideox import get_resize_crop_region_for_grid

    p, p_t = int(cfg.patch_size), cfg.patch_size_t
    grid_h, grid_w = latent_h // p, latent_w // p
    base_w, base_h = int(cfg.sample_width) // p, int(cfg.sample_height) // p
    if p_t is None:  # CogVideoX 1.0
        crops = get_resize_crop_region_for_grid((grid_h, grid_w), base_w, base_h)
        return get_3d_rotary_pos_embed(
            embed_dim=cfg.attention_head_dim,
            crops_coords=crops,
            grid_size=(grid_h, grid_w),
            temporal_size=latent_frames,
            device=device,
        )
    return get_3d_rotary_pos_embed(  # CogVideoX 1.5
        embed_dim=cfg.attention_head_dim,
        crops_coords=None,
        grid_size=(grid_h, grid_w),
        temporal_size=math.ceil(latent_frames / p_t),
        grid_type="slice",
        max_size=(base_h, base_w),
        device=device,
    )
