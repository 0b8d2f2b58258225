"""The ``akd_replay`` node: a run directory as live ROS 2 topics.

Publishes, from ``RUN/tracked.npz`` (or ``RUN/reference.npz`` when the run is not tracked yet):

==========================================  ==================================  ==========================
topic (parameter)                           type                                 content
==========================================  ==================================  ==========================
/robot_description (robot_description_topic) std_msgs/String, transient_local   RUN/robot.urdf, file:// meshes
/joint_states (joint_states_topic)           sensor_msgs/JointState              tracked pos / vel / torque
/joint_trajectory_controller/joint_trajectory trajectory_msgs/JointTrajectory    PD targets, pos + vel, once
/position_controller/commands                std_msgs/Float64MultiArray          PD target per sample
/effort_controller/commands                  std_msgs/Float64MultiArray          torque per sample
/akd/root_odom (root_odom_topic)             nav_msgs/Odometry                   root pose, body-frame twist
/akd/terrain (terrain_topic)                 visualization_msgs/Marker,          the run's terrain, once
                                             transient_local
==========================================  ==================================  ==========================

The terrain (``akd_core.model.terrain.run_terrain``) is a TRIANGLE_LIST mesh in ``odom_frame`` (the frame of the
root odometry) over the clip's root path grown by 1 m, resampled as a coarser height grid above
``terrain_max_triangles``; flat ground publishes a DELETE of that marker instead (clears an earlier replay's mesh).

Sample ``k`` is published at ``t0 + k * period`` with ``period = dt / rate_scale`` (or ``1 / rate``):
the index comes from elapsed steady time, so the stream never drifts, and a late tick publishes
every sample that has come due, in order (none is skipped). Stamps are the samples' scheduled times.

Safety: before anything is published, every command (PD-target positions, their velocities,
torques) is checked against the URDF limits (:mod:`akd_ros.safety`); a violation stops the node
with a :class:`~akd_core.io.errors.JointLimitError` (exit code 2) unless ``allow_unsafe`` is true.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import rclpy
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker

from akd_core.io.errors import AKDError, ConfigError, MotionError
from akd_core.io.rundir import ROBOT_URDF, RunDir
from akd_core.io.signals import stop_on_sigint
from akd_core.model.robot import load_urdf
from akd_core.model.terrain import run_terrain
from akd_ros.convert import (
    LOOP_RETURN_SPEED_RATIO,
    NS_PER_S,
    TERRAIN_MAX_TRIANGLES,
    ReplayData,
    float64_array_msg,
    joint_state_msg,
    joint_trajectory_msg,
    load_replay_data,
    odometry_msg,
    parse_remap,
    robot_description_xml,
    terrain_delete_msg,
    terrain_marker_msg,
    terrain_mesh_around,
    time_msg,
    with_loop_return,
)
from akd_ros.safety import JointLimits, command_violations, refuse_unsafe

NODE_NAME = "akd_replay"
TOPIC_PARAMETERS = {
    "robot_description_topic": "/robot_description",
    "joint_states_topic": "/joint_states",
    "trajectory_topic": "/joint_trajectory_controller/joint_trajectory",
    "position_commands_topic": "/position_controller/commands",
    "effort_commands_topic": "/effort_controller/commands",
    "root_odom_topic": "/akd/root_odom",
    "terrain_topic": "/akd/terrain",
}
WAIT_POLL_S = 0.01


@dataclass
class ReplayOptions:
    """Everything a replay needs; each field is also a ROS parameter of the node (same name)."""

    run_dir: str = ""
    source: str = "tracked"  # tracked | reference (tracked falls back to reference when absent)
    rate: float = 0.0  # Hz; > 0 overrides rate_scale
    rate_scale: float = 1.0  # 2.0 = twice as fast as recorded
    loop: bool = False
    joint_name_remap: list[str] = field(default_factory=list)  # "urdf_name:controller_name"
    publish_trajectory: bool = True
    publish_description: bool = True
    allow_unsafe: bool = False
    odom_frame: str = "odom"  # root odometry and terrain marker frame (the run's world frame)
    terrain_max_triangles: int = TERRAIN_MAX_TRIANGLES  # above: the terrain mesh is resampled coarser
    qos_depth: int = 100
    wait_for_subscribers: int = 0  # start streaming once each wait_topics topic has this many subscribers
    wait_topics: list[str] = field(default_factory=list)  # empty: the joint_states topic
    wait_timeout: float = 30.0  # s; then start anyway (with a warning)
    linger: float = 1.0  # s to keep the node alive after the last sample (late robot_description readers)
    topics: dict[str, str] = field(default_factory=lambda: dict(TOPIC_PARAMETERS))  # "" disables a stream

    def period_s(self, dt: float) -> float:
        """Seconds between published samples."""
        if self.rate > 0:
            return 1.0 / self.rate
        if not self.rate_scale > 0:
            raise ConfigError(f"rate_scale must be positive, got {self.rate_scale}")
        return dt / self.rate_scale


def parameter_names(skip: tuple[str, ...] = ()) -> list[str]:
    """Names of the ROS parameters :func:`declare_replay_parameters` declares."""
    names = [f.name for f in fields(ReplayOptions) if f.name != "topics" and f.name not in skip]
    return names + [t for t in TOPIC_PARAMETERS if t not in skip]


def declare_replay_parameters(node: Node, defaults: ReplayOptions, skip: tuple[str, ...] = ()) -> None:
    """Declare every ReplayOptions field (topics flattened to ``*_topic``) as a ROS parameter."""
    for f in fields(ReplayOptions):
        if f.name in skip or f.name == "topics":
            continue
        value = getattr(defaults, f.name)
        if isinstance(value, list):
            node.declare_parameter(f.name, Parameter.Type.STRING_ARRAY)
        else:
            node.declare_parameter(f.name, value)
    for name, topic in defaults.topics.items():
        node.declare_parameter(name, topic)


def replay_options_from_parameters(node: Node, defaults: ReplayOptions, skip: tuple[str, ...] = ()) -> ReplayOptions:
    values: dict[str, Any] = {}
    for f in fields(ReplayOptions):
        if f.name in skip or f.name == "topics":
            continue
        default = getattr(defaults, f.name)
        if isinstance(default, list):
            values[f.name] = list(node.get_parameter_or(f.name, Parameter(f.name, value=default)).value)
        else:
            values[f.name] = node.get_parameter(f.name).value
    values["topics"] = {name: str(node.get_parameter(name).value) for name in defaults.topics}
    return ReplayOptions(**{**vars(defaults), **values})


def _qos(depth: int, latched: bool = False) -> QoSProfile:
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)


def check_replay_safety(data: ReplayData, limits: JointLimits, options: ReplayOptions, source: str,
                        warn: Callable[[str], None]) -> None:
    """Refuse (JointLimitError) any command outside the URDF limits, unless options.allow_unsafe."""
    violations = command_violations(limits, data.dt, data.pd_targets, data.pd_target_vel,
                                    data.joint_torques if options.topics.get("effort_commands_topic") else None,
                                    loop=options.loop)
    if not violations:
        return
    if not options.allow_unsafe:
        refuse_unsafe(violations, source, data.dt)
    for violation in violations:
        warn(f"allow_unsafe is set: publishing anyway: {violation.describe(data.dt)}")


class RunReplayer:
    """The replay logic, attached to any node (``akd_replay`` or ``akd_generator``).

    Construction loads and checks the run and publishes /robot_description; :meth:`begin` waits for
    subscribers (if asked) and starts the stream; :attr:`finished` turns true after the last sample
    (never, when looping); :meth:`close` releases the timers and publishers.
    """

    def __init__(self, node: Node, options: ReplayOptions, on_finished: Callable[[], None] | None = None):
        self.node = node
        self.options = options
        self.on_finished = on_finished
        self.finished = False
        run = RunDir(Path(options.run_dir)) if options.run_dir else None
        if run is None:
            raise ConfigError("parameter run_dir is empty; pass the run directory, e.g. "
                              "`akd_replay --ros-args -p run_dir:=runs/trot`")
        urdf_path = run.require(ROBOT_URDF, f"akd gait --robot ROBOT --prompt TEXT --out {run.path}")
        robot = load_urdf(urdf_path)
        self.data = data = load_replay_data(run, options.source)
        if sorted(data.joint_names) != sorted(robot.joint_names):
            raise MotionError(f"{run.path}: the {data.source} motion's joints {data.joint_names} are not the "
                              f"actuated joints of {urdf_path} ({robot.joint_names}); re-create the run")
        self.period_s = options.period_s(data.dt)
        self.period_ns = int(round(self.period_s * NS_PER_S))
        limits = JointLimits.from_robot(robot, data.joint_names)
        if options.loop:
            data, extra = with_loop_return(data, limits.velocity)
            self.data = data
            if extra:
                node.get_logger().info(
                    f"looping: each cycle ends with a {extra}-sample return ({extra * data.dt:.2f} s at <= "
                    f"{LOOP_RETURN_SPEED_RATIO:g} x the velocity limits) from the last sample to the first; "
                    f"the root holds its pose meanwhile")
        check_replay_safety(data, limits, options, str(run.path), node.get_logger().warning)
        remap = parse_remap(options.joint_name_remap, data.joint_names)
        self.joint_names = [remap.get(n, n) for n in data.joint_names]
        self.root_link = robot.root_link
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._lock = threading.Lock()
        self._timers: list[Any] = []
        self._publishers = self._create_publishers()
        if self.options.publish_description and self._topic("robot_description_topic"):
            description = robot_description_xml(urdf_path.read_text(), remap, str(urdf_path))
            self._publishers["robot_description_topic"].publish(String(data=description))
            node.get_logger().info(f"published {self._topic('robot_description_topic')} "
                                   f"({len(description)} chars, transient_local)")
        if "terrain_topic" in self._publishers:
            self._publish_terrain(run)
        # built once: thousands of points take tens of ms, which must not delay the first sample
        self._trajectory = (joint_trajectory_msg(self.joint_names, data.pd_targets, data.pd_target_vel,
                                                 self.period_ns) if "trajectory_topic" in self._publishers else None)
        self._next = 0  # index of the next sample to publish
        self._t0 = 0.0  # steady seconds at which sample 0 of the current cycle is due
        self._stamp0_ns = 0  # ROS time (node clock) of sample 0 of the current cycle
        self._wait_start = 0.0

    # -- setup ----------------------------------------------------------------
    def _topic(self, key: str) -> str:
        return self.options.topics.get(key, "")

    def _create_publishers(self) -> dict[str, Any]:
        depth = max(1, int(self.options.qos_depth))
        wanted = {
            "robot_description_topic": (String, _qos(1, latched=True), self.options.publish_description),
            "joint_states_topic": (JointState, _qos(depth), True),
            "trajectory_topic": (JointTrajectory, _qos(10), self.options.publish_trajectory),
            "position_commands_topic": (Float64MultiArray, _qos(depth), True),
            "effort_commands_topic": (Float64MultiArray, _qos(depth), self.data.joint_torques is not None),
            "root_odom_topic": (Odometry, _qos(depth), True),
            "terrain_topic": (Marker, _qos(1, latched=True), True),
        }
        publishers = {}
        for key, (msg_type, qos, enabled) in wanted.items():
            if enabled and self._topic(key):
                publishers[key] = self.node.create_publisher(msg_type, self._topic(key), qos)
        return publishers

    def _publish_terrain(self, run: RunDir) -> None:
        """The run's terrain as a latched Marker, once: a triangle mesh, or a DELETE for flat ground."""
        log, topic, frame = self.node.get_logger(), self._topic("terrain_topic"), self.options.odom_frame
        try:
            terrain = run_terrain(run)
        except AKDError as exc:  # the terrain only shows the ground: the motion streams still go out
            log.warning(f"not publishing {topic}: {exc}")
            return
        if terrain.is_flat:
            self._publishers["terrain_topic"].publish(terrain_delete_msg(frame))
            log.info(f"published {topic}: flat ground, a DELETE of the terrain marker (transient_local)")
            return
        mesh = terrain_mesh_around(terrain, self.data.root_pos,
                                   max_triangles=max(2, int(self.options.terrain_max_triangles)))
        self._publishers["terrain_topic"].publish(terrain_marker_msg(mesh, frame))
        resampled = (f", resampled on a {mesh.resampled_cell:.3f} m grid from {mesh.full_triangles}"
                     if mesh.resampled_cell is not None else "")
        log.info(f"published {topic}: {terrain.kind} terrain, {mesh.num_triangles} triangles{resampled} over x "
                 f"[{mesh.x_range[0]:.2f}, {mesh.x_range[1]:.2f}] y [{mesh.y_range[0]:.2f}, {mesh.y_range[1]:.2f}] m "
                 f"in {frame} (transient_local)")

    # -- run --------------------------------------------------------------------
    def begin(self) -> None:
        """Start streaming now, or once every wait_topics topic has wait_for_subscribers subscribers."""
        if self.options.wait_for_subscribers <= 0:
            self._start()
            return
        by_topic = {self._topic(k): p for k, p in self._publishers.items()}
        wait_topics = list(self.options.wait_topics) or [self._topic("joint_states_topic")]
        missing = [t for t in wait_topics if t not in by_topic]
        if missing:
            raise ConfigError(f"wait_topics {missing} are not published by this replay "
                              f"(published: {sorted(by_topic)})")
        self._wait_topics = wait_topics
        self._wait_pubs = [by_topic[t] for t in wait_topics]
        self._wait_start = time.monotonic()
        self._wait_timer = self.node.create_timer(WAIT_POLL_S, self._poll_subscribers, clock=self._steady)
        self._timers.append(self._wait_timer)

    def _poll_subscribers(self) -> None:
        ready = all(p.get_subscription_count() >= self.options.wait_for_subscribers for p in self._wait_pubs)
        timed_out = time.monotonic() - self._wait_start > self.options.wait_timeout
        if not (ready or timed_out):
            return
        if timed_out and not ready:
            self.node.get_logger().warning(
                f"waited {self.options.wait_timeout:.1f} s for {self.options.wait_for_subscribers} subscriber(s) "
                f"on {self._wait_topics}; starting anyway")
        self._wait_timer.cancel()
        self._start()

    def _start(self) -> None:
        data = self.data
        self.node.get_logger().info(
            f"replaying {data.num_samples} {data.source} samples of {len(self.joint_names)} joints at "
            f"{1.0 / self.period_s:.2f} Hz{' (looping)' if self.options.loop else ''}")
        self._t0 = time.monotonic()
        self._stamp0_ns = self.node.get_clock().now().nanoseconds
        self._next = 0
        self._publish_trajectory()
        self._publish_due()
        timer = self.node.create_timer(self.period_s, self._publish_due, clock=self._steady)
        self._timers.append(timer)

    def _publish_trajectory(self) -> None:
        pub = self._publishers.get("trajectory_topic")
        if pub is not None and self._trajectory is not None:
            self._trajectory.header.stamp = time_msg(self._stamp0_ns)
            pub.publish(self._trajectory)

    def _publish_due(self) -> None:
        """Publish every sample whose time has come, in order (catching up after a late tick)."""
        with self._lock:  # close() may run on another executor thread (generator node)
            if not self.finished:
                self._publish_due_locked()

    def _publish_due_locked(self) -> None:
        n = self.data.num_samples
        elapsed = time.monotonic() - self._t0
        due = min(int(math.floor(elapsed / self.period_s + 1e-6)) + 1, n)
        while self._next < due:
            self._publish_sample(self._next)
            self._next += 1
        if self._next < n:
            return
        if self.options.loop:
            self._t0 += n * self.period_s
            self._stamp0_ns += n * self.period_ns
            self._next = 0
            self._publish_trajectory()
            return
        self.finished = True
        for timer in self._timers:
            timer.cancel()
        self.node.get_logger().info(f"replay finished: {n} samples published")
        if self.on_finished is not None:
            self.on_finished()

    def _publish_sample(self, k: int) -> None:
        data, pubs = self.data, self._publishers
        stamp = self._stamp0_ns + k * self.period_ns
        pubs["joint_states_topic"].publish(joint_state_msg(
            self.joint_names, data.joint_pos[k], data.joint_vel[k],
            None if data.joint_effort is None else data.joint_effort[k], stamp))
        if "position_commands_topic" in pubs:
            pubs["position_commands_topic"].publish(float64_array_msg(data.pd_targets[k]))
        if "effort_commands_topic" in pubs:
            pubs["effort_commands_topic"].publish(float64_array_msg(data.joint_torques[k]))
        if "root_odom_topic" in pubs:
            pubs["root_odom_topic"].publish(odometry_msg(
                data.root_pos[k], data.root_quat[k], data.root_lin_vel[k], data.root_ang_vel[k], stamp,
                self.options.odom_frame, self.root_link))

    def close(self) -> None:
        with self._lock:
            self.finished = True
        for timer in self._timers:
            timer.cancel()
            self.node.destroy_timer(timer)
        for pub in self._publishers.values():
            self.node.destroy_publisher(pub)
        self._timers, self._publishers = [], {}


