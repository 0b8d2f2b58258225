"""One entry point for every robot AKD accepts: a built-in skeleton name, a URDF path (or a Robot, passed through).

It sits above :mod:`akd_core.model.robot` (URDF in/out) and :mod:`akd_core.model.skeletons` (built-in creatures),
so neither of those needs the other's loader.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from akd_core.io.errors import URDFError
from akd_core.model import skeletons
from akd_core.model.robot import Robot, load_urdf


def load_robot(spec: str | os.PathLike | Robot, package_paths: Iterable[str | os.PathLike] = ()) -> Robot:
    """A Robot from a built-in skeleton name (``akd robots list``) or a URDF path."""
    if isinstance(spec, Robot):
        return spec
    text = str(spec)
    if text in skeletons.SKELETONS:
        return skeletons.build(text)
    path = Path(text).expanduser()
    if not path.exists():
        if path.suffix.lower() not in (".urdf", ".xml") and os.sep not in text:
            raise URDFError(f"'{text}' is neither a built-in robot ({', '.join(sorted(skeletons.SKELETONS))}) "
                            "nor an existing URDF file; pass one of those names or a path to a .urdf")
        raise URDFError(f"URDF file {path} does not exist; check the path (built-in robots: "
                        f"{', '.join(sorted(skeletons.SKELETONS))})")
    return load_urdf(path, package_paths)
