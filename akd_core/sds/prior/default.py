"""The video model that `akd distill` and `akd run --source sds` load when no ``--video-model`` is given.

Order of resolution (:func:`resolve_video_model`):

1. ``--video-model DIR`` (``video_model=`` in Python);
2. ``$AKD_VIDEO_MODEL``: the model a machine is configured with (e.g. a CogVideoX-5B folder on a GPU host);
3. the prior this repository ships, ``models/akd-gaits-tiny/`` (a complete diffusers CogVideoX folder trained
   here by ``akd prior train``, issue 18), looked up in :data:`MODELS_DIRS`: next to the package (a source
   checkout, ``pip install -e .``) and under ``<prefix>/share/akd/models/`` (a regular install: setup.py installs
   ``models/`` there, as it installs ``robots/``).

A missing folder is a :class:`~akd_core.io.errors.DependencyError` that names it and the ways to get one. The
folder itself is loaded, and its layout checked, by :meth:`CogVideoXPrior.from_pretrained` (``--prior cogvideox``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from akd_core.io.errors import DependencyError

DEFAULT_MODEL_NAME = "akd-gaits-tiny"
VIDEO_MODEL_ENV = "AKD_VIDEO_MODEL"
# where the shipped prior is looked for, in order: the repository's models/ (source checkout, editable install),
# then the data files of an installed package
MODELS_DIRS: list[Path] = [Path(__file__).resolve().parents[3] / "models",
                           Path(sys.prefix) / "share" / "akd" / "models"]


def default_model_dir() -> Path:
    """The folder used when no --video-model is given: $AKD_VIDEO_MODEL if set, else the first existing
    ``<dir>/akd-gaits-tiny`` of :data:`MODELS_DIRS`, else the repository's ``models/akd-gaits-tiny`` (which
    :func:`resolve_video_model` then reports as missing)."""
    configured = os.environ.get(VIDEO_MODEL_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    for models in MODELS_DIRS:
        if (models / DEFAULT_MODEL_NAME).is_dir():
            return models / DEFAULT_MODEL_NAME
    return MODELS_DIRS[0] / DEFAULT_MODEL_NAME


def resolve_video_model(video_model: str | Path | None = None) -> Path:
    """The model folder to load: ``video_model`` when given, else :func:`default_model_dir` (which must exist).

    Raises DependencyError naming the missing default folder (or $AKD_VIDEO_MODEL's) and how to get one.
    """
    if video_model is not None and str(video_model).strip():
        return Path(video_model).expanduser()
    folder = default_model_dir()
    if folder.is_dir():
        return folder
    if os.environ.get(VIDEO_MODEL_ENV, "").strip():
        raise DependencyError(
            f"${VIDEO_MODEL_ENV} names the video model folder {folder}, which does not exist; point it at a local "
            f"diffusers CogVideoX folder, or unset it to use the prior shipped in models/{DEFAULT_MODEL_NAME}/")
    searched = ", ".join(str(models / DEFAULT_MODEL_NAME) for models in MODELS_DIRS)
    raise DependencyError(
        f"no video model: --video-model was not given and the default prior folder {folder} does not exist "
        f"(searched {searched}). Get it by training it here: `akd prior data --out DATA`, then "
        f"`akd prior train --data DATA --out {folder} --stage vae` and `--stage transformer` (docs/prior_training.md);"
        f" or pass --video-model DIR (a local diffusers CogVideoX folder), set ${VIDEO_MODEL_ENV}=DIR, or use "
        f"--prior tiny (random weights, for smoke tests).")


__all__ = ["DEFAULT_MODEL_NAME", "MODELS_DIRS", "VIDEO_MODEL_ENV", "default_model_dir", "resolve_video_model"]
