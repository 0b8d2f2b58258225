"""Prompt -> gait through SDS with a trained prior (issue 18's second clause; issue 32 item 5).

For each prompt and seed, `akd distill` runs with the model folder's prior (CogVideoX code path, the folder's
VAE, transformer, tokenizer and text encoder) and, unless options are given, exactly the defaults a user gets: the
folder's akd.json (the shipped prior: ``--param phase``) and a neutral start (``--init constant``: for ``phase``,
the legs cycling at random phases, which hold no gait). The distilled reference.npz is then classified twice:

- by the run itself (``gait_class`` in its metrics: :func:`akd_core.motion.classify.classify_gait`, sinusoids
  fitted to the foot heights), and
- independently here (:func:`foot_phase_gait`): each foot's touchdown times (its contact point entering the lowest
  fifth of its height range) at the cadence of the feet's strongest common frequency give its phase; the
  phases relative to the left front foot are matched to the nearest pattern of the gait library by circular
  distance (trot, pace, bound, pronk, walk, gallop; "other" when every pattern is more than 0.15 cycles off).

A run counts as right when both name the asked gait. Its root displacement along the start heading is measured
too. Prints one row per run and, per prompt, how many seeds gave the asked gait; the criterion is >= 2 of 3 right
per prompt and a root that moves forward. Each row also shows how much the legs move: the mean peak-to-peak foot
height ("foot swing") and the mean over joints of each joint's standard deviation; and the run's wall time (the
bench runs one prompt at a time: give it the machine's load from `uptime` when quoting the times).

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_prompt_gait.py [MODEL_DIR] [--seeds 0 1 2]
        [--gaits trot pace bound] [--speeds plain quickly slowly] [--out runs/prompt_gait]
        [--iterations N] [--init constant|standing|gait] [--param frames|phase] ... (akd distill's options)

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
    INITS,
    PARAMETRISATIONS,
    PHASE_SEARCH_SCORES,
    SMOOTH_NORMS,
    clip_feet,
    stage_distill,
)

GAIT_WORDS = {"trot": "trotting", "pace": "pacing", "bound": "bounding"}
SPEEDS = {"plain": "", "quickly": " quickly", "slowly": " slowly"}
# relative phases (RF, LH, RH after LF) of the gait library's quadruped patterns and their mirror images
TEMPLATES = {
    "trot": [(0.5, 0.5, 0.0)], "pace": [(0.5, 0.0, 0.5)], "bound": [(0.0, 0.5, 0.5)], "pronk": [(0.0, 0.0, 0.0)],
    "walk": [(0.5, 0.75, 0.25), (0.5, 0.25, 0.75)],
    "gallop": [(0.1, 0.5, 0.6), (0.9, 0.5, 0.4), (0.1, 0.6, 0.5), (0.9, 0.4, 0.5)],
}


def prompt_for(gait: str, speed: str) -> str:
    """"a dog trotting forward", "a dog pacing forward quickly", ..."""
    return f"a dog {GAIT_WORDS[gait]} forward{SPEEDS[speed]}"


def foot_heights(robot, motion: Motion) -> tuple[list[str], np.ndarray]:
    """(labels, (F, 4) heights of the feet's contact points) by forward kinematics of the robot's detected legs."""
    import torch

    from akd_core.model.kinematics import ForwardKinematics
    from akd_core.model.legs import find_legs

    legs = find_legs(robot)
    fk = ForwardKinematics(robot)
    idx = torch.as_tensor([robot.link_index(leg.foot_link) for leg in legs])
    offsets = torch.as_tensor(np.array([leg.foot_offset for leg in legs]))
    with torch.no_grad():
        pts = fk.link_points(torch.as_tensor(motion.root_pos), torch.as_tensor(motion.root_quat),
                             torch.as_tensor(motion.joint_pos), idx, offsets)
    return [leg.label for leg in legs], pts[..., 2].numpy()


def foot_phase_gait(robot, motion: Motion) -> tuple[str, float, list[float]]:
    """An independent gait label (see the module docstring): (gait, cycle distance to its template, relative
    phases RF/LH/RH after LF in cycles)."""
    labels, z = foot_heights(robot, motion)
    order = [labels.index(k) for k in ("LF", "RF", "LH", "RH")]
    z = z[:, order]
    t = np.arange(z.shape[0]) / motion.fps
    centred = z - z.mean(0)
    spectrum = np.abs(np.fft.rfft(centred * np.hanning(len(t))[:, None], n=8 * len(t), axis=0)).sum(1)
    freqs = np.fft.rfftfreq(8 * len(t), 1.0 / motion.fps)
    valid = freqs > 1.5 / (t[-1] + 1e-9)  # at least 1.5 cycles in the clip
    if not valid.any() or np.ptp(z, axis=0).min() < 0.01:
        return "standing", 0.0, []
    f = float(freqs[valid][np.argmax(spectrum[valid])])
    phases = []
    for k in range(4):
        lo, hi = z[:, k].min(), z[:, k].max()
        contact = z[:, k] < lo + 0.2 * (hi - lo)
        onsets = t[1:][contact[1:] & ~contact[:-1]]
        if len(onsets) == 0:
            return "other", 1.0, []
        phases.append(float(np.angle(np.exp(2j * np.pi * f * onsets).mean()) / (2 * np.pi)))
    rel = np.remainder(np.array(phases[1:]) - phases[0], 1.0)
    best, dist = "other", 1.0
    for name, templates in TEMPLATES.items():
        for template in templates:
            d = np.remainder(rel - np.array(template) + 0.5, 1.0) - 0.5
            value = float(np.sqrt(np.mean(d * d)))
            if value < dist:
                best, dist = name, value
    return (best if dist <= 0.15 else "other"), dist, [round(float(x), 3) for x in rel]


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
    parser.add_argument("--iterations", type=int, default=None, help="default: the folder's akd.json, else 300")
    parser.add_argument("--init", choices=INITS, default=None, help="default: akd distill's (constant)")
    parser.add_argument("--gaits", nargs="+", default=list(GAIT_WORDS), choices=list(GAIT_WORDS))
    parser.add_argument("--speeds", nargs="+", default=list(SPEEDS), choices=list(SPEEDS),
                        help="plain: 'a dog trotting forward'; quickly / slowly: the speed word appended")
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
    cases = [(gait, speed) for gait in args.gaits for speed in args.speeds]
    for gait, speed in cases:
        for seed in args.seeds:
            name = f"{gait}_seed{seed}" if speed == "plain" else f"{gait}_{speed}_seed{seed}"
            run = RunDir(args.out / name, create=True)
            tic = time.perf_counter()
            done = run.stage("distill").get("status") == "done"
            if not done:
                stage_distill(run, robot_spec="quadruped", prompt=prompt_for(gait, speed), prior="cogvideox",
                              video_model=args.model, iterations=args.iterations, init=args.init, seed=seed,
                              prior_options=prior_options_from_args(args), config_overrides=overrides)
            stage = run.stage("distill")
            metrics = stage.get("metrics", {})
            motion = Motion.load(run.file("reference.npz"), robot)
            swing = classify_gait(robot, motion).amplitude_m  # peak-to-peak foot heights: do the legs move at all?
            independent, distance, rel = foot_phase_gait(robot, motion)
            rows.append({"asked": gait, "speed": speed, "seed": seed, "got": metrics.get("gait_class"),
                         "confidence": metrics.get("gait_confidence"), "independent": independent,
                         "template_dist": round(distance, 3), "rel_phases": rel,
                         "param": stage.get("config", {}).get("param"),
                         "prior_prompt": stage.get("config", {}).get("prior_prompt"),
                         "forward_m": round(forward_displacement(motion), 3),
                         "foot_swing_cm": round(100 * float(np.mean(list(swing.values()))), 2) if swing else 0.0,
                         "joint_std_rad": round(float(motion.joint_pos.std(axis=0).mean()), 4),
                         "skate_mps": round(foot_skate(robot, motion), 3),
                         "cop_inside": metrics.get("cop_inside_frac"), "flight": metrics.get("flight_frac"),
                         "leg_phases": metrics.get("leg_phases"),
                         "seconds": None if done else round(time.perf_counter() - tic),
                         "stage_seconds": round(stage.get("seconds", 0) or 0)})
            print(json.dumps(rows[-1]), flush=True)
    print(f"\n{'asked':6s} {'speed':7s} {'seed':>4s} {'run says':9s} {'conf':>5s} {'feet say':9s} {'off':>5s} "
          f"{'forward m':>9s} {'swing cm':>8s} {'joint std':>9s} {'skate m/s':>9s} {'CoP in':>6s} {'s':>5s}")
    for r in rows:
        print(f"{r['asked']:6s} {r['speed']:7s} {r['seed']:4d} {str(r['got']):9s} {r['confidence'] or 0:5.2f} "
              f"{r['independent']:9s} {r['template_dist']:5.2f} {r['forward_m']:9.3f} {r['foot_swing_cm']:8.2f} "
              f"{r['joint_std_rad']:9.4f} {r['skate_mps']:9.3f} {_frac(r['cop_inside'])} {r['stage_seconds']:5d}")
    met = True
    for gait, speed in cases:
        mine = [r for r in rows if r["asked"] == gait and r["speed"] == speed]
        right = sum(r["got"] == gait and r["independent"] == gait for r in mine)
        agree = sum(r["got"] == r["independent"] for r in mine)
        forward = sum(r["forward_m"] > 0 for r in mine)
        ok = right >= (2 * len(mine) + 2) // 3 and forward == len(mine)
        met &= ok
        print(f"{prompt_for(gait, speed)!r:34s}: {right}/{len(mine)} {gait} (both classifications), the two agree on "
              f"{agree}/{len(mine)}, {forward}/{len(mine)} move forward -> {'ok' if ok else 'NOT MET'}")
    seconds = [r["stage_seconds"] for r in rows if r["seconds"] is not None]
    if seconds:
        print(f"distill wall time per run: median {np.median(seconds):.0f} s, max {max(seconds)} s "
              "(runs of this invocation)")
    print(f"criterion (>= 2 of 3 per prompt, root forward): {'MET' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