class ReplayNode(Node):
    """``akd_replay``: declares the ReplayOptions parameters and replays ``run_dir`` once (or in a loop)."""

    def __init__(self, defaults: ReplayOptions | None = None, **node_kwargs: Any):
        super().__init__(NODE_NAME, **node_kwargs)
        defaults = defaults or ReplayOptions()
        declare_replay_parameters(self, defaults)
        self.options = replay_options_from_parameters(self, defaults)
        self.replayer = RunReplayer(self, self.options)
        self.replayer.begin()


def spin_replay(node: ReplayNode, executor: SingleThreadedExecutor) -> None:
    """Spin until the replay finished, then ``linger`` seconds more (late robot_description readers)."""
    while rclpy.ok(context=node.context) and not node.replayer.finished:
        executor.spin_once(timeout_sec=0.1)
    end = time.monotonic() + max(0.0, node.options.linger)
    while rclpy.ok(context=node.context) and time.monotonic() < end:
        executor.spin_once(timeout_sec=min(0.1, max(0.0, end - time.monotonic())))


def run_replay_node(options: ReplayOptions, args: list[str] | None = None) -> None:
    """Run one replay node in its own rclpy context until it finishes; AKDError propagates to the caller.

    ``options`` are the parameter defaults; ``--ros-args -p name:=value`` in ``args`` override them.
    """
    context = rclpy.Context()
    rclpy.init(args=args, context=context)
    node = None
    try:
        node = ReplayNode(options, context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        spin_replay(node, executor)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        if context.ok():
            rclpy.shutdown(context=context)


def replay_run(run_dir: str | Path, rate: float | None = None, loop: bool = False, rate_scale: float = 1.0,
               allow_unsafe: bool = False, joint_name_remap: list[str] | None = None, source: str = "tracked",
               args: list[str] | None = None, **options: Any) -> int:
    """Replay ``run_dir`` as live topics (what `akd ros replay RUN [--rate HZ] [--loop]` calls).

    rate: samples per second (None: the run's own rate times ``rate_scale``). Further keyword options are
    ReplayOptions fields (e.g. ``wait_for_subscribers=1``, ``trajectory_topic="/jtc/joint_trajectory"``).
    Returns 0; raises AKDError (e.g. JointLimitError for an unsafe run) with a message for the user.
    """
    topics = dict(TOPIC_PARAMETERS)
    for key in list(options):
        if key in TOPIC_PARAMETERS:
            topics[key] = str(options.pop(key))
    unknown = sorted(set(options) - {f.name for f in fields(ReplayOptions)})
    if unknown:
        raise ConfigError(f"unknown replay options {unknown}; known: {[f.name for f in fields(ReplayOptions)]}")
    defaults = ReplayOptions(run_dir=str(run_dir), rate=float(rate or 0.0), rate_scale=float(rate_scale),
                             loop=bool(loop), allow_unsafe=bool(allow_unsafe),
                             joint_name_remap=list(joint_name_remap or []), source=source, topics=topics, **options)
    run_replay_node(defaults, args)
    return 0


def main(args: list[str] | None = None) -> int:
    """Console script ``akd_replay`` (``akd_replay --ros-args -p run_dir:=RUN [-p loop:=true] ...``)."""
    stop_on_sigint()
    try:
        run_replay_node(ReplayOptions(), sys.argv if args is None else args)
    except AKDError as exc:
        print(f"{NODE_NAME}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
