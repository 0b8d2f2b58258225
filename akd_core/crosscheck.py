"""MuJoCo cross-check of a tracked motion: replay Newton's PD targets (and, second mode, its recorded torques) on a
MuJoCo model of the same Robot and compare joint and root trajectories.

The MuJoCo model comes from :meth:`Robot.to_mjcf` with the same kp/kd, armature, timestep, friction and the URDF
effort limits as actuator force ranges. MuJoCo position actuators with ``kv`` compute ``kp (q* - q) - kv qdot``, the
PD law used in Newton. Contact models differ (MuJoCo soft constraints vs Newton penalty springs): that gap dominates.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DependencyError, MotionError
from .fileio import write_json_atomic
from .motion import TrackedMotion, quat_to_matrix
from .robot import Robot, load_urdf
from .rundir import CROSSCHECK, ROBOT_URDF, TRACKED, RunDir

DEFAULT_THRESHOLD_RAD = 0.05
DEFAULT_HORIZON_S = 2.0


def _mujoco():
    try:
        import mujoco
    except ImportError as exc:  # pragma: no cover
        raise DependencyError("the cross-check needs MuJoCo: pip install mujoco") from exc
    return mujoco


def build_mujoco(robot: Robot, kp: np.ndarray, kd: np.ndarray, armature: np.ndarray | float, timestep: float,
                 friction: float = 1.0):
    """(MjModel, MjData) of ``robot`` on a plane with position actuators (kp, kd per joint, effort force ranges)."""
    mujoco = _mujoco()
    xml = robot.to_mjcf(kp=kp, kd=kd, armature=armature, timestep=timestep, friction=friction)
    model = mujoco.MjModel.from_xml_string(xml)
    return model, mujoco.MjData(model)


def replay(robot: Robot, tracked: TrackedMotion, timestep: float, armature: np.ndarray | float = 0.01,
           friction: float = 1.0, mode: str = "pd", horizon_s: float | None = None) -> dict[str, np.ndarray]:
    """Replay ``tracked`` in MuJoCo from its first state.

    mode "pd": ctrl = PD targets linearly interpolated between control frames (as in Newton);
    mode "torque": actuators off, ``qfrc_applied`` = the recorded torques held over each control period.
    Returns joint_pos (T, J), root_pos (T, 3), root_quat (T, 4) xyzw at the control frames (T <= horizon)."""
    mujoco = _mujoco()
    if mode not in ("pd", "torque"):
        raise MotionError(f"cross-check mode must be 'pd' or 'torque', got {mode!r}")
    model, data = build_mujoco(robot, tracked.kp, tracked.kd, armature, timestep, friction)
    joint_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in tracked.joint_names]
    act_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in tracked.joint_names]
    if min(joint_ids) < 0 or min(act_ids) < 0:
        raise MotionError(f"tracked joints {tracked.joint_names} do not all exist in the MuJoCo model of "
                          f"'{robot.name}'; re-run `akd track` for this robot")
    qpos_adr = np.array([model.jnt_qposadr[i] for i in joint_ids])
    dof_adr = np.array([model.jnt_dofadr[i] for i in joint_ids])
    root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "root")
    rq, rv = model.jnt_qposadr[root], model.jnt_dofadr[root]
    data.qpos[rq:rq + 3] = tracked.root_pos[0]
    data.qpos[rq + 3:rq + 7] = np.roll(tracked.root_quat[0], 1)  # xyzw -> MuJoCo wxyz
    data.qpos[qpos_adr] = tracked.joint_pos[0]
    rot = quat_to_matrix(tracked.root_quat[0].astype(np.float64))
    data.qvel[rv:rv + 3] = tracked.root_lin_vel[0]  # free joint: origin velocity in world
    data.qvel[rv + 3:rv + 6] = rot.T @ tracked.root_ang_vel[0]  # free joint: angular velocity in the body frame
    data.qvel[dof_adr] = tracked.joint_vel[0]
    if mode == "torque":
        model.actuator_gainprm[:, 0] = 0.0
        model.actuator_biasprm[:, :3] = 0.0
    mujoco.mj_forward(model, data)
    steps = max(1, int(round(tracked.dt / timestep)))
    frames = tracked.num_steps if horizon_s is None else min(tracked.num_steps, int(round(horizon_s / tracked.dt)) + 1)
    out = {"joint_pos": [data.qpos[qpos_adr].copy()], "root_pos": [data.qpos[rq:rq + 3].copy()],
           "root_quat": [np.roll(data.qpos[rq + 3:rq + 7], -1).copy()]}
    act = np.array(act_ids)
    for k in range(frames - 1):
        start, end = tracked.pd_targets[k], tracked.pd_targets[k + 1]
        for s in range(steps):
            if mode == "pd":
                data.ctrl[act] = start + (end - start) * (s / steps)
            else:
                data.qfrc_applied[dof_adr] = tracked.joint_torques[k]
            mujoco.mj_step(model, data)
        out["joint_pos"].append(data.qpos[qpos_adr].copy())
        out["root_pos"].append(data.qpos[rq:rq + 3].copy())
        out["root_quat"].append(np.roll(data.qpos[rq + 3:rq + 7], -1).copy())  # wxyz -> xyzw
    return {k: np.asarray(v) for k, v in out.items()}


def compare(tracked: TrackedMotion, replayed: dict[str, np.ndarray]) -> dict[str, float]:
    """Joint RMSE (rad), max joint deviation (rad) and root position drift at the end (m) over the replayed frames."""
    n = len(replayed["joint_pos"])
    dq = replayed["joint_pos"] - tracked.joint_pos[:n]
    return {"joint_rmse_rad": float(np.sqrt(np.mean(dq ** 2))), "max_joint_dev_rad": float(np.abs(dq).max()),
            "root_pos_drift_m": float(np.linalg.norm(replayed["root_pos"][-1] - tracked.root_pos[n - 1])),
            "seconds": float((n - 1) * tracked.dt)}


def crosscheck(robot: Robot, tracked: TrackedMotion, timestep: float, armature: np.ndarray | float = 0.01,
               friction: float = 1.0, horizon_s: float = DEFAULT_HORIZON_S,
               threshold_rad: float = DEFAULT_THRESHOLD_RAD) -> dict[str, Any]:
    """Both replay modes; ``passed`` = PD-mode joint RMSE over ``horizon_s`` below ``threshold_rad``."""
    pd = compare(tracked, replay(robot, tracked, timestep, armature, friction, "pd", horizon_s))
    torque = compare(tracked, replay(robot, tracked, timestep, armature, friction, "torque", horizon_s))
    result: dict[str, Any] = dict(pd)
    result.update({f"torque_{k}": v for k, v in torque.items()})
    result.update({"threshold": threshold_rad, "threshold_metric": "joint_rmse_rad (PD-target replay)",
                   "passed": bool(pd["joint_rmse_rad"] < threshold_rad), "timestep_s": timestep,
                   "horizon_s": horizon_s})
    return result


def stage_crosscheck(run: RunDir, horizon_s: float = DEFAULT_HORIZON_S,
                     threshold_rad: float = DEFAULT_THRESHOLD_RAD) -> dict[str, Any]:
    """`akd crosscheck RUN`: MuJoCo replay of RUN/tracked.npz -> RUN/crosscheck.json (+ manifest metrics)."""
    robot = load_urdf(run.require(ROBOT_URDF, "akd gait --robot ROBOT --out RUN"))
    tracked = TrackedMotion.load(run.require(TRACKED, f"akd track {run.path}"))
    track = run.stage("track").get("metrics", {})
    timestep = float(track.get("sim_dt_s", 1e-3))
    armature = np.asarray(track.get("armature", 0.01 * robot.total_mass / 13.0))
    friction = float(track.get("contact", {}).get("mu", 1.0))
    config = {"horizon_s": horizon_s, "threshold_rad": threshold_rad, "timestep_s": timestep}
    with run.running_stage("crosscheck", config) as metrics:
        result = crosscheck(robot, tracked, timestep, armature, friction, horizon_s, threshold_rad)
        write_json_atomic(run.file(CROSSCHECK), result)
        metrics.update(result)
    return metrics


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, help="run directory with tracked.npz (from `akd track`)")
    parser.add_argument("--horizon", type=float, default=DEFAULT_HORIZON_S, help="seconds compared (default 2)")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_RAD,
                        help="pass if PD-replay joint RMSE (rad) is below this (default 0.05)")


def cli(args: argparse.Namespace) -> int:
    run = RunDir(args.run)
    result = stage_crosscheck(run, args.horizon, args.threshold)
    verdict = "PASSED" if result["passed"] else "FAILED"
    print(f"crosscheck {verdict}: joint RMSE {result['joint_rmse_rad']:.4f} rad (threshold {result['threshold']}), "
          f"max dev {result['max_joint_dev_rad']:.4f} rad, root drift {result['root_pos_drift_m']:.4f} m over "
          f"{result['seconds']:.2f} s; torque replay RMSE {result['torque_joint_rmse_rad']:.4f} rad "
          f"-> {run.file(CROSSCHECK)}")
    return 0 if result["passed"] else 1


__all__ = ["build_mujoco", "replay", "compare", "crosscheck", "stage_crosscheck", "add_arguments", "cli"]
