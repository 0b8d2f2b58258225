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

A folder may declare how SDS should use it in ``akd.json`` beside ``model_index.json`` (:func:`model_settings`):

    {"param": "phase", "distill": {"n_gaussians": 2000, "iterations": 10},
     "prompt_phrases": {"forward quickly": "fast forward"}, "about": "why these settings"}

``param`` is the parametrisation its landscape suits (``akd distill --param``: ``frames``, the paper's per-frame
joint angles, or ``phase``, the legs' phases of a gait-library stride); ``distill`` holds other ``DistillConfig``
fields (``akd_core.sds.distill``) it was trained for; ``prompt_phrases`` rewrites the prompt into the words of its
captions before its text encoder reads it (:func:`prior_prompt`; the gait library reads the prompt as given). A
folder without the file (a CogVideoX-2B/5B download) gets the paper's per-frame SDS with DistillConfig's defaults.
Flags given on the command line win over both.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from akd_core.io.errors import ConfigError, DependencyError

DEFAULT_MODEL_NAME = "akd-gaits-tiny"
MODEL_SETTINGS_FILE = "akd.json"  # beside model_index.json: the SDS settings a model folder suits
MODEL_SETTINGS_KEYS = ("param", "distill", "prompt_phrases", "about")
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


def prior_prompt(prompt: str, folder: str | Path | None) -> str:
    """The prompt as the folder's text encoder should read it: every phrase of its akd.json ``prompt_phrases``
    (whole words, case-insensitive, longest phrase first) replaced by the phrase it maps to; ``prompt`` itself for
    a folder without them. A small prior with a word-level tokenizer knows only its captions' words and word order
    (the shipped prior: "a dog trotting fast forward"); a word it never saw is spelled out letter by letter."""
    phrases = model_settings(folder).get("prompt_phrases", {})
    if not phrases:
        return prompt
    text = " ".join(str(prompt).split())
    pattern = re.compile(r"\b(" + "|".join(re.escape(" ".join(k.split())) for k in
                                            sorted(phrases, key=len, reverse=True)) + r")\b", re.IGNORECASE)
    lookup = {" ".join(k.split()).lower(): v for k, v in phrases.items()}
    return " ".join(pattern.sub(lambda m: lookup[m.group(0).lower()], text).split())


def model_settings(folder: str | Path | None) -> dict[str, Any]:
    """The ``akd.json`` of a model folder as {"param": str, "distill": {field: value}, "about": str} (only the keys
    the file has); {} for None or a folder without the file.

    Raises ConfigError naming the file, the field and the fix for a file that is not a JSON object of those keys
    (the values of ``param`` and of the ``distill`` fields are checked by akd_core.sds.distill, which knows them)."""
    if folder is None:
        return {}
    path = Path(folder) / MODEL_SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        settings = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read it as JSON ({exc}); fix the file or delete it (the folder then gets "
                          f"the per-frame SDS defaults)") from exc
    if not isinstance(settings, dict):
        raise ConfigError(f"{path}: must hold a JSON object like {{\"param\": \"phase\"}}, got "
                          f"{type(settings).__name__}")
    unknown = sorted(set(settings) - set(MODEL_SETTINGS_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown field(s) {', '.join(map(repr, unknown))}; the fields are "
                          f"{', '.join(MODEL_SETTINGS_KEYS)}")
    if "param" in settings and not isinstance(settings["param"], str):
        raise ConfigError(f"{path}: field 'param' must be a string (frames or phase), got {settings['param']!r}")
    phrases = settings.get("prompt_phrases", {})
    if not isinstance(phrases, dict) or not all(isinstance(k, str) and k.strip() and isinstance(v, str)
                                                for k, v in phrases.items()):
        raise ConfigError(f"{path}: field 'prompt_phrases' must map phrases to phrases "
                          f"({{\"forward quickly\": \"fast forward\"}}), got {phrases!r}")
    if "distill" in settings and not isinstance(settings["distill"], dict):
        raise ConfigError(f"{path}: field 'distill' must be an object of akd distill settings "
                          f"({{\"n_gaussians\": 2000, ...}}), got {settings['distill']!r}")
    return settings


__all__ = ["DEFAULT_MODEL_NAME", "MODELS_DIRS", "MODEL_SETTINGS_FILE", "VIDEO_MODEL_ENV", "default_model_dir",
           "model_settings", "prior_prompt", "resolve_video_model"]
