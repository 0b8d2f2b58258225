"""Which gait does a clip show? The phase relation of the feet over time (issue 18 item 4).

``classify_gait(robot, motion)`` returns a :class:`GaitClass`: one of ``trot``, ``pace``, ``bound``, ``walk``,
``gallop``, ``pronk`` (quadrupeds), ``walk``, ``hop`` (bipeds), ``standing`` or ``unknown``, with a
confidence in [0, 1], the phase of every foot, the phase differences of the foot pairs and the per-foot signal
used. It is shared by the tests of distilled clips and by the ``akd distill`` / ``akd run`` summaries.

Method:

1. **Signal.** The height above the ground (z = 0) of each foot's contact point, from forward kinematics of the
   clip (the feet are found and labelled LF, RF, LH, RH / L, R by :func:`akd_core.model.legs.find_legs`; the clip's own
   ``foot_names`` / ``foot_offsets`` are used when it has them). Feet whose heights vary by less than
   ``STANDING_FRACTION`` of the leg length (peak to peak) over the whole clip: ``standing``.
2. **Common frequency.** For every frequency f on a grid from ``MIN_CYCLES`` cycles per clip up to
   ``MAX_NYQUIST`` x the Nyquist frequency, each foot's height is fitted by least squares with
   ``c0 + c1 t + a cos(2 pi f t) + b sin(2 pi f t)`` (a linear trend absorbs a drifting body); the f with the
   largest variance explained by the sinusoid, pooled over the feet, is the gait's frequency. Fitting at any f
   (not only FFT bins) keeps short clips of one or two cycles (9-49 frames at 8-25 fps) usable.
3. **Periodicity.** An F-test of the sinusoid against the trend alone, pooled over the feet, with a Bonferroni
   correction for the number of resolvable frequencies searched: ``periodicity = 1 - p``. Below
   ``MIN_PERIODICITY`` the gait is ``unknown`` ("no clear periodicity").
4. **Phases.** Foot k's phase is ``p_k = -atan2(b_k, a_k) / 2 pi`` cycles (the gait library's convention: a leg
   whose phase offset is larger by 0.25 lifts off a quarter cycle earlier), reported relative to the first foot.
5. **Templates.** Each gait is one or more phase templates (below). The distance of the measured phases to a
   template, after the best common shift, gives a Gaussian likelihood with a phase noise sigma estimated from the
   fit residuals (at least ``PHASE_SIGMA_FLOOR`` cycles); an "other" class has a uniform density over all phase
   relations. The gait is the one of highest posterior.
6. **Confidence** = that posterior x the periodicity x two factors that tell a gait from a motion that merely
   has some periodic content: the amplitude *balance* (smallest / largest foot amplitude, ramped over
   ``BALANCE_RANGE``: a foot that hardly moves makes every template doubtful) and the waveform *consistency*
   (:func:`fold_consistency`, ramped over ``CONSISTENCY_RANGE``: in a gait every foot repeats the same waveform,
   shifted by its phase). Measured (tests/test_gait_classify.py; docs/prior_training.md, "Gait classification"):
   gait-library clips of the built-in quadruped and a1 score >= 0.8 at 25 fps and at 8 fps over 2 s (walks
   stepping faster than about 1.5 Hz at 8 fps excepted: their swing lasts about one frame), random joint motions
   above 0.5 in 0-10 % of seeds (most kinds 0 %).

Quadruped templates (cycle phase per leg; every gait's mirror images and time reversals are included):
trot LF=RH=0, RF=LH=0.5 (diagonal pairs in phase, lateral pairs in antiphase); pace LF=LH=0, RF=RH=0.5; bound
LF=RF=0, LH=RH=0.5; pronk all 0; walk: four beats a quarter cycle apart, lateral sequence LH 0, LF 0.25, RH 0.5,
RF 0.75 (the gait library's) or diagonal sequence LH 0, RF 0.25, RH 0.5, LF 0.75; gallop: pairs 0.1 apart
(transverse LH 0, RH 0.1, LF 0.5, RF 0.6 as in the gait library, and rotary LH 0, RH 0.1, RF 0.5, LF 0.6).
Bipeds: legs in antiphase ``walk`` (alternating legs; a run is not told apart, its flight shows in the body, not in
the foot heights), in phase ``hop``. Other leg counts: ``unknown`` with the reason.

The per-foot contact signal reported (``contacts``) is relative: a foot is in contact where its height is within
``CONTACT_FRACTION`` of its own peak-to-peak range above its lowest point, or below ``CONTACT_HEIGHT_M``; so a
distilled clip whose feet hover or sink a little still gets a stance/swing pattern.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from akd_core.io.errors import AKDError
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.legs import Leg, find_legs, leg_length
from akd_core.model.robot import Robot
from akd_core.motion.clip import Motion
from akd_core.motion.metrics import CONTACT_HEIGHT_M

GAITS = ("trot", "pace", "bound", "walk", "gallop", "pronk", "hop", "standing", "unknown")
STANDING_FRACTION = 0.03  # peak-to-peak foot height below this fraction of the leg length: standing
MIN_FRAMES = 7  # fewer frames cannot fit trend + sinusoid with any residual left
MIN_CYCLES = 0.8  # the slowest frequency searched: this many cycles over the clip
MAX_NYQUIST = 0.9  # the fastest: this fraction of the Nyquist frequency (fps / 2)
MAX_FREQUENCY_HZ = 8.0  # no legged gait steps faster
PHASE_SIGMA_FLOOR = 0.035  # cycles: the least phase uncertainty assumed (harmonics, sampling at low frame rates)
OTHER_DENSITY = 1.0  # prior weight x density of "some other phase relation" (uniform over the phase torus)
MIN_PERIODICITY = 0.5  # below: "unknown" (no clear periodicity)
BALANCE_RANGE = (0.25, 0.55)  # smallest / largest foot amplitude: factor 0 at or below the first, 1 from the second
CONSISTENCY_RANGE = (0.35, 0.7)  # variance explained by one shared waveform: factor 0 .. 1 over this range
MAX_HARMONICS = 4  # of the shared waveform (each below the Nyquist frequency)
CONTACT_FRACTION = 0.2  # relative contact signal: within this fraction of a foot's range above its lowest point

# cycle phase per leg label (the gait library's, akd_core.motion.gait.PATTERNS); :func:`with_variants` adds each one's
# mirror image (left <-> right) and time reversal (a walk's diagonal sequence, a gallop led by the other side)
_BASE_QUADRUPED: dict[str, list[dict[str, float]]] = {
    "trot": [{"LF": 0.0, "RH": 0.0, "RF": 0.5, "LH": 0.5}],
    "pace": [{"LF": 0.0, "LH": 0.0, "RF": 0.5, "RH": 0.5}],
    "bound": [{"LF": 0.0, "RF": 0.0, "LH": 0.5, "RH": 0.5}],
    "pronk": [{"LF": 0.0, "RF": 0.0, "LH": 0.0, "RH": 0.0}],
    "walk": [{"LH": 0.0, "LF": 0.25, "RH": 0.5, "RF": 0.75}],  # lateral sequence
    "gallop": [{"LH": 0.0, "RH": 0.1, "LF": 0.5, "RF": 0.6},  # transverse
               {"LH": 0.0, "RH": 0.1, "RF": 0.5, "LF": 0.6}],  # rotary
}
_BASE_BIPED: dict[str, list[dict[str, float]]] = {
    "walk": [{"L": 0.0, "R": 0.5}],
    "hop": [{"L": 0.0, "R": 0.0}],
}


def with_variants(templates: dict[str, list[dict[str, float]]]) -> dict[str, list[dict[str, float]]]:
    """Each template plus its mirror image (labels L <-> R) and time reversal (phases negated), duplicates
    (equal up to a common shift) removed."""
    def mirror(t: dict[str, float]) -> dict[str, float]:
        swap = {"L": "R", "R": "L"}
        return {swap.get(k[0], k[0]) + k[1:]: v for k, v in t.items()}

    out: dict[str, list[dict[str, float]]] = {}
    for gait, bases in templates.items():
        kept: list[dict[str, float]] = []
        for base in bases:
            for cand in (base, mirror(base), {k: -v % 1.0 for k, v in base.items()},
                         {k: -v % 1.0 for k, v in mirror(base).items()}):
                labels = sorted(cand)
                vec = np.array([cand[k] for k in labels])
                if all(template_distance2(vec, np.array([t[k] for k in labels])) > 1e-9 for t in kept):
                    kept.append(cand)
        out[gait] = kept
    return out


# the phase differences reported: name -> (leg, other leg); value = phase(other) - phase(leg), in (-0.5, 0.5]
QUADRUPED_PAIRS = {"front": ("LF", "RF"), "hind": ("LH", "RH"), "left": ("LF", "LH"), "right": ("RF", "RH"),
                   "diagonal_lf_rh": ("LF", "RH"), "diagonal_rf_lh": ("RF", "LH")}
BIPED_PAIRS = {"left_right": ("L", "R")}


@dataclass
class GaitClass:
    """The gait a clip shows.

    gait: one of :data:`GAITS`; confidence in [0, 1]; reason: how it was decided (or why it is unknown);
    frequency_hz: the common stepping frequency (None when not estimated); periodicity, balance (smallest / largest
    foot amplitude) and consistency (:func:`fold_consistency`) in [0, 1];
    phases: {leg label: cycle phase in [0, 1) relative to the first leg}; pair_phase: {pair: phase difference in
    cycles, (-0.5, 0.5]} (see QUADRUPED_PAIRS / BIPED_PAIRS); scores: {gait: posterior probability};
    amplitude_m: {leg label: peak-to-peak foot height}; labels / foot_names: the legs, in the signal's column
    order; signal: (F, K) foot contact-point heights above z = 0 (m); contacts: (F, K) relative contact flags
    (module docstring); fps: the clip's frame rate.
    """

    gait: str
    confidence: float
    reason: str = ""
    frequency_hz: float | None = None
    periodicity: float = 0.0
    balance: float = 0.0
    consistency: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    pair_phase: dict[str, float] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    amplitude_m: dict[str, float] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    foot_names: list[str] = field(default_factory=list)
    signal: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    contacts: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    fps: float = 0.0

    def summary(self) -> str:
        """One line, e.g. ``trot (confidence 0.93, 1.17 Hz)``."""
        detail = f"confidence {self.confidence:.2f}"
        if self.frequency_hz is not None and self.gait not in ("standing", "unknown"):
            detail += f", {self.frequency_hz:.2f} Hz"
        if self.gait == "unknown" and self.reason:
            detail += f"; {self.reason}"
        return f"{self.gait} ({detail})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures (no per-frame arrays)."""
        return {"gait": self.gait, "confidence": round(self.confidence, 4), "reason": self.reason,
                "frequency_hz": None if self.frequency_hz is None else round(self.frequency_hz, 4),
                "periodicity": round(self.periodicity, 4), "balance": round(self.balance, 4),
                "consistency": round(self.consistency, 4),
                "phases": {k: round(v, 4) for k, v in self.phases.items()},
                "pair_phase": {k: round(v, 4) for k, v in self.pair_phase.items()},
                "scores": {k: round(v, 4) for k, v in self.scores.items()},
                "amplitude_m": {k: round(v, 5) for k, v in self.amplitude_m.items()}}


