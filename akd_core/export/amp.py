"""Motion files for adversarial motion priors: legged_gym AMP JSON ``.txt`` and Isaac Lab AMP ``.npz``.

legged_gym (AMP_for_hardware ``AMPLoader``) ``.txt``: a JSON object ``{"LoopMode", "FrameDuration",
"EnableCycleOffsetPosition", "EnableCycleOffsetRotation", "MotionWeight", "Frames"}`` where each frame is::

    root pos (3, world) | root quat xyzw (4) | joint pos (J) | toe pos local (3K, root frame)
    | root lin vel (3, root frame) | root ang vel (3, root frame) | joint vel (J) | toe vel local (3K, root frame)

(width 2J + 6K + 13; for a 12-joint, 4-foot robot 61, AMP_for_hardware's A1 layout). We also store
``"JointNames"``, ``"FootNames"`` and ``"FrameLayout"`` (extra keys the loader ignores) so the joint order is
explicit: it is the URDF's, which may differ from a training environment's.

Isaac Lab AMP (``MotionLoader``) ``.npz``: ``fps`` (scalar), ``dof_names`` (D,), ``body_names`` (B,),
``dof_positions`` / ``dof_velocities`` (N, D), ``body_positions`` (N, B, 3), ``body_rotations`` (N, B, 4) **wxyz**
(Isaac Lab's convention; the only wxyz in AKD's files), ``body_linear_velocities`` / ``body_angular_velocities``
(N, B, 3) world frame. Bodies are every URDF link, root first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from akd_core.export.common import Episode
from akd_core.io.errors import MotionError
from akd_core.io.fileio import save_npz_atomic, write_text_atomic
from akd_core.model.spatial import xyzw_to_wxyz

LOOP_MODES = ("Wrap", "Clamp")


def amp_frames(episode: Episode) -> np.ndarray:
    """(T, 2J + 6K + 13) legged_gym AMP frames (see module docstring)."""
    toe_local = episode.root_frame(episode.foot_pos - episode.root_pos[:, None, :])  # (T, K, 3)
    toe_vel_local = np.gradient(toe_local, episode.dt, axis=0)  # motion of the toes seen from the root frame
    lin_local = episode.root_frame(episode.root_lin_vel)
    ang_local = episode.root_frame(episode.root_ang_vel)
    num = episode.num_samples
    return np.concatenate([episode.root_pos, episode.root_quat, episode.joint_pos, toe_local.reshape(num, -1),
                           lin_local, ang_local, episode.joint_vel, toe_vel_local.reshape(num, -1)],
                          axis=1).astype(np.float64)


def frame_layout(episode: Episode) -> list[list[Any]]:
    j, k = len(episode.joint_names), len(episode.foot_names)
    return [["root_pos", 3], ["root_quat_xyzw", 4], ["joint_pos", j], ["toe_pos_local", 3 * k],
            ["root_lin_vel_local", 3], ["root_ang_vel_local", 3], ["joint_vel", j], ["toe_vel_local", 3 * k]]


def write_amp_txt(episode: Episode, path: str | Path, loop_mode: str = "Wrap", motion_weight: float = 1.0) -> Path:
    """legged_gym AMP motion file (JSON in a .txt) of one episode."""
    if loop_mode not in LOOP_MODES:
        raise MotionError(f"AMP LoopMode must be one of {LOOP_MODES}, got {loop_mode!r}")
    frames = amp_frames(episode)
    if not np.all(np.isfinite(frames)):
        raise MotionError(f"{episode.run_dir}: the AMP frames contain NaN or inf values; check the run's motion files")
    doc = {
        "LoopMode": loop_mode,
        "FrameDuration": float(episode.dt),
        "EnableCycleOffsetPosition": True,
        "EnableCycleOffsetRotation": True,
        "MotionWeight": float(motion_weight),
        "JointNames": list(episode.joint_names),
        "FootNames": list(episode.foot_names),
        "FrameLayout": frame_layout(episode),
        "Source": episode.source,
        "Prompt": episode.prompt,
        "Frames": [[round(float(v), 7) for v in row] for row in frames],
    }
    # one frame per line, like the retargeting scripts write them (diff-able, still plain JSON)
    head = json.dumps({k: v for k, v in doc.items() if k != "Frames"}, indent=1)[:-2]
    rows = ",\n".join("  " + json.dumps(row) for row in doc["Frames"])
    return write_text_atomic(path, f"{head},\n\"Frames\": [\n{rows}\n]\n}}\n")


def read_amp_txt(path: str | Path) -> dict[str, Any]:
    """The JSON document, with ``Frames`` as a (T, width) float64 array."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise MotionError(f"{path} is not a readable AMP motion file ({exc})") from exc
    doc["Frames"] = np.asarray(doc["Frames"], dtype=np.float64)
    return doc


def write_isaaclab_amp(episode: Episode, path: str | Path) -> Path:
    """Isaac Lab AMP ``.npz`` (MotionLoader layout) of one episode."""
    return save_npz_atomic(
        path,
        fps=np.float64(episode.fps),
        dof_names=np.array(episode.joint_names, dtype=str),
        body_names=np.array(episode.body_names, dtype=str),
        dof_positions=episode.joint_pos.astype(np.float32),
        dof_velocities=episode.joint_vel.astype(np.float32),
        body_positions=episode.body_pos.astype(np.float32),
        body_rotations=xyzw_to_wxyz(episode.body_quat).astype(np.float32),
        body_linear_velocities=episode.body_lin_vel.astype(np.float32),
        body_angular_velocities=episode.body_ang_vel.astype(np.float32),
    )


def read_isaaclab_amp(path: str | Path) -> dict[str, Any]:
    """The arrays of an Isaac Lab AMP file (``np.load`` without pickle, as Isaac Lab's loader does)."""
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}
