"""Replay an AKD run on ROS 2: robot_state_publisher (the run's URDF) + the akd_replay node.

    ros2 launch akd replay.launch.py run_dir:=/abs/path/to/runs/trot [loop:=true] [rate_scale:=0.5]

robot_state_publisher owns /robot_description (mesh paths turned into file:// URIs for RViz) and
turns /joint_states into /tf; akd_replay streams /joint_states, the PD-target JointTrajectory,
the position / effort command streams and /akd/root_odom. The same replay without launch:
``akd ros replay RUN`` or ``akd_replay --ros-args -p run_dir:=RUN``.
"""

import os
import re

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

ARGUMENTS = [
    ("run_dir", "", "run directory holding robot.urdf and tracked.npz (or reference.npz)"),
    ("rate_scale", "1.0", "replay speed factor (2.0 = twice as fast)"),
    ("rate", "0.0", "samples per second; > 0 overrides rate_scale"),
    ("loop", "false", "start over after the last sample"),
    ("trajectory_topic", "/joint_trajectory_controller/joint_trajectory", "PD-target JointTrajectory topic"),
    ("publish_trajectory", "true", "publish the PD-target JointTrajectory"),
    ("allow_unsafe", "false", "publish commands outside the URDF limits (dangerous)"),
    ("use_robot_state_publisher", "true", "start robot_state_publisher with the run's URDF"),
]


def _flag(context, name):
    return LaunchConfiguration(name).perform(context).strip().lower() in ("1", "true", "yes", "on")


def _file_uris(urdf):
    """Absolute mesh paths -> file:// URIs (RViz's resource retriever needs a scheme)."""
    return re.sub(r'filename="(/[^"]*)"', r'filename="file://\1"', urdf)


def _launch_nodes(context, *args, **kwargs):
    run_dir = os.path.abspath(os.path.expanduser(LaunchConfiguration("run_dir").perform(context)))
    urdf_path = os.path.join(run_dir, "robot.urdf")
    if not os.path.isfile(urdf_path):
        raise RuntimeError(f"{urdf_path} does not exist: pass run_dir:=<run directory made by `akd run`>")
    with open(urdf_path) as f:
        description = _file_uris(f.read())
    use_rsp = _flag(context, "use_robot_state_publisher")
    replay = Node(
        package="akd",
        executable="akd_replay",
        name="akd_replay",
        output="screen",
        parameters=[{
            "run_dir": run_dir,
            "rate_scale": float(LaunchConfiguration("rate_scale").perform(context)),
            "rate": float(LaunchConfiguration("rate").perform(context)),
            "loop": _flag(context, "loop"),
            "trajectory_topic": LaunchConfiguration("trajectory_topic").perform(context),
            "publish_trajectory": _flag(context, "publish_trajectory"),
            "allow_unsafe": _flag(context, "allow_unsafe"),
            "publish_description": not use_rsp,
        }],
    )
    if not use_rsp:
        return [replay]
    state_publisher = Node(
        package="robot_state_publisher",
        executable="robot_state_publisher",
        name="robot_state_publisher",
        output="screen",
        parameters=[{"robot_description": description}],
    )
    return [state_publisher, replay]


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, default, text in ARGUMENTS]
    return LaunchDescription([*declared, OpaqueFunction(function=_launch_nodes)])
