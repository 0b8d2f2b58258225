"""The robot in AKD's MuJoCo simulator on ROS 2 (the akd_sim node) + robot_state_publisher.

    ros2 launch akd sim.launch.py robot:=quadruped                       # default pose, tracking's gains
    ros2 launch akd sim.launch.py run_dir:=/abs/path/runs/trot lockstep:=true   # start where a run starts

akd_sim publishes /clock (simulated time: start other nodes with use_sim_time:=true), /joint_states, /imu, /odom
and /tf (odom -> base), and takes PD targets on /joint_trajectory_controller/joint_trajectory (JointTrajectory) and
/position_controller/commands (Float64MultiArray); commands outside the URDF limits are dropped and logged.
robot_state_publisher turns /joint_states into the links' /tf. Without launch: ``akd ros sim --robot ROBOT`` or
``akd_sim --ros-args -p robot:=ROBOT``.
"""

import os
import subprocess

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

ARGUMENTS = [
    ("robot", "", "built-in robot name or URDF path (default: the run's robot.urdf)"),
    ("run_dir", "", "start from this run's tracked.npz with its physics"),
    ("policy", "", "or start from this ONNX policy's clip (akd export-policy)"),
    ("clip", "0", "the policy's clip to start from"),
    ("lockstep", "false", "advance only when a command for the next control period has arrived"),
    ("real_time_factor", "1.0", "simulated seconds per wall second when not in lockstep (0: as fast as possible)"),
    ("duration", "0.0", "simulated seconds to run (0: until shutdown)"),
    ("use_robot_state_publisher", "true", "start robot_state_publisher with the robot's URDF"),
]


def _text(context, name):
    return LaunchConfiguration(name).perform(context)


def _flag(context, name):
    return _text(context, name).strip().lower() in ("1", "true", "yes", "on")


def _sim_node(context):
    return Node(
        package="akd",
        executable="akd_sim",
        name="akd_sim",
        output="screen",
        parameters=[{
            "robot": _text(context, "robot"),
            "run_dir": _text(context, "run_dir"),
            "policy": _text(context, "policy"),
            "clip": int(_text(context, "clip")),
            "lockstep": _flag(context, "lockstep"),
            "real_time_factor": float(_text(context, "real_time_factor")),
            "duration": float(_text(context, "duration")),
        }],
    )


def _description(robot, run_dir):
    """The URDF text: the run's robot.urdf, a URDF path, or a built-in robot emitted by `akd robots emit`."""
    path = os.path.join(os.path.abspath(run_dir), "robot.urdf") if run_dir and not robot else robot
    if path.endswith(".urdf"):
        with open(path) as f:
            return f.read()
    return subprocess.run(["akd", "robots", "emit", robot], check=True, capture_output=True, text=True).stdout


def _launch_nodes(context, *args, **kwargs):
    nodes = [_sim_node(context)]
    if _flag(context, "use_robot_state_publisher"):
        description = _description(_text(context, "robot"), _text(context, "run_dir"))
        nodes.append(Node(package="robot_state_publisher", executable="robot_state_publisher",
                          name="robot_state_publisher", output="screen",
                          parameters=[{"robot_description": description, "use_sim_time": True}]))
    return nodes


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, default, text in ARGUMENTS]
    return LaunchDescription([*declared, OpaqueFunction(function=_launch_nodes)])
