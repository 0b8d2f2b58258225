"""Loading Warp and Newton (late: they are heavy and only the Newton engine and the gradient method need them) and
choosing their device.

Warp compiles every kernel module on first use (cached in ``~/.cache/warp/<version>``, ``WARP_CACHE_PATH``) and, by
default, each kernel's adjoint too. Only the gradient method differentiates, so Newton's modules are loaded
forward-only unless a caller asks for gradients: measured on 2 shared cores (load ~8), the two largest modules the
cross-check needs compiled in 33 s forward-only against 102 s with adjoints (Featherstone kernels 25 vs 64 s,
articulation 8 vs 38 s). A forward-only module is compiled again with its adjoint the first time the gradient method
needs it in the same process (:func:`import_newton` with ``differentiable=True``).
"""

from __future__ import annotations

import ctypes
import sys

from akd_core.io.errors import ConfigError, DependencyError


def resolve_device(device: str | None) -> str:
    """'cuda' when Warp sees a GPU (or when asked), else 'cpu'. Without an NVIDIA driver on the machine the answer
    is 'cpu' without importing Warp (1-2 s): the MuJoCo path never needs it."""
    if device == "cpu":
        return device
    if device in (None, "auto") and not cuda_driver_present():
        return "cpu"
    if device not in (None, "auto") and not device.startswith("cuda"):
        raise ConfigError(f"--device must be 'cpu', 'cuda' or 'auto', got {device!r}")
    wp = import_warp()
    if device in (None, "auto"):
        return "cuda" if wp.get_cuda_device_count() > 0 else "cpu"
    if wp.get_cuda_device_count() == 0:
        raise ConfigError(f"--device {device} was requested but Warp sees no CUDA device; use --device cpu")
    return device


def cuda_driver_present() -> bool:
    """Whether the NVIDIA driver library loads (what Warp needs before it can see a GPU)."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


def import_warp():
    try:
        import warp as wp
    except ImportError as exc:  # pragma: no cover - the stack always has warp
        raise DependencyError("tracking needs warp-lang and newton: pip install warp-lang newton") from exc
    wp.config.quiet = True  # no init banner
    if hasattr(wp, "LOG_WARNING"):  # Warp >= 1.19 logs every module load at INFO
        wp.config.log_level = wp.LOG_WARNING
    return wp


def import_newton(differentiable: bool = False):
    """(warp, newton), Warp configured quiet. Modules created from here on compile forward-only unless
    ``differentiable`` (or unless Newton was imported before with adjoints on: those modules keep them)."""
    wp = import_warp()
    if differentiable:
        enable_adjoints(wp)
    elif "newton" not in sys.modules:
        wp.config.enable_backward = False  # read by each Warp module when it is created (on import)
    try:
        import newton
    except ImportError as exc:  # pragma: no cover - newton is a core dependency
        raise DependencyError("tracking needs newton: pip install newton") from exc
    return wp, newton


def enable_adjoints(wp) -> None:
    """Adjoints on for every Warp module created from now on, and for those created forward-only before (they are
    rebuilt, or reloaded from the kernel cache, at their next launch). Kernels that turned adjoints off themselves
    keep them off (a kernel's own options win over its module's); Newton's Kamino solver, whose modules turn them
    off as a whole, is left alone."""
    if wp.config.enable_backward:
        return
    wp.config.enable_backward = True
    from warp._src.context import user_modules  # Warp keeps no public list of its modules

    for name, module in list(user_modules.items()):
        if module.options.get("enable_backward") is False and not name.startswith("newton._src.solvers.kamino"):
            wp.set_module_options({"enable_backward": True}, module=module)
