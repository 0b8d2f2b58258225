"""rosbag2 (MCAP) of a run, written with ``rosbags`` (pure Python, no ROS install), for ``ros2 bag play``.

Topics (the same messages ``akd ros replay`` publishes live; docs/ros.md):

- ``/robot_description`` ``std_msgs/msg/String``: the URDF with ``file://`` mesh URIs, once, offered
  transient_local + reliable (what robot_state_publisher and RViz subscribe with).
- ``/joint_states`` ``sensor_msgs/msg/JointState``: tracked positions, velocities and effort = joint torques.
- ``/akd/reference_trajectory`` ``trajectory_msgs/msg/JointTrajectory``: every PD target as one trajectory
  (positions + central-difference velocities, zero at the end; no effort, which joint_trajectory_controller rejects),
  header stamp zero (= "start now" when replayed), ``time_from_start`` = k * dt.
- ``/akd/pd_targets``, ``/akd/joint_torques`` ``std_msgs/msg/Float64MultiArray``: one value per joint (the forward
  command / effort controllers' ``~/commands`` type).
- ``/akd/root_odom`` ``nav_msgs/msg/Odometry``: root pose in ``odom``, twist in the root link frame.

Sample k is stamped (bag time and header) ``start_ns + k * dt``. A reference-only run (no ``tracked.npz``) has
reference angles as PD targets and no torque topic; its joint states carry no effort.
"""

from __future__ import annotations

import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from akd_core.export.common import Episode
from akd_core.io.errors import MotionError
from akd_core.io.fileio import atomic_path
from akd_core.model.spatial import quat_to_matrix

NS_PER_S = 1_000_000_000
TOPICS = {
    "robot_description": ("/robot_description", "std_msgs/msg/String"),
    "joint_states": ("/joint_states", "sensor_msgs/msg/JointState"),
    "trajectory": ("/akd/reference_trajectory", "trajectory_msgs/msg/JointTrajectory"),
    "pd_targets": ("/akd/pd_targets", "std_msgs/msg/Float64MultiArray"),
    "joint_torques": ("/akd/joint_torques", "std_msgs/msg/Float64MultiArray"),
    "root_odom": ("/akd/root_odom", "nav_msgs/msg/Odometry"),
}


def _typestore():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def _qos(transient_local: bool, depth: int):
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    zero = QosTime(sec=0, nsec=0)
    return Qos(history=QosHistory.KEEP_LAST, depth=depth, reliability=QosReliability.RELIABLE,
               durability=QosDurability.TRANSIENT_LOCAL if transient_local else QosDurability.VOLATILE,
               deadline=zero, lifespan=zero, liveliness=QosLiveliness.AUTOMATIC, liveliness_lease_duration=zero,
               avoid_ros_namespace_conventions=False)


def robot_description(urdf_text: str, source: str) -> str:
    """The URDF with absolute mesh paths as ``file://`` URIs (what RViz resolves without a ROS package)."""
    try:
        root = ET.fromstring(urdf_text)
    except ET.ParseError as exc:
        raise MotionError(f"{source} is not valid XML ({exc}); re-create the run's robot.urdf") from exc
    for mesh in root.iter("mesh"):
        filename = mesh.get("filename", "")
        if filename.startswith("/"):
            mesh.set("filename", Path(filename).as_uri())
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def trajectory_velocities(pd_targets: np.ndarray, dt: float) -> np.ndarray:
    """(T, J) central-difference velocities of the PD targets, zero at the last point (a trajectory that ends
    moving is rejected by ros2_control's joint_trajectory_controller)."""
    vel = np.gradient(np.asarray(pd_targets, dtype=np.float64), dt, axis=0)
    vel[-1] = 0.0
    return vel


