"""AKD core: articulated kinematics distillation, from a prompt and a URDF to tracked motion.

Stages talk through the data types in :mod:`akd_core.robot` and :mod:`akd_core.motion`.
Nothing in this package imports ROS; the ROS nodes live in ``akd_ros``.
"""

from .errors import AKDError

__version__ = "0.1.0"
__all__ = ["AKDError", "__version__"]
