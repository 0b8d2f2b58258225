"""Closed-loop evaluation under disturbances (``akd eval-policy``), the same for a policy and for the MPC expert.

N episodes of S seconds; episode i draws (seeded by ``seed`` and i, whatever is evaluated) a clip among those the
policy was trained on, the ground friction, the base mass scale, the action latency and the push directions
(:func:`akd_core.learn.env.draw_episode`). It starts from the tracked demo's first state and its first PD target;
every ``push_every_s`` the base gets a horizontal velocity kick of ``push_mps`` in a random direction. Past the clip's
end the reference continues as its looped steady cycle (:mod:`akd_core.learn.reference`).

Per episode: ``fell`` (tracking's rule: tilt > 60 deg or the root below half its start height; the episode ends
there), ``upright_s``, ``joint_rmse_rad`` against the reference's joint angles, leaving out the 0.5 s after each push,
``progress_m`` (arc length along the reference's horizontal root path reached by the robot: the point on it
closest to the robot, followed frame by frame so that a path that circles counts its laps),
``reference_distance_m`` (the reference path's length over the whole episode), ``distance_ratio`` (their ratio: a
fall ends it early) and ``mean_speed_mps`` (progress over upright time).
Aggregates: ``falls``; ``joint_rmse_rad`` pooled over every scored frame of every episode (before any fall);
``distance_ratio`` and ``mean_speed_mps`` averaged over the episodes that did not fall (null if all fell).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from akd_core.io.errors import ConfigError
from akd_core.io.fileio import atomic_path, write_json_atomic
from akd_core.learn.env import EpisodeDraw, Randomisation, SimWorld, WorldPhysics, draw_episode
from akd_core.learn.expert import ExpertConfig, MPCExpert
from akd_core.learn.observation import body_angular_velocity, build_observations, sample_noise
from akd_core.learn.policy import TrackingPolicy, clip_to_limits
from akd_core.learn.reference import ReferenceClip, track_progress
from akd_core.model.robot import Robot
from akd_core.physics.engines.base import BodyState
from akd_core.physics.targets import max_target_step

log = logging.getLogger(__name__)

PUSH_SETTLE_S = 0.5  # frames this long after a push are left out of the joint RMSE


class Controller(Protocol):
    """Anything that drives a :class:`SimWorld`: a policy or the MPC expert."""

    name: str

    def settings(self) -> dict[str, Any]:
        """What makes this controller act as it does (JSON-able): part of an evaluation checkpoint's key, so a
        changed expert or retrained policy never resumes another one's episodes."""

    def begin(self, world: SimWorld, clip: ReferenceClip, draw: EpisodeDraw, frames: int) -> None:
        """Called once per episode before the first :meth:`act`."""

    def act(self, world: SimWorld, frame: int, state: BodyState) -> np.ndarray:
        """PD target (J,) for reference frame ``frame + 1`` given the state at reference frame ``frame``."""


class PolicyController:
    """A :class:`TrackingPolicy` seeing measured quantities only, with uniform observation noise."""

    def __init__(self, policy: TrackingPolicy, obs_noise: float, name: str = "policy"):
        self.policy, self.obs_noise, self.name = policy, float(obs_noise), name
        self.clip: ReferenceClip | None = None
        self.rng = np.random.default_rng(0)

    def settings(self) -> dict[str, Any]:
        digest = hashlib.sha1()
        for name, tensor in sorted(self.policy.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().numpy().tobytes())
        return {"weights_sha1": digest.hexdigest(), "obs_noise": self.obs_noise}

    def begin(self, world: SimWorld, clip: ReferenceClip, draw: EpisodeDraw, frames: int) -> None:
        self.clip, self.rng = clip, np.random.default_rng(draw.noise_seed)

    def observe(self, world: SimWorld, frame: int, state: BodyState) -> np.ndarray:
        """The (noisy) observation row (1, D) at ``frame``."""
        quat = state.root_quat[None]
        noise = sample_noise(self.rng, 1, len(state.joint_pos), self.obs_noise)
        return build_observations(state.joint_pos[None], state.joint_vel[None], world.last_target[None], quat,
                                  body_angular_velocity(quat, state.root_ang_vel[None]), self.clip,
                                  np.array([frame]), noise)

    def act(self, world: SimWorld, frame: int, state: BodyState) -> np.ndarray:
        return self.policy.act(self.observe(world, frame, state))[0]