class _Messages:
    """Builders of rosbags message objects from numpy rows."""

    def __init__(self, typestore):
        self.t = typestore.types

    def time(self, ns: int):
        return self.t["builtin_interfaces/msg/Time"](sec=int(ns // NS_PER_S), nanosec=int(ns % NS_PER_S))

    def duration(self, ns: int):
        return self.t["builtin_interfaces/msg/Duration"](sec=int(ns // NS_PER_S), nanosec=int(ns % NS_PER_S))

    def header(self, ns: int, frame_id: str = ""):
        return self.t["std_msgs/msg/Header"](stamp=self.time(ns), frame_id=frame_id)

    def string(self, text: str):
        return self.t["std_msgs/msg/String"](data=text)

    def joint_state(self, names, position, velocity, effort, ns: int):
        f64 = np.float64
        return self.t["sensor_msgs/msg/JointState"](
            header=self.header(ns), name=list(names), position=np.asarray(position, f64),
            velocity=np.asarray(velocity, f64), effort=np.zeros(0, f64) if effort is None else np.asarray(effort, f64))

    def float_array(self, values, label: str = "joints"):
        data = np.asarray(values, dtype=np.float64).reshape(-1)
        dim = self.t["std_msgs/msg/MultiArrayDimension"](label=label, size=len(data), stride=len(data))
        layout = self.t["std_msgs/msg/MultiArrayLayout"](dim=[dim], data_offset=0)
        return self.t["std_msgs/msg/Float64MultiArray"](layout=layout, data=data)

    def trajectory(self, names, positions, velocities, period_ns: int):
        empty = np.zeros(0, np.float64)
        point = self.t["trajectory_msgs/msg/JointTrajectoryPoint"]
        points = [point(positions=np.asarray(p, np.float64), velocities=np.asarray(v, np.float64),
                        accelerations=empty, effort=empty, time_from_start=self.duration(k * period_ns))
                  for k, (p, v) in enumerate(zip(positions, velocities))]
        return self.t["trajectory_msgs/msg/JointTrajectory"](header=self.header(0), joint_names=list(names),
                                                             points=points)

    def odometry(self, pos, quat, lin_world, ang_world, ns: int, frame_id: str, child_frame_id: str):
        t = self.t
        rot = quat_to_matrix(np.asarray(quat, dtype=np.float64))  # (3, 3) root -> world
        lin, ang = rot.T @ np.asarray(lin_world, np.float64), rot.T @ np.asarray(ang_world, np.float64)
        q = np.asarray(quat, np.float64) / np.linalg.norm(quat)
        pose = t["geometry_msgs/msg/Pose"](
            position=t["geometry_msgs/msg/Point"](x=float(pos[0]), y=float(pos[1]), z=float(pos[2])),
            orientation=t["geometry_msgs/msg/Quaternion"](x=float(q[0]), y=float(q[1]), z=float(q[2]), w=float(q[3])))
        vec = t["geometry_msgs/msg/Vector3"]
        twist = t["geometry_msgs/msg/Twist"](linear=vec(x=float(lin[0]), y=float(lin[1]), z=float(lin[2])),
                                             angular=vec(x=float(ang[0]), y=float(ang[1]), z=float(ang[2])))
        cov = np.zeros(36, np.float64)
        return t["nav_msgs/msg/Odometry"](
            header=self.header(ns, frame_id), child_frame_id=child_frame_id,
            pose=t["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=cov),
            twist=t["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=cov.copy()))


def write_rosbag(episode: Episode, path: str | Path, start_ns: int | None = None, odom_frame: str = "odom") -> Path:
    """Write the episode as an MCAP rosbag2 folder at ``path`` (replaced atomically). Returns path."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    path = Path(path)
    start_ns = time.time_ns() if start_ns is None else int(start_ns)
    urdf_path = episode.run_dir / "robot.urdf"
    description = robot_description(urdf_path.read_text(), str(urdf_path))
    typestore = _typestore()
    msgs = _Messages(typestore)
    period_ns = int(round(episode.dt * NS_PER_S))
    stamps = [start_ns + k * period_ns for k in range(episode.num_samples)]
    with atomic_path(path, suffix="") as tmp:
        tmp.mkdir(parents=True)
        inner = tmp / path.name  # rosbags names the .mcap after its folder: write under the final name
        with Writer(inner, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
            def connect(key: str, latched: bool = False, depth: int = 10):
                topic, msgtype = TOPICS[key]
                return writer.add_connection(topic, msgtype, typestore=typestore,
                                             offered_qos_profiles=[_qos(latched, depth)])

            def put(connection, ns: int, message) -> None:
                writer.write(connection, ns, typestore.serialize_cdr(message, connection.msgtype))

            put(connect("robot_description", latched=True, depth=1), start_ns, msgs.string(description))
            put(connect("trajectory", depth=1), start_ns,
                msgs.trajectory(episode.joint_names, episode.pd_targets,
                                trajectory_velocities(episode.pd_targets, episode.dt), period_ns))
            states, targets, odom = connect("joint_states"), connect("pd_targets"), connect("root_odom")
            torques = connect("joint_torques") if episode.joint_torques is not None else None
            root_link = episode.robot.root_link
            for k, ns in enumerate(stamps):
                effort = None if episode.joint_torques is None else episode.joint_torques[k]
                put(states, ns, msgs.joint_state(episode.joint_names, episode.joint_pos[k], episode.joint_vel[k],
                                                 effort, ns))
                put(targets, ns, msgs.float_array(episode.pd_targets[k]))
                if torques is not None:
                    put(torques, ns, msgs.float_array(episode.joint_torques[k]))
                put(odom, ns, msgs.odometry(episode.root_pos[k], episode.root_quat[k], episode.root_lin_vel[k],
                                            episode.root_ang_vel[k], ns, odom_frame, root_link))
        for item in inner.iterdir():
            shutil.move(str(item), tmp / item.name)
        inner.rmdir()
    return path


def read_rosbag(path: str | Path) -> dict[str, list[tuple[int, object]]]:
    """topic -> [(bag timestamp ns, deserialised message)] via rosbags' AnyReader."""
    from rosbags.highlevel import AnyReader

    result: dict[str, list[tuple[int, object]]] = {}
    with AnyReader([Path(path)], default_typestore=_typestore()) as reader:
        for connection, timestamp, raw in reader.messages():
            result.setdefault(connection.topic, []).append((timestamp, reader.deserialize(raw, connection.msgtype)))
    return result
