"""Velocity-command policies (``akd train-policy LIBRARY --task velocity``): a policy that walks at the commanded
(vx, vy, yaw rate) in the style of a motion library, with no reference clip at run time.

- **Data**: an ``akd library`` folder (its ``dataset/dataset.hdf5`` and the box of its ``coverage.json``) or any
  HDF5 dataset whose demos carry ``obs/command`` (the box is then the range of those commands).
- **Observation** (:func:`akd_core.learn.observation.velocity_observation_layout`): joint encoders, last PD target,
  IMU gravity and gyro, the command and a gait clock (:class:`~akd_core.learn.command.GaitClock`: a phase running at
  the library's stride frequency for the command, stopped while it asks to stand; without it a policy standing
  still never sets off, since the library's stands look the same at every command); with ``history`` also the
  measured terms of that many earlier control steps (:class:`~akd_core.learn.observation.ObservationHistory`);
  **action** (``action``):
  absolute PD targets (normalised by the library's targets), or ``residual``: a bounded residual on the library
  feedforward at the command and gait phase (:mod:`akd_core.learn.velocity_feedforward`, PMTG-style; the table of
  library frames is part of the policy and of its ONNX graph).
- **Behaviour cloning** first: each library frame's state with the command it followed -> the next PD target, the
  pairs :mod:`akd_core.learn.bc` fits for a reference-conditioned policy. It starts PPO from the library's gaits,
  which PPO alone would not find within what two CPU cores can run.
  A residual policy starts from the bare feedforward instead (``residual_start = "zero"``: the network's last layer
  zeroed), or from BC of the pre-tanh residual (``"bc"``).
- **PPO** then (:func:`akd_core.learn.ppo.run_ppo`, rsl-rl-lib) in :class:`~akd_core.learn.velocity_env.
  VelocityVecEnv`: commands drawn in the box and changed mid-episode, the evaluation's randomisation, a reward of
  command tracking + imitation of the library (an AMP discriminator by default, :mod:`akd_core.learn.amp`, or
  motion matching to the library frame at the command and gait phase) + regularisers. Checkpointed in
  ``OUTPUT.ckpt``; a re-run resumes.

The result is an ordinary policy file (``task = "velocity"``, the command box and the library's gait per command in
its metadata): ``akd eval-policy --task velocity``, ``akd export-policy`` and ``akd ros policy --cmd-vel`` take it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from akd_core.export.hdf5 import read_hdf5
from akd_core.io.errors import ConfigError, MotionError
from akd_core.io.rundir import RunDir
from akd_core.io.threads import flush_subnormals
from akd_core.learn.amp import AMPShaper
from akd_core.learn.bc import dataset_physics, demo_starts
from akd_core.learn.command import COMMAND_NAMES, COMMAND_UNITS, CommandBox, library_box
from akd_core.learn.dataset import PolicyDataset, load_dataset
from akd_core.learn.motion_library import LibraryFrames
from akd_core.learn.observation import (
    MAX_HISTORY,
    body_angular_velocity,
    observation_slices,
    stack_history,
    velocity_observation_layout,
    velocity_observations,
)
from akd_core.learn.policy import (
    DEFAULT_HIDDEN,
    FitConfig,
    PolicyMeta,
    TrackingPolicy,
    check_robot_matches,
    fit,
    robot_limits,
)
from akd_core.learn.ppo import PPOConfig, _models, _Observer, build_ppo, decode, run_ppo
from akd_core.learn.velocity_env import (
    IMITATIONS,
    LATE_TERMS,
    REWARD_WEIGHTS,
    VelocityEnvConfig,
    VelocityVecEnv,
    privileged_size,
)
from akd_core.learn.velocity_feedforward import RESIDUAL_BOUND_RAD, LibraryFeedforward
from akd_core.model.load import load_robot, load_run_robot
from akd_core.model.robot import Robot
from akd_core.model.skeletons import SKELETONS

log = logging.getLogger(__name__)

LIBRARY_DATASET = Path("dataset") / "dataset.hdf5"
VELOCITY_ACTIONS = ("residual", "absolute")
RESIDUAL_STARTS = ("zero", "bc")
STEER_MAX = 2.0  # m/s or rad/s: a steering bound larger than any library's box is a typo
# The recipe measured best on the built-in quadruped and a1 (docs/policy.md, "Measured (velocity)"): the residual
# action, 2000 PPO iterations with an entropy bonus that holds the exploration std near its start, and the narrow
# yaw-rate kernel (REWARD_WEIGHTS). Steering stays off: it did not lower the falls on a second seed or robot.
VELOCITY_PPO_ITERATIONS = 2000
VELOCITY_ENTROPY = 0.0025


@dataclass
class VelocityConfig:
    """Training of a velocity-command policy: BC (``hidden``, ``fit``), then PPO (``ppo``) in the command worlds."""

    hidden: tuple[int, ...] = DEFAULT_HIDDEN
    fit: FitConfig = field(default_factory=FitConfig)
    ppo: PPOConfig = field(default_factory=lambda: PPOConfig(iterations=VELOCITY_PPO_ITERATIONS, episode_s=20.0,
                                                             init_std=0.1, entropy=VELOCITY_ENTROPY))
    resample_s: tuple[float, float] = (2.0, 6.0)
    zero_share: float = 0.1
    library_share: float = 0.4
    start_draw_share: float = 0.5
    push_with_change: float = 0.0  # share of command changes pushed at the same step (velocity_env.py)
    history: int = 0  # control steps of measured terms before the current ones in the observation
    imitation: str = "amp"  # it beat motion matching on falls and vx RMSE (docs/policy.md)
    amp_regularise: bool = False  # amp: hold the discriminator back (logit L2, weight decay: amp.py)
    action: str = "residual"  # a bounded residual on the library feedforward (velocity_feedforward.py), or "absolute"
    residual_bound: float = RESIDUAL_BOUND_RAD
    residual_start: str = "zero"  # residual: PPO from the bare feedforward ("zero") or from BC of the residual
    steer: tuple[float, float, float] | None = None  # residual: steering bounds (velocity_feedforward.py)
    weights: dict[str, float] = field(default_factory=lambda: dict(REWARD_WEIGHTS))
    seed: int = 0

    def check(self) -> None:
        if self.action not in VELOCITY_ACTIONS:
            raise ConfigError(f"--action must be one of {VELOCITY_ACTIONS}, got {self.action!r}")
        if self.residual_start not in RESIDUAL_STARTS:
            raise ConfigError(f"--residual-start must be one of {RESIDUAL_STARTS}, got {self.residual_start!r}")
        if not 0 < self.residual_bound <= 3.0:
            raise ConfigError(f"--residual-bound must be in (0, 3] rad, got {self.residual_bound}")
        if self.steer is not None:
            if self.action != "residual":
                raise ConfigError("--steer shifts the library feedforward's command: it needs --action residual")
            if len(self.steer) != 3 or not all(0 <= v <= STEER_MAX for v in self.steer) or not any(self.steer):
                raise ConfigError(f"--steer takes three bounds VX,VY,YAW in [0, {STEER_MAX:g}] (m/s, m/s, rad/s), "
                                  f"not all zero; got {self.steer}")
        if self.imitation not in IMITATIONS:
            raise ConfigError(f"--imitation must be one of {IMITATIONS}, got {self.imitation!r}")
        if self.amp_regularise and self.imitation != "amp":
            raise ConfigError("--amp-regularise holds back the AMP discriminator: it needs --imitation amp")
        lo, hi = self.resample_s
        if not 0 < lo <= hi:
            raise ConfigError(f"--resample-seconds must be LO,HI with 0 < LO <= HI, got {lo},{hi}")
        if not (0 <= self.zero_share and 0 <= self.library_share and self.zero_share + self.library_share <= 1):
            raise ConfigError("--zero-share and --library-share must be non-negative and sum to at most 1")
        if not 0 <= self.history <= MAX_HISTORY:
            raise ConfigError(f"--history must be 0..{MAX_HISTORY} control steps, got {self.history}")
        if not 0 <= self.push_with_change <= 1:
            raise ConfigError(f"--push-with-change must be a share in [0, 1], got {self.push_with_change}")
        unknown = sorted(set(self.weights) - set(REWARD_WEIGHTS))
        if unknown:
            raise ConfigError(f"unknown reward terms {unknown}; the terms are {sorted(REWARD_WEIGHTS)}")
        self.ppo.check()

    def env_config(self) -> VelocityEnvConfig:
        return VelocityEnvConfig(num_envs=self.ppo.num_envs, episode_s=self.ppo.episode_s, resample_s=self.resample_s,
                                 zero_share=self.zero_share, library_share=self.library_share,
                                 start_draw_share=self.start_draw_share,
                                 push_with_change=self.push_with_change, history=self.history,
                                 imitation=self.imitation,
                                 weights=dict(self.weights), randomisation=self.ppo.randomisation,
                                 threads=self.ppo.threads, seed=self.seed)

    def to_dict(self) -> dict[str, Any]:
        out = {"hidden": list(self.hidden), "fit": dataclasses.asdict(self.fit), "ppo": self.ppo.to_dict(),
               "resample_s": list(self.resample_s), "zero_share": self.zero_share,
               "library_share": self.library_share, "start_draw_share": self.start_draw_share,
               "imitation": self.imitation,
               # (a late term's weight of 0 absent: checkpoints of before the term resume)
               "weights": {k: v for k, v in self.weights.items() if k not in LATE_TERMS or v},
               "seed": self.seed}
        if self.push_with_change:  # (absent at 0: checkpoints of before the option resume)
            out["push_with_change"] = self.push_with_change
        if self.history:  # (likewise)
            out["history"] = self.history
        if self.amp_regularise:  # (likewise)
            out["amp_regularise"] = True
        if self.action == "residual":  # (absent for absolute: checkpoints of before the residual action resume)
            out.update(action=self.action, residual_bound=self.residual_bound, residual_start=self.residual_start)
            if self.steer is not None:  # (likewise)
                out["steer"] = list(self.steer)
        out["ppo"].pop("bc", None)  # the velocity task's BC is ``hidden`` + ``fit``
        return out


def library_file(path: str | Path) -> tuple[Path, Path]:
    """(the dataset file, the library folder) of an ``akd library`` folder or an HDF5 dataset."""
    path = Path(path)
    if path.is_dir():
        file = path / LIBRARY_DATASET
        if not file.is_file():
            raise ConfigError(f"{path} is a folder without {LIBRARY_DATASET}; give an `akd library --out DIR` folder "
                              "(run it to the end) or an HDF5 dataset whose demos carry obs/command")
        return file, path
    return path, path.parent.parent if path.parent.name == "dataset" else path.parent


def library_robot(path: str | Path) -> Robot:
    """The robot a library was made for: its built-in name, else the robot of the run its first demo came from."""
    file, folder = library_file(path)
    raw = read_hdf5(file)
    name = str(raw.env_args.get("robot", ""))
    if name in SKELETONS:
        return load_robot(name)
    run = raw.demos[0].attrs.get("run") if raw.demos else None
    # the run as recorded (relative to where `akd library` ran), else in the library's own runs/ (a library used
    # from another folder, or moved)
    for candidate in ([Path(str(run)), folder / "runs" / Path(str(run)).name] if run else []):
        if candidate.is_dir():
            return load_run_robot(RunDir(candidate))
    raise ConfigError(f"{file}: robot '{name}' is not a built-in robot and the run its demos came from is not at hand; "
                      "give --robot ROBOT")


def load_library(path: str | Path) -> tuple[PolicyDataset, CommandBox, str]:
    """The dataset of a motion library and its command box: an ``akd library`` folder (``dataset/dataset.hdf5``,
    the box of ``coverage.json``) or an HDF5 file (the box of the library folder it lies in, else the range of its
    demos' commands). Returns the dataset, the box and where the box came from."""
    file, folder = library_file(path)
    dataset = load_dataset(file)
    box = library_box(folder)
    if box is not None:
        return dataset, box, str(folder / "coverage.json")
    commands = [d.command for d in dataset.demos if d.command is not None]
    if not commands:
        raise MotionError(f"{file}: no demo carries a velocity command (obs/command); a velocity-command policy "
                          "learns from a motion library: `akd library --robot ROBOT --out DIR`, then "
                          "`akd train-policy DIR --task velocity`")
    return dataset, CommandBox.from_commands(np.concatenate(commands)), f"the commands of {file}"


def velocity_samples(dataset: PolicyDataset, frames: LibraryFrames,
                     history: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Behaviour-cloning pairs over every demo: observations (N, 3J + 11, then ``history`` x (3J + 6): the demo's
    earlier steps, its first repeated before it) of states 0..T-2 with the command each followed and the library's
    gait phase there, and the next PD targets (N, J)."""
    obs, targets = [], []
    for i, d in enumerate(dataset.demos):
        k = np.arange(d.num_frames - 1)
        quat = d.root_quat[k]
        phase = frames.phase[frames.demo == i][k]
        demo = velocity_observations(d.joint_pos[k], d.joint_vel[k], d.actions[k], quat,
                                     body_angular_velocity(quat, d.root_ang_vel[k]), d.command[k], phase)
        obs.append(stack_history(demo, history, d.joint_pos.shape[1]) if history else demo)
        targets.append(d.actions[k + 1].astype(np.float32))
    return np.concatenate(obs), np.concatenate(targets)


def library_feedforward(dataset: PolicyDataset, frames: LibraryFrames, bound: float = RESIDUAL_BOUND_RAD,
                        steer: tuple[float, float, float] | None = None) -> LibraryFeedforward:
    """The library feedforward (:mod:`akd_core.learn.velocity_feedforward`): each frame's command and gait phase ->
    the PD target that followed it (the last frame of a demo: its own)."""
    targets = []
    for d in dataset.demos:
        nxt = np.minimum(np.arange(d.num_frames) + 1, d.num_frames - 1)
        targets.append(d.actions[nxt])
    return LibraryFeedforward.from_table(frames.command, frames.phase, np.concatenate(targets).astype(np.float32),
                                         bound, steer)


def velocity_targets(policy: TrackingPolicy, raw_obs: np.ndarray, action: torch.Tensor,
                     env: VelocityVecEnv | None = None) -> np.ndarray:
    """PPO's normalised actions (N, J) at raw observations (N, D) -> PD targets (N, J), as the policy decodes them
    (a residual policy's residual noted on ``env`` for its ``residual_rate`` term)."""
    if policy.action_mode != "residual":
        return decode(policy, raw_obs, action)
    with torch.no_grad():
        ff, residual = policy.residual_parts(torch.as_tensor(raw_obs, dtype=torch.float32), action)
    residual = residual.numpy().astype(np.float64)
    if env is not None:
        env.note_residual(residual)
    return ff.numpy().astype(np.float64) + residual


def velocity_meta(dataset: PolicyDataset, robot: Robot, box: CommandBox, frames: LibraryFrames, hidden, method: str,
                  train: dict[str, Any], action_mode: str = "absolute", history: int = 0) -> PolicyMeta:
    """The policy file's metadata: the library demos' states and gait phases (where evaluation episodes start), the
    command box and slot, the gait clock, the library's gait per command."""
    layout = velocity_observation_layout(robot.num_dofs, history)
    slices = observation_slices(layout)
    slot, clock = slices["command"], slices["clock"]
    starts = [{**demo_starts(d), "phase": frames.phase[frames.demo == i].astype(np.float32)}
              for i, d in enumerate(dataset.demos)]
    return PolicyMeta(robot=dataset.robot or robot.name, joint_names=list(robot.joint_names), dt=dataset.dt,
                      kp=dataset.kp, kd=dataset.kd, obs_layout=layout, hidden=tuple(hidden), action_mode=action_mode,
                      clips=[], starts=starts,
                      physics=dataset_physics(dataset, robot).to_dict(), limits=robot_limits(robot), method=method,
                      train=train, task="velocity",
                      command={"names": list(COMMAND_NAMES), "units": list(COMMAND_UNITS), "frame": "heading",
                               "indices": [slot.start, slot.stop], "box": box.to_dict(),
                               "clock": {**frames.gait_clock().to_dict(), "indices": [clock.start, clock.stop]}},
                      library=frames.style_table())


def train_velocity_bc(dataset: PolicyDataset, frames: LibraryFrames, robot: Robot, cfg: VelocityConfig,
                      progress: bool = True) -> tuple[TrackingPolicy, dict[str, Any]]:
    """Behaviour cloning of a velocity-command policy on the library (module docstring)."""
    generator = torch.Generator().manual_seed(cfg.seed)
    obs, targets = velocity_samples(dataset, frames, cfg.history)
    if cfg.action == "absolute":
        policy = TrackingPolicy(obs.shape[1], robot.num_dofs, cfg.hidden, "absolute", task="velocity")
        result = fit(policy, obs, targets, cfg.fit, generator, progress=progress, desc="train velocity bc")
        return policy, {"method": "bc", "epochs": cfg.fit.epochs, **result}
    # residual: observations normalised as the library's; the network's output is the pre-tanh residual itself
    policy = TrackingPolicy(obs.shape[1], robot.num_dofs, cfg.hidden, "residual", task="velocity",
                            feedforward=library_feedforward(dataset, frames, cfg.residual_bound, cfg.steer))
    with torch.no_grad():  # once: over every library frame it is the residual's costliest step (2.8 s for a1's)
        ff = policy.feedforward(torch.as_tensor(obs, dtype=torch.float32)).numpy().astype(np.float64)
    policy.set_normalisation(obs, policy.residual_actions(ff, targets))
    policy.act_mean.zero_()
    policy.act_std.fill_(1.0)
    if cfg.residual_start == "bc":
        result = fit(policy, obs, targets, cfg.fit, generator, progress=progress, desc="train velocity bc",
                     normalise=False)
        return policy, {"method": "bc", "epochs": cfg.fit.epochs, **result}
    last = [m for m in policy.net if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():  # zero residual: the bare library feedforward
        last.weight.zero_()
        last.bias.zero_()
    # the zero residual's targets are the feedforward's (tanh(0) = 0)
    return policy, {"method": "feedforward", "epochs": 0, "seconds": 0.0, "num_samples": int(len(obs)),
                    "target_rmse_rad": float(np.sqrt(np.mean((ff - targets) ** 2)))}


def train_velocity(library: str | Path, robot: Robot, cfg: VelocityConfig | None = None,
                   checkpoint: Path | None = None,
                   progress: bool = True) -> tuple[TrackingPolicy, PolicyMeta, dict[str, Any]]:
    """BC, then PPO (module docstring; ``cfg.ppo.iterations`` 0: BC only). Returns the policy, its metadata and the
    training metrics (BC's fit, the PPO history, ``train_seconds``, the box and where it came from)."""
    cfg = cfg or VelocityConfig()
    cfg.check()
    flush_subnormals()  # the residual's feedforward over the library, from its BC targets on
    tic = time.perf_counter()
    dataset, box, box_source = load_library(library)
    check_robot_matches(dataset.joint_names, robot, f"dataset {dataset.path}")
    frames = LibraryFrames.from_dataset(dataset, robot)
    torch.manual_seed(cfg.seed)
    policy, bc_metrics = train_velocity_bc(dataset, frames, robot, cfg, progress)
    history: list[dict[str, Any]] = []
    seconds_before = 0.0
    ppo = cfg.ppo
    if ppo.iterations > 0:
        starts = [demo_starts(d) for d in dataset.demos]
        env = VelocityVecEnv(robot, dataset_physics(dataset, robot), frames, starts, box, cfg.env_config())
        observe = _Observer(policy, ppo.num_envs)
        raw, obs = observe(env)
        actor, critic = _models(policy, obs, ppo, policy.action_dim)
        alg = build_ppo(actor, critic, obs, ppo, policy.action_dim)
        shaper = None
        if cfg.imitation == "amp":
            shaper = AMPShaper(frames, dataset, env, seed=cfg.seed, regularise=cfg.amp_regularise)
        key = {"task": "velocity", "config": {k: v for k, v in cfg.to_dict().items() if k != "ppo"},
               "ppo": {k: v for k, v in ppo.to_dict().items() if k not in ("iterations", "bc")},
               "dataset": str(dataset.path),  # the box's gaits only label the evaluation's windows
               "box": {k: v for k, v in box.to_dict().items() if k != "gaits"}}
        history, seconds_before = run_ppo(env, observe, (raw, obs), lambda r, a: velocity_targets(policy, r, a, env),
                                          actor, critic, alg, ppo, cfg.weights, checkpoint, key, tic, progress,
                                          desc="ppo velocity", shaper=shaper)
        policy.net.load_state_dict(actor.mlp.state_dict())
        policy.eval()
    method = "velocity-ppo" if ppo.iterations > 0 else f"velocity-{bc_metrics['method']}"
    metrics = {"method": method, "task": "velocity", "train_seconds": seconds_before + time.perf_counter() - tic,
               "iterations": ppo.iterations, "env_steps": ppo.iterations * ppo.num_envs * ppo.steps_per_env,
               "bc": bc_metrics, "history": history, "config": cfg.to_dict(), "seed": cfg.seed,
               "num_demos": len(dataset.demos), "num_samples": int(sum(d.num_frames for d in dataset.demos)),
               "dataset": str(dataset.path), "box": box.to_dict(), "box_source": box_source,
               "imitation": cfg.imitation, "action": cfg.action,
               "privileged_critic_terms": privileged_size(len(frames.foot_names))}
    return policy, velocity_meta(dataset, robot, box, frames, cfg.hidden, method, metrics, policy.action_mode,
                                 cfg.history), metrics
