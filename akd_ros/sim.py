"""The ``akd_sim`` node: the robot in MuJoCo (AKD's tracking model), driven over ROS 2 as ros2_control drives a robot.

It steps MuJoCo at its own step (``sim_dt``), and every control period (``1/control_hz``) publishes:

====================  ==============================  ===================================================
topic (parameter)     type                            content
====================  ==============================  ===================================================
/clock                rosgraph_msgs/Clock             simulated time (nodes with ``use_sim_time`` follow it)
/joint_states         sensor_msgs/JointState          joint positions, velocities, actuator torques
/imu                  sensor_msgs/Imu                 base orientation (xyzw), angular velocity and linear
                                                      acceleration (specific force) in the base frame
/odom                 nav_msgs/Odometry               base pose in ``odom``, twist in the base frame
/tf                   tf2_msgs/TFMessage              odom -> base (only where tf2_msgs is installed: the
                                                      pip wheels lack it; /odom carries the same pose)
====================  ==============================  ===================================================

It accepts PD targets as ros2_control's controllers take them:

- ``/joint_trajectory_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory, joints matched by name): the
  PD target at simulated time t is the trajectory sampled at t (linear between points; ``header.stamp`` zero = start
  now, else its start in simulated time), held at the last point;
- ``/position_controller/commands`` (std_msgs/Float64MultiArray, one value per joint in the URDF's actuated order,
  as forward_command_controller): the PD target at the end of the next control period; the target moves linearly to
  it over the period (AKD's tracking and policies assume exactly this). A streamed command replaces a trajectory.

The PD law is the tracking's (``tau = clamp(kp (target - q) - kd qdot, effort)``, position actuators).
Safety: a command outside the URDF limits (a position outside [lower, upper], or a step faster than the velocity
limit: from the streamed command before it, from the current target for a stream's first command or after a reset or a
trajectory; for a trajectory, any point or any step between points) is dropped, the last valid targets are held, and
the violation is logged: never applied. (A streamed command is checked against the one before it, not against the
target applied, so that one arriving a period late, just before the next, is not taken for a jump: the latest
applies.)

Start: ``run_dir`` starts from ``tracked.npz``'s first state and target with the run's physics (kp, kd, armature,
contact, control period and step: replaying its PD targets reproduces it); ``policy`` (an ONNX export) from a clip's
first state with the policy's physics; otherwise the robot's default pose set down on the ground with the tracking's
default gains. ``lockstep``: the simulation advances one control period only when a new command has arrived for it (or
a trajectory covers it), so a controller in another process runs in lock-step however slow either side is (after
``lockstep_timeout`` seconds it steps on with the held target and counts a missed command). Otherwise it runs at
``real_time_factor`` times real time (0: as fast as it can).

Reset: the service ``~/reset`` (std_srvs/Trigger, ``/akd_sim/reset``) puts the robot back in its start state and PD
target before the next control period (a streamed command or trajectory not yet applied is dropped); simulated time
runs on. Each fall is logged ("the robot fell at t = ..."; again after a reset), and the final summary counts the
falls and resets.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
from nav_msgs.msg import Odometry
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from akd_core.io.errors import AKDError, ConfigError, MotionError
from akd_core.io.rundir import ROBOT_URDF, TRACKED, RunDir
from akd_core.io.signals import stop_on_sigint
from akd_core.learn.env import SimWorld, WorldPhysics
from akd_core.model.load import load_robot
from akd_core.model.robot import Robot, load_urdf
from akd_core.model.spatial import quat_to_matrix
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.physics.engines.base import BodyState
from akd_core.physics.params import KP_PER_KG_MPC, ContactParams, default_physics
from akd_core.physics.targets import start_pose
from akd_ros.convert import NS_PER_S, joint_state_msg, odometry_msg, time_msg
from akd_ros.safety import JointLimits, position_violations, velocity_violations

NODE_NAME = "akd_sim"
DEFAULT_CONTROL_HZ = 50.0
DEFAULT_SIM_DT = 2e-3
GRAVITY = np.array([0.0, 0.0, -9.81])
TOPIC_PARAMETERS = {
    "clock_topic": "/clock",
    "joint_states_topic": "/joint_states",
    "imu_topic": "/imu",
    "odom_topic": "/odom",
    "tf_topic": "/tf",
    "trajectory_topic": "/joint_trajectory_controller/joint_trajectory",
    "position_commands_topic": "/position_controller/commands",
}


@dataclass
class SimOptions:
    """The node's settings; each field is also a ROS parameter of the same name (topics flattened)."""

    robot: str = ""  # built-in name or URDF path (default: RUN/robot.urdf with run_dir)
    package_paths: list[str] = field(default_factory=list)
    run_dir: str = ""
    policy: str = ""  # ONNX policy export (start state and physics)
    clip: int = 0
    control_hz: float = 0.0  # 0: the run's / policy's, else 50
    lockstep: bool = False
    lockstep_timeout: float = 2.0
    real_time_factor: float = 1.0
    duration: float = 0.0  # simulated seconds; 0 = until Ctrl-C
    wait_for_subscribers: int = 0  # start once /joint_states has this many subscribers
    wait_timeout: float = 30.0
    odom_frame: str = "odom"
    base_frame: str = ""  # default: the robot's root link
    topics: dict[str, str] = field(default_factory=lambda: dict(TOPIC_PARAMETERS))