class ExpertController:
    """The MPC expert driving the world itself (:class:`~akd_core.learn.expert.MPCExpert`)."""

    name = "mpc"

    def __init__(self, cfg: ExpertConfig | None = None):
        self.cfg = cfg or ExpertConfig()
        self.expert: MPCExpert | None = None

    def settings(self) -> dict[str, Any]:
        return self.cfg.settings()

    def begin(self, world: SimWorld, clip: ReferenceClip, draw: EpisodeDraw, frames: int) -> None:
        self.expert = MPCExpert(world, clip, draw.start_frame + frames + 1, self.cfg)

    def act(self, world: SimWorld, frame: int, state: BodyState) -> np.ndarray:
        return self.expert.act(frame, world.engine_state(), world.last_target)


@dataclass
class EvalConfig:
    seconds: float = 20.0
    episodes: int = 10
    seed: int = 0
    randomisation: Randomisation = field(default_factory=Randomisation)

    def __post_init__(self) -> None:
        if self.seconds <= 0 or self.episodes < 1:
            raise ConfigError(f"--seconds must be positive and --episodes at least 1 (got {self.seconds}, "
                              f"{self.episodes})")
        self.randomisation.check()

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "episodes": self.episodes, "seed": self.seed,
                "randomisation": self.randomisation.to_dict()}


def start_state(start: dict[str, np.ndarray], frame: int) -> tuple[BodyState, np.ndarray]:
    """The demo's simulated state and PD target at ``frame`` (float64)."""
    f = {k: np.asarray(v[frame], dtype=np.float64) for k, v in start.items()}
    return BodyState(f["root_pos"], f["root_quat"], f["joint_pos"], f["root_lin_vel"], f["root_ang_vel"],
                     f["joint_vel"]), f["actions"]


