"""The ``akd_policy`` node: an exported policy (ONNX, :mod:`akd_core.learn.onnx_export`) driving a robot over ROS 2.

Subscribes to ``/joint_states`` (sensor_msgs/JointState, joints matched by name) and ``/imu`` (sensor_msgs/Imu:
orientation and angular velocity in the base frame): only what a real robot measures. When both have arrived for
the same stamp (the simulator node publishes them every control period, so the node runs at the control rate; on a
robot, a state estimator does), it builds the observation (:mod:`akd_core.learn.observation`, the reference clip
``clip`` of the export at frame ``round((stamp - first stamp) / dt)``), runs the network with onnxruntime, clips the
PD targets to the URDF limits and to the velocity limits from the last target, and publishes them as
``/position_controller/commands`` (std_msgs/Float64MultiArray in the export's joint order, forward_command_controller)
and, with ``publish_trajectory``, as a one-point JointTrajectory one control period ahead
(joint_trajectory_controller). Run it with ``use_sim_time:=true`` against the simulator node.

A velocity-command policy (``akd train-policy LIBRARY --task velocity``; ``cmd_vel:=true``, CLI ``--cmd-vel``) has
no clip: it follows ``/cmd_vel`` (geometry_msgs/Twist in ``base_link``, REP 103: ``linear.x`` forward and
``linear.y`` left in m/s, ``angular.z`` yaw rate in rad/s; taken as the heading-frame command the policy was trained
on, which it is for a base standing level). Each Twist is clipped into the policy's trained command box (the
export's ``command`` metadata); a watchdog zeroes the command when no Twist has arrived for ``cmd_vel_timeout``
(0.5 s) of wall-clock time (steady clock: a teleop that stopped sending stops the robot, whatever the simulated
clock does), and before the first one, so the robot stands. The command fed to the policy at each step is published
on ``command_topic`` (geometry_msgs/TwistStamped, stamped with the state it was used for). The policy's gait clock
(the export's ``command.clock``: a phase advancing at the library's stride frequency for the command, stopped while
the command is zero) starts at the start state's phase and advances one control period per step.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import rclpy
from geometry_msgs.msg import Twist, TwistStamped
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from akd_core.io.errors import AKDError, ConfigError, MotionError
from akd_core.io.signals import stop_on_sigint
from akd_core.learn.command import CommandBox, GaitClock
from akd_core.learn.observation import (
    ObservationHistory,
    build_observations,
    history_frames,
    velocity_observations,
)
from akd_core.learn.onnx_export import OnnxPolicy
from akd_ros.convert import NS_PER_S, duration_msg, float64_array_msg, time_msg

NODE_NAME = "akd_policy"
VELOCITY_LIMIT_FRACTION = 0.98  # as akd_core.physics.targets: targets never ask for more than this


@dataclass
class PolicyOptions:
    """The node's settings; each field is also a ROS parameter of the same name."""

    policy: str = ""  # ONNX export
    clip: int = 0
    joint_states_topic: str = "/joint_states"
    imu_topic: str = "/imu"
    commands_topic: str = "/position_controller/commands"
    trajectory_topic: str = "/joint_trajectory_controller/joint_trajectory"
    publish_trajectory: bool = False
    duration: float = 0.0  # stop after this many seconds of state stamps (0: until Ctrl-C)
    cmd_vel: bool = False  # follow /cmd_vel (a velocity-command policy does whether or not this is set)
    cmd_vel_topic: str = "/cmd_vel"
    cmd_vel_timeout: float = 0.5  # s of steady (wall) time without a Twist after which the command is zero
    command_topic: str = "/akd_policy/command"  # the command the policy was given, per step ('' = off)


def parameter_names() -> list[str]:
    """Names of the ROS parameters the node declares."""
    return [f.name for f in fields(PolicyOptions)]


def _qos(depth: int = 100) -> QoSProfile:
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def _stamp_ns(stamp: Any) -> int:
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


