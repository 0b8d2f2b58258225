"""AKD on ROS 2 (rclpy): the ``akd_replay`` and ``akd_generator`` nodes and message conversion.

- :mod:`akd_ros.replay`: a run directory as live topics (``replay_run``, console script ``akd_replay``)
- :mod:`akd_ros.generator`: runs the AKD pipeline on a ``~/generate`` request, then replays it
- :mod:`akd_ros.convert`: run files -> ``JointState``, ``JointTrajectory``, ``Float64MultiArray``, ``Odometry``
- :mod:`akd_ros.safety`: URDF position / velocity / effort limits checked before anything is published
- :mod:`akd_ros.monitor`: a recording subscriber (tests, benchmarks, quick looks)
- :mod:`akd_ros.cli`: ``akd ros replay RUN [--rate HZ] [--loop]``

Only this package imports rclpy; :mod:`akd_core` stays ROS-free. Submodules are imported on
demand, so ``import akd_ros`` works (and ``akd_ros.safety`` too) without the ROS wheels.
"""
