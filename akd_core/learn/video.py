"""A rollout as a video: the simulated episode beside the reference it tracks (mesh preview renderer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from akd_core.learn.policy import PolicyMeta
from akd_core.model.robot import Robot
from akd_core.motion.clip import Motion
from akd_core.render.preview import render_preview


def write_rollout_video(robot: Robot, meta: PolicyMeta, traj: dict[str, np.ndarray], path: str | Path,
                        clip_index: int = 0) -> Path:
    """MP4 of a rollout (states at the control rate, dict of (T, .) arrays) with a following camera."""
    fps = 1.0 / meta.dt
    rollout = Motion(fps=fps, joint_names=list(meta.joint_names), joint_pos=traj["joint_pos"],
                     root_pos=traj["root_pos"], root_quat=traj["root_quat"], prompt="policy rollout")
    return Path(render_preview(robot, [rollout], ["rollout"], path, progress=False))