class PolicyNode(Node):
    """``akd_policy`` (module docstring)."""

    def __init__(self, defaults: PolicyOptions | None = None, **node_kwargs: Any):
        super().__init__(NODE_NAME, **node_kwargs)
        defaults = defaults or PolicyOptions()
        for f in fields(PolicyOptions):
            self.declare_parameter(f.name, getattr(defaults, f.name))
        self.options = opts = PolicyOptions(**{f.name: self.get_parameter(f.name).value for f in fields(PolicyOptions)})
        if not opts.policy:
            raise ConfigError("akd_policy needs parameter policy:=POLICY.onnx (`akd export-policy`)")
        self.policy = OnnxPolicy(opts.policy)
        self.velocity = self.policy.task == "velocity"
        if opts.cmd_vel and not self.velocity:
            raise ConfigError(f"{opts.policy} follows reference clips, not velocity commands; train a velocity-command "
                              "policy with `akd train-policy LIBRARY --task velocity` for cmd_vel:=true")
        starts = len(self.policy.start_states)
        if self.velocity:
            if not 0 <= opts.clip < starts:
                raise ConfigError(f"clip {opts.clip} is out of range: {opts.policy} holds {starts} start states")
            self.clip = None
            self.box = CommandBox.from_dict(self.policy.command["box"])
            self.clock = GaitClock.from_dict(self.policy.command["clock"])
            self.phase = float(np.asarray(self.policy.start_states[opts.clip].get("phase", 0.0)).reshape(-1)[0])
            frames = history_frames(self.policy.layout, len(self.policy.joint_names))
            self.history = ObservationHistory(1, frames, len(self.policy.joint_names)) if frames > 0 else None
        elif not 0 <= opts.clip < len(self.policy.clips):
            raise ConfigError(f"clip {opts.clip} is out of range: {opts.policy} holds {len(self.policy.clips)} clips")
        else:
            self.clip = self.policy.clips[opts.clip]
        self.twist: np.ndarray | None = None  # the last Twist as (vx, vy, yaw rate), before clipping
        self.twist_time = -np.inf  # steady-clock time it arrived
        self.twists = self.clipped = self.watchdog_trips = 0
        self.watchdog_on = True  # the command is zero until the first Twist
        self.joint_names = self.policy.joint_names
        limits = self.policy.limits
        self.lower, self.upper = limits["lower"], limits["upper"]
        self.max_step = VELOCITY_LIMIT_FRACTION * limits["velocity"] * self.policy.dt
        self.last_target = np.asarray(self.policy.start_states[opts.clip]["actions"], np.float64)
        self.joint: tuple[int, np.ndarray, np.ndarray] | None = None  # stamp, position, velocity
        self.imu: tuple[int, np.ndarray, np.ndarray] | None = None  # stamp, quat xyzw, gyro
        self.first_ns: int | None = None
        self.done_ns = -1
        self.steps = 0
        self.finished = False
        self.command_pub = self.create_publisher(Float64MultiArray, opts.commands_topic, _qos())
        self.trajectory_pub = (self.create_publisher(JointTrajectory, opts.trajectory_topic, _qos(10))
                               if opts.publish_trajectory else None)
        self.create_subscription(JointState, opts.joint_states_topic, self._on_joints, _qos())
        self.create_subscription(Imu, opts.imu_topic, self._on_imu, _qos())
        self.twist_pub = None
        if self.velocity:
            self.create_subscription(Twist, opts.cmd_vel_topic, self._on_twist, _qos(10))
            if opts.command_topic:
                self.twist_pub = self.create_publisher(TwistStamped, opts.command_topic, _qos())
            box = self.box
            self.get_logger().info(
                f"policy {opts.policy} ({self.policy.meta.get('method')}, {len(self.joint_names)} joints, "
                f"{1.0 / self.policy.dt:g} Hz) following {opts.cmd_vel_topic} within vx {list(box.vx)} m/s, vy "
                f"{list(box.vy)} m/s, yaw rate {list(box.yaw_rate)} rad/s; zero after {opts.cmd_vel_timeout:g} s "
                "without a Twist")
        else:
            self.get_logger().info(f"policy {opts.policy} ({self.policy.meta.get('method')}, {len(self.joint_names)} "
                                   f"joints, {1.0 / self.policy.dt:g} Hz) tracking clip {opts.clip} "
                                   f"('{self.clip.name}')")

    def _on_joints(self, msg: JointState) -> None:
        index = {n: i for i, n in enumerate(msg.name)}
        missing = [n for n in self.joint_names if n not in index]
        if missing:
            raise MotionError(f"{self.options.joint_states_topic} lacks joints {missing} the policy needs")
        order = [index[n] for n in self.joint_names]
        position = np.asarray(msg.position, np.float64)[order]
        velocity = np.asarray(msg.velocity, np.float64)[order] if len(msg.velocity) else np.zeros(len(order))
        self.joint = (_stamp_ns(msg.header.stamp), position, velocity)
        self._maybe_act()

    def _on_imu(self, msg: Imu) -> None:
        q, w = msg.orientation, msg.angular_velocity
        self.imu = (_stamp_ns(msg.header.stamp), np.array([q.x, q.y, q.z, q.w]), np.array([w.x, w.y, w.z]))
        self._maybe_act()

    def _on_twist(self, msg: Twist) -> None:
        self.twist = np.array([msg.linear.x, msg.linear.y, msg.angular.z], np.float64)
        self.twist_time = time.monotonic()
        self.twists += 1

    def command(self) -> np.ndarray:
        """The command (3,) for this step: the last Twist clipped into the box, zero when it is older than
        ``cmd_vel_timeout`` (or none came yet)."""
        stale = self.twist is None or time.monotonic() - self.twist_time > self.options.cmd_vel_timeout
        if stale != self.watchdog_on:
            self.watchdog_on = stale
            if stale:
                self.watchdog_trips += 1
                self.get_logger().info(f"no Twist on {self.options.cmd_vel_topic} for "
                                       f"{self.options.cmd_vel_timeout:g} s: commanding zero (stand still)")
        if stale or not np.all(np.isfinite(self.twist)):
            return np.zeros(3)
        command = self.box.clip(self.twist)
        if np.abs(command - self.twist).max() > 1e-9:
            self.clipped += 1
        return command

    def _maybe_act(self) -> None:
        if self.joint is None or self.imu is None or self.joint[0] != self.imu[0] or self.joint[0] <= self.done_ns:
            return
        stamp = self.joint[0]
        if self.first_ns is None:
            self.first_ns = stamp
        self.done_ns = stamp
        if self.options.duration > 0 and stamp - self.first_ns >= self.options.duration * NS_PER_S:
            self.finished = True
            return
        frame = int(round((stamp - self.first_ns) / (self.policy.dt * NS_PER_S)))
        _, position, velocity = self.joint
        _, quat, gyro = self.imu
        if self.velocity:
            command = self.command()
            obs = velocity_observations(position[None], velocity[None], self.last_target[None], quat[None],
                                        gyro[None], command[None], np.array([self.phase]))
            if self.history is not None:
                obs = self.history.observe(obs)
            self.phase = float(self.clock.advance(self.phase, command, self.policy.dt))
            if self.twist_pub is not None:
                out = TwistStamped()
                out.header.stamp = time_msg(stamp)
                out.header.frame_id = "base_link"
                out.twist.linear.x, out.twist.linear.y, out.twist.angular.z = (float(v) for v in command)
                self.twist_pub.publish(out)
        else:
            obs = build_observations(position[None], velocity[None], self.last_target[None], quat[None], gyro[None],
                                     self.clip, np.array([frame]))
        target = self.policy.act(obs)[0]
        target = np.clip(target, self.lower, self.upper)
        target = np.clip(target, self.last_target - self.max_step, self.last_target + self.max_step)
        self.last_target = target
        self.command_pub.publish(float64_array_msg(target))
        if self.trajectory_pub is not None:
            msg = JointTrajectory()
            msg.header.stamp = time_msg(stamp)
            msg.joint_names = list(self.joint_names)
            point = JointTrajectoryPoint()
            point.positions = target.tolist()
            point.time_from_start = duration_msg(int(round(self.policy.dt * NS_PER_S)))
            msg.points = [point]
            self.trajectory_pub.publish(msg)
        self.steps += 1

    def summary(self) -> str:
        text = f"published {self.steps} PD-target commands"
        if self.velocity:
            text += (f"; {self.twists} Twist messages received, {self.clipped} steps clipped into the box, the "
                     f"watchdog zeroed the command {self.watchdog_trips} times")
        return text


def run_policy_node(options: PolicyOptions, args: list[str] | None = None) -> None:
    context = rclpy.Context()
    rclpy.init(args=args, context=context)
    node = None
    try:
        node = PolicyNode(options, context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        while rclpy.ok(context=context) and not node.finished:
            executor.spin_once(timeout_sec=0.1)
        node.get_logger().info(node.summary())
    except (KeyboardInterrupt, ExternalShutdownException):
        if node is not None:
            node.get_logger().info(node.summary())
    finally:
        if node is not None:
            node.destroy_node()
        if context.ok():
            rclpy.shutdown(context=context)


def main(args: list[str] | None = None) -> int:
    """Console script ``akd_policy`` (``akd_policy --ros-args -p policy:=P.onnx -p use_sim_time:=true``)."""
    stop_on_sigint()
    try:
        run_policy_node(PolicyOptions(), sys.argv if args is None else args)
    except AKDError as exc:
        print(f"{NODE_NAME}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