# ----------------------------------------------------------------------------- the signal
def clip_legs(robot: Robot, motion: Motion, legs: Sequence[Leg] | None = None) -> list[Leg]:
    """The labelled legs of ``motion``: ``legs`` if given, else those of its ``foot_names``, else detected."""
    if legs is not None:
        return list(legs)
    return find_legs(robot, feet=motion.foot_names or None)


def foot_heights(robot: Robot, motion: Motion, legs: Sequence[Leg]) -> np.ndarray:
    """(F, K) heights above z = 0 of the legs' contact points (the clip's foot_offsets where it names the foot)."""
    offsets = []
    for leg in legs:
        if leg.foot_link in motion.foot_names:
            offsets.append(motion.foot_offsets[motion.foot_names.index(leg.foot_link)])
        else:
            offsets.append(leg.foot_offset)
    fk = ForwardKinematics(robot).double()
    idx = torch.as_tensor([robot.link_index(leg.foot_link) for leg in legs])
    with torch.no_grad():
        pts = fk.link_points(*(torch.as_tensor(np.ascontiguousarray(a, dtype=np.float64))
                               for a in (motion.root_pos, motion.root_quat, motion.joint_pos)), idx,
                             torch.as_tensor(np.asarray(offsets, dtype=np.float64)))
    return pts[..., 2].numpy()


