"""Which prompt does a video prior find most likely for distill's own render of each gait?

SDS follows the prior's conditional prediction on the renders `akd distill` makes, so this is the check that
matters for prompt -> gait: a gait-library clip of the built-in quadruped (2 s, resampled to the prior's 8 fps and
frame count) is rendered exactly as distill renders it (follow camera, azimuth -70, 2000 Gaussians), encoded by
the folder's VAE, noised at t = 100..800, and the v-prediction error is measured with each gait's prompt. The
lowest error names the prompt the prior prefers; a prior that has learnt the gaits puts each clip's own prompt
first. (`bench/bench_prior_captions.py` does the same on held-out training clips.)

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_prior_renders.py [MODEL_DIR ...] [--draws 3]
        [--checkpoint MODEL_DIR/checkpoints/transformer.pt] [--min-stride-frames 4]

MODEL_DIR defaults to the shipped prior. About 1.5 min per folder on one CPU core. ``--checkpoint`` scores a
training checkpoint of `akd prior train --stage transformer` (its transformer weights in the folder's prior; the
same VAE and text encoder) without writing a folder first. ``--min-stride-frames 4`` slows each clip as
`akd prior data` does by default (2 Hz at 8 fps); use it for priors trained on such data.

Then, per timestep, the contrast of each pair of gaits a, b:
(e_a(prompt b) - e_a(prompt a)) + (e_b(prompt a) - e_b(prompt b)) x 1000, with e_clip(prompt) the v-MSE: how much
better each clip's own prompt fits it than the other's, summed over the two clips. Zero means the prior cannot tell
the two gaits apart at that noise level (whatever it prefers, it prefers for both clips).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.model.load import load_robot  # noqa: E402
from akd_core.motion.gait import generate_gait, generate_gait_result  # noqa: E402
from akd_core.motion.prompt import spec_from_prompt  # noqa: E402
from akd_core.sds.clip_render import fit_clip  # noqa: E402
from akd_core.sds.distill import VIDEO_FPS, DistillConfig, render_motion  # noqa: E402
from akd_core.sds.prior.cogvideox import CogVideoXPrior  # noqa: E402
from akd_core.sds.prior.default import resolve_video_model  # noqa: E402

PROMPTS = {"trot": "a dog trotting forward", "pace": "a dog pacing", "bound": "a dog bounding",
           "gallop": "a dog galloping", "walk": "a dog walking", "standing": "a dog standing still"}
CLIPS = ("trot", "pace", "bound", "walk")
TIMESTEPS = (100, 200, 300, 400, 500, 600, 700, 800)
PAIRS = (("trot", "pace"), ("trot", "bound"), ("pace", "bound"))


@torch.no_grad()
def prompt_errors(prior: CogVideoXPrior, video: torch.Tensor, embeds: dict[str, torch.Tensor],
                  draws: int) -> dict[str, dict[int, float]]:
    """Mean v-MSE of each prompt at each of TIMESTEPS over ``draws`` (same posterior sample and noise for every
    prompt): {prompt key: {t: v-MSE}}."""
    errors: dict[str, dict[int, list[float]]] = {k: {t: [] for t in TIMESTEPS} for k in embeds}
    for draw in range(draws):
        z0 = prior.encode(video, generator=torch.Generator().manual_seed(draw))
        generator = torch.Generator().manual_seed(100 + draw)
        for t in TIMESTEPS:
            noise = torch.randn(z0.shape, generator=generator)
            for key, emb in embeds.items():
                errors[key][t].append(prior.v_mse(z0, noise, t, emb))
    return {k: {t: float(np.mean(v)) for t, v in per_t.items()} for k, per_t in errors.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", type=Path, nargs="*")
    parser.add_argument("--draws", type=int, default=3, help="posterior / noise draws per timestep")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="score this `akd prior train` transformer checkpoint in the (single) folder's prior")
    parser.add_argument("--min-stride-frames", type=float, default=0.0, metavar="N",
                        help="slow each clip to at least N frames per stride, as the prior's data was rendered "
                             "(`akd prior data --min-stride-frames`; default 0: the gait library's cadence)")
    args = parser.parse_args()
    if args.checkpoint is not None and len(args.models) > 1:
        parser.error("--checkpoint goes with one MODEL_DIR (whose VAE and text encoder it was trained with)")
    robot = load_robot("quadruped")
    for folder in args.models or [resolve_video_model(None)]:
        prior = CogVideoXPrior.from_pretrained(folder, PROMPTS["trot"], dtype=torch.float32, device="cpu",
                                               keep_prompt_encoder=True)
        if args.checkpoint is not None:
            state = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
            prior.transformer.load_state_dict(state["model"])
            folder = f"{folder} with the transformer of {args.checkpoint} (step {state['step']})"
        embeds = {}
        for key, prompt in PROMPTS.items():
            prior.set_prompt(prompt)
            embeds[key] = prior.cond_embeds.clone()
        print(f"{folder}: v-MSE of distill's render of each gait-library clip, per prompt (* the lowest)")
        print(f"{'clip':6s} " + " ".join(f"{k:>8s} " for k in PROMPTS) + " best")
        correct = 0
        per_t = {}
        for gait in CLIPS:
            spec = spec_from_prompt(PROMPTS[gait], robot)[0]
            if args.min_stride_frames:  # as `akd prior data --min-stride-frames` slows the gaits it renders
                natural = generate_gait_result(robot, spec, duration=2.0, fps=50.0).spec.frequency
                spec = spec.slowed_to(VIDEO_FPS / args.min_stride_frames, natural)
            motion = generate_gait(robot, spec, duration=2.0, fps=50.0)
            clip = fit_clip(motion.resample(8.0), prior.num_frames, 8.0)
            video, _ = render_motion(robot, clip, DistillConfig(n_gaussians=2000, camera="follow", camera_margin=1.4,
                                                                 blur_px=0.0), prior.width, prior.height)
            per_t[gait] = prompt_errors(prior, video, embeds, args.draws)
            errors = {k: float(np.mean(list(v.values()))) for k, v in per_t[gait].items()}
            best = min(errors, key=errors.get)
            correct += best == gait
            print(f"{gait:6s} " + " ".join(f"{errors[k]:8.4f}{'*' if k == best else ' '}" for k in PROMPTS)
                  + f"  {best}")
        print(f"own prompt best for {correct}/{len(CLIPS)} clips")
        print("contrast x 1000 per timestep (> 0: each clip fits its own prompt better than the other's)")
        print(f"{'pair':11s} " + " ".join(f"{t:>6d}" for t in TIMESTEPS) + "    mean")
        for a, b in PAIRS:
            row = [(per_t[a][b][t] - per_t[a][a][t] + per_t[b][a][t] - per_t[b][b][t]) * 1e3 for t in TIMESTEPS]
            print(f"{a + '/' + b:11s} " + " ".join(f"{x:6.2f}" for x in row) + f"  {np.mean(row):6.2f}")


if __name__ == "__main__":
    main()
