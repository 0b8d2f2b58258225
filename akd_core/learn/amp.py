"""Adversarial motion priors (AMP; Peng et al. 2021) as the imitation reward of a velocity-command policy
(``akd train-policy LIBRARY --task velocity --imitation amp``), on top of rsl-rl-lib's PPO.

A discriminator D learns to tell the library's state transitions (s_t, s_t+1) from the policy's, where a state is
what :func:`~akd_core.learn.velocity_env.amp_features` takes of it (joint angles and velocities, base height, tilt,
base linear and angular velocity in the base frame, foot heights). It is trained after each PPO update on that
iteration's policy transitions against as many library transitions, least-squares GAN style (targets +1 library,
-1 policy) with a gradient penalty on the library's; the policy is paid the style reward
max(0, 1 - (D - 1)^2 / 4) per step, weighted by ``weights["style"]``. The discriminator does not see the command:
the tracking terms ask for the speed, D for the library's way of moving.

With ``regularise`` the discriminator is held back as AMP's authors and MimicKit hold theirs: an L2 penalty on its
output layer's weights (``LOGIT_REG``) and weight decay on all of them (``WEIGHT_DECAY``). Without it D learns to
tell the policy from the library perfectly within a few hundred iterations (scores +-0.998, style reward 0.01:
docs/policy.md), after which the style reward is a constant and imitation asks nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from akd_core.learn.dataset import PolicyDataset
from akd_core.learn.motion_library import LibraryFrames
from akd_core.learn.velocity_env import VelocityVecEnv, amp_features

HIDDEN = (256, 256)
LEARNING_RATE = 1e-4
GRADIENT_PENALTY = 5.0
EPOCHS, MINIBATCHES = 2, 4
STD_FLOOR = 0.05
LOGIT_REG = 0.05  # regularise: L2 on the output layer's weights, in the loss
WEIGHT_DECAY = 1e-4  # regularise: Adam's L2 on every weight


def library_transitions(frames: LibraryFrames, dataset: PolicyDataset) -> np.ndarray:
    """(M', 2F) every pair of consecutive frames of each library demo, as the discriminator sees them."""
    parts = []
    for i, d in enumerate(dataset.demos):
        rows = np.flatnonzero(frames.demo == i)
        feats = amp_features(d.joint_pos, d.joint_vel, d.root_pos[:, 2], d.root_quat, d.root_lin_vel,
                             d.root_ang_vel, frames.foot_height[rows])
        parts.append(np.concatenate([feats[:-1], feats[1:]], axis=1))
    return np.concatenate(parts).astype(np.float32)


class AMPShaper:
    """The AMP discriminator and its style reward (module docstring); a :class:`~akd_core.learn.ppo.RewardShaper`."""

    def __init__(self, frames: LibraryFrames, dataset: PolicyDataset, env: VelocityVecEnv, seed: int = 0,
                 regularise: bool = False):
        self.expert = torch.as_tensor(library_transitions(frames, dataset))
        self.mean = self.expert.mean(0)
        self.std = self.expert.std(0).clamp_min(STD_FLOOR)
        layers: list[nn.Module] = []
        width = self.expert.shape[1]
        for h in HIDDEN:
            layers += [nn.Linear(width, h), nn.ELU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.disc = nn.Sequential(*layers)
        self.logit_reg = LOGIT_REG if regularise else 0.0
        self.optimizer = torch.optim.Adam(self.disc.parameters(), lr=LEARNING_RATE,
                                          weight_decay=WEIGHT_DECAY if regularise else 0.0)
        self.generator = torch.Generator().manual_seed(seed)
        self.weight = float(env.weights.get("style", 0.0))
        self.state = env.state_features()
        self.batch: list[np.ndarray] = []  # numpy: the rollout runs in inference mode

    def _score(self, transitions: torch.Tensor) -> torch.Tensor:
        return self.disc((transitions - self.mean) / self.std).squeeze(-1)

    def reward(self, env: VelocityVecEnv, reward: np.ndarray, terms: dict[str, np.ndarray]) -> np.ndarray:
        """The environment's reward plus the style reward of the step just taken (the state before it -> the state
        it reached, before any reset)."""
        transition = np.concatenate([self.state, terms["amp_next"]], axis=1)
        self.batch.append(transition)
        with torch.no_grad():
            d = self._score(torch.as_tensor(transition)).numpy().astype(np.float64)
        style = np.maximum(0.0, 1.0 - 0.25 * (d - 1.0) ** 2)
        terms["style"] = style
        self.state = env.state_features()  # the next step starts here (a new episode's state where one reset)
        return reward + self.weight * style

    def update(self) -> dict[str, float]:
        """A few epochs of the discriminator on this iteration's policy transitions against the library's."""
        if not self.batch:
            return {}
        policy = torch.as_tensor(np.concatenate(self.batch))
        self.batch = []
        n = len(policy)
        expert = self.expert[torch.randint(len(self.expert), (n,), generator=self.generator)]
        size = max(1, n // MINIBATCHES)
        losses, penalties, scores = [], [], []
        for _ in range(EPOCHS):
            order = torch.randperm(n, generator=self.generator)
            for begin in range(0, n, size):
                idx = order[begin:begin + size]
                real = expert[idx].clone().requires_grad_(True)
                d_real = self._score(real)
                d_fake = self._score(policy[idx])
                grad = torch.autograd.grad(d_real.sum(), real, create_graph=True)[0]
                penalty = (grad ** 2).sum(-1).mean()
                loss = ((d_real - 1.0) ** 2).mean() + ((d_fake + 1.0) ** 2).mean() + GRADIENT_PENALTY * penalty
                if self.logit_reg:
                    loss = loss + self.logit_reg * (self.disc[-1].weight ** 2).sum()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                losses.append(float(loss.detach()))
                penalties.append(float(penalty.detach()))
                scores.append((float(d_real.detach().mean()), float(d_fake.detach().mean())))
        return {"disc_loss": float(np.mean(losses)), "grad_penalty": float(np.mean(penalties)),
                "d_library": float(np.mean([s[0] for s in scores])), "d_policy": float(np.mean([s[1] for s in scores]))}

    def state_dict(self) -> dict[str, Any]:
        return {"disc": self.disc.state_dict(), "optimizer": self.optimizer.state_dict(),
                "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.disc.load_state_dict(state["disc"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
