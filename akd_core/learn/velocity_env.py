"""Many randomised worlds in which a velocity-command policy learns to follow commands in a library's style.

The worlds are those of :class:`~akd_core.learn.rl_env.TrackingVecEnv` (the tracking's MuJoCo model, re-randomised
in place per episode: ground friction, base mass and inertia, action latency; pushes; observation noise; one
control period of all worlds per call of MuJoCo's multi-threaded ``rollout``), with foot sensors added (sites and
sensors only: the dynamics are the evaluation world's). Per episode a world starts at a random frame of a random
library demo (its simulated state and PD target, its gait phase) following that frame's command, or with
``start_draw_share`` a fresh draw (so that it learns to set off from a stand and to change its gait at once); the
command is redrawn every ``resample_s`` (a random draw in that range per change): zero with ``zero_share``, a library
frame's command with ``library_share``, else uniform in the policy's :class:`~akd_core.learn.command.CommandBox`;
with ``push_with_change`` a command change comes with a push at the same step (the pushes' period restarting there),
as in the evaluation, whose commands change every 4 s on the pushes' 2 s beat.
Each world's gait clock (:class:`~akd_core.learn.command.GaitClock`, fitted to the library) advances one control
period per step under the step's command.

Reward per control period (:data:`REWARD_WEIGHTS`; the sum is floored at 0, as legged_gym's
``only_positive_rewards``, so that ending an episode never pays):

- command tracking, legged_gym style: exp(-(|v_xy - c_xy| / 0.5 m/s)^2) for the heading-frame base velocity and
  exp(-((yaw rate - c_yaw) / 0.5 rad/s)^2) (legged_gym's exp(-error^2 / 0.25)), and narrow ones,
  exp(-((yaw rate - c_yaw) / 0.2 rad/s)^2) (``yaw_rate_fine``) and exp(-(|v_xy - c_xy| / 0.2 m/s)^2)
  (``lin_vel_fine``, weight 0 by default);
- imitation of the library at the command (``imitation = "match"``, :class:`~akd_core.learn.motion_library.
  MotionMatcher`): the library frame nearest in (command, gait-clock phase) is the target of a joint
  term exp(-(RMS joint error / 0.2 rad)^2) and a foot term exp(-(RMS foot-height error / 0.03 m)^2); with
  ``imitation = "amp"`` an AMP discriminator's style reward instead (:mod:`akd_core.learn.amp`, weight ``style``);
- regularisers: base vertical velocity^2, roll/pitch rate^2, tilt (|gravity_xy|^2), base height against the matched
  frame's^2, torques (mean (tau / effort limit)^2), PD-target rate (mean (change / 0.1 rad)^2), feet slip (squared
  horizontal speed of the feet that are down), and legged_gym's feet air time (each touch-down pays its air time
  minus 0.2 s, while the command asks to move). A residual policy's trainer also reports the change of the residual
  alone (``residual_rate``: mean (change / 0.1 rad)^2 of the PD target less the library feedforward, 0 at an
  episode's first step; :meth:`VelocityVecEnv.note_residual`): the PD-target rate holds the library gait's own
  motion, so its gradient on the residual mostly asks it to damp the gait, where this one asks it to be smooth.

A fall (tracking's rule) ends the episode without bootstrapping; the time limit with it. The critic also gets
privileged terms: base velocity in the base frame, base height, friction, mass scale and which feet are down.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from akd_core.io.threads import cpu_threads
from akd_core.learn.command import CommandBox, heading_velocity
from akd_core.learn.env import Randomisation, SimWorld, WorldPhysics, delayed_ramp
from akd_core.learn.evaluate import start_state
from akd_core.learn.motion_library import (
    FOOT_CONTACT_HEIGHT_M,
    MATCH_COMMAND_SCALE,
    LibraryFrames,
    MotionMatcher,
)
from akd_core.learn.observation import (
    ObservationHistory,
    body_angular_velocity,
    noise_scales,
    velocity_observation_layout,
    velocity_observations,
)
from akd_core.learn.policy import clip_to_limits
from akd_core.model.robot import Robot
from akd_core.model.spatial import quat_to_matrix
from akd_core.physics.engines.base import Feet
from akd_core.physics.engines.mujoco import MujocoEngine
from akd_core.physics.metrics import FALL_HEIGHT_FRACTION, FALL_TILT_DEG
from akd_core.physics.targets import max_target_step

REWARD_WEIGHTS = {
    "lin_vel": 1.5, "yaw_rate": 0.75,  # tracking kernels
    "yaw_rate_fine": 0.75,  # a narrow yaw-rate kernel: a1's swing within strides 0.33 -> 0.23 rad/s (docs/policy.md)
    "lin_vel_fine": 0.0,  # a narrow velocity kernel, the same idea for vx and vy (off until measured: docs/policy.md)
    "joint": 0.5, "feet": 0.2,  # imitation kernels (match)
    "style": 0.7,  # the AMP discriminator's style reward (amp)
    "lin_vel_z": -1.0, "ang_vel_xy": -0.05, "orientation": -1.0, "height": -10.0, "torques": -0.1,
    "action_rate": -0.05, "feet_slip": -0.25, "feet_air_time": 0.5,
    "residual_rate": 0.0,  # the change of a residual policy's residual alone (off: as measured, docs/policy.md)
}
LIN_VEL_WIDTH, YAW_RATE_WIDTH = 0.5, 0.5  # m/s, rad/s: legged_gym's exp(-error^2 / 0.25)
# rad/s: pays for the last tenths of a rad/s the wide kernel hardly tells apart (0.96 at 0.1 off, 0.85 at 0.2; this
# one 0.78 and 0.37): the in-stride yaw swing of a trot and a turn a fifth short of the command
YAW_RATE_FINE_WIDTH = 0.2
LIN_VEL_FINE_WIDTH = 0.2  # m/s: 0.57 at the bar's 0.15 m/s off, where the wide kernel pays 0.91
# terms added after checkpoints were written: a weight of 0 is left out of a config's dict, so those resume
LATE_TERMS = ("residual_rate", "lin_vel_fine")
JOINT_WIDTH, FEET_WIDTH = 0.2, 0.03  # rad RMS, m RMS
ACTION_RATE_SCALE = 0.1  # rad
AIR_TIME_S = 0.2  # a swing pays its air time beyond this
MOVING_COMMAND = 0.1  # |command| (m/s, rad/s) above which the command asks to move
CONTACT_FORCE_N = 1.0  # a foot pressing on the ground harder than this is down (air time, slip)
IMITATIONS = ("match", "amp", "none")


@dataclass
class VelocityEnvConfig:
    num_envs: int = 64
    episode_s: float = 20.0
    resample_s: tuple[float, float] = (2.0, 6.0)  # seconds between command changes, drawn per change
    zero_share: float = 0.1  # of command draws: stand still
    library_share: float = 0.4  # of command draws: a library frame's command (where the library has data)
    start_draw_share: float = 0.5  # of episodes: a fresh command from the start instead of the start frame's
    push_with_change: float = 0.0  # of command changes: a push at the same step (the pushes' period restarts there)
    history: int = 0  # control steps of measured terms before the current ones in the observation
    imitation: str = "amp"
    weights: dict[str, float] = field(default_factory=lambda: dict(REWARD_WEIGHTS))
    randomisation: Randomisation | None = None
    threads: int = 0
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("num_envs", "episode_s", "zero_share", "library_share",
                                             "start_draw_share", "push_with_change", "history", "imitation", "threads",
                                             "seed")}
        out["resample_s"] = list(self.resample_s)
        out["weights"] = dict(self.weights)
        out["randomisation"] = (self.randomisation or Randomisation()).to_dict()
        return out


def privileged_size(num_feet: int) -> int:
    """Privileged critic terms: base velocity (3), base height, friction, mass scale, feet down (K)."""
    return 6 + num_feet


class VelocityVecEnv:
    """``num_envs`` randomised worlds following velocity commands (module docstring). Actions are absolute PD
    targets (N, J)."""

    def __init__(self, robot: Robot, physics: WorldPhysics, frames: LibraryFrames,
                 starts: list[dict[str, np.ndarray]], box: CommandBox, cfg: VelocityEnvConfig):
        from mujoco import rollout as mj_rollout

        self.robot, self.physics, self.frames, self.starts = robot, physics, frames, starts
        self.box, self.cfg = box, cfg
        self.rand = cfg.randomisation or Randomisation()
        self.rand.check()
        self.n, self.j, self.dt = cfg.num_envs, robot.num_dofs, physics.dt
        self.k = len(frames.foot_names)
        self.max_frames = int(round(cfg.episode_s / self.dt))
        params = physics.params(robot)
        self.engine = MujocoEngine(robot, params, physics.sim_dt, physics.substeps,
                                   Feet(tuple(frames.foot_names), frames.foot_points), link_names=[], threads=1,
                                   integrator=physics.integrator)
        self.mujoco = self.engine.mujoco
        base = self.engine.model
        # the geoms whose friction the model builder sets (ground and feet), as TrackingVecEnv finds them
        other = SimWorld(robot, physics, friction=float(physics.contact.get("mu", 1.0)) * 0.5 + 0.1).engine.model
        nominal = SimWorld(robot, physics).engine.model
        if nominal.ngeom != base.ngeom:  # sites and sensors only: the geoms are the evaluation world's
            raise RuntimeError("the foot-sensor model has other geoms than the evaluation world's")
        self.friction_geoms = np.flatnonzero(np.abs(nominal.geom_friction[:, 0] - other.geom_friction[:, 0]) > 1e-9)
        root_joint = self.mujoco.mj_name2id(base, self.mujoco.mjtObj.mjOBJ_JOINT, "root")
        self.base_body = int(base.jnt_bodyid[root_joint])
        self.mass0 = float(base.body_mass[self.base_body])
        self.inertia0 = base.body_inertia[self.base_body].copy()
        self.models = [copy.deepcopy(base) for _ in range(self.n)]
        threads = cpu_threads(cfg.threads)
        self.datas = [self.mujoco.MjData(base) for _ in range(threads)]
        self.pool = mj_rollout.Rollout(nthread=threads) if threads > 1 else None
        self.rollout_fn = mj_rollout.rollout
        self.qvel0 = self.engine.state_qvel + self.engine.root_v
        self.max_step = max_target_step(robot, 1.0 / self.dt)
        self.effort = np.asarray(params.effort, np.float64)
        self.noise_scale = noise_scales(self.j, velocity_observation_layout(self.j))  # the current terms only
        self.history = ObservationHistory(self.n, cfg.history, self.j) if cfg.history > 0 else None
        self.matcher = MotionMatcher(frames) if cfg.imitation == "match" else None
        self.clock = frames.gait_clock()
        self.weights = dict(cfg.weights)
        self.rng = np.random.default_rng(cfg.seed)
        # frames an episode can start at: every frame but the last of each demo
        self.start_rows = np.flatnonzero(frames.frame < np.array([len(s["actions"]) for s in starts])[frames.demo] - 1)
        # per-world episode state
        self.physics_state = np.zeros((self.n, self.engine.nstate))
        self.targets = np.zeros((self.n, 2, self.j))
        self.command = np.zeros((self.n, 3))
        self.phase = np.zeros(self.n)  # the gait clock's
        self.next_command = np.zeros(self.n, dtype=np.int64)
        self.steps = np.zeros(self.n, dtype=np.int64)
        self.latency = np.zeros(self.n)
        self.friction = np.ones(self.n)
        self.mass_scale = np.ones(self.n)
        self.start_height = np.ones(self.n)
        self.air_time = np.zeros((self.n, self.k))
        self.down = np.ones((self.n, self.k), dtype=bool)
        self.foot_height = np.zeros((self.n, self.k))
        self.push_every = int(round(self.rand.push_every_s / self.dt)) if self.rand.push_every_s > 0 else 0
        self.next_push = np.zeros(self.n, dtype=np.int64)
        self.last_match = np.zeros(self.n, dtype=np.int64)
        self.residual = np.zeros((self.n, self.j))  # a residual policy's last residual (note_residual)
        self.residual_fresh = np.ones(self.n, dtype=bool)  # no residual yet this episode
        self.pending_residual: np.ndarray | None = None
        for i in range(self.n):
            self.reset_world(i)

    # -- commands -------------------------------------------------------------
    def draw_command(self) -> np.ndarray:
        """One command (3,) (module docstring)."""
        u = self.rng.uniform()
        if u < self.cfg.zero_share:
            return np.zeros(3)
        if u < self.cfg.zero_share + self.cfg.library_share:
            return self.box.clip(self.frames.command[int(self.rng.integers(self.frames.size))])
        return self.box.sample(self.rng, 1)[0]

    def _resample_after(self) -> int:
        lo, hi = self.cfg.resample_s
        return max(1, int(round(self.rng.uniform(lo, hi) / self.dt)))

    # -- episodes -------------------------------------------------------------
    def reset_world(self, i: int) -> None:
        """A new episode in world ``i`` with fresh draws (module docstring)."""
        rng, rand = self.rng, self.rand
        if self.history is not None:
            self.history.reset(i)
        row = int(self.start_rows[rng.integers(len(self.start_rows))])
        self.place(i, int(self.frames.demo[row]), int(self.frames.frame[row]), friction=rng.uniform(*rand.friction),
                   mass_scale=rng.uniform(*rand.mass_scale), latency_s=rng.uniform(*rand.latency_s))
        self.phase[i] = self.frames.phase[row]
        fresh = rng.uniform() < self.cfg.start_draw_share
        self.command[i] = self.draw_command() if fresh else self.box.clip(self.frames.command[row])
        self.next_command[i] = self._resample_after()
        self.next_push[i] = int(rng.integers(1, self.push_every + 1)) if self.push_every else -1
        self.residual_fresh[i] = True

    def place(self, i: int, demo: int, frame: int, friction: float, mass_scale: float, latency_s: float) -> None:
        """World ``i`` at frame ``frame`` of library demo ``demo`` with this friction, mass scale and latency."""
        model = self.models[i]
        self.friction[i], self.mass_scale[i] = friction, mass_scale
        model.geom_friction[self.friction_geoms, 0] = friction
        model.body_mass[self.base_body] = self.mass0 * mass_scale
        model.body_inertia[self.base_body] = self.inertia0 * mass_scale
        self.latency[i] = min(latency_s, self.dt)
        state, target = start_state(self.starts[demo], frame)
        self.physics_state[i] = self.engine.start(state).physics
        self.targets[i] = target
        self.steps[i] = 0
        self.start_height[i] = float(state.root_pos[2])
        row = np.flatnonzero((self.frames.demo == demo) & (self.frames.frame == frame))
        self.foot_height[i] = self.frames.foot_height[row[0]] if len(row) else 0.0
        self.down[i] = self.foot_height[i] < FOOT_CONTACT_HEIGHT_M
        self.air_time[i] = 0.0

    def _body(self):
        return self.engine._body_states(self.physics_state)

    def observations(self, noisy: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Actor observations (N, 3J + 11, then ``history`` x (3J + 6)) (noise when ``noisy``) and the privileged
        critic terms (N, 6 + K)."""
        body = self._body()
        quat = body.root_quat
        gyro = body_angular_velocity(quat, body.root_ang_vel)
        obs = velocity_observations(body.joint_pos, body.joint_vel, self.targets[:, 1], quat, gyro, self.command,
                                    self.phase).astype(np.float64)
        if noisy and self.rand.obs_noise > 0:
            obs = obs + self.rng.uniform(-1.0, 1.0, obs.shape) * self.noise_scale * self.rand.obs_noise
        if self.history is not None:  # (one call per control step: run_ppo observes once after each step)
            obs = self.history.observe(obs).astype(np.float64)
        rot = quat_to_matrix(quat)
        v_body = np.einsum("nji,nj->ni", rot, body.root_lin_vel)
        privileged = np.concatenate([v_body, body.root_pos[:, 2:3], self.friction[:, None], self.mass_scale[:, None],
                                     self.down.astype(np.float64)], axis=1)
        return obs, privileged

    def note_residual(self, residual: np.ndarray) -> None:
        """The residual (N, J) (rad: PD target less the library feedforward) of the targets the next :meth:`step`
        gets, for its ``residual_rate`` term (a residual policy's trainer calls it; without it the term is absent)."""
        self.pending_residual = np.asarray(residual, dtype=np.float64)

    def step(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Apply PD targets (N, J) (clipped as every AKD controller sends them) for one control period. Returns
        rewards (N,), terminated (N,) (fell), timed out (N,) and the reward terms (each (N,), unweighted) plus
        ``match`` (N,), the matched library frame; worlds that ended are reset, and commands that are due are
        redrawn (their next observation has them)."""
        targets = np.asarray(targets, dtype=np.float64)
        last = self.targets[:, 1]
        sent = clip_to_limits(self.robot, targets, last, self.max_step)
        substeps = self.physics.substeps
        ctrl = np.zeros((self.n, substeps, self.models[0].nu))
        ctrl[:, :, self.engine.act] = delayed_ramp(self.targets[:, 0], last, sent, substeps, self.dt, self.latency)
        if self.pool is not None:
            state, sensors = self.pool.rollout(self.models, self.datas, self.physics_state, ctrl)
        else:
            state, sensors = self.rollout_fn(self.models, self.datas[0], self.physics_state, ctrl)
        self.physics_state = state[:, -1].copy()
        bad = ~np.isfinite(self.physics_state).all(1) | ~np.isfinite(sensors).all((1, 2))
        self.physics_state[bad] = 0.0
        sensors = np.where(np.isfinite(sensors), sensors, 0.0)
        rate = np.mean(((sent - last) / ACTION_RATE_SCALE) ** 2, axis=1)
        self.targets = np.stack([last, sent], axis=1)
        self.steps += 1
        self.phase = self.clock.advance(self.phase, self.command, self.dt)
        body = self._body()
        terms = self.reward_terms(body, sensors, rate)
        if self.pending_residual is not None:
            change = np.where(self.residual_fresh[:, None], 0.0, self.pending_residual - self.residual)
            terms["residual_rate"] = np.mean((change / ACTION_RATE_SCALE) ** 2, axis=1)
            self.residual, self.residual_fresh[:] = self.pending_residual, False
            self.pending_residual = None
        if self.cfg.imitation == "amp":  # the state the step reached, before any reset
            terms["amp_next"] = self.state_features(body)
        reward = sum(self.weights.get(name, 0.0) * value for name, value in terms.items()
                     if name not in ("match", "amp_next"))
        reward = np.where(bad, 0.0, np.maximum(reward, 0.0))
        rot = quat_to_matrix(body.root_quat)
        tilt = np.degrees(np.arccos(np.clip(rot[:, 2, 2], -1.0, 1.0)))
        fell = bad | (tilt > FALL_TILT_DEG) | (body.root_pos[:, 2] < FALL_HEIGHT_FRACTION * self.start_height)
        timeout = ~fell & (self.steps >= self.max_frames)
        for i in np.flatnonzero(fell | timeout):
            self.reset_world(i)
        due = np.flatnonzero(~(fell | timeout) & (self.steps >= self.next_command))
        for i in due:
            self.command[i] = self.draw_command()
            self.next_command[i] = self.steps[i] + self._resample_after()
            if self.push_every and self.cfg.push_with_change > 0 and self.rng.uniform() < self.cfg.push_with_change:
                self.next_push[i] = self.steps[i]  # pushed as the command changes (the evaluation's schedule)
        self._push()
        return reward, fell, timeout, terms

    def reward_terms(self, body, sensors: np.ndarray, rate: np.ndarray) -> dict[str, np.ndarray]:
        """The unweighted reward terms (N,) each (module docstring) of the states ``body`` (N, .) a step reached,
        from the step's sensor readings (N, substeps, nsensordata) and its PD-target rate term (N,), at the worlds'
        commands and gait phases; ``match`` (N,) is the matched library frame. Updates each foot's air time and
        whether it is down."""
        eng = self.engine
        velocity = heading_velocity(body.root_lin_vel, body.root_quat, body.root_ang_vel)  # (N, 3)
        cmd = self.command
        rot = quat_to_matrix(body.root_quat)
        gravity = -rot[:, 2, :]
        omega_body = np.einsum("nji,nj->ni", rot, body.root_ang_vel)
        force = np.abs(sensors[..., eng.footforce_adr + 3])  # (N, S, K) normal force
        foot_vel = sensors[..., eng.footvel_adr[:, None] + np.arange(2)]  # (N, S, K, 2)
        self.foot_height = sensors[:, -1, eng.footpos_adr + 2]  # (N, K)
        tau = sensors[..., eng.tau_adr]  # (N, S, J)
        pressed = force > CONTACT_FORCE_N  # (N, S, K)
        down = pressed[:, -1]
        touchdown = down & ~self.down
        self.air_time += self.dt
        moving = (np.abs(cmd[:, :2]).max(1) > MOVING_COMMAND) | (np.abs(cmd[:, 2]) > MOVING_COMMAND)
        air = np.where(moving, ((self.air_time - AIR_TIME_S) * touchdown).sum(1), 0.0)
        self.air_time[down] = 0.0
        self.down = down
        slip = (pressed * (foot_vel ** 2).sum(-1)).mean(1).sum(1)
        lin_err = np.linalg.norm(velocity[:, :2] - cmd[:, :2], axis=1)
        yaw_err = velocity[:, 2] - cmd[:, 2]
        terms = {
            "lin_vel": np.exp(-(lin_err / LIN_VEL_WIDTH) ** 2),
            "yaw_rate": np.exp(-(yaw_err / YAW_RATE_WIDTH) ** 2),
            "yaw_rate_fine": np.exp(-(yaw_err / YAW_RATE_FINE_WIDTH) ** 2),
            "lin_vel_fine": np.exp(-(lin_err / LIN_VEL_FINE_WIDTH) ** 2),
            "lin_vel_z": body.root_lin_vel[:, 2] ** 2,
            "ang_vel_xy": (omega_body[:, :2] ** 2).sum(1),
            "orientation": (gravity[:, :2] ** 2).sum(1),
            "torques": np.mean((tau / self.effort) ** 2, axis=(1, 2)),
            "action_rate": rate,
            "feet_slip": slip,
            "feet_air_time": air,
        }
        if self.matcher is not None:
            match = self.matcher.match(cmd, self.phase, body.joint_pos)
            f = self.frames
            q_err = np.sqrt(np.mean((body.joint_pos - f.joint_pos[match]) ** 2, axis=1))
            h_err = np.sqrt(np.mean((self.foot_height - f.foot_height[match]) ** 2, axis=1)) if self.k else 0.0 * q_err
            terms["joint"] = np.exp(-(q_err / JOINT_WIDTH) ** 2)
            terms["feet"] = np.exp(-(h_err / FEET_WIDTH) ** 2)
            terms["height"] = (body.root_pos[:, 2] - f.base_height[match]) ** 2
            terms["match"] = match
            self.last_match = match
        else:  # the base height the library shows at the nearest command
            terms["height"] = (body.root_pos[:, 2] - self._library_height(cmd)) ** 2
        return terms

    def _library_height(self, command: np.ndarray) -> np.ndarray:
        """(N,) the base height of the library frame whose command is nearest each of ``command`` (N, 3)."""
        if not hasattr(self, "_command_table"):  # each distinct command once, at its first frame (argmin's pick)
            commands, first = np.unique(self.frames.command, axis=0, return_index=True)
            order = np.argsort(first)
            table = torch.as_tensor(commands[order] / np.asarray(MATCH_COMMAND_SCALE), dtype=torch.float32)
            self._command_table = (table, (table ** 2).sum(1), self.frames.base_height[first[order]])
        table, table_sq, height = self._command_table
        query = torch.as_tensor(command / np.asarray(MATCH_COMMAND_SCALE), dtype=torch.float32)
        return height[(table_sq[None, :] - 2.0 * query @ table.T).argmin(1).numpy()]

    def _push(self) -> None:
        """Kick the worlds whose push is due (a velocity added to the base's horizontal velocity)."""
        if not self.push_every or self.rand.push_mps <= 0:
            return
        due = np.flatnonzero(self.steps == self.next_push)
        for i in due:
            angle = self.rng.uniform(-math.pi, math.pi)
            speed = self.rand.push_mps * self.rng.uniform(0.75, 1.25)
            self.physics_state[i, self.qvel0:self.qvel0 + 2] += speed * np.array([math.cos(angle), math.sin(angle)])
            self.next_push[i] += self.push_every

    def state_features(self, body=None) -> np.ndarray:
        """(N, F) what an AMP discriminator sees of the current state, or of ``body`` (:func:`amp_features`)."""
        body = self._body() if body is None else body
        return amp_features(body.joint_pos, body.joint_vel, body.root_pos[:, 2], body.root_quat, body.root_lin_vel,
                            body.root_ang_vel, self.foot_height)


def amp_features(joint_pos: np.ndarray, joint_vel: np.ndarray, base_height: np.ndarray, root_quat: np.ndarray,
                 root_lin_vel: np.ndarray, root_ang_vel: np.ndarray, foot_height: np.ndarray) -> np.ndarray:
    """(N, 2J + 10 + K) a state as AMP's discriminator sees it: joint angles and velocities, base height, gravity in
    the base frame, base velocity in the base frame, base angular velocity in the base frame, foot heights."""
    rot = quat_to_matrix(np.asarray(root_quat, np.float64))
    gravity = -rot[..., 2, :]
    v_body = np.einsum("nji,nj->ni", rot, np.asarray(root_lin_vel, np.float64))
    w_body = np.einsum("nji,nj->ni", rot, np.asarray(root_ang_vel, np.float64))
    return np.concatenate([joint_pos, joint_vel, np.asarray(base_height).reshape(-1, 1), gravity, v_body, w_body,
                           foot_height], axis=1).astype(np.float32)
