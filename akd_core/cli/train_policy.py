"""`akd train-policy DATASET --robot ROBOT --method bc|dagger|ppo -o POLICY.pt` (and `akd train-bc`, its BC alias);
`akd train-policy LIBRARY --task velocity -o POLICY.pt`: a velocity-command policy on a motion library."""

from __future__ import annotations

import argparse
from pathlib import Path

from akd_core.cli.eval_policy import add_randomisation_arguments, expert_config, parse_pair, randomisation
from akd_core.cli.options import add_robot_options, split_floats
from akd_core.io.errors import ConfigError
from akd_core.learn.bc import BCConfig, train_bc
from akd_core.learn.dagger import DaggerConfig, train_dagger
from akd_core.learn.dataset import load_dataset
from akd_core.learn.policy import ACTION_MODES, DEFAULT_HIDDEN, FitConfig, save_policy
from akd_core.learn.ppo import PPOConfig, train_ppo
from akd_core.learn.velocity import (
    RESIDUAL_STARTS,
    VELOCITY_ACTIONS,
    VELOCITY_ENTROPY,
    VELOCITY_PPO_ITERATIONS,
    VelocityConfig,
    library_robot,
    train_velocity,
)
from akd_core.learn.velocity_env import IMITATIONS, REWARD_WEIGHTS
from akd_core.learn.velocity_feedforward import RESIDUAL_BOUND_RAD
from akd_core.model.load import load_robot

METHODS = ("bc", "dagger", "ppo")
TASKS = ("reference", "velocity")
VELOCITY_EPISODE_S = 20.0
VELOCITY_INIT_STD = {"absolute": 0.15, "residual": 0.1}  # normalised action units: 0.1 -> 0.03 rad of residual


