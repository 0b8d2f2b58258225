"""ROS 2 soak of a velocity-command policy (issue 47, item 5): a long closed loop of the simulator node, the policy
node and a /cmd_vel Twist stream that changes every few seconds keeps the control rate, keeps its memory flat and
does not fall.

    .venv/bin/python bench/bench_soak.py POLICY.onnx [--minutes 30] [--every 5] [--sample 10] [--seed 0]
        [--robot quadruped] [--domain 77] [--logs DIR] [--json soak.json]

Three processes, as ``launch/velocity.launch.py`` runs them: ``akd_ros.sim`` (the policy's robot, from its start
state ``clip``, real time, no lockstep) and ``akd_ros.policy_node`` (``cmd_vel:=true``, ``use_sim_time``), each its
own process, and this script, which publishes geometry_msgs/Twist on /cmd_vel at 20 Hz: a new command every
``--every`` s drawn uniformly from the policy's trained box (its ONNX metadata ``command.box``, seeded by ``--seed``;
every 6th command zero, so the robot also stands), and records over each ``--sample`` s window (steady clock):

- control rate: the policy node's PD targets (/position_controller/commands) received here per wall second (the
  simulator's /odom rate beside it); the nominal rate is the policy's ``control_hz``;
- RSS of each node process (psutil, else /proc/PID/status VmRSS);
- commanded (the Twist clipped into the box, as the node clips it) vs measured base velocity in the heading frame
  (from /odom), the command the policy used (/akd_policy/command), and the base's lowest height / largest tilt;
- up or fallen, by the tracking's fall rule (tilt over FALL_TILT_DEG, or the base below FALL_HEIGHT_FRACTION of its
  height on the first /odom), and the simulator's own verdict in its final log line.

It prints a table per minute and a verdict, and exits 0 only if all three pass: the control rate of every window
>= 95 % of nominal; the RSS of each node in the final span (the last minute) < 5 % above the baseline span (minute 2,
after a minute of warm-up) (runs shorter than 3 min: spans of a third of the run); no fall. Child processes are
ended on exit, on Ctrl-C and on SIGTERM (and are sent SIGTERM if this script dies). Fast DDS shared memory transport,
domain ``--domain``; node logs and ROS logs in ``--logs`` (default a new temporary directory, printed).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akd_core.io.signals import stop_on_sigint  # noqa: E402
from akd_core.learn.command import CommandBox, heading_velocity  # noqa: E402
from akd_core.learn.env import fallen, tilt_deg  # noqa: E402
from akd_core.learn.onnx_export import OnnxPolicy  # noqa: E402
from akd_core.model.spatial import quat_to_matrix  # noqa: E402
from tests.ros_runs import PYTHON, ros_env  # noqa: E402

TWIST_HZ = 20.0
ZERO_EVERY = 6  # every 6th command is zero
RATE_FRACTION = 0.95
RSS_GROWTH_PCT = 5.0
SIM_MARGIN_S = 5.0  # the simulator runs this much longer than the soak (it starts just before the first target)
SETTLE_S = 1.5  # tracking error counted from this long after each command change
RATE_SOURCE = ("PD targets of akd_policy (/position_controller/commands) received by this script per wall second; "
               "odom_hz: the simulator's /odom")


# ----------------------------------------------------------------------------- commands, memory, processes
def command_schedule(box: CommandBox, seed: int, count: int) -> np.ndarray:
    """(count, 3) commands: uniform in the box's axis ranges, then clipped into it (speed limit while turning);
    every ZERO_EVERY-th one zero."""
    rng = np.random.default_rng(seed)
    commands = box.clip(rng.uniform(box.low, box.high, size=(count, 3)))
    commands[ZERO_EVERY - 1::ZERO_EVERY] = 0.0
    return commands


def rss_mb(pid: int) -> float | None:
    """Resident set size of a process (MB), or None when it is gone."""
    try:
        import psutil

        return psutil.Process(pid).memory_info().rss / 2**20
    except ImportError:
        pass
    except Exception:  # psutil.NoSuchProcess and friends
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _die_with_parent():
    """preexec_fn: the child gets SIGTERM when this process dies (Linux), so a killed soak leaves no orphans."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def start_node(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([PYTHON, *args], cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            preexec_fn=_die_with_parent)


