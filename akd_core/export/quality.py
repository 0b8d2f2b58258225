"""Quality gates: which runs are usable demonstrations, and why the others are not (docs/batch.md).

A dataset written by `akd batch` or `akd export` holds only the runs that pass every gate; each excluded run is
listed with its reasons. The gates read what the stages already record in ``RUN/manifest.json``
(``stages.track.metrics``: ``fell``, ``max_tilt_deg``, ``link_pos_err_m``, ``stance_slip_mps`` (else
``foot_skate_mps``), ``penetration_m``, ``contact_schedule_match``; ``stages.crosscheck.metrics.passed``) plus the one
check that needs the arrays: the exported joint positions and PD targets against the URDF limits, done by the
exporter's own check (:func:`akd_core.export.common.limit_violation`), so a run the gate lets through is one the
exporter accepts.

Gates (the sweep YAML's ``quality:`` block, and the same as `akd export` options; ``null`` = no gate)::

    allow_falls: false            # a run whose tracked robot fell is excluded
    allow_failed_tracking: false  # a run whose tracked clip failed its verdict (akd_core.physics.verdict) is excluded
    allow_limit_violations: false # joint positions / PD targets outside the URDF limits exclude the run
    require_crosscheck: true      # the other engine's replay must have run and passed
    max_link_err_m: 0.3           # mean link position error vs the reference, m
    max_stance_slip_mps: null     # stance-foot slip, m/s
    max_penetration_m: null       # deepest ground penetration, m
    min_contact_match: null       # fraction of (frame, foot) pairs whose contact state matches the reference

A gate whose metric the manifest does not hold cannot be checked, and excludes the run (the reason says which
stage to re-run). ``include_rejected`` (``--include-rejected``) puts every run that can be exported into the dataset
whatever the gates say, and the summary marks those runs. A run whose exported clip is the kinematic reference
(motion-file formats of an untracked run, or ``--source reference``) is judged by the limit gate alone: the other
gates judge a tracked demonstration.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from akd_core.export.common import DATASET_FORMATS, limit_violation, load_episode
from akd_core.io.errors import AKDError, ConfigError
from akd_core.io.rundir import TRACKED, RunDir

BOOL_GATES = ("allow_falls", "allow_failed_tracking", "allow_limit_violations", "require_crosscheck")
NUMBER_GATES = ("max_link_err_m", "max_stance_slip_mps", "max_penetration_m", "min_contact_match")
GATE_OPTIONS = {  # gate -> the `akd export` option that sets it
    "allow_falls": "--allow-falls", "allow_failed_tracking": "--allow-failed-tracking",
    "allow_limit_violations": "--allow-limit-violations",
    "require_crosscheck": "--no-require-crosscheck", "max_link_err_m": "--max-link-err-m",
    "max_stance_slip_mps": "--max-stance-slip-mps", "max_penetration_m": "--max-penetration-m",
    "min_contact_match": "--min-contact-match"}
# figures of a run, besides those the gates use, worth a column in summaries
EXTRA_FIGURES = ("naive_link_pos_err_m", "joint_rmse_rad", "torque_saturation_frac")


@dataclass(frozen=True)
class QualityGates:
    """The thresholds a run must meet to enter a dataset (``None`` = that gate is off)."""

    allow_falls: bool = False
    allow_failed_tracking: bool = False
    allow_limit_violations: bool = False
    require_crosscheck: bool = True
    max_link_err_m: float | None = 0.3
    max_stance_slip_mps: float | None = None
    max_penetration_m: float | None = None
    min_contact_match: float | None = None

    @classmethod
    def from_mapping(cls, data: Any, source: str = "quality") -> QualityGates:
        """Check a ``quality:`` mapping (e.g. from a sweep YAML); ``source`` names it in error messages."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: must be a mapping of gates, e.g. {{allow_falls: false, max_link_err_m: 0.3}}"
                              f"; got {data!r}")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(f"{source}: unknown gates {unknown}; valid gates are {known} "
                              "(null turns a threshold off)")
        for key, value in data.items():
            if key in BOOL_GATES and not isinstance(value, bool):
                raise ConfigError(f"{source}: '{key}' must be true or false, got {value!r}")
            if key in NUMBER_GATES and value is not None:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                        or value < 0:
                    raise ConfigError(f"{source}: '{key}' must be a non-negative number or null (no gate), "
                                      f"got {value!r}")
                if key == "min_contact_match" and value > 1:
                    raise ConfigError(f"{source}: 'min_contact_match' is a fraction in [0, 1], got {value!r}")
        return cls(**{k: (float(v) if k in NUMBER_GATES and v is not None else v) for k, v in data.items()})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line: what the gates exclude."""
        parts = []
        if not self.allow_falls:
            parts.append("falls")
        if not self.allow_failed_tracking:
            parts.append("failed tracking verdicts")
        if not self.allow_limit_violations:
            parts.append("joint-limit violations")
        if self.require_crosscheck:
            parts.append("failed/missing cross-checks")
        for key, label, op, unit in (("max_link_err_m", "link error", ">", " m"),
                                     ("max_stance_slip_mps", "stance slip", ">", " m/s"),
                                     ("max_penetration_m", "penetration", ">", " m"),
                                     ("min_contact_match", "contact match", "<", "")):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{label} {op} {value:g}{unit}")
        return "excluded: " + (", ".join(parts) if parts else "nothing (every gate is off)")


@dataclass
class RunQuality:
    """One run judged by the gates: ``passed`` every gate; ``included`` in the dataset (passed, or forced by
    ``include_rejected`` when it can be exported); ``reasons`` why it did not pass."""

    run_dir: str
    passed: bool
    included: bool
    reasons: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def figures_of(manifest: dict[str, Any]) -> dict[str, Any]:
    """The quality figures of a run from its manifest (None where a stage did not record them)."""
    stages = manifest.get("stages", {}) or {}
    track = (stages.get("track") or {}).get("metrics") or {}
    cross = (stages.get("crosscheck") or {}).get("metrics") or {}
    slip_key = "stance_slip_mps" if track.get("stance_slip_mps") is not None else "foot_skate_mps"
    fig: dict[str, Any] = {
        "fell": track.get("fell") if isinstance(track.get("fell"), bool) else None,
        "max_tilt_deg": _number(track.get("max_tilt_deg")),
        "link_pos_err_m": _number(track.get("link_pos_err_m")),
        "stance_slip_mps": _number(track.get(slip_key)),
        "stance_slip_metric": slip_key if track.get(slip_key) is not None else None,
        "penetration_m": _number(track.get("penetration_m")),
        "contact_schedule_match": _number(track.get("contact_schedule_match")),
        "crosscheck_passed": cross.get("passed") if isinstance(cross.get("passed"), bool) else None,
        "crosscheck_joint_rmse_rad": _number(cross.get("joint_rmse_rad")),
    }
    fig.update({k: _number(track.get(k)) for k in EXTRA_FIGURES})
    return fig


def gate_manifest(manifest: dict[str, Any], gates: QualityGates) -> tuple[list[str], dict[str, Any]]:
    """Every manifest gate a tracked run fails (reasons, in gate order) and its figures. Pure: no file is read."""
    stages = manifest.get("stages", {}) or {}
    fig = figures_of(manifest)
    reasons: list[str] = []
    track = stages.get("track")
    if not track:
        return ["not tracked: manifest.json has no 'track' stage; run `akd track RUN`"], fig
    if track.get("status") != "done":
        return [f"tracking did not finish (stage 'track' is {track.get('status')!r}); run `akd track RUN` again"], fig

    def missing(metric: str, gate: str, stage: str = "track") -> str:
        return f"{metric} not recorded by the {stage} stage, so gate {gate} cannot be checked; re-run `akd {stage} RUN`"

    if not gates.allow_falls:
        if fig["fell"] is None:
            reasons.append(missing("fell", "allow_falls"))
        elif fig["fell"]:
            track_metrics = track.get("metrics") or {}
            how = ("the simulation blew up" if track_metrics.get("diverged") else
                   f"max root tilt {fig['max_tilt_deg']:.0f} deg" if fig["max_tilt_deg"] is not None else "")
            reasons.append(f"fell{f' ({how})' if how else ''} (gate allow_falls)")
    failures = (track.get("metrics") or {}).get("failure_reasons")
    if not gates.allow_failed_tracking and failures:  # runs tracked before verdicts existed record none
        reasons.append(f"tracking failed: {'; '.join(failures)} (gate allow_failed_tracking)")
    if gates.require_crosscheck:
        cross = stages.get("crosscheck")
        if not cross:
            reasons.append("cross-check not run (gate require_crosscheck); run `akd crosscheck RUN`")
        elif cross.get("status") != "done":
            reasons.append(f"cross-check did not finish (stage 'crosscheck' is {cross.get('status')!r}) "
                           "(gate require_crosscheck); run `akd crosscheck RUN` again")
        elif fig["crosscheck_passed"] is None:
            reasons.append(missing("passed", "require_crosscheck", "crosscheck"))
        elif not fig["crosscheck_passed"]:
            cm = cross.get("metrics") or {}
            rmse, threshold = _number(cm.get("joint_rmse_rad")), _number(cm.get("threshold"))
            detail = (f": joint RMSE {rmse:.3g} rad vs threshold {threshold:.3g} rad"
                      if rmse is not None and threshold is not None else "")
            reasons.append(f"cross-check failed{detail} (gate require_crosscheck)")
    for gate, metric, label, unit, below in (
            ("max_link_err_m", "link_pos_err_m", "link position error", " m", True),
            ("max_stance_slip_mps", "stance_slip_mps", "stance slip", " m/s", True),
            ("max_penetration_m", "penetration_m", "penetration", " m", True),
            ("min_contact_match", "contact_schedule_match", "contact schedule match", "", False)):
        limit = getattr(gates, gate)
        if limit is None:
            continue
        value = fig[metric]
        if value is None:
            name = "stance_slip_mps / foot_skate_mps" if metric == "stance_slip_mps" else metric
            reasons.append(missing(name, gate))
        elif below and not value <= limit:  # `not <=` so that NaN fails
            reasons.append(f"{label} {value:.3g}{unit} > {limit:g}{unit} (gate {gate})")
        elif not below and not value >= limit:
            reasons.append(f"{label} {value:.3g}{unit} < {limit:g}{unit} (gate {gate})")
    return reasons, fig


def clip_of(run_dir: str | Path, formats: list[str], source: str = "auto") -> str:
    """The clip an export of ``formats`` takes from a run: "tracked" or "reference" (see `akd export --source`)."""

    if any(f in DATASET_FORMATS for f in formats) or source == "tracked":
        return "tracked"
    if source == "reference" or not (Path(run_dir) / TRACKED).exists():
        return "reference"
    return "tracked"


def assess_run(run_dir: str | Path, gates: QualityGates, clip: str = "tracked",
               include_rejected: bool = False) -> tuple[RunQuality, Any]:
    """Judge one run; returns its :class:`RunQuality` and the loaded export episode (None if it cannot be loaded).

    ``clip`` "tracked": every gate; "reference": the limit gate alone. A run whose episode cannot be loaded (missing
    or malformed files) is never included, even with ``include_rejected``."""

    run_dir = Path(run_dir)
    reasons: list[str] = []
    fig: dict[str, Any] = {}
    episode = None
    try:
        manifest = RunDir(run_dir).manifest()
        if clip == "tracked":
            reasons, fig = gate_manifest(manifest, gates)
        episode = load_episode(run_dir, clip, check_limits=False)
    except AKDError as exc:
        reasons.append(f"cannot be exported: {str(exc).splitlines()[0]}")
    if episode is not None:
        violation = limit_violation(episode)
        fig["limit_violation"] = violation
        if violation and not gates.allow_limit_violations:
            prefix = f"{episode.run_dir}: "
            violation = violation[len(prefix):] if violation.startswith(prefix) else violation
            reasons.append(f"outside the URDF limits: {violation} (gate allow_limit_violations)")
    passed = not reasons
    included = episode is not None and (passed or include_rejected)
    return RunQuality(str(run_dir), passed, included, reasons, fig), episode


# ----------------------------------------------------------------------------- reporting
def quality_table(rows: list[dict[str, Any]], status: bool = False, width: int = 100,
                  max_included: int = 25) -> str:
    """A short table: run, (job status,) in the dataset or not, link error, and why not. Every excluded run is
    listed; past ``max_included`` included runs, those that passed every gate are counted, not listed.

    ``rows``: dicts with ``name``, ``included``, ``passed``, ``reasons``, ``quality`` (figures) and, with ``status``,
    ``status``."""
    shown = rows
    clean = [r for r in rows if r.get("included") and r.get("passed", True)]
    if sum(bool(r.get("included")) for r in rows) > max_included:
        shown = [r for r in rows if not (r.get("included") and r.get("passed", True))]
    name_w = min(max([len(r["name"]) for r in shown] + [3]), 80)
    head = f"{'run':{name_w}s} " + (f"{'status':8s} " if status else "") + f"{'dataset':9s} {'link err m':>10s}  reason"
    lines = [head.rstrip()]
    for r in shown:
        err = (r.get("quality") or {}).get("link_pos_err_m")
        verdict = "included" if r.get("included") else "excluded"
        reason = "; ".join(r.get("reasons") or [])
        if r.get("included") and not r.get("passed", True):
            verdict, reason = "included*", f"INCLUDED DESPITE: {reason}"
        line = (f"{r['name'][:name_w]:{name_w}s} " + (f"{r.get('status', ''):8s} " if status else "")
                + f"{verdict:9s} {'' if err is None else f'{err:.4f}':>10s}  "
                + (reason if len(reason) <= width else reason[:width - 3] + "..."))
        lines.append(line.rstrip())
    if shown is not rows:
        lines.append(f"... and {len(clean)} included runs that pass every gate (listed in the summary)")
    forced = sum(bool(r.get("included")) and not r.get("passed", True) for r in rows)
    if forced:
        lines.append(f"* --include-rejected: {forced} run(s) that fail the quality gates are in the dataset anyway")
    return "\n".join(lines)


__all__ = ["QualityGates", "RunQuality", "gate_manifest", "figures_of", "assess_run", "clip_of", "quality_table",
           "GATE_OPTIONS"]
