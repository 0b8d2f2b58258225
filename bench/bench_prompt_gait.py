"""Prompt -> gait through SDS with a trained prior (issue 18's second clause).

For each prompt and seed, `akd distill` runs with the model folder's prior (CogVideoX code path, the folder's
VAE, transformer, tokenizer and text encoder) from a neutral start (``--init standing`` or ``constant``), then
the distilled clip is classified by :func:`akd_core.motion.classify.classify_gait` and its root displacement along
the start heading is measured. Prints one row per run and, per prompt, how many seeds gave the asked gait; the
criterion is >= 2 of 3 correct per prompt and a root that moves forward. Each row also shows how much the legs
move: the mean peak-to-peak foot height ("foot swing", the gait library's 2 s clips at 25 fps: 5.4 cm for trot,
pace and bound) and the mean over joints of each joint's standard deviation (0.097 rad trot/pace, 0.128 bound):
a clip whose legs hardly move is classified from a few centimetres of body bob.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_prompt_gait.py [MODEL_DIR] [--seeds 0 1 2]
        [--iterations 300] [--init standing|constant] [--out runs/prompt_gait] [--guidance-scale G]
        [--negative-prompt TEXT] [--t-max START END] [--sds-denoise-steps K] [--init-noise RAD] (akd distill's options)

MODEL_DIR defaults to the shipped prior (``akd_core.sds.prior.default``). Runs already finished under --out are
re-read, not re-run (delete the folder to start over).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.cli.distill import config_overrides  # noqa: E402
from akd_core.cli.prior_options import add_prior_arguments, prior_options_from_args  # noqa: E402
from akd_core.io.rundir import RunDir  # noqa: E402
from akd_core.model.load import load_robot  # noqa: E402
from akd_core.motion.classify import classify_gait  # noqa: E402
from akd_core.motion.clip import Motion  # noqa: E402
from akd_core.motion.metrics import motion_metrics  # noqa: E402
from akd_core.sds.distill import (  # noqa: E402
    PARAMETRISATIONS,
    PHASE_SEARCH_SCORES,
    SMOOTH_NORMS,
    clip_feet,
    stage_distill,
)

PROMPTS = {"trot": "a dog trotting forward", "pace": "a dog pacing", "bound": "a dog bounding"}


def forward_displacement(motion: Motion) -> float:
    """Root displacement (m) along the clip's initial heading, first frame to last."""
    x, y, z, w = (float(v) for v in motion.root_quat[0])
    yaw = np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    delta = motion.root_pos[-1, :2] - motion.root_pos[0, :2]
    return float(delta[0] * np.cos(yaw) + delta[1] * np.sin(yaw))


def foot_skate(robot, motion: Motion) -> float:
    """Mean horizontal speed (m/s) of the feet's contact points while on the ground (contact point below
    metrics.CONTACT_HEIGHT_M; the robot's detected feet when the clip names none)."""
    names, offsets = clip_feet(robot, motion)
    return float(motion_metrics(robot, motion.root_pos, motion.root_quat, motion.joint_pos, motion.fps,
                                names, offsets, None)["foot_skate_mps"])


