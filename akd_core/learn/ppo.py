"""PPO fine-tuning of a tracking policy under pushes (``akd train-policy --method ppo``), with ``rsl-rl-lib``'s PPO.

Cloning (BC, DAgger) teaches the policy the expert's targets at the states it is shown; what it does not learn well
is how to come back from where a push takes it, where a small systematic error compounds into a fall
(docs/policy.md). Reinforcement learning optimises exactly that: the return of whole episodes under the
disturbances. So the cloned policy is the starting point and PPO fine-tunes it in
:class:`~akd_core.learn.rl_env.TrackingVecEnv` (the evaluation's randomisation: pushes, friction, base mass, action
latency, observation noise; a DeepMimic-style tracking reward).

- The actor is the policy's own network: its input is the observation normalised with the policy's fixed
  statistics, its output the normalised action (the PD target's offset from the reference, as the policy file
  defines it), plus a learnt Gaussian exploration std (``init_std`` in normalised action units). The weights are
  copied in before training and back into the policy after it, so the result is an ordinary policy file (ONNX
  export, ROS node, evaluation unchanged).
- The critic is a fresh MLP that also sees privileged terms (base velocity, height error, friction, mass scale),
  trained alone for ``critic_warmup`` iterations first (the actor frozen), so early advantages do not wreck the
  cloned policy.
- A run starts from ``--init POLICY.pt`` (e.g. a DAgger policy) or from BC on the dataset. It checkpoints every
  ``checkpoint_every`` iterations in ``OUTPUT.ckpt``; a re-run resumes there (the environment's episodes restart).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from tqdm import tqdm

from akd_core.io.errors import ConfigError
from akd_core.io.fileio import atomic_path
from akd_core.io.threads import flush_subnormals
from akd_core.learn.bc import BCConfig, dataset_physics, demo_starts, policy_meta, train_bc
from akd_core.learn.dataset import PolicyDataset
from akd_core.learn.env import Randomisation
from akd_core.learn.policy import TrackingPolicy, check_robot_matches, load_policy
from akd_core.learn.rl_env import PRIVILEGED_SIZE, REWARD_TERMS, RLEnvConfig, TrackingVecEnv
from akd_core.model.robot import Robot

log = logging.getLogger(__name__)


@dataclass
class PPOConfig:
    iterations: int = 1500
    num_envs: int = 64
    steps_per_env: int = 32  # transitions per world per iteration
    episode_s: float = 10.0
    init_std: float = 0.5  # exploration std, normalised action units
    learning_rate: float = 1e-5  # start; adapted to desired_kl per iteration
    desired_kl: float = 0.06  # per iteration; 0.01 learnt 2x slower from BC (docs/policy.md)
    critic_learning_rate: float = 3e-4
    critic_warmup: int = 30  # iterations training the critic alone
    gamma: float = 0.99
    lam: float = 0.95
    epochs: int = 5
    minibatches: int = 4
    clip: float = 0.2
    entropy: float = 0.0
    critic_hidden: tuple[int, ...] = (256, 256)
    checkpoint_every: int = 25
    threads: int = 0
    randomisation: Randomisation = field(default_factory=Randomisation)
    bc: BCConfig = field(default_factory=BCConfig)
    seed: int = 0

    def check(self) -> None:
        if self.iterations < 0 or self.num_envs < 1 or self.steps_per_env < 2 or self.episode_s <= 0:
            raise ConfigError("PPO needs --iterations >= 0, --envs >= 1, --steps-per-env >= 2 and "
                              "--episode-seconds > 0")
        if self.init_std <= 0 or self.learning_rate <= 0 or self.desired_kl <= 0:
            raise ConfigError("--init-std, --ppo-lr and --ppo-kl must be positive")
        if self.entropy < 0:
            raise ConfigError(f"--entropy must be at least 0, got {self.entropy}")
        self.randomisation.check()

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["randomisation"] = self.randomisation.to_dict()
        return out


def _models(policy: TrackingPolicy, obs, cfg: PPOConfig, num_joints: int):
    from rsl_rl.models import MLPModel

    groups = {"actor": ["policy"], "critic": ["critic"]}
    actor = MLPModel(obs, groups, "actor", num_joints, hidden_dims=list(policy.hidden), activation="elu",
                     obs_normalization=False,
                     distribution_cfg={"class_name": "GaussianDistribution", "init_std": cfg.init_std})
    actor.mlp.load_state_dict(policy.net.state_dict())
    critic = MLPModel(obs, groups, "critic", 1, hidden_dims=list(cfg.critic_hidden), activation="elu",
                      obs_normalization=True)
    return actor, critic


class _Observer:
    """Raw observations -> the TensorDict the actor (normalised observation) and critic (+ privileged) read."""

    def __init__(self, policy: TrackingPolicy, num_envs: int):
        from tensordict import TensorDict

        self.td, self.policy, self.n = TensorDict, policy, num_envs
        self.mean, self.std = policy.obs_mean.numpy(), policy.obs_std.numpy()

    def __call__(self, env: TrackingVecEnv):
        raw, privileged = env.observations()
        normalised = ((raw - self.mean) / self.std).astype(np.float32)
        critic = np.concatenate([normalised, privileged.astype(np.float32)], axis=1)
        return raw, self.td({"policy": torch.from_numpy(normalised), "critic": torch.from_numpy(critic)},
                            batch_size=[self.n])


def decode(policy: TrackingPolicy, raw_obs: np.ndarray, action: torch.Tensor) -> np.ndarray:
    """Normalised actions (N, J) -> absolute PD targets (N, J), as :meth:`TrackingPolicy.forward` decodes them."""
    a = (policy.act_mean + policy.act_std * action).numpy().astype(np.float64)
    return raw_obs[:, policy.ref_slice] + a if policy.action_mode == "reference" else a


def _gaussian(actor, obs) -> tuple[torch.Tensor, torch.Tensor]:
    """The actor's action distribution (mean, std), each (N, J), at observations ``obs``."""
    with torch.no_grad():
        actor(obs, stochastic_output=True)
        mean, std = actor.output_distribution_params
        return mean.clone(), std.expand_as(mean).clone()


