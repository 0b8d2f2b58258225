"""The quality gates as command-line options (`akd export`, `akd batch`): a run failing one is left out."""

from __future__ import annotations

import argparse

from akd_core.export.quality import BOOL_GATES, NUMBER_GATES, QualityGates


def add_quality_arguments(parser: argparse.ArgumentParser) -> None:
    """The gates as command-line options (defaults = :class:`QualityGates`)."""
    defaults = QualityGates()
    group = parser.add_argument_group("quality gates (a run failing one is left out of the dataset; docs/batch.md)")
    group.add_argument("--allow-falls", action="store_true", help="keep runs whose tracked robot fell")
    group.add_argument("--allow-failed-tracking", action="store_true",
                       help="keep runs whose tracked clip failed its verdict (link error above its motion class's "
                            "limit, or the root lost the reference; docs/tracking.md)")
    group.add_argument("--allow-limit-violations", "--allow-out-of-limits", dest="allow_limit_violations",
                       action="store_true",
                       help="keep runs whose joint positions or PD targets leave the URDF limits (unsafe)")
    group.add_argument("--no-require-crosscheck", dest="require_crosscheck", action="store_false",
                       help="keep runs whose cross-check failed or was not run")
    group.add_argument("--max-link-err-m", type=_optional_float, default=defaults.max_link_err_m, metavar="M",
                       help=f"largest mean link position error vs the reference (default {defaults.max_link_err_m}; "
                            "'none' = no gate)")
    group.add_argument("--max-stance-slip-mps", type=_optional_float, default=None, metavar="V",
                       help="largest stance-foot slip, m/s (default: no gate)")
    group.add_argument("--max-penetration-m", type=_optional_float, default=None, metavar="M",
                       help="deepest ground penetration, m (default: no gate)")
    group.add_argument("--min-contact-match", type=_optional_float, default=None, metavar="F",
                       help="least fraction of contacts matching the reference's (default: no gate)")
    group.add_argument("--include-rejected", action="store_true",
                       help="export every run whatever the gates say (the output names the runs that fail them)")


def gates_from_args(args: argparse.Namespace) -> QualityGates:
    data = {k: getattr(args, k) for k in BOOL_GATES + NUMBER_GATES}
    return QualityGates.from_mapping(data, "command-line quality options")


def _optional_float(text: str) -> float | None:
    if text.strip().lower() in ("none", "null", "off"):
        return None
    try:
        return float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text!r}") from exc
