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
    "erd_quadruped": "quadruped_description/urdf/quadruped.urdf",  # knees locked by their limits (0, 0)
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


@pytest.fixture(scope="session")
def a1_urdf() -> Path:
    return example_robot_urdf("a1")


@pytest.fixture(scope="session")
def solo12_urdf() -> Path:
    return example_robot_urdf("solo12")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Keep AKD's own caches (converted meshes) per session, and ROS logs in a temp dir."""
    cache = tmp_path_factory.getbasetemp() / "akd-cache"
    monkeypatch.setenv("AKD_CACHE", str(cache))
    monkeypatch.setenv("ROS_LOG_DIR", str(tmp_path_factory.getbasetemp() / "ros-logs"))
    yield


def pytest_configure(config):
    os.environ.setdefault("PYTHONHASHSEED", "0")
