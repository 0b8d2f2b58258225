"""The ``akd_generator`` node: runs the AKD pipeline on request, then replays the result.

Parameters: ``robot`` (built-in name or URDF path), ``prompt``, ``out`` (run directory; default
``runs/<robot>_<prompt words>``), ``source`` (gait | sds), ``duration``, ``fps``, ``seed``,
``package_paths``, ``exports`` (comma-separated export formats, default none), ``force``,
``autostart`` (generate once at startup), ``exit_after_replay``, plus every replay parameter of
:mod:`akd_ros.replay` except ``run_dir`` and ``source``
(the generator replays the tracked result, or the reference when tracking did not run).

Service ``~/generate`` (``std_srvs/Trigger``, so it works with any ROS 2 install and the pip wheels):
set ``robot`` / ``prompt`` (e.g. ``ros2 param set /akd_generator prompt "a dog trotting"``), call it,
and the response says where the run went (``success`` false with the error otherwise). Stages already
done in ``out`` are skipped (the pipeline resumes). The replay then streams on the usual topics.
"""

from __future__ import annotations

import re
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rclpy
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger

from akd_core.io.errors import AKDError, ConfigError
from akd_core.io.signals import stop_on_sigint
from akd_ros.replay import (
    ReplayOptions,
    RunReplayer,
    declare_replay_parameters,
    replay_options_from_parameters,
)
from akd_ros.replay import parameter_names as replay_parameter_names

NODE_NAME = "akd_generator"
REPLAY_SKIP = ("run_dir", "source")  # the run is the generated one; "source" here means gait | sds


@dataclass
class GenerateRequest:
    """What the pipeline is asked to make (the generator node's own parameters)."""

    robot: str
    prompt: str
    out: str = ""
    source: str = "gait"
    duration: float = 4.0
    fps: float = 50.0
    seed: int = 0
    package_paths: list[str] = field(default_factory=list)
    exports: str = ""
    force: bool = False

    def run_dir(self) -> Path:
        if self.out:
            return Path(self.out)
        slug = "_".join(re.findall(r"[a-z0-9]+", self.prompt.lower())[:5]) or "motion"
        return Path("runs") / f"{Path(self.robot).stem}_{slug}"


def generate_run(request: GenerateRequest, echo: Any = print) -> Path:
    """Run the AKD pipeline (motion -> track -> crosscheck -> preview -> export) into ``request.run_dir()``."""
    from akd_core.pipeline import PipelineConfig, run_pipeline

    if not request.robot.strip():
        raise ConfigError("parameter robot is empty; set a built-in robot name or a URDF path "
                          "(ros2 param set /akd_generator robot quadruped)")
    exports = tuple(x.strip() for x in request.exports.split(",") if x.strip() and x.strip() != "none")
    out = request.run_dir()
    run_pipeline(PipelineConfig(robot=request.robot, prompt=request.prompt, out=out, source=request.source,
                                duration=request.duration, fps=request.fps, seed=request.seed,
                                package_paths=list(request.package_paths), exports=exports, force=request.force),
                 echo=echo)
    return out


NODE_FLAGS = ("autostart", "exit_after_replay")


def parameter_names() -> list[str]:
    """Names of the ROS parameters the generator node declares."""
    request = [f for f in vars(GenerateRequest(robot="", prompt=""))]
    return request + list(NODE_FLAGS) + replay_parameter_names(skip=REPLAY_SKIP)


