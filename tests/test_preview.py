"""Preview renderer: robot where FK puts it, checkerboard where the ray meets z = 0, MP4s that read back."""

from __future__ import annotations

import json

import imageio.v3 as iio
import numpy as np
import pytest
import trimesh

from akd_core.cli import main as akd_main
from akd_core.io.errors import ConfigError, MotionError, RunDirError
from akd_core.io.rundir import RunDir
from akd_core.model import skeletons
from akd_core.model.load import load_robot
from akd_core.model.robot import load_urdf
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.render.preview import (
    PreviewRenderer,
    PreviewStyle,
    decimate_mesh,
    rasterize,
    render_clips,
    render_frame,
    render_preview,
    stage_preview,
)

IDENTITY = np.array([0.0, 0.0, 0.0, 1.0])
STAND = np.tile([0.0, 0.8, -1.6], 4)  # hip, thigh, knee per leg: a crouched stance for a1 and solo12


@pytest.fixture(scope="module")
def a1(a1_urdf):
    return load_robot(a1_urdf)


@pytest.fixture(scope="module")
def a1_renderer(a1):
    return PreviewRenderer(a1, 320, 240)


@pytest.fixture(scope="module")
def solo(solo12_urdf):
    return load_robot(solo12_urdf)


def trot(robot, seconds: float, fps: float, speed: float = 0.5) -> Motion:
    """A kinematic trot: diagonal legs in phase, root moving forward at ``speed``."""
    t = np.arange(int(round(seconds * fps)) + 1) / fps
    phase = 2 * np.pi * 2.0 * t
    joint_pos = np.tile(STAND, (len(t), 1))
    for leg, offset in enumerate([0.0, np.pi, np.pi, 0.0]):
        joint_pos[:, 3 * leg + 1] += 0.35 * np.sin(phase + offset)
        joint_pos[:, 3 * leg + 2] -= 0.35 * np.clip(np.sin(phase + offset + 0.5), 0, None)
    root_pos = np.stack([speed * t, np.zeros_like(t), np.full_like(t, 0.3)], axis=1)
    return Motion(fps=fps, joint_names=robot.joint_names, joint_pos=joint_pos, root_pos=root_pos,
                  root_quat=np.tile(IDENTITY, (len(t), 1)))


def project(viewmat: np.ndarray, K: np.ndarray, point: np.ndarray) -> np.ndarray:
    """Pinhole projection written out independently of the renderer: world (3,) -> pixel (u, v)."""
    cam = viewmat[:3, :3] @ point + viewmat[:3, 3]
    return np.array([K[0, 0] * cam[0] / cam[2] + K[0, 2], K[1, 1] * cam[1] / cam[2] + K[1, 2]])


# ----------------------------------------------------------------------------- one frame
def test_robot_covers_the_pixel_where_fk_projects_the_root_and_ground_shows_its_checker_colour(a1, a1_renderer):
    renderer = a1_renderer
    root_pos = np.array([0.4, -0.2, 0.3])
    camera = renderer.follow_camera(root_pos[None], IDENTITY[None], fps=30)
    viewmat = camera.viewmats[0]
    image = renderer.render_pose(root_pos, IDENTITY, STAND, viewmat)
    empty = renderer.render_pose(root_pos + np.array([500.0, 0.0, 0.0]), IDENTITY, STAND, viewmat)
    robot_mask = np.abs(image.astype(int) - empty.astype(int)).max(axis=-1) > 12
    link_pos, _ = renderer.link_poses(root_pos[None], IDENTITY[None], STAND[None])
    assert np.allclose(link_pos[0, 0], root_pos)  # link 0 is the root link
    u, v = project(viewmat, camera.K, root_pos).astype(int)
    assert 0 <= u < 320 and 0 <= v < 240
    assert robot_mask[v - 1:v + 2, u - 1:u + 2].all(), "the trunk must cover the root's projection"
    assert image[v, u].tolist() != empty[v, u].tolist()
    # every foot (calf link tip, 0.2 m below the knee) projects inside the drawn robot's bounding box
    rows, cols = np.nonzero(robot_mask)
    for name in ("FR_foot", "FL_foot", "RR_foot", "RL_foot"):
        fu, fv = project(viewmat, camera.K, link_pos[0, a1.link_index(name)])
        assert cols.min() - 2 <= fu <= cols.max() + 2 and rows.min() - 2 <= fv <= rows.max() + 2
    assert 0.01 < robot_mask.mean() < 0.5

    # a ground pixel near the bottom corner, far from the robot: cast its ray here and look up the checker
    style, eye = PreviewStyle(), -viewmat[:3, :3].T @ viewmat[:3, 3]
    tile = renderer.tile_size
    checked = 0
    for u in range(2, 60, 7):
        px, py = u + 0.5, 240 - 3 + 0.5
        ray = viewmat[:3, :3].T @ np.array([(px - camera.K[0, 2]) / camera.K[0, 0],
                                            (py - camera.K[1, 2]) / camera.K[1, 1], 1.0])
        hit = eye + (-eye[2] / ray[2]) * ray
        frac = (hit[:2] / tile) % 1.0
        if np.min(np.abs(frac - np.round(frac))) < 0.05 or robot_mask[239 - 2 - 10:, u].any():
            continue  # near a tile edge, or in the robot's shadow region
        parity = (np.floor(hit[0] / tile) + np.floor(hit[1] / tile)) % 2
        expected = np.array(style.ground_a if parity == 0 else style.ground_b) * 255
        assert np.abs(image[240 - 3, u] - expected).max() <= 3, (u, hit, image[240 - 3, u], expected)
        checked += 1
    assert checked >= 3
    top = image[0, 160].astype(int)
    assert top[2] > top[0], "sky above the horizon is blue"


