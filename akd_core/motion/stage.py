"""The gait stage (`akd gait`): robot + prompt -> the run's robot.urdf and reference.npz, from the gait library.

The prompt becomes a :class:`~akd_core.motion.gait.GaitSpec` (:mod:`akd_core.motion.prompt`), the spec a clip
(:mod:`akd_core.motion.gait`), and the clip's quality and dynamic feasibility go into the manifest. The preview video
is rendered by the callers (`akd gait`, `akd run`'s preview stage): the motion layer draws nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from akd_core.io.errors import ConfigError
from akd_core.io.rundir import REFERENCE, RunDir
from akd_core.model.legs import find_legs, placeholder_limits
from akd_core.model.load import load_robot, write_run_robot
from akd_core.model.terrain import Terrain, resolve_terrain, save_run_terrain, terrain_from_prompt
from akd_core.motion.feasibility import feasibility_summary
from akd_core.motion.gait import TRACKING_VELOCITY_RATIO, generate_gait_result, stance_pose
from akd_core.motion.metrics import motion_metrics
from akd_core.motion.program import (
    generate_program,
    is_program_prompt,
    program_from_commands,
    program_from_prompt,
    segment_figures,
    transition_figures,
)
from akd_core.motion.prompt import spec_from_prompt

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- stage + CLI
DEFAULT_DURATION = 4.0  # s, a single gait's clip when no duration is asked
TERRAIN_GAP = 0.2  # m between the front feet and where a procedural terrain feature begins (docs/terrain.md: <= 0.5)


def stage_gait(run: RunDir, robot_spec: str, prompt: str, duration: float | None = None, fps: float = 50.0,
               seed: int = 0, feet: Sequence[str] | None = None, package_paths: Sequence[str] = (),
               spec_overrides: dict[str, Any] | None = None,
               max_velocity_ratio: float = TRACKING_VELOCITY_RATIO, commands: str | None = None,
               terrain: str | None = None) -> dict[str, Any]:
    """`akd gait`: robot + prompt -> RUN/robot.urdf (+ RUN/robot.xml for an MJCF robot), RUN/reference.npz,
    manifest stage "gait".

    Reference clips keep joint speeds below ``max_velocity_ratio`` x the URDF limits (default 0.75), so the PD
    targets that track them (which lead the reference) stay within the limits too.

    run: akd_core.io.rundir.RunDir. Returns the recorded metrics (motion_metrics of the clip, IK error, speed, and the
    dynamic feasibility summary of akd_core.motion.feasibility).

    A prompt that describes a sequence ("walks, then trots, then stops"), or a command timeline file ``commands``,
    makes a motion program (:mod:`akd_core.motion.program`): its clip lasts the sum of its segments unless
    ``duration`` is given, and the stage config records each segment as played ("segments"). A single gait lasts
    ``duration`` or DEFAULT_DURATION s.

    ``terrain``: a ``--terrain`` spec or scene file (:func:`akd_core.model.terrain.resolve_terrain`: it wins over
    terrain words in the prompt and over the robot's own MJCF scene). The terrain is recorded in the manifest and,
    unless flat, in RUN/terrain.npz; every later stage reads it from there.
    """

    if not commands and (not prompt or not str(prompt).strip()):
        raise ConfigError("--prompt is empty; describe the motion, e.g. --prompt 'a dog trotting forward'")
    robot = load_robot(robot_spec, package_paths)
    legs = find_legs(robot, list(feet) if feet else None)
    facing = _Facing(robot, legs)
    robot, legs = facing.robot, facing.legs  # what the gait is planned on (the file's robot unless it faces +-y)
    ground, ground_notes = _terrain(robot, legs, robot_spec, prompt or "", terrain)
    for note in ground_notes:
        log.info(note)
    placeholder = placeholder_limits(robot, legs)
    if placeholder:
        log.warning(placeholder)
    if commands or is_program_prompt(prompt):
        if spec_overrides:
            raise ConfigError("gait spec overrides apply to a single gait; a program's segments come from its prompt "
                              "or command file")
        return _stage_program(run, robot, legs, robot_spec, prompt or "", duration, fps, seed, commands,
                              max_velocity_ratio, ground, ground_notes, facing)
    duration = DEFAULT_DURATION if duration is None else duration
    spec, notes = spec_from_prompt(prompt, robot, legs)
    if spec_overrides:
        spec = dataclasses.replace(spec, **spec_overrides)
    for note in notes:
        log.warning(note) if note.startswith("warning") else log.info(note)
    notes = notes + [placeholder] if placeholder else notes  # logged above; recorded with the others
    run.update_manifest(robot=str(robot_spec), robot_format=facing.file_robot.source_format, prompt=prompt,
                        seeds={"gait": int(seed)})
    config = {"robot": str(robot_spec), "prompt": prompt, "duration": duration, "fps": fps, "seed": seed,
              "max_velocity_ratio": max_velocity_ratio,
              "feet": [leg.foot_link for leg in legs], "spec": spec.to_dict()}
    with run.running_stage("gait", config) as metrics:
        result = generate_gait_result(robot, spec, duration, fps, legs, prompt=prompt,
                                      max_velocity_ratio=max_velocity_ratio, terrain=ground)
        robot = facing.file_robot
        write_run_robot(run, robot)  # robot.urdf, and robot.xml for an MJCF robot
        motion = facing.to_file(result.motion)
        save_run_terrain(run, ground, motion.root_pos[:, :2], ground_notes)
        config["terrain"] = ground.spec
        motion.save(run.file(REFERENCE))
        config["spec"] = result.spec.to_dict()
        config["notes"] = facing.notes + notes + [n for n in result.spec.notes if n not in notes]
        run.set_stage("gait", config=config)
        quality = motion_metrics(robot, motion.root_pos, motion.root_quat, motion.joint_pos, motion.fps,
                                 motion.foot_names, motion.foot_offsets, motion.foot_contacts,
                                 contact_points=motion.contact_points(), contact_parts=motion.contact_parts(),
                                 terrain=ground)
        metrics.update(quality)
        metrics.update(ik_foot_error_m=result.ik_error_m, asked_speed_mps=float(spec.speed),
                       speed_command_mps=result.spec.speed, frequency_hz=result.spec.frequency,
                       asked_turn_rate_radps=float(spec.turn_rate), turn_rate_command_radps=result.spec.turn_rate,
                       num_frames=motion.num_frames, joint_effort_ratio=result.effort_ratio)
        if result.sideways_limit:  # legs without a hip roll: a turn or sideways step lowered, and why
            metrics.update(turn_limited_by=result.sideways_limit)
        if result.limit is not None:  # slower than asked: which joint's limit, how many times it, which limit
            metrics.update(speed_limited_by=result.limit.joint, speed_limit_ratio=float(result.limit.ratio),
                           speed_limit_kind=result.limit.kind)
        metrics.update({f"walk_{k}": float(v) for k, v in result.figures.items()})  # human-like walks
        metrics.update(feasibility_summary(robot, motion))  # CoP vs support polygon, residual wrench
    return metrics


class _Facing:
    """A robot that faces along its base's y axis (:func:`akd_core.model.legs.facing_turn`) is planned with its base
    frame turned to face +x; the reference is written in the robot file's base frame (same root origin, the root
    orientation times the turn), so every later stage runs the file's robot."""

    def __init__(self, robot: Any, legs: Sequence[Any]):
        from akd_core.model.legs import facing_turn, turned_base

        self.file_robot, self.robot, self.legs, self.notes = robot, robot, list(legs), []
        self.turn = facing_turn(robot, legs)
        if self.turn is not None:
            self.robot = turned_base(robot, self.turn)
            self.legs = find_legs(self.robot, [leg.foot_link for leg in legs])
            side = "+y" if self.turn[1, 0] < 0 else "-y"
            self.notes = [f"robot '{robot.name}' faces its base's {side} (its legs hinge about the base's x axis): "
                          f"planned in a base frame turned {'-' if side == '+y' else '+'}90 deg about z so that it "
                          "walks forward; reference.npz holds the robot file's base orientation"]
            log.info(self.notes[0])

    def to_file(self, motion: Any) -> Any:
        """``motion`` of the planning robot as a motion of the robot file's (the same one when not turned)."""
        if self.turn is None:
            return motion
        from akd_core.model.spatial import matrix_to_quat, quat_multiply

        motion.root_quat = quat_multiply(motion.root_quat, matrix_to_quat(self.turn)).astype(np.float32)
        return motion


