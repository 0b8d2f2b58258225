"""Which footfall pattern does a prior prefer for each prompt? The landscape `akd distill --param phase` searches.

For each prompt, the built-in quadruped's gait-library leg cycle (akd_core.sds.phase, the prompt's speed, cadence
capped as in distill) is rendered with the phases of each named pattern (trot, pace, bound, walk, pronk, gallop),
each at ``--shifts`` global phase shifts (a shift of all legs is the same gait but another clip), and scored as the
phase search scores (akd_core.sds.distill.phase_scorer with the model folder's akd.json settings, ``--score``: the
shipped prior's default is "contrast", the prompt's denoising error over its mean under the gait captions; fixed
timesteps and noises, the same for every candidate). Prints, per prompt, each
pattern's mean score relative to the best (0 = the prior's pick) and whether the prompt's own pattern wins; a prior
whose pick is the prompt's pattern for every prompt makes the phase search land on it.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_phase_scores.py [MODEL_DIR] [--shifts 4] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.model.legs import find_legs  # noqa: E402
from akd_core.model.load import load_robot  # noqa: E402
from akd_core.motion.gait import phase_offsets  # noqa: E402
from akd_core.sds.clip_render import ClipRenderer  # noqa: E402
from akd_core.sds.distill import (  # noqa: E402
    PHASE_SEARCH_SCORES,
    DistillConfig,
    _view,
    contrast_prompts,
    model_defaults,
    phase_scorer,
    phase_start_clip,
)
from akd_core.sds.phase import PhaseMotionParameters, pattern_phases  # noqa: E402
from akd_core.sds.prior import make_prior  # noqa: E402
from akd_core.sds.prior.default import prior_prompt, resolve_video_model  # noqa: E402

PROMPTS = {"trot": "a dog trotting forward", "pace": "a dog pacing forward", "bound": "a dog bounding forward",
           "walk": "a dog walking forward"}
PATTERNS = ("trot", "pace", "bound", "walk", "pronk", "gallop")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path, nargs="?", default=None)
    parser.add_argument("--prompts", nargs="+", default=list(PROMPTS), choices=list(PROMPTS))
    parser.add_argument("--shifts", type=int, default=4, help="global phase shifts per pattern (averaged)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--guidance-scale", type=float, default=None)
    parser.add_argument("--score", choices=PHASE_SEARCH_SCORES, default=None,
                        help="what the phase search minimises (akd distill --phase-search-score; default: the model "
                             "folder's akd.json, else classifier)")
    args = parser.parse_args()
    model = resolve_video_model(args.model)
    robot = load_robot("quadruped")
    legs = find_legs(robot)
    settings = {**model_defaults(model), "param": "phase", "seed": args.seed}  # what akd distill uses
    if args.score is not None:
        settings["phase_search_score"] = args.score
    config = DistillConfig(**settings)
    wins = 0
    for key in args.prompts:
        prompt = PROMPTS[key]
        tic = time.perf_counter()
        kwargs = {} if args.guidance_scale is None else {"guidance_scale": args.guidance_scale}
        text = prior_prompt(prompt, model)
        if config.phase_search_score == "contrast":
            kwargs["contrast_prompts"] = contrast_prompts(text, config.phase_search_contrast)
        prior = make_prior("cogvideox", text, video_model=model, seed=args.seed, **kwargs)
        clip, (cycle, phases) = phase_start_clip(robot, prompt, "constant", prior.num_frames, config, args.seed)
        renderer = ClipRenderer(robot, prior.width, prior.height, config.n_gaussians, config.seed, config.backend,
                                _view(config))
        params = PhaseMotionParameters(clip, robot, cycle, phases)
        score = phase_scorer(params, renderer, prior, config)
        table = {}
        for pattern in PATTERNS:
            base = pattern_phases(cycle, phase_offsets(pattern, legs))
            table[pattern] = float(np.mean(score([base + s / args.shifts for s in range(args.shifts)])))
        best = min(table, key=table.get)
        wins += best == key
        rel = "  ".join(f"{p} {100 * (v / table[best] - 1):+6.2f}%" for p, v in table.items())
        print(f"{prompt!r:28s} ({cycle.frequency:.2f} Hz, {cycle.speed:.2f} m/s): pick {best:6s} "
              f"{'ok' if best == key else '--'}   {rel}   [{time.perf_counter() - tic:.0f} s]", flush=True)
    print(f"own pattern first for {wins}/{len(args.prompts)} prompts")


if __name__ == "__main__":
    main()