def test_feet_below_the_ground_are_hidden_by_it(a1):
    """The ground is depth-tested: a robot sunk 0.15 m shows fewer pixels than the same pose on the ground."""
    renderer = PreviewRenderer(a1, 160, 120, PreviewStyle(shadow=0.0))
    standing = np.array([0.0, 0.0, 0.3])
    viewmat = renderer.follow_camera(standing[None], IDENTITY[None], fps=30).viewmats[0]
    empty = renderer.render_pose(standing + np.array([500.0, 0.0, 0.0]), IDENTITY, STAND, viewmat)

    def robot_pixels(height: float) -> int:
        image = renderer.render_pose(np.array([0.0, 0.0, height]), IDENTITY, STAND, viewmat)
        return int((np.abs(image.astype(int) - empty.astype(int)).max(axis=-1) > 12).sum())

    assert robot_pixels(0.15) < 0.85 * robot_pixels(0.3)


@pytest.mark.parametrize("name", sorted(skeletons.SKELETONS))
def test_built_in_skeletons_render_in_the_middle_of_the_frame(name):
    robot = skeletons.build(name)
    root = np.array([0.0, 0.0, skeletons.standing_height(name)])
    image = render_frame(robot, root, IDENTITY, robot.default_joint_pos(), width=96, height=72)
    far = render_frame(robot, root + np.array([0.0, 0.0, -50.0]), IDENTITY, robot.default_joint_pos(), width=96,
                       height=72, viewmat=PreviewRenderer(robot, 96, 72).follow_camera(
                           root[None], IDENTITY[None], fps=30).viewmats[0])
    mask = np.abs(image.astype(int) - far.astype(int)).max(axis=-1) > 12
    assert image.shape == (72, 96, 3) and image.dtype == np.uint8
    assert mask[24:48, 32:64].mean() > 0.2, "the following camera centres the robot"
    assert 0.03 < mask.mean() < 0.7


# ----------------------------------------------------------------------------- rasterizer, decimation
def test_rasterizer_keeps_the_nearest_face_and_covers_the_triangle_area():
    screen = np.array([[10.0, 10.0], [90.0, 12.0], [50.0, 60.0], [0.0, 0.0], [100.0, 0.0], [50.0, 80.0]])
    depth = np.array([2.0, 2.0, 2.0, 1.0, 1.0, 1.0])
    faces = np.array([[0, 1, 2], [3, 4, 5]])
    face_id, pixel_depth = rasterize(screen, depth, faces, 100, 80)
    assert (face_id[face_id >= 0] == 1).all(), "the nearer face hides the farther one wherever both cover"
    assert np.allclose(pixel_depth[face_id == 1], 1.0)
    face_id, pixel_depth = rasterize(screen, depth, faces[:1], 100, 80)
    area = 0.5 * abs(np.cross(screen[1] - screen[0], screen[2] - screen[0]))
    assert abs((face_id == 0).sum() - area) < 0.05 * area
    assert np.isinf(pixel_depth[face_id < 0]).all() and np.allclose(pixel_depth[face_id == 0], 2.0)


