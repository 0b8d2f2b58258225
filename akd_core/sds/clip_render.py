"""The clip SDS optimises, and how it is seen: per-frame parameters, the Gaussian-splat renderer, initial clips.

:class:`MotionParameters` holds a clip as optimisable tensors; :class:`ClipRenderer` poses the robot's Gaussian asset
by FK + LBS and renders it over the checkerboard ground from a :class:`RenderView`. ``akd_core.sds.distill`` optimises
through them, ``akd_core.sds.phase`` parametrises the clip by leg phases, and ``akd_core.sds.prior.data`` renders the
prior's training clips with the same renderer and cameras.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from akd_core.model.kinematics import ForwardKinematics, geometry_corners
from akd_core.model.robot import Robot
from akd_core.model.spatial.tensor import matrix_to_quat, quat_to_matrix, rotvec_to_matrix
from akd_core.motion.clip import Motion
from akd_core.render import follow_camera, gaussian_blur, render_video
from akd_core.render.gaussians import GaussianAsset


# ----------------------------------------------------------------------------- the clip parameters
class MotionParameters(torch.nn.Module):
    """Joint angles (F, J) and root pose (F, 3) + (F, 3) rotation vector on top of the initial orientation."""

    def __init__(self, init: Motion, robot: Robot):
        super().__init__()
        self.joint_pos = torch.nn.Parameter(torch.as_tensor(init.joint_pos, dtype=torch.float32).clone())
        self.root_pos = torch.nn.Parameter(torch.as_tensor(init.root_pos, dtype=torch.float32).clone())
        self.root_rotvec = torch.nn.Parameter(torch.zeros(init.num_frames, 3))
        self.register_buffer("root_rot0", quat_to_matrix(torch.as_tensor(init.root_quat, dtype=torch.float32)))
        self.register_buffer("lower", torch.as_tensor(np.nan_to_num(robot.lower, neginf=-1e6), dtype=torch.float32))
        self.register_buffer("upper", torch.as_tensor(np.nan_to_num(robot.upper, posinf=1e6), dtype=torch.float32))

    def root_rot(self) -> Tensor:
        return rotvec_to_matrix(self.root_rotvec) @ self.root_rot0  # (F, 3, 3) world

    @torch.no_grad()
    def project_to_limits(self) -> None:
        self.joint_pos.copy_(torch.minimum(torch.maximum(self.joint_pos, self.lower), self.upper))

    def all_params(self) -> Tensor:
        """(F, J + 6): every control parameter per frame, for the smoothness loss."""
        return torch.cat([self.joint_pos, self.root_pos, self.root_rotvec], -1)


# ----------------------------------------------------------------------------- rendering the clip
@dataclass(frozen=True)
class RenderView:
    """How one iteration looks at the clip: camera (viewmats (F, 4, 4), K (3, 3)) and render blur in pixels.

    Priors receive it through ``prior.set_view(view)`` before scoring: text priors ignore it, the oracle
    renders its target through the same view so both videos differ only by the motion.
    """

    viewmats: Tensor
    K: Tensor
    blur_px: float = 0.0


class ClipRenderer:
    """Poses the robot's Gaussian asset with FK + LBS and renders it over the ground."""

    def __init__(self, robot: Robot, width: int, height: int, n_gaussians: int, seed: int, backend: str,
                 view: tuple[float, float, float] = (-70.0, 20.0, 1.4)):
        self.robot = robot
        self.fk = ForwardKinematics(robot)
        self.asset = GaussianAsset.from_robot(robot, n_gaussians=n_gaussians, seed=seed)
        self.width, self.height, self.backend = width, height, backend
        self.azimuth_deg, self.elevation_deg, self.margin = view
        idx, pts = geometry_corners(robot)
        self.corner_idx = torch.as_tensor(idx)
        self.corner_pts = torch.as_tensor(pts, dtype=torch.float32)
        self.foot_idx = torch.zeros(0, dtype=torch.long)
        self.foot_pts = torch.zeros(0, 3)

    def set_feet(self, names: list[str], offsets: np.ndarray) -> None:
        """The feet whose contact points (link-frame ``offsets`` (K, 3)) :meth:`feet` returns."""
        self.foot_idx = torch.as_tensor([self.robot.link_index(n) for n in names], dtype=torch.long)
        self.foot_pts = torch.as_tensor(np.asarray(offsets, dtype=np.float32).reshape(len(names), 3))

    def link_poses(self, params: MotionParameters, detach_legs: bool = False) -> tuple[Tensor, Tensor]:
        """FK of the clip; ``detach_legs``: with the leg joints' angles detached (PhaseMotionParameters: a term
        computed from these poses moves the root and the body joints only)."""
        root_quat = matrix_to_quat(params.root_rot())
        joint_pos = params.joint_pos
        if detach_legs:
            legs = torch.zeros(joint_pos.shape[-1], dtype=torch.bool)
            legs[params.dofs] = True
            joint_pos = torch.where(legs, joint_pos.detach(), joint_pos)
        return self.fk(params.root_pos, root_quat, joint_pos)

    def pose(self, link_pos: Tensor, link_rot: Tensor) -> tuple[Tensor, Tensor]:
        return self.asset.pose(link_pos, link_rot)  # means (F,N,3), covars (F,N,3,3)

    def camera(self, means: Tensor, azimuth_deg: float | None = None,
               elevation_deg: float | None = None) -> tuple[Tensor, Tensor]:
        """Follow camera framed on ``means`` from the configured direction, or from the one given."""
        return follow_camera(means.detach(), self.width, self.height,
                             azimuth_deg=self.azimuth_deg if azimuth_deg is None else azimuth_deg,
                             elevation_deg=self.elevation_deg if elevation_deg is None else elevation_deg,
                             margin=self.margin)

    def render(self, means: Tensor, covars: Tensor, viewmats: Tensor, K: Tensor) -> Tensor:
        colors = torch.as_tensor(self.asset.colors, dtype=means.dtype)
        opacities = torch.as_tensor(self.asset.opacities, dtype=means.dtype)
        return render_video(means, covars, colors, opacities, viewmats, K, self.width, self.height,
                            backend=self.backend)

    def render_view(self, means: Tensor, covars: Tensor, view: RenderView) -> Tensor:
        """The frames an iteration scores: rendered from ``view``'s camera, blurred by its blur_px."""
        return gaussian_blur(self.render(means, covars, view.viewmats, view.K), view.blur_px)

    def corners_z(self, link_pos: Tensor, link_rot: Tensor) -> Tensor:
        return ForwardKinematics.transform_points(link_pos, link_rot, self.corner_idx, self.corner_pts)[..., 2]

    def feet(self, link_pos: Tensor, link_rot: Tensor) -> Tensor:
        """(F, K, 3) world contact points of the feet given to :meth:`set_feet` (K = 0 before)."""
        return ForwardKinematics.transform_points(link_pos, link_rot, self.foot_idx, self.foot_pts)