def _adapt_learning_rate(alg, actor, obs, old: tuple[torch.Tensor, torch.Tensor], desired_kl: float) -> float:
    """KL divergence of the actor's Gaussian from before to after an update, on the update's observations; the
    learning rate is divided (multiplied) by 1.5 when it is above twice (below half) ``desired_kl``. rsl-rl's own
    adaptive schedule does this per mini-batch with a floor of 1e-5, which is too coarse here: a cloned policy's
    network is so sensitive that 20 Adam steps at 1e-5 already move it by a KL of 0.1-0.2 (std 0.3-0.5)."""
    mean, std = _gaussian(actor, obs)
    old_mean, old_std = old
    with torch.no_grad():
        kl = (torch.log(std / old_std) + (old_std ** 2 + (old_mean - mean) ** 2) / (2 * std ** 2) - 0.5).sum(-1)
        kl_mean = float(kl.mean())
    if kl_mean > 2.0 * desired_kl:
        alg.learning_rate /= 1.5
    elif kl_mean < 0.5 * desired_kl:
        alg.learning_rate = min(alg.learning_rate * 1.5, 1e-3)
    alg.optimizer.param_groups[0]["lr"] = alg.learning_rate  # the actor's group
    return kl_mean


def build_ppo(actor, critic, obs, cfg: PPOConfig, num_actions: int):
    """rsl-rl's PPO over ``actor`` and ``critic`` with its rollout storage; the actor's learning rate is adapted to
    the KL per iteration (it starts tiny: a cloned network is sensitive), the fresh critic learns at its own fixed
    rate."""
    from rsl_rl.algorithms import PPO
    from rsl_rl.storage import RolloutStorage

    storage = RolloutStorage("rl", cfg.num_envs, cfg.steps_per_env, obs, [num_actions], "cpu")
    alg = PPO(actor, critic, storage, num_learning_epochs=cfg.epochs, num_mini_batches=cfg.minibatches,
              clip_param=cfg.clip, gamma=cfg.gamma, lam=cfg.lam, entropy_coef=cfg.entropy,
              learning_rate=cfg.learning_rate, schedule="fixed", desired_kl=None, device="cpu")
    alg.optimizer = torch.optim.Adam([{"params": list(actor.parameters()), "lr": cfg.learning_rate},
                                      {"params": list(critic.parameters()), "lr": cfg.critic_learning_rate}])
    return alg