def run_episode(robot: Robot, physics: WorldPhysics, clip: ReferenceClip, start: dict[str, np.ndarray],
                draw: EpisodeDraw, controller: Controller, frames: int, push_mps: float,
                on_step=None, progress: tqdm | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One episode of ``frames`` control periods (module docstring). ``on_step(frame, state, target)`` is called
    after each control decision. Returns the episode's row and its trajectory (states at the control rate)."""
    world = SimWorld(robot, physics, draw.friction, draw.mass_scale, draw.latency_s)
    state0, target0 = start_state(start, draw.start_frame)
    state = world.reset(state0, target0, draw.start_frame)
    controller.begin(world, clip, draw, frames)
    max_step = max_target_step(robot, 1.0 / physics.dt)
    pushes = dict(zip(draw.push_frames, draw.push_dirs))
    states, targets = [state], [world.last_target]
    fell = False
    for k in range(frames):
        if k in pushes:
            world.push(push_mps * np.array([np.cos(pushes[k]), np.sin(pushes[k])]))
            state = world.state()
        frame = draw.start_frame + k
        target = clip_to_limits(robot, controller.act(world, frame, state), world.last_target, max_step)
        if on_step is not None:
            on_step(frame, state, target)
        state = world.step(target)
        states.append(state)
        targets.append(target)
        if progress is not None:
            progress.update(1)
        if world.fallen(state):
            fell = True
            if progress is not None:
                progress.update(frames - k - 1)
            break
    traj = {name: np.stack([getattr(s, name) for s in states]) for name in
            ("root_pos", "root_quat", "joint_pos", "joint_vel", "root_lin_vel", "root_ang_vel")}
    traj["pd_targets"] = np.stack(targets)
    return episode_row(clip, draw, traj, frames, physics.dt, fell), traj


def episode_row(clip: ReferenceClip, draw: EpisodeDraw, traj: dict[str, np.ndarray], frames: int, dt: float,
                fell: bool) -> dict[str, Any]:
    """The metrics of one episode (module docstring) from its trajectory (states 0..n at the control rate)."""
    n = len(traj["joint_pos"])
    ref = clip.frames(frames + 1, draw.start_frame)
    scored = np.ones(n, dtype=bool)
    settle = int(round(PUSH_SETTLE_S / dt))
    for p in draw.push_frames:
        scored[p + 1:p + 1 + settle] = False
    scored[0] = False  # the start state is the demo's, not the controller's
    err = traj["joint_pos"] - ref["joint_pos"][:n]
    sq = (err[scored] ** 2).mean(1)
    path = ref["root_pos"][:, :2]
    progress_m = track_progress(path, traj["root_pos"][:, :2])
    total = float(np.linalg.norm(np.diff(path, axis=0), axis=-1).sum())
    upright = (n - 1) * dt
    return {"index": draw.index, "clip": clip.name, "clip_index": draw.clip, "friction": draw.friction,
            "mass_scale": draw.mass_scale, "latency_s": draw.latency_s, "pushes": len([p for p in draw.push_frames
                                                                                         if p < n - 1]),
            "fell": bool(fell), "upright_s": upright,
            "joint_rmse_rad": float(np.sqrt(sq.mean())) if sq.size else None,
            "scored_frames": int(sq.size), "joint_sq_sum": float(sq.sum()),
            "progress_m": progress_m, "reference_distance_m": total,
            "distance_ratio": progress_m / total if total > 1e-9 else None,
            "mean_speed_mps": progress_m / upright if upright > 0 else 0.0,
            "reference_speed_mps": total / (frames * dt)}


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Summary figures over episode rows (module docstring)."""
    frames = sum(r["scored_frames"] for r in rows)
    upright = [r for r in rows if not r["fell"]]
    ratios = [r["distance_ratio"] for r in upright if r["distance_ratio"] is not None]
    return {"episodes": len(rows), "falls": sum(bool(r["fell"]) for r in rows),
            "joint_rmse_rad": float(np.sqrt(sum(r["joint_sq_sum"] for r in rows) / frames)) if frames else None,
            "distance_ratio": float(np.mean(ratios)) if ratios else None,
            "mean_speed_mps": float(np.mean([r["mean_speed_mps"] for r in upright])) if upright else None,
            "reference_speed_mps": float(np.mean([r["reference_speed_mps"] for r in rows])) if rows else None}


def evaluate(robot: Robot, physics: WorldPhysics, clips: list[ReferenceClip], starts: list[dict[str, np.ndarray]],
             controller: Controller, cfg: EvalConfig, checkpoint: Path | None = None, progress: bool = True,
             keep_trajectories: int = 0) -> tuple[dict[str, Any], list[dict[str, np.ndarray]]]:
    """Evaluate ``controller`` over ``cfg.episodes`` episodes (module docstring). With ``checkpoint``, finished
    episodes are saved there after each one and a re-run with the same settings resumes after them. Returns the
    report (aggregates + ``per_episode`` rows + settings) and the first ``keep_trajectories`` trajectories."""
    frames = int(round(cfg.seconds / physics.dt))
    key = {"controller": controller.name, "settings": controller.settings(), **cfg.to_dict(),
           "clips": [c.name for c in clips]}
    rows: list[dict[str, Any]] = []
    if checkpoint is not None and checkpoint.exists():
        saved = json.loads(checkpoint.read_text())
        if saved.get("key") == json.loads(json.dumps(key)):
            rows = saved["rows"]
            log.info("resuming the evaluation from %s after %d episode(s)", checkpoint, len(rows))
    trajectories: list[dict[str, np.ndarray]] = []
    tic = time.perf_counter()
    bar = tqdm(total=cfg.episodes * frames, initial=len(rows) * frames, desc=f"eval {controller.name}",
               unit="frame", disable=not progress)
    try:
        for i in range(len(rows), cfg.episodes):
            draw = draw_episode(cfg.randomisation, cfg.seed, i, len(clips), frames, physics.dt)
            row, traj = run_episode(robot, physics, clips[draw.clip], starts[draw.clip], draw, controller, frames,
                                    cfg.randomisation.push_mps, progress=bar)
            rows.append(row)
            if len(trajectories) < keep_trajectories:
                trajectories.append(traj)
            bar.set_postfix(falls=sum(r["fell"] for r in rows))
            if checkpoint is not None:
                with atomic_path(checkpoint) as tmp:
                    Path(tmp).write_text(json.dumps({"key": key, "rows": rows}))
    finally:
        bar.close()
    report = {"controller": controller.name, "robot": robot.name, "clips": [c.name for c in clips],
              **aggregate(rows), **cfg.to_dict(),
              "control_hz": 1.0 / physics.dt, "wall_seconds": time.perf_counter() - tic, "per_episode": rows}
    return report, trajectories


def write_report(path: str | Path, report: dict[str, Any]) -> Path:
    return write_json_atomic(path, report)


def passes(report: dict[str, Any], max_falls: int = 1, max_rmse: float = 0.15,
           ratio: tuple[float, float] = (0.8, 1.2)) -> bool:
    """The issue's bar: at most ``max_falls`` falls, joint RMSE <= max_rmse, distance ratio within ``ratio``."""
    rmse, dist = report.get("joint_rmse_rad"), report.get("distance_ratio")
    return (report["falls"] <= max_falls and rmse is not None and rmse <= max_rmse and dist is not None
            and ratio[0] <= dist <= ratio[1])
