"""An exported AKD policy driving the robot in AKD's MuJoCo simulator on ROS 2: akd_sim + akd_policy, lock-step.

    ros2 launch akd policy.launch.py robot:=quadruped policy:=/abs/path/policy.onnx [clip:=0] [duration:=10.0]

akd_sim starts from the policy's clip (its first tracked state, the policy's physics) and publishes /clock,
/joint_states, /imu, /odom; akd_policy (use_sim_time) reads /joint_states and /imu, runs the ONNX network and
publishes the PD targets on /position_controller/commands every control period; with lockstep the simulator waits for
each command. Without launch: ``akd ros sim --robot R --policy P.onnx --lockstep`` and ``akd ros policy P.onnx`` in
two shells.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

ARGUMENTS = [
    ("robot", "quadruped", "built-in robot name or URDF path the policy was trained for"),
    ("policy", "", "ONNX policy (akd export-policy)"),
    ("clip", "0", "which of the policy's reference clips to track"),
    ("lockstep", "true", "the simulator waits for each command"),
    ("duration", "0.0", "simulated seconds to run (0: until shutdown)"),
]


def _text(context, name):
    return LaunchConfiguration(name).perform(context)


def _flag(context, name):
    return _text(context, name).strip().lower() in ("1", "true", "yes", "on")


def _launch_nodes(context, *args, **kwargs):
    policy = _text(context, "policy")
    if not policy:
        raise RuntimeError("pass policy:=/abs/path/policy.onnx (made by `akd export-policy`)")
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
            "duration": float(_text(context, "duration")),
            "wait_for_subscribers": 1,
        }],
    )
    controller = Node(
        package="akd",
        executable="akd_policy",
        name="akd_policy",
        output="screen",
        parameters=[{"policy": policy, "clip": int(_text(context, "clip")), "use_sim_time": True}],
    )
    return [sim, controller]


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, default, text in ARGUMENTS]
    return LaunchDescription([*declared, OpaqueFunction(function=_launch_nodes)])
