"""gsplat CUDA backend: the same call as :func:`rasterize_torch`, run by ``gsplat.rasterization``.

gsplat's rasterizer is CUDA only (it JIT-compiles its kernels on first use), so this
backend needs a CUDA device; asking for it without one raises DependencyError.
Inputs on the CPU are moved to CUDA and the outputs moved back (autograd follows).
"""

from __future__ import annotations

import torch
from torch import Tensor

from akd_core.io.errors import DependencyError
from akd_core.render.rasterize_torch import broadcast_inputs, check_size


def gsplat_unavailable_reason() -> str | None:
    """None when the gsplat backend can run here, else a sentence saying why not."""
    if not torch.cuda.is_available():
        return "the gsplat backend needs a CUDA GPU (torch.cuda.is_available() is False); use backend='torch'"
    try:
        import gsplat  # noqa: F401
    except ImportError as exc:
        return f"the gsplat backend needs the gsplat package ({exc}); pip install gsplat, or use backend='torch'"
    return None


def rasterize_gsplat(
    means: Tensor,
    covars: Tensor,
    colors: Tensor,
    opacities: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    eps2d: float = 0.3,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    tile_size: int = 16,
) -> tuple[Tensor, Tensor]:
    """gsplat "classic" rasterization; shapes as :func:`rasterize_torch` (rgb (C,H,W,D), alpha (C,H,W,1))."""
    reason = gsplat_unavailable_reason()
    if reason is not None:
        raise DependencyError(reason)
    from gsplat import rasterization

    check_size(width, height)
    device = means.device
    cuda = device if device.type == "cuda" else torch.device("cuda")
    means, covars, colors, opacities, viewmats, Ks = (
        x.to(cuda, torch.float32) for x in broadcast_inputs(means, covars, colors, opacities, viewmats, Ks)
    )
    # each camera renders its own posed Gaussians: the camera axis is gsplat's batch dim
    rgb, alpha, _ = rasterization(
        means,  # (C, N, 3)
        None,
        None,
        opacities,  # (C, N)
        colors,  # (C, N, D)
        viewmats[:, None],  # (C, 1, 4, 4)
        Ks[:, None],  # (C, 1, 3, 3)
        width,
        height,
        near_plane=near_plane,
        far_plane=far_plane,
        eps2d=eps2d,
        tile_size=tile_size,
        packed=False,
        rasterize_mode="classic",
        covars=covars,  # (C, N, 3, 3)
    )
    return rgb[:, 0].to(device), alpha[:, 0].to(device)
