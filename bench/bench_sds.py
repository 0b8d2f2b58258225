"""SDS distillation speed: seconds per iteration and peak memory with the tiny CogVideoX prior.

CPU: 9 frames at 64x64 (torch rasterizer). Where CUDA is available, the same on CUDA with gsplat.
Usage: .venv/bin/python bench/bench_sds.py [--iterations 5] [--robot quadruped] [--gaussians 6000]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.model.load import load_robot  # noqa: E402
from akd_core.sds.clip_render import constant_velocity_init, standing_height  # noqa: E402
from akd_core.sds.distill import DistillConfig, distill  # noqa: E402
from akd_core.sds.prior import make_prior  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run(robot_name: str, iterations: int, gaussians: int, device: str, backend: str) -> dict:
    robot = load_robot(robot_name)
    prior = make_prior("tiny", "a dog trotting forward", seed=0, device=device)
    init = constant_velocity_init(robot, prior.num_frames, 8.0, 0.5, standing_height(robot))
    config = DistillConfig(iterations=1, n_gaussians=gaussians, video_every=0, backend=backend)
    distill(robot, prior, init, config, progress=False)  # warm-up (allocations, caches)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    config = DistillConfig(iterations=iterations, n_gaussians=gaussians, video_every=0, backend=backend)
    start = time.perf_counter()
    distill(robot, prior, init, config, progress=False)
    seconds = (time.perf_counter() - start) / iterations
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else peak_rss_mb()
    return {"device": device, "backend": backend, "s_per_iter": seconds, "peak_mb": peak,
            "frames": prior.num_frames, "res": f"{prior.width}x{prior.height}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--robot", default="quadruped")
    parser.add_argument("--gaussians", type=int, default=6000)
    args = parser.parse_args()
    rows = [run(args.robot, args.iterations, args.gaussians, "cpu", "torch")]
    if torch.cuda.is_available():
        rows.append(run(args.robot, args.iterations, args.gaussians, "cuda", "gsplat"))
    print(f"SDS iteration (tiny CogVideoX prior, {args.robot}, {args.gaussians} Gaussians)")
    print(f"{'device':6s} {'backend':8s} {'frames':>6s} {'res':>7s} {'s/iter':>8s} {'peak MB':>9s}")
    for r in rows:
        print(f"{r['device']:6s} {r['backend']:8s} {r['frames']:6d} {r['res']:>7s} {r['s_per_iter']:8.3f} "
              f"{r['peak_mb']:9.0f}   (peak = {'CUDA allocated' if r['device'] == 'cuda' else 'process max RSS'})")


if __name__ == "__main__":
    main()