@dataclass
class SimSetup:
    """What the simulation starts from."""

    robot: Robot
    physics: WorldPhysics
    state: BodyState
    target: np.ndarray  # (J,)
    source: str


def _qos(depth: int = 100) -> QoSProfile:
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def resolve_setup(options: SimOptions) -> SimSetup:
    """Robot, physics and start state from a run, a policy export, or the robot alone (module docstring)."""
    if options.run_dir:
        run = RunDir(Path(options.run_dir))
        robot = (load_robot(options.robot, options.package_paths) if options.robot
                 else load_urdf(run.require(ROBOT_URDF, f"akd run --robot ROBOT --prompt TEXT --out {run.path}")))
        tracked = TrackedMotion.load(run.require(TRACKED, f"akd track {run.path}"))
        if list(tracked.joint_names) != list(robot.joint_names):
            raise MotionError(f"{run.path}: tracked.npz's joints differ from robot '{robot.name}''s actuated joints")
        metrics = ((run.manifest().get("stages") or {}).get("track") or {}).get("metrics") or {}
        defaults = default_physics(robot, kp=tracked.kp, kd=tracked.kd)
        armature = metrics.get("armature")
        contact = dict(vars(ContactParams()))
        contact.update({k: float(v) for k, v in (metrics.get("contact") or {}).items() if k in contact})
        dt = float(tracked.dt)
        sim_dt = float(metrics.get("sim_dt_s") or dt / max(1, math.ceil(dt / DEFAULT_SIM_DT - 1e-9)))
        physics = WorldPhysics(kp=np.asarray(tracked.kp, np.float64), kd=np.asarray(tracked.kd, np.float64),
                               armature=defaults.armature if armature is None else np.asarray(armature, np.float64),
                               contact=contact, dt=dt, sim_dt=sim_dt,
                               integrator=str(metrics.get("integrator") or "implicitfast"))
        state = BodyState(tracked.root_pos[0], tracked.root_quat[0], tracked.joint_pos[0], tracked.root_lin_vel[0],
                          tracked.root_ang_vel[0], tracked.joint_vel[0]).astype(np.float64)
        return SimSetup(robot, physics, state, tracked.pd_targets[0].astype(np.float64), f"run {run.path}")
    if not options.robot:
        raise ConfigError("akd_sim needs a robot: parameter robot:=NAME_OR_URDF (or run_dir:=RUN)")
    robot = load_robot(options.robot, options.package_paths)
    if options.policy:
        from akd_core.learn.onnx_export import OnnxPolicy

        policy = OnnxPolicy(options.policy)
        if policy.joint_names != list(robot.joint_names):
            raise MotionError(f"{options.policy} was trained for other joints than robot '{robot.name}''s "
                              f"{robot.joint_names}")
        if not 0 <= options.clip < len(policy.start_states):
            raise ConfigError(f"clip {options.clip} is out of range: {options.policy} holds "
                              f"{len(policy.start_states)} clips")
        s = policy.start_states[options.clip]
        physics = WorldPhysics.from_dict(policy.meta["physics"])
        state = BodyState(s["root_pos"], s["root_quat"], s["joint_pos"], s["root_lin_vel"], s["root_ang_vel"],
                          s["joint_vel"])
        return SimSetup(robot, physics, state, s["actions"], f"policy {options.policy} clip {options.clip}")
    hz = options.control_hz or DEFAULT_CONTROL_HZ
    params = default_physics(robot, kp_per_kg=KP_PER_KG_MPC)
    q0 = robot.default_joint_pos()
    pose = Motion(fps=hz, joint_names=robot.joint_names, joint_pos=q0[None], root_pos=np.zeros((1, 3)),
                  root_quat=np.array([[0.0, 0.0, 0.0, 1.0]]))
    root, _ = start_pose(robot, pose)
    physics = WorldPhysics(kp=params.kp, kd=params.kd, armature=params.armature, contact=dict(vars(params.contact)),
                           dt=1.0 / hz, sim_dt=(1.0 / hz) / max(1, math.ceil(1.0 / (hz * DEFAULT_SIM_DT) - 1e-9)))
    state = BodyState(root, np.array([0.0, 0.0, 0.0, 1.0]), q0, np.zeros(3), np.zeros(3), np.zeros(robot.num_dofs))
    return SimSetup(robot, physics, state, q0.astype(np.float64), "the default pose")