def add_arguments(parser: argparse.ArgumentParser, bc_alias: bool = False) -> None:
    """Options of `akd train-policy` (``bc_alias``: `akd train-bc`, no --method and no DAgger options)."""
    parser.add_argument("dataset", type=Path,
                        help="HDF5 dataset from `akd export RUN [RUN...] --format hdf5`; with --task velocity an "
                             "`akd library --out DIR` folder (or an HDF5 dataset whose demos carry obs/command)")
    add_robot_options(parser, required=bc_alias)
    parser.add_argument("-o", "--output", type=Path, required=True, help="policy file to write (.pt)")
    if not bc_alias:
        parser.add_argument("--task", choices=TASKS, default="reference",
                            help="reference: follow the dataset's clips (default); velocity: follow a velocity "
                                 "command (vx, vy, yaw rate) in the style of a motion library (BC, then PPO; "
                                 "no --method)")
        parser.add_argument("--method", choices=METHODS, default=None,
                            help="bc: behaviour cloning; dagger: BC, then DAgger with the MPC expert (default); "
                                 "ppo: PPO fine-tuning under pushes (rsl-rl-lib) of --init POLICY.pt, else of BC")
    parser.add_argument("--onnx", type=Path, default=None, help="also write the ONNX export here")
    parser.add_argument("--epochs", type=int, default=300, help="BC epochs (default 300)")
    parser.add_argument("--hidden", default=",".join(map(str, DEFAULT_HIDDEN)),
                        help="hidden layer widths, comma-separated (default 256,256)")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    parser.add_argument("--batch-size", type=int, default=256)
    noise_flag = "--obs-noise" if bc_alias else "--fit-noise"
    parser.add_argument(noise_flag, dest="fit_noise", type=float, default=0.2,
                        help="std of training noise on normalised observations (default 0.2; 0 = none)")
    parser.add_argument("--action-mode", choices=ACTION_MODES[:2], default="reference",
                        help="the network predicts the PD target's offset from the reference angles one period "
                             "ahead (default) or the absolute target")
    parser.add_argument("--seed", type=int, default=0)
    if bc_alias:
        return
    group = parser.add_argument_group("DAgger (--method dagger)")
    group.add_argument("--iterations", type=int, default=4, help="DAgger iterations after BC (default 4)")
    group.add_argument("--episodes", type=int, default=12, help="rollouts per iteration (default 12)")
    group.add_argument("--episode-seconds", type=float, default=4.0, help="rollout length, s (default 4)")
    group.add_argument("--label-every", type=int, default=2,
                       help="control periods between states the expert labels (default 2)")
    group.add_argument("--beta", type=float, default=0.5,
                       help="probability the expert's target is executed at a labelled state, iteration 1 "
                            "(default 0.5; halves every iteration, --beta-decay)")
    group.add_argument("--beta-decay", type=float, default=0.5)
    group.add_argument("--takeover-tilt", type=float, default=20.0,
                       help="expert take-over: when the base tilts past this (deg) the expert drives and labels "
                            "every period for --takeover-seconds, so rollouts go on through recoveries "
                            "(default 20; 0 off)")
    group.add_argument("--takeover-height", type=float, default=0.75,
                       help="... or when the base sinks below this fraction of its start height (default 0.75)")
    group.add_argument("--takeover-seconds", type=float, default=0.5, help="take-over length, s (default 0.5)")
    group.add_argument("--dagger-epochs", type=int, default=100, help="epochs of each retraining (default 100)")
    group.add_argument("--expert-report", type=Path, default=None,
                       help="JSON of `akd eval-policy ... --controller mpc` showing the expert passes the "
                            "evaluation (default: evaluate it here first, --gate-episodes x --gate-seconds)")
    group.add_argument("--gate-episodes", type=int, default=2)
    group.add_argument("--gate-seconds", type=float, default=10.0)
    group.add_argument("--no-resume", action="store_true", help="ignore the checkpoint OUTPUT.ckpt and start over")
    add_randomisation_arguments(group)
    ppo = parser.add_argument_group("PPO fine-tuning (--method ppo; the randomisation options above apply)")
    ppo.add_argument("--init", type=Path, default=None,
                     help="policy to fine-tune (e.g. a DAgger policy of this dataset; default: BC on the dataset)")
    ppo.add_argument("--ppo-iterations", type=int, default=None,
                     help=f"PPO iterations (default {PPOConfig.iterations}; --task velocity "
                          f"{VELOCITY_PPO_ITERATIONS})")
    ppo.add_argument("--envs", type=int, default=PPOConfig.num_envs,
                     help=f"worlds stepped together (default {PPOConfig.num_envs})")
    ppo.add_argument("--steps-per-env", type=int, default=PPOConfig.steps_per_env,
                     help=f"control periods per world per iteration (default {PPOConfig.steps_per_env})")
    ppo.add_argument("--ppo-episode-seconds", type=float, default=None,
                     help=f"episode time limit, s (default {PPOConfig.episode_s:g}; --task velocity "
                          f"{VELOCITY_EPISODE_S:g})")
    ppo.add_argument("--init-std", type=float, default=None,
                     help=f"exploration std in normalised action units (default {PPOConfig.init_std:g}; --task "
                          f"velocity {VELOCITY_INIT_STD['residual']:g} with --action residual, "
                          f"{VELOCITY_INIT_STD['absolute']:g} with --action absolute)")
    ppo.add_argument("--ppo-lr", type=float, default=PPOConfig.learning_rate,
                     help=f"the actor's starting learning rate, adapted each iteration to --ppo-kl "
                          f"(default {PPOConfig.learning_rate:g})")
    ppo.add_argument("--ppo-kl", type=float, default=PPOConfig.desired_kl,
                     help=f"KL divergence per iteration the actor's learning rate is adapted to "
                          f"(default {PPOConfig.desired_kl:g})")
    ppo.add_argument("--entropy", type=float, default=None, metavar="COEF",
                     help="entropy bonus of the actor's loss (rsl-rl's entropy_coef): keeps its exploration std from "
                          f"shrinking toward zero over a long run (default {PPOConfig.entropy:g}; --task velocity "
                          f"{VELOCITY_ENTROPY:g})")
    ppo.add_argument("--critic-warmup", type=int, default=PPOConfig.critic_warmup,
                     help=f"iterations training the critic alone first (default {PPOConfig.critic_warmup})")
    vel = parser.add_argument_group("velocity-command policies (--task velocity; the PPO and randomisation options "
                                    "above apply)")
    vel.add_argument("--imitation", choices=IMITATIONS, default="amp",
                     help="imitation of the library: amp (an AMP discriminator on state transitions; default), match "
                          "(motion matching: the pose and feet of the library frame nearest in command and gait "
                          "phase), none")
    vel.add_argument("--amp-regularise", action="store_true",
                     help="--imitation amp: hold the discriminator back (L2 on its output layer, weight decay) so "
                          "that it does not tell the policy from the library perfectly and the style reward keeps "
                          "its slope; default off")
    vel.add_argument("--action", choices=VELOCITY_ACTIONS, default=VelocityConfig.action,
                     help="residual: a bounded residual (--residual-bound) on the library's own PD targets at the "
                          "command and gait phase (a trajectory generator the policy modulates); absolute: the PD "
                          f"target itself (default {VelocityConfig.action})")
    vel.add_argument("--residual-bound", type=float, default=RESIDUAL_BOUND_RAD,
                     help=f"--action residual: the residual's bound, rad per joint (default {RESIDUAL_BOUND_RAD:g})")
    vel.add_argument("--steer", default=None, metavar="VX,VY,YAW",
                     help="--action residual: the policy also shifts the command the library feedforward is queried "
                          "at, by up to these m/s, m/s, rad/s (three more action components: it can call up the "
                          "library's own side steps and turns, e.g. against a push); default off")
    vel.add_argument("--residual-start", choices=RESIDUAL_STARTS, default=VelocityConfig.residual_start,
                     help="--action residual: PPO starts from the bare library feedforward (zero residual) or from "
                          f"BC of the library's residuals (default {VelocityConfig.residual_start})")
    vel.add_argument("--resample-seconds", default="2,6", metavar="LO,HI",
                     help="seconds between command changes in training, drawn per change (default 2,6)")
    vel.add_argument("--zero-share", type=float, default=VelocityConfig.zero_share,
                     help=f"share of command draws that stand still (default {VelocityConfig.zero_share:g})")
    vel.add_argument("--library-share", type=float, default=VelocityConfig.library_share,
                     help="share of command draws taken from the library's frames, the rest uniform in the box "
                          f"(default {VelocityConfig.library_share:g})")
    vel.add_argument("--push-with-change", type=float, default=VelocityConfig.push_with_change, metavar="SHARE",
                     help="share of command changes that come with a push at the same step, as in eval-policy's "
                          f"schedule (default {VelocityConfig.push_with_change:g})")
    vel.add_argument("--history", type=int, default=VelocityConfig.history, metavar="STEPS",
                     help="the policy also sees the measured terms (joints, last target, IMU) of this many earlier "
                          f"control steps (default {VelocityConfig.history}: the current step only)")
    vel.add_argument("--reward-weight", action="append", default=[], metavar="TERM=W",
                     help=f"override a reward weight (repeatable; terms {', '.join(REWARD_WEIGHTS)})")


