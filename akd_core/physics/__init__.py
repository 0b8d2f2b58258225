"""Physics tracking: the front door.

Rooms (MuJoCo MPC's split): ``engine`` (the interface; ``mujoco_engine``, ``newton_engine`` implement it),
``cost`` (the tracking task as weighted residuals), ``planner`` (sampling MPC with DIAL-MPC annealing),
``tracker`` (wires them: `akd track`), ``gradient`` (the paper's Adam method on Newton, `--method adam`),
``crosscheck`` (the other engine replays the tracked targets, windowed), ``params`` (the PD law's gains, effort
limits and contact material both engines share), ``metrics`` (figures of a tracked motion).
"""

from .cost import CostWeights, Reference, TrackingCost
from .engine import BodyState, Engine, Feet, RolloutBatch, make_engine, resolve_engine, substep_targets
from .metrics import FALL_HEIGHT_FRACTION, FALL_TILT_DEG, fall_warning, tracking_metrics
from .params import REFERENCE_MASS_KG, ContactParams, PhysicsParams, default_physics, subtree_inertia_about_joints
from .planner import SamplingConfig, SamplingPlanner
from .tracker import CHECKPOINT, TrackingConfig, build, execute, stage_track, track_motion

__all__ = ["BodyState", "CHECKPOINT", "ContactParams", "CostWeights", "Engine", "FALL_HEIGHT_FRACTION",
           "FALL_TILT_DEG", "Feet", "PhysicsParams", "REFERENCE_MASS_KG", "Reference", "RolloutBatch",
           "SamplingConfig", "SamplingPlanner", "TrackingConfig", "TrackingCost", "build", "default_physics",
           "execute", "fall_warning", "make_engine", "resolve_engine", "stage_track", "substep_targets",
           "subtree_inertia_about_joints", "track_motion", "tracking_metrics"]
