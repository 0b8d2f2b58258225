"""Forward kinematics speed: forward and forward+backward for 1,000 frames on built-in robots (CPU).

Usage: .venv/bin/python bench/bench_fk.py [--frames 1000] [--repeats 5] [--robots quadruped humanoid]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.model.kinematics import ForwardKinematics  # noqa: E402
from akd_core.model.load import load_robot  # noqa: E402


def bench(name: str, frames: int, repeats: int, dtype: torch.dtype) -> dict:
    robot = load_robot(name)
    fk = ForwardKinematics(robot)
    gen = torch.Generator().manual_seed(0)
    root_pos = torch.randn(frames, 3, generator=gen, dtype=dtype)
    root_quat = torch.nn.functional.normalize(torch.randn(frames, 4, generator=gen, dtype=dtype), dim=-1)
    joint_pos = (torch.rand(frames, robot.num_dofs, generator=gen, dtype=dtype) - 0.5)
    fwd, both = [], []
    for _ in range(repeats + 1):  # first run warms up
        q = joint_pos.clone().requires_grad_(True)
        start = time.perf_counter()
        pos, rot = fk(root_pos, root_quat, q)
        mid = time.perf_counter()
        (pos.sum() + rot.sum()).backward()
        end = time.perf_counter()
        fwd.append(mid - start)
        both.append(end - start)
    return {"robot": name, "links": len(robot.links), "dofs": robot.num_dofs, "depth": len(fk.levels),
            "fwd_ms": 1e3 * min(fwd[1:]), "fwd_bwd_ms": 1e3 * min(both[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--robots", nargs="+", default=["quadruped", "humanoid"])
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    print(f"FK, {args.frames} frames, float32, CPU ({torch.get_num_threads()} threads), best of {args.repeats}")
    print(f"{'robot':12s} {'links':>5s} {'dofs':>4s} {'depth':>5s} {'fwd ms':>8s} {'fwd+bwd ms':>10s}")
    for name in args.robots:
        row = bench(name, args.frames, args.repeats, torch.float32)
        print(f"{row['robot']:12s} {row['links']:5d} {row['dofs']:4d} {row['depth']:5d} "
              f"{row['fwd_ms']:8.2f} {row['fwd_bwd_ms']:10.2f}")


if __name__ == "__main__":
    main()