# ----------------------------------------------------------------------------- initial clips
def constant_velocity_init(robot: Robot, num_frames: int, fps: float, speed: float, height: float) -> Motion:
    """The paper's initialisation: rest pose moving forward along x at a constant speed."""
    t = np.arange(num_frames) / fps
    root_pos = np.stack([speed * t, np.zeros_like(t), np.full_like(t, height)], -1)
    return Motion(fps=fps, joint_names=robot.joint_names, joint_pos=np.tile(robot.default_joint_pos(), (num_frames, 1)),
                  root_pos=root_pos, root_quat=np.tile([0.0, 0.0, 0.0, 1.0], (num_frames, 1)))


def standing_height(robot: Robot) -> float:
    """Root height at which the rest pose's lowest geometry point touches z = 0."""
    fk = ForwardKinematics(robot)
    idx, pts = geometry_corners(robot)
    q = torch.as_tensor(robot.default_joint_pos()[None], dtype=torch.float64)
    link_pos, link_rot = fk(torch.zeros(1, 3, dtype=torch.float64), torch.tensor([[0, 0, 0, 1.0]]), q)
    if len(idx) == 0:
        return float(-link_pos[0, :, 2].min())
    z = ForwardKinematics.transform_points(link_pos, link_rot, torch.as_tensor(idx), torch.as_tensor(pts))[..., 2]
    return float(-z.min())


def fit_clip(motion: Motion, num_frames: int, fps: float) -> Motion:
    """Resample a clip to ``fps`` and cut or hold its end to exactly ``num_frames`` frames."""
    clip = motion.resample(fps)
    if clip.num_frames >= num_frames:
        idx = np.arange(num_frames)
    else:
        idx = np.minimum(np.arange(num_frames), clip.num_frames - 1)
    return Motion(fps=fps, joint_names=clip.joint_names, joint_pos=clip.joint_pos[idx], root_pos=clip.root_pos[idx],
                  root_quat=clip.root_quat[idx], foot_names=clip.foot_names, foot_offsets=clip.foot_offsets,
                  foot_contacts=clip.foot_contacts[idx], prompt=clip.prompt)
