"""A velocity-command policy walking AKD's MuJoCo simulator on ROS 2 where /cmd_vel tells it: akd_sim + akd_policy.

    ros2 launch akd velocity.launch.py robot:=quadruped policy:=/abs/path/velocity.onnx [cmd_vel_topic:=/cmd_vel]
    ros2 run teleop_twist_keyboard teleop_twist_keyboard        # or anything publishing geometry_msgs/Twist

akd_sim starts from the policy's first start state (a stand of its library) with the policy's physics, in real time
by default (a teleop runs on the wall clock), and publishes /clock, /joint_states, /imu, /odom; akd_policy
(use_sim_time, cmd_vel) reads /joint_states, /imu and the Twist topic, clips each command into the box the policy was
trained on, zeroes it when no Twist arrived for cmd_vel_timeout seconds (the robot stands), and publishes the PD
targets on /position_controller/commands and the command it used on /akd_policy/command. Without launch:
``akd ros sim --robot R --policy P.onnx`` and ``akd ros policy P.onnx --cmd-vel`` in two shells.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

ARGUMENTS = [
    ("robot", "quadruped", "built-in robot name or URDF path the policy was trained for"),
    ("policy", "", "ONNX export of a velocity-command policy (akd train-policy LIBRARY --task velocity)"),
    ("clip", "0", "which of the policy's start states to start from"),
    ("cmd_vel_topic", "/cmd_vel", "geometry_msgs/Twist commands in base_link"),
    ("cmd_vel_timeout", "0.5", "seconds without a Twist after which the command is zero"),
    ("lockstep", "false", "the simulator waits for each command instead of running in real time"),
    ("real_time_factor", "1.0", "simulated seconds per wall second without lockstep"),
    ("duration", "0.0", "simulated seconds to run (0: until shutdown)"),
]


def _text(context, name):
    return LaunchConfiguration(name).perform(context)


def _flag(context, name):
    return _text(context, name).strip().lower() in ("1", "true", "yes", "on")


def _launch_nodes(context, *args, **kwargs):
    policy = _text(context, "policy")
    if not policy:
        raise RuntimeError("pass policy:=/abs/path/policy.onnx (made by `akd export-policy` of a velocity-command "
                           "policy)")
    sim = Node(
        package="akd",
        executable="akd_sim",
        name="akd_sim",
        output="screen",
        parameters=[{
            "robot": _text(context, "robot"),
            "policy": policy,
            "clip": int(_text(context, "clip")),
            "lockstep": _flag(context, "lockstep"),
            "real_time_factor": float(_text(context, "real_time_factor")),
            "duration": float(_text(context, "duration")),
            "wait_for_subscribers": 1,
        }],
    )
    controller = Node(
        package="akd",
        executable="akd_policy",
        name="akd_policy",
        output="screen",
        parameters=[{
            "policy": policy,
            "clip": int(_text(context, "clip")),
            "cmd_vel": True,
            "cmd_vel_topic": _text(context, "cmd_vel_topic"),
            "cmd_vel_timeout": float(_text(context, "cmd_vel_timeout")),
            "use_sim_time": True,
        }],
    )
    return [sim, controller]


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, default, text in ARGUMENTS]
    return LaunchDescription([*declared, OpaqueFunction(function=_launch_nodes)])