def test_rasterizer_interpolates_depth_perspective_correctly():
    """A slanted quad 1 m .. 3 m deep: depth at each pixel equals the plane's depth along that pixel's ray."""
    focal, c = 50.0, 32.0
    corners = np.array([[-1.0, -1.0, 1.0], [1.0, -1.0, 1.0], [1.0, 1.0, 3.0], [-1.0, 1.0, 3.0]])
    screen = focal * corners[:, :2] / corners[:, 2:] + c
    face_id, pixel_depth = rasterize(screen, corners[:, 2], np.array([[0, 1, 2], [0, 2, 3]]), 64, 64)
    rows, cols = np.nonzero(face_id >= 0)
    ray_y = (rows + 0.5 - c) / focal  # plane: z = 2 + y, point on ray = z * (x_n, y_n, 1)
    assert np.allclose(pixel_depth[rows, cols], 2.0 / (1.0 - ray_y), rtol=1e-4)


def test_decimation_bounds_faces_and_keeps_the_shape():
    sphere = trimesh.creation.icosphere(subdivisions=4, radius=0.1)
    verts, faces = decimate_mesh(np.asarray(sphere.vertices), np.asarray(sphere.faces), 800)
    assert 200 < len(faces) <= 800 < len(sphere.faces)
    assert np.allclose(np.linalg.norm(verts, axis=1), 0.1, atol=0.01)
    used = np.unique(faces)
    assert used.max() < len(verts) and np.isfinite(verts).all()


def test_a1_meshes_are_decimated_and_culling_changes_no_silhouette(a1, a1_renderer):
    renderer = a1_renderer
    assert renderer.mesh.num_faces < 14 * PreviewStyle().max_faces
    root = np.array([0.0, 0.0, 0.3])
    viewmat = renderer.follow_camera(root[None], IDENTITY[None], fps=30).viewmats[0]
    culled = renderer.render_pose(root, IDENTITY, STAND, viewmat)
    two_sided = renderer.mesh.two_sided.copy()
    try:
        renderer.mesh.two_sided[:] = True
        both = renderer.render_pose(root, IDENTITY, STAND, viewmat)
    finally:
        renderer.mesh.two_sided[:] = two_sided
    differ = np.abs(culled.astype(int) - both.astype(int)).max(axis=-1) > 12
    assert differ.sum() < 40  # a1's meshes are open in places: a few pixels see through holes


# ----------------------------------------------------------------------------- videos
def test_mp4_reads_back_with_frame_count_and_size_and_side_by_side_doubles_the_width(solo, tmp_path):
    motion = trot(solo, seconds=1.0, fps=50.0)
    single = render_preview(solo, [motion], ["reference"], tmp_path / "one.mp4", fps=25, width=96, height=64,
                            progress=False)
    frames = iio.imread(single)
    assert frames.shape == (26, 64, 96, 3)  # 1 s at 25 fps, both ends included
    as_tuple = (motion.root_pos[::2], motion.root_quat[::2], motion.joint_pos[::2])  # one pose per video frame
    double = render_preview(solo, [motion, as_tuple], ["reference", "tracked"], tmp_path / "two.mp4", fps=25,
                            width=96, height=64, progress=False)
    frames2 = iio.imread(double)
    assert frames2.shape == (26, 64, 192, 3), "panels side by side"
    # the tuple at 25 fps is the 50 fps Motion resampled: both panels show the same picture below the labels
    raw, _ = render_clips(solo, [motion, as_tuple], ["reference", "tracked"], fps=25, width=96, height=64,
                          progress=False)
    assert np.array_equal(raw[:, 16:, :96], raw[:, 16:, 96:])
    assert np.abs(frames2.astype(int) - raw.astype(int)).mean() < 6.0, "the MP4 holds the rendered frames"
    # codec: H.264 in yuv420p, so every player opens it
    meta = iio.immeta(double, plugin="pyav") if _has_pyav() else iio.immeta(double)
    assert "h264" in str(meta.get("codec", "h264")).lower()


def _has_pyav() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def test_shorter_clip_holds_its_last_pose_and_labels_are_drawn(solo):
    motion = trot(solo, seconds=0.4, fps=50.0, speed=0.0)  # trotting in place: the camera stands still
    short = (motion.root_pos[:5], motion.root_quat[:5], motion.joint_pos[:5])
    frames, fps = render_clips(solo, [motion, short], ["reference", "short"], fps=25, width=96, height=64,
                               progress=False)
    assert fps == 25 and frames.shape == (11, 64, 192, 3)
    below_label = slice(20, 64)
    assert np.array_equal(frames[4, below_label, 96:], frames[10, below_label, 96:])
    assert not np.array_equal(frames[4, below_label, :96], frames[10, below_label, :96])
    # labels: the top-left corner differs from the same panel rendered without any text
    renderer = PreviewRenderer(solo, 96, 64)
    rp, rq, q = motion.root_pos[:1], motion.root_quat[:1], motion.joint_pos[:1]
    link_pos, link_rot = renderer.link_poses(rp, rq, q)
    camera = renderer.follow_camera(motion.root_pos[::2], motion.root_quat[::2], fps=25)
    plain = renderer.render(link_pos[0], link_rot[0], camera.viewmats[0])
    label_area = (slice(0, 14), slice(0, 60))
    assert (np.abs(frames[0][label_area].astype(int) - plain[label_area].astype(int)) > 40).sum() > 30
    assert np.array_equal(frames[0, 20:, :96], plain[20:])


