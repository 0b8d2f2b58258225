"""Physically consistent tracked runs made in seconds, for the policy and ROS simulator tests.

A gait-library clip tracked by the tracker's inverse-dynamics feedforward replay in MuJoCo: exactly what `akd track`
stores when that replay already tracks (``selected_targets: feedforward``), without the minutes of sampling MPC.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from akd_core.export.common import load_episode
from akd_core.export.hdf5 import write_hdf5
from akd_core.io.rundir import REFERENCE, ROBOT_URDF, TRACKED, RunDir
from akd_core.model.legs import find_legs
from akd_core.model.robot import Robot
from akd_core.motion.gait import generate_gait
from akd_core.motion.prompt import spec_from_prompt
from akd_core.physics.tracker import TrackingConfig, build, execute, record_metrics


def feedforward_run(path: Path, robot: Robot, prompt: str, duration: float = 2.0, fps: float = 50.0) -> RunDir:
    """RUN/{robot.urdf, reference.npz, tracked.npz, manifest.json} of ``prompt`` tracked by the feedforward replay."""
    run = RunDir(path, create=True)
    if run.file(TRACKED).exists():
        return run
    legs = find_legs(robot)
    spec, _ = spec_from_prompt(prompt, robot, legs)
    motion = generate_gait(robot, spec, duration=duration, fps=fps, legs=legs, prompt=prompt)
    robot.to_urdf(run.file(ROBOT_URDF))
    motion.save(run.file(REFERENCE))
    cfg = TrackingConfig(engine="mujoco", device="cpu")
    setup = build(robot, motion, cfg)
    targets = setup.feedforward.astype(np.float32)
    record, _ = execute(setup.engine, setup.start, targets.astype(np.float64))
    tracked, metrics = record_metrics(setup, record, targets)
    tracked.save(run.file(TRACKED))
    run.update_manifest(robot=robot.name, prompt=prompt)
    run.set_stage("track", status="done", seconds=0.0, config=cfg.to_dict(),
                  metrics={**metrics, "selected_targets": "feedforward", "engine": "mujoco", "method": "mpc",
                           "sim_dt_s": setup.engine.sim_dt, "integrator": setup.engine.integrator,
                           **setup.physics.to_dict()})
    return run


def dataset_of(runs: list[RunDir], path: Path) -> Path:
    """`akd export --format hdf5` of the runs (no quality gates)."""
    return write_hdf5([load_episode(r.path) for r in runs], path, append=False)
