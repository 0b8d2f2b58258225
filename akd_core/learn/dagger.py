"""DAgger with the MPC as expert: the policy drives, the tracker's planner labels the states it visits, the labels
are aggregated with the demonstrations and the policy is retrained; repeat.

Iteration 0 is behaviour cloning on the dataset (:func:`akd_core.learn.bc.train_bc`). Each iteration i >= 1 then:

1. rolls the current policy out in ``episodes`` MuJoCo worlds of ``episode_s`` seconds, each under the evaluation's
   randomisation (pushes, friction, base mass, action latency, observation noise), starting from a random frame
   of a random demonstration with a push at the start as well (so states off the clip are visited from the first
   label on);
2. every ``label_every`` control periods asks the MPC expert (:class:`~akd_core.learn.expert.MPCExpert`: the
   tracker's planner, tracking the same reference from the exact simulator state, warm-started from its previous
   plan) for the PD target it would send, and stores (the observation the policy saw, that target);
   with probability beta_i = ``beta0 * beta_decay ** (i - 1)`` the expert's target is executed instead of the
   policy's (beta-mixing: early iterations stay closer to the states the expert would reach);
3. retrains the policy on demonstrations + every label so far, continuing from its weights (the normalisation of
   the BC fit is kept), for ``fit.epochs`` epochs.

Label budget: ``iterations * episodes * episode_s / (label_every * dt)`` expert re-plans (the cost: each is one
batch of ``samples`` rollouts over the planning horizon). Before it labels anything the expert must pass the
evaluation itself (:func:`expert_gate`: a report of ``akd eval-policy --controller mpc`` on the same clips, or a
short evaluation run here). Checkpoints after every episode; a re-run resumes bit-identically where it stopped, and a
finished run re-run with a larger ``iterations`` continues from its last iteration.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from akd_core.io.errors import AKDError, ConfigError
from akd_core.io.fileio import atomic_path
from akd_core.learn.bc import BCConfig, demo_starts, policy_meta, train_bc, training_arrays
from akd_core.learn.dataset import PolicyDataset
from akd_core.learn.env import EpisodeDraw, Randomisation, SimWorld, WorldPhysics, draw_episode, tilt_deg
from akd_core.learn.evaluate import EvalConfig, ExpertController, PolicyController, evaluate, passes, run_episode
from akd_core.learn.expert import ExpertConfig, MPCExpert
from akd_core.learn.policy import FitConfig, PolicyMeta, TrackingPolicy, fit
from akd_core.learn.reference import ReferenceClip
from akd_core.model.robot import Robot
from akd_core.physics.engines.base import BodyState

log = logging.getLogger(__name__)


class ExpertGateError(AKDError):
    """The MPC expert does not pass the evaluation, so it may not label anything."""


@dataclass
class DaggerConfig:
    iterations: int = 4
    episodes: int = 12  # rollouts per iteration (a1: 4 -> 12 took falls 7/10 -> 1/10; docs/policy.md)
    episode_s: float = 4.0
    label_every: int = 2  # control periods between labelled states
    beta0: float = 0.5
    beta_decay: float = 0.5
    # expert take-over (SafeDAgger-like): when the base tilts past takeover_tilt_deg or sinks below
    # takeover_height_frac of its start height, the expert drives (and labels every period) for takeover_s, so the
    # rollout goes on through the recovery instead of ending in a fall; 0 tilt: off
    takeover_tilt_deg: float = 20.0
    takeover_height_frac: float = 0.75
    takeover_s: float = 0.5
    randomisation: Randomisation = field(default_factory=Randomisation)
    expert: ExpertConfig = field(default_factory=ExpertConfig)
    bc: BCConfig = field(default_factory=BCConfig)
    fit: FitConfig = field(default_factory=lambda: FitConfig(epochs=100))
    gate_episodes: int = 2  # expert gate evaluation when no report is given
    gate_seconds: float = 10.0
    seed: int = 0

    def check(self) -> None:
        if self.iterations < 0 or self.episodes < 1 or self.episode_s <= 0 or self.label_every < 1:
            raise ConfigError("DAgger needs --iterations >= 0, --episodes >= 1, --episode-seconds > 0 and "
                              "--label-every >= 1")
        if not 0.0 <= self.beta0 <= 1.0 or not 0.0 <= self.beta_decay <= 1.0:
            raise ConfigError("--beta and --beta-decay must lie in [0, 1]")
        if self.takeover_tilt_deg < 0 or not 0.0 <= self.takeover_height_frac < 1.0 or self.takeover_s < 0:
            raise ConfigError("--takeover-tilt must be >= 0 deg (0: off), --takeover-height in [0, 1) and "
                              "--takeover-seconds >= 0")
        self.randomisation.check()

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["randomisation"] = self.randomisation.to_dict()
        out["expert"] = self.expert.settings()
        return out

    def beta(self, iteration: int) -> float:
        return self.beta0 * self.beta_decay ** max(iteration - 1, 0)


class LabellingRollout:
    """The policy drives; every ``label_every`` periods the expert labels the state (and drives with prob. beta)."""

    name = "dagger"

    def __init__(self, policy: TrackingPolicy, cfg: DaggerConfig, beta: float, rng: np.random.Generator,
                 bar: tqdm | None = None):
        self.policy = PolicyController(policy, cfg.randomisation.obs_noise)
        self.cfg, self.beta, self.rng, self.bar = cfg, beta, rng, bar
        self.obs: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self.expert: MPCExpert | None = None
        self.start = 0
        self.expert_steps = 0
        self.takeovers = 0
        self.takeover_until = -1
        self.hold = 0

    def settings(self) -> dict[str, Any]:
        return {"policy": self.policy.settings(), "beta": self.beta, "expert": dataclasses.asdict(self.cfg.expert)}

    def begin(self, world: SimWorld, clip: ReferenceClip, draw: EpisodeDraw, frames: int) -> None:
        self.policy.begin(world, clip, draw, frames)
        self.expert = MPCExpert(world, clip, draw.start_frame + frames + 1, self.cfg.expert)
        self.start = draw.start_frame
        self.hold = int(round(self.cfg.takeover_s / world.dt))

    def in_danger(self, world: SimWorld, state: BodyState) -> bool:
        """The base tilts past the take-over angle or sinks below the take-over height: a fall is coming."""
        if not self.cfg.takeover_tilt_deg:
            return False
        return bool(tilt_deg(state.root_quat) > self.cfg.takeover_tilt_deg
                    or state.root_pos[2] < self.cfg.takeover_height_frac * world.start_height)

    def act(self, world: SimWorld, frame: int, state: BodyState) -> np.ndarray:
        obs = self.policy.observe(world, frame, state)
        action = self.policy.policy.act(obs)[0]
        if self.in_danger(world, state):
            if frame >= self.takeover_until:
                self.takeovers += 1
            self.takeover_until = frame + self.hold
        taking_over = frame < self.takeover_until
        if (frame - self.start) % self.cfg.label_every and not taking_over:
            return action
        label = self.expert.act(frame, world.engine_state(), world.last_target)
        self.obs.append(obs[0])
        self.labels.append(label.astype(np.float32))
        if self.bar is not None:
            self.bar.update(1)
        if taking_over or self.rng.random() < self.beta:
            self.expert_steps += 1
            return label
        return action


def expert_gate(robot: Robot, physics: WorldPhysics, clips: list[ReferenceClip], starts: list[dict[str, np.ndarray]],
                cfg: DaggerConfig, report_path: Path | None, progress: bool = True,
                checkpoint: Path | None = None) -> dict[str, Any]:
    """The expert's evaluation report; raises :class:`ExpertGateError` when it does not pass (at most one fall in
    ten, joint RMSE <= 0.15 rad, distance ratio 0.8-1.2). ``report_path``: a JSON from `akd eval-policy
    --controller mpc` on these clips (checked to be the expert's, on this robot and clips); else an evaluation of
    ``gate_episodes`` x ``gate_seconds`` runs here (its finished episodes checkpointed in ``checkpoint``)."""
    names = [c.name for c in clips]
    if report_path is not None:
        try:
            report = json.loads(Path(report_path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"--expert-report {report_path} is not a readable JSON report ({exc}); write one with "
                              "`akd eval-policy POLICY --controller mpc --json FILE`") from exc
        if report.get("controller") != "mpc" or report.get("robot") != robot.name or report.get("clips") != names:
            raise ConfigError(f"--expert-report {report_path} is not an MPC-expert evaluation of robot "
                              f"'{robot.name}' on clips {names}; write one with `akd eval-policy POLICY "
                              f"--controller mpc --json FILE` on a policy of this dataset")
    else:
        eval_cfg = EvalConfig(seconds=cfg.gate_seconds, episodes=cfg.gate_episodes, seed=cfg.seed,
                              randomisation=cfg.randomisation)
        report, _ = evaluate(robot, physics, clips, starts, ExpertController(cfg.expert), eval_cfg,
                             checkpoint=checkpoint, progress=progress)
    max_falls = report["episodes"] // 10
    if not passes(report, max_falls=max_falls):
        raise ExpertGateError(
            f"the MPC expert does not pass the evaluation ({report['falls']} falls in {report['episodes']} episodes, "
            f"joint RMSE {report.get('joint_rmse_rad')} rad, distance ratio {report.get('distance_ratio')}), so it "
            "may not label anything. Track the clips better (`akd track` with more --samples), use gentler "
            "randomisation, or give the expert more samples (--expert-samples)")
    return report


def _key(dataset: PolicyDataset, cfg: DaggerConfig) -> str:
    import hashlib

    # not the iteration count: it only says where to stop, so a finished run re-run with more iterations goes on
    settings = {k: v for k, v in cfg.to_dict().items() if k != "iterations"}
    h = hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode())
    for demo in dataset.demos:
        h.update(np.ascontiguousarray(demo.actions).tobytes())
    return h.hexdigest()


def train_dagger(dataset: PolicyDataset, robot: Robot, cfg: DaggerConfig | None = None,
                 checkpoint: Path | None = None, expert_report: Path | None = None,
                 progress: bool = True) -> tuple[TrackingPolicy, PolicyMeta, dict[str, Any]]:
    """DAgger (module docstring). Returns the policy, its metadata and training metrics (per-iteration history,
    ``train_seconds``, ``labels``, the expert gate's figures)."""
    cfg = cfg or DaggerConfig()
    cfg.check()
    tic = time.perf_counter()
    clips = [d.reference for d in dataset.demos]
    starts = [demo_starts(d) for d in dataset.demos]
    unknown = sorted({n for c in clips for n in c.foot_names} - set(robot.link_names))
    if unknown:
        raise ConfigError(f"dataset {dataset.path}: the references name feet {unknown} that are not links of "
                          f"'{robot.name}'; the expert cannot track them. Re-export the runs with a current "
                          "`akd export` so each demo carries its reference")
    key = _key(dataset, cfg)
    state: dict[str, Any] | None = None
    if checkpoint is not None and checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=False)
        if saved.get("key") == key:
            state = saved
            log.info("resuming DAgger from %s: iteration %d, %d episode(s) of it done, %d labels", checkpoint,
                     state["iteration"], len(state["episodes"]), sum(len(o) for o in state["label_obs"]))
        else:
            log.info("ignoring %s: it belongs to another dataset or configuration", checkpoint)
    policy, meta, bc_metrics = train_bc(dataset, robot, cfg.bc, progress=progress)
    physics = WorldPhysics.from_dict(meta.physics)
    if state is None:
        gate_ckpt = checkpoint.with_name(checkpoint.name + ".gate") if checkpoint is not None else None
        gate = expert_gate(robot, physics, clips, starts, cfg, expert_report, progress, gate_ckpt)
        state = {"key": key, "iteration": 1, "episodes": [], "label_obs": [], "label_targets": [],
                 "state_dict": policy.state_dict(), "history": [], "gate": {k: v for k, v in gate.items()
                                                                             if k != "per_episode"},
                 "bc": bc_metrics, "seconds_total": 0.0}
    else:
        gate = state["gate"]
    seconds_before = state["seconds_total"]
    policy.load_state_dict(state["state_dict"])
    demo_obs, demo_targets = training_arrays(dataset)
    generator = torch.Generator().manual_seed(cfg.seed + 1)
    frames = int(round(cfg.episode_s / dataset.dt))
    labels_per_episode = -(-frames // cfg.label_every)

    def save() -> None:
        if checkpoint is not None:
            state["seconds_total"] = seconds_before + time.perf_counter() - tic
            with atomic_path(checkpoint) as tmp:
                torch.save(state, tmp)

    try:
        while state["iteration"] <= cfg.iterations:
            it = state["iteration"]
            beta = cfg.beta(it)
            bar = tqdm(total=cfg.episodes * labels_per_episode, initial=len(state["episodes"]) * labels_per_episode,
                       desc=f"dagger {it}/{cfg.iterations} labels", disable=not progress)
            for e in range(len(state["episodes"]), cfg.episodes):
                draw = draw_episode(cfg.randomisation, cfg.seed * 1000 + it, e, len(clips), frames, dataset.dt)
                demo_frames = dataset.demos[draw.clip].num_frames
                start_rng = np.random.default_rng([cfg.seed, it, e, 7])
                draw.start_frame = int(start_rng.integers(max(demo_frames - 1, 1)))
                if cfg.randomisation.push_mps > 0:  # and off the clip: a kick at the start as well
                    draw.push_frames = [0, *draw.push_frames]
                    draw.push_dirs = [float(start_rng.uniform(-np.pi, np.pi)), *draw.push_dirs]
                rollout = LabellingRollout(policy, cfg, beta, np.random.default_rng([cfg.seed, it, e]), bar)
                row, _ = run_episode(robot, physics, clips[draw.clip], starts[draw.clip], draw, rollout, frames,
                                     cfg.randomisation.push_mps)
                state["episodes"].append({"fell": row["fell"], "upright_s": row["upright_s"],
                                          "labels": len(rollout.obs), "expert_steps": rollout.expert_steps,
                                          "takeovers": rollout.takeovers,
                                          "joint_rmse_rad": row["joint_rmse_rad"]})
                state["label_obs"].append(np.asarray(rollout.obs, np.float32).reshape(-1, demo_obs.shape[1]))
                state["label_targets"].append(np.asarray(rollout.labels, np.float32).reshape(-1, robot.num_dofs))
                save()
            bar.close()
            obs = np.concatenate([demo_obs, *state["label_obs"]])
            targets = np.concatenate([demo_targets, *state["label_targets"]])
            result = fit(policy, obs, targets, cfg.fit, generator, progress=progress, desc=f"dagger {it} fit",
                         normalise=False)
            episodes = state["episodes"]
            record = {"iteration": it, "beta": beta, "rollout_falls": sum(e["fell"] for e in episodes),
                      "takeovers": sum(e.get("takeovers", 0) for e in episodes),
                      "rollouts": len(episodes), "labels": sum(e["labels"] for e in episodes),
                      "total_labels": int(len(obs) - len(demo_obs)), "fit_loss": result["final_loss"],
                      "fit_seconds": result["seconds"], "elapsed_s": seconds_before + time.perf_counter() - tic}
            log.info("dagger iteration %d: %d/%d rollouts fell, %d labels (total %d), fit loss %.4f", it,
                     record["rollout_falls"], record["rollouts"], record["labels"], record["total_labels"],
                     record["fit_loss"])
            state["history"].append(record)
            state["state_dict"] = policy.state_dict()
            state["iteration"], state["episodes"] = it + 1, []
            save()
    except KeyboardInterrupt:
        save()
        raise
    policy.load_state_dict(state["state_dict"])
    policy.eval()
    total = sum(len(o) for o in state["label_obs"])
    metrics = {"method": "dagger", "train_seconds": seconds_before + time.perf_counter() - tic,
               "iterations": cfg.iterations, "labels": int(total), "num_demos": len(dataset.demos),
               "num_samples": int(len(demo_obs) + total), "history": state["history"], "expert_gate": gate,
               "bc": state["bc"], "config": cfg.to_dict(), "seed": cfg.seed, "dataset": str(dataset.path)}
    meta = policy_meta(dataset, robot, cfg.bc, "dagger", metrics)
    return policy, meta, metrics
