"""Cross-check benchmark: what `akd crosscheck` costs on the `akd run` demo clip, phase by phase, and what each of
its settings buys. Prints wall times (load-dependent: name the machine's load beside them) and the counts that do
not depend on load (world-steps simulated, engine builds, Warp modules compiled).

    .venv/bin/python bench/bench_crosscheck.py [--run RUN] [--cold] [--dense]

--run RUN   cross-check this run directory (default: make the demo clip, "a dog trotting forward", in a temp dir
            and track it as `akd track` does)
--cold      also time the first-use compilation of every Warp kernel the check needs, in a fresh kernel cache
            (a child process with its own WARP_CACHE_PATH)
--dense     also time one Newton rollout of the windows batch with Newton's default dense inertia (the setting
            before issue 32), for the speed-up figure
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.io.rundir import ROBOT_URDF, TRACKED, RunDir  # noqa: E402
from akd_core.model.robot import load_urdf  # noqa: E402
from akd_core.motion.clip import TrackedMotion  # noqa: E402
from akd_core.physics import crosscheck as C  # noqa: E402
from akd_core.physics.params import physics_from_dict  # noqa: E402

COLD = """
import sys, time
from akd_core.model.robot import load_urdf
from akd_core.physics.crosscheck import warm_up
tic = time.perf_counter()
warm_up(load_urdf(sys.argv[1]))
print(f"{time.perf_counter() - tic:.1f}")
"""


def demo_run(out: Path) -> RunDir:
    from akd_core.motion.stage import stage_gait
    from akd_core.physics.tracker import stage_track

    run = RunDir(out, create=True)
    stage_gait(run, robot_spec="quadruped", prompt="a dog trotting forward", duration=4.0, fps=50.0, seed=0)
    stage_track(run, progress=False)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, default=None)
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--dense", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="akd-bench-cc-") as tmp:
        run = RunDir(args.run) if args.run else demo_run(Path(tmp) / "demo")
        robot = load_urdf(run.file(ROBOT_URDF))
        tracked = TrackedMotion.load(run.file(TRACKED))
        physics = physics_from_dict(robot, run.stage("track")["metrics"])
        print(f"robot {robot.name}: {robot.num_dofs} DoF; clip {tracked.num_steps - 1} control periods of "
              f"{tracked.dt * 1e3:.0f} ms; load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

        tic = time.perf_counter()
        from akd_core.physics.engines.warp_runtime import import_newton

        import_newton()
        print(f"import newton (warm): {time.perf_counter() - tic:.2f} s")
        tic = time.perf_counter()
        C.warm_up(robot)
        print(f"load the check's Warp kernels from the cache + one 1-world build: {time.perf_counter() - tic:.2f} s")

        phases = {}
        real = C._replayer

        def timed_replayer(*a, **k):
            t = time.perf_counter()
            engine = real(*a, **k)
            phases.setdefault("engine builds", []).append(time.perf_counter() - t)
            return engine

        C._replayer = timed_replayer
        tic = time.perf_counter()
        result = C.crosscheck(robot, tracked, physics, "newton")
        total = time.perf_counter() - tic
        C._replayer = real
        frames = tracked.num_steps - 1
        steps = round(tracked.dt / result["timestep_s"])
        window_steps = result["windows"] * round(result["window_s"] / tracked.dt) * steps
        loop_steps = round(result["open_loop_s"] / tracked.dt) * steps
        print(f"crosscheck: {total:.2f} s (engine builds {sum(phases['engine builds']):.2f} s for "
              f"{len(phases['engine builds'])}); windowed joint RMSE {result['joint_rmse_rad']:.4f} rad, passed "
              f"{result['passed']}, step {result['timestep_s'] * 1e3:.2f} ms, refinements "
              f"{result['step_refinements']}; open loop {result['open_loop_joint_rmse_rad']:.4f} rad")
        print(f"world-steps: windows {window_steps} ({result['windows']} worlds x {window_steps // result['windows']})"
              f", open loop {loop_steps} (1 world); {frames} control periods")

        if args.dense:
            from akd_core.physics.engines.base import Feet, mass_links
            from akd_core.physics.engines.newton import NewtonEngine

            states = C.tracked_states(tracked)
            starts = list(range(0, frames, round(result["window_s"] / tracked.dt)))
            window = round(result["window_s"] / tracked.dt)
            targets = np.stack([tracked.pd_targets[f:f + window + 1] for f in starts]).astype(np.float64)
            for tile in (True, False):
                engine = NewtonEngine(robot, physics, tracked.dt / steps, steps, Feet((), np.zeros((0, 3))),
                                      mass_links(robot), worlds=len(starts), tile_inertia=tile)
                engine.rollout([engine.start(states[f]) for f in starts], targets[:, :3])  # eager + capture
                tic = time.perf_counter()
                engine.rollout([engine.start(states[f]) for f in starts], targets)
                wall = time.perf_counter() - tic
                print(f"windows rollout, {'tile' if tile else 'dense'} inertia: {wall:.2f} s = "
                      f"{wall / (len(starts) * window * steps) * 1e6:.0f} us per world-step")

        if args.cold:
            with tempfile.TemporaryDirectory(prefix="akd-warp-cold-") as cache:
                env = dict(os.environ, WARP_CACHE_PATH=cache, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
                tic = time.perf_counter()
                out = subprocess.run([sys.executable, "-c", COLD, str(run.file(ROBOT_URDF))], env=env, check=True,
                                     capture_output=True, text=True)
                modules = sum(1 for _ in Path(cache).glob("*/wp_*"))
                compile_s = float(out.stdout.split()[-1])
                print(f"cold: compile every kernel of the check in a fresh cache: {compile_s:.1f} s "
                      f"({modules} Warp modules; process {time.perf_counter() - tic:.1f} s with imports)")


if __name__ == "__main__":
    main()
