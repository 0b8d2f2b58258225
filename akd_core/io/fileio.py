"""Atomic file writing: a crash never leaves half a file under the final name.

Writers produce their output under a temporary name in the destination folder and
rename it into place (``os.replace`` is atomic on POSIX within one filesystem).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it onto ``path``.

    The temporary keeps ``path``'s suffix (or ``suffix``) because some writers
    (numpy, imageio, h5py) choose their format from it. A directory written at the
    temporary path is moved into place too (replacing an existing one).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{path.name}.tmp-", suffix=suffix if suffix is not None else path.suffix, dir=path.parent
    )
    os.close(fd)
    tmp = Path(tmp_name)
    tmp.unlink()  # writers create it themselves (some refuse an existing file)
    try:
        yield tmp
        if tmp.is_dir():
            if path.exists():
                backup = path.with_name(f".{path.name}.old")
                shutil.rmtree(backup, ignore_errors=True)
                os.replace(path, backup)
                os.replace(tmp, path)
                shutil.rmtree(backup, ignore_errors=True)
            else:
                os.replace(tmp, path)
        elif tmp.exists():
            os.replace(tmp, path)
        else:
            raise FileNotFoundError(f"writer produced nothing at temporary {tmp} for {path}")
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def save_npz_atomic(path: str | os.PathLike, **arrays: Any) -> Path:
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez(tmp, **arrays)
    return Path(path)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
