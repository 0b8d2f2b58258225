"""The ground: a ray-cast checkerboard plane z = 0 rendered as a background layer.

Every pixel casts a ray from its camera (supersampled ``samples_per_side``^2 times);
a ray that hits z = 0 in front of the camera (within ``max_distance``) takes the colour
of its checker square, any other ray the sky colour. The video composites the
Gaussians over it: ``final = rgb_gauss + (1 - alpha_gauss) * background``.

Contact shadow (the paper's optional term): ground colour times
``s(P) = 1 - s_max exp(-beta d(P))`` with ``d(P)`` the height of the lowest posed
Gaussian mean above the hit point P, within about ``shadow_radius`` horizontally.
It is computed from a per-frame height map (min z of the means binned on a grid of
``shadow_radius / 2`` cells, then min-pooled over the radius) and is **detached**: the
shadow is a visual cue, gradients reach the motion through the Gaussians only.

A terrain other than flat ground (:func:`render_terrain_ground`, used by ``akd render`` on a run made on stairs,
a slope or rough ground) is ray-cast with :class:`~akd_core.render.terrain_cast.TerrainCaster` at
``samples_per_side`` times the resolution: the same checker on the surface the ray meets (risers and walls
chequered across them), each face lit by its tilt to a fixed sun (level faces exactly as the flat ground), lines
on nosings and creases (where the depth jumps), and the contact shadow measured from the surface: ``d(P)`` =
lowest mean above P minus P's height. It returns the ground's camera depth per sub-sample too, so
:func:`~akd_core.render.video.render_video` can let a step in front of the robot hide it. Flat ground keeps the
exact code above.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from akd_core.io.errors import ConfigError
from akd_core.model.terrain import Terrain
from akd_core.render.terrain_cast import SUN, TerrainCaster, checker_parity, depth_edges, sun_shade


@dataclass(frozen=True)
class GroundConfig:
    """Look of the checkerboard ground and its contact shadow (lengths in m, colours RGB in [0, 1])."""

    tile_size: float = 0.25
    color_a: tuple[float, float, float] = (0.82, 0.82, 0.80)
    color_b: tuple[float, float, float] = (0.50, 0.52, 0.55)
    sky_color: tuple[float, float, float] = (0.72, 0.82, 0.93)
    max_distance: float = 100.0
    samples_per_side: int = 2
    shadow: bool = True
    shadow_max: float = 0.6
    shadow_beta: float = 12.0  # 1/m
    shadow_radius: float = 0.06
    terrain_ambient: float = 0.4  # light of a terrain face turned away from the sun (level faces: 1)
    terrain_edge: float = 0.55  # brightness of the lines drawn on a terrain's nosings and creases; 1 = none

    def __post_init__(self) -> None:
        if self.tile_size <= 0 or self.max_distance <= 0 or self.shadow_radius <= 0:
            raise ConfigError("ground: tile_size, max_distance and shadow_radius must be positive")
        if self.samples_per_side < 1:
            raise ConfigError(f"ground: samples_per_side must be >= 1, got {self.samples_per_side}")
        if not 0.0 <= self.shadow_max <= 1.0:
            raise ConfigError(f"ground: shadow_max must be in [0, 1], got {self.shadow_max}")


def mask_below_ground(means: Tensor, opacities: Tensor) -> Tensor:
    """Opacities with Gaussians whose mean is below z = 0 set to 0.

    means (F, N, 3) or (N, 3); opacities (N,) or matching (F, N); returns (F, N) or (N,).
    The mask is a hard step (no gradient through it); opacity gradients pass where visible.
    """
    return opacities * (means[..., 2] >= 0).to(opacities.dtype)


def ground_hits(
    viewmats: Tensor, Ks: Tensor, width: int, height: int, samples_per_side: int = 1, max_distance: float = 100.0
) -> tuple[Tensor, Tensor]:
    """Ray-cast every (sub)pixel against z = 0.

    viewmats (C, 4, 4), Ks (C, 3, 3). Returns hit points (C, H, W, S, 3) and a hit mask
    (C, H, W, S) bool, S = samples_per_side^2 on a regular grid inside each pixel.
    """
    dtype, device = viewmats.dtype, viewmats.device
    offsets = (torch.arange(samples_per_side, dtype=dtype, device=device) + 0.5) / samples_per_side
    oy, ox = torch.meshgrid(offsets, offsets, indexing="ij")
    ys = torch.arange(height, dtype=dtype, device=device)
    xs = torch.arange(width, dtype=dtype, device=device)
    u = xs[None, :, None] + ox.reshape(1, 1, -1)  # (1, W, S)
    v = ys[:, None, None] + oy.reshape(1, 1, -1)  # (H, 1, S)
    u, v = torch.broadcast_tensors(u, v)  # (H, W, S)
    pix = torch.stack([u, v, torch.ones_like(u)], dim=-1)  # (H, W, S, 3)
    dirs_cam = torch.einsum("cij,hwsj->chwsi", torch.linalg.inv(Ks), pix)
    rot = viewmats[:, :3, :3]
    dirs = torch.einsum("cji,chwsj->chwsi", rot, dirs_cam)  # camera -> world: R^T d
    origin = -(rot.transpose(-1, -2) @ viewmats[:, :3, 3:4]).squeeze(-1)  # (C, 3)
    dz = dirs[..., 2]
    oz = origin[:, 2].reshape(-1, 1, 1, 1)
    safe_dz = torch.where(dz.abs() > 1e-12, dz, torch.full_like(dz, -1e-12))
    s = -oz / safe_dz
    hit = (dz.abs() > 1e-12) & (s > 0) & (s * dirs.norm(dim=-1) < max_distance)
    points = origin.reshape(-1, 1, 1, 1, 3) + s.unsqueeze(-1) * dirs
    return points, hit


def checker_colors(points: Tensor, config: GroundConfig) -> Tensor:
    """Checkerboard colour (..., 3) of ground points (..., 3): colour_a on the square at the origin's +x +y side."""
    parity = (torch.floor(points[..., 0] / config.tile_size) + torch.floor(points[..., 1] / config.tile_size)) % 2
    a = torch.tensor(config.color_a, dtype=points.dtype, device=points.device)
    b = torch.tensor(config.color_b, dtype=points.dtype, device=points.device)
    return torch.where(parity.unsqueeze(-1) == 0, a, b)


