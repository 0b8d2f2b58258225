"""``python -m akd_ros.monitor``: record what arrives on AKD's topics, in a process of its own.

A small subscriber used by the ROS tests and ``bench/bench_ros.py`` (and handy for a quick look at a
replay without a ROS install): it subscribes to the given topics, optionally calls a
``std_srvs/Trigger`` service (the generator's ``~/generate``), waits until each topic has delivered
its expected number of messages (or a timeout), and writes every message's steady arrival time and
content to a JSON file::

    python -m akd_ros.monitor --out rec.json --timeout 20 \\
        --topic /joint_states:joint_state:100 --topic /robot_description:string:1
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import rclpy
from nav_msgs.msg import Odometry
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from akd_core.io.errors import ConfigError
from akd_core.io.fileio import write_json_atomic
from akd_ros.convert import NS_PER_S


def _stamp(stamp: Any) -> int:
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def _joint_state(msg: JointState) -> dict[str, Any]:
    return {"stamp_ns": _stamp(msg.header.stamp), "name": list(msg.name), "position": list(msg.position),
            "velocity": list(msg.velocity), "effort": list(msg.effort)}


def _trajectory(msg: JointTrajectory) -> dict[str, Any]:
    return {"stamp_ns": _stamp(msg.header.stamp), "joint_names": list(msg.joint_names),
            "positions": [list(p.positions) for p in msg.points],
            "velocities": [list(p.velocities) for p in msg.points],
            "accelerations": [list(p.accelerations) for p in msg.points],
            "effort": [list(p.effort) for p in msg.points],
            "time_from_start_ns": [_stamp(p.time_from_start) for p in msg.points]}


def _odometry(msg: Odometry) -> dict[str, Any]:
    p, q, t = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist
    return {"stamp_ns": _stamp(msg.header.stamp), "frame_id": msg.header.frame_id,
            "child_frame_id": msg.child_frame_id, "position": [p.x, p.y, p.z], "orientation": [q.x, q.y, q.z, q.w],
            "linear": [t.linear.x, t.linear.y, t.linear.z], "angular": [t.angular.x, t.angular.y, t.angular.z]}


MESSAGE_KINDS = {
    "joint_state": (JointState, _joint_state),
    "trajectory": (JointTrajectory, _trajectory),
    "float64_array": (Float64MultiArray, lambda m: {"data": list(m.data)}),
    "odometry": (Odometry, _odometry),
    "string": (String, lambda m: {"data": m.data}),  # transient_local, as robot_description
}


def parse_topic(spec: str) -> tuple[str, str, int]:
    """``/name:kind[:count]`` -> (name, kind, count); count 0 = record until the timeout."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or parts[1] not in MESSAGE_KINDS:
        raise ConfigError(f"--topic {spec!r}: expected /name:kind[:count] with kind one of {sorted(MESSAGE_KINDS)}")
    return parts[0], parts[1], int(parts[2]) if len(parts) == 3 else 0


def record(topics: list[tuple[str, str, int]], timeout: float, trigger: str | None = None,
           times_only: bool = False, context: rclpy.Context | None = None) -> dict[str, Any]:
    """Subscribe, optionally call a Trigger service, and collect messages until every count is met or timeout.

    Returns ``{"topics": {name: [{"t": steady_s, ...content}]}, "trigger": {"success", "message"} | None}``.
    """
    node = Node("akd_monitor", context=context)
    received: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in topics}
    subscriptions = []
    for name, kind, _ in topics:
        msg_type, to_dict = MESSAGE_KINDS[kind]
        latched = kind == "string"
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1 if latched else 1000,
                         reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)

        def callback(msg: Any, name: str = name, to_dict: Any = to_dict) -> None:
            entry = {"t": time.monotonic()}
            if not times_only:
                entry.update(to_dict(msg))
            received[name].append(entry)

        subscriptions.append(node.create_subscription(msg_type, name, callback, qos))
    print("monitor: subscribed", flush=True)
    response: dict[str, Any] | None = None
    future = None
    end = time.monotonic() + timeout
    if trigger:
        client = node.create_client(Trigger, trigger)
        if not client.wait_for_service(timeout_sec=timeout):
            response = {"success": False, "message": f"service {trigger} not available"}
        else:
            future = client.call_async(Trigger.Request())
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.05)
        if future is not None and future.done() and response is None:
            result = future.result()
            response = {"success": bool(result.success), "message": result.message}
        counts_met = all(count and len(received[name]) >= count for name, _, count in topics)
        if counts_met and (future is None or response is not None):
            break
    executor.remove_node(node)
    node.destroy_node()
    return {"topics": received, "trigger": response}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m akd_ros.monitor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", action="append", default=[], required=True, help="/name:kind[:count]")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait at most")
    parser.add_argument("--trigger", default=None, help="std_srvs/Trigger service to call once subscribed")
    parser.add_argument("--times-only", action="store_true", help="record arrival times only (benchmarks)")
    parser.add_argument("--out", required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    topics = [parse_topic(spec) for spec in args.topic]
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    try:
        result = record(topics, args.timeout, args.trigger, args.times_only, context)
    finally:
        rclpy.shutdown(context=context)
    write_json_atomic(args.out, result)
    counts = ", ".join(f"{name}: {len(msgs)}" for name, msgs in result["topics"].items())
    print(f"monitor: {counts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
