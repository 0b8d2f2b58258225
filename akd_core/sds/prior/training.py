"""What the VAE and the transformer trainings share: the clip set, its split, model input, checkpoints, logs."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from akd_core.io.errors import ConfigError
from akd_core.io.fileio import atomic_path
from akd_core.sds.prior.data import clip_path, load_index


def whole_clip_batches(vae: torch.nn.Module, frames: int) -> torch.nn.Module:
    """Make the CogVideoX VAE encode and decode ``frames`` frames in ONE pass (no frame chunks + conv cache).

    These are attributes, not config entries: set them again after ``from_pretrained``.
    """
    vae.num_sample_frames_batch_size = max(int(frames), 1)
    vae.num_latent_frames_batch_size = max(int(frames), 1)
    return vae


# ----------------------------------------------------------------------------- data
def load_clips(data: str | Path) -> tuple[Tensor, list[str], dict[str, Any]]:
    """All clips of a data folder -> (uint8 (N, F, H, W, 3), prompts, index)."""
    data = Path(data)
    index = load_index(data)
    frames, prompts = [], []
    for i, entry in enumerate(index["clips"]):
        path = data / entry["file"] if "file" in entry else clip_path(data, i)
        if not path.exists():
            raise ConfigError(f"{path} is listed in {data / 'index.json'} but missing; re-run "
                              f"`akd prior data --out {data}` to render it")
        with np.load(path, allow_pickle=False) as clip:
            frames.append(clip["frames"])
            prompts.append(str(clip["prompt"]))
    if not frames:
        raise ConfigError(f"{data} holds no clips; run `akd prior data --out {data} --clips N` first")
    return torch.from_numpy(np.stack(frames)), prompts, index


def split_clips(count: int, val_fraction: float) -> tuple[list[int], list[int]]:
    """(train, validation) clip indices: the last ~val_fraction (at least one when there are >= 2 clips)."""
    n_val = 0 if count < 2 else min(max(1, int(round(val_fraction * count))), count - 1)
    return list(range(count - n_val)), list(range(count - n_val, count))


def to_model_input(frames: Tensor) -> Tensor:
    """uint8 (B, F, H, W, 3) -> float (B, 3, F, H, W) in [-1, 1] (the VAE's range)."""
    return frames.permute(0, 4, 1, 2, 3).float().div(127.5).sub(1.0)


def restore_training_state(state: dict[str, Any], model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                           generator: torch.Generator) -> tuple[int, list, list]:
    """Load a stage checkpoint's model, optimiser and random states (what makes a resume bit-identical); returns
    (step, history, val_history)."""
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    return int(state["step"]), list(state["history"]), list(state["val_history"])


def jsonable(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as handle:
        fields = list(dict.fromkeys(key for row in rows for key in row))  # a resumed run may log more columns
        writer = csv.DictWriter(handle, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)
