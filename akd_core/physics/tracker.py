"""The tracker: wires an engine, the tracking cost and a planner into `akd track` (sampling MPC, the default), or
hands over to the paper's gradient method (``--method adam``, :mod:`akd_core.physics.gradient`).

Sampling MPC, receding horizon: PD-target offsets live at knots on a fixed grid of control frames (every
``knot_s``), on top of the velocity-feedforward targets ``q_ref + (kd/kp) qdot_ref``; per-frame targets are linear
between the knots (and from the last executed target), clipped to the joint limits and rate-limited to the URDF
velocity limits, then linear over the substeps of each control period. Every ``replan_s`` the planner re-plans the
knots of the next ``horizon_s`` from the *simulated* state, and the first ``replan_s`` of the plan is executed by
``Engine.advance``. What is stored is what was executed: float32 targets at the control rate, from a float32 start
state, so replaying ``tracked.npz`` from its first state in the same engine reproduces its states.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from akd_core.io.errors import ConfigError, MotionError
from akd_core.io.fileio import atomic_path
from akd_core.io.rundir import REFERENCE, TRACKED, RunDir
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.load import load_run_robot
from akd_core.model.robot import Robot
from akd_core.model.terrain import Terrain, run_terrain
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.physics.cost import CostWeights, Reference, TrackingCost
from akd_core.physics.engines import make_engine, resolve_engine
from akd_core.physics.engines.base import BodyState, Engine, Feet, RolloutBatch, mass_links
from akd_core.physics.engines.mujoco import (
    MUJOCO_INTEGRATORS,
    contact_timeconst,
    euler_unstable,
    has_simplifiable_contacts,
)
from akd_core.physics.engines.warp_runtime import resolve_device
from akd_core.physics.gradient import track_adam
from akd_core.physics.inverse import inverse_dynamics_torques
from akd_core.physics.metrics import (
    contact_match,
    contact_schedule,
    fall_warning,
    feet_of,
    require_colliding_feet,
    stance_slip,
    touchdown_speed,
    tracking_metrics,
    tracks_better,
)
from akd_core.physics.params import GRAVITY, KP_PER_KG_MPC, PhysicsParams, default_physics
from akd_core.physics.planner import PlanResult, SamplingConfig, SamplingPlanner
from akd_core.physics.targets import control_rate, max_target_step, rate_limited, start_pose
from akd_core.physics.verdict import TrackingLimits, judge_segments, judge_tracking, motion_class

log = logging.getLogger(__name__)

CHECKPOINT = "track_ckpt.pt"
METHODS = ("mpc", "adam")
CONTACT_FORCE_FRACTION = 0.01  # a foot is in contact when it carries more than 1 % of the robot's weight
# the feedforward replay is kept without planning only if it also never turns away by more than this (deg): a slow
# heading drift is what MPC corrects best (measured: g1 walk, 3.7 deg -> 0.1 deg)
FEEDFORWARD_OK_HEADING_DEG = 2.0
# a warm-started plan is executed unsampled only while the root keeps within this of the reference orientation (rad)
SETTLED_TILT_RAD = 0.05
# stance slip (m/s, metrics.stance_slip) a clip should stay within (the zoo's pass criterion, docs/zoo.md): a
# warm-started plan settles only when it also predicts its feet in contact sliding below settle_fraction x this
SLIP_LIMIT_MPS = 0.03
BOOST_SLIP_FRACTION = 1.0  # a window whose warm start predicts sliding above this x SLIP_LIMIT_MPS is boosted too

# The MPC's warm start fades toward the feedforward targets with a 2 s time constant (TrackingConfig.warm_decay_s).
# Kept as planned, the knot offsets random-walk: each re-plan's MPPI mean moves them by its sampling noise, and
# directions the cost barely sees (two stance legs squeezing the ground against each other) are never pulled back.
# Over a long clip the PD targets leave the feedforward further and further (mean |target - feedforward| 0.02 rad
# after 2 s, 0.13 rad after 13 s) until the feet slip and the robot falls. Faded too fast, the corrections a gait
# with flight phases keeps needing are lost. Measured (docs/tracking.md, "Warm-start decay"; 2026-11-29, 2 vCPUs;
# link error m, first attempt): a1 20 s command timeline (stand, trot 0.4, 0.8, then 0.8 m/s turning 0.5 rad/s): kept
# 0.242 and fell at 16 s; 0.5 / 1 / 2 / 3 s 0.0157 / 0.0160 / 0.0165 / 0.0168. Built-in quadruped "bound forward
# quickly" 4 s, seeds 0 / 1: kept 0.064 / -; 1 s 0.529 (fell) / 0.057; 2 s 0.036 / 0.040; 3 s 0.045 / -.
WARM_DECAY_S = 2.0


@dataclass
class TrackingConfig:
    """`akd track` settings. ``None`` fields take defaults sized from the robot and the device (:func:`sized`)."""

    method: str = "mpc"  # "mpc" (sampling MPC) | "adam" (the paper's gradient method on Newton)
    engine: str = "auto"  # "auto" | "mujoco" | "newton" (auto: Newton on CUDA, MuJoCo on CPU)
    device: str | None = None  # "cpu" | "cuda" | None (auto)
    sim_dt: float | None = None  # s, upper bound; default 2 ms (MuJoCo) / 1 ms (Newton)
    # default: the reference fps clamped to [25, 100]; FLIGHT_CONTROL_HZ for flight gaits
    control_hz: float | None = None
    kp: float | list[float] | None = None
    kd: float | list[float] | None = None
    armature: float | list[float] | None = None
    contact_mu: float | None = None  # Coulomb friction, default 1
    # sampling MPC
    samples: int | None = None  # candidates per re-plan (default 32 on CPU, 1024 on CUDA; x2 for bipeds on CPU)
    iterations: int | None = None  # annealing rounds per re-plan (MPC, default 1) / Adam steps per window (adam)
    noise_rad: float | None = None  # knot noise (default 0.04 rad)
    # planning horizon (default 0.4 s, FLIGHT_HORIZON_S for flight gaits, or SWING_HORIZON_FACTOR x the reference's
    # swing where longer; bipeds 0.8 s)
    horizon_s: float | None = None
    replan_s: float | None = None  # executed between re-plans (DEFAULT_REPLAN_S, bipeds BIPED_REPLAN_S)
    # MuJoCo step of the planner's rollouts (s): None = BIPED_PLAN_STEP_FACTOR x the tracking step for bipeds (where
    # the control period holds a whole number of them), the tracking step itself for other robots and at 0; what is
    # executed always steps at sim_dt
    plan_dt: float | None = None
    # MuJoCo's integrator for the executed and the planning models (MUJOCO_INTEGRATORS; Newton has its own). None:
    # euler for robots with three or more feet (it integrates the PD damping explicitly, consistently with the contact
    # forces, where implicitfast lets loaded stance feet creep; docs/tracking.md, "Integrator"), implicitfast for
    # bipeds, footless bodies and models an explicit step would shake (engines.mujoco.euler_unstable: a planning model
    # stepping coarser than its contacts' time constant allows, as bipeds' and --fast's do; too stiff PD damping)
    integrator: str | None = None
    select: str = "mean"  # planner output: softmax mean of the candidates (MPPI) or the best one ("best")
    temperature: float = 0.5  # MPPI softmax temperature on standardised costs
    antithetic: bool = False  # perturbations in +/- pairs
    # robots with three or more feet on CPU: FAST_PRESET's samples, plan step and re-plan period where those options
    # are left at their defaults (about 2.5x less planning for about the same link error; bipeds: no change)
    fast: bool = False
    knot_s: float | None = None  # knot spacing (None: KNOT_S, or FLIGHT_KNOT_S for a clip with flight phases)
    weights: CostWeights | None = None  # default: LEGGED_WEIGHTS, or BIPED_WEIGHTS for two-footed robots
    # the cost's yaw-rate term (akd_core.physics.cost; `akd track --yaw-rate-weight`); None: the weights' own (0)
    yaw_rate_weight: float | None = None
    velocity_feedforward: bool = True
    inverse_dynamics: bool = True  # add the reference's inverse-dynamics torques / kp to the nominal targets
    # skip the MPC when the feedforward replay already tracks upright within this link error (m) and
    # FEEDFORWARD_OK_HEADING_DEG of heading; 0: always plan
    feedforward_ok_m: float = 0.02
    # with the default --samples, a result looser than this link error (m) or fallen is re-planned once with
    # RETRY_SAMPLES_FACTOR x the samples and the better kept; None: the clip's pass limit (verdict.py); 0: never
    retry_above_m: float | None = None
    # the clip passes at or below this mean link error (m); None: its motion class's limit (akd_core.physics.verdict)
    link_err_limit_m: float | None = None
    # event-triggered re-planning: a re-plan whose warm-started plan already predicts a mean link error below this
    # fraction of the clip's pass limit (and a root within SETTLED_TILT_RAD of the reference's orientation) executes
    # it without sampling; 0: sample at every re-plan
    settle_fraction: float = 0.7
    # adaptive sample count: a re-plan whose warm-started plan predicts a link error above this fraction of the pass
    # limit samples BOOST_SAMPLES_FACTOR x the candidates (only with the default --samples); 0: never
    boost_fraction: float = 1.0
    # each re-plan's warm start (the previous plan's knot offsets) fades toward the feedforward with this time
    # constant (s; 0: kept as planned): WARM_DECAY_S says why
    warm_decay_s: float = WARM_DECAY_S
    seed: int = 0
    # the gradient method (--method adam): see akd_core.physics.gradient
    window_s: float | None = 0.5
    time_budget_s: float | None = None
    lr: float = 0.02

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# Above the link error a tracked clip must meet to pass (its motion class's limit, akd_core.physics.verdict), with the
# default sample count, the MPC re-plans the clip once with twice the samples and keeps the better result.
# Measured (docs/tracking.md, "Second attempt"): the a2 (40 kg, MJCF) demo trot 0.039 -> 0.017 m.
RETRY_SAMPLES_FACTOR = 2
BOOST_SAMPLES_FACTOR = 2

# A biped's planner rolls out at twice the executed step (MuJoCo only), with the fine model's contact stiffness
# (MujocoEngine's planning model): half the cost of its long (0.8 s), wide (64) rollout batches. Measured
# (docs/tracking.md, "Planning model"): g1 "walk forward" 4 s 0.0225 -> 0.0161 m link error, 100 -> 58 s. Not for
# quadrupeds: a1 trot 0.016 -> 0.021 m, solo12 0.017 -> 0.026 m, go2 0.016 -> 0.028 m for 1.3-2x less time.
BIPED_PLAN_STEP_FACTOR = 2

# Two feet give a narrow support: staying upright comes before following the links (measured on the built-in
# humanoid and ostrich 4 s walks: with the quadruped weights both fell; with these both stay within 10 deg). The
# drift correction of LEGGED_WEIGHTS (below) too: without it the human-like quick walks fell behind, g1 "walk
# quickly" 0.40 m behind after 4 s (link error 0.138 m -> 0.041 m with it), the humanoid's 0.087 -> 0.021 m.
BIPED_WEIGHTS = CostWeights(orientation=2.0, height=3.0, velocity=0.5, drift_time_s=0.2)

# Three or more feet: the root is held to its path. The velocity term asks for the reference velocity plus what
# closes the horizontal root gap in 0.2 s, and the heading weighs as much as the links. Without it a heavy robot's
# root falls behind a little every stride (the MPPI mean of 32 samples around the feedforward does not push hard
# enough) and nothing in a 0.4 s horizon asks it to catch up. Measured (docs/tracking.md, "Drift correction"; one
# seed, link error m, plain CostWeights() -> these): ANYmal C "trot forward quickly" 3 s 0.095 -> 0.025 (mean of 3
# seeds), ANYmal B 0.066 -> 0.020, HyQ "trot forward" 0.051 -> 0.027, a2 demo 0.039 -> 0.021, solo12 0.017 ->
# 0.009, a1 fast trot 0.015 -> 0.010; a1 trot 0.016 -> 0.021 and go2 demo 0.016 -> 0.019 (within their seed spread).
LEGGED_WEIGHTS = CostWeights(orientation=1.0, velocity=0.5, drift_time_s=0.2)

# Re-plan periods. Robots with three or more feet re-plan every 0.06 s: with event-triggered re-planning
# (settle_fraction) and adaptive sample counts (boost_fraction), "trot forward" 4 s clips of a1, laikago, hyq, go1,
# go2 and aliengo track within 0.03 m on the first attempt with 1219-2339 rollouts, against 3300 (and a second
# attempt for hyq) at 0.04 s without them (docs/tracking.md, "Real time"). Bipeds balance on a narrow support and
# keep re-planning every 0.04 s.
DEFAULT_REPLAN_S = 0.06
BIPED_REPLAN_S = 0.04

# Robots with three or more feet plan at least this many times the reference's unsupported swing ahead
# (:func:`swing_seconds`), on the knot grid: a plan that ends soon after the swinging feet are down cannot see where
# their stance takes the body. Measured (docs/tracking.md, "Horizon and swing"; 4 s clips, `--feedforward-ok 0`, first
# attempt, seeds 0/1/2; 2026-11-29, c0b39e8): ANYmal C "trot forward" (0.81 m/s, velocity-limited, swing 0.38 s) 0.075 /
# 0.061 / 0.055 m with the 0.4 s horizon, 0.029 / 0.025 / 0.024 m with 0.6 s in fewer rollouts (re-planning every
# 0.04 s instead: 0.036 / 0.025 / 0.022 m); a1's 0.6 m/s trot (swing 0.34 s) 0.030 / 0.020 / 0.024 -> 0.019 / 0.021 /
# 0.021 m with 0.5 s. HyQ's trot (swing 0.26 s) keeps 0.4 s (0.5 s: no better), as do the "trot forward" clips of
# a1, laikago and go1 and every walk (three feet down).
SWING_HORIZON_FACTOR = 1.5

# Knot spacing of the plans. A clip with flight phases on three or more feet (a pronk, a flying bound or gallop:
# verdict's "dynamic" class) takes off and lands within stances of 0.12-0.16 s, less than two knots of 0.1 s apart, so
# the plan could not shape a push-off; knots 0.04 s apart can. Measured on the zoo's default-speed cells (4 s clips,
# first attempt, seed 0; 2026-11-30, cd2e3f2, docs/tracking.md "Knots of flight gaits"): pronks of the failing small
# robots 0.04 instead of 0.1 s: mini_cheetah (MJCF) 0.128 -> 0.044 m, solo12 0.288 -> 0.085, erd_quadruped 0.228 ->
# 0.068, and the 15 pronks that passed within +-0.006 m in fewer rollouts (a1 2616 -> 1923, spot 2162 -> 1667);
# erd_quadruped's flying gallop 0.132 -> 0.046 m. Clips without flight keep 0.1 s: paces, flightless bounds and
# gallops came out either way (hyq's bound 0.023 -> 0.035, go1's 0.049 -> 0.014) in up to 2 x the rollouts.
KNOT_S = 0.1
FLIGHT_KNOT_S = 0.04

# Planning horizon of a clip with flight phases on three or more feet (the "dynamic" class): at least this long. The
# swing rule above gives a pronk 0.4 s, its flights being 0.15 s: a plan that sees one and a half strides cannot trade
# this stance's push-off against the landing after next, and the small robots' pronks fell behind the reference by
# 0.1 m. Measured on solo12's default-speed "pronk forward" (0.68 m/s, 3.65 Hz; first attempt, seeds 0/1/2;
# 2026-11-30, 3841896, docs/tracking.md "Knots of flight gaits"): 0.4 s 0.085 / 0.193 / 0.074 m, 0.6 s 0.040 / 0.057
# / 0.046 m (seed 0 at 0.52 s 0.061, at 0.72 s 0.073, at 0.8 s 0.098); solo's 0.128 -> 0.088 m.
FLIGHT_HORIZON_S = 0.6

# Control rate of a clip with flight phases on three or more feet, where none is asked for: its stances last
# 0.12-0.16 s, six to eight periods of the reference's 50 Hz, and a push-off shaped by targets held 20 ms apart left
# the small robots' pronks behind. Measured with FLIGHT_HORIZON_S (the zoo's default-speed "pronk forward", first
# attempt, seed 0; 2026-11-30, 3841896, docs/tracking.md "Knots of flight gaits"): 50 -> 100 Hz erd_quadruped 0.061
# -> 0.018 m, solo 0.088 -> 0.042, solo12 0.040 -> 0.033, a1 0.018 -> 0.020 in 1667 instead of 2147 rollouts (the
# torques then from the resampled clip; from its own frames, control_rate_torques: erd 0.038, solo 0.040, solo12 0.029).
FLIGHT_CONTROL_HZ = 100.0

# Robots with three or more feet plan in a model whose round mesh feet are spheres (MujocoEngine's simple_contacts;
# the executed model keeps the meshes). Measured (docs/tracking.md, "Planning contacts"): solo12's planning step
# 40 -> 23 us (4.6 -> 1.5 contacts per step); go2's rounded feet 23.5 -> 15.9 us, its "trot forward" 5.1 -> 3.5 s.
SIMPLE_PLANNING_CONTACTS = True

# The tracker's MuJoCo models list their robot-ground contacts as explicit pairs where that is exact (MuJoCo's
# use_ground_pairs: flat ground, no self-collisions), instead of finding them with the broadphase at every step: the
# same rollouts, 10-17 % less time a step (b1 16.1 -> 13.9 us, anymal_b 17.8 -> 14.8, hyq 14.4 -> 12.9).
GROUND_PAIRS = True


@dataclass(frozen=True)
class FastPreset:
    """`akd track --fast` for robots with three or more feet on CPU: fewer, antithetic candidates (a steadier mean
    for the rollouts), rolled out at twice the step in the stiff planning model, re-planned less often. Measured
    (docs/tracking.md, "Fast preset"; a1 trot 0.6 m/s 4 s, seeds 0/1/2, `--feedforward-ok 0`): 0.022 / 0.016 /
    0.023 m in 4.1 / 3.7 / 4.3 s, against 0.016 / 0.020 / 0.020 m in ~11 s at the defaults."""

    samples: int = 25
    antithetic: bool = True
    plan_step_factor: int = 2
    replan_s: float = 0.06


FAST_PRESET = FastPreset()


@dataclass
class Setup:
    """Everything one tracking run needs, built once."""

    robot: Robot
    reference: Motion  # at the control rate
    physics: PhysicsParams
    engine: Engine  # executes: the clip, the committed plans
    planning_engine: Engine  # scores the planner's candidates (``engine`` itself or a coarser-step MuJoCo model)
    cost: TrackingCost
    ref: Reference
    start: BodyState  # float32-representable start state
    height_shift: float  # m the reference was raised to put the lowest point on the ground
    feedforward: np.ndarray  # (T, J) nominal targets
    cfg: TrackingConfig
    sampling: SamplingConfig
    weights: CostWeights
    horizon: int  # control frames
    replan: int
    knot: int
    settle_m: float = 0.0  # a warm-started plan predicting a link error below this is executed unsampled (0: never)
    boost_m: float = 0.0  # ... above this, the window is planned with BOOST_SAMPLES_FACTOR x the samples (0: never)
    terrain: Terrain = field(default_factory=Terrain.flat)  # what both engines simulate and the metrics measure from


def control_rate_torques(robot: Robot, motion: Motion, reference: Motion, physics: PhysicsParams, feet: Feet,
                         shift: float, intended: np.ndarray | None) -> np.ndarray:
    """(T, J) inverse-dynamics torques of ``reference`` (``motion`` resampled to the control rate, raised by
    ``shift``; ``intended``: its contact schedule's parts down). Where the control rate is above the clip's own rate
    they are computed at the clip's frames and interpolated: a linearly upsampled clip's finite-difference
    accelerations are zero between its frames and twice the real ones at them, and torques from those would make
    the feedforward jump every other control period."""
    if reference.fps <= motion.fps + 1e-9:
        torques, _ = inverse_dynamics_torques(robot, reference, physics, feet,
                                              root_pos=reference.root_pos + np.array([0.0, 0.0, shift]),
                                              stance=intended)
        return torques
    own = contact_schedule(robot, motion).intended
    torques, _ = inverse_dynamics_torques(robot, motion, physics, feet,
                                          root_pos=motion.root_pos + np.array([0.0, 0.0, shift]), stance=own)
    at = np.arange(reference.num_frames) / reference.fps
    frames = np.arange(motion.num_frames) / motion.fps
    return np.stack([np.interp(at, frames, column) for column in torques.T], axis=1)


def feedforward_targets(robot: Robot, reference: Motion, physics: PhysicsParams, enabled: bool = True,
                        torques: np.ndarray | None = None) -> np.ndarray:
    """(T, J) q_ref + (kd qdot_ref + tau) / kp, clipped to the limits and rate-limited. With ``tau_pd = kp (q* - q)
    - kd qdot`` the velocity lead cancels the damping torque along the reference, so joints do not lag it by kd/kp
    seconds, and ``torques`` (T, J) (the reference's inverse dynamics, :mod:`akd_core.physics.inverse`) are what
    the PD then produces along the reference: gravity and the swing without a sag."""
    q = reference.joint_pos.astype(np.float64)
    gain = 1.0 / np.maximum(physics.kp, 1e-9)
    if enabled:
        q = q + (physics.kd * gain)[None] * reference.joint_vel().astype(np.float64)
    if torques is not None:
        q = q + gain[None] * torques
    q = np.clip(q, robot.lower, robot.upper)
    return rate_limited(q, max_target_step(robot, reference.fps))


def is_biped(robot: Robot, reference: Motion) -> bool:
    feet, _, _ = feet_of(robot, reference)
    return 0 < len(feet) <= 2


def swing_seconds(reference: Motion) -> float | None:
    """The reference's unsupported swing (s): the median time a foot stays up while at most two feet carry the body
    (a trot's or a bound's swing: the body rocks on a line or flies until the foot is down; a walk's swings, with
    three feet down, do not count), from its intended stance (``foot_contacts``), leaving out the swings cut by the
    clip's ends. None when there is no such swing (no schedule, a stand, a walk)."""
    if reference.foot_contacts is None or not reference.foot_contacts.any():
        return None
    down = np.asarray(reference.foot_contacts, dtype=bool)  # (T, K)
    line_support = down.sum(axis=1) <= 2  # (T,)
    swings = []
    for up in (~down & line_support[:, None]).T:  # (T,) per foot
        edges = np.flatnonzero(np.diff(np.r_[False, up, False].astype(np.int8)))  # starts and ends of each swing
        starts, ends = edges[::2], edges[1::2]
        inside = (starts > 0) & (ends < len(up))
        swings.append(ends[inside] - starts[inside])
    frames = np.concatenate(swings)
    return float(np.median(frames)) / reference.fps if len(frames) else None


def knot_seconds(cfg: TrackingConfig, robot: Robot, reference: Motion) -> float:
    """The knot spacing: ``cfg.knot_s``, else FLIGHT_KNOT_S for a clip with flight phases on three or more feet
    (:func:`akd_core.physics.verdict.motion_class` "dynamic"), else KNOT_S."""
    if cfg.knot_s is not None:
        if not (np.isfinite(cfg.knot_s) and cfg.knot_s > 0):
            raise ConfigError(f"knot_s must be a positive number of seconds, got {cfg.knot_s!r}")
        return float(cfg.knot_s)
    return FLIGHT_KNOT_S if motion_class(robot, reference) == "dynamic" else KNOT_S


def default_control_hz(cfg: TrackingConfig, robot: Robot, reference: Motion) -> float | None:
    """``cfg.control_hz``, else FLIGHT_CONTROL_HZ for a clip with flight phases on three or more feet
    (:func:`akd_core.physics.verdict.motion_class` "dynamic") tracked at a lower rate, else None (the reference's fps,
    :func:`akd_core.physics.targets.control_rate`)."""
    if cfg.control_hz is not None:
        return cfg.control_hz
    if motion_class(robot, reference) == "dynamic" and reference.fps < FLIGHT_CONTROL_HZ:
        return FLIGHT_CONTROL_HZ
    return None


def default_horizon_s(reference: Motion, biped: bool, knot_s: float = KNOT_S, flight: bool = False) -> float:
    """0.8 s for bipeds (a balance horizon: a fall announces itself late); else 0.4 s (FLIGHT_HORIZON_S for a clip
    with flight phases, ``flight``), or SWING_HORIZON_FACTOR x the reference's unsupported swing
    (:func:`swing_seconds`) rounded to the knot grid where that is longer (a slow trot's or bound's long swings)."""
    if biped:
        return 0.8
    shortest = FLIGHT_HORIZON_S if flight else 0.4
    swing = swing_seconds(reference)
    if swing is None:
        return shortest
    knots = int(np.floor(SWING_HORIZON_FACTOR * swing / knot_s + 0.5))
    return max(shortest, round(knots * knot_s, 6))


def sized(cfg: TrackingConfig, robot: Robot, reference: Motion,
          device: str) -> tuple[SamplingConfig, float, CostWeights]:
    """Sampling settings, horizon and cost weights from the robot and device. Bipeds (two feet) balance on a narrow
    support: they need a longer look-ahead (0.8 s: a fall announces itself late), twice the samples and
    :data:`BIPED_WEIGHTS`; other legged robots get :data:`LEGGED_WEIGHTS` and a horizon that sees their swinging
    feet land (:func:`default_horizon_s`). The knot noise is 0.04 rad for every robot: around the inverse-dynamics
    feedforward the wider 0.15 rad bipeds needed before made the ostrich walk 0.094 m off instead of 0.024
    (docs/tracking.md)."""
    biped = is_biped(robot, reference)
    cuda = device.startswith("cuda")
    fast = cfg.fast and not biped and not cuda
    samples = cfg.samples or (1024 if cuda else (64 if biped else (FAST_PRESET.samples if fast else 32)))
    noise = cfg.noise_rad if cfg.noise_rad is not None else 0.04
    horizon = cfg.horizon_s if cfg.horizon_s is not None else \
        default_horizon_s(reference, biped, knot_seconds(cfg, robot, reference),
                          flight=not biped and motion_class(robot, reference) == "dynamic")
    if samples < 2 or noise < 0 or horizon <= 0:
        raise ConfigError(f"tracking needs --samples >= 2, --noise >= 0 and --horizon > 0 (got {samples}, {noise}, "
                          f"{horizon})")
    weights = cfg.weights if cfg.weights is not None else (BIPED_WEIGHTS if biped else LEGGED_WEIGHTS)
    if cfg.yaw_rate_weight is not None:
        if not np.isfinite(cfg.yaw_rate_weight) or cfg.yaw_rate_weight < 0:
            raise ConfigError(f"--yaw-rate-weight must be a number >= 0, got {cfg.yaw_rate_weight}")
        weights = dataclasses.replace(weights, yaw_rate=float(cfg.yaw_rate_weight))
    return (SamplingConfig(samples=samples, iterations=cfg.iterations or 1, noise_rad=noise, select=cfg.select,
                           temperature=cfg.temperature, antithetic=cfg.antithetic or (fast and FAST_PRESET.antithetic)),
            horizon, weights)


def build(robot: Robot, motion: Motion, cfg: TrackingConfig, engine_name: str | None = None,
          terrain: Terrain | None = None) -> Setup:
    """Resample the reference to the control rate, size the planner, build the engine and the start state, on
    ``terrain`` (None: flat ground; the executing and the planning engine alike)."""
    terrain = terrain if terrain is not None else Terrain.flat()
    if not (np.isfinite(cfg.warm_decay_s) and cfg.warm_decay_s >= 0):
        raise ConfigError(f"--warm-decay must be >= 0 seconds (0: the warm start kept as planned), got "
                          f"{cfg.warm_decay_s!r}")
    motion.check_robot(robot, "reference")
    device = resolve_device(cfg.device)
    name = engine_name or resolve_engine(cfg.engine, device)
    bound = cfg.sim_dt if cfg.sim_dt is not None else (2e-3 if name == "mujoco" else 1e-3)
    hz, steps, sim_dt = control_rate(motion, default_control_hz(cfg, robot, motion), bound)
    reference = motion if abs(motion.fps - hz) < 1e-9 else motion.resample(hz)
    if reference.num_frames < 2:
        raise MotionError("the reference clip needs at least two frames at the control rate to track")
    physics = default_physics(robot, kp=cfg.kp, kd=cfg.kd, armature=cfg.armature, contact_mu=cfg.contact_mu,
                              kp_per_kg=KP_PER_KG_MPC)
    require_colliding_feet(robot, reference)
    schedule = contact_schedule(robot, reference)  # every contact part of every foot (heel and toe of a sole)
    feet = Feet(schedule.names, schedule.points)
    links = mass_links(robot)
    if cfg.integrator is not None and cfg.integrator not in MUJOCO_INTEGRATORS:
        raise ConfigError(f"--integrator must be one of {MUJOCO_INTEGRATORS}, got {cfg.integrator!r}")
    biped = is_biped(robot, reference)
    integrator = cfg.integrator or ("implicitfast" if biped or not feet.names else "euler")
    while True:
        engine = make_engine(name, robot, physics, sim_dt, steps, feet, links, device=device, terrain=terrain,
                             **({"ground_pairs": GROUND_PAIRS, "integrator": integrator} if name == "mujoco" else {}))
        planning_engine = planning_model(cfg, engine, robot, physics, biped, integrator)
        if name != "mujoco" or cfg.integrator is not None or integrator != "euler":
            break
        why = euler_unstable(engine.model) or euler_unstable(planning_engine.model)
        if why is None:
            break
        log.info("tracking with MuJoCo's implicitfast integrator, not euler: %s", why)
        integrator = "implicitfast"
    root0, shift = start_pose(robot, reference, terrain)
    start = BodyState(root0, reference.root_quat[0], reference.joint_pos[0], reference.root_lin_vel()[0],
                      reference.root_ang_vel()[0], reference.joint_vel()[0]).astype(np.float32).astype(np.float64)
    fk = ForwardKinematics(robot)
    ref_root = reference.root_pos.astype(np.float64) + np.array([0.0, 0.0, shift])
    with torch.no_grad():
        link_pos, _ = fk(torch.as_tensor(ref_root), torch.as_tensor(reference.root_quat, dtype=torch.float64),
                         torch.as_tensor(reference.joint_pos, dtype=torch.float64))
    ids = [robot.link_names.index(n) for n in links]
    ref = Reference(link_pos=link_pos.numpy()[:, ids], root_pos=ref_root,
                    root_quat=reference.root_quat.astype(np.float64),
                    root_lin_vel=reference.root_lin_vel().astype(np.float64),
                    joint_pos=reference.joint_pos.astype(np.float64),
                    root_ang_vel=reference.root_ang_vel().astype(np.float64))
    sampling, horizon_s, weights = sized(cfg, robot, reference, device)
    cost = TrackingCost(ref, weights, physics.effort, CONTACT_FORCE_FRACTION * robot.total_mass * GRAVITY,
                        foot_of=schedule.foot_of)
    frames = lambda seconds: max(1, int(round(seconds * hz)))  # noqa: E731
    torques = None
    if cfg.inverse_dynamics and feet.names:
        # the ground pushes at the parts the schedule puts down (the toe line alone at toe-off)
        torques = control_rate_torques(robot, motion, reference, physics, feet, shift, schedule.intended)
    return Setup(robot=robot, reference=reference, physics=physics, engine=engine, planning_engine=planning_engine,
                 cost=cost, ref=ref, start=start,
                 height_shift=shift, feedforward=feedforward_targets(robot, reference, physics,
                                                                     cfg.velocity_feedforward, torques),
                 cfg=cfg, sampling=sampling, weights=weights, horizon=frames(horizon_s),
                 replan=frames(replan_seconds(cfg, biped, device)), knot=frames(knot_seconds(cfg, robot, reference)),
                 settle_m=cfg.settle_fraction * pass_limit(cfg, robot, reference, terrain),
                 boost_m=cfg.boost_fraction * pass_limit(cfg, robot, reference, terrain) if cfg.samples is None
                 else 0.0, terrain=terrain)


def pass_limit(cfg: TrackingConfig, robot: Robot, reference: Motion, terrain: Terrain | None = None) -> float:
    """The clip's pass limit on the link error (m): ``link_err_limit_m``, else its motion class's (on ``terrain``)."""
    for name in ("settle_fraction", "boost_fraction"):
        value = getattr(cfg, name)
        if not (np.isfinite(value) and value >= 0):
            raise ConfigError(f"{name} must be >= 0 (0: off), got {value!r}")
    return cfg.link_err_limit_m or TrackingLimits().limit(motion_class(robot, reference), terrain)


def replan_seconds(cfg: TrackingConfig, biped: bool, device: str) -> float:
    """The re-plan period: ``cfg.replan_s``, else FAST_PRESET's with ``fast`` (not for bipeds, not on CUDA), else
    DEFAULT_REPLAN_S (BIPED_REPLAN_S for bipeds)."""
    if cfg.replan_s is not None:
        if not (np.isfinite(cfg.replan_s) and cfg.replan_s > 0):
            raise ConfigError(f"--replan must be a positive number of seconds, got {cfg.replan_s!r}")
        return float(cfg.replan_s)
    if biped:
        return BIPED_REPLAN_S
    fast = cfg.fast and not device.startswith("cuda")
    return FAST_PRESET.replan_s if fast else DEFAULT_REPLAN_S


def planning_model(cfg: TrackingConfig, engine: Engine, robot: Robot, physics: PhysicsParams,
                   biped: bool = False, integrator: str | None = None) -> Engine:
    """The engine the planner rolls candidates out in: for MuJoCo a model stepping ``cfg.plan_dt`` (default
    BIPED_PLAN_STEP_FACTOR x the executed step for a biped, rounded down to a divisor of the substeps) with the
    executed model's contact time constant and, for robots with three or more feet, SIMPLE_PLANNING_CONTACTS;
    ``engine`` itself for Newton, ``plan_dt=0``, or a factor of 1 where the contacts need no simplifying."""
    if cfg.plan_dt is not None and (not np.isfinite(cfg.plan_dt) or cfg.plan_dt < 0):
        raise ConfigError(f"--plan-dt must be >= 0 seconds (0: plan at the tracking step), got {cfg.plan_dt!r}")
    if engine.name != "mujoco" or cfg.plan_dt == 0:
        return engine
    default = BIPED_PLAN_STEP_FACTOR if biped else (FAST_PRESET.plan_step_factor if cfg.fast else 1)
    factor = default if cfg.plan_dt is None else max(1, int(round(cfg.plan_dt / engine.sim_dt)))
    factor = min(factor, engine.steps)
    while engine.steps % factor:
        factor -= 1
    simple = SIMPLE_PLANNING_CONTACTS and not biped
    if factor == 1 and not (simple and has_simplifiable_contacts(engine)):
        return engine
    return make_engine("mujoco", robot, physics, engine.sim_dt * factor, engine.steps // factor, engine.feet,
                       engine.link_names, contact_timeconst_s=contact_timeconst(physics, engine.sim_dt),
                       simple_contacts=simple, terrain=engine.terrain, ground_pairs=GROUND_PAIRS,
                       integrator=integrator)


# ----------------------------------------------------------------------------- execution record
@dataclass
class Execution:
    """What the engine executed so far: states at control frames, torques per period, contacts per step."""

    states: list[BodyState] = field(default_factory=list)  # each (R, ...) frames after the start
    torques: list[np.ndarray] = field(default_factory=list)  # (R, J)
    torque_peak: list[np.ndarray] = field(default_factory=list)
    foot_vel: list[np.ndarray] = field(default_factory=list)  # (R*S, K, 3)
    foot_force: list[np.ndarray] = field(default_factory=list)  # (R*S, K)
    foot_height: list[np.ndarray] = field(default_factory=list)  # (R*S, K)
    diverged: bool = False

    def add(self, batch: RolloutBatch) -> None:
        self.states.append(batch.states[0][1:])
        self.torques.append(batch.torques[0])
        self.torque_peak.append(batch.torque_peak[0])
        self.foot_vel.append(batch.foot_vel[0])
        self.foot_force.append(batch.foot_force[0])
        self.foot_height.append(batch.foot_height[0])
        self.diverged |= bool(batch.diverged[0])


def execute(engine: Engine, start: BodyState, pd_targets: np.ndarray) -> tuple[Execution, Any]:
    """Replay control-rate targets (T, J) from ``start`` in one continuous ``advance``."""
    record = Execution()
    state = engine.start(start)
    batch = engine.advance(state, pd_targets)
    record.add(batch)
    return record, batch.end


def to_tracked(setup: Setup, record: Execution, pd_targets: np.ndarray) -> tuple[TrackedMotion, np.ndarray]:
    """(TrackedMotion at the control rate, torque_peak (T, J)). The last frame repeats the last period's torque."""
    states = BodyState.concat([setup.start[None]] + record.states)
    torques = np.concatenate(record.torques + [record.torques[-1][-1:]])
    peak = np.concatenate(record.torque_peak + [record.torque_peak[-1][-1:]])
    quat = states.root_quat / np.linalg.norm(states.root_quat, axis=-1, keepdims=True)
    tracked = TrackedMotion(dt=1.0 / setup.reference.fps, joint_names=setup.robot.joint_names, pd_targets=pd_targets,
                            joint_torques=torques, joint_pos=states.joint_pos, joint_vel=states.joint_vel,
                            root_pos=states.root_pos, root_quat=quat, root_lin_vel=states.root_lin_vel,
                            root_ang_vel=states.root_ang_vel, kp=setup.physics.kp, kd=setup.physics.kd)
    return tracked, peak


def record_metrics(setup: Setup, record: Execution, pd_targets: np.ndarray) -> tuple[TrackedMotion, dict[str, Any]]:
    tracked, peak = to_tracked(setup, record, pd_targets)
    schedule = contact_schedule(setup.robot, setup.reference)
    vel, force, height = (np.concatenate(x) for x in (record.foot_vel, record.foot_force, record.foot_height))
    slip = stance_slip(vel, force, setup.cost.contact_force_n, height, schedule.foot_of)  # at the parts touching
    match = None
    if schedule.intended is not None:  # the engine's contacts against the schedule (height-based counts near misses)
        match = contact_match(np.concatenate(record.foot_force), schedule.intended, setup.engine.steps,
                              setup.cost.contact_force_n, schedule.foot_of)
    metrics = tracking_metrics(setup.robot, setup.reference, setup.height_shift, tracked, peak, setup.physics.effort,
                               setup.engine.link_names, record.diverged, slip, ref_link_pos=setup.ref.link_pos,
                               schedule_match=match, terrain=setup.terrain)
    metrics["touchdown_speed_mps"] = touchdown_speed(vel, force, setup.cost.contact_force_n, height, schedule.foot_of)
    return tracked, metrics


# ----------------------------------------------------------------------------- sampling MPC
def knot_offsets(t0: int, t_end: int, knot_frames: np.ndarray, knot_values: np.ndarray,
                 offset_t0: np.ndarray) -> np.ndarray:
    """Per-frame offsets for frames t0+1..t_end (..., H, J): linear from the executed offset at t0 through the knots
    (..., K, J) at absolute frames ``knot_frames`` (K,), held after the last knot."""
    frames = np.arange(t0 + 1, t_end + 1, dtype=np.float64)
    anchors = np.r_[float(t0), knot_frames.astype(np.float64)]
    weights = np.zeros((len(frames), len(anchors)))
    for a in range(len(anchors)):
        hat = np.zeros(len(anchors))
        hat[a] = 1.0
        weights[:, a] = np.interp(frames, anchors, hat)
    values = np.concatenate([np.broadcast_to(offset_t0, knot_values.shape[:-2] + (1, offset_t0.shape[-1])),
                             knot_values], axis=-2)
    return np.einsum("ha,...aj->...hj", weights, values)


@dataclass
class PlanWindow:
    """One re-plan: control frames t..t_end, knots at ``knot_frames``, the last executed target at t."""

    setup: Setup
    t: int
    t_end: int
    knot_frames: np.ndarray  # (K,)
    executed: np.ndarray  # (J,) the target already applied at frame t

    def targets(self, values: np.ndarray) -> np.ndarray:
        """Knot offsets (N, K, J) -> control-rate targets (N, H+1, J): feedforward + offsets, within the joint
        limits and the velocity limits (from the executed target on)."""
        s, t = self.setup, self.t
        robot, ff = s.robot, s.feedforward
        offsets = knot_offsets(t, self.t_end, self.knot_frames, values, self.executed - ff[t])
        future = np.clip(ff[t + 1:self.t_end + 1] + offsets, robot.lower, robot.upper)
        future = rate_limited(future, max_target_step(robot, s.reference.fps), self.executed)
        return np.concatenate([np.broadcast_to(self.executed, (len(values), 1, len(self.executed))), future], 1)

    def score(self, rollout, start, values: np.ndarray) -> np.ndarray:
        """Costs (N,) of knot offsets (N, K, J) rolled out from the engine state ``start``."""
        return self.score_terms(rollout, start, values)[0]

    def score_terms(self, rollout, start, values: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """:meth:`score` and the cost's terms (each (N,))."""
        batch = rollout(start, self.targets(values))
        first = np.broadcast_to(self.executed - self.setup.feedforward[self.t], (len(values), 1, values.shape[-1]))
        offsets = np.concatenate([first, values], axis=1)
        terms = self.setup.cost.terms(batch, self.t, offsets)
        return self.setup.cost.total(terms), terms


def track_mpc(setup: Setup, checkpoint: Path | None = None, progress: bool = True) -> tuple[np.ndarray, Execution,
                                                                                           dict[str, Any]]:
    """Sampling MPC over the whole clip. Returns (executed pd_targets (T, J) float32, the execution, info).
    Checkpoints every few seconds and on Ctrl-C; a re-run with the same setup resumes bit-identically."""
    from tqdm import tqdm

    robot, engine = setup.robot, setup.engine
    frames, j = setup.reference.num_frames, robot.num_dofs
    lower, upper = np.asarray(robot.lower, dtype=np.float64), np.asarray(robot.upper, dtype=np.float64)
    planner = SamplingPlanner(setup.sampling, seed=setup.cfg.seed)
    boosted = SamplingPlanner(dataclasses.replace(setup.sampling,
                                                  samples=setup.sampling.samples * BOOST_SAMPLES_FACTOR))
    boosted.rng = planner.rng  # one stream of draws: a resumed run replays the same plans
    ff = setup.feedforward
    # the warm start fades toward the feedforward with time constant warm_decay_s (one factor per re-plan)
    tau = setup.cfg.warm_decay_s
    decay = float(np.exp(-setup.replan / (tau * setup.reference.fps))) if tau and tau > 0 else 1.0
    first = np.clip(ff[0], lower, upper).astype(np.float32).astype(np.float64)
    st: dict[str, Any] = {"t": 0, "targets": np.zeros((frames, j)), "knots": {}, "record": Execution(),
                          "engine_state": engine.start(setup.start), "rng": planner.rng.bit_generator.state,
                          "rollouts": 0, "seconds": 0.0, "costs": [], "settled": 0, "boosted": 0}
    st["targets"][0] = first
    key = _setup_key(setup)
    if checkpoint is not None and checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=False)
        if saved.get("key") == key:
            st = saved["state"]
            planner.rng.bit_generator.state = st["rng"]
            log.info("resuming tracking from %s at frame %d/%d", checkpoint, st["t"], frames - 1)
        else:
            log.info("ignoring %s: it belongs to another reference or configuration", checkpoint)

    def save() -> None:
        if checkpoint is not None:
            with atomic_path(checkpoint) as tmp:
                torch.save({"key": key, "state": st}, tmp)

    bar = tqdm(total=frames - 1, initial=st["t"], desc="track (mpc)", unit="frame", disable=not progress)
    last_save = time.perf_counter()
    try:
        while st["t"] < frames - 1:
            tic = time.perf_counter()
            t = st["t"]
            # the horizon ends on a knot of the fixed grid (or the clip's last frame), so every knot keeps its
            # meaning from one re-plan to the next and warm-starts the next plan exactly
            t_end = min(-(-(t + setup.horizon) // setup.knot) * setup.knot, frames - 1)
            grid = np.arange((t // setup.knot + 1) * setup.knot, t_end + 1, setup.knot)
            knot_frames = grid if len(grid) and grid[-1] == t_end else np.r_[grid, t_end]
            known = dict(st["knots"])  # st changes only once the re-plan's step has executed (exact resume)
            nominal, last = [], None
            for f in knot_frames:
                last = known.get(int(f), last if last is not None else _last_knot(known, j))
                nominal.append(last)
            nominal = np.array(nominal) * decay
            window = PlanWindow(setup, t, t_end, knot_frames, st["targets"][t])
            score = partial(window.score, setup.planning_engine.rollout, st["engine_state"])
            result, predicted, sliding, nominal_cost = settled_plan(window, setup, st["engine_state"], nominal)
            if result is None:
                # a drifting window gets more candidates (adaptive sample count): accuracy where it is needed,
                # instead of a second attempt at the whole clip
                boost = setup.boost_m > 0 and (predicted > setup.boost_m
                                               or sliding > BOOST_SLIP_FRACTION * SLIP_LIMIT_MPS)
                # the rollout that predicted the drift scored the nominal: the planner does not repeat it
                result = (boosted if boost else planner).improve(nominal, score, nominal_cost)
                if nominal_cost is not None:
                    result = dataclasses.replace(result, evaluated=result.evaluated + 1)
                st["boosted"] += int(boost)
            else:
                st["settled"] += 1
            for f, v in zip(knot_frames, result.nominal):
                known[int(f)] = v
            for f in [f for f in known if f <= t]:
                del known[f]
            commit = min(t + setup.replan, frames - 1)
            plan = window.targets(result.nominal[None])[0].astype(np.float32).astype(np.float64)  # what is stored
            executed = engine.advance(st["engine_state"], plan[:commit - t + 1])
            st["rollouts"] += result.evaluated
            st["costs"].append(result.cost)
            st["knots"], st["rng"] = known, planner.rng.bit_generator.state
            st["record"].add(executed)
            st["engine_state"] = executed.end
            st["targets"][t + 1:commit + 1] = plan[1:commit - t + 1]
            st["t"] = commit
            st["seconds"] += time.perf_counter() - tic
            bar.update(commit - t)
            bar.set_postfix(cost=f"{result.cost:.3f}")
            if time.perf_counter() - last_save > 5.0:
                save()
                last_save = time.perf_counter()
    except KeyboardInterrupt:
        save()
        raise
    finally:
        bar.close()
    save()
    info = {"rollouts": st["rollouts"], "replans": len(st["costs"]), "settled_replans": st["settled"],
            "boosted_replans": st["boosted"],
            "seconds": st["seconds"], "mean_plan_cost": float(np.mean(st["costs"])) if st["costs"] else None}
    return st["targets"].astype(np.float32), st["record"], info


def settled_plan(window: PlanWindow, setup: Setup, state: Any,
                 nominal: np.ndarray) -> tuple[PlanResult | None, float, float, float | None]:
    """(The warm-started plan as it is, or None; the link error and the stance slip one rollout of it predicts over
    the horizon; that rollout's cost, None where there was none). The plan is kept when it already tracks well
    within the clip's limit with its feet not sliding (event-triggered MPC: sampling where the robot drifts, not
    where the last plan still holds). Costs one rollout; nothing without settling or boosting."""
    if setup.settle_m <= 0 and setup.boost_m <= 0:
        return None, 0.0, 0.0, None
    cost, terms = window.score_terms(setup.planning_engine.rollout, state, nominal[None])
    link = float(terms["link"][0]) if np.isfinite(cost[0]) and terms["diverged"][0] == 0 else np.inf
    slip = float(terms["slip_mps"][0])
    if link <= setup.settle_m and terms["orientation"][0] <= SETTLED_TILT_RAD and \
            slip <= setup.cfg.settle_fraction * SLIP_LIMIT_MPS:
        return PlanResult(nominal, float(cost[0]), 1), link, slip, float(cost[0])
    return None, link, slip, float(cost[0])


def _last_knot(known: dict[int, np.ndarray], joints: int) -> np.ndarray:
    """Warm start for a knot not planned before: the latest known knot's offset, else zero."""
    return known[max(known)] if known else np.zeros(joints)


def _setup_key(setup: Setup) -> str:
    import hashlib

    h = hashlib.sha1()
    for arr in (setup.reference.joint_pos, setup.reference.root_pos, setup.feedforward):
        h.update(np.ascontiguousarray(arr).tobytes())
    cfg = {k: v for k, v in setup.cfg.to_dict().items() if k not in ("device",)}
    h.update(repr(sorted(cfg.items())).encode())
    # the knot spacing is derived (the clip's flight phases, a second attempt's finer grid), not only configured
    h.update(f"{setup.engine.name} {setup.engine.sim_dt} {setup.sampling} {setup.horizon} knot {setup.knot}".encode())
    if getattr(setup.engine, "integrator", "implicitfast") != "implicitfast":  # keys from before the option hold
        h.update(setup.engine.integrator.encode())
    if not setup.terrain.is_flat:  # a checkpoint made on other ground is not resumed
        h.update(setup.terrain.spec.encode())
    return h.hexdigest()


# ----------------------------------------------------------------------------- the stage
def keep_best_replay(setup: Setup, tracked: TrackedMotion, metrics: dict[str, Any],
                     replays: tuple[tuple[str, np.ndarray, TrackedMotion, dict[str, Any]], ...]
                     ) -> tuple[str, TrackedMotion, dict]:
    """The MPC result, or a plain replay (name, targets, its TrackedMotion and metrics) that tracks better (upright
    first, then link error). Every stored result is a real execution from the same start, so falling back keeps the
    replay exact."""
    selected = "optimised"
    step = max_target_step(setup.robot, setup.reference.fps)
    for name, targets, candidate, candidate_metrics in replays:
        if name == "naive" and not np.allclose(rate_limited(targets, step), targets, atol=1e-6):
            continue  # the reference asks for more than the velocity limits: not a command we may hand out
        if tracks_better(candidate_metrics, metrics):
            log.warning("sampling MPC tracked worse than the %s replay (link error %.3f m vs %.3f m%s); keeping the "
                        "%s targets. More --samples or another --noise may help.", name, metrics["link_pos_err_m"],
                        candidate_metrics["link_pos_err_m"], ", and it fell" if metrics["fell"] else "", name)
            selected, tracked, metrics = name, dataclasses.replace(candidate), dict(candidate_metrics)
    return selected, tracked, metrics


def track_motion(robot: Robot, motion: Motion, cfg: TrackingConfig | None = None, checkpoint: Path | None = None,
                 progress: bool = True, terrain: Terrain | None = None,
                 segments: list[dict[str, Any]] | None = None) -> tuple[TrackedMotion, dict[str, Any]]:
    """Naive PD replay + tracking of ``motion`` by ``cfg.method`` on ``terrain`` (None: flat ground; a run's:
    :func:`akd_core.model.terrain.run_terrain`). Returns the TrackedMotion (with ``naive``) and the metrics the
    manifest records. ``segments``: a motion program's segments (the gait stage's ``segments``): a segment that
    misses its own limit makes the MPC plan the clip again as a failing clip does, and the manifest gets each
    segment's stance slip (``segment_slip_mps``)."""
    cfg = cfg or TrackingConfig()
    if cfg.method not in METHODS:
        raise ConfigError(f"--method must be one of {METHODS}, got {cfg.method!r}")
    if cfg.method == "adam":
        if terrain is not None and not terrain.is_flat:
            raise ConfigError(f"--method adam tracks on flat ground only; this clip was made on terrain "
                              f"{terrain.spec!r}: use --method mpc")
        return track_adam(robot, motion, cfg, checkpoint=checkpoint, progress=progress)
    with one_torch_thread():
        return _track_mpc_motion(robot, motion, cfg, checkpoint, progress, terrain, segments)


@contextlib.contextmanager
def one_torch_thread():
    """torch on one thread while MuJoCo's rollout threads run: the MPC path's torch work is small FK batches, and
    torch's thread pool spinning beside MuJoCo's threads made them 5-10x slower on 2 busy cores (metrics of a 4 s
    a1 clip: 0.4 s with torch's two threads, 0.045 s with one)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def failing_segments(setup: Setup, tracked: TrackedMotion, segments: list[dict[str, Any]] | None,
                     cfg: TrackingConfig) -> list[int]:
    """Numbers (1-based) of the program's segments whose tracked link error misses their own class's limit
    (:func:`~akd_core.physics.verdict.judge_segments`); none without a program."""
    if not segments:
        return []
    judged = judge_segments(setup.robot, setup.reference, tracked, {"height_shift_m": setup.height_shift}, segments,
                            link_err_limit_m=cfg.link_err_limit_m, terrain=setup.terrain)
    return [s["segment"] for s in judged if not s["passed"]]


def segment_slips(setup: Setup, record: Execution, segments: list[dict[str, Any]]) -> list[float]:
    """Stance slip (m/s, as the clip's ``stance_slip_mps``: engine contacts, at a foot's lowest touching part) over
    each segment's simulation steps."""
    vel, force = np.concatenate(record.foot_vel), np.concatenate(record.foot_force)
    height = np.concatenate(record.foot_height)
    foot_of = contact_schedule(setup.robot, setup.reference).foot_of
    steps, fps = setup.engine.steps, setup.reference.fps
    out = []
    for seg in segments:
        a = int(round(seg["start_s"] * fps)) * steps
        b = max(min(int(round(seg["end_s"] * fps)) * steps, len(vel)), a)
        out.append(stance_slip(vel[a:b], force[a:b], setup.cost.contact_force_n, height[a:b], foot_of)
                   if b > a else float("nan"))
    return out


def retry_limit(cfg: TrackingConfig, setup: Setup) -> float:
    """The link error above which a default-sampled MPC result is re-planned (0: never; explicit --samples are
    used as given)."""
    if cfg.samples is not None:
        return 0.0
    if cfg.retry_above_m is not None:
        if cfg.retry_above_m < 0:
            raise ConfigError(f"--retry-above must be >= 0 m (0: never re-plan), got {cfg.retry_above_m}")
        return float(cfg.retry_above_m)
    if cfg.link_err_limit_m is not None:
        return float(cfg.link_err_limit_m)
    return TrackingLimits().limit(motion_class(setup.robot, setup.reference), setup.terrain)


def retry_checkpoint(checkpoint: Path) -> Path:
    """The second attempt's checkpoint beside the first's (``track_ckpt-x2.pt``)."""
    return checkpoint.with_name(f"{checkpoint.stem}-x{RETRY_SAMPLES_FACTOR}{checkpoint.suffix}")


def _attempt(setup: Setup, metrics: dict[str, Any], selected: str, seconds: float) -> dict[str, Any]:
    """One attempt's entry in the manifest's ``attempts``: its settings and result."""
    fps = setup.reference.fps
    return {"samples": setup.sampling.samples, "knot_s": setup.knot / fps, "horizon_s": setup.horizon / fps,
            "control_hz": fps, "link_pos_err_m": metrics["link_pos_err_m"], "fell": metrics["fell"],
            "selected_targets": selected, "seconds": seconds}


def _second_attempt(setup: Setup, checkpoint: Path | None, progress: bool, limit: float, tracked: TrackedMotion,
                    metrics: dict[str, Any], selected: str, info: dict[str, Any],
                    segments: list[dict[str, Any]] | None = None,
                    rebuild: Callable[[TrackingConfig], Setup] | None = None):
    """Re-plan the clip with RETRY_SAMPLES_FACTOR x the samples; robots with three or more feet on FLIGHT_KNOT_S
    knots, at least FLIGHT_HORIZON_S ahead unless a horizon was asked for, controlled at FLIGHT_CONTROL_HZ unless a
    rate was asked for (``rebuild``: the setup of the same clip under another configuration). Its own checkpoint, so
    an interrupted second attempt resumes without redoing the first; keep whichever of the two tracks better."""
    first = _attempt(setup, metrics, selected, info["seconds"])
    # robots with three or more feet re-plan on knots as fine as a flight gait's (FLIGHT_KNOT_S): a fixed grid of
    # 0.1 s is what their first attempts missed by (go1's flightless bound 0.049 -> 0.021 m, erd_quadruped's pace 0.030
    # -> 0.020), and at a flight gait's control rate (the zoo's go1 bound 0.021 -> 0.015 m, anymal_b's gallop slowed
    # to 1.11 m/s and flightless 0.058 -> 0.038); bipeds keep theirs
    fine = setup.cfg.knot_s is None and not is_biped(setup.robot, setup.reference)
    base = setup
    if fine and rebuild is not None and setup.cfg.control_hz is None and setup.reference.fps < FLIGHT_CONTROL_HZ:
        base = rebuild(dataclasses.replace(setup.cfg, control_hz=FLIGHT_CONTROL_HZ))
    knot = min(base.knot, max(1, int(round(FLIGHT_KNOT_S * base.reference.fps)))) if fine else base.knot
    # ... and plan as far ahead as a flight gait (FLIGHT_HORIZON_S): anymal_b's gallop slowed to 1.11 m/s and
    # flightless, seeds 0-5 at 100 Hz on 0.04 s knots, 0.4 s: 0.026-0.084 m (mean 0.047), 0.6 s: 0.021-0.031 (0.025)
    horizon = max(base.horizon, int(round(FLIGHT_HORIZON_S * base.reference.fps))) \
        if fine and setup.cfg.horizon_s is None else base.horizon
    more = dataclasses.replace(base, knot=knot, horizon=horizon, sampling=dataclasses.replace(
        base.sampling, samples=setup.sampling.samples * RETRY_SAMPLES_FACTOR))
    log.warning("tracked link error %.3f m%s is above %.3f m: planning the clip again with %d samples, knots %.2f s "
                "apart, %.2f s ahead, at %g Hz", metrics["link_pos_err_m"], " and it fell" if metrics["fell"] else "",
                limit, more.sampling.samples, knot / more.reference.fps, horizon / more.reference.fps,
                more.reference.fps)
    again = None if checkpoint is None else retry_checkpoint(checkpoint)
    pd_targets, record, info2 = track_mpc(more, again, progress)
    tracked2, metrics2 = record_metrics(more, record, pd_targets)
    second = _attempt(more, metrics2, "optimised", info2["seconds"])
    both = {"attempts": [first, second], "rollouts": info["rollouts"] + info2["rollouts"],
            "seconds": info["seconds"] + info2["seconds"]}
    # upright first, then the segments that miss their limits, then the link error
    failing = (len(failing_segments(setup, tracked, segments, setup.cfg)), len(failing_segments(more, tracked2,
                                                                                              segments, more.cfg)))
    if (metrics2["fell"], failing[1]) < (metrics["fell"], failing[0]) or (
            (metrics2["fell"], failing[1]) == (metrics["fell"], failing[0]) and tracks_better(metrics2, metrics)):
        return more, tracked2, metrics2, "optimised", dict(info2, **both), record
    log.warning("the second attempt tracked no better (%.3f m): keeping the first", metrics2["link_pos_err_m"])
    return setup, tracked, metrics, selected, dict(info, **both), None


def _naive_replay(setup: Setup) -> tuple[np.ndarray, Execution, TrackedMotion, dict[str, Any]]:
    """The baseline: the reference's joint angles replayed as PD targets (targets, record, clip, metrics)."""
    targets = setup.reference.joint_pos.astype(np.float32)
    record, _ = execute(setup.engine, setup.start, targets.astype(np.float64))
    naive, metrics = record_metrics(setup, record, targets)
    return targets, record, naive, metrics


def _track_mpc_motion(robot: Robot, motion: Motion, cfg: TrackingConfig, checkpoint: Path | None,
                      progress: bool, terrain: Terrain | None = None,
                      segments: list[dict[str, Any]] | None = None) -> tuple[TrackedMotion, dict[str, Any]]:
    tic = time.perf_counter()
    setup = build(robot, motion, cfg, terrain=terrain)
    limit = retry_limit(cfg, setup)  # a bad --retry-above fails here, before any rollout
    naive_targets, naive_record, naive, naive_metrics = _naive_replay(setup)
    ff_targets = setup.feedforward.astype(np.float32)
    ff_record, _ = execute(setup.engine, setup.start, ff_targets.astype(np.float64))
    ff_tracked, ff_metrics = record_metrics(setup, ff_record, ff_targets)
    if (not ff_metrics["fell"] and ff_metrics["link_pos_err_m"] <= cfg.feedforward_ok_m
            and ff_metrics["max_heading_err_deg"] <= FEEDFORWARD_OK_HEADING_DEG):
        # a consistent reference replayed with its inverse dynamics is already at the engine's noise floor: the
        # sampling noise of a re-plan can only add to it (measured: docs/tracking.md)
        log.info("the feedforward replay tracks within %.3f m and %.0f deg (link error %.4f m, heading %.1f deg): "
                 "MPC not needed", cfg.feedforward_ok_m, FEEDFORWARD_OK_HEADING_DEG, ff_metrics["link_pos_err_m"],
                 ff_metrics["max_heading_err_deg"])
        pd_targets, record, info = ff_targets, ff_record, {"rollouts": 0, "replans": 0, "seconds": 0.0,
                                                           "mean_plan_cost": None}
        tracked, metrics, selected = ff_tracked, ff_metrics, "feedforward"
    else:
        pd_targets, record, info = track_mpc(setup, checkpoint, progress)
        tracked, metrics = record_metrics(setup, record, pd_targets)
        selected, tracked, metrics = keep_best_replay(setup, tracked, metrics, (
            ("feedforward", ff_targets, ff_tracked, ff_metrics), ("naive", naive_targets, naive, naive_metrics)))
        record = {"optimised": record, "feedforward": ff_record, "naive": naive_record}[selected]
        failing = failing_segments(setup, tracked, segments, cfg) if limit else []
        if limit and (metrics["fell"] or metrics["link_pos_err_m"] > limit or failing):
            if failing and not (metrics["fell"] or metrics["link_pos_err_m"] > limit):
                log.warning("segment%s %s missed %s limit: planning the clip again", "s" * (len(failing) > 1),
                            ", ".join(str(n) for n in failing), "their" if len(failing) > 1 else "its")
            rate = setup.reference.fps
            setup, tracked, metrics, selected, info, again = _second_attempt(
                setup, checkpoint, progress, limit, tracked, metrics, selected, info, segments,
                rebuild=lambda other: build(robot, motion, other, terrain=terrain))
            record = again if again is not None else record
            if setup.reference.fps != rate:  # the baseline at the rate that was kept: tracked.npz has one dt
                _, _, naive, naive_metrics = _naive_replay(setup)
    tracked.naive = naive
    out: dict[str, Any] = dict(metrics)
    if segments:
        out["segment_slip_mps"] = segment_slips(setup, record, segments)
    out.update({f"naive_{k}": v for k, v in naive_metrics.items()})
    engine = setup.engine
    out.update({"method": "mpc", "engine": engine.name, "model": getattr(engine, "model_source", None),
                "selected_targets": selected,
                "samples": setup.sampling.samples, "iterations": setup.sampling.iterations,
                "noise_rad": setup.sampling.noise_rad, "horizon_s": setup.horizon / setup.reference.fps,
                "replan_s": setup.replan / setup.reference.fps, "knot_s": setup.knot / setup.reference.fps,
                "rollouts": info["rollouts"], "replans": info["replans"],
                "settled_replans": info.get("settled_replans"),
                "boosted_replans": info.get("boosted_replans"), "settle_link_err_m": setup.settle_m,
                "boost_link_err_m": setup.boost_m, "mean_plan_cost": info["mean_plan_cost"],
                "optimise_seconds": info["seconds"], "track_seconds": time.perf_counter() - tic,
                "sim_dt_s": engine.sim_dt, "plan_dt_s": setup.planning_engine.sim_dt,
                "integrator": getattr(engine, "integrator", None),
                "control_hz": setup.reference.fps, "device": engine.device,
                "height_shift_m": setup.height_shift, "terrain": setup.terrain.spec,
                "weights": dataclasses.asdict(setup.weights),
                "inverse_dynamics": cfg.inverse_dynamics, "feedforward_ok_m": cfg.feedforward_ok_m, "fast": cfg.fast,
                "retry_above_m": limit, "attempts": info.get("attempts"),
                **setup.physics.to_dict()})
    if metrics["fell"]:
        log.warning(fall_warning(metrics))
    return tracked, out


def stage_track(run: RunDir, resume: bool = True, progress: bool = True, **options: Any) -> dict[str, Any]:
    """`akd track RUN`: reads robot.urdf (robot.xml for an MJCF robot) + reference.npz and the run's terrain
    (manifest ``terrain`` / terrain.npz; flat without), writes tracked.npz; returns the recorded metrics."""
    fields = {f.name for f in dataclasses.fields(TrackingConfig)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise ConfigError(f"unknown tracking options {unknown}; known: {sorted(fields)}")
    # None means "the default" for CLI options, except where None is itself a setting (adam's whole-clip window)
    cfg = TrackingConfig(**{k: v for k, v in options.items() if v is not None or k in ("device", "window_s")})
    robot = load_run_robot(run)  # an MJCF robot: its robot.xml, which MuJoCo tracks on
    motion = Motion.load(run.require(REFERENCE, "akd gait --robot ROBOT --out RUN"), robot)
    terrain = run_terrain(run)  # the ground the gait stage made the clip on (flat when it recorded none)
    checkpoint = run.file(CHECKPOINT)
    if not resume:
        for old in (checkpoint, retry_checkpoint(checkpoint)):
            old.unlink(missing_ok=True)
    program = run.stage("gait").get("config", {}).get("segments") if run.stage_done("gait") else None
    with run.running_stage("track", cfg.to_dict()) as metrics:
        tracked, out = track_motion(robot, motion, cfg, checkpoint=checkpoint, progress=progress, terrain=terrain,
                                    segments=program)
        tracked.save(run.file(TRACKED))
        segments = judge_segments(robot, motion, tracked, out, program, link_err_limit_m=cfg.link_err_limit_m,
                                  terrain=terrain) if program else None
        verdict = judge_tracking(robot, motion, out, link_err_limit_m=cfg.link_err_limit_m, segments=segments,
                                 terrain=terrain)
        out.update(verdict.to_metrics())
        slips = out.pop("segment_slip_mps", None)
        if segments:
            for seg, slip in zip(segments, slips or [None] * len(segments)):
                seg["stance_slip_mps"] = slip
            out["segments"] = segments
        metrics.update(out)
    run.update_manifest(verdict={"passed": verdict.passed, "reasons": verdict.reasons})
    if not verdict.passed:
        log.warning("tracking %s", verdict.summary())
    return metrics