def relative_contacts(heights: np.ndarray) -> np.ndarray:
    """(F, K) contact flags from (F, K) heights: near each foot's own lowest point (module docstring)."""
    low = heights.min(axis=0)
    span = np.ptp(heights, axis=0)
    return (heights < np.maximum(low + CONTACT_FRACTION * span, CONTACT_HEIGHT_M)) if heights.size else \
        np.zeros(heights.shape, dtype=bool)


# ----------------------------------------------------------------------------- frequency and phase
@dataclass
class SinusoidFit:
    """The common-frequency fit of (F, K) signals: frequency, per-signal amplitude and phase, and statistics."""

    frequency_hz: float
    amplitude: np.ndarray  # (K,) of the fundamental (half the peak-to-peak of a pure sinusoid)
    phase: np.ndarray  # (K,) cycles in [0, 1), lead convention (module docstring)
    explained: float  # pooled fraction of the detrended variance explained by the sinusoid
    periodicity: float  # 1 - Bonferroni-corrected p-value of the F-test
    phase_sigma: np.ndarray  # (K,) cycles: phase standard error from the residuals


def fit_common_sinusoid(signal: np.ndarray, fps: float) -> SinusoidFit:
    """Fit trend + one sinusoid of a frequency common to all columns of ``signal`` (F, K) sampled at ``fps``."""
    from scipy.stats import f as f_dist

    frames, num = signal.shape
    t = np.arange(frames) / fps
    duration = t[-1]
    f_lo = MIN_CYCLES / duration
    f_hi = min(MAX_NYQUIST * fps / 2.0, MAX_FREQUENCY_HZ)
    if f_hi <= f_lo:
        f_hi = f_lo
    resolvable = max((f_hi - f_lo) * duration, 1.0)  # independent frequencies searched (Bonferroni)
    grid = np.linspace(f_lo, f_hi, max(int(resolvable * 16), 32))
    tc = t - t.mean()
    trend = np.stack([np.ones_like(t), tc], -1)
    coef, *_ = np.linalg.lstsq(trend, signal, rcond=None)
    detrended = signal - trend @ coef
    rss0 = (detrended ** 2).sum(axis=0)  # (K,)
    best = None
    for freq in grid:
        w = 2 * np.pi * freq * t
        design = np.concatenate([trend, np.stack([np.cos(w), np.sin(w)], -1)], -1)
        coef, *_ = np.linalg.lstsq(design, signal, rcond=None)
        rss = ((signal - design @ coef) ** 2).sum(axis=0)
        gain = float((rss0 - rss).sum())
        if best is None or gain > best[0]:
            best = (gain, freq, coef, rss)
    gain, freq, coef, rss = best
    total = float(rss0.sum())
    explained = gain / total if total > 0 else 0.0
    dof_resid = num * max(frames - 4, 1)
    rss_sum = float(rss.sum())
    if total <= 0:
        periodicity = 0.0
    elif rss_sum <= 1e-12 * total:
        periodicity = 1.0
    else:
        stat = (gain / (2 * num)) / (rss_sum / dof_resid)
        periodicity = float(np.clip(1.0 - resolvable * f_dist.sf(stat, 2 * num, dof_resid), 0.0, 1.0))
    a, b = coef[2], coef[3]
    amplitude = np.hypot(a, b)
    phase = (-np.arctan2(b, a) / (2 * np.pi)) % 1.0
    noise = np.sqrt(rss / max(frames - 4, 1))
    phase_sigma = noise / (np.maximum(amplitude, 1e-12) * math.sqrt(frames / 2.0)) / (2 * np.pi)
    return SinusoidFit(float(freq), amplitude, phase, float(explained), periodicity, np.minimum(phase_sigma, 0.5))