def mask_below_terrain(means: Tensor, opacities: Tensor, terrain: Terrain) -> Tensor:
    """Opacities with Gaussians whose mean is below the terrain's surface (:meth:`Terrain.height` under it) set to 0;
    shapes as :func:`mask_below_ground`. A hard, detached step, as there."""
    xy = means.detach()[..., :2].reshape(-1, 2).cpu().double().numpy()
    ground = torch.as_tensor(terrain.height(xy[:, 0], xy[:, 1]).reshape(means.shape[:-1]), dtype=means.dtype,
                             device=means.device)
    return opacities * (means[..., 2] >= ground).to(opacities.dtype)


def shadow_factor(points: Tensor, means: Tensor, config: GroundConfig, surface: Tensor | None = None) -> Tensor:
    """s(P) = 1 - s_max exp(-beta d(P)) at ground points (H, W, S, 3) under one frame's means (N, 3) -> (H, W, S).

    ``surface`` (H, W, S): the points' heights on a terrain (inf: no surface); d(P) is then measured from them.
    Without it the ground is z = 0.
    """
    if surface is not None:
        above = means.detach()
    else:
        above = means[means[:, 2] >= 0].detach()
    ones = torch.ones(points.shape[:-1], dtype=points.dtype, device=points.device)
    if len(above) == 0:
        return ones
    cell = config.shadow_radius / 2.0
    lo = above[:, :2].min(dim=0).values - config.shadow_radius
    hi = above[:, :2].max(dim=0).values + config.shadow_radius
    dims = torch.ceil((hi - lo) / cell).long().clamp(1, 1024)
    cell_xy = (hi - lo) / dims
    gi = ((above[:, :2] - lo) / cell_xy).long()
    gi = torch.minimum(gi, dims - 1)
    flat = gi[:, 1] * dims[0] + gi[:, 0]
    inf = torch.tensor(float("inf"), dtype=points.dtype, device=points.device)
    heights = inf.repeat(int(dims[0] * dims[1])).scatter_reduce(0, flat, above[:, 2], reduce="amin")
    grid = heights.reshape(1, 1, int(dims[1]), int(dims[0]))
    reach = int(torch.ceil(config.shadow_radius / cell_xy.min()).item())
    grid = -F.max_pool2d(-grid, kernel_size=2 * reach + 1, stride=1, padding=reach)[0, 0]  # min-pool
    q = ((points[..., :2] - lo) / cell_xy).floor().long()
    inside = (q[..., 0] >= 0) & (q[..., 0] < dims[0]) & (q[..., 1] >= 0) & (q[..., 1] < dims[1])
    q0 = q[..., 0].clamp(0, int(dims[0]) - 1)
    q1 = q[..., 1].clamp(0, int(dims[1]) - 1)
    d = torch.where(inside, grid[q1, q0], inf)
    if surface is not None:
        d = (d - surface).clamp_min(0.0)  # a foot pressed into the surface shades it fully
    return ones - config.shadow_max * torch.exp(-config.shadow_beta * d)


