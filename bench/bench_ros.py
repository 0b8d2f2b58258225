"""ROS 2 replay timing: achieved rate and inter-arrival p50 / p99 of /joint_states, measured by a
subscriber in another process (``python -m akd_ros.monitor``), at 100 / 500 / 1000 Hz.

    .venv/bin/python bench/bench_ros.py [--rates 100,500,1000] [--duration 3] [--json out.json]

Each rate replays a synthetic a1 run recorded at that rate (every topic the replay publishes:
/joint_states, the command streams, /akd/root_odom), over Fast DDS shared memory, in its own domain.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.ros_runs import PYTHON, make_run, monitor_args, replay_args, ros_env  # noqa: E402


def measure(rate_hz: float, duration_s: float, tmp: Path, domain: int) -> dict:
    steps = int(round(rate_hz * duration_s))
    run = make_run(tmp / f"run_{int(rate_hz)}", dt=1.0 / rate_hz, steps=steps)
    env = ros_env(tmp, domain)
    out = tmp / f"rec_{int(rate_hz)}.json"
    timeout = duration_s + 30
    monitor = subprocess.Popen([PYTHON, *monitor_args(out, [f"/joint_states:joint_state:{steps}"], timeout,
                                                       times_only=True)], cwd=REPO, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    replay = subprocess.run([PYTHON, *replay_args(run.path, wait_for_subscribers=1, linger=0.5)], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=timeout + 30)
    monitor.wait(timeout=timeout + 30)
    if replay.returncode != 0:
        raise RuntimeError(f"replay failed at {rate_hz} Hz:\n{replay.stdout}{replay.stderr}")
    times = np.array([m["t"] for m in json.loads(out.read_text())["topics"]["/joint_states"]])
    gaps = np.diff(times) * 1e3
    return {
        "rate_hz": rate_hz, "samples": steps, "received": int(len(times)),
        "achieved_hz": float((len(times) - 1) / (times[-1] - times[0])) if len(times) > 1 else 0.0,
        "interarrival_p50_ms": float(np.percentile(gaps, 50)), "interarrival_p99_ms": float(np.percentile(gaps, 99)),
        "interarrival_max_ms": float(gaps.max()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="100,500,1000", help="comma-separated publish rates in Hz")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds of motion per rate")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)
    results = []
    print(f"{'rate Hz':>8} {'received':>12} {'achieved Hz':>12} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    with tempfile.TemporaryDirectory(prefix="akd-bench-ros-") as tmp:
        for i, rate in enumerate(float(r) for r in args.rates.split(",")):
            r = measure(rate, args.duration, Path(tmp), domain=150 + (os.getpid() + i) % 80)
            results.append(r)
            print(f"{r['rate_hz']:8.0f} {r['received']:>6d}/{r['samples']:<5d} {r['achieved_hz']:12.1f} "
                  f"{r['interarrival_p50_ms']:8.3f} {r['interarrival_p99_ms']:8.3f} {r['interarrival_max_ms']:8.3f}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