def fold_consistency(signal: np.ndarray, fps: float, frequency_hz: float, phase: np.ndarray) -> float:
    """How well one periodic waveform, shifted by each foot's phase, explains every foot (fraction in [0, 1]).

    In a gait every foot repeats the same lift-and-step waveform, only shifted in time. Each column of ``signal``
    (F, K) is detrended and scaled to unit variance, re-timed to its gait phase ``u = f t + phase_k`` and all are
    fitted together by one Fourier series in u (harmonics below the Nyquist frequency, at most MAX_HARMONICS).
    Random motions, whose feet move unlike one another, score about as little as their fundamental alone.
    """
    frames = signal.shape[0]
    t = np.arange(frames) / fps
    trend = np.stack([np.ones_like(t), t - t.mean()], -1)
    coef, *_ = np.linalg.lstsq(trend, signal, rcond=None)
    y = signal - trend @ coef
    y = y / np.maximum(y.std(axis=0), 1e-12)
    harmonics = int(min(MAX_HARMONICS, max(1, math.floor(0.95 * fps / 2 / frequency_hz))))
    u = (frequency_hz * t[:, None] + phase[None, :]).ravel()
    cols = [np.ones_like(u)]
    for h in range(1, harmonics + 1):
        cols += [np.cos(2 * np.pi * h * u), np.sin(2 * np.pi * h * u)]
    design = np.stack(cols, -1)
    flat = y.ravel()
    fit, *_ = np.linalg.lstsq(design, flat, rcond=None)
    total = float(((flat - flat.mean()) ** 2).sum())
    return float(1.0 - ((flat - design @ fit) ** 2).sum() / total) if total > 0 else 0.0


