"""Does a trained prior read the gait in its prompt? A diffusion-classifier check on held-out clips.

For held-out clips of each gait (the last ``val_fraction`` of an `akd prior data` set, as training holds them
out), the v-prediction error of the model folder's transformer is measured with one generic caption per gait
("a dog trotting", "a dog pacing", ...) and with the empty prompt, at a few timesteps with fixed noise. The
caption with the lowest error is the model's guess of the clip's gait. Prints the mean error per (clip gait,
caption) and the confusion matrix with its accuracy (chance: 1 / number of gaits). A model that ignores the
prompt scores chance; one that only tells standing from moving puts every moving gait on one caption.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_prior_captions.py MODEL_DIR DATA_DIR [--per-gait 16]
        [--timesteps 400 600 800]

MODEL_DIR: a complete diffusers folder (`akd prior train` output or models/akd-gaits-tiny); DATA_DIR: the
`akd prior data` set (only its held-out clips are used).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.sds.prior.cogvideox import CogVideoXPrior  # noqa: E402
from akd_core.sds.prior.training import load_clips, split_clips  # noqa: E402

CAPTIONS = {"trot": "a dog trotting", "pace": "a dog pacing", "bound": "a dog bounding",
            "gallop": "a dog galloping", "walk": "a dog walking", "standing": "a dog standing still"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("--per-gait", type=int, default=16, help="held-out clips per gait")
    parser.add_argument("--timesteps", type=int, nargs="+", default=[400, 600, 800])
    parser.add_argument("--val-fraction", type=float, default=0.1)
    args = parser.parse_args()

    prior = CogVideoXPrior.from_pretrained(args.model, CAPTIONS["trot"], dtype=torch.float32, device="cpu",
                                          keep_prompt_encoder=True)
    frames, _prompts, _ = load_clips(args.data)
    index = json.loads((args.data / "index.json").read_text())["clips"]
    _, val_idx = split_clips(len(index), args.val_fraction)
    gaits = list(CAPTIONS)
    chosen = {g: [i for i in val_idx if index[i]["gait"] == g][:args.per_gait] for g in gaits}
    embeds = {}
    for gait, caption in CAPTIONS.items():
        prior.set_prompt(caption)
        embeds[gait] = prior.cond_embeds
    embeds["empty"] = prior.uncond_embeds
    generator = torch.Generator().manual_seed(0)
    errors = {g: {c: [] for c in embeds} for g in gaits}
    confusion = np.zeros((len(gaits), len(gaits)), dtype=int)
    with torch.no_grad():
        for gait in gaits:
            for i in chosen[gait]:
                z0 = prior.encode(frames[i].permute(0, 3, 1, 2).float() / 255.0)  # SDS's own encoder path
                total = {c: 0.0 for c in embeds}
                for t in args.timesteps:
                    noise = torch.randn(z0.shape, generator=generator)
                    for caption, e in embeds.items():
                        total[caption] += prior.v_mse(z0, noise, t, e) / len(args.timesteps)
                for caption, value in total.items():
                    errors[gait][caption].append(value)
                guess = min(gaits, key=lambda c: total[c])
                confusion[gaits.index(gait), gaits.index(guess)] += 1
    print(f"model {args.model}, held-out clips of {args.data}, timesteps {args.timesteps}")
    print("mean v-MSE per clip gait (rows) and caption (columns):")
    print(f"{'':10s}" + "".join(f"{c:>10s}" for c in [*gaits, "empty"]))
    for gait in gaits:
        if chosen[gait]:
            print(f"{gait:10s}" + "".join(f"{np.mean(errors[gait][c]):10.5f}" for c in [*gaits, "empty"])
                  + f"   ({len(chosen[gait])} clips)")
    print("confusion (rows: clip gait, columns: caption with the lowest error):")
    print(f"{'':10s}" + "".join(f"{c:>10s}" for c in gaits))
    for k, gait in enumerate(gaits):
        print(f"{gait:10s}" + "".join(f"{n:10d}" for n in confusion[k]))
    n = confusion.sum()
    print(f"accuracy {np.trace(confusion) / max(n, 1):.3f} over {n} clips (chance {1 / len(gaits):.3f})")


if __name__ == "__main__":
    main()