def _frac(value: float | None) -> str:
    return f"{value:6.2f}" if value is not None else f"{'-':>6s}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path, nargs="?", default=None)
    parser.add_argument("--out", type=Path, default=Path("runs/prompt_gait"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--init", choices=("standing", "constant"), default="standing")
    parser.add_argument("--gaits", nargs="+", default=list(PROMPTS), choices=list(PROMPTS))
    parser.add_argument("--lambda-smooth", type=float, default=None, help="akd distill's --lambda-smooth")
    parser.add_argument("--smooth-norm", choices=SMOOTH_NORMS, default=None, help="akd distill's --smooth-norm")
    parser.add_argument("--init-noise", type=float, default=None, help="akd distill's --init-noise (rad)")
    parser.add_argument("--param", choices=PARAMETRISATIONS, default=None, help="akd distill's --param")
    parser.add_argument("--lr-phase", type=float, default=None, help="akd distill's --lr-phase (--param phase)")
    parser.add_argument("--cycle-harmonics", type=int, default=None, help="akd distill's --cycle-harmonics")
    parser.add_argument("--lr-cycle", type=float, default=None, help="akd distill's --lr-cycle (--param phase)")
    parser.add_argument("--phase-search-grid", type=int, default=None, help="akd distill's --phase-search-grid")
    parser.add_argument("--phase-search-score", choices=PHASE_SEARCH_SCORES, default=None,
                        help="akd distill's --phase-search-score")
    parser.add_argument("--sds-weight", type=float, default=None, help="DistillConfig.sds_weight (default 1)")
    parser.add_argument("--lambda-skate", type=float, default=None,
                        help="weight of distill's foot-sliding term (default: DistillConfig's)")
    add_prior_arguments(parser)  # akd distill's prior options: --guidance-scale, --t-max, --sds-denoise-steps, ...
    parser.set_defaults(prior="cogvideox")
    args = parser.parse_args()
    if args.prior != "cogvideox" or args.video_model is not None:
        parser.error("the prior is the MODEL_DIR folder's (CogVideoX code path); give it as the positional argument")
    args.video_model = args.model
    robot = load_robot("quadruped")
    overrides = {"video_every": 0, **config_overrides(args)}
    if args.sds_weight is not None:
        overrides["sds_weight"] = args.sds_weight
    rows = []
    for gait in args.gaits:
        for seed in args.seeds:
            run = RunDir(args.out / f"{gait}_seed{seed}", create=True)
            tic = time.perf_counter()
            done = run.stage("distill").get("status") == "done"
            if not done:
                stage_distill(run, robot_spec="quadruped", prompt=PROMPTS[gait], prior="cogvideox",
                              video_model=args.model, iterations=args.iterations, init=args.init, seed=seed,
                              prior_options=prior_options_from_args(args), config_overrides=overrides)
            metrics = run.stage("distill").get("metrics", {})
            motion = Motion.load(run.file("reference.npz"), robot)
            swing = classify_gait(robot, motion).amplitude_m  # peak-to-peak foot heights: do the legs move at all?
            rows.append({"asked": gait, "seed": seed, "got": metrics.get("gait_class"),
                         "confidence": metrics.get("gait_confidence"),
                         "forward_m": round(forward_displacement(motion), 3),
                         "foot_swing_cm": round(100 * float(np.mean(list(swing.values()))), 2) if swing else 0.0,
                         "joint_std_rad": round(float(motion.joint_pos.std(axis=0).mean()), 4),
                         "skate_mps": round(foot_skate(robot, motion), 3),
                         "cop_inside": metrics.get("cop_inside_frac"), "flight": metrics.get("flight_frac"),
                         "leg_phases": metrics.get("leg_phases"),
                         "seconds": None if done else round(time.perf_counter() - tic)})
            print(json.dumps(rows[-1]), flush=True)
    print(f"\n{'asked':6s} {'seed':>4s} {'classified':10s} {'conf':>5s} {'forward m':>9s} {'foot swing cm':>13s} "
          f"{'joint std rad':>13s} {'skate m/s':>9s} {'CoP in':>6s} {'flight':>6s}")
    for r in rows:
        print(f"{r['asked']:6s} {r['seed']:4d} {str(r['got']):10s} {r['confidence'] or 0:5.2f} {r['forward_m']:9.3f} "
              f"{r['foot_swing_cm']:13.2f} {r['joint_std_rad']:13.4f} {r['skate_mps']:9.3f} {_frac(r['cop_inside'])} "
              f"{_frac(r['flight'])}")
    met = True
    for gait in args.gaits:
        mine = [r for r in rows if r["asked"] == gait]
        correct = sum(r["got"] == gait for r in mine)
        forward = sum(r["forward_m"] > 0 for r in mine)
        ok = correct >= (2 * len(mine) + 2) // 3 and forward == len(mine)
        met &= ok
        print(f"{gait}: {correct}/{len(mine)} classified {gait}, {forward}/{len(mine)} move forward -> "
              f"{'ok' if ok else 'NOT MET'}")
    print(f"criterion (>= 2 of 3 per prompt, root forward): {'MET' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
