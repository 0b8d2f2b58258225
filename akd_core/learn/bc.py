"""Behaviour cloning: the policy regresses the tracked PD targets from the demonstrations' own states.

Pairs (state k with last target ``actions[k]`` and reference frame k) -> ``actions[k+1]`` over every demo
(:mod:`akd_core.learn.policy` has the timing convention). BC is also DAgger's first iterate.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from akd_core.learn.dataset import OBS_KEYS, Demo, PolicyDataset
from akd_core.learn.env import WorldPhysics
from akd_core.learn.observation import body_angular_velocity, build_observations, observation_layout
from akd_core.learn.policy import (
    DEFAULT_HIDDEN,
    FitConfig,
    PolicyMeta,
    TrackingPolicy,
    check_robot_matches,
    fit,
    robot_limits,
)
from akd_core.model.robot import Robot
from akd_core.physics.params import ContactParams, default_physics

MUJOCO_SIM_DT = 2e-3  # s, upper bound of the MuJoCo step when the dataset does not record the tracking's


@dataclass
class BCConfig:
    hidden: tuple[int, ...] = DEFAULT_HIDDEN
    action_mode: str = "reference"
    fit: FitConfig = field(default_factory=FitConfig)
    seed: int = 0


def dataset_physics(dataset: PolicyDataset, robot: Robot) -> WorldPhysics:
    """The MuJoCo physics the data was tracked with: the dataset's kp/kd, and its env_args' armature, contact,
    ``sim_dt_s`` and ``integrator`` (written by ``akd export`` from the track stage); the tracking defaults where they
    are absent (implicitfast: what tracking used before it recorded its integrator)."""
    env = dataset.env_args
    defaults = default_physics(robot, kp=dataset.kp, kd=dataset.kd)
    armature = env.get("armature")
    armature = defaults.armature if armature is None else np.broadcast_to(
        np.asarray(armature, dtype=np.float64), (robot.num_dofs,)).copy()
    contact = dict(vars(ContactParams()))
    if isinstance(env.get("contact"), dict):
        contact.update({k: float(v) for k, v in env["contact"].items() if k in contact})
    sim_dt = float(env.get("sim_dt_s") or 0.0)
    if sim_dt <= 0:
        sim_dt = dataset.dt / max(1, int(math.ceil(dataset.dt / MUJOCO_SIM_DT - 1e-9)))
    return WorldPhysics(kp=dataset.kp, kd=dataset.kd, armature=armature, contact=contact, dt=dataset.dt,
                        sim_dt=sim_dt, integrator=str(env.get("integrator") or "implicitfast"))


def demo_starts(demo: Demo) -> dict[str, np.ndarray]:
    """The demo's simulated states and actions (float32), where evaluation and DAgger episodes start."""
    return {**{k: np.asarray(getattr(demo, k), np.float32) for k in OBS_KEYS},
            "actions": demo.actions.astype(np.float32)}


def demo_samples(demo: Demo) -> tuple[np.ndarray, np.ndarray]:
    """Training pairs of one demo: observations (T-1, D) of states 0..T-2 (no noise) and targets (T-1, J) =
    actions[1..T-1]."""
    k = np.arange(demo.num_frames - 1)
    quat = demo.root_quat[k]
    obs = build_observations(demo.joint_pos[k], demo.joint_vel[k], demo.actions[k], quat,
                             body_angular_velocity(quat, demo.root_ang_vel[k]), demo.reference, k)
    return obs, demo.actions[k + 1].astype(np.float32)


def training_arrays(dataset: PolicyDataset) -> tuple[np.ndarray, np.ndarray]:
    """Stacked observations (N, D) and next targets (N, J) over all demos."""
    parts = [demo_samples(d) for d in dataset.demos]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def policy_meta(dataset: PolicyDataset, robot: Robot, cfg: BCConfig, method: str,
                train: dict[str, Any]) -> PolicyMeta:
    return PolicyMeta(robot=dataset.robot or robot.name, joint_names=list(robot.joint_names), dt=dataset.dt,
                      kp=dataset.kp, kd=dataset.kd, obs_layout=observation_layout(robot.num_dofs),
                      hidden=tuple(cfg.hidden), action_mode=cfg.action_mode,
                      clips=[d.reference for d in dataset.demos], starts=[demo_starts(d) for d in dataset.demos],
                      physics=dataset_physics(dataset, robot).to_dict(), limits=robot_limits(robot), method=method,
                      train=train)


def train_bc(dataset: PolicyDataset, robot: Robot, cfg: BCConfig | None = None,
             progress: bool = True) -> tuple[TrackingPolicy, PolicyMeta, dict[str, Any]]:
    """Fit a :class:`TrackingPolicy` to the dataset's (state k -> PD target k+1) pairs. Returns the policy, its
    metadata and the training metrics (``train_seconds``, ``final_loss``, ``target_rmse_rad``, ``num_samples``)."""
    cfg = cfg or BCConfig()
    check_robot_matches(dataset.joint_names, robot, f"dataset {dataset.path}")
    start = time.perf_counter()
    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    obs, targets = training_arrays(dataset)
    policy = TrackingPolicy(obs.shape[1], robot.num_dofs, cfg.hidden, cfg.action_mode)
    result = fit(policy, obs, targets, cfg.fit, generator, progress=progress, desc="train bc")
    metrics = {"method": "bc", "train_seconds": time.perf_counter() - start, "epochs": cfg.fit.epochs,
               "num_samples": result["num_samples"], "num_demos": len(dataset.demos),
               "final_loss": result["final_loss"], "target_rmse_rad": result["target_rmse_rad"],
               "obs_noise": cfg.fit.obs_noise, "action_mode": cfg.action_mode, "seed": cfg.seed,
               "dataset": str(dataset.path)}
    return policy, policy_meta(dataset, robot, cfg, "bc", metrics), metrics
