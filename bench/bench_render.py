"""Benchmark the Gaussian renderer: forward and forward+backward time and peak memory.

Scene: a robot-sized cloud (boxes for a body and four legs, 0.6 m long) walking along x,
16 frames, following camera, checkerboard ground. Each configuration runs in a fresh
subprocess so its peak resident memory (ru_maxrss) is its own; the table reports the
peak and its growth over the process after scene setup and a warm-up call (torch on CPU has no allocator
peak counter). With CUDA, also gsplat vs ours on the same scene with the max pixel error.

    .venv/bin/python bench/bench_render.py            # 64/128/256 px x 5k/20k Gaussians
    .venv/bin/python bench/bench_render.py --quick    # 64 and 128 px, 5k only
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.render import follow_camera, rasterize, render_video  # noqa: E402


def robot_cloud(num: int, frames: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Gaussians on a body box and four leg boxes, translated along x per frame: means (F,N,3), covars (F,N,3,3)."""
    g = torch.Generator().manual_seed(seed)
    boxes = torch.tensor([  # centre xyz, half extents xyz
        [0.0, 0.0, 0.40, 0.30, 0.12, 0.08],
        [0.22, 0.10, 0.18, 0.03, 0.03, 0.16], [0.22, -0.10, 0.18, 0.03, 0.03, 0.16],
        [-0.22, 0.10, 0.18, 0.03, 0.03, 0.16], [-0.22, -0.10, 0.18, 0.03, 0.03, 0.16],
    ])
    which = torch.randint(0, len(boxes), (num,), generator=g)
    local = (torch.rand(num, 3, generator=g) * 2 - 1) * boxes[which, 3:]
    base = boxes[which, :3] + local
    scales = 0.004 + 0.012 * torch.rand(num, 3, generator=g)
    rot, _ = torch.linalg.qr(torch.randn(num, 3, 3, generator=g))
    covars = rot @ torch.diag_embed(scales**2) @ rot.transpose(-1, -2)
    steps = torch.arange(frames, dtype=torch.float32)
    shift = torch.stack([0.05 * steps, torch.zeros(frames), 0.02 * torch.sin(steps)], dim=-1)
    means = base[None] + shift[:, None]
    colors = torch.rand(num, 3, generator=g) * 0.5 + 0.25
    opacities = 0.5 + 0.5 * torch.rand(num, generator=g)
    return means, covars.expand(frames, num, 3, 3).contiguous(), colors, opacities


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kB


def current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def run_one(size: int, num: int, frames: int, backward: bool) -> dict:
    means, covars, colors, opacities = robot_cloud(num, frames)
    viewmats, K = follow_camera(means, size, size)
    # warm-up: the first torch calls in a process pay one-off costs (thread pool, allocator)
    render_video(means[:1, :100], covars[:1, :100], colors[:100], opacities[:100], viewmats[:1], K, 32, 32,
                 backend="torch")
    means.requires_grad_(backward)
    colors.requires_grad_(backward)
    before = current_rss_mb()
    start = time.perf_counter()
    frames_out = render_video(means, covars, colors, opacities, viewmats, K, size, size, backend="torch")
    forward_s = time.perf_counter() - start
    if backward:
        frames_out.square().mean().backward()
    total_s = time.perf_counter() - start
    return {"size": size, "gaussians": num, "frames": frames, "backward": backward, "forward_s": forward_s,
            "total_s": total_s, "peak_rss_mb": peak_rss_mb(), "rss_growth_mb": peak_rss_mb() - before}


def compare_gsplat(size: int, num: int, frames: int) -> dict:
    means, covars, colors, opacities = robot_cloud(num, frames)
    viewmats, K = follow_camera(means, size, size)
    out = {}
    # warm-up: gsplat's first call JIT-compiles (or loads) its CUDA extension and initialises the CUDA context
    rasterize(means[:1, :100], covars[:1, :100], colors[:100], opacities[:100], viewmats[:1], K, 32, 32,
              backend="gsplat")
    torch.cuda.synchronize()
    for backend in ("torch", "gsplat"):
        start = time.perf_counter()
        rgb, alpha = rasterize(means, covars, colors, opacities, viewmats, K, size, size, backend=backend)
        if backend == "gsplat":
            torch.cuda.synchronize()
        out[backend] = (time.perf_counter() - start, rgb.cpu(), alpha.cpu())
    err = max((out["torch"][1] - out["gsplat"][1]).abs().max().item(),
              (out["torch"][2] - out["gsplat"][2]).abs().max().item())
    return {"size": size, "gaussians": num, "torch_s": out["torch"][0], "gsplat_s": out["gsplat"][0], "max_err": err}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="64 and 128 px with 5k Gaussians only")
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    parser.add_argument("--single", nargs=3, type=int, metavar=("SIZE", "N", "BACKWARD"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.single:
        size, num, backward = args.single
        print(json.dumps(run_one(size, num, args.frames, bool(backward))))
        return
    sizes = (64, 128) if args.quick else (64, 128, 256)
    counts = (5000,) if args.quick else (5000, 20000)
    print(f"CPU torch backend, {args.frames} frames, torch threads {torch.get_num_threads()}")
    print(f"{'size':>5} {'gauss':>6} | {'fwd s':>7} {'peak MB':>8} {'+MB':>6} | "
          f"{'fwd+bwd s':>9} {'peak MB':>8} {'+MB':>6}")
    for size in sizes:
        for num in counts:
            row = []
            for backward in (0, 1):
                cmd = [sys.executable, __file__, "--frames", str(args.frames), "--threads", str(args.threads),
                       "--single", str(size), str(num), str(backward)]
                result = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                row.append(result)
            f, b = row
            print(f"{size:>5} {num:>6} | {f['forward_s']:>7.2f} {f['peak_rss_mb']:>8.0f} {f['rss_growth_mb']:>6.0f} | "
                  f"{b['total_s']:>9.2f} {b['peak_rss_mb']:>8.0f} {b['rss_growth_mb']:>6.0f}", flush=True)
    if torch.cuda.is_available():
        print("\ngsplat (CUDA) vs torch, forward only")
        for size in sizes:
            for num in counts:
                r = compare_gsplat(size, num, args.frames)
                print(f"{size:>5} {num:>6} torch {r['torch_s']:.2f}s gsplat {r['gsplat_s']:.3f}s "
                      f"max pixel error {r['max_err']:.2e}")
    else:
        print("\n(no CUDA: gsplat comparison skipped)")


if __name__ == "__main__":
    main()
