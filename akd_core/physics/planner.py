"""Sampling planners over PD-target offsets held at knots (MuJoCo MPC's "planner"; DIAL-MPC's annealing).

A planner sees a nominal plan (K knots x J joints of offsets) and a function that scores a batch of candidate
plans; it never touches an engine or the reference. :class:`SamplingPlanner` is MPPI / predictive sampling with
DIAL-MPC's annealing: each of ``iterations`` rounds draws ``samples - 1`` Gaussian perturbations of the nominal
(the nominal itself is always candidate 0), scores them, and moves the nominal to the softmax-weighted mean of
the candidates on standardised costs (MPPI); the noise shrinks from round to round and toward the near knots
(they were refined in earlier re-plans already, and they are the ones executed next).

What is returned is always scored: with ``select="mean"`` the final mean is rolled out once more and returned only
when it scores no worse than the plan the planner was given (else that plan is kept: a good nominal, such as the
inverse-dynamics feedforward, is not traded for the noise the mean carries); with ``select="best"`` the best
candidate (predictive sampling).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class SamplingConfig:
    samples: int = 32  # candidates per round, the nominal included
    iterations: int = 1  # annealing rounds per re-plan
    noise_rad: float = 0.04  # standard deviation at the farthest knot, first round
    anneal_rounds: float = 1.0  # DIAL beta_1: noise x exp(-round / (beta_1 rounds))
    anneal_knots: float = 2.0  # DIAL beta_2: noise x exp(-(K - 1 - k) / (beta_2 K)) at knot k (0 = nearest)
    temperature: float = 0.5  # softmax temperature on standardised costs
    select: str = "mean"  # "mean": the last round's softmax mean (MPPI/DIAL); "best": the best scored candidate
    antithetic: bool = False  # draw perturbations in +/- pairs (a lower-variance mean for the same rollouts)


@dataclass
class PlanResult:
    nominal: np.ndarray  # (K, J)
    cost: float  # cost of the returned nominal
    evaluated: int  # rollouts spent


class SamplingPlanner:
    def __init__(self, cfg: SamplingConfig, seed: int = 0):
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)

    def noise_scale(self, round_index: int, knots: int) -> np.ndarray:
        """(K,) standard deviation per knot in a round."""
        cfg = self.cfg
        rounds = max(cfg.iterations, 1)
        k = np.arange(knots)
        return cfg.noise_rad * np.exp(-round_index / (cfg.anneal_rounds * rounds)
                                      - (knots - 1 - k) / (cfg.anneal_knots * knots))

    def _noise(self, count: int, knots: int, joints: int) -> np.ndarray:
        if not self.cfg.antithetic:
            return self.rng.standard_normal((count, knots, joints))
        half = self.rng.standard_normal(((count + 1) // 2, knots, joints))
        return np.concatenate([half, -half])[:count]

    def improve(self, nominal: np.ndarray, score: Callable[[np.ndarray], np.ndarray],
                nominal_cost: float | None = None) -> PlanResult:
        """Anneal ``nominal`` (K, J); ``score`` maps candidates (N, K, J) to costs (N,). ``nominal_cost``: the
        nominal's score where the caller has it already (its rollout is then not repeated in the first round)."""
        cfg = self.cfg
        knots, joints = nominal.shape
        best, best_cost, evaluated = nominal.copy(), np.inf, 0
        given, given_cost = nominal.copy(), np.inf
        for r in range(cfg.iterations):
            noise = self._noise(cfg.samples - 1, knots, joints) * self.noise_scale(r, knots)[:, None]
            candidates = np.concatenate([nominal[None], nominal[None] + noise])  # (N, K, J)
            if r == 0 and nominal_cost is not None:
                costs = np.concatenate([[nominal_cost], score(candidates[1:])])
                evaluated += len(candidates) - 1
            else:
                costs = score(candidates)
                evaluated += len(candidates)
            if r == 0 and np.isfinite(costs[0]):
                given_cost = float(costs[0])
            finite = np.isfinite(costs)
            if not finite.any():  # nothing scored: keep the nominal rather than average garbage
                break
            order = int(np.argmin(costs))
            if costs[order] < best_cost:
                best, best_cost = candidates[order].copy(), float(costs[order])
            z = (costs - costs[finite].mean()) / (costs[finite].std() + 1e-9)
            z = np.where(finite, z, np.inf)
            weights = np.exp(-(z - z.min()) / cfg.temperature)
            weights /= weights.sum()
            nominal = np.tensordot(weights, candidates, axes=1)
        if cfg.select == "best" or not np.isfinite(best_cost):
            return PlanResult(best, best_cost, evaluated)
        mean_cost = float(score(nominal[None])[0])
        evaluated += 1
        if np.isfinite(mean_cost) and mean_cost <= given_cost:
            return PlanResult(nominal, mean_cost, evaluated)
        return PlanResult(given, given_cost, evaluated)
