"""The `akd` command (docs/architecture.md, "Outputs and the commands are a contract").

One thin file per subcommand in this package (options -> typed stage options -> one stage function of akd_core ->
print where the outputs are); this is the only place argparse lives. A command's module is imported only when it
runs, so `akd robots list` starts in a fraction of a second. AKDError becomes a one-paragraph message and a
non-zero exit code (a traceback only with --debug).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import warnings
from collections.abc import Callable

from akd_core.io.errors import AKDError
from akd_core.io.signals import stop_on_sigint, terminate_as_interrupt

log = logging.getLogger("akd")


# ----------------------------------------------------------------------------- the command table
# (name, module, help, options function, run function): a command's module is imported only when it runs, so
# `akd robots list` starts in a fraction of a second. The only dynamic imports of AKD: the layering contracts
# (.importlinter) hold everything else.
COMMANDS: list[tuple[str, str, str, str, str]] = [
    ("robots", "akd_core.cli.robots", "built-in skeletons and URDF inspection", "add_arguments", "run"),
    ("gait", "akd_core.cli.gait", "procedural reference gait from a prompt -> RUN/reference.npz",
     "add_arguments", "run"),
    ("distill", "akd_core.cli.distill", "SDS distillation of a motion from a video diffusion prior",
     "add_arguments", "run"),
    ("track", "akd_core.cli.track",
     "physics tracking: sampling MPC (MuJoCo CPU / Newton CUDA) or --method adam", "add_arguments", "run"),
    ("crosscheck", "akd_core.cli.crosscheck", "replay tracked PD targets in the other engine, windowed",
     "add_arguments", "run"),
    ("render", "akd_core.cli.render", "Gaussian-splat render of RUN's motion -> RUN/render.mp4",
     "add_arguments", "run"),
    ("preview", "akd_core.cli.preview", "mesh preview video of RUN (reference | tracked) -> RUN/preview.mp4",
     "add_arguments", "run"),
    ("export", "akd_core.cli.export", "datasets and bags: hdf5, lerobot, amp, isaaclab-amp, rosbag2",
     "add_arguments", "run"),
    ("run", "akd_core.cli.run", "every stage in order (gait|sds -> track -> crosscheck -> preview -> export)",
     "add_arguments", "run"),
    ("batch", "akd_core.cli.batch", "many runs from a sweep YAML, locally or on a Ray cluster",
     "add_arguments", "run"),
    ("library", "akd_core.cli.library",
     "a motion library covering the robot's velocity-command box: planned command timelines, tracked, curated, "
     "one dataset with the command per frame, and a coverage report", "add_arguments", "run"),
    ("prior", "akd_core.cli.prior",
     "video priors: check a CogVideoX folder, write a tiny one, make training data, train", "add_arguments", "run"),
    ("train-policy", "akd_core.cli.train_policy",
     "train a tracking policy on an exported HDF5 dataset: BC, or DAgger with the MPC expert", "add_arguments", "run"),
    ("train-bc", "akd_core.cli.train_policy", "behaviour cloning (= `akd train-policy --method bc`)",
     "add_bc_arguments", "run"),
    ("eval-policy", "akd_core.cli.eval_policy",
     "closed-loop evaluation with pushes, friction and mass changes (a policy, or the MPC expert)",
     "add_arguments", "run"),
    ("export-policy", "akd_core.cli.export_policy", "a policy as ONNX with its deployment metadata",
     "add_arguments", "run"),
    ("ros", "akd_ros.cli", "ROS 2: replay a run as live topics; MuJoCo simulator node; policy node",
     "add_arguments", "cli"),
]


def _stage_module(module: str):
    """The module of a command, or None when that part of AKD is not installed (e.g. akd_ros without rclpy)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            return None
        raise


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `akd` parser. Only the module of ``command`` is imported (so `akd robots list` starts fast);
    with ``command=None`` every command is listed by name and help text."""
    parser = argparse.ArgumentParser(
        prog="akd", description="AKD: reference gaits, tracked PD targets and datasets for legged robots.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    for name, module_name, help_text, add_name, cli_name in COMMANDS:
        if command != name:
            sub.add_parser(name, help=help_text, description=help_text, add_help=False)
            continue
        module = _stage_module(module_name)
        if module is None or not hasattr(module, cli_name):
            hint = " (install the ROS 2 extra: pip install -e '.[ros]')" if name == "ros" else ""
            raise AKDError(f"`akd {name}` is not available in this installation: {module_name} is missing{hint}")
        p = sub.add_parser(name, help=help_text, description=help_text)
        getattr(module, add_name)(p)
        p.set_defaults(func=getattr(module, cli_name))
    return parser


def _command_of(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, format="%(message)s")
    if not debug:
        warnings.simplefilter("ignore", DeprecationWarning)
    # Ctrl-C, kill -INT (even when started with SIGINT ignored) and SIGTERM (kill, a job scheduler, a container
    # stop) all end a command through KeyboardInterrupt, so every long loop leaves its checkpoint (akd_core.io.signals)
    stop_on_sigint()
    with terminate_as_interrupt():
        return _main(argv, debug)


def _main(argv: list[str], debug: bool) -> int:
    try:
        parser = build_parser(_command_of(argv))
        args = parser.parse_args(argv)
        func: Callable[[argparse.Namespace], int] = args.func
        return int(func(args) or 0)
    except AKDError as exc:
        if debug:
            raise
        command = _command_of(argv) or ""
        print(f"akd {command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"akd {_command_of(argv)}: interrupted; re-run the same command to resume from the last checkpoint",
              file=sys.stderr)
        return 130
    except BrokenPipeError:  # `akd robots info ... | head`: the reader left; not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not raise again
        return 0



if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