def _terrain(robot: Any, legs: Sequence[Any], robot_spec: str, prompt: str, spec: str | None) -> tuple[Any, list[str]]:
    """The run's terrain and notes (:func:`akd_core.model.terrain.resolve_terrain`); a procedural feature begins
    TERRAIN_GAP m ahead of the robot's front feet in its stance."""
    asked = bool(spec and str(spec).strip()) or terrain_from_prompt(prompt)[0] is not None or \
        str(robot_spec).lower().endswith(".xml")
    if not asked:
        return Terrain.flat(), []
    front = float(stance_pose(robot, legs).feet_body[:, 0].max()) if asked else 0.0
    return resolve_terrain(spec, prompt, robot_path=robot_spec, start_x=max(front, 0.0) + TERRAIN_GAP)


def _stage_program(run: RunDir, robot: Any, legs: Sequence[Any], robot_spec: str, prompt: str,
                   duration: float | None, fps: float, seed: int, commands: str | None,
                   max_velocity_ratio: float, ground: Any = None, ground_notes: Sequence[str] = (),
                   facing: _Facing | None = None) -> dict[str, Any]:
    """The gait stage of a motion program (prompt or command timeline): see :func:`stage_gait`."""
    facing = facing or _Facing(robot, legs)
    program = (program_from_commands(commands, robot, legs, prompt) if commands
               else program_from_prompt(prompt, robot, legs))
    for note in program.notes:
        log.info(note)
    run.update_manifest(robot=str(robot_spec), robot_format=facing.file_robot.source_format, prompt=prompt,
                        seeds={"gait": int(seed)})
    config = {"robot": str(robot_spec), "prompt": prompt, "commands": None if commands is None else str(commands),
              "duration": duration, "fps": fps, "seed": seed, "max_velocity_ratio": max_velocity_ratio,
              "feet": [leg.foot_link for leg in legs], "program": program.to_dict()}
    with run.running_stage("gait", config) as metrics:
        result = generate_program(robot, program, fps, legs, prompt=prompt, max_velocity_ratio=max_velocity_ratio,
                                  duration=duration, terrain=ground)
        robot = facing.file_robot
        write_run_robot(run, robot)
        motion = facing.to_file(result.motion)
        if ground is not None:
            save_run_terrain(run, ground, motion.root_pos[:, :2], ground_notes)
            config["terrain"] = ground.spec
        motion.save(run.file(REFERENCE))
        segments = [item.to_dict() for item in result.segments]
        for row, figures in zip(segments, segment_figures(motion, segments)):
            row["reference"] = figures
        moving = [item for item in result.segments if item.segment.kind == "move"]
        main = max(moving, key=lambda item: abs(item.command[0]) + abs(item.command[1])) if moving else None
        config["segments"] = segments
        # the fastest moving segment stands for the clip where one spec is read (summaries, the zoo bench)
        config["spec"] = main.spec.to_dict() if main is not None else {"pattern": "stand", "speed": 0.0}
        config["notes"] = facing.notes + list(result.notes)
        run.set_stage("gait", config=config)
        quality = motion_metrics(robot, motion.root_pos, motion.root_quat, motion.joint_pos, motion.fps,
                                 motion.foot_names, motion.foot_offsets, motion.foot_contacts,
                                 contact_points=motion.contact_points(), contact_parts=motion.contact_parts(),
                                 terrain=ground)
        metrics.update(quality)
        metrics.update(ik_foot_error_m=result.ik_error_m, num_frames=motion.num_frames,
                       joint_effort_ratio=result.effort_ratio, num_segments=len(segments),
                       asked_speed_mps=float(max((abs(s.asked[0]) + abs(s.asked[1]) for s in result.segments),
                                                 default=0.0)) if main is None else
                       float(main.segment.speed),
                       speed_command_mps=float(np.hypot(*main.command[:2])) if main is not None else 0.0,
                       frequency_hz=float(main.spec.frequency) if main is not None else 0.0)
        if main is not None and main.limit is not None:
            metrics.update(speed_limited_by=main.limit.joint, speed_limit_ratio=float(main.limit.ratio),
                           speed_limit_kind=main.limit.kind)
        metrics.update(transition_figures(motion, result.segments))
        metrics.update({f"walk_{k}": float(v) for k, v in getattr(result, "figures", {}).items()})
        metrics.update(feasibility_summary(robot, motion))
    return metrics
