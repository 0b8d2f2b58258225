"""AKD core: from a prompt and a robot (URDF or built-in skeleton) to physically tracked motion and datasets.

The public API, one import away (loaded lazily: ``import akd_core`` loads no torch, MuJoCo or Warp)::

    import akd_core as akd

    run = akd.RunDir("runs/trot", create=True)
    akd.stage_gait(run, "quadruped", "a dog trotting forward")    # -> reference.npz
    akd.stage_track(run)                                          # -> tracked.npz
    akd.stage_export(run, "hdf5")                                 # -> export/dataset.hdf5

Nouns: :class:`Robot` (static articulation), :class:`Motion` (kinematic reference), :class:`TrackedMotion`
(simulated result), :class:`RunDir` (the files of one run). Verbs, one per stage, each reading and writing a run
directory: :func:`stage_gait`, :func:`stage_distill`, :func:`stage_track`, :func:`stage_crosscheck`,
:func:`stage_preview`, :func:`stage_render`, :func:`stage_export`, and :func:`run_pipeline` for all of them (the
verbs keep their module names' ``stage_`` prefix: ``akd_core.export`` and ``akd_core.render`` are folders).
The package's folders follow the pipeline
(docs/architecture.md): io <- model <- motion <- render <- sds, physics <- export <- learn <- pipeline, batch <- cli.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from akd_core.io.errors import AKDError

__version__ = "0.1.0"

__all__ = [
    "AKDError", "Motion", "PipelineConfig", "Robot", "RunDir", "TrackedMotion", "__version__", "load_robot",
    "run_pipeline", "stage_crosscheck", "stage_distill", "stage_export", "stage_gait", "stage_preview", "stage_render",
    "stage_track",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs; at run time __getattr__ loads on first use
    from akd_core.export import stage_export
    from akd_core.io.rundir import RunDir
    from akd_core.model.load import load_robot
    from akd_core.model.robot import Robot
    from akd_core.motion.clip import Motion, TrackedMotion
    from akd_core.motion.stage import stage_gait
    from akd_core.physics.crosscheck import stage_crosscheck
    from akd_core.physics.tracker import stage_track
    from akd_core.pipeline import PipelineConfig, run_pipeline
    from akd_core.render.preview import stage_preview
    from akd_core.render.run_video import stage_render
    from akd_core.sds.distill import stage_distill


def __getattr__(name: str) -> Any:
    # each branch imports its stage only when first asked for: torch, MuJoCo and Warp load late
    if name == "RunDir":
        from akd_core.io.rundir import RunDir as value
    elif name == "load_robot":
        from akd_core.model.load import load_robot as value
    elif name == "Robot":
        from akd_core.model.robot import Robot as value
    elif name == "Motion":
        from akd_core.motion.clip import Motion as value
    elif name == "TrackedMotion":
        from akd_core.motion.clip import TrackedMotion as value
    elif name == "stage_gait":
        from akd_core.motion.stage import stage_gait as value
    elif name == "stage_distill":
        from akd_core.sds.distill import stage_distill as value
    elif name == "stage_track":
        from akd_core.physics.tracker import stage_track as value
    elif name == "stage_crosscheck":
        from akd_core.physics.crosscheck import stage_crosscheck as value
    elif name == "stage_preview":
        from akd_core.render.preview import stage_preview as value
    elif name == "stage_render":
        from akd_core.render.run_video import stage_render as value
    elif name == "stage_export":
        from akd_core.export import stage_export as value
    elif name in ("run_pipeline", "PipelineConfig"):
        from akd_core import pipeline

        value = getattr(pipeline, name)
    else:
        raise AttributeError(f"module 'akd_core' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