def test_joints_are_matched_by_name(solo):
    motion = trot(solo, seconds=0.1, fps=50.0)
    order = np.random.default_rng(0).permutation(solo.num_dofs)
    shuffled = Motion(fps=motion.fps, joint_names=[solo.joint_names[i] for i in order],
                      joint_pos=motion.joint_pos[:, order], root_pos=motion.root_pos, root_quat=motion.root_quat)
    a, _ = render_clips(solo, [motion], fps=25, width=64, height=48, progress=False)
    b, _ = render_clips(solo, [shuffled], fps=25, width=64, height=48, progress=False)
    assert np.array_equal(a, b)


def test_bad_clips_and_labels_are_clear_errors(solo):
    motion = trot(solo, seconds=0.1, fps=50.0)
    with pytest.raises(MotionError, match=r"joint_pos has shape \(3, 5\)"):
        render_clips(solo, [(motion.root_pos[:3], motion.root_quat[:3], np.zeros((3, 5)))], progress=False)
    with pytest.raises(ConfigError, match="2 labels for 1 clips"):
        render_clips(solo, [motion], ["a", "b"], progress=False)
    with pytest.raises(MotionError, match="no joints"):
        render_clips(solo, [Motion(fps=50, joint_names=[f"j{i}" for i in range(12)], joint_pos=motion.joint_pos,
                                   root_pos=motion.root_pos, root_quat=motion.root_quat)], progress=False)
    nan = motion.root_pos.copy()
    nan[1, 2] = np.nan
    with pytest.raises(MotionError, match="root_pos"):
        render_clips(solo, [(nan, motion.root_quat, motion.joint_pos)], progress=False)


# ----------------------------------------------------------------------------- stage + CLI
def _tracked_from(motion: Motion, robot, drop: float) -> TrackedMotion:
    steps = motion.num_frames
    zeros = np.zeros((steps, robot.num_dofs))
    root = motion.root_pos - np.array([0.0, 0.0, drop])

    def record(root_pos):
        return dict(dt=1.0 / motion.fps, joint_names=robot.joint_names, pd_targets=motion.joint_pos,
                    joint_torques=zeros, joint_pos=motion.joint_pos, joint_vel=zeros, root_pos=root_pos,
                    root_quat=motion.root_quat, root_lin_vel=np.zeros((steps, 3)), root_ang_vel=np.zeros((steps, 3)),
                    kp=np.full(robot.num_dofs, 60.0), kd=np.full(robot.num_dofs, 2.0))

    return TrackedMotion(**record(root), naive=TrackedMotion(**record(root - np.array([0.0, 0.0, 0.1]))))


def test_stage_writes_preview_mp4_and_records_the_manifest(solo, tmp_path):
    run = RunDir(tmp_path / "run", create=True)
    with pytest.raises(RunDirError, match="robot.urdf is missing"):
        stage_preview(run)
    solo.to_urdf(run.file("robot.urdf"))
    motion = trot(solo, seconds=0.4, fps=50.0)
    motion.save(run.file("reference.npz"))
    metrics = stage_preview(run, width=80, height=60, fps=25)
    assert iio.imread(run.file("preview.mp4")).shape == (11, 60, 80, 3)  # no tracked.npz yet: reference alone
    assert metrics["frames"] == 11 and metrics["panels"] == 1
    _tracked_from(motion, load_urdf(run.file("robot.urdf")), drop=0.02).save(run.file("tracked.npz"))
    stage_preview(run, width=80, height=60, fps=25)
    assert iio.imread(run.file("preview.mp4")).shape == (11, 60, 160, 3)
    stage = json.loads(run.file("manifest.json").read_text())["stages"]["preview"]
    assert stage["status"] == "done" and stage["config"]["panels"] == ["reference", "tracked"]
    assert stage["metrics"]["duration_s"] == pytest.approx(11 / 25)
    assert akd_main(["preview", str(run.path), "--width", "64", "--height", "48", "--naive"]) == 0
    assert iio.imread(run.file("preview.mp4")).shape == (13, 48, 192, 3)  # default fps: min(30, 50 Hz clip)
    assert not [p for p in run.path.iterdir() if p.name.startswith(".preview")], "no temporary files left"
