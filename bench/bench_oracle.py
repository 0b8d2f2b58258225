"""The SDS known answer through a model folder's VAE (issue 6 / issue 18's first clause).

Renders a gait-library trot of the built-in quadruped as the target, starts standing on the same root path and
distils with the oracle prior in latent space (render -> the folder's VAE encoder -> latent difference), with the
settings of the pixel known-answer slow test (orbit cameras, margin 0.9, 4 px blur annealed, lr decay to 0.1x, no
smoothness, ground 1e4). Prints the initial and final mean joint error; the criterion is >= 70 % reduction and
< 0.1 rad.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_oracle.py MODEL_DIR [--out runs/oracle] [--iterations 400]
        [--space latent|pixels]

MODEL_DIR is a complete diffusers CogVideoX folder (`akd prior check` accepts it); only its VAE is used.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path)
    parser.add_argument("--out", type=Path, default=Path("runs/oracle"))
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--space", choices=("latent", "pixels"), default="latent")
    args = parser.parse_args()
    target = RunDir(args.out / "target", create=True)
    if not target.file("reference.npz").exists():
        stage_gait(target, robot_spec="quadruped", prompt="a dog trotting forward", duration=1.2, fps=50, seed=0)
    run = RunDir(args.out / f"recover_{args.space}", create=True)
    tic = time.perf_counter()
    metrics = stage_distill(run, robot_spec="quadruped", prompt="a dog trotting forward", prior="oracle",
                            target=target.path, iterations=args.iterations, init="standing", seed=0,
                            oracle_space=args.space, video_model=args.model,
                            config_overrides={"n_gaussians": 2000, "camera": "orbit", "camera_margin": 0.9,
                                              "blur_px": 4.0, "lr_final": 0.1, "video_every": 0,
                                              "lambda_smooth": 0.0, "lambda_ground": 1e4, "lambda_skate": 0.0})
    figures = {k: v for k, v in metrics.items() if "joint_err" in k}
    print(json.dumps(figures, indent=1))
    met = figures["joint_err_reduction"] >= 0.7 and figures["final_joint_err_rad"] < 0.1
    print(f"{args.iterations} iterations in {time.perf_counter() - tic:.0f} s; criterion: reduction >= 0.70 and "
          f"final < 0.1 rad -> {'MET' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