class TrajectoryCommand:
    """A JointTrajectory in the robot's joint order: times (P,) ns from its start, positions (P, J)."""

    def __init__(self, start_ns: int, times_ns: np.ndarray, positions: np.ndarray, hold: np.ndarray):
        self.start_ns, self.times_ns, self.positions, self.hold = start_ns, times_ns, positions, hold

    def sample(self, t_ns: int) -> np.ndarray:
        """The target (J,) at simulated time ``t_ns``: linear between points, from the held target to the first
        point before it, the last point after the end."""
        tau = t_ns - self.start_ns
        times = np.r_[0, self.times_ns] if self.times_ns[0] > 0 else self.times_ns
        values = np.vstack([self.hold, self.positions]) if self.times_ns[0] > 0 else self.positions
        if tau <= times[0]:
            return values[0].copy()
        if tau >= times[-1]:
            return values[-1].copy()
        i = int(np.searchsorted(times, tau, side="right") - 1)
        frac = (tau - times[i]) / (times[i + 1] - times[i])
        return values[i] + (values[i + 1] - values[i]) * frac

    def covers(self, t_ns: int) -> bool:
        return t_ns - self.start_ns <= int(self.times_ns[-1])


def parameter_names() -> list[str]:
    """Names of the ROS parameters the node declares."""
    return [f.name for f in fields(SimOptions) if f.name != "topics"] + list(TOPIC_PARAMETERS)


