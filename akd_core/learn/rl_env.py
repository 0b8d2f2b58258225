"""Many randomised tracking worlds stepped together, for reinforcement learning (:mod:`akd_core.learn.ppo`).

The worlds are :class:`~akd_core.learn.env.SimWorld`'s: the tracking's MuJoCo model, the same PD-target ramp and
action latency, the same pushes. What differs is how they run: every world has its own copy of the compiled model,
re-randomised in place at each reset (no recompile), and one control period of all worlds is one call of MuJoCo's
multi-threaded ``rollout``. Per reset (episode) a world draws:

- a demo and a start frame in it (the demo's simulated state and PD target there; the reference frame is the same);
- the ground friction: the geoms whose friction the model builder sets (found by building the model at two
  frictions) get the drawn coefficient, as :class:`SimWorld` built at that friction has;
- the base mass scale: the floating body's mass and inertia (of the whole fused base, where SimWorld scales the root
  link's);
- the action latency;
- pushes: a velocity kick of ``push_mps`` x U(0.75, 1.25) in a random horizontal direction every ``push_every_s``,
  the first after a random fraction of that.

Observations are :mod:`akd_core.learn.observation`'s (measured terms with uniform noise, the reference's features
looked up in per-clip tables). The critic also gets privileged terms a robot does not measure (base linear velocity
in the base frame, base height error, friction, mass scale).

Reward per control period, each term in [0, 1], DeepMimic-style Gaussian kernels of the error to the reference frame
the step arrived at (:data:`REWARD_TERMS`): joint angles, base tilt (gravity in the base frame), base horizontal
velocity in the heading frame, heading, base height, and the PD-target rate. A fall (tracking's rule) ends the
episode without bootstrapping; the episode's time limit ends it with bootstrapping (``time_outs``).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from akd_core.io.threads import cpu_threads
from akd_core.learn.env import Randomisation, SimWorld, WorldPhysics, delayed_ramp
from akd_core.learn.evaluate import start_state
from akd_core.learn.observation import body_angular_velocity, measured_terms, noise_scales, reference_features
from akd_core.learn.policy import clip_to_limits
from akd_core.learn.reference import ReferenceClip, yaw_of
from akd_core.model.robot import Robot
from akd_core.model.spatial import quat_to_matrix
from akd_core.physics.metrics import FALL_HEIGHT_FRACTION, FALL_TILT_DEG
from akd_core.physics.targets import max_target_step

# (weight, kernel width): reward = sum_i w_i exp(-(error_i / width_i)^2)
REWARD_TERMS = {
    "joint": (0.35, 0.15),  # rad, RMS over joints
    "tilt": (0.2, 0.2),  # |gravity_body - reference gravity_body| (~11 deg)
    "velocity": (0.2, 0.3),  # m/s, horizontal base velocity in the heading frame
    "heading": (0.1, 0.3),  # rad
    "height": (0.1, 0.05),  # m
    "smooth": (0.05, 0.05),  # rad, RMS PD-target change per period
}
PRIVILEGED_SIZE = 6  # base linear velocity (3), height error, friction, mass scale


@dataclass
class RLEnvConfig:
    num_envs: int = 64
    episode_s: float = 10.0
    randomisation: Randomisation | None = None
    threads: int = 0  # MuJoCo rollout threads (0: akd_core.io.threads.cpu_threads)
    seed: int = 0


class TrackingVecEnv:
    """``num_envs`` randomised worlds (module docstring). Actions are absolute PD targets (N, J)."""

    def __init__(self, robot: Robot, physics: WorldPhysics, clips: list[ReferenceClip],
                 starts: list[dict[str, np.ndarray]], cfg: RLEnvConfig):
        from mujoco import rollout as mj_rollout

        self.robot, self.physics, self.clips, self.starts, self.cfg = robot, physics, clips, starts, cfg
        self.rand = cfg.randomisation or Randomisation()
        self.rand.check()
        self.n, self.j, self.dt = cfg.num_envs, robot.num_dofs, physics.dt
        self.max_frames = int(round(cfg.episode_s / self.dt))
        nominal = SimWorld(robot, physics)
        self.engine, self.mujoco = nominal.engine, nominal.mujoco
        base = self.engine.model
        other = SimWorld(robot, physics, friction=float(physics.contact.get("mu", 1.0)) * 0.5 + 0.1).engine.model
        self.friction_geoms = np.flatnonzero(np.abs(base.geom_friction[:, 0] - other.geom_friction[:, 0]) > 1e-9)
        root_joint = self.mujoco.mj_name2id(base, self.mujoco.mjtObj.mjOBJ_JOINT, "root")
        self.base_body = int(base.jnt_bodyid[root_joint])
        self.mass0 = float(base.body_mass[self.base_body])
        self.inertia0 = base.body_inertia[self.base_body].copy()
        self.models = [copy.deepcopy(base) for _ in range(self.n)]
        threads = cpu_threads(cfg.threads)
        self.datas = [self.mujoco.MjData(base) for _ in range(threads)]
        self.pool = mj_rollout.Rollout(nthread=threads) if threads > 1 else None
        self.rollout_fn = mj_rollout.rollout
        self.nstate = self.engine.nstate
        self.qvel0 = self.engine.state_qvel + self.engine.root_v
        self.max_step = max_target_step(robot, 1.0 / self.dt)
        self.noise_scale = noise_scales(self.j)
        self.rng = np.random.default_rng(cfg.seed)
        self._tables()
        # per-world episode state
        self.physics_state = np.zeros((self.n, self.nstate))
        self.targets = np.zeros((self.n, 2, self.j))  # PD targets of the last two control frames
        self.clip_id = np.zeros(self.n, dtype=np.int64)
        self.frame = np.zeros(self.n, dtype=np.int64)  # reference frame of the current state
        self.steps = np.zeros(self.n, dtype=np.int64)  # control periods since the reset
        self.latency = np.zeros(self.n)
        self.friction = np.ones(self.n)
        self.mass_scale = np.ones(self.n)
        self.start_height = np.ones(self.n)
        self.push_every = int(round(self.rand.push_every_s / self.dt)) if self.rand.push_every_s > 0 else 0
        self.next_push = np.zeros(self.n, dtype=np.int64)
        for i in range(self.n):
            self.reset_world(i)

    # -- reference tables -----------------------------------------------------
    def _tables(self) -> None:
        """Per clip, at every reference frame an episode can reach: the observation's reference terms, the reference
        yaw, joint angles, gravity in the base frame, heading-frame velocity and base height (lifted to the demo's
        simulated height)."""
        self.ref_obs, self.ref_yaw, self.ref_q, self.ref_g, self.ref_v, self.ref_h = [], [], [], [], [], []
        for clip, start in zip(self.clips, self.starts):
            count = len(start["actions"]) + self.max_frames + 2
            feats, yaw = reference_features(clip, np.arange(count))
            f = clip.frames(count + 1)
            rot = quat_to_matrix(f["root_quat"][:count])
            vel = np.gradient(f["root_pos"], clip.dt, axis=0)[:count]
            c, s = np.cos(yaw), np.sin(yaw)
            demo_z = np.asarray(start["root_pos"], np.float64)[:, 2]
            lift = float(demo_z.mean() - f["root_pos"][:len(demo_z), 2].mean())
            self.ref_obs.append(feats.astype(np.float64))
            self.ref_yaw.append(yaw)
            self.ref_q.append(f["joint_pos"][:count])
            self.ref_g.append(-rot[:, 2, :])
            self.ref_v.append(np.stack([c * vel[:, 0] + s * vel[:, 1], -s * vel[:, 0] + c * vel[:, 1]], -1))
            self.ref_h.append(f["root_pos"][:count, 2] + lift)

    def _ref(self, table: list[np.ndarray], frames: np.ndarray) -> np.ndarray:
        return np.stack([table[c][f] for c, f in zip(self.clip_id, frames)])

    # -- episodes -------------------------------------------------------------
    def reset_world(self, i: int) -> None:
        """Start a new episode in world ``i`` with fresh draws (module docstring)."""
        rng, rand = self.rng, self.rand
        clip = int(rng.integers(len(self.clips)))
        frame = int(rng.integers(max(len(self.starts[clip]["actions"]) - 1, 1)))
        self.place(i, clip, frame, friction=rng.uniform(*rand.friction), mass_scale=rng.uniform(*rand.mass_scale),
                   latency_s=rng.uniform(*rand.latency_s))
        self.next_push[i] = int(rng.integers(1, self.push_every + 1)) if self.push_every else -1

    def place(self, i: int, clip: int, frame: int, friction: float, mass_scale: float, latency_s: float) -> None:
        """World ``i`` at frame ``frame`` of demo ``clip`` (its simulated state and PD target), with this friction,
        base mass scale and action latency."""
        model = self.models[i]
        self.friction[i], self.mass_scale[i] = friction, mass_scale
        model.geom_friction[self.friction_geoms, 0] = friction
        model.body_mass[self.base_body] = self.mass0 * mass_scale
        model.body_inertia[self.base_body] = self.inertia0 * mass_scale
        self.latency[i] = min(latency_s, self.dt)
        state, target = start_state(self.starts[clip], frame)
        self.physics_state[i] = self.engine.start(state).physics
        self.targets[i] = target
        self.clip_id[i], self.frame[i], self.steps[i] = clip, frame, 0
        self.start_height[i] = float(state.root_pos[2])

    def _body(self):
        return self.engine._body_states(self.physics_state)

    def observations(self, noisy: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Actor observations (N, D) (with noise when ``noisy``) and the privileged critic terms (N, 6)."""
        body = self._body()
        quat = body.root_quat
        gyro = body_angular_velocity(quat, body.root_ang_vel)
        ref_yaw = self._ref(self.ref_yaw, self.frame)
        obs = np.concatenate([measured_terms(body.joint_pos, body.joint_vel, self.targets[:, 1], quat, gyro, ref_yaw),
                              self._ref(self.ref_obs, self.frame)], axis=1)
        if noisy and self.rand.obs_noise > 0:
            obs = obs + self.rng.uniform(-1.0, 1.0, obs.shape) * self.noise_scale * self.rand.obs_noise
        rot = quat_to_matrix(quat)
        v_body = np.einsum("nji,nj->ni", rot, body.root_lin_vel)
        height_err = body.root_pos[:, 2] - self._ref(self.ref_h, self.frame)
        privileged = np.concatenate([v_body, height_err[:, None], self.friction[:, None],
                                     self.mass_scale[:, None]], axis=1)
        return obs, privileged

    def step(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Apply PD targets (N, J) (clipped to the URDF limits and the velocity step, as every AKD controller sends
        them) for one control period. Returns rewards (N,), terminated (N,) (fell), timed out (N,) and the reward
        terms; worlds that ended are reset (their next observation is the new episode's)."""
        targets = np.asarray(targets, dtype=np.float64)
        last = self.targets[:, 1]
        sent = clip_to_limits(self.robot, targets, last, self.max_step)  # (N, J) at once
        substeps = self.physics.substeps
        ctrl = np.zeros((self.n, substeps, self.models[0].nu))
        ctrl[:, :, self.engine.act] = delayed_ramp(self.targets[:, 0], last, sent, substeps, self.dt, self.latency)
        if self.pool is not None:
            state, _ = self.pool.rollout(self.models, self.datas, self.physics_state, ctrl)
        else:
            state, _ = self.rollout_fn(self.models, self.datas[0], self.physics_state, ctrl)
        self.physics_state = state[:, -1].copy()
        bad = ~np.isfinite(self.physics_state).all(1)
        self.physics_state[bad] = 0.0
        smooth = np.sqrt(np.mean((sent - self.targets[:, 1]) ** 2, axis=1))
        self.targets = np.stack([self.targets[:, 1], sent], axis=1)
        self.frame += 1
        self.steps += 1
        body = self._body()
        rot = quat_to_matrix(body.root_quat)
        terms = self._reward_terms(body, rot, smooth)
        reward = np.where(bad, 0.0, sum(REWARD_TERMS[name][0] * value for name, value in terms.items()))
        tilt = np.degrees(np.arccos(np.clip(rot[:, 2, 2], -1.0, 1.0)))
        fell = bad | (tilt > FALL_TILT_DEG) | (body.root_pos[:, 2] < FALL_HEIGHT_FRACTION * self.start_height)
        timeout = ~fell & (self.steps >= self.max_frames)
        for i in np.flatnonzero(fell | timeout):
            self.reset_world(i)
        self._push()
        return reward, fell, timeout, terms

    def _reward_terms(self, body, rot: np.ndarray, smooth: np.ndarray) -> dict[str, np.ndarray]:
        def kernel(name: str, err: np.ndarray) -> np.ndarray:
            return np.exp(-(err / REWARD_TERMS[name][1]) ** 2)

        frame = self.frame
        q_err = np.sqrt(np.mean((body.joint_pos - self._ref(self.ref_q, frame)) ** 2, axis=1))
        g_err = np.linalg.norm(-rot[:, 2, :] - self._ref(self.ref_g, frame), axis=1)
        yaw = yaw_of(body.root_quat)
        c, s = np.cos(yaw), np.sin(yaw)
        v = body.root_lin_vel
        v_heading = np.stack([c * v[:, 0] + s * v[:, 1], -s * v[:, 0] + c * v[:, 1]], -1)
        v_err = np.linalg.norm(v_heading - self._ref(self.ref_v, frame), axis=1)
        d_yaw = self._ref(self.ref_yaw, frame) - yaw
        yaw_err = np.abs(np.arctan2(np.sin(d_yaw), np.cos(d_yaw)))
        h_err = np.abs(body.root_pos[:, 2] - self._ref(self.ref_h, frame))
        return {"joint": kernel("joint", q_err), "tilt": kernel("tilt", g_err), "velocity": kernel("velocity", v_err),
                "heading": kernel("heading", yaw_err), "height": kernel("height", h_err),
                "smooth": kernel("smooth", smooth)}

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
