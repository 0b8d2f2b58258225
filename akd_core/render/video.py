"""Rendering a posed Gaussian clip into video frames, and writing MP4 files.

:func:`rasterize` picks the backend (gsplat on CUDA, pure torch elsewhere);
:func:`render_video` adds the ground layer (flat, or a run's terrain) and returns frames (F, 3, H, W) in [0, 1],
differentiable with respect to means, covariances, colours and opacities;
:func:`write_mp4` writes frames atomically with the ffmpeg shipped in imageio-ffmpeg.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from akd_core.io.errors import ConfigError
from akd_core.io.fileio import atomic_path
from akd_core.model.terrain import Terrain
from akd_core.render.ground import (
    GroundConfig,
    mask_below_ground,
    mask_below_terrain,
    render_ground,
    render_terrain_ground,
)
from akd_core.render.gsplat_backend import gsplat_unavailable_reason, rasterize_gsplat
from akd_core.render.rasterize_torch import rasterize_torch
from akd_core.render.terrain_cast import TerrainCaster

BACKENDS = ("auto", "torch", "gsplat")
DEFAULT_GROUND = GroundConfig()  # frozen: a shared default, not state


def resolve_backend(backend: str = "auto") -> str:
    """'torch' or 'gsplat' for a requested backend; 'auto' takes gsplat when CUDA is present."""
    if backend not in BACKENDS:
        raise ConfigError(f"render: backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "auto":
        return "gsplat" if gsplat_unavailable_reason() is None else "torch"
    return backend


def rasterize(
    means: Tensor,
    covars: Tensor,
    colors: Tensor,
    opacities: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    backend: str = "auto",
    **options: float,
) -> tuple[Tensor, Tensor]:
    """Rasterize Gaussians with the chosen backend; see :func:`rasterize_torch` for shapes.

    Returns rgb (C, H, W, D) without background and alpha (C, H, W, 1).
    ``backend='gsplat'`` without CUDA raises DependencyError with the reason.
    """
    if resolve_backend(backend) == "gsplat":
        return rasterize_gsplat(means, covars, colors, opacities, viewmats, Ks, width, height, **options)
    return rasterize_torch(means, covars, colors, opacities, viewmats, Ks, width, height, **options)


def render_video(
    means: Tensor,
    covars: Tensor,
    colors: Tensor,
    opacities: Tensor,
    viewmats: Tensor,
    K: Tensor,
    width: int,
    height: int,
    ground: GroundConfig | None = DEFAULT_GROUND,
    backend: str = "auto",
    background: tuple[float, float, float] = (1.0, 1.0, 1.0),
    terrain: Terrain | TerrainCaster | None = None,
) -> Tensor:
    """Render a posed Gaussian clip over the ground; returns frames (F, 3, H, W) in [0, 1].

    Args:
        means: (F, N, 3) posed means, world, z up.
        covars: (F, N, 3, 3) posed covariances (e.g. J Sigma J^T from LBS).
        colors: (N, 3) or (F, N, 3) RGB in [0, 1].
        opacities: (N,) or (F, N) in [0, 1].
        viewmats: (F, 4, 4) world -> camera (OpenCV), e.g. from :func:`follow_camera`.
        K: (3, 3) or (F, 3, 3) intrinsics.
        ground: checkerboard + sky layer (Gaussians below z = 0 get opacity 0), or None
            for a plain ``background`` colour.
        terrain: the ground's shape when it is not flat z = 0 (a run's terrain, or its
            :class:`~akd_core.render.terrain_cast.TerrainCaster`): the checker is drawn on its surface, Gaussians
            below the surface get opacity 0, and where the surface is nearer the camera than the Gaussians' mean
            depth (a step in front of a foot) it hides them. The ground layer is detached; gradients still reach
            means, covariances, colours and opacities. None or flat: exactly the z = 0 ground.
    """
    if means.ndim != 3 or viewmats.ndim != 3 or means.shape[0] != viewmats.shape[0]:
        raise ConfigError(
            f"render: render_video needs means (F,N,3) and viewmats (F,4,4) with the same F, "
            f"got {tuple(means.shape)} and {tuple(viewmats.shape)}"
        )
    flat = terrain is None or (terrain.terrain if isinstance(terrain, TerrainCaster) else terrain).is_flat
    if ground is not None and not flat:
        return _render_on_terrain(means, covars, colors, opacities, viewmats, K, width, height, ground, terrain,
                                  backend)
    if ground is not None:
        opacities = mask_below_ground(means, opacities)
    rgb, alpha = rasterize(means, covars, colors, opacities, viewmats, K, width, height, backend=backend)
    if ground is not None:
        bg = render_ground(viewmats.to(rgb), K.to(rgb), width, height, ground, means=means.detach().to(rgb))
    else:
        bg = torch.tensor(background, dtype=rgb.dtype, device=rgb.device).expand_as(rgb)
    frames = rgb + (1.0 - alpha) * bg  # (F, H, W, 3)
    return frames.clamp(0.0, 1.0).permute(0, 3, 1, 2)


def _render_on_terrain(means: Tensor, covars: Tensor, colors: Tensor, opacities: Tensor, viewmats: Tensor, K: Tensor,
                       width: int, height: int, ground: GroundConfig, terrain: Terrain | TerrainCaster,
                       backend: str) -> Tensor:
    """:func:`render_video` over a terrain: the Gaussians are rasterized with one more channel, their camera depth,
    so each ground sub-sample nearer than the Gaussians' mean depth at its pixel covers them."""
    caster = terrain if isinstance(terrain, TerrainCaster) else TerrainCaster(terrain, ground.max_distance)
    opacities = mask_below_terrain(means, opacities, caster.terrain)
    frames = means.shape[0]
    colors = colors.expand(frames, *colors.shape[-2:]) if colors.ndim == 2 else colors
    depth = (means @ viewmats[:, 2, :3].unsqueeze(-1) + viewmats[:, 2, 3].reshape(-1, 1, 1)).detach()  # (F, N, 1)
    rgbd, alpha = rasterize(means, covars, torch.cat([colors, depth.to(colors)], dim=-1), opacities, viewmats, K,
                            width, height, backend=backend)
    rgb, weighted_depth = rgbd[..., :3], rgbd[..., 3:].detach()  # (F, H, W, 3), (F, H, W, 1)
    gauss_depth = torch.where(alpha.detach() > 1e-6, weighted_depth / alpha.detach().clamp_min(1e-6),
                              torch.full_like(weighted_depth, float("inf")))
    bg, bg_depth = render_terrain_ground(viewmats.detach().to(rgb), K.to(rgb), width, height, ground, caster,
                                         means=means.detach().to(rgb))  # (F, H, W, S, 3), (F, H, W, S)
    covers = (bg_depth < gauss_depth).to(rgb.dtype).unsqueeze(-1)  # (F, H, W, S, 1): the ground is in front
    # each sub-sample: the ground where it covers the Gaussians, else the Gaussians over it; then the pixel's mean
    per_sample = covers * bg + (1.0 - covers) * (rgb.unsqueeze(-2) + (1.0 - alpha.unsqueeze(-2)) * bg)
    return per_sample.mean(dim=-2).clamp(0.0, 1.0).permute(0, 3, 1, 2)


