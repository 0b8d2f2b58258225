"""Physics tracking: the front door.

Rooms (MuJoCo MPC's split): ``engines`` (the interface in ``engines.base``; ``engines.mujoco``, ``engines.newton``
implement it; ``make_engine`` picks one), ``targets`` (the rules every PD-target sequence obeys),
``cost`` (the tracking task as weighted residuals), ``planner`` (sampling MPC with DIAL-MPC annealing),
``tracker`` (wires them: `akd track`), ``gradient`` (the paper's Adam method on Newton, `--method adam`),
``crosscheck`` (the other engine replays the tracked targets, windowed), ``params`` (the PD law's gains, effort
limits and contact material both engines share), ``metrics`` (figures of a tracked motion).
"""

from akd_core.physics.cost import CostWeights, Reference, TrackingCost
from akd_core.physics.engines import make_engine, resolve_engine
from akd_core.physics.engines.base import BodyState, Engine, Feet, RolloutBatch
from akd_core.physics.metrics import FALL_HEIGHT_FRACTION, FALL_TILT_DEG, fall_warning, tracking_metrics
from akd_core.physics.params import (
           REFERENCE_MASS_KG,
           ContactParams,
           PhysicsParams,
           default_physics,
           subtree_inertia_about_joints,
)
from akd_core.physics.planner import SamplingConfig, SamplingPlanner
from akd_core.physics.targets import substep_targets
from akd_core.physics.tracker import CHECKPOINT, TrackingConfig, build, execute, stage_track, track_motion

__all__ = ["BodyState", "CHECKPOINT", "ContactParams", "CostWeights", "Engine", "FALL_HEIGHT_FRACTION",
           "FALL_TILT_DEG", "Feet", "PhysicsParams", "REFERENCE_MASS_KG", "Reference", "RolloutBatch",
           "SamplingConfig", "SamplingPlanner", "TrackingConfig", "TrackingCost", "build", "default_physics",
           "execute", "fall_warning", "make_engine", "resolve_engine", "stage_track", "substep_targets",
           "subtree_inertia_about_joints", "track_motion", "tracking_metrics"]