class RewardShaper(Protocol):
    """Something that adds to the environment's reward from what it learns alongside PPO (AMP's discriminator)."""

    def reward(self, env, reward: np.ndarray, terms: dict[str, np.ndarray]) -> np.ndarray:
        """The reward (N,) to learn from, after one environment step."""

    def update(self) -> dict[str, float]:
        """Learn from the iteration's transitions (after PPO's update); returns figures for the history."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def run_ppo(env, observe, first, to_targets, actor, critic, alg, cfg: PPOConfig, weights: dict[str, float],
            checkpoint: Path | None, key: dict[str, Any], tic: float, progress: bool = True, desc: str = "ppo",
            shaper: RewardShaper | None = None) -> tuple[list[dict[str, Any]], float]:
    """PPO iterations ``cfg.iterations`` from the checkpoint (if it has the same ``key``) or from the start:
    ``observe(env)`` -> (raw observations, rsl-rl TensorDict), ``first`` the environment's current ones,
    ``to_targets(raw, action)`` -> PD targets (N, J),
    ``env.step(targets)`` -> (reward, fell, timeout, terms). ``weights`` weigh the terms into the history's mean
    reward. Checkpoints every ``cfg.checkpoint_every`` iterations and on Ctrl-C. Returns the history and the seconds
    of the runs before a resume."""
    history: list[dict[str, Any]] = []
    start, seconds_before = 0, 0.0
    flush_subnormals()
    if checkpoint is not None and checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=False)
        if saved.get("key") == key:
            actor.load_state_dict(saved["actor"])
            critic.load_state_dict(saved["critic"])
            alg.optimizer.load_state_dict(saved["optimizer"])
            alg.learning_rate = saved["learning_rate"]
            start, history, seconds_before = saved["iteration"], saved["history"], saved["seconds"]
            if shaper is not None and saved.get("shaper") is not None:
                shaper.load_state_dict(saved["shaper"])
            log.info("resuming PPO from %s at iteration %d", checkpoint, start)
        else:
            log.info("ignoring %s: it belongs to another configuration or starting policy", checkpoint)

    def save(iteration: int) -> None:
        if checkpoint is None:
            return
        with atomic_path(checkpoint) as tmp:
            torch.save({"key": key, "actor": actor.state_dict(),
                        "critic": critic.state_dict(), "optimizer": alg.optimizer.state_dict(),
                        "learning_rate": alg.learning_rate, "iteration": iteration, "history": history,
                        "seconds": seconds_before + time.perf_counter() - tic,
                        "shaper": None if shaper is None else shaper.state_dict()}, tmp)

    raw, obs = first
    ep_return = np.zeros(cfg.num_envs)
    ep_length = np.zeros(cfg.num_envs, dtype=np.int64)
    bar = tqdm(total=cfg.iterations, initial=start, desc=desc, unit="it", disable=not progress)
    try:
        for it in range(start, cfg.iterations):
            warm = it < cfg.critic_warmup
            for p in actor.parameters():
                p.requires_grad_(not warm)
            finished_returns, finished_lengths, falls, terms_sum = [], [], 0, {}
            with torch.inference_mode():
                for _ in range(cfg.steps_per_env):
                    action = alg.act(obs)
                    reward, fell, timeout, terms = env.step(to_targets(raw, action))
                    if shaper is not None:
                        reward = shaper.reward(env, reward, terms)
                    raw, obs = observe(env)
                    done = fell | timeout
                    # scaled by 1 - gamma, so that values are of the order of the mean reward
                    alg.process_env_step(obs, torch.as_tensor(reward * (1.0 - cfg.gamma), dtype=torch.float32),
                                         torch.as_tensor(done), {"time_outs": torch.as_tensor(timeout)})
                    ep_return += reward
                    ep_length += 1
                    for i in np.flatnonzero(done):
                        finished_returns.append(ep_return[i])
                        finished_lengths.append(ep_length[i])
                    ep_return[done], ep_length[done] = 0.0, 0
                    falls += int(fell.sum())
                    for name, value in terms.items():
                        if name in weights:
                            terms_sum[name] = terms_sum.get(name, 0.0) + float(value.mean())
                alg.compute_returns(obs)
            batch_obs = alg.storage.observations.flatten(0, 1).clone()
            old = _gaussian(actor, batch_obs)
            losses = alg.update()
            kl = 0.0 if warm else _adapt_learning_rate(alg, actor, batch_obs, old, cfg.desired_kl)
            steps = cfg.steps_per_env * cfg.num_envs
            record = {"iteration": it + 1, "critic_only": warm, "falls_per_1000_steps": 1000.0 * falls / steps,
                      "mean_reward": sum(weights[k] * v / cfg.steps_per_env for k, v in terms_sum.items()),
                      "reward_terms": {k: v / cfg.steps_per_env for k, v in terms_sum.items()},
                      "episode_return": float(np.mean(finished_returns)) if finished_returns else None,
                      "episode_seconds": float(np.mean(finished_lengths) * env.dt) if finished_lengths else None,
                      "action_std": float(actor.output_std.detach().mean()), "learning_rate": float(alg.learning_rate),
                      "value_loss": float(losses["value"]), "kl": kl,
                      "elapsed_s": seconds_before + time.perf_counter() - tic}
            if shaper is not None:
                record["shaper"] = shaper.update()
            history.append(record)
            bar.update(1)
            bar.set_postfix(reward=f"{record['mean_reward']:.3f}", falls=f"{record['falls_per_1000_steps']:.2f}",
                            std=f"{record['action_std']:.2f}")
            if (it + 1) % cfg.checkpoint_every == 0 or it + 1 == cfg.iterations:
                save(it + 1)
                log.info("%s iteration %d: reward %.3f, falls %.2f per 1000 steps, std %.3f", desc, it + 1,
                         record["mean_reward"], record["falls_per_1000_steps"], record["action_std"])
    except KeyboardInterrupt:
        save(len(history))
        raise
    finally:
        bar.close()
    return history, seconds_before


def train_ppo(dataset: PolicyDataset, robot: Robot, cfg: PPOConfig | None = None, init: Path | None = None,
              checkpoint: Path | None = None,
              progress: bool = True) -> tuple[TrackingPolicy, Any, dict[str, Any]]:
    """PPO fine-tuning (module docstring). Returns the policy, its metadata and the training metrics (per-iteration
    history of mean reward, episode falls and length; ``train_seconds``; the starting policy)."""
    cfg = cfg or PPOConfig()
    cfg.check()
    check_robot_matches(dataset.joint_names, robot, f"dataset {dataset.path}")
    tic = time.perf_counter()
    torch.manual_seed(cfg.seed)
    if init is not None:
        policy, init_meta = load_policy(init)
        check_robot_matches(init_meta.joint_names, robot, f"policy {init}")
        names = [d.reference.name for d in dataset.demos]
        if [c.name for c in init_meta.clips] != names:
            raise ConfigError(f"--init {init} was trained on clips {[c.name for c in init_meta.clips]}, the dataset "
                              f"{dataset.path} has {names}; fine-tune a policy of this dataset")
        start = {"init": str(init), "method": init_meta.method}
    else:
        policy, _, bc_metrics = train_bc(dataset, robot, cfg.bc, progress=progress)
        start = {"init": None, "method": "bc", "bc": bc_metrics}
    physics = dataset_physics(dataset, robot)
    clips = [d.reference for d in dataset.demos]
    starts = [demo_starts(d) for d in dataset.demos]
    env = TrackingVecEnv(robot, physics, clips, starts,
                         RLEnvConfig(num_envs=cfg.num_envs, episode_s=cfg.episode_s, randomisation=cfg.randomisation,
                                     threads=cfg.threads, seed=cfg.seed))
    observe = _Observer(policy, cfg.num_envs)
    raw, obs = observe(env)
    actor, critic = _models(policy, obs, cfg, robot.num_dofs)
    alg = build_ppo(actor, critic, obs, cfg, robot.num_dofs)
    # not the iteration count: it only says where to stop, so a finished run re-run with more iterations goes on
    key = {"config": {k: v for k, v in cfg.to_dict().items() if k != "iterations"},
           "start": {k: start[k] for k in ("init", "method")}}
    weights = {name: weight for name, (weight, _) in REWARD_TERMS.items()}
    history, seconds_before = run_ppo(env, observe, (raw, obs), lambda raw, action: decode(policy, raw, action),
                                      actor, critic, alg, cfg, weights, checkpoint, key, tic, progress)
    policy.net.load_state_dict(actor.mlp.state_dict())
    policy.eval()
    metrics = {"method": "ppo", "train_seconds": seconds_before + time.perf_counter() - tic,
               "iterations": cfg.iterations, "env_steps": cfg.iterations * cfg.num_envs * cfg.steps_per_env,
               "start": start, "history": history, "config": cfg.to_dict(), "seed": cfg.seed,
               "num_demos": len(dataset.demos), "num_samples": int(sum(d.num_frames for d in dataset.demos)),
               "dataset": str(dataset.path), "privileged_critic_terms": PRIVILEGED_SIZE}
    meta = policy_meta(dataset, robot, cfg.bc, "ppo", metrics)
    meta.hidden = policy.hidden
    meta.action_mode = policy.action_mode
    return policy, meta, metrics