def gaussian_blur(frames: Tensor, sigma_px: float) -> Tensor:
    """Separable Gaussian blur of (F, C, H, W) frames, std ``sigma_px`` pixels, replicate-padded; differentiable.

    sigma_px < 0.05 returns ``frames`` unchanged (the kernel would be a delta).
    """
    if sigma_px < 0.05:
        return frames
    radius = max(1, int(math.ceil(3.0 * sigma_px)))
    x = torch.arange(-radius, radius + 1, dtype=frames.dtype, device=frames.device)
    kernel = torch.exp(-0.5 * (x / sigma_px) ** 2)
    kernel = kernel / kernel.sum()
    channels = frames.shape[1]
    out = torch.nn.functional.pad(frames, (radius, radius, 0, 0), mode="replicate")
    out = torch.nn.functional.conv2d(out, kernel.view(1, 1, 1, -1).expand(channels, 1, 1, -1), groups=channels)
    out = torch.nn.functional.pad(out, (0, 0, radius, radius), mode="replicate")
    return torch.nn.functional.conv2d(out, kernel.view(1, 1, -1, 1).expand(channels, 1, -1, 1), groups=channels)


def to_uint8_frames(frames: Tensor | np.ndarray) -> np.ndarray:
    """Frames (F, 3, H, W) or (F, H, W, 3), float in [0, 1] or uint8 -> uint8 (F, H, W, 3)."""
    arr = frames.detach().cpu().numpy() if isinstance(frames, Tensor) else np.asarray(frames)
    if arr.ndim != 4 or (arr.shape[1] != 3 and arr.shape[-1] != 3):
        raise ConfigError(f"video: frames must be (F,3,H,W) or (F,H,W,3), got {arr.shape}")
    if arr.shape[-1] != 3:
        arr = arr.transpose(0, 2, 3, 1)
    if arr.dtype != np.uint8:
        arr = np.round(np.clip(arr.astype(np.float64), 0.0, 1.0) * 255.0).astype(np.uint8)
    return np.ascontiguousarray(arr)