def stop_node(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGINT (the node logs its summary), then SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        if proc.poll() is not None:
            return
        try:
            proc.send_signal(sig)
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


# ----------------------------------------------------------------------------- measurement
class Window:
    """What arrives during one sample window."""

    def __init__(self):
        self.pd = 0
        self.odom = 0
        self.cmd, self.meas, self.used = [], [], []
        self.settled_err = []
        self.heights, self.tilts = [], []
        self.fell = False


class Recorder:
    """The script's rclpy node: publishes the Twist stream, counts and reads what the nodes publish."""

    def __init__(self, box: CommandBox):
        import rclpy
        from geometry_msgs.msg import Twist, TwistStamped
        from nav_msgs.msg import Odometry
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions
        from std_msgs.msg import Float64MultiArray
        from std_srvs.srv import Trigger

        self.rclpy, self.Twist, self.Trigger = rclpy, Twist, Trigger
        self.box = box
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = Node("akd_soak", context=self.context)
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
        self.node.create_subscription(Float64MultiArray, "/position_controller/commands", self._on_pd, qos)
        self.node.create_subscription(Odometry, "/odom", self._on_odom, qos)
        self.node.create_subscription(TwistStamped, "/akd_policy/command", self._on_used, qos)
        self.reset_client = self.node.create_client(Trigger, "/akd_sim/reset")
        self.reset_on_fall = True
        self.down = False  # fallen and not seen up since
        self.falls: list[float] = []  # steady times of each fall
        self.pub = self.node.create_publisher(Twist, "/cmd_vel", 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.window = Window()
        self.first_pd: float | None = None
        self.start_height: float | None = None
        self.command = np.zeros(3)  # the clipped Twist being sent
        self.changed_at = 0.0
        self.fell_at: float | None = None  # steady time

    def _on_pd(self, msg) -> None:
        if self.first_pd is None:
            self.first_pd = time.monotonic()
        self.window.pd += 1

    def _on_used(self, msg) -> None:
        self.window.used.append((msg.twist.linear.x, msg.twist.linear.y, msg.twist.angular.z))

    def _on_odom(self, msg) -> None:
        now = time.monotonic()
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
        pos = np.array([p.x, p.y, p.z])
        quat = np.array([o.x, o.y, o.z, o.w])
        if self.start_height is None:
            self.start_height = float(pos[2])
        rot = quat_to_matrix(quat)  # body -> world; /odom's twist is in the body frame
        v = heading_velocity((rot @ np.array([lin.x, lin.y, lin.z]))[None], quat[None],
                             (rot @ np.array([ang.x, ang.y, ang.z]))[None])[0]
        w = self.window
        w.odom += 1
        w.cmd.append(self.command.copy())
        w.meas.append(v)
        if self.first_pd is not None and now - self.changed_at >= SETTLE_S:
            w.settled_err.append(v - self.command)
        w.heights.append(float(pos[2]))
        w.tilts.append(tilt_deg(quat))
        if fallen(pos, quat, self.start_height):
            w.fell = True
            if self.fell_at is None:
                self.fell_at = now
            if not self.down:  # a new fall: counted, and the simulator asked to put the robot back
                self.down = True
                self.falls.append(now)
                if self.reset_on_fall and self.reset_client.service_is_ready():
                    self.reset_client.call_async(self.Trigger.Request())
        else:
            self.down = False

    def send(self, command: np.ndarray | None) -> None:
        """Publish the Twist (None: publish nothing, the watchdog will zero the command)."""
        if command is None:
            return
        msg = self.Twist()
        msg.linear.x, msg.linear.y, msg.angular.z = (float(c) for c in command)
        self.pub.publish(msg)

    def set_command(self, command: np.ndarray, now: float) -> None:
        self.command = self.box.clip(command)
        self.changed_at = now

    def spin_until(self, deadline: float, tick=None) -> None:
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=max(0.0, min(0.01, deadline - time.monotonic())))
            if tick is not None:
                tick()

    def take(self) -> Window:
        w, self.window = self.window, Window()
        return w

    def close(self) -> None:
        try:
            self.node.destroy_node()
            if self.context.ok():
                self.rclpy.shutdown(context=self.context)
        except Exception:
            pass


def _mean(rows, axis: int) -> float | None:
    return float(np.mean([r[axis] for r in rows])) if rows else None


def summarise(w: Window, t_s: float, window_s: float, rss: dict[str, float | None]) -> dict:
    err = np.array(w.settled_err) if w.settled_err else None
    return {
        "t_s": round(t_s, 3), "window_s": round(window_s, 3),
        "rate_hz": w.pd / window_s, "odom_hz": w.odom / window_s,
        "rss_mb": rss,
        "cmd": {k: _mean(w.cmd, i) for i, k in enumerate(("vx", "vy", "yaw_rate"))},
        "measured": {k: _mean(w.meas, i) for i, k in enumerate(("vx", "vy", "yaw_rate"))},
        "used": {k: _mean(w.used, i) for i, k in enumerate(("vx", "vy", "yaw_rate"))},
        "settled_rmse": None if err is None else {
            "vx": float(np.sqrt((err[:, 0] ** 2).mean())), "yaw_rate": float(np.sqrt((err[:, 2] ** 2).mean()))},
        "min_height_m": min(w.heights) if w.heights else None,
        "max_tilt_deg": max(w.tilts) if w.tilts else None,
        "fell": w.fell,
    }


# ----------------------------------------------------------------------------- verdict and table
def spans(duration_s: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """(baseline, final) spans of the run (s, end of window within): minute 2 and the last minute; for runs under
    3 min, the second and last third."""
    span = min(60.0, duration_s / 3.0)
    return (span, 2 * span), (duration_s - span, duration_s)


def verdict(windows: list[dict], nominal_hz: float, duration_s: float, sim_fell: bool | None,
            falls_s: list[float] | None = None) -> dict:
    rates = [w["rate_hz"] for w in windows]
    rate_min = min(rates) if rates else 0.0
    rate = {"nominal_hz": nominal_hz, "min_hz": rate_min, "mean_hz": float(np.mean(rates)) if rates else 0.0,
            "threshold_hz": RATE_FRACTION * nominal_hz, "source": RATE_SOURCE,
            "pass": bool(rates) and rate_min >= RATE_FRACTION * nominal_hz}
    (b0, b1), (f0, f1) = spans(duration_s)
    rss = {"compared": f"mean RSS of windows ending in ({f0:g}, {f1:g}] s vs ({b0:g}, {b1:g}] s",
           "limit_pct": RSS_GROWTH_PCT, "nodes": {}, "pass": True}
    for name in ("sim", "policy"):
        base = [w["rss_mb"][name] for w in windows if b0 < w["t_s"] <= b1 + 1e-6 and w["rss_mb"][name]]
        final = [w["rss_mb"][name] for w in windows if f0 < w["t_s"] <= f1 + 1e-6 and w["rss_mb"][name]]
        if base and final:
            growth = (np.mean(final) / np.mean(base) - 1.0) * 100.0
            ok = bool(growth < RSS_GROWTH_PCT)
            rss["nodes"][name] = {"baseline_mb": float(np.mean(base)), "final_mb": float(np.mean(final)),
                                  "growth_pct": float(growth), "pass": ok}
        else:
            ok = False
            rss["nodes"][name] = {"baseline_mb": None, "final_mb": None, "growth_pct": None, "pass": False}
        rss["pass"] = rss["pass"] and ok
    fell_windows = [w["t_s"] for w in windows if w["fell"]]
    fall = {"fell": bool(fell_windows) or bool(sim_fell), "first_window_s": fell_windows[0] if fell_windows else None,
            "sim_log_fell": sim_fell, "falls": len(falls_s or []) or int(bool(fell_windows) or bool(sim_fell)),
            "falls_at_s": [round(t, 1) for t in falls_s or []],
            "rule": "tilt > FALL_TILT_DEG or base height < FALL_HEIGHT_FRACTION * its first /odom height, or the "
                    "simulator's 'fell: yes'"}
    fall["pass"] = bool(windows) and not fall["fell"]
    return {"rate": rate, "rss": rss, "fall": fall, "pass": rate["pass"] and rss["pass"] and fall["pass"]}


def per_minute(windows: list[dict]) -> list[dict]:
    rows: dict[int, list[dict]] = {}
    for w in windows:
        rows.setdefault(int(math.ceil(w["t_s"] / 60.0 - 1e-9)), []).append(w)

    def mean(ws, get):
        vals = [get(w) for w in ws if get(w) is not None]
        return float(np.mean(vals)) if vals else None

    out = []
    for minute, ws in sorted(rows.items()):
        out.append({
            "minute": minute, "windows": len(ws),
            "rate_hz_mean": mean(ws, lambda w: w["rate_hz"]), "rate_hz_min": min(w["rate_hz"] for w in ws),
            "odom_hz_mean": mean(ws, lambda w: w["odom_hz"]),
            "rss_sim_mb": mean(ws, lambda w: w["rss_mb"]["sim"]),
            "rss_policy_mb": mean(ws, lambda w: w["rss_mb"]["policy"]),
            "vx_cmd": mean(ws, lambda w: w["cmd"]["vx"]), "vx_measured": mean(ws, lambda w: w["measured"]["vx"]),
            "yaw_rate_cmd": mean(ws, lambda w: w["cmd"]["yaw_rate"]),
            "yaw_rate_measured": mean(ws, lambda w: w["measured"]["yaw_rate"]),
            "vx_settled_rmse": mean(ws, lambda w: (w["settled_rmse"] or {}).get("vx")),
            "min_height_m": min((w["min_height_m"] for w in ws if w["min_height_m"] is not None), default=None),
            "max_tilt_deg": max((w["max_tilt_deg"] for w in ws if w["max_tilt_deg"] is not None), default=None),
            "fell": any(w["fell"] for w in ws),
        })
    return out


def _f(value, fmt: str, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}{fmt}}"


def print_table(rows: list[dict]) -> None:
    print(f"{'min':>4} {'rate Hz':>8} {'min Hz':>7} {'odom Hz':>8} {'sim MB':>8} {'pol MB':>8} {'vx cmd':>7} "
          f"{'vx meas':>8} {'wz cmd':>7} {'wz meas':>8} {'vx rmse':>8} {'height':>7} {'tilt':>6} {'up':>5}")
    for r in rows:
        print(f"{r['minute']:4d} {_f(r['rate_hz_mean'], '.1f', 8)} {_f(r['rate_hz_min'], '.1f', 7)} "
              f"{_f(r['odom_hz_mean'], '.1f', 8)} {_f(r['rss_sim_mb'], '.1f', 8)} {_f(r['rss_policy_mb'], '.1f', 8)} "
              f"{_f(r['vx_cmd'], '.3f', 7)} {_f(r['vx_measured'], '.3f', 8)} {_f(r['yaw_rate_cmd'], '.3f', 7)} "
              f"{_f(r['yaw_rate_measured'], '.3f', 8)} {_f(r['vx_settled_rmse'], '.3f', 8)} "
              f"{_f(r['min_height_m'], '.3f', 7)} {_f(r['max_tilt_deg'], '.1f', 6)} {'FELL' if r['fell'] else 'up':>5}")


def print_verdict(v: dict) -> None:
    r = v["rate"]
    print(f"control rate: min {r['min_hz']:.1f} Hz, mean {r['mean_hz']:.1f} Hz over windows; need >= "
          f"{r['threshold_hz']:.1f} Hz ({RATE_FRACTION:.0%} of {r['nominal_hz']:g} Hz)  "
          f"{'PASS' if r['pass'] else 'FAIL'}   [{r['source']}]")
    print(f"memory: {v['rss']['compared']}, growth < {RSS_GROWTH_PCT:g} %  {'PASS' if v['rss']['pass'] else 'FAIL'}")
    for name, n in v["rss"]["nodes"].items():
        if n["growth_pct"] is None:
            print(f"  {name}: no samples")
        else:
            print(f"  {name}: {n['baseline_mb']:.1f} MB -> {n['final_mb']:.1f} MB ({n['growth_pct']:+.2f} %)")
    f = v["fall"]
    times = ", ".join(f"{t:g}" for t in f.get("falls_at_s", [])[:20])
    print(f"fall: {'FELL (first in the window ending at ' + str(f['first_window_s']) + ' s)' if f['fell'] else 'none'}"
          + (f"; {f['falls']} falls, at {times} s (each reset to the start state)" if times else "")
          + f" (simulator's log: {'fell' if f['sim_log_fell'] else 'n/a' if f['sim_log_fell'] is None else 'no fall'})"
          + f"  {'PASS' if f['pass'] else 'FAIL'}")
    print(f"verdict: {'PASS' if v['pass'] else 'FAIL'}")


# ----------------------------------------------------------------------------- main
def run(args: argparse.Namespace) -> int:
    policy = OnnxPolicy(args.policy)
    if policy.task != "velocity":
        raise SystemExit(f"{args.policy} is not a velocity-command policy (task '{policy.task}')")
    box = CommandBox.from_dict(policy.command["box"])
    nominal_hz = float(policy.meta.get("control_hz", 1.0 / policy.dt))
    robot = args.robot or str(policy.meta["robot"])
    n_windows = max(1, int(round(args.minutes * 60.0 / args.sample)))
    duration_s = n_windows * args.sample
    commands = command_schedule(box, args.seed, int(duration_s // args.every) + 2)
    logs = Path(args.logs) if args.logs else Path(tempfile.mkdtemp(prefix="akd-soak-"))
    logs.mkdir(parents=True, exist_ok=True)
    env = ros_env(logs, args.domain)
    os.environ.update({k: env[k] for k in ("FASTDDS_BUILTIN_TRANSPORTS", "ROS_DOMAIN_ID", "ROS_LOG_DIR")})
    os.environ.pop("ROS_LOCALHOST_ONLY", None)
    policy_path = str(Path(args.policy).resolve())
    print(f"soak: {policy_path} on '{robot}', {duration_s / 60:g} min, a command every {args.every:g} s "
          f"(seed {args.seed}), windows of {args.sample:g} s; ROS_DOMAIN_ID={args.domain}; logs in {logs}", flush=True)

    children: dict[str, subprocess.Popen] = {}
    recorder = None
    previous_term = signal.signal(signal.SIGTERM, _terminate)
    try:
        recorder = Recorder(box)  # subscribed before the simulator starts publishing
        recorder.reset_on_fall = not args.no_reset
        children["sim"] = start_node(
            ["-m", "akd_ros.sim", "--ros-args", "-p", f"robot:={robot}", "-p", f"policy:={policy_path}",
             "-p", f"clip:={args.clip}", "-p", "lockstep:=false", "-p", "real_time_factor:=1.0",
             "-p", f"duration:={float(duration_s + SIM_MARGIN_S)!r}", "-p", "wait_for_subscribers:=1",
             "-p", f"wait_timeout:={float(args.startup_timeout)!r}"], env, logs / "sim.log")
        children["policy"] = start_node(
            ["-m", "akd_ros.policy_node", "--ros-args", "-p", f"policy:={policy_path}", "-p", f"clip:={args.clip}",
             "-p", "cmd_vel:=true", "-p", "use_sim_time:=true"], env, logs / "policy.log")

        def check_children():
            for name, proc in children.items():
                if proc.poll() is not None:
                    tail = (logs / f"{name}.log").read_text()[-2000:]
                    raise RuntimeError(f"the {name} node exited early (code {proc.returncode}):\n{tail}")

        end = time.monotonic() + args.startup_timeout
        while recorder.first_pd is None and time.monotonic() < end:
            recorder.spin_until(time.monotonic() + 0.1)
            check_children()
        if recorder.first_pd is None:
            raise RuntimeError(f"no PD target from the policy node within {args.startup_timeout:g} s (logs in {logs})")
        t0 = time.monotonic()
        recorder.take()  # start-up messages do not count
        state = {"index": -1, "next_twist": t0}

        def tick():
            now = time.monotonic()
            index = int((now - t0) // args.every)
            if index != state["index"]:
                state["index"] = index
                recorder.set_command(commands[index], now)
            if now >= state["next_twist"]:
                recorder.send(commands[index])
                state["next_twist"] += 1.0 / TWIST_HZ
                if state["next_twist"] < now:
                    state["next_twist"] = now + 1.0 / TWIST_HZ

        windows = []
        last = t0
        for k in range(1, n_windows + 1):
            due = t0 + k * args.sample
            recorder.spin_until(due, tick)
            now = time.monotonic()
            w = summarise(recorder.take(), now - t0, now - last,
                          {name: rss_mb(proc.pid) for name, proc in children.items()})
            last = now
            windows.append(w)
            if args.verbose:
                print(f"  {w['t_s']:7.1f} s  {w['rate_hz']:5.1f} Hz  sim {w['rss_mb']['sim'] or 0:.1f} MB  policy "
                      f"{w['rss_mb']['policy'] or 0:.1f} MB  vx {w['cmd']['vx'] or 0:+.2f}/"
                      f"{w['measured']['vx'] or 0:+.2f}"
                      f"  {'FELL' if w['fell'] else 'up'}", flush=True)
            check_children()
        # the Twist stream stops; the simulator ends at its duration and logs its summary, then the policy node
        wait_end = time.monotonic() + SIM_MARGIN_S + 30.0 + 0.1 * duration_s
        while children["sim"].poll() is None and time.monotonic() < wait_end:
            recorder.spin_until(time.monotonic() + 0.2)
        for proc in children.values():
            stop_node(proc)
    except KeyboardInterrupt:
        print("interrupted: stopping the nodes", file=sys.stderr)
        return 130
    finally:
        for proc in children.values():
            stop_node(proc, grace_s=5.0)
        if recorder is not None:
            recorder.close()
        signal.signal(signal.SIGTERM, previous_term)

    sim_log = (logs / "sim.log").read_text()
    policy_log = (logs / "policy.log").read_text()
    sim_summary = re.search(r"simulated ([\d.]+) s: (\d+) commands applied, (\d+) dropped, (\d+) missed, "
                            r"fell: (yes|no)", sim_log)
    sim_fell = None if sim_summary is None else sim_summary[5] == "yes"
    if re.search(r"the robot fell at t = ", sim_log):
        sim_fell = True
    policy_summary = re.search(r"published (\d+) PD-target commands; (\d+) Twist messages received, (\d+) steps "
                               r"clipped into the box, the watchdog zeroed the command (\d+) times", policy_log)
    result = {
        "policy": policy_path, "robot": robot, "minutes": duration_s / 60.0, "every_s": args.every,
        "sample_s": args.sample, "seed": args.seed, "domain": args.domain, "nominal_hz": nominal_hz,
        "rate_source": RATE_SOURCE, "box": policy.command["box"], "logs": str(logs),
        "sim": None if sim_summary is None else {
            "simulated_s": float(sim_summary[1]), "applied": int(sim_summary[2]), "dropped": int(sim_summary[3]),
            "missed": int(sim_summary[4]), "fell": sim_summary[5] == "yes"},
        "policy_node": None if policy_summary is None else {
            "pd_targets": int(policy_summary[1]), "twists": int(policy_summary[2]), "clipped": int(policy_summary[3]),
            "watchdog_trips": int(policy_summary[4])},
        "windows": windows,
        "per_minute": per_minute(windows),
    }
    result["verdict"] = verdict(windows, nominal_hz, duration_s, sim_fell, [t - t0 for t in recorder.falls])
    result["reset_on_fall"] = not args.no_reset
    print()
    print_table(result["per_minute"])
    print()
    if result["sim"]:
        s = result["sim"]
        print(f"simulator: {s['simulated_s']:.1f} s simulated, {s['applied']} commands applied, {s['dropped']} "
              f"dropped, {s['missed']} missed")
    if result["policy_node"]:
        p = result["policy_node"]
        print(f"policy node: {p['pd_targets']} PD targets, {p['twists']} Twists, {p['clipped']} steps clipped, "
              f"watchdog {p['watchdog_trips']} times")
    print_verdict(result["verdict"])
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["verdict"]["pass"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policy", help="ONNX export of a velocity-command policy (akd export-policy)")
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the soak (default 30)")
    parser.add_argument("--every", type=float, default=5.0, help="seconds each command is held (default 5)")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds per measurement window (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the command draw")
    parser.add_argument("--robot", default=None, help="robot for the simulator (default: the policy's metadata)")
    parser.add_argument("--clip", type=int, default=0, help="the policy's start state to start from")
    parser.add_argument("--domain", type=int, default=77, help="ROS_DOMAIN_ID (default 77, apart from the tests')")
    parser.add_argument("--startup-timeout", type=float, default=120.0,
                        help="seconds to wait for the nodes to start (and for the simulator to finish)")
    parser.add_argument("--logs", default=None, help="directory for the node logs (default: a new temporary one)")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--no-reset", action="store_true",
                        help="leave a fallen robot down (default: each fall is counted and the simulator's ~/reset "
                             "service puts the robot back in its start state, so the soak goes on)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each window as it ends")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.every <= 0 or args.sample <= 0:
        parser.error("--minutes, --every and --sample must be positive")
    stop_on_sigint()  # Ctrl-C / kill -INT stop the soak even when it was started in the background
    try:
        return run(args)
    except RuntimeError as exc:
        print(f"bench_soak: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