class SimNode(Node):
    """``akd_sim`` (module docstring)."""

    def __init__(self, defaults: SimOptions | None = None, **node_kwargs: Any):
        super().__init__(NODE_NAME, **node_kwargs)
        defaults = defaults or SimOptions()
        for f in fields(SimOptions):
            if f.name == "topics":
                continue
            value = getattr(defaults, f.name)
            if isinstance(value, list):
                self.declare_parameter(f.name, Parameter.Type.STRING_ARRAY)
            else:
                self.declare_parameter(f.name, value)
        for name, topic in defaults.topics.items():
            self.declare_parameter(name, topic)
        values = {}
        for f in fields(SimOptions):
            if f.name == "topics":
                continue
            default = getattr(defaults, f.name)
            param = self.get_parameter_or(f.name, Parameter(f.name, value=default))
            values[f.name] = list(param.value or []) if isinstance(default, list) else param.value
        values["topics"] = {name: str(self.get_parameter(name).value) for name in defaults.topics}
        self.options = options = SimOptions(**values)
        self.setup = setup = resolve_setup(options)
        self.robot, self.physics = setup.robot, setup.physics
        self.world = SimWorld(self.robot, self.physics)
        self.state = self.world.reset(setup.state, setup.target)
        self.reset_requested = False
        self.falls = self.resets = 0
        self.limits = JointLimits.from_robot(self.robot)
        self.joint_names = list(self.robot.joint_names)
        self.period_ns = int(round(self.physics.dt * NS_PER_S))
        self.frame = 0
        self.base_frame = options.base_frame or self.robot.root_link
        self.trajectory: TrajectoryCommand | None = None
        self.pending: np.ndarray | None = None  # a streamed command not applied yet
        self.accepted: np.ndarray | None = None  # the last streamed command that passed the checks
        self.applied = self.dropped = self.missed = 0
        self.prev_lin_vel = np.asarray(self.state.root_lin_vel, np.float64)
        topics = options.topics
        self.pubs: dict[str, Any] = {}
        for key, msg_type in (("clock_topic", Clock), ("joint_states_topic", JointState), ("imu_topic", Imu),
                              ("odom_topic", Odometry)):
            if topics.get(key):
                self.pubs[key] = self.create_publisher(msg_type, topics[key], _qos(10 if key == "clock_topic"
                                                                                   else 100))
        self.tf_message = None
        if topics.get("tf_topic"):
            try:
                from geometry_msgs.msg import TransformStamped
                from tf2_msgs.msg import TFMessage

                self.tf_message = (TFMessage, TransformStamped)
                self.pubs["tf_topic"] = self.create_publisher(TFMessage, topics["tf_topic"], _qos(100))
            except ImportError:
                self.get_logger().info("tf2_msgs is not installed (the pip wheels lack it): /tf is not published; "
                                       f"{topics.get('odom_topic')} carries {options.odom_frame} -> {self.base_frame}")
        if topics.get("trajectory_topic"):
            self.create_subscription(JointTrajectory, topics["trajectory_topic"], self._on_trajectory, _qos(10))
        if topics.get("position_commands_topic"):
            self.create_subscription(Float64MultiArray, topics["position_commands_topic"], self._on_command,
                                     _qos(100))
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.get_logger().info(
            f"simulating '{self.robot.name}' ({len(self.joint_names)} joints) from {setup.source}: control "
            f"{1.0 / self.physics.dt:g} Hz, MuJoCo step {self.physics.sim_dt * 1e3:g} ms"
            f"{self._pace_text()}")

    def _pace_text(self) -> str:
        if self.options.lockstep:
            return ", lockstep"
        rtf = self.options.real_time_factor
        return f", {rtf:g} x real time" if rtf > 0 else ", as fast as it can"

    # -- commands ---------------------------------------------------------------
    def now_ns(self) -> int:
        return self.frame * self.period_ns

    def _on_command(self, msg: Float64MultiArray) -> None:
        values = np.asarray(msg.data, dtype=np.float64)
        if values.shape != (len(self.joint_names),):
            self._drop(f"a command with {values.size} values (expected {len(self.joint_names)}, in the order "
                       f"{self.joint_names})")
            return
        # the stream's own rate: the step from the command before it (a command that comes a period late, together
        # with the next, is not a jump), or from the current target for a stream's first command
        previous = self.world.last_target if self.accepted is None else self.accepted
        found = position_violations(values[None], self.limits, "streamed PD target")
        found += velocity_violations(((values - previous) / self.physics.dt)[None], self.limits,
                                     "streamed PD target step rate")
        if found:
            self._drop("; ".join(v.describe() for v in found[:3]))
            return
        self.pending = self.accepted = values
        self.trajectory = None

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        index = {n: i for i, n in enumerate(msg.joint_names)}
        missing = [n for n in self.joint_names if n not in index]
        if missing or not msg.points:
            self._drop(f"a JointTrajectory {'without points' if not msg.points else f'lacking joints {missing}'}")
            return
        order = [index[n] for n in self.joint_names]
        positions = np.asarray([[p.positions[i] for i in order] for p in msg.points], dtype=np.float64)
        times = np.asarray([p.time_from_start.sec * NS_PER_S + p.time_from_start.nanosec for p in msg.points],
                           dtype=np.int64)
        if np.any(np.diff(times) <= 0):
            self._drop("a JointTrajectory whose time_from_start does not increase")
            return
        found = position_violations(positions, self.limits, "trajectory position")
        if len(times) > 1:
            rates = np.diff(positions, axis=0) / (np.diff(times)[:, None] / NS_PER_S)
            found += velocity_violations(rates, self.limits, "trajectory step rate")
        if found:
            self._drop("; ".join(v.describe() for v in found[:3]))
            return
        stamp = msg.header.stamp.sec * NS_PER_S + msg.header.stamp.nanosec
        self.trajectory = TrajectoryCommand(stamp if stamp > 0 else self.now_ns(), times, positions,
                                            self.world.last_target)
        self.pending = self.accepted = None
        self.get_logger().info(f"following a trajectory of {len(times)} points over {times[-1] / NS_PER_S:.2f} s")

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.reset_requested = True
        response.success = True
        response.message = (f"the robot returns to its start state ({self.setup.source}) before the next control "
                            "period")
        return response

    def reset(self) -> None:
        """Back to the start state and target (the service's request, taken between control periods)."""
        self.state = self.world.reset(self.setup.state, self.setup.target)
        self.prev_lin_vel = np.asarray(self.state.root_lin_vel, np.float64)
        self.pending, self.accepted, self.trajectory, self.reset_requested = None, None, None, False
        self.resets += 1
        self.get_logger().info(f"reset to the start state at t = {self.now_ns() / NS_PER_S:.2f} s")

    def _drop(self, reason: str) -> None:
        self.dropped += 1
        self.get_logger().warning(f"dropped a command outside the URDF limits (the last valid targets are held): "
                                  f"{reason}")

    # -- stepping ---------------------------------------------------------------
    def ready(self) -> bool:
        """Whether a command for the next control period is there (lockstep)."""
        if self.pending is not None:
            return True
        return self.trajectory is not None and self.trajectory.covers(self.now_ns() + self.period_ns)

    def step(self) -> None:
        next_ns = self.now_ns() + self.period_ns
        if self.trajectory is not None:
            target = self.trajectory.sample(next_ns)
            self.applied += 1
        elif self.pending is not None:
            target, self.pending = self.pending, None
            self.applied += 1
        else:
            target = self.world.last_target
        self.prev_lin_vel = np.asarray(self.state.root_lin_vel, np.float64)
        self.state = self.world.step(target)
        self.frame += 1

    def publish(self) -> None:
        stamp = self.now_ns()
        s, pubs = self.state, self.pubs
        if "clock_topic" in pubs:
            pubs["clock_topic"].publish(Clock(clock=time_msg(stamp)))
        rot = quat_to_matrix(np.asarray(s.root_quat, np.float64))
        if "imu_topic" in pubs:
            accel_world = (np.asarray(s.root_lin_vel) - self.prev_lin_vel) / self.physics.dt if self.frame else 0.0
            msg = Imu()
            msg.header.stamp, msg.header.frame_id = time_msg(stamp), self.base_frame
            q = np.asarray(s.root_quat, np.float64)
            msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w = (float(v) for v in q)
            omega = rot.T @ np.asarray(s.root_ang_vel, np.float64)
            msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z = (float(v) for v in omega)
            specific = rot.T @ (accel_world - GRAVITY)
            msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z = (float(v)
                                                                                             for v in specific)
            pubs["imu_topic"].publish(msg)
        if "odom_topic" in pubs:
            pubs["odom_topic"].publish(odometry_msg(s.root_pos, s.root_quat, s.root_lin_vel, s.root_ang_vel, stamp,
                                                    self.options.odom_frame, self.base_frame))
        if "tf_topic" in pubs and self.tf_message is not None:
            tf_type, transform_type = self.tf_message
            t = transform_type()
            t.header.stamp, t.header.frame_id, t.child_frame_id = time_msg(stamp), self.options.odom_frame, \
                self.base_frame
            t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = (
                float(v) for v in s.root_pos)
            r = t.transform.rotation
            r.x, r.y, r.z, r.w = (float(v) for v in s.root_quat)
            pubs["tf_topic"].publish(tf_type(transforms=[t]))
        if "joint_states_topic" in pubs:
            effort = self.world.data.actuator_force[self.world.engine.act]
            pubs["joint_states_topic"].publish(joint_state_msg(self.joint_names, s.joint_pos, s.joint_vel, effort,
                                                               stamp))

    def wait_for_subscribers(self, executor: SingleThreadedExecutor) -> None:
        needed = self.options.wait_for_subscribers
        pub = self.pubs.get("joint_states_topic")
        if needed <= 0 or pub is None:
            return
        end = time.monotonic() + self.options.wait_timeout
        while pub.get_subscription_count() < needed and time.monotonic() < end and rclpy.ok(context=self.context):
            executor.spin_once(timeout_sec=0.01)
        if pub.get_subscription_count() < needed:
            self.get_logger().warning(f"waited {self.options.wait_timeout:g} s for {needed} subscriber(s); "
                                      "starting anyway")

    def run(self, executor: SingleThreadedExecutor) -> None:
        """Publish, wait for / take commands, step; until ``duration`` simulated seconds (or shutdown)."""
        opts = self.options
        self.wait_for_subscribers(executor)
        frames = int(round(opts.duration / self.physics.dt)) if opts.duration > 0 else None
        wall0 = time.monotonic()
        self.publish()
        down = False  # fallen and not reset since
        while rclpy.ok(context=self.context) and (frames is None or self.frame < frames):
            if opts.lockstep:
                end = time.monotonic() + opts.lockstep_timeout
                while not self.ready() and time.monotonic() < end and rclpy.ok(context=self.context):
                    executor.spin_once(timeout_sec=0.002)
                if not self.ready():
                    self.missed += 1
                    self.get_logger().warning(f"no command within {opts.lockstep_timeout:g} s at t = "
                                              f"{self.now_ns() / NS_PER_S:.3f} s; holding the last targets")
            else:
                executor.spin_once(timeout_sec=0.0)
                if opts.real_time_factor > 0:
                    due = wall0 + (self.frame + 1) * self.physics.dt / opts.real_time_factor
                    while time.monotonic() < due and rclpy.ok(context=self.context):
                        executor.spin_once(timeout_sec=max(0.0, min(0.002, due - time.monotonic())))
            if self.reset_requested:
                self.reset()
                down = False
            self.step()
            self.publish()
            if not down and self.world.fallen(self.state):
                down = True
                self.falls += 1
                self.get_logger().warning(f"the robot fell at t = {self.now_ns() / NS_PER_S:.2f} s")
        self.get_logger().info(
            f"simulated {self.now_ns() / NS_PER_S:.2f} s: {self.applied} commands applied, {self.dropped} dropped, "
            f"{self.missed} missed, fell: {'yes' if self.falls else 'no'} ({self.falls} falls, {self.resets} "
            "resets)")
        executor.spin_once(timeout_sec=0.2)  # let the last messages go out


def run_sim_node(options: SimOptions, args: list[str] | None = None) -> None:
    """Run the simulator node in its own rclpy context; AKDError propagates to the caller."""
    context = rclpy.Context()
    rclpy.init(args=args, context=context)
    node = None
    try:
        node = SimNode(options, context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        node.run(executor)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        if context.ok():
            rclpy.shutdown(context=context)


def main(args: list[str] | None = None) -> int:
    """Console script ``akd_sim`` (``akd_sim --ros-args -p robot:=quadruped [-p run_dir:=RUN] ...``)."""
    stop_on_sigint()
    try:
        run_sim_node(SimOptions(), sys.argv if args is None else args)
    except AKDError as exc:
        print(f"{NODE_NAME}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


__all__ = ["SimOptions", "SimNode", "parameter_names", "resolve_setup", "run_sim_node"]


if __name__ == "__main__":
    sys.exit(main())
