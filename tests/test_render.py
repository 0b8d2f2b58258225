"""Rendering: CPU rasterizer vs a brute-force reference and gsplat, gradients, ground, cameras, video."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from akd_core.io.errors import ConfigError, DependencyError
from akd_core.render import (
    GroundConfig,
    follow_camera,
    intrinsics_from_fov,
    look_at,
    mask_below_ground,
    project_gaussians,
    rasterize,
    rasterize_torch,
    render_ground,
    render_video,
    write_mp4,
)


def random_covars(n: int, generator: torch.Generator, lo: float = 0.01, hi: float = 0.08) -> torch.Tensor:
    """(n, 3, 3) covariances R diag(s^2) R^T with random rotations and scales in [lo, hi] m."""
    q, _ = torch.linalg.qr(torch.randn(n, 3, 3, generator=generator, dtype=torch.float64))
    s = lo + (hi - lo) * torch.rand(n, 3, generator=generator, dtype=torch.float64)
    return q @ torch.diag_embed(s**2) @ q.transpose(-1, -2)


def random_scene(seed: int, n: int = 40, cameras: int = 2, width: int = 20, height: int = 16) -> dict:
    """Gaussians around the origin seen by cameras ~1.5 m away; some behind / beside the camera."""
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(cameras, n, 3, generator=g, dtype=torch.float64) * 0.25
    means[:, :3] = torch.tensor([[0.0, 0.0, 1.8], [0.0, 0.0, 1.4], [3.0, 0.0, 0.0]], dtype=torch.float64)
    # an opaque stack in front of the origin, to exercise transmittance early stop
    means[:, 3:8] = torch.tensor([0.02, 0.01, 0.0], dtype=torch.float64) + torch.linspace(-0.3, 0.3, 5)[:, None] * (
        torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    )
    covars = random_covars(n, g).expand(cameras, n, 3, 3).clone()
    colors = torch.rand(n, 3, generator=g, dtype=torch.float64)
    opacities = torch.rand(n, generator=g, dtype=torch.float64)
    opacities[3:8] = 0.97
    opacities[8] = 0.002  # below 1/255: invisible everywhere
    eyes = torch.tensor([[1.5, 0.2, 0.3], [0.3, -1.5, 0.6]], dtype=torch.float64)[:cameras]
    viewmats = look_at(eyes, torch.zeros_like(eyes))
    K = intrinsics_from_fov(50.0, width, height, dtype=torch.float64)
    K[0, 2] += 0.7  # off-centre principal point
    return dict(means=means, covars=covars, colors=colors, opacities=opacities, viewmats=viewmats, Ks=K,
                width=width, height=height)


def reference_render(scene: dict, eps2d: float = 0.3, near: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """Plain per-pixel loop over every Gaussian (numpy float64), gsplat classic rules."""
    W, H = scene["width"], scene["height"]
    K = scene["Ks"].numpy()
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    C = scene["viewmats"].shape[0]
    rgb = np.zeros((C, H, W, 3))
    alpha = np.zeros((C, H, W, 1))
    for c in range(C):
        Rw, t = scene["viewmats"][c, :3, :3].numpy(), scene["viewmats"][c, :3, 3].numpy()
        splats = []
        for i in range(scene["means"].shape[1]):
            m = Rw @ scene["means"][c, i].numpy() + t
            if m[2] <= near:
                continue
            cov = Rw @ scene["covars"][c, i].numpy() @ Rw.T
            x_lim = (cx / fx + 0.3 * 0.5 * W / fx, (W - cx) / fx + 0.3 * 0.5 * W / fx)
            y_lim = (cy / fy + 0.3 * 0.5 * H / fy, (H - cy) / fy + 0.3 * 0.5 * H / fy)
            tx = m[2] * min(max(m[0] / m[2], -x_lim[0]), x_lim[1])
            ty = m[2] * min(max(m[1] / m[2], -y_lim[0]), y_lim[1])
            J = np.array([[fx / m[2], 0, -fx * tx / m[2] ** 2], [0, fy / m[2], -fy * ty / m[2] ** 2]])
            cov2 = J @ cov @ J.T + eps2d * np.eye(2)
            if np.linalg.det(cov2) <= 0:
                continue
            mean2 = np.array([fx * m[0] / m[2] + cx, fy * m[1] / m[2] + cy])
            splats.append((m[2], i, mean2, np.linalg.inv(cov2)))
        splats.sort(key=lambda s: (s[0], s[1]))
        for py in range(H):
            for px in range(W):
                T, out = 1.0, np.zeros(3)
                for _, i, mean2, conic in splats:
                    d = mean2 - np.array([px + 0.5, py + 0.5])
                    a = min(0.999, float(scene["opacities"][i]) * math.exp(-0.5 * d @ conic @ d))
                    if a < 1.0 / 255.0:
                        continue
                    if T * (1 - a) <= 1e-4:
                        break
                    out += a * T * scene["colors"][i].numpy()
                    T *= 1 - a
                rgb[c, py, px], alpha[c, py, px] = out, 1 - T
    return rgb, alpha


def render_torch(scene: dict, dtype: torch.dtype = torch.float32, **options) -> tuple[torch.Tensor, torch.Tensor]:
    s = {k: (v.to(dtype) if isinstance(v, torch.Tensor) else v) for k, v in scene.items()}
    return rasterize_torch(s["means"], s["covars"], s["colors"], s["opacities"], s["viewmats"], s["Ks"],
                           s["width"], s["height"], **options)


@pytest.mark.parametrize("seed", [0, 1])
def test_cpu_rasterizer_matches_bruteforce_reference(seed: int) -> None:
    scene = random_scene(seed)
    ref_rgb, ref_alpha = reference_render(scene)
    assert ref_alpha.max() > 0.99 and ref_alpha.min() < 0.5  # the scene exercises early stop and empty pixels
    for options in ({}, {"tile_size": 4, "gaussian_chunk": 3}):
        rgb, alpha = render_torch(scene, **options)
        assert rgb.shape == (2, 16, 20, 3) and alpha.shape == (2, 16, 20, 1)
        assert np.abs(rgb.numpy() - ref_rgb).max() < 1e-4, options
        assert np.abs(alpha.numpy() - ref_alpha).max() < 1e-4, options


def test_transmittance_stop_is_exclusive_like_gsplat() -> None:
    """Four ~0.95-opaque layers: T ~ 0.05^3 > 1e-4 after three; the fourth (T -> 6e-6) is not drawn."""
    n, s, f = 4, 0.05, 100.0
    depths = [1.0 + 0.1 * i for i in range(n)]
    means = torch.tensor([[0.0, 0.0, z] for z in depths], dtype=torch.float64)
    covars = torch.eye(3, dtype=torch.float64).expand(n, 3, 3) * s**2
    colors = torch.eye(4, dtype=torch.float64)  # channel i marks layer i
    K = torch.tensor([[f, 0, 4], [0, f, 4], [0, 0, 1]], dtype=torch.float64)
    rgb, alpha = rasterize_torch(means, covars, colors, torch.full((n,), 0.95, dtype=torch.float64),
                                 torch.eye(4, dtype=torch.float64)[None], K, 8, 8)
    # pixel (4, 4) has its centre 0.5 px from the means in x and y: d^T d = 0.5
    a = [0.95 * math.exp(-0.5 * 0.5 / ((f * s / z) ** 2 + 0.3)) for z in depths]
    T = [1.0, 1 - a[0], (1 - a[0]) * (1 - a[1]), (1 - a[0]) * (1 - a[1]) * (1 - a[2])]
    assert T[3] > 1e-4 >= T[3] * (1 - a[3])
    expected = torch.tensor([a[0] * T[0], a[1] * T[1], a[2] * T[2], 0.0], dtype=torch.float64)
    torch.testing.assert_close(rgb[0, 4, 4], expected)
    assert alpha[0, 4, 4, 0].item() == pytest.approx(1 - T[3])


def test_gradients_pass_gradcheck_float64() -> None:
    g = torch.Generator().manual_seed(3)
    means = torch.randn(3, 3, generator=g, dtype=torch.float64) * 0.05 + torch.tensor([0.0, 0.0, 1.0])
    means.requires_grad_()
    covars = random_covars(3, g, 0.02, 0.04).requires_grad_()
    colors = torch.rand(3, 3, generator=g, dtype=torch.float64).requires_grad_()
    opacities = (0.3 + 0.4 * torch.rand(3, generator=g, dtype=torch.float64)).requires_grad_()
    viewmats = torch.eye(4, dtype=torch.float64)[None]
    K = torch.tensor([[40.0, 0, 3.1], [0, 40.0, 2.4], [0, 0, 1]], dtype=torch.float64)

    def f(m, cv, col, op):
        return rasterize_torch(m, cv, col, op, viewmats, K, 6, 5, tile_size=4, gaussian_chunk=2)

    rgb, alpha = f(means, covars, colors, opacities)
    assert alpha.min() > 0.05  # every pixel sees the Gaussians: no 1/255 cut near the test point
    assert torch.autograd.gradcheck(f, (means, covars, colors, opacities), eps=1e-6, atol=1e-5)


def test_projection_agrees_with_gsplat_torch_reference() -> None:
    from gsplat.cuda._torch_impl import _fully_fused_projection

    scene = random_scene(5, n=60)
    W, H = scene["width"], scene["height"]
    Ks = scene["Ks"].expand(2, 3, 3)
    ours = project_gaussians(scene["means"].float(), scene["covars"].float(), torch.ones(2, 60),
                             scene["viewmats"].float(), Ks.float(), W, H)
    # gsplat's helper renders one shared set of Gaussians per call: compare camera by camera
    for c in range(2):
        radii, means2d, depths, conics, _ = _fully_fused_projection(
            scene["means"][c].float(), scene["covars"][c].float(), scene["viewmats"][c : c + 1].float(),
            Ks[c : c + 1].float(), W, H)
        theirs_visible = (radii[0] > 0).all(-1)
        ours_visible = (ours.radii[c] > 0).all(-1)
        assert theirs_visible.sum() > 10
        assert torch.equal(theirs_visible, ours_visible)  # opacity 1: same extent (3.33 sigma)
        v = ours_visible
        torch.testing.assert_close(ours.means2d[c][v], means2d[0][v], rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(ours.conics[c][v], conics[0][v], rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(ours.depths[c][v], depths[0][v])


def test_gaussian_at_known_point_lands_on_predicted_pixel() -> None:
    viewmat = look_at(torch.tensor([2.0, -1.0, 1.2]), torch.tensor([0.1, 0.2, 0.3]))
    K = intrinsics_from_fov(45.0, 64, 48)
    point = torch.tensor([0.25, 0.1, 0.4])
    cam = viewmat[:3, :3] @ point + viewmat[:3, 3]
    u, v = (K @ cam / cam[2])[:2]
    rgb, alpha = rasterize_torch(point[None], torch.eye(3)[None] * 1e-6, torch.ones(1, 3), torch.ones(1),
                                 viewmat[None], K, 64, 48)
    row, col = divmod(int(alpha[0, ..., 0].argmax()), 64)
    assert (col, row) == (int(u), int(v))
    # and the look-at target sits at the principal point
    target_cam = viewmat[:3, :3] @ torch.tensor([0.1, 0.2, 0.3]) + viewmat[:3, 3]
    torch.testing.assert_close((K @ target_cam / target_cam[2])[:2], K[:2, 2])


def test_ground_checker_square_colour_and_sky() -> None:
    cfg = GroundConfig(tile_size=0.5, shadow=False)
    W, H = 64, 48
    viewmat = look_at(torch.tensor([-3.0, 0.0, 1.0]), torch.tensor([1.0, 0.0, 0.0]))
    K = intrinsics_from_fov(60.0, W, H)
    bg = render_ground(viewmat[None], K, W, H, cfg)[0]
    for centre, colour in [((0.25, 0.25), cfg.color_a), ((0.75, 0.25), cfg.color_b), ((-0.25, 0.25), cfg.color_b)]:
        p = torch.tensor([*centre, 0.0])
        cam = viewmat[:3, :3] @ p + viewmat[:3, 3]
        u, v = (K @ cam / cam[2])[:2]
        torch.testing.assert_close(bg[int(v), int(u)], torch.tensor(colour))
    # a point far above the horizon: sky
    p = torch.tensor([5.0, 0.0, 1.5])  # 3.6 degrees above the horizon
    cam = viewmat[:3, :3] @ p + viewmat[:3, 3]
    u, v = (K @ cam / cam[2])[:2]
    assert 0 <= v < H
    torch.testing.assert_close(bg[int(v), int(u)], torch.tensor(cfg.sky_color))
    assert (bg[0] == torch.tensor(cfg.sky_color)).all() and (bg[-1] != torch.tensor(cfg.sky_color)).any()


def test_contact_shadow_darkens_ground_under_low_gaussians_only() -> None:
    grey = (0.8, 0.8, 0.8)
    cfg = GroundConfig(color_a=grey, color_b=grey, samples_per_side=1,
                       shadow_max=0.5, shadow_beta=10.0, shadow_radius=0.1)
    W = H = 64
    viewmat = look_at(torch.tensor([0.0, -0.01, 3.0]), torch.tensor([0.0, 0.0, 0.0]))  # looking down
    K = intrinsics_from_fov(40.0, W, H)
    means = torch.tensor([[[0.3, 0.0, 0.02], [-0.3, 0.0, 2.0]]])
    bg = render_ground(viewmat[None], K, W, H, cfg, means=means)[0]
    lit = torch.tensor(grey)

    def pixel(p):
        cam = viewmat[:3, :3] @ torch.tensor(p) + viewmat[:3, 3]
        u, v = (K @ cam / cam[2])[:2]
        return bg[int(v), int(u)]

    torch.testing.assert_close(pixel([0.3, 0.0, 0.0]), lit * (1 - 0.5 * math.exp(-10 * 0.02)), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(pixel([-0.3, 0.0, 0.0]), lit * (1 - 0.5 * math.exp(-10 * 2.0)), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(pixel([0.0, 0.6, 0.0]), lit)


def test_render_video_composites_ground_masks_below_ground_and_backpropagates() -> None:
    F_, N, W, H = 3, 30, 24, 20
    g = torch.Generator().manual_seed(7)
    means = (torch.randn(F_, N, 3, generator=g) * 0.1 + torch.tensor([0.0, 0.0, 0.3])).requires_grad_()
    covars = random_covars(N, g).float().expand(F_, N, 3, 3)
    colors = torch.rand(N, 3, generator=g).requires_grad_()
    opacities = torch.full((N,), 0.8, requires_grad=True)
    viewmats, K = follow_camera(means, W, H)
    frames = render_video(means, covars, colors, opacities, viewmats, K, W, H, backend="torch")
    assert frames.shape == (F_, 3, H, W) and frames.min() >= 0 and frames.max() <= 1
    frames.sum().backward()
    assert means.grad.abs().sum() > 0 and colors.grad.abs().sum() > 0 and opacities.grad.abs().sum() > 0
    # with no Gaussians above ground the video is exactly the ground layer
    below = means.detach() - torch.tensor([0.0, 0.0, 5.0])
    frames_below = render_video(below, covars, colors, opacities, viewmats, K, W, H, backend="torch")
    ground = render_ground(viewmats, K, W, H, GroundConfig(), means=below).permute(0, 3, 1, 2)
    torch.testing.assert_close(frames_below, ground)
    assert torch.equal(mask_below_ground(below, opacities), torch.zeros(F_, N))


def test_follow_camera_keeps_target_centred_and_smooth() -> None:
    F_ = 40
    g = torch.Generator().manual_seed(0)
    path = torch.stack([torch.linspace(0, 2, F_), torch.zeros(F_), torch.full((F_,), 0.3)], dim=-1)
    body = torch.randn(200, 3, generator=g) * 0.1
    jitter = torch.randn(F_, 1, 3, generator=g) * 0.02
    means = path[:, None] + body[None] + jitter
    viewmats, K = follow_camera(means, 64, 64, smooth_sigma_frames=3.0)
    eyes = torch.linalg.inv(viewmats)[:, :3, 3]
    raw_centres = 0.5 * (means.min(1).values + means.max(1).values)
    accel_eye = (eyes[2:] - 2 * eyes[1:-1] + eyes[:-2]).norm(dim=-1).mean()
    accel_raw = (raw_centres[2:] - 2 * raw_centres[1:-1] + raw_centres[:-2]).norm(dim=-1).mean()
    assert accel_eye < 0.2 * accel_raw
    cams = (viewmats[:, :3, :3] @ raw_centres[..., None]).squeeze(-1) + viewmats[:, :3, 3]
    uv = (K @ cams.T).T[:, :2] / cams[:, 2:]
    assert (uv - 32).abs().max() < 6  # the asset stays near the image centre


def test_write_mp4_roundtrip(tmp_path) -> None:
    import imageio_ffmpeg

    frames = torch.zeros(5, 3, 21, 30)
    frames[:, 0, :, :15] = 1.0  # left half red
    frames[:, 2, :, 15:] = torch.linspace(0, 1, 5)[:, None, None]
    path = write_mp4(frames, tmp_path / "clip.mp4", fps=10)
    assert path.exists() and not list(tmp_path.glob(".*tmp*"))
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = reader.__next__()
    assert tuple(meta["size"]) == (30, 22)  # odd height padded to even
    decoded = [np.frombuffer(f, np.uint8).reshape(22, 30, 3) for f in reader]
    assert len(decoded) == 5
    assert decoded[0][10, 5, 0] > 200 and decoded[0][10, 5, 2] < 40
    assert abs(int(decoded[4][10, 25, 2]) - 255) < 20 and decoded[4][10, 25, 0] < 40


def test_backend_selection_and_errors() -> None:
    if torch.cuda.is_available():
        pytest.skip("checks the CPU-only behaviour")
    scene = random_scene(0, n=12)
    args = [scene[k].float() for k in ("means", "covars", "colors", "opacities", "viewmats", "Ks")]
    with pytest.raises(DependencyError, match="CUDA"):
        rasterize(*args, 20, 16, backend="gsplat")
    with pytest.raises(ConfigError, match="backend"):
        rasterize(*args, 20, 16, backend="vulkan")
    rgb, _ = rasterize(*args, 20, 16, backend="auto")
    assert rgb.shape == (2, 16, 20, 3)
    with pytest.raises(ConfigError, match="means"):
        rasterize(args[0][..., :2], *args[1:], 20, 16)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA for gsplat")
def test_gsplat_and_cpu_backends_agree() -> None:
    scene = random_scene(2, n=200, width=64, height=48)
    args = [scene[k].float() for k in ("means", "covars", "colors", "opacities", "viewmats", "Ks")]
    rgb_t, alpha_t = rasterize(*args, 64, 48, backend="torch")
    rgb_g, alpha_g = rasterize(*args, 64, 48, backend="gsplat")
    err = max((rgb_t - rgb_g.cpu()).abs().max().item(), (alpha_t - alpha_g.cpu()).abs().max().item())
    print(f"gsplat vs torch max pixel error: {err:.2e}")
    assert err < 1e-3
