"""The one error hierarchy of AKD.

Every error a user can cause (a bad file, a bad option, a robot AKD cannot handle)
is an :class:`AKDError` whose message names the file, the field or element, and the
fix. The CLI prints the message without a traceback and exits non-zero.
"""

from __future__ import annotations


class AKDError(Exception):
    """Base of every user-facing AKD error."""

    exit_code = 2


class URDFError(AKDError):
    """A URDF cannot be read or describes an articulation AKD cannot use."""


class MeshNotFoundError(URDFError):
    """A mesh URI in a URDF resolves to no existing file."""


class KinematicTreeError(URDFError):
    """Loops, several roots or dangling joints in the kinematic graph."""


class InertiaError(URDFError):
    """Non-positive mass or a non physical inertia tensor."""


class MJCFError(URDFError):
    """An MJCF (MuJoCo XML) robot cannot be read, compiled, or used as a floating-base robot."""


class JointLimitError(AKDError):
    """Joint limits are inconsistent, or a trajectory leaves them."""


class QualityGateError(AKDError):
    """A run fails a quality gate (it fell, left its limits, failed the cross-check, ...) and is not exported."""


class TrackingFailedError(AKDError):
    """A clip was tracked, but not well enough to be used (it fell, lost the reference, or its link error is above
    its class's limit: akd_core.physics.verdict). Everything is written; the manifest says why it failed."""

    exit_code = 3


class MotionError(AKDError):
    """A motion file or array is malformed or inconsistent with its robot."""


class RunDirError(AKDError):
    """A run directory lacks what a stage needs (e.g. `akd track` before `akd gait`)."""


class ConfigError(AKDError):
    """A command-line option or config value is invalid."""


class DependencyError(AKDError):
    """An optional dependency (CUDA, gsplat, rclpy, ray, model weights) is missing."""
