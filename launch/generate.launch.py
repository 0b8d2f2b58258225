"""Generate a motion with AKD on request and replay it on ROS 2 (the akd_generator node).

    ros2 launch akd generate.launch.py robot:=quadruped prompt:="a dog trotting forward"

With ``autostart:=true`` (the default when a prompt is given) the node runs the pipeline once at
startup; afterwards (or instead) set new parameters and call the service::

    ros2 param set /akd_generator prompt "a dog galloping"
    ros2 service call /akd_generator/generate std_srvs/srv/Trigger

The result streams on /robot_description, /joint_states, the PD-target JointTrajectory, the
command streams and /akd/root_odom. To get /tf as well, start replay.launch.py on the run directory
the service reports. Without launch: ``akd ros generate --robot R --prompt P`` or
``akd_generator --ros-args -p robot:=R -p prompt:=P -p autostart:=true``.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

ARGUMENTS = [
    ("robot", "quadruped", "built-in robot name or URDF path"),
    ("prompt", "", "text describing the motion"),
    ("out", "", "run directory (default runs/<robot>_<prompt words>)"),
    ("source", "gait", "gait (procedural, CPU) or sds (video-diffusion distillation)"),
    ("duration", "4.0", "clip length in seconds"),
    ("fps", "50.0", "reference frame rate"),
    ("seed", "0", "random seed"),
    ("autostart", "auto", "generate once at startup (auto: when a prompt is given)"),
    ("loop", "true", "replay the result in a loop"),
    ("rate_scale", "1.0", "replay speed factor"),
    ("trajectory_topic", "/joint_trajectory_controller/joint_trajectory", "PD-target JointTrajectory topic"),
]


def _text(context, name):
    return LaunchConfiguration(name).perform(context)


def _flag(context, name):
    return _text(context, name).strip().lower() in ("1", "true", "yes", "on")


def _launch_nodes(context, *args, **kwargs):
    prompt = _text(context, "prompt")
    autostart = _text(context, "autostart").strip().lower()
    generator = Node(
        package="akd",
        executable="akd_generator",
        name="akd_generator",
        output="screen",
        parameters=[{
            "robot": _text(context, "robot"),
            "prompt": prompt,
            "out": _text(context, "out"),
            "source": _text(context, "source"),
            "duration": float(_text(context, "duration")),
            "fps": float(_text(context, "fps")),
            "seed": int(_text(context, "seed")),
            "autostart": bool(prompt.strip()) if autostart == "auto" else _flag(context, "autostart"),
            "loop": _flag(context, "loop"),
            "rate_scale": float(_text(context, "rate_scale")),
            "trajectory_topic": _text(context, "trajectory_topic"),
        }],
    )
    return [generator]


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, default, text in ARGUMENTS]
    return LaunchDescription([*declared, OpaqueFunction(function=_launch_nodes)])
