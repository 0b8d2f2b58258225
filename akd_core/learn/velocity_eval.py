"""Closed-loop evaluation of a velocity-command policy (``akd eval-policy POLICY --task velocity``).

N episodes of S seconds in the evaluation's world (:class:`~akd_core.learn.env.SimWorld`: the tracking's MuJoCo
model; friction, base mass, latency and pushes drawn per episode by :func:`~akd_core.learn.env.draw_episode`, so
the same seed gives every policy the same episodes). An episode starts from the first tracked state of a library
demo (a stand in an ``akd library`` clip) and follows a command schedule: by default commands drawn uniformly from
vx [-0.5, 1.0] m/s, vy [-0.3, 0.3] m/s, yaw rate [-0.8, 0.8] rad/s every 4 s (``default_rng([seed, i, 1])``), or
the rows of a command timeline file (``--commands``; the same for every episode). The policy receives each command
clipped to the box it was trained on, as the ROS node gives it.

Scores (what was asked, not the clipped command):

- ``vx_rmse_mps``, ``vy_rmse_mps``, ``yaw_rate_rmse_radps``: at every control step, the simulator's base velocity
  in the heading frame and yaw rate right after the step against the command of the step, unfiltered and pushes
  included, leaving out only the ``settle_s`` (0.5 s) after each command change; pooled over every episode's steps
  before any fall. The yaw-rate error is also split in two (``yaw_rate_split``): the yaw rate's centred
  ``YAW_SPLIT_S`` (0.5 s, about a trot's stride) mean against the command (turning too little, too late) and the
  yaw rate about that mean (the body's swing within each stride), each as an RMSE over the same steps; and
  ``before_falls``: the share of each axis's squared error in the ``FALL_TAIL_S`` (1.5 s) before each fall (a robot
  tumbling spins and slides far off any command) and the RMSEs over the other steps, so that a policy's tracking
  can be told from its falls; and ``after_change``: the same RMSEs (and the turn's part) by the time since the
  command last changed (``AFTER_CHANGE_EDGES_S``: under 1 s, 1-2 s, 2 s on; the episode's start counts as a
  change), so that a slow response to a new command can be told from an error that stays;
- ``falls`` (tracking's rule; the episode ends there);
- ``style``: per steady command (after the settle time) the feet of the rollout against the library's at that
  command (:func:`~akd_core.learn.motion_library.style_segments`: duty factor, contact pattern, stride frequency),
  the feet found down by forward kinematics of the simulated states;
- ``gait_windows``: the steady stretches of commands at the library's gait speeds (planar speed at least
  ``GAIT_WINDOW_SPEED``) cut into ``GAIT_WINDOW_S`` windows, each read by the foot-phase classifier
  (:func:`akd_core.motion.classify.classify_gait` on the simulated states): the share that reads as the library's
  gait at that command (the box's ``gaits``; the robot's default gait for a box without them).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from akd_core.io.errors import ConfigError
from akd_core.io.fileio import atomic_path
from akd_core.learn.command import (
    EVAL_BOX,
    EVAL_RESAMPLE_S,
    CommandBox,
    CommandSchedule,
    GaitClock,
    heading_velocity,
)
from akd_core.learn.env import Randomisation, SimWorld, WorldPhysics, draw_episode
from akd_core.learn.evaluate import start_state
from akd_core.learn.motion_library import FOOT_CONTACT_HEIGHT_M, foot_heights, style_segments, style_summary
from akd_core.learn.observation import (
    ObservationHistory,
    body_angular_velocity,
    history_frames,
    sample_noise,
    velocity_observation_layout,
    velocity_observations,
)
from akd_core.learn.policy import PolicyMeta, TrackingPolicy, clip_to_limits
from akd_core.model.robot import Robot
from akd_core.physics.targets import max_target_step

log = logging.getLogger(__name__)

SETTLE_S = 0.5  # s after each command change left out of the RMSE and the style
GAIT_WINDOW_S = 1.0  # s, the windows the gait is read on
GAIT_WINDOW_SPEED = 0.3  # m/s: commands at least this fast (planar) are at gait speeds (slower ones creep)
YAW_SPLIT_S = 0.5  # s: the centred mean that splits the yaw-rate error into a turn's and a stride's part
FALL_TAIL_S = 1.5  # s before a fall whose share of the error is reported apart (a tumble, not tracking)
AFTER_CHANGE_EDGES_S = (1.0, 2.0)  # s since the command changed: the bins the error is also reported in
AXES = ("vx_mps", "vy_mps", "yaw_rate_radps")


@dataclass
class VelocityEvalConfig:
    seconds: float = 20.0
    episodes: int = 10
    seed: int = 0
    randomisation: Randomisation = field(default_factory=Randomisation)
    resample_s: float = EVAL_RESAMPLE_S
    ranges: tuple[tuple[float, float], ...] = EVAL_BOX
    commands: CommandSchedule | None = None  # a fixed schedule for every episode (--commands FILE)
    commands_source: str = "uniform"
    settle_s: float = SETTLE_S

    def __post_init__(self) -> None:
        if self.seconds <= 0 or self.episodes < 1 or self.resample_s <= 0:
            raise ConfigError(f"--seconds and --resample-every must be positive and --episodes at least 1 (got "
                              f"{self.seconds}, {self.resample_s}, {self.episodes})")
        self.randomisation.check()

    def schedule(self, index: int) -> CommandSchedule:
        if self.commands is not None:
            return self.commands
        return CommandSchedule.uniform(np.random.default_rng([int(self.seed), int(index), 1]), self.seconds,
                                       self.resample_s, self.ranges)

    def to_dict(self) -> dict[str, Any]:
        out = {"seconds": self.seconds, "episodes": self.episodes, "seed": self.seed,
               "randomisation": self.randomisation.to_dict(), "settle_s": self.settle_s,
               "commands": self.commands_source}
        if self.commands is None:
            out.update(resample_s=self.resample_s, ranges={n: list(r) for n, r in
                                                           zip(("vx_mps", "vy_mps", "yaw_rate_radps"), self.ranges)})
        else:
            out["schedule"] = {"t": self.commands.times.tolist(), "command": self.commands.commands.tolist()}
        return out


class VelocityController:
    """A velocity-command policy seeing measured quantities (with uniform noise), the command clipped to its box and
    its gait clock."""

    def __init__(self, policy: TrackingPolicy, meta: PolicyMeta, obs_noise: float):
        self.policy, self.obs_noise = policy, float(obs_noise)
        self.box = CommandBox.from_dict(meta.command["box"])
        self.clock = GaitClock.from_dict(meta.command["clock"])
        self.dt = meta.dt
        self.layout = velocity_observation_layout(len(meta.joint_names))  # the noise's: the current terms
        frames = history_frames(meta.obs_layout, len(meta.joint_names))
        self.history = ObservationHistory(1, frames, len(meta.joint_names)) if frames > 0 else None
        self.rng = np.random.default_rng(0)
        self.phase = 0.0
        self.name = meta.method

    def settings(self) -> dict[str, Any]:
        digest = hashlib.sha1()
        for name, tensor in sorted(self.policy.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().numpy().tobytes())
        return {"weights_sha1": digest.hexdigest(), "obs_noise": self.obs_noise, "box": self.box.to_dict()}

    def begin(self, noise_seed: int, phase: float = 0.0) -> None:
        self.rng = np.random.default_rng(noise_seed)
        self.phase = float(phase)
        if self.history is not None:
            self.history.reset()

    def act(self, world: SimWorld, state, command: np.ndarray) -> np.ndarray:
        """The PD target for ``command`` (3,) at ``state``; the gait clock then advances one period."""
        quat = state.root_quat[None]
        command = self.box.clip(command)
        noise = sample_noise(self.rng, 1, len(state.joint_pos), self.obs_noise, self.layout)
        obs = velocity_observations(state.joint_pos[None], state.joint_vel[None], world.last_target[None], quat,
                                    body_angular_velocity(quat, state.root_ang_vel[None]), command[None],
                                    np.array([self.phase]), noise)
        if self.history is not None:
            obs = self.history.observe(obs)
        self.phase = float(self.clock.advance(self.phase, command, self.dt))
        return self.policy.act(obs)[0]


def run_velocity_episode(robot: Robot, physics: WorldPhysics, start: dict[str, np.ndarray], draw, schedule:
                         CommandSchedule, controller: VelocityController, frames: int, push_mps: float,
                         progress: tqdm | None = None) -> dict[str, Any]:
    """One episode (module docstring). Returns its trajectory: states 0..n at the control rate, the command asked
    at each step (n, 3), the velocity measured after it (n, 3)."""
    world = SimWorld(robot, physics, draw.friction, draw.mass_scale, draw.latency_s)
    state0, target0 = start_state(start, 0)
    state = world.reset(state0, target0, 0)
    controller.begin(draw.noise_seed, float(np.asarray(start.get("phase", [0.0]))[0]))
    max_step = max_target_step(robot, 1.0 / physics.dt)
    pushes = dict(zip(draw.push_frames, draw.push_dirs))
    states, commands, measured = [state], [], []
    fell = False
    for k in range(frames):
        if k in pushes:
            world.push(push_mps * np.array([np.cos(pushes[k]), np.sin(pushes[k])]))
            state = world.state()
        command = schedule.at(k * physics.dt)
        target = clip_to_limits(robot, controller.act(world, state, command), world.last_target, max_step)
        state = world.step(target)
        states.append(state)
        commands.append(command)
        measured.append(heading_velocity(state.root_lin_vel[None], state.root_quat[None], state.root_ang_vel[None])[0])
        if progress is not None:
            progress.update(1)
        if world.fallen(state):
            fell = True
            if progress is not None:
                progress.update(frames - k - 1)
            break
    traj = {name: np.stack([getattr(s, name) for s in states]) for name in
            ("root_pos", "root_quat", "joint_pos", "joint_vel", "root_lin_vel", "root_ang_vel")}
    traj["command"] = np.asarray(commands)
    traj["measured"] = np.asarray(measured)
    traj["fell"] = fell
    return traj


def scored_steps(schedule: CommandSchedule, steps: int, dt: float, settle_s: float) -> np.ndarray:
    """(steps,) bool: the steps not within ``settle_s`` after a command change."""
    t = np.arange(steps) * dt
    keep = np.ones(steps, dtype=bool)
    for change in schedule.changes():
        keep &= ~((t >= change - 1e-9) & (t < change + settle_s - 1e-9))
    return keep


def after_change_sums(schedule: CommandSchedule, err: np.ndarray, turn_err: np.ndarray, keep: np.ndarray,
                      dt: float) -> dict[str, list]:
    """Per bin of time since the command last changed (``AFTER_CHANGE_EDGES_S``; the schedule's first time, the
    episode's start, counts as a change) the scored steps, the squared errors summed per axis and the turn's part
    summed, over the scored (``keep``) steps of the per-step errors ``err`` (T, 3) and ``turn_err`` (T,)."""
    t = np.arange(len(err)) * dt
    since = t - schedule.times[np.clip(np.searchsorted(schedule.times, t + 1e-9, side="right") - 1, 0, None)]
    which = np.digitize(since + 1e-9, AFTER_CHANGE_EDGES_S)
    bins = range(len(AFTER_CHANGE_EDGES_S) + 1)
    return {"steps": [int((keep & (which == b)).sum()) for b in bins],
            "sq_sum": [(err[keep & (which == b)] ** 2).sum(0).tolist() for b in bins],
            "turn_sq_sum": [float((turn_err[keep & (which == b)] ** 2).sum()) for b in bins]}


def after_change_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The pooled RMSEs per bin of time since the command changed (:func:`after_change_sums` of each row)."""
    edges = (0.0, *AFTER_CHANGE_EDGES_S, None)
    bins = len(AFTER_CHANGE_EDGES_S) + 1
    parts = [r["after_change"] for r in rows if "after_change" in r]
    steps = np.sum([p["steps"] for p in parts], axis=0) if parts else np.zeros(bins)
    sq = np.sum([p["sq_sum"] for p in parts], axis=0) if parts else np.zeros((bins, 3))
    turn = np.sum([p["turn_sq_sum"] for p in parts], axis=0) if parts else np.zeros(bins)

    def rmse(total: float, n: int) -> float | None:
        return _num(np.sqrt(total / n)) if n else None

    return {"bins_s": [[edges[b], edges[b + 1]] for b in range(bins)], "steps": [int(n) for n in steps],
            **{axis: [rmse(sq[b, a], steps[b]) for b in range(bins)] for a, axis in enumerate(AXES)},
            "turn_radps": [rmse(turn[b], steps[b]) for b in range(bins)]}


def episode_row(robot: Robot, meta: PolicyMeta, draw, schedule: CommandSchedule, traj: dict[str, Any],
                cfg: VelocityEvalConfig, box: CommandBox) -> dict[str, Any]:
    """The figures of one episode (module docstring) with its sums of squares and style segments for pooling."""
    dt = meta.dt
    steps = len(traj["command"])
    keep = scored_steps(schedule, steps, dt, cfg.settle_s)
    err = (traj["measured"] - traj["command"])[keep] if steps else np.zeros((0, 3))
    sq = (err ** 2).sum(0) if len(err) else np.zeros(3)
    tail = np.zeros(steps, dtype=bool)
    if traj["fell"]:
        tail[max(0, steps - int(round(FALL_TAIL_S / dt))):] = True
    tail_sq = (err[tail[keep]] ** 2).sum(0) if len(err) else np.zeros(3)
    turn = yaw_rate_mean(traj["measured"][:, 2], dt) if steps else np.zeros(0)
    split = [float(np.sum((turn - traj["command"][:, 2])[keep] ** 2)),
             float(np.sum((traj["measured"][:, 2] - turn)[keep] ** 2))] if steps else [0.0, 0.0]
    rmse = np.sqrt(sq / len(err)) if len(err) else np.full(3, np.nan)
    after = after_change_sums(schedule, traj["measured"] - traj["command"], turn - traj["command"][:, 2], keep, dt) \
        if steps else after_change_sums(schedule, np.zeros((0, 3)), np.zeros(0), np.zeros(0, bool), dt)
    segments = []
    lib = meta.library
    if lib and lib.get("foot_names") and steps:
        heights = foot_heights(robot, list(lib["foot_names"]), np.asarray(lib["foot_points"]), traj["root_pos"][1:],
                               traj["root_quat"][1:], traj["joint_pos"][1:])
        contacts = heights < FOOT_CONTACT_HEIGHT_M
        bounds = np.r_[schedule.times, np.inf]
        t = np.arange(steps) * dt
        for a, b, command in zip(bounds[:-1], bounds[1:], schedule.commands):
            inside = (t >= a + cfg.settle_s - 1e-9) & (t < b - 1e-9)
            if inside.sum() >= 2:
                segments.append({"command": box.clip(command), "contacts": contacts[inside], "dt": dt})
    style = style_segments(lib, segments) if segments else []
    windows = gait_windows(robot, meta, traj, schedule, box, dt, cfg.settle_s) if steps else []
    clipped = np.abs(box.clip(traj["command"]) - traj["command"]).max(1) > 1e-9 if steps else np.zeros(0, bool)
    return {"index": draw.index, "start_demo": draw.clip, "friction": draw.friction, "mass_scale": draw.mass_scale,
            "latency_s": draw.latency_s, "pushes": len([p for p in draw.push_frames if p < steps]),
            "fell": bool(traj["fell"]), "upright_s": steps * dt, "scored_steps": int(keep.sum()),
            "sq_sum": [float(v) for v in sq], "yaw_split_sq_sum": split,
            "fall_tail": {"steps": int(tail[keep].sum()), "sq_sum": [float(v) for v in tail_sq]},
            "after_change": after, "vx_rmse_mps": _num(rmse[0]), "vy_rmse_mps": _num(rmse[1]),
            "yaw_rate_rmse_radps": _num(rmse[2]),
            "out_of_box_steps": int(clipped.sum()),
            "commands": {"t": schedule.times.tolist(), "command": schedule.commands.tolist()}, "style": style,
            "gait_windows": windows}


def yaw_rate_mean(yaw_rate: np.ndarray, dt: float) -> np.ndarray:
    """(T,) the centred YAW_SPLIT_S mean of a yaw-rate series (T,) (shorter at the ends, never padded)."""
    half = max(1, int(round(YAW_SPLIT_S / dt / 2)))
    steps = len(yaw_rate)
    sums = np.r_[0.0, np.cumsum(yaw_rate)]
    lo = np.clip(np.arange(steps) - half, 0, steps)
    hi = np.clip(np.arange(steps) + half + 1, 0, steps)
    return (sums[hi] - sums[lo]) / np.maximum(hi - lo, 1)


def expected_gait(meta: PolicyMeta, box: CommandBox, speed: float) -> str:
    """The library's gait at planar ``speed``: its box's, else the default gait of the robot's leg count (what
    ``akd library`` plans by default)."""
    gait = box.gait_for(speed)
    if gait is None:
        from akd_core.motion.prompt import DEFAULT_PATTERN

        feet = len((meta.library or {}).get("foot_names") or [])
        gait = DEFAULT_PATTERN.get(feet, "unknown")
    return gait


def gait_windows(robot: Robot, meta: PolicyMeta, traj: dict[str, Any], schedule: CommandSchedule, box: CommandBox,
                 dt: float, settle_s: float) -> list[dict[str, Any]]:
    """The rollout's GAIT_WINDOW_S windows at gait speeds (module docstring): per window its start (s), the
    command, the gait expected and the gait read (with the classifier's confidence)."""
    from akd_core.motion.classify import classify_gait
    from akd_core.motion.clip import Motion

    lib = meta.library or {}
    if not lib.get("foot_names"):
        return []
    steps = len(traj["command"])
    size = int(round(GAIT_WINDOW_S / dt))
    bounds = np.r_[schedule.times, np.inf]
    t = np.arange(steps) * dt
    out = []
    for a, b, command in zip(bounds[:-1], bounds[1:], schedule.commands):
        asked = box.clip(command)
        speed = float(np.hypot(asked[0], asked[1]))
        if speed < GAIT_WINDOW_SPEED:
            continue
        inside = np.flatnonzero((t >= a + settle_s - 1e-9) & (t < b - 1e-9)) + 1  # the states after those steps
        for start in range(0, len(inside) - size + 1, size):
            frames = inside[start:start + size]
            clip = Motion(fps=1.0 / dt, joint_names=list(robot.joint_names), joint_pos=traj["joint_pos"][frames],
                          root_pos=traj["root_pos"][frames], root_quat=traj["root_quat"][frames],
                          foot_names=list(lib["foot_names"]), foot_offsets=np.asarray(lib["foot_points"]))
            seen = classify_gait(robot, clip)
            out.append({"t": float(t[frames[0] - 1]), "command": [float(v) for v in asked],
                        "expected": expected_gait(meta, box, speed), "seen": seen.gait,
                        "confidence": float(seen.confidence)})
    return out


def _num(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled figures over episode rows (module docstring)."""
    scored = sum(r["scored_steps"] for r in rows)
    sq = np.sum([r["sq_sum"] for r in rows], axis=0) if rows else np.zeros(3)
    rmse = np.sqrt(sq / scored) if scored else np.full(3, np.nan)
    split = np.sqrt(np.sum([r.get("yaw_split_sq_sum", [np.nan] * 2) for r in rows], axis=0) / scored) \
        if scored else np.full(2, np.nan)
    tail_steps = sum(r.get("fall_tail", {}).get("steps", 0) for r in rows)
    tail_sq = np.sum([r.get("fall_tail", {}).get("sq_sum", [0.0] * 3) for r in rows], axis=0) if rows else np.zeros(3)
    rest = np.sqrt((sq - tail_sq) / (scored - tail_steps)) if scored > tail_steps else np.full(3, np.nan)
    before_falls = {"window_s": FALL_TAIL_S, "steps": int(tail_steps),
                    "sq_error_share": {n: _num(a / b) if b > 0 else None
                                       for n, a, b in zip(AXES, tail_sq, sq)},
                    "rmse_other_steps": {n: _num(v) for n, v in zip(AXES, rest)}}
    style = style_summary([s for r in rows for s in r["style"]])
    windows = [w for r in rows for w in r.get("gait_windows", [])]
    matched = sum(w["seen"] == w["expected"] for w in windows)
    gait = {"windows": len(windows), "as_library_gait": matched,
            "share": matched / len(windows) if windows else None,
            "seen": dict(Counter(w["seen"] for w in windows)), "window_s": GAIT_WINDOW_S,
            "min_speed_mps": GAIT_WINDOW_SPEED}
    return {"episodes": len(rows), "falls": sum(bool(r["fell"]) for r in rows), "vx_rmse_mps": _num(rmse[0]),
            "vy_rmse_mps": _num(rmse[1]), "yaw_rate_rmse_radps": _num(rmse[2]),
            "yaw_rate_split": {"turn_rmse_radps": _num(split[0]), "stride_rmse_radps": _num(split[1]),
                               "window_s": YAW_SPLIT_S},
            "before_falls": before_falls, "after_change": after_change_summary(rows), "scored_steps": scored,
            "out_of_box_steps": sum(r["out_of_box_steps"] for r in rows), "style": style, "gait_windows": gait}


def evaluate_velocity(robot: Robot, policy: TrackingPolicy, meta: PolicyMeta, cfg: VelocityEvalConfig,
                      checkpoint: Path | None = None, progress: bool = True,
                      keep_trajectories: int = 0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Evaluate a velocity-command policy (module docstring). With ``checkpoint``, finished episodes are saved there
    and a re-run with the same settings resumes after them. Returns the report and the first
    ``keep_trajectories`` trajectories."""
    if meta.task != "velocity":
        raise ConfigError("this policy follows a reference clip, not a velocity command; evaluate it without "
                          "--task velocity")
    physics = WorldPhysics.from_dict(meta.physics)
    controller = VelocityController(policy, meta, cfg.randomisation.obs_noise)
    box = controller.box
    frames = int(round(cfg.seconds / physics.dt))
    key = {"task": "velocity", "settings": controller.settings(), **cfg.to_dict()}
    rows: list[dict[str, Any]] = []
    if checkpoint is not None and checkpoint.exists():
        saved = json.loads(checkpoint.read_text())
        if saved.get("key") == json.loads(json.dumps(key)):
            rows = saved["rows"]
            log.info("resuming the evaluation from %s after %d episode(s)", checkpoint, len(rows))
    trajectories: list[dict[str, Any]] = []
    tic = time.perf_counter()
    bar = tqdm(total=cfg.episodes * frames, initial=len(rows) * frames, desc=f"eval {controller.name}",
               unit="frame", disable=not progress)
    try:
        for i in range(len(rows), cfg.episodes):
            draw = draw_episode(cfg.randomisation, cfg.seed, i, len(meta.starts), frames, physics.dt)
            schedule = cfg.schedule(i)
            traj = run_velocity_episode(robot, physics, meta.starts[draw.clip], draw, schedule, controller,
                                           frames, cfg.randomisation.push_mps, progress=bar)
            rows.append(episode_row(robot, meta, draw, schedule, traj, cfg, box))
            if len(trajectories) < keep_trajectories:
                trajectories.append(traj)
            bar.set_postfix(falls=sum(r["fell"] for r in rows))
            if checkpoint is not None:
                with atomic_path(checkpoint) as tmp:
                    Path(tmp).write_text(json.dumps({"key": key, "rows": rows}))
    finally:
        bar.close()
    report = {"task": "velocity", "controller": controller.name, "robot": robot.name, **aggregate(rows),
              "box": box.to_dict(), **cfg.to_dict(), "control_hz": 1.0 / physics.dt,
              "wall_seconds": time.perf_counter() - tic, "per_episode": rows}
    return report, trajectories
