"""Differentiable Gaussian rendering: rasterizer backends, checkerboard ground, cameras, video.

Front door (import from here):

- :func:`render_video` posed Gaussians (F,N,3)/(F,N,3,3) -> frames (F,3,H,W) in [0,1];
- :func:`rasterize` one call, backend ``"auto" | "torch" | "gsplat"``;
- :func:`rasterize_torch` (CPU/any device, gsplat classic math) and :func:`rasterize_gsplat` (CUDA);
- :class:`GroundConfig`, :func:`render_ground`, :func:`mask_below_ground`; on a terrain
  :func:`render_terrain_ground`, :func:`mask_below_terrain` and :class:`TerrainCaster` (rays against any
  :class:`~akd_core.model.terrain.Terrain`, shared with the preview);
- :func:`look_at`, :func:`intrinsics_from_fov`, :func:`follow_camera`;
- :func:`gaussian_blur` (coarse-to-fine distillation), :func:`write_mp4`.

Gaussians are given by covariances (N,3,3), which is what linear blend skinning
produces (J Sigma J^T); no quaternions cross this API.
"""

from akd_core.render.camera import camera_centres, follow_camera, intrinsics_from_fov, look_at, smooth_over_time
from akd_core.render.ground import (
    GroundConfig,
    mask_below_ground,
    mask_below_terrain,
    render_ground,
    render_terrain_ground,
)
from akd_core.render.gsplat_backend import gsplat_unavailable_reason, rasterize_gsplat
from akd_core.render.rasterize_torch import ProjectedGaussians, project_gaussians, rasterize_torch
from akd_core.render.terrain_cast import TerrainCaster
from akd_core.render.video import gaussian_blur, rasterize, render_video, resolve_backend, to_uint8_frames, write_mp4

__all__ = [
    "GroundConfig",
    "ProjectedGaussians",
    "TerrainCaster",
    "camera_centres",
    "follow_camera",
    "gaussian_blur",
    "gsplat_unavailable_reason",
    "intrinsics_from_fov",
    "look_at",
    "mask_below_ground",
    "mask_below_terrain",
    "project_gaussians",
    "rasterize",
    "rasterize_gsplat",
    "rasterize_torch",
    "render_ground",
    "render_terrain_ground",
    "render_video",
    "resolve_backend",
    "smooth_over_time",
    "to_uint8_frames",
    "write_mp4",
]
