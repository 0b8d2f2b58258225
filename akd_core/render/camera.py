"""Cameras: look-at view matrices, pinhole intrinsics, and a smooth following camera.

Conventions: world z up (REP-103); view matrices map world -> camera with OpenCV axes
(x right, y down, z forward), as gsplat expects. Cameras are not differentiated: the
following camera is computed from detached Gaussian means, so gradients reach the
motion only through the rendered Gaussians, never through the camera.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from akd_core.io.errors import ConfigError


def look_at(eye: Tensor, target: Tensor, up: tuple[float, float, float] = (0.0, 0.0, 1.0)) -> Tensor:
    """World -> camera matrices looking from ``eye`` (..., 3) at ``target`` (..., 3); returns (..., 4, 4).

    The image's "up" is the projection of ``up`` (default world z); looking straight
    along ``up`` is ill-defined and raises ConfigError.
    """
    eye, target = torch.broadcast_tensors(eye, target)
    up_t = torch.tensor(up, dtype=eye.dtype, device=eye.device).expand_as(eye)
    forward = target - eye
    if bool((forward.norm(dim=-1) < 1e-9).any()):
        raise ConfigError("camera: eye and target coincide; move the camera away from its target")
    forward = forward / forward.norm(dim=-1, keepdim=True)
    right = torch.linalg.cross(forward, up_t, dim=-1)
    if bool((right.norm(dim=-1) < 1e-6).any()):
        raise ConfigError("camera: view direction is parallel to 'up'; use an elevation below 90 degrees")
    right = right / right.norm(dim=-1, keepdim=True)
    down = torch.linalg.cross(forward, right, dim=-1)
    rot = torch.stack([right, down, forward], dim=-2)  # (..., 3, 3) rows = camera axes in world
    viewmat = torch.zeros(*eye.shape[:-1], 4, 4, dtype=eye.dtype, device=eye.device)
    viewmat[..., :3, :3] = rot
    viewmat[..., :3, 3] = -(rot @ eye.unsqueeze(-1)).squeeze(-1)
    viewmat[..., 3, 3] = 1.0
    return viewmat


def intrinsics_from_fov(
    fov_y_deg: float, width: int, height: int, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"
) -> Tensor:
    """Pinhole K (3, 3) with square pixels, vertical field of view ``fov_y_deg``, centred principal point."""
    if not 0.0 < fov_y_deg < 180.0:
        raise ConfigError(f"camera: fov_y_deg must be in (0, 180), got {fov_y_deg}")
    focal = 0.5 * height / math.tan(math.radians(fov_y_deg) / 2.0)
    return torch.tensor(
        [[focal, 0.0, width / 2.0], [0.0, focal, height / 2.0], [0.0, 0.0, 1.0]], dtype=dtype, device=device
    )


def camera_centres(viewmats: Tensor) -> Tensor:
    """Camera centres in world (..., 3) of world -> camera matrices (..., 4, 4)."""
    rot, trans = viewmats[..., :3, :3], viewmats[..., :3, 3]
    return -(rot.transpose(-1, -2) @ trans.unsqueeze(-1)).squeeze(-1)


def smooth_over_time(x: Tensor, sigma_frames: float) -> Tensor:
    """Zero-phase Gaussian filter along dim 0 of ``x`` (F, D) with edge replication (no lag, no jitter)."""
    if sigma_frames <= 0 or x.shape[0] < 2:
        return x
    radius = max(1, int(math.ceil(3.0 * sigma_frames)))
    taps = torch.arange(-radius, radius + 1, dtype=x.dtype, device=x.device)
    kernel = torch.exp(-0.5 * (taps / sigma_frames) ** 2)
    kernel = kernel / kernel.sum()
    idx = torch.arange(x.shape[0], device=x.device).unsqueeze(1) + torch.arange(-radius, radius + 1, device=x.device)
    window = x[idx.clamp(0, x.shape[0] - 1)]  # (F, 2r+1, D)
    return (window * kernel[None, :, None]).sum(dim=1)


def follow_camera(
    means: Tensor,
    width: int,
    height: int,
    fov_y_deg: float = 40.0,
    distance: float | None = None,
    elevation_deg: float = 20.0,
    azimuth_deg: float = -70.0,
    smooth_sigma_frames: float = 3.0,
    margin: float = 1.4,
) -> tuple[Tensor, Tensor]:
    """A camera that follows the posed asset smoothly at a fixed offset.

    Args:
        means: (F, N, 3) posed Gaussian means (detached internally).
        fov_y_deg: vertical field of view.
        distance: camera-target distance in m; None fits the largest bounding sphere of
            the clip into the narrower field of view, times ``margin``.
        elevation_deg: angle above the horizontal plane; azimuth_deg: direction of the
            camera from the target, from +x towards +y (-90 = on the robot's right side).
        smooth_sigma_frames: std of the Gaussian filter applied to the per-frame
            bounding-box centres (0 = no smoothing).

    Returns:
        viewmats (F, 4, 4) world -> camera (OpenCV) and K (3, 3).
    """
    if means.ndim != 3 or means.shape[-1] != 3:
        raise ConfigError(f"camera: follow_camera needs means (F,N,3), got {tuple(means.shape)}")
    means = means.detach()
    lo, hi = means.min(dim=1).values, means.max(dim=1).values  # (F, 3)
    targets = smooth_over_time(0.5 * (lo + hi), smooth_sigma_frames)
    K = intrinsics_from_fov(fov_y_deg, width, height, dtype=means.dtype, device=means.device)
    if distance is None:
        radius = float((0.5 * (hi - lo).norm(dim=-1)).max().clamp_min(1e-3))
        half_fov = min(math.atan(0.5 * width / float(K[0, 0])), math.radians(fov_y_deg) / 2.0)
        distance = margin * radius / math.sin(half_fov)
    el, az = math.radians(elevation_deg), math.radians(azimuth_deg)
    offset = torch.tensor(
        [math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)], dtype=means.dtype, device=means.device
    )
    return look_at(targets + distance * offset, targets), K
