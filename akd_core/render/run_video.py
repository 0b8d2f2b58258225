"""`akd render RUN`: the run's motion rendered as 3D Gaussians over the checkerboard ground -> RUN/render.mp4.

The ground is the run's terrain (:func:`~akd_core.model.terrain.run_terrain`): flat z = 0 unless the gait stage
recorded stairs, a slope or rough ground, which are ray-cast under the Gaussians (:func:`render_video`'s
``terrain``).

The robot's :class:`~akd_core.render.gaussians.GaussianAsset` (surface samples of a real robot; skinned skin of a
built-in
creature) is posed by ``reference.npz`` (and by ``tracked.npz`` when present, in a second panel beside it) with
forward kinematics and linear blend skinning, then rendered with :func:`akd_core.render.render_video` (gsplat on
CUDA, the pure-torch rasterizer elsewhere). Each panel has its own following camera; both use the same distance,
so sizes compare. The tracked clip (control rate) is resampled to the video rate by time. Frames are rendered in
chunks (memory stays bounded for long clips) with a progress bar. The asset is written to ``RUN/gaussians.ply``
(3DGS layout: opens in splat viewers).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor

from akd_core.io.errors import ConfigError, MotionError
from akd_core.io.rundir import REFERENCE, ROBOT_URDF, TRACKED, RunDir
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.robot import Robot, load_urdf
from akd_core.model.terrain import Terrain, run_terrain
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.render import GroundConfig, follow_camera, render_video, resolve_backend, to_uint8_frames
from akd_core.render.gaussians import GaussianAsset
from akd_core.render.preview import draw_label
from akd_core.render.terrain_cast import TerrainCaster
from akd_core.render.video import write_mp4_frames

RENDER_MP4 = "render.mp4"
GAUSSIANS_PLY = "gaussians.ply"
DEFAULT_FPS = 25.0
DEFAULT_GAUSSIANS = 10000


def motion_in_robot_order(robot: Robot, motion: Motion, source: str) -> Motion:
    """``motion`` with joint_pos columns in ``robot.joint_names`` order (matched by name)."""
    if motion.joint_names == robot.joint_names:
        return motion
    missing = sorted(set(robot.joint_names) - set(motion.joint_names))
    if missing:
        raise MotionError(f"render: {source} has no joints {missing} of robot '{robot.name}'; it was made for "
                          "another robot (re-run the motion stage with this run's robot.urdf)")
    cols = [motion.joint_names.index(n) for n in robot.joint_names]
    return Motion(fps=motion.fps, joint_names=robot.joint_names, joint_pos=motion.joint_pos[:, cols],
                  root_pos=motion.root_pos, root_quat=motion.root_quat, prompt=motion.prompt)


def tracked_as_motion(tracked: TrackedMotion) -> Motion:
    """The simulated states of a TrackedMotion as a Motion at its control rate (1 / dt)."""
    return Motion(fps=1.0 / tracked.dt, joint_names=tracked.joint_names, joint_pos=tracked.joint_pos,
                  root_pos=tracked.root_pos, root_quat=tracked.root_quat)


def link_poses(fk: ForwardKinematics, motion: Motion) -> tuple[Tensor, Tensor]:
    """World link poses of every frame: (F, L, 3), (F, L, 3, 3) float32."""
    with torch.no_grad():
        return fk(torch.as_tensor(motion.root_pos, dtype=torch.float32),
                  torch.as_tensor(motion.root_quat, dtype=torch.float32),
                  torch.as_tensor(motion.joint_pos, dtype=torch.float32))


FRONT_AZIMUTH_DEG = -70.0  # the render's camera: front right of a robot walking along +x (follow_camera's default)
UPHILL_RISE = 0.02  # m: a clip whose ground ends this much higher than it starts is watched from behind


def panel_cameras(asset: GaussianAsset, poses: list[tuple[Tensor, Tensor]], width: int, height: int,
                  max_points: int = 2048, terrain: Terrain | None = None) -> list[tuple[Tensor, Tensor]]:
    """One following camera (viewmats (F, 4, 4), K (3, 3)) per panel, all at the same distance.

    The cameras follow the bounding box of an evenly spaced subset of at most ``max_points`` Gaussians, which
    keeps this cheap for long clips. On a ``terrain`` whose ground under the clip ends higher than it starts
    (stairs or a slope up) the view is mirrored to the rear right, so the risers and the rising ground face it.
    """

    subset = np.linspace(0, asset.num_gaussians - 1, min(max_points, asset.num_gaussians)).round().astype(int)
    small = asset.subset(subset)
    with torch.no_grad():
        means = [small.pose(pos, rot)[0] for pos, rot in poses]
    distance = None
    # the distance that fits the largest clip, shared by all panels
    for m in means:
        _, K = follow_camera(m[:1], width, height)
        lo, hi = m.min(dim=1).values, m.max(dim=1).values
        radius = float((0.5 * (hi - lo).norm(dim=-1)).max().clamp_min(1e-3))
        half_fov = min(math.atan(0.5 * width / float(K[0, 0])), math.atan(0.5 * height / float(K[1, 1])))
        d = 1.4 * radius / math.sin(half_fov)
        distance = d if distance is None else max(distance, d)
    return [follow_camera(m, width, height, distance=distance, azimuth_deg=_azimuth(m, terrain)) for m in means]


def _azimuth(means: Tensor, terrain: Terrain | None) -> float:
    """The camera azimuth of a panel whose Gaussians are ``means`` (F, N, 3): from the front right, or from the rear
    right when the terrain under the clip rises."""
    if terrain is None or terrain.is_flat or len(means) < 2:
        return FRONT_AZIMUTH_DEG
    centre = (0.5 * (means.min(dim=1).values + means.max(dim=1).values))[[0, -1]].double().cpu().numpy()
    start, end = terrain.height(centre[:, 0], centre[:, 1])
    rising = np.isfinite(start) and np.isfinite(end) and end - start > UPHILL_RISE
    return -180.0 - FRONT_AZIMUTH_DEG if rising else FRONT_AZIMUTH_DEG


def clip_frames(asset: GaussianAsset, poses: list[tuple[Tensor, Tensor]], width: int, height: int,
                backend: str = "auto", chunk_frames: int = 8, labels: list[str] | None = None,
                progress: bool = True, terrain: Terrain | None = None) -> tuple[Iterator[np.ndarray], int]:
    """(frames, count): frames (H, P * W, 3) uint8 of P posed clips side by side (shorter clips hold their last
    frame), yielded as each chunk of ``chunk_frames`` is drawn, so a long clip streams to the encoder instead of
    being held whole.

    poses: per clip (link_pos (F_p, L, 3), link_rot (F_p, L, 3, 3)). terrain: the ground (default flat z = 0).
    """
    backend = resolve_backend(backend)
    device = torch.device("cuda") if backend == "gsplat" else torch.device("cpu")
    cameras = panel_cameras(asset, poses, width, height, terrain=terrain)
    num_frames = max(len(pos) for pos, _ in poses)
    colors, opacities = asset.colors_tensor(device=device), asset.opacities_tensor(device=device)
    ground = None if terrain is None or terrain.is_flat else TerrainCaster(terrain, GroundConfig().max_distance)

    def frames() -> Iterator[np.ndarray]:
        from tqdm import tqdm

        size = max(10, height // 20)
        bar = tqdm(total=num_frames * len(poses), desc="render", unit="frame", disable=not progress, leave=False)
        for start in range(0, num_frames, chunk_frames):
            count = min(chunk_frames, num_frames - start)
            chunk = np.empty((count, height, width * len(poses), 3), dtype=np.uint8)
            for p, ((link_pos, link_rot), (viewmats, K)) in enumerate(zip(poses, cameras)):
                ids = torch.as_tensor(np.minimum(np.arange(start, start + count), len(link_pos) - 1))
                with torch.no_grad():
                    means, covars = asset.pose(link_pos[ids].to(device), link_rot[ids].to(device))
                    drawn = render_video(means, covars, colors, opacities, viewmats[ids].to(device), K.to(device),
                                         width, height, backend=backend, terrain=ground)
                chunk[:, :, p * width:(p + 1) * width] = to_uint8_frames(drawn)
                bar.update(count)
            for frame in chunk:
                for p, label in enumerate(labels or []):
                    frame = draw_label(frame, label, p * width + 4, 3, size)
                yield frame
        bar.close()

    return frames(), num_frames


def render_clips(asset: GaussianAsset, poses: list[tuple[Tensor, Tensor]], width: int, height: int,
                 backend: str = "auto", chunk_frames: int = 8, labels: list[str] | None = None,
                 progress: bool = True, terrain: Terrain | None = None) -> np.ndarray:
    """Frames (F, H, P * W, 3) uint8 of P posed clips side by side (:func:`clip_frames`, held)."""
    frames, count = clip_frames(asset, poses, width, height, backend, chunk_frames, labels, progress, terrain)
    return np.stack(list(frames)) if count else np.empty((0, height, width * len(poses), 3), dtype=np.uint8)


def stage_render(run: RunDir, width: int = 256, height: int = 256, backend: str = "auto",
                 n_gaussians: int = DEFAULT_GAUSSIANS, fps: float | None = None, seed: int = 0,
                 chunk_frames: int = 8, progress: bool = True) -> dict[str, Any]:
    """`akd render RUN`: RUN/reference.npz (| RUN/tracked.npz) as Gaussians -> RUN/render.mp4 + RUN/gaussians.ply.

    fps: video frame rate (default min(25, the reference's rate)); the clips are resampled by time.
    Returns the metrics recorded in the manifest.
    """

    if width < 16 or height < 16:
        raise ConfigError(f"render: --width and --height must be >= 16 pixels, got {width}x{height}")
    if n_gaussians < 1 or chunk_frames < 1:
        raise ConfigError("render: --n-gaussians and chunk_frames must be >= 1")
    robot = load_urdf(run.require(ROBOT_URDF, "akd gait --robot ROBOT --prompt TEXT --out RUN"))
    reference = motion_in_robot_order(robot, Motion.load(run.require(REFERENCE, f"akd gait ... --out {run.path}")),
                                      str(run.file(REFERENCE)))
    fps = float(fps) if fps is not None else min(DEFAULT_FPS, reference.fps)
    if fps <= 0:
        raise ConfigError(f"render: --fps must be positive, got {fps}")
    clips, labels = [reference.resample(fps)], ["reference"]
    if run.file(TRACKED).exists():
        tracked = tracked_as_motion(TrackedMotion.load(run.file(TRACKED)))
        clips.append(motion_in_robot_order(robot, tracked, str(run.file(TRACKED))).resample(fps))
        labels.append("tracked")
    resolved = resolve_backend(backend)
    terrain = run_terrain(run)
    config = {"width": width, "height": height, "backend": resolved, "n_gaussians": n_gaussians, "fps": fps,
              "seed": seed, "clips": labels, "terrain": terrain.spec}
    with run.running_stage("render", config) as metrics:
        start = time.perf_counter()
        asset = GaussianAsset.from_robot(robot, n_gaussians=n_gaussians, seed=seed)
        asset.save_ply(run.file(GAUSSIANS_PLY))
        asset_s = time.perf_counter() - start
        fk = ForwardKinematics(robot)
        poses = [link_poses(fk, clip) for clip in clips]
        start = time.perf_counter()
        frames, count = clip_frames(asset, poses, width, height, resolved, chunk_frames, labels, progress, terrain)
        write_mp4_frames(frames, run.file(RENDER_MP4), fps=fps)  # drawn and encoded chunk by chunk
        render_s = time.perf_counter() - start
        metrics.update({"frames": int(count), "panels": len(clips), "skinned": asset.skin is not None,
                        "asset_build_s": round(asset_s, 3),
                        "render_s_per_frame": round(render_s / (count * len(clips)), 4),
                        "video": str(run.file(RENDER_MP4)), "gaussians_ply": str(run.file(GAUSSIANS_PLY))})
    return metrics


__all__ = ["clip_frames", "link_poses", "motion_in_robot_order", "panel_cameras", "render_clips",
           "stage_render", "tracked_as_motion"]
