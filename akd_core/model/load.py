"""One entry point for every robot AKD accepts: a built-in skeleton name, a URDF path, an MJCF path (a robot's
``.xml`` or a ``scene.xml`` including it), ``menagerie:NAME[/FILE.xml]`` (or a Robot, passed through); and the
robot files of a run directory (:func:`write_run_robot`, :func:`load_run_robot`).

It sits above :mod:`akd_core.model.robot` (URDF in/out), :mod:`akd_core.model.mjcf` (MJCF in) and
:mod:`akd_core.model.skeletons` (built-in creatures), so none of those needs the others' loaders.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from akd_core.io.errors import URDFError
from akd_core.io.rundir import ROBOT_MJCF, ROBOT_URDF, RunDir
from akd_core.model import skeletons
from akd_core.model.mjcf import is_mjcf, load_mjcf, resolve_menagerie, save_mjcf
from akd_core.model.robot import Robot, load_urdf

MENAGERIE_PREFIX = "menagerie:"


def load_robot(spec: str | os.PathLike | Robot, package_paths: Iterable[str | os.PathLike] = ()) -> Robot:
    """A Robot from a built-in skeleton name (``akd robots list``), a URDF or MJCF path (told apart by the root
    element, ``<robot>`` or ``<mujoco>``), or ``menagerie:NAME[/FILE.xml]`` (a MuJoCo Menagerie model found under
    ``$MENAGERIE_ROOT`` or the mujoco-menagerie package's cache; never downloaded)."""
    if isinstance(spec, Robot):
        return spec
    text = str(spec)
    if text in skeletons.SKELETONS:
        return skeletons.build(text)
    if text.startswith(MENAGERIE_PREFIX):
        return load_mjcf(resolve_menagerie(text))
    path = Path(text).expanduser()
    if not path.exists():
        if path.suffix.lower() not in (".urdf", ".xml") and os.sep not in text:
            raise URDFError(f"'{text}' is neither a built-in robot ({', '.join(sorted(skeletons.SKELETONS))}) "
                            "nor an existing URDF/MJCF file; pass one of those names, a path to a .urdf or MuJoCo "
                            ".xml, or menagerie:NAME")
        raise URDFError(f"robot file {path} does not exist; check the path (built-in robots: "
                        f"{', '.join(sorted(skeletons.SKELETONS))})")
    if is_mjcf(path):
        return load_mjcf(path)
    return load_urdf(path, package_paths)


def write_run_robot(run: RunDir, robot: Robot) -> None:
    """Store the articulation a run uses: ``RUN/robot.urdf`` always (ROS robot_description, yourdfpy, the URDF
    every stage can read) and, for an MJCF robot, ``RUN/robot.xml`` (the model MuJoCo tracks on). A run that
    switches to a URDF robot loses a stale robot.xml. The MJCF is written first: if it fails nothing changes."""
    mjcf = run.file(ROBOT_MJCF)
    if robot.mjcf_path is not None:
        if robot.mjcf_path.resolve() != mjcf.resolve():
            save_mjcf(robot, mjcf)
    elif mjcf.exists():
        mjcf.unlink()
    robot.to_urdf(run.file(ROBOT_URDF))


def load_run_robot(run: RunDir) -> Robot:
    """The robot of a run directory: ``RUN/robot.xml`` when the run has one (an MJCF robot), else ``robot.urdf``."""
    mjcf = run.file(ROBOT_MJCF)
    if mjcf.exists():
        return load_mjcf(mjcf)
    return load_urdf(run.require(ROBOT_URDF, f"akd gait --robot ROBOT --prompt TEXT --out {run.path}"))
