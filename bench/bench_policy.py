"""Policies that hold up (issue 33): per robot, tracked clips -> dataset -> BC, DAgger (MPC expert) and PPO
fine-tuning under pushes of each (``--ppo-iterations``, ``--ppo-kl``; one cached policy per setting; train s of a
fine-tuned row includes its start's) -> the same evaluation for all of them and the MPC expert (10 episodes x 20 s,
pushes 0.4 m/s every 2 s, friction 0.6-1.2, base mass 0.9-1.1, observation noise 1, latency 0-20 ms, seed 0), with
training and evaluation times.

    nice -n 10 .venv/bin/python bench/bench_policy.py --robot quadruped --out /tmp/akd_bench_policy
    nice -n 10 .venv/bin/python bench/bench_policy.py --robot a1 --out /tmp/akd_bench_policy
    nice -n 10 .venv/bin/python bench/bench_policy.py --robot humanoid --out /tmp/akd_bench_policy

Everything is cached and resumable in OUT/<robot>/ (runs, dataset, policies, reports and their checkpoints): re-run
the same command after an interruption. ``--skip mpc`` leaves out the expert's own evaluation (the longest part);
``--expert-report FILE`` passes an earlier one to DAgger's gate. The table at the end is docs/policy.md's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.cli import main as akd  # noqa: E402
from akd_core.learn.bc import BCConfig, train_bc  # noqa: E402
from akd_core.learn.dagger import DaggerConfig, train_dagger  # noqa: E402
from akd_core.learn.dataset import load_dataset  # noqa: E402
from akd_core.learn.env import WorldPhysics  # noqa: E402
from akd_core.learn.evaluate import EvalConfig, ExpertController, PolicyController, evaluate  # noqa: E402
from akd_core.learn.expert import ExpertConfig  # noqa: E402
from akd_core.learn.policy import load_policy, save_policy  # noqa: E402
from akd_core.learn.ppo import PPOConfig, train_ppo  # noqa: E402
from akd_core.model.load import load_robot  # noqa: E402
from akd_core.model.robot import Robot  # noqa: E402

CLIPS = {  # several speeds and a turn per robot
    "quadruped": ["a dog trotting forward at 0.4 m/s", "a dog trotting forward at 0.5 m/s",
                  "a dog trotting forward at 0.6 m/s", "a dog trotting forward at 0.6 m/s and turning left"],
    "a1": ["a dog trotting forward at 0.4 m/s", "a dog trotting forward at 0.6 m/s",
           "a dog trotting forward at 0.8 m/s", "a dog trotting forward at 0.6 m/s and turning left"],
    "humanoid": ["a person walking forward slowly", "a person walking forward",
                 "a person walking forward and turning left"],
}


def robot_spec(name: str) -> str:
    if name == "a1":
        from tests.conftest import example_robot_urdf

        return str(example_robot_urdf("a1"))
    return name


def make_runs(robot: str, root: Path, duration: float) -> list[Path]:
    """`akd gait` + `akd track` (sampling MPC) of each clip prompt, skipped when already tracked."""
    runs = []
    for i, prompt in enumerate(CLIPS[robot]):
        run = root / f"clip{i}"
        if not (run / "tracked.npz").exists():
            assert akd(["gait", "--robot", robot_spec(robot), "--prompt", prompt, "--out", str(run), "--duration",
                        str(duration), "--no-preview"]) == 0
            assert akd(["track", str(run)]) == 0
        runs.append(run)
    return runs


def report_row(name: str, report: dict, train_s: float | None) -> str:
    def f(key: str, spec: str) -> str:
        v = report.get(key)
        return "-" if v is None else format(v, spec)

    return (f"| {name} | {report['falls']}/{report['episodes']} | {f('joint_rmse_rad', '.3f')} | "
            f"{f('distance_ratio', '.2f')} | {f('mean_speed_mps', '.2f')} / {f('reference_speed_mps', '.2f')} | "
            f"{'-' if train_s is None else f'{train_s:.0f}'} | {report['wall_seconds']:.0f} |")


def evaluate_once(path: Path, robot: Robot, policy_path: Path, controller: str, cfg: EvalConfig,
                  expert: ExpertConfig) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    policy, meta = load_policy(policy_path)
    ctrl = ExpertController(expert) if controller == "mpc" else PolicyController(policy, 1.0, name=meta.method)
    report, _ = evaluate(robot, WorldPhysics.from_dict(meta.physics), meta.clips, meta.starts, ctrl, cfg,
                         checkpoint=path.with_name(path.name + ".ckpt"))
    path.write_text(json.dumps(report, indent=1))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", choices=sorted(CLIPS), default="quadruped")
    parser.add_argument("--out", type=Path, default=Path("/tmp/akd_bench_policy"))
    parser.add_argument("--duration", type=float, default=6.0, help="clip length, s")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--expert-replan", type=int, default=1)
    parser.add_argument("--expert-anchor", type=float, default=0.05)
    parser.add_argument("--expert-samples", type=int, default=None, help="MPC expert samples (default: the tracker's)")
    parser.add_argument("--expert-report", type=Path, default=None)
    parser.add_argument("--skip", default="", help="comma-separated: bc, dagger, bc+ppo, dagger+ppo, mpc")
    parser.add_argument("--ppo-iterations", type=int, default=PPOConfig.iterations)
    parser.add_argument("--ppo-kl", type=float, default=PPOConfig.desired_kl)
    args = parser.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    root = args.out / args.robot
    root.mkdir(parents=True, exist_ok=True)
    runs = make_runs(args.robot, root / "runs", args.duration)
    dataset_path = root / "dataset.hdf5"
    if not dataset_path.exists():
        assert akd(["export", *map(str, runs), "--format", "hdf5", "-o", str(dataset_path),
                    "--no-require-crosscheck"]) == 0
    robot = load_robot(robot_spec(args.robot))
    dataset = load_dataset(dataset_path)
    expert = ExpertConfig(samples=args.expert_samples, replan_frames=args.expert_replan,
                          anchor_radius_m=args.expert_anchor or None)
    cfg = EvalConfig(seconds=args.seconds, episodes=args.episodes, seed=0)
    times = json.loads((root / "times.json").read_text()) if (root / "times.json").exists() else {}
    rows = []
    for method in ("bc", "dagger"):
        path = root / f"{method}.pt"
        if method in skip:
            continue
        if not path.exists():
            tic = time.perf_counter()
            if method == "bc":
                policy, meta, _ = train_bc(dataset, robot, BCConfig())
            else:
                policy, meta, metrics = train_dagger(dataset, robot, DaggerConfig(expert=expert),
                                                     checkpoint=root / "dagger.ckpt",
                                                     expert_report=args.expert_report)
            save_policy(path, policy, meta)
            times[method] = (metrics["train_seconds"] if method == "dagger" else time.perf_counter() - tic)
            (root / "times.json").write_text(json.dumps(times))
        report = evaluate_once(root / f"{method}_eval.json", robot, path, "policy", cfg, expert)
        rows.append(report_row(method.upper() if method == "bc" else "DAgger", report, times.get(method)))
    for start in ("bc", "dagger"):  # PPO fine-tuning under pushes of the cloned policies
        name = f"{start}+ppo"
        if name in skip or start in skip:
            continue
        tag = f"{start}_ppo{args.ppo_iterations}_kl{args.ppo_kl:g}"  # one cached policy per setting
        path = root / f"{tag}.pt"
        if not path.exists():
            ppo = PPOConfig(iterations=args.ppo_iterations, desired_kl=args.ppo_kl)
            policy, meta, metrics = train_ppo(dataset, robot, ppo,
                                              init=root / f"{start}.pt",
                                              checkpoint=path.with_name(path.name + ".ckpt"))
            save_policy(path, policy, meta)
            times[tag] = metrics["train_seconds"] + times.get(start, 0.0)
            (root / "times.json").write_text(json.dumps(times))
        report = evaluate_once(root / f"{tag}_eval.json", robot, path, "policy", cfg, expert)
        label = ("BC" if start == "bc" else "DAgger") + f" + PPO {args.ppo_iterations} it., KL {args.ppo_kl:g}"
        rows.append(report_row(label, report, times.get(tag)))
    if "mpc" not in skip:
        report = evaluate_once(root / "mpc_eval.json", robot, root / "bc.pt", "mpc", cfg, expert)
        rows.append(report_row("MPC expert", report, None))
    print(f"\n{args.robot}: {len(dataset.demos)} clips, {dataset.num_samples} samples; evaluation "
          f"{args.episodes} x {args.seconds:g} s, seed 0")
    print("| controller | falls | joint RMSE rad | distance ratio | speed m/s (reference) | train s | eval s |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