def _ramp(x: float, lo_hi: tuple[float, float]) -> float:
    lo, hi = lo_hi
    return float(np.clip((x - lo) / (hi - lo), 0.0, 1.0))


def wrap_cycles(x: np.ndarray | float) -> np.ndarray:
    """Phase differences in cycles wrapped to (-0.5, 0.5]."""
    return 0.5 - (0.5 - np.asarray(x, dtype=np.float64)) % 1.0


def template_distance2(phase: np.ndarray, template: np.ndarray) -> float:
    """Sum over legs of the squared wrapped residual (cycles^2) after the best common shift."""
    delta = phase - template
    shift = np.angle(np.exp(2j * np.pi * delta).mean()) / (2 * np.pi)
    return float((wrap_cycles(delta - shift) ** 2).sum())


def template_posterior(phase: np.ndarray, labels: Sequence[str], templates: dict[str, list[dict[str, float]]],
                       sigma: float) -> dict[str, float]:
    """Posterior over the gaits of ``templates`` and "other" given the legs' phases (cycles) with noise ``sigma``.

    Each gait has prior weight 1 shared by its templates; a template's likelihood is an isotropic Gaussian over
    the K - 1 relative phases; "other" has weight OTHER_DENSITY x the uniform density 1.
    """
    dims = len(labels) - 1
    log_norm = -0.5 * dims * math.log(2 * math.pi * sigma ** 2)
    logs: dict[str, float] = {}
    for gait, variants in templates.items():
        per = [log_norm - template_distance2(phase, np.array([v[lab] for lab in labels])) / (2 * sigma ** 2)
               for v in variants]
        logs[gait] = float(np.logaddexp.reduce(per) - math.log(len(variants)))
    logs["other"] = math.log(OTHER_DENSITY)
    top = max(logs.values())
    weights = {k: math.exp(v - top) for k, v in logs.items()}
    norm = sum(weights.values())
    return {k: w / norm for k, w in weights.items()}


QUADRUPED_TEMPLATES = with_variants(_BASE_QUADRUPED)
BIPED_TEMPLATES = with_variants(_BASE_BIPED)