def write_mp4(frames: Tensor | np.ndarray, path: str | os.PathLike, fps: float = 30.0, quality: int = 18) -> Path:
    """Write frames to an H.264 MP4 atomically; returns the path.

    frames: (F, 3, H, W) or (F, H, W, 3), float in [0, 1] or uint8. Odd sizes are padded
    by edge replication to even ones (yuv420p needs them). ``quality`` is x264's CRF.
    """
    arr = to_uint8_frames(frames)
    if arr.shape[0] == 0:
        raise ConfigError(f"video: no frames to write to {path}")
    return write_mp4_frames(iter(arr), path, fps, quality)


def write_mp4_frames(frames: Iterable[np.ndarray], path: str | os.PathLike, fps: float = 30.0,
                     quality: int = 18) -> Path:
    """:func:`write_mp4` for frames (H, W, 3) uint8 that arrive one at a time (a renderer's generator): each goes
    to the encoder as it comes, so memory does not grow with the clip's length (a 60 s two-panel preview held
    0.8 GB of frames). Every frame must have the first one's size; odd sizes are padded as in :func:`write_mp4`."""
    import imageio_ffmpeg

    if fps <= 0:
        raise ConfigError(f"video: fps must be positive, got {fps}")
    frames = iter(frames)
    first = next(frames, None)
    if first is None:
        raise ConfigError(f"video: no frames to write to {path}")
    shape = np.shape(first)
    if len(shape) != 3 or shape[-1] != 3:
        raise ConfigError(f"video: frames must be (H, W, 3) uint8, got {shape}")
    pad_h, pad_w = shape[0] % 2, shape[1] % 2

    def even(frame: np.ndarray) -> np.ndarray:
        frame = np.asarray(frame, dtype=np.uint8)
        if frame.shape != shape:
            raise ConfigError(f"video: frame of size {frame.shape} after frames of {shape} in {path}")
        if pad_h or pad_w:
            frame = np.pad(frame, ((0, pad_h), (0, pad_w), (0, 0)), mode="edge")
        return np.ascontiguousarray(frame)

    with atomic_path(path, suffix=".mp4") as tmp:
        writer = imageio_ffmpeg.write_frames(
            str(tmp),
            (shape[1] + pad_w, shape[0] + pad_h),
            fps=fps,
            codec="libx264",
            pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p",
            macro_block_size=1,
            output_params=["-crf", str(quality)],
        )
        writer.send(None)
        try:
            writer.send(even(first))
            for frame in frames:
                writer.send(even(frame))
        finally:
            writer.close()
    return Path(path)