def add_bc_arguments(parser: argparse.ArgumentParser) -> None:
    """`akd train-bc`: the alias of `akd train-policy --method bc`."""
    add_arguments(parser, bc_alias=True)


def _hidden(text: str) -> tuple[int, ...]:
    try:
        hidden = tuple(int(h) for h in str(text).split(",") if h.strip())
    except ValueError as exc:
        raise ConfigError(f"--hidden must be comma-separated integers, got {text!r}") from exc
    if not hidden or min(hidden) < 1:
        raise ConfigError(f"--hidden must list positive layer widths, got {text!r}")
    return hidden


def _weights(items: list[str]) -> dict[str, float]:
    weights = dict(REWARD_WEIGHTS)
    for item in items:
        name, _, value = item.partition("=")
        try:
            weights[name.strip()] = float(value)
        except ValueError as exc:
            raise ConfigError(f"--reward-weight must be TERM=NUMBER, got {item!r}") from exc
    return weights


def _velocity(args: argparse.Namespace, bc: BCConfig, checkpoint: Path):
    if args.method is not None:
        raise ConfigError("--task velocity chooses its own training (BC on the library, then PPO); drop --method")
    lo, hi = parse_pair(args.resample_seconds, "--resample-seconds")
    ppo = PPOConfig(iterations=_given(args.ppo_iterations, VELOCITY_PPO_ITERATIONS), num_envs=args.envs,
                    steps_per_env=args.steps_per_env, episode_s=args.ppo_episode_seconds or VELOCITY_EPISODE_S,
                    init_std=args.init_std or VELOCITY_INIT_STD[args.action], learning_rate=args.ppo_lr,
                    desired_kl=args.ppo_kl, critic_warmup=args.critic_warmup,
                    entropy=_given(args.entropy, VELOCITY_ENTROPY),
                    randomisation=randomisation(args), seed=args.seed)
    cfg = VelocityConfig(hidden=bc.hidden, fit=bc.fit, ppo=ppo, resample_s=(lo, hi), zero_share=args.zero_share,
                         library_share=args.library_share, push_with_change=args.push_with_change,
                         history=args.history, imitation=args.imitation,
                         amp_regularise=args.amp_regularise, action=args.action,
                         residual_bound=args.residual_bound, residual_start=args.residual_start,
                         steer=parse_steer(args.steer), weights=_weights(args.reward_weight), seed=args.seed)
    robot = load_robot(args.robot or library_robot(args.dataset), args.package_path)
    return train_velocity(args.dataset, robot, cfg, checkpoint=checkpoint)


def _given(value: float | None, default: float) -> float:
    """An option's value, or the task's default where it was not given."""
    return default if value is None else value