# ----------------------------------------------------------------------------- the classifier
def classify_gait(robot: Robot, motion: Motion, legs: Sequence[Leg] | None = None) -> GaitClass:
    """The gait ``motion`` of ``robot`` shows (module docstring). Never raises for a clip it cannot classify:
    the result is then ``unknown`` with the reason."""
    try:
        legs = clip_legs(robot, motion, legs)
    except AKDError as exc:
        return GaitClass("unknown", 0.0, reason=f"no legs found: {str(exc).splitlines()[0]}", fps=motion.fps)
    labels = [leg.label for leg in legs]
    names = [leg.foot_link for leg in legs]
    heights = foot_heights(robot, motion, legs)
    result = GaitClass("unknown", 0.0, labels=labels, foot_names=names, signal=heights,
                       contacts=relative_contacts(heights), fps=motion.fps,
                       amplitude_m={lab: float(a) for lab, a in zip(labels, np.ptp(heights, axis=0))}
                       if heights.size else {})
    if len(legs) == 4 and set(labels) == {"LF", "RF", "LH", "RH"}:
        templates, pairs = QUADRUPED_TEMPLATES, QUADRUPED_PAIRS
    elif len(legs) == 2 and set(labels) == {"L", "R"}:
        templates, pairs = BIPED_TEMPLATES, BIPED_PAIRS
    else:
        result.reason = (f"gait templates exist for quadrupeds (legs LF, RF, LH, RH) and bipeds (L, R); robot "
                         f"'{robot.name}' has legs {labels}")
        return result
    frames = motion.num_frames
    if frames < MIN_FRAMES:
        result.reason = f"the clip has {frames} frames; at least {MIN_FRAMES} are needed"
        return result
    length = max(leg_length(robot, legs), 1e-3)
    still = STANDING_FRACTION * length
    top = float(np.ptp(heights, axis=0).max())
    if top < still:
        result.gait, result.confidence = "standing", float(1.0 - top / still)
        result.reason = (f"every foot's height varies by less than {still * 1e3:.0f} mm "
                         f"({STANDING_FRACTION:g} leg lengths); largest {top * 1e3:.1f} mm")
        return result
    fit = fit_common_sinusoid(heights, motion.fps)
    rel = (fit.phase - fit.phase[0]) % 1.0
    result.frequency_hz, result.periodicity = fit.frequency_hz, fit.periodicity
    result.phases = {lab: float(p) for lab, p in zip(labels, rel)}
    result.pair_phase = {name: float(wrap_cycles(result.phases[b] - result.phases[a]))
                         for name, (a, b) in pairs.items()}
    sigma = float(math.sqrt(PHASE_SIGMA_FLOOR ** 2 + float(np.mean(fit.phase_sigma ** 2))))
    posterior = template_posterior(fit.phase, labels, templates, sigma)
    result.scores = posterior
    balance = float(fit.amplitude.min() / max(fit.amplitude.max(), 1e-12))
    consistency = fold_consistency(heights, motion.fps, fit.frequency_hz, fit.phase)
    result.balance, result.consistency = balance, consistency
    quality = fit.periodicity * _ramp(balance, BALANCE_RANGE) * _ramp(consistency, CONSISTENCY_RANGE)
    best = max((g for g in posterior if g != "other"), key=posterior.get)
    if fit.periodicity < MIN_PERIODICITY:
        result.confidence = float(quality * posterior[best])
        result.reason = (f"no clear periodicity (periodicity {fit.periodicity:.2f} < {MIN_PERIODICITY}); the "
                         f"nearest template is {best}")
        return result
    template_post = posterior[best]
    result.gait = best
    result.confidence = float(template_post * quality)
    result.reason = (f"phases nearest the {best} template (posterior {template_post:.2f}, periodicity "
                     f"{fit.periodicity:.2f}, amplitude balance {balance:.2f}, waveform consistency "
                     f"{consistency:.2f}, phase noise {sigma:.3f} cycles)")
    return result


__all__ = ["GAITS", "GaitClass", "QUADRUPED_TEMPLATES", "BIPED_TEMPLATES", "classify_gait", "fit_common_sinusoid",
           "foot_heights", "relative_contacts", "template_posterior", "wrap_cycles"]
