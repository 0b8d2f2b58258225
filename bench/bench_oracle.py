"""The SDS known answer with the per-frame defaults (issue 6 / issue 18's first clause / issue 32 item 5).

Renders a gait-library trot or pace of the built-in quadruped as the target, and runs exactly what
`akd distill --prior oracle --target RUN0` runs with no tuning flags: standing on the target's root path, the oracle
in latent space through the model folder's VAE (render -> its encoder -> latent difference), DistillConfig's
per-frame defaults (orbit cameras, margin 0.9, 4 px blur annealed, lr decay to 0.1x, no smoothness, ground 1e4,
2000 Gaussians, 400 iterations on CPU). Prints the initial and final mean joint error; the criterion is >= 70 %
reduction and < 0.1 rad.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_oracle.py [MODEL_DIR] [--gaits trot pace] [--out runs/oracle]
        [--iterations N] [--space latent|pixels]

MODEL_DIR (default: the shipped prior) is a complete diffusers CogVideoX folder; only its VAE is used.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.io.rundir import RunDir  # noqa: E402
from akd_core.motion.stage import stage_gait  # noqa: E402
from akd_core.sds.distill import stage_distill  # noqa: E402

PROMPTS = {"trot": "a dog trotting forward", "pace": "a dog pacing forward"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path, nargs="?", default=None)
    parser.add_argument("--gaits", nargs="+", choices=list(PROMPTS), default=list(PROMPTS))
    parser.add_argument("--out", type=Path, default=Path("runs/oracle"))
    parser.add_argument("--iterations", type=int, default=None, help="default: akd distill's (400 on CPU)")
    parser.add_argument("--space", choices=("latent", "pixels"), default="latent")
    args = parser.parse_args()
    for gait in args.gaits:
        target = RunDir(args.out / f"target_{gait}", create=True)
        if not target.file("reference.npz").exists():
            stage_gait(target, robot_spec="quadruped", prompt=PROMPTS[gait], duration=1.2, fps=50, seed=0)
        run = RunDir(args.out / f"recover_{gait}_{args.space}", create=True)
        tic = time.perf_counter()
        metrics = stage_distill(run, robot_spec="quadruped", prompt=PROMPTS[gait], prior="oracle",
                                target=target.path, iterations=args.iterations, oracle_space=args.space,
                                video_model=args.model, config_overrides={"video_every": 0})
        figures = {k: v for k, v in metrics.items() if "joint_err" in k}
        print(gait, json.dumps(figures, indent=1))
        met = figures["joint_err_reduction"] >= 0.7 and figures["final_joint_err_rad"] < 0.1
        print(f"{gait}: {metrics['iterations']} iterations in {time.perf_counter() - tic:.0f} s; criterion: reduction "
              f">= 0.70 and final < 0.1 rad -> {'MET' if met else 'NOT MET'}", flush=True)


if __name__ == "__main__":
    main()
