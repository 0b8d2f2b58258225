"""Loading Warp and Newton (late: they are heavy and only the Newton engine and the gradient method need them) and
choosing their device."""

from __future__ import annotations

from akd_core.io.errors import ConfigError, DependencyError


def resolve_device(device: str | None) -> str:
    """'cuda' when Warp sees a GPU (or when asked), else 'cpu'."""
    wp = import_warp()
    if device in (None, "auto"):
        return "cuda" if wp.get_cuda_device_count() > 0 else "cpu"
    if device.startswith("cuda") and wp.get_cuda_device_count() == 0:
        raise ConfigError(f"--device {device} was requested but Warp sees no CUDA device; use --device cpu")
    if device != "cpu" and not device.startswith("cuda"):
        raise ConfigError(f"--device must be 'cpu', 'cuda' or 'auto', got {device!r}")
    return device


def import_warp():
    try:
        import warp as wp
    except ImportError as exc:  # pragma: no cover - the stack always has warp
        raise DependencyError("tracking needs warp-lang and newton: pip install warp-lang newton") from exc
    wp.config.quiet = True  # no init banner
    if hasattr(wp, "LOG_WARNING"):  # Warp >= 1.19 logs every module load at INFO
        wp.config.log_level = wp.LOG_WARNING
    return wp


def import_newton():
    """(warp, newton), Warp configured quiet."""
    wp = import_warp()
    try:
        import newton
    except ImportError as exc:  # pragma: no cover - newton is a core dependency
        raise DependencyError("tracking needs newton: pip install newton") from exc
    return wp, newton