def parse_steer(text: str | None) -> tuple[float, float, float] | None:
    """--steer VX,VY,YAW, or None where it was not given."""
    if text is None:
        return None
    values = split_floats(text, 3)
    if values is None:
        raise ConfigError(f"--steer takes VX,VY,YAW (m/s, m/s, rad/s), e.g. 0.3,0.3,0.4; got {text!r}")
    return values  # type: ignore[return-value]


def run(args: argparse.Namespace) -> int:
    task = getattr(args, "task", "reference")
    method = "bc" if not hasattr(args, "method") else (args.method or "dagger")
    bc = BCConfig(hidden=_hidden(args.hidden), action_mode=args.action_mode, seed=args.seed,
                  fit=FitConfig(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size,
                                obs_noise=args.fit_noise))
    if args.epochs < 1:
        raise ConfigError(f"--epochs must be at least 1, got {args.epochs}")
    checkpoint = args.output.with_name(args.output.name + ".ckpt")
    if getattr(args, "no_resume", False) and checkpoint.exists():
        checkpoint.unlink()
    if task == "velocity":
        policy, meta, metrics = _velocity(args, bc, checkpoint)
        save_policy(args.output, policy, meta)
        box = metrics["box"]
        print(f"velocity: {metrics['num_demos']} library demos, {metrics['num_samples']} frames, command box vx "
              f"{box['vx_mps']}, vy {box['vy_mps']}, yaw rate {box['yaw_rate_radps']} ({metrics['box_source']}); BC "
              f"PD-target RMSE {metrics['bc']['target_rmse_rad']:.4f} rad, {metrics['env_steps']} environment steps "
              f"over {metrics['iterations']} PPO iterations ({metrics['imitation']} imitation), "
              f"{metrics['train_seconds']:.1f} s -> {args.output}")
        if args.onnx is not None:
            from akd_core.learn.onnx_export import export_onnx

            print(f"ONNX -> {export_onnx(policy, meta, args.onnx)}")
        return 0
    if not args.robot:
        raise ConfigError("--robot is required (the robot the dataset was made for)")
    robot = load_robot(args.robot, args.package_path)
    dataset = load_dataset(args.dataset)
    if method == "bc":
        policy, meta, metrics = train_bc(dataset, robot, bc)
    elif method == "ppo":
        cfg = PPOConfig(iterations=_given(args.ppo_iterations, PPOConfig.iterations), num_envs=args.envs,
                        steps_per_env=args.steps_per_env, episode_s=args.ppo_episode_seconds or PPOConfig.episode_s,
                        init_std=args.init_std or PPOConfig.init_std, learning_rate=args.ppo_lr,
                        desired_kl=args.ppo_kl, critic_warmup=args.critic_warmup,
                        entropy=_given(args.entropy, PPOConfig.entropy),
                        randomisation=randomisation(args), bc=bc, seed=args.seed)
        policy, meta, metrics = train_ppo(dataset, robot, cfg, init=args.init, checkpoint=checkpoint)
    else:
        cfg = DaggerConfig(iterations=args.iterations, episodes=args.episodes, episode_s=args.episode_seconds,
                           label_every=args.label_every, beta0=args.beta, beta_decay=args.beta_decay,
                           takeover_tilt_deg=args.takeover_tilt, takeover_height_frac=args.takeover_height,
                           takeover_s=args.takeover_seconds,
                           randomisation=randomisation(args), expert=expert_config(args), bc=bc,
                           fit=FitConfig(epochs=args.dagger_epochs, lr=args.lr, batch_size=args.batch_size,
                                         obs_noise=args.fit_noise),
                           gate_episodes=args.gate_episodes, gate_seconds=args.gate_seconds, seed=args.seed)
        policy, meta, metrics = train_dagger(dataset, robot, cfg, checkpoint=checkpoint,
                                             expert_report=args.expert_report)
    save_policy(args.output, policy, meta)
    line = (f"{method}: {metrics['num_demos']} demos, {metrics['num_samples']} samples, "
            f"{metrics['train_seconds']:.1f} s")
    if method == "dagger":
        line += f", {metrics['labels']} expert labels over {metrics['iterations']} iterations"
    elif method == "ppo":
        line += f", {metrics['env_steps']} environment steps over {metrics['iterations']} PPO iterations"
    else:
        line += f", PD-target RMSE {metrics['target_rmse_rad']:.4f} rad"
    print(f"{line} -> {args.output}")
    if args.onnx is not None:
        from akd_core.learn.onnx_export import export_onnx

        print(f"ONNX -> {export_onnx(policy, meta, args.onnx)}")
    return 0