def render_ground(
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    config: GroundConfig,
    means: Tensor | None = None,
) -> Tensor:
    """Background layer (C, H, W, 3): checkerboard on z = 0 (shadowed under ``means`` (C, N, 3) if given) and sky.

    Cameras are processed one at a time so the supersampled rays never exist for the whole clip at once.
    """
    if Ks.ndim == 2:
        Ks = Ks.unsqueeze(0).expand(viewmats.shape[0], 3, 3)
    sky = torch.tensor(config.sky_color, dtype=viewmats.dtype, device=viewmats.device)
    layers = []
    for c in range(viewmats.shape[0]):
        points, hit = ground_hits(viewmats[c : c + 1], Ks[c : c + 1], width, height, config.samples_per_side,
                                  config.max_distance)
        colors = checker_colors(points[0], config)  # (H, W, S, 3)
        if config.shadow and means is not None:
            colors = colors * shadow_factor(points[0], means[c], config).unsqueeze(-1)
        layers.append(torch.where(hit[0].unsqueeze(-1), colors, sky).mean(dim=2))
    return torch.stack(layers)


def render_terrain_ground(
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    config: GroundConfig,
    terrain: Terrain | TerrainCaster,
    means: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Background of a terrain, per sub-sample: colours (C, H, W, S, 3) and camera depth (C, H, W, S) (inf: sky).

    S = ``samples_per_side``^2 on the same regular grid inside each pixel as :func:`ground_hits`; ``means``
    (C, N, 3) cast the contact shadow. ``terrain``: the Terrain, or its caster (built once for a whole clip).
    Detached: no gradient flows into the ground.
    """
    caster = terrain if isinstance(terrain, TerrainCaster) else TerrainCaster(terrain, config.max_distance)
    if Ks.ndim == 2:
        Ks = Ks.unsqueeze(0).expand(viewmats.shape[0], 3, 3)
    s = config.samples_per_side
    dtype, device = viewmats.dtype, viewmats.device
    sky = np.asarray(config.sky_color, dtype=np.float64)
    a, b = np.asarray(config.color_a, dtype=np.float64), np.asarray(config.color_b, dtype=np.float64)
    colors, depths = [], []
    for c in range(viewmats.shape[0]):
        K = Ks[c].detach().cpu().double().numpy().copy()
        K[:2] *= s  # a pixel's s x s sub-samples are the pixels of an image s times finer
        hits = caster.cast(viewmats[c].detach().cpu().double().numpy(), K, width * s, height * s)
        hit = hits.hit
        parity = checker_parity(hits.points, hits.normals, config.tile_size)
        light = sun_shade(hits.normals, config.terrain_ambient, SUN)
        light = light * np.where(depth_edges(hits.depth), config.terrain_edge, 1.0)
        rgb = np.where((parity == 0)[..., None], a, b) * light[..., None]
        if config.shadow and means is not None:
            points = torch.as_tensor(hits.points, dtype=dtype, device=device)
            surface = torch.as_tensor(np.where(hit, hits.points[..., 2], np.inf), dtype=dtype, device=device)
            shade = shadow_factor(points, means[c], config, surface=surface).cpu().double().numpy()
            rgb = rgb * shade[..., None]
        rgb = np.where(hit[..., None], rgb, sky)
        colors.append(_subsamples(rgb, height, width, s))
        depths.append(_subsamples(hits.depth[..., None], height, width, s)[..., 0])
    as_tensor = lambda x: torch.as_tensor(np.stack(x), dtype=dtype, device=device)  # noqa: E731
    return as_tensor(colors), as_tensor(depths)


def _subsamples(image: np.ndarray, height: int, width: int, s: int) -> np.ndarray:
    """(H s, W s, D) fine image -> (H, W, s^2, D): each pixel's sub-samples, row-major as in :func:`ground_hits`."""
    d = image.shape[-1]
    return image.reshape(height, s, width, s, d).transpose(0, 2, 1, 3, 4).reshape(height, width, s * s, d)
