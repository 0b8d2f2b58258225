"""A rollout as a video: the simulated episode beside the reference it tracks (mesh preview renderer), and a
velocity-command rollout as a contact sheet (poses at intervals, labelled with command and measured velocity)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from akd_core.io.fileio import atomic_path
from akd_core.learn.policy import PolicyMeta
from akd_core.model.robot import Robot
from akd_core.motion.clip import Motion
from akd_core.render.preview import draw_label, render_frame, render_preview


def write_rollout_video(robot: Robot, meta: PolicyMeta, traj: dict[str, np.ndarray], path: str | Path,
                        clip_index: int = 0) -> Path:
    """MP4 of a rollout (states at the control rate, dict of (T, .) arrays) with a following camera."""
    fps = 1.0 / meta.dt
    rollout = Motion(fps=fps, joint_names=list(meta.joint_names), joint_pos=traj["joint_pos"],
                     root_pos=traj["root_pos"], root_quat=traj["root_quat"], prompt="policy rollout")
    return Path(render_preview(robot, [rollout], ["rollout"], path, progress=False))


def write_contact_sheet(robot: Robot, traj: dict[str, np.ndarray], dt: float, path: str | Path,
                        every_s: float = 1.0, columns: int = 5, width: int = 240, height: int = 180) -> Path:
    """PNG of a velocity-command rollout: one rendered pose every ``every_s`` s, each labelled with its time, the
    command asked and the velocity measured (vx, vy m/s in the heading frame, yaw rate rad/s)."""
    from PIL import Image

    steps = len(traj["command"])
    picks = list(range(0, steps, max(1, int(round(every_s / dt))))) or [0]
    tiles = []
    for k in picks:
        image = render_frame(robot, traj["root_pos"][k + 1], traj["root_quat"][k + 1], traj["joint_pos"][k + 1],
                             width=width, height=height)
        cmd, vel = traj["command"][k], traj["measured"][k]
        image = draw_label(image, f"{(k + 1) * dt:.1f} s  cmd {cmd[0]:+.2f} {cmd[1]:+.2f} {cmd[2]:+.2f}", 4, 3, 11)
        tiles.append(draw_label(image, f"measured {vel[0]:+.2f} {vel[1]:+.2f} {vel[2]:+.2f}", 4, 18, 11))
    columns = min(columns, len(tiles))
    rows = -(-len(tiles) // columns)
    sheet = np.zeros((rows * height, columns * width, 3), dtype=np.uint8)
    for i, tile in enumerate(tiles):
        r, c = divmod(i, columns)
        sheet[r * height:(r + 1) * height, c * width:(c + 1) * width] = tile
    path = Path(path)
    with atomic_path(path) as tmp:
        Image.fromarray(sheet).save(tmp, format="PNG")
    return path
