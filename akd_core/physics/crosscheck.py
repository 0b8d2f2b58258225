"""Cross-check in the other engine: replay the stored PD targets of ``tracked.npz`` where they were not made
(tracked in MuJoCo -> checked in Newton; tracked in Newton -> checked in MuJoCo), windowed.

Every ``window_s`` the other engine starts from the tracked state at that frame, replays that window's targets open
loop, and is compared at the window's end: joint RMSE (rad, the pass/fail figure), max joint deviation and root
position error. Windows are independent, so they run as one batch of worlds. Beside it the open-loop replay from the
first state is reported (``open_loop_*``, the whole clip unless ``open_loop_s``; ``open_loop_s`` 0: no replay and no
``open_loop_*`` keys): it drifts by construction (no feedback, chaotic contact) and is not a pass/fail figure. The
contact models differ on purpose (MuJoCo: soft constraints with a true Coulomb cone; Newton Featherstone: penalty
springs with a viscous friction slope capped at mu N), which is what makes the check informative: targets that only
work through one engine's contact quirks fail it. Both engines stand on the same terrain: the run's
(:func:`akd_core.model.terrain.run_terrain`), flat ground when it recorded none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from akd_core.io.errors import AKDError, ConfigError
from akd_core.io.fileio import write_json_atomic
from akd_core.io.rundir import CROSSCHECK, TRACKED, RunDir
from akd_core.model.load import load_run_robot
from akd_core.model.robot import Robot
from akd_core.model.terrain import Terrain, run_terrain
from akd_core.motion.clip import TrackedMotion
from akd_core.physics.engines import make_engine, other_engine
from akd_core.physics.engines.base import BodyState, Feet, mass_links
from akd_core.physics.params import PhysicsParams, default_physics, physics_from_dict

DEFAULT_THRESHOLD_RAD = 0.05
DEFAULT_WINDOW_S = 0.5
DEFAULT_OPEN_LOOP_S = None  # the whole clip
DEFAULT_SIM_DT = {"mujoco": 2e-3, "newton": 1e-3}
STEP_REFINEMENTS = 2  # halve the replaying engine's step up to this many times before reporting a failure


def tracked_states(tracked: TrackedMotion) -> BodyState:
    return BodyState(tracked.root_pos, tracked.root_quat, tracked.joint_pos, tracked.root_lin_vel,
                     tracked.root_ang_vel, tracked.joint_vel).astype(np.float64)


def crosscheck(robot: Robot, tracked: TrackedMotion, physics: PhysicsParams, engine: str,
               window_s: float = DEFAULT_WINDOW_S, open_loop_s: float | None = DEFAULT_OPEN_LOOP_S,
               threshold_rad: float = DEFAULT_THRESHOLD_RAD, sim_dt: float | None = None,
               device: str | None = None, terrain: Terrain | None = None) -> dict[str, Any]:
    """Replay ``tracked`` in ``engine`` (windowed + open loop) on ``terrain`` (None: flat ground; the one it was
    tracked on) and compare with its stored states.

    Newton's penalty contact is explicit: on light feet its 1 ms step is not converged (go2's 40 g feet: windowed
    joint RMSE 0.096 rad at 1 ms, 0.0125 at 0.5 ms, 0.0094 at 0.25 ms). Unless ``sim_dt`` is given, a failing
    check is repeated at half the step (up to twice) before it is reported as failed; ``timestep_s`` and
    ``step_refinements`` say which step decided. The open-loop replay (``open_loop_s`` 0: none) runs once, at that
    step."""
    check_open_loop(open_loop_s)
    refinements = 0
    bound = sim_dt if sim_dt is not None else DEFAULT_SIM_DT[engine]
    while True:
        result = _windows_at(robot, tracked, physics, engine, window_s, threshold_rad, bound, device, terrain)
        if result["passed"] or sim_dt is not None or refinements == STEP_REFINEMENTS:
            break
        refinements += 1
        bound /= 2
    result["step_refinements"] = refinements
    if open_loop_s is None or open_loop_s > 0:
        result.update(_open_loop_at(robot, tracked, physics, engine, open_loop_s, bound, device, terrain))
    result["terrain"] = (terrain or Terrain.flat()).spec
    return result


def check_open_loop(open_loop_s: float | None) -> None:
    """ConfigError unless ``open_loop_s`` is None (the whole clip) or a finite number of seconds >= 0 (0: none)."""
    if open_loop_s is not None and not (np.isfinite(open_loop_s) and open_loop_s >= 0):
        raise ConfigError(f"--open-loop must be a number of seconds >= 0 (0: no open-loop replay; leave it out for "
                          f"the whole clip), got {open_loop_s!r}")


def _replayer(robot: Robot, tracked: TrackedMotion, physics: PhysicsParams, engine: str, bound: float,
              device: str | None, worlds: int, terrain: Terrain | None = None):
    """The replaying engine at the largest step <= ``bound`` that divides the control period, sized for ``worlds``
    (Newton: its model is built once for the batch; every world costs a full step on CPU)."""
    steps = max(1, int(np.ceil(tracked.dt / bound - 1e-9)))
    return make_engine(engine, robot, physics, tracked.dt / steps, steps, Feet((), np.zeros((0, 3))),
                       mass_links(robot), device=device, worlds=worlds, terrain=terrain)


def _windows_at(robot: Robot, tracked: TrackedMotion, physics: PhysicsParams, engine: str, window_s: float,
                threshold_rad: float, bound: float, device: str | None,
                terrain: Terrain | None = None) -> dict[str, Any]:
    """Every window replayed from the tracked state at its start, all windows in one batch: the pass/fail figure."""
    dt, frames = tracked.dt, tracked.num_steps
    window = max(1, min(frames - 1, int(round(window_s / dt))))
    starts_at = list(range(0, frames - 1, window))
    sim = _replayer(robot, tracked, physics, engine, bound, device, len(starts_at), terrain)
    states = tracked_states(tracked)
    targets = np.asarray(tracked.pd_targets, dtype=np.float64)
    batch_targets, ends = [], []
    for f in starts_at:
        end = min(f + window, frames - 1)
        seg = targets[f:end + 1]
        batch_targets.append(np.concatenate([seg, np.repeat(seg[-1:], window + 1 - len(seg), 0)]))
        ends.append(end - f)
    batch = sim.rollout([sim.start(states[f]) for f in starts_at], np.stack(batch_targets))
    idx = np.arange(len(starts_at))
    end_frames = np.array(starts_at) + np.array(ends)
    dq = batch.states.joint_pos[idx, ends] - states.joint_pos[end_frames]
    droot = np.linalg.norm(batch.states.root_pos[idx, ends] - states.root_pos[end_frames], axis=-1)
    per_window = np.sqrt((dq ** 2).mean(-1))
    rmse = float(np.sqrt((dq ** 2).mean()))
    return {"engine": engine, "tracked_engine": other_engine(engine), "windows": len(starts_at),
            "window_s": window * dt, "joint_rmse_rad": rmse, "max_joint_dev_rad": float(np.abs(dq).max()),
            "worst_window_joint_rmse_rad": float(per_window.max()), "root_pos_err_m": float(droot.mean()),
            "max_root_pos_err_m": float(droot.max()), "per_window_joint_rmse_rad": per_window.tolist(),
            "timestep_s": sim.sim_dt, "model": getattr(sim, "model_source", None), "threshold": threshold_rad,
            "threshold_metric": "joint_rmse_rad (windowed, at window ends)", "passed": bool(rmse < threshold_rad)}


def _open_loop_at(robot: Robot, tracked: TrackedMotion, physics: PhysicsParams, engine: str,
                  open_loop_s: float | None, bound: float, device: str | None,
                  terrain: Terrain | None = None) -> dict[str, Any]:
    """The clip's first ``open_loop_s`` (None: all of it) replayed from its first state without feedback: it drifts
    by construction, reported beside the check, never judged."""
    dt, frames = tracked.dt, tracked.num_steps
    horizon = frames - 1 if open_loop_s is None else max(1, min(frames - 1, int(round(open_loop_s / dt))))
    sim = _replayer(robot, tracked, physics, engine, bound, device, 1, terrain)
    states = tracked_states(tracked)
    loop = sim.rollout(sim.start(states[0]), np.asarray(tracked.pd_targets, dtype=np.float64)[None, :horizon + 1])
    dq = loop.states.joint_pos[0] - states.joint_pos[:horizon + 1]
    return {"open_loop_s": horizon * dt, "open_loop_joint_rmse_rad": float(np.sqrt((dq ** 2).mean())),
            "open_loop_root_drift_m": float(np.linalg.norm(loop.states.root_pos[0, -1] - states.root_pos[horizon])),
            "open_loop_fell": bool(loop.diverged[0])}


def stage_crosscheck(run: RunDir, window_s: float = DEFAULT_WINDOW_S, threshold_rad: float = DEFAULT_THRESHOLD_RAD,
                     open_loop_s: float | None = DEFAULT_OPEN_LOOP_S, engine: str | None = None,
                     device: str | None = None) -> dict[str, Any]:
    """`akd crosscheck RUN`: the other engine replays RUN/tracked.npz on the run's terrain -> RUN/crosscheck.json
    (+ manifest)."""
    check_open_loop(open_loop_s)
    robot = load_run_robot(run)
    tracked = TrackedMotion.load(run.require(TRACKED, f"akd track {run.path}"))
    track = run.stage("track").get("metrics", {})
    physics = physics_from_dict(robot, track)
    engine = engine or other_engine(track.get("engine", "newton"))
    config = {"window_s": window_s, "threshold_rad": threshold_rad, "open_loop_s": open_loop_s, "engine": engine}
    with run.running_stage("crosscheck", config) as metrics:
        result = crosscheck(robot, tracked, physics, engine, window_s, open_loop_s, threshold_rad, device=device,
                            terrain=run_terrain(run))
        write_json_atomic(run.file(CROSSCHECK), result)
        metrics.update(result)
    return metrics


def crosscheck_when_told(run_path: str, device: str | None, conn) -> None:
    """Body of `akd run`'s background cross-check process: import Newton and warm the robot's kernels, wait for
    "go" on ``conn`` (a multiprocessing Connection; anything else ends the process), run :func:`stage_crosscheck`
    and send back ("done", None) or ("failed", the exception)."""
    try:
        run = RunDir(run_path)
        warm_up(load_run_robot(run), device, run_terrain(run))
        if conn.recv() != "go":
            return
        stage_crosscheck(run, device=device)
        conn.send(("done", None))
    except KeyboardInterrupt:
        return
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the main process
        try:
            conn.send(("failed", exc))
        except Exception:  # an exception that does not pickle
            conn.send(("failed", AKDError(f"cross-check failed: {type(exc).__name__}: {exc}")))


def warm_up(robot: Robot, device: str | None = None, terrain: Terrain | None = None) -> None:
    """Import Newton and load (on a cold cache: compile) every Warp kernel a Newton replay of ``robot`` on
    ``terrain`` launches, by stepping one world for two control periods (eager, then graph-captured). A failure
    here is left to the real cross-check to report."""
    try:
        engine = make_engine("newton", robot, default_physics(robot), 1e-3, 2, Feet((), np.zeros((0, 3))),
                             mass_links(robot), device=device, terrain=terrain)
        zeros = np.zeros(robot.num_dofs)
        state = BodyState(np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, 0.0, 1.0]), zeros, np.zeros(3), np.zeros(3),
                          zeros)
        engine.rollout(engine.start(state), np.zeros((1, 3, robot.num_dofs)))
    except Exception:  # noqa: S110 - warming is an optimisation only
        return