class GeneratorNode(Node):
    """``akd_generator``: a ``~/generate`` Trigger service; each success starts a replay of the new run."""

    def __init__(self, replay_defaults: ReplayOptions | None = None, **node_kwargs: Any):
        super().__init__(NODE_NAME, **node_kwargs)
        self._replay_defaults = replay_defaults or ReplayOptions()
        defaults = GenerateRequest(robot="", prompt="")
        for name, value in vars(defaults).items():
            if isinstance(value, list):
                self.declare_parameter(name, Parameter.Type.STRING_ARRAY)
            else:
                self.declare_parameter(name, value)
        for flag in NODE_FLAGS:
            self.declare_parameter(flag, False)
        declare_replay_parameters(self, self._replay_defaults, skip=REPLAY_SKIP)
        self.replayer: RunReplayer | None = None
        self.done = False  # exit_after_replay and the replay finished (or the autostart generation failed)
        self.failure: Exception | None = None  # why the autostart generation failed
        self._busy = threading.Lock()
        self._service_group = MutuallyExclusiveCallbackGroup()
        self.create_service(Trigger, "~/generate", self._on_generate, callback_group=self._service_group)
        if self.get_parameter("autostart").value:
            self._autostart = self.create_timer(0.0, self._on_autostart, callback_group=self._service_group)
        self.get_logger().info(f"ready: call {self.get_fully_qualified_name()}/generate (std_srvs/Trigger)")

    def request(self) -> GenerateRequest:
        values = {}
        for name, default in vars(GenerateRequest(robot="", prompt="")).items():
            if isinstance(default, list):
                values[name] = list(self.get_parameter_or(name, Parameter(name, value=[])).value)
            else:
                values[name] = self.get_parameter(name).value
        return GenerateRequest(**values)

    def generate_and_replay(self) -> str:
        """Run the pipeline with the current parameters, then (re)start the replay; returns a summary line."""
        run_dir = generate_run(self.request(), echo=self.get_logger().info)
        options = replay_options_from_parameters(self, self._replay_defaults, skip=REPLAY_SKIP)
        options.run_dir = str(run_dir)
        if self.replayer is not None:
            self.replayer.close()
            self.replayer = None
        self.replayer = RunReplayer(self, options, on_finished=self._on_replay_finished)
        self.replayer.begin()
        data = self.replayer.data
        return (f"generated {run_dir}; replaying {data.num_samples} {data.source} samples at "
                f"{1.0 / self.replayer.period_s:.2f} Hz")

    def _on_generate(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        if not self._busy.acquire(blocking=False):
            response.success, response.message = False, "busy: a generation is already running"
            return response
        try:
            response.message = self.generate_and_replay()
            response.success = True
            self.get_logger().info(response.message)
        except AKDError as exc:
            response.success, response.message = False, str(exc)
            self.get_logger().error(str(exc))
        except Exception as exc:  # a stage crashing must not take the service down with it
            response.success, response.message = False, f"{type(exc).__name__}: {exc}"
            self.get_logger().error(traceback.format_exc())
        finally:
            self._busy.release()
        return response

    def _on_autostart(self) -> None:
        self._autostart.cancel()
        with self._busy:
            try:
                self.get_logger().info(self.generate_and_replay())
            except Exception as exc:  # kept for run_generator_node to re-raise; the node keeps serving
                self.failure = exc
                self.get_logger().error(str(exc) if isinstance(exc, AKDError) else traceback.format_exc())
                if self.get_parameter("exit_after_replay").value:
                    self.done = True

    def _on_replay_finished(self) -> None:
        if self.get_parameter("exit_after_replay").value:
            linger = max(0.0, float(self.get_parameter("linger").value))
            self._exit_timer = self.create_timer(linger, self._on_exit_timer)

    def _on_exit_timer(self) -> None:
        self._exit_timer.cancel()
        self.done = True


def run_generator_node(overrides: dict[str, Any] | None = None, args: list[str] | None = None) -> None:
    """Spin an ``akd_generator`` node in its own rclpy context until Ctrl-C, or, with ``exit_after_replay``,
    until its replay finished. ``overrides``: parameter values (e.g. robot, prompt, autostart). A failed
    autostart generation is re-raised here (AKDError for user errors)."""
    context = rclpy.Context()
    rclpy.init(args=args, context=context)
    node = None
    try:
        params = [Parameter(k, value=v) for k, v in (overrides or {}).items()]
        node = GeneratorNode(context=context, parameter_overrides=params)
        executor = MultiThreadedExecutor(num_threads=2, context=context)
        executor.add_node(node)
        while context.ok() and not node.done:
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        if context.ok():
            rclpy.shutdown(context=context)
    if node is not None and node.failure is not None:
        raise node.failure


def main(args: list[str] | None = None) -> int:
    """Console script ``akd_generator`` (``akd_generator --ros-args -p robot:=quadruped -p prompt:='...'``)."""
    stop_on_sigint()
    try:
        run_generator_node(None, sys.argv if args is None else args)
    except AKDError as exc:
        print(f"{NODE_NAME}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
