"""AKD: articulated kinematics distillation for legged robots (Python distribution + ROS 2 ament_python package)."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
PACKAGE = "akd"

ROS_WHEELS = [
    # real rclpy + Fast DDS from PyPI; users with a ROS 2 install use their own rclpy instead
    "ros-kilted-rclpy",
    "ros-kilted-rmw-fastrtps-cpp",
    "ros-kilted-trajectory-msgs",
    "ros-kilted-sensor-msgs",
    "ros-kilted-std-msgs",
    "ros-kilted-geometry-msgs",
    "ros-kilted-nav-msgs",
    "ros-kilted-std-srvs",
    "ros-kilted-visualization-msgs",  # the replay's terrain Marker
]


def _tree(folder: str, dest: str) -> list[tuple[str, list[str]]]:
    """Every file under HERE/folder, grouped by sub-folder, for data_files under ``dest`` (keeps the layout)."""
    root = HERE / folder
    groups: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*")) if root.is_dir() else []:
        if path.is_file() and not any(p.startswith(".") or p == "__pycache__" for p in path.relative_to(root).parts):
            groups.setdefault((Path(dest) / path.parent.relative_to(root)).as_posix(), []).append(str(path))
    return list(groups.items())


def _data_files() -> list[tuple[str, list[str]]]:
    """ament index marker, package.xml, launch files, robot URDFs and the shipped video prior (models/, found by
    akd_core.sds.prior.default under <prefix>/share/akd/models when not run from the source tree), so `colcon build`
    and `pip install .` install them."""
    files = [
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", sorted(str(p) for p in (HERE / "launch").glob("*.launch.py"))),
        (f"share/{PACKAGE}/robots", sorted(str(p) for p in (HERE / "robots").glob("*") if p.is_file())),
        *_tree("models", f"share/{PACKAGE}/models"),
    ]
    return [(dest, [str(Path(f).relative_to(HERE)) if Path(f).is_absolute() else f for f in srcs])
            for dest, srcs in files if srcs]


setup(
    name=PACKAGE,
    version="0.1.0",
    description="Reference gaits, physically tracked PD targets and imitation datasets for legged robots "
                "from a text prompt and a URDF",
    long_description=(HERE / "README.md").read_text() if (HERE / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["akd_core", "akd_core.*", "akd_ros", "akd_ros.*"]),
    data_files=_data_files(),
    install_requires=[
        "numpy>=1.26",
        "scipy>=1.11",
        "clarabel>=0.9",  # sparse convex QP: the body motion of gaits with flight phases (motion/centroidal.py)
        "torch>=2.4",  # the Makefile installs torch==2.13.0 (CPU) first; see README
        "warp-lang>=1.10",
        "newton>=1.5",
        "mujoco>=3.3",
        "gsplat>=1.5",
        "diffusers>=0.32",
        "transformers>=4.46",
        "accelerate>=1.0",
        "sentencepiece>=0.2",
        "yourdfpy>=0.0.56",
        "trimesh>=4.0",
        "lxml>=5.0",
        "h5py>=3.10",
        "rosbags>=0.10",
        "pyarrow>=15",
        "imageio>=2.34",
        "imageio-ffmpeg>=0.5",
        "Pillow>=10",
        "tqdm>=4.66",
        "pyyaml>=6.0",
    ],
    extras_require={
        "ros": ROS_WHEELS,
        "ray": ["ray>=2.40"],
        # akd export-policy, akd ros policy; akd train-policy --method ppo (rsl-rl-lib)
        "policy": ["onnx>=1.16", "onnxruntime>=1.18", "rsl-rl-lib>=5.5,<6"],
        # `make test` runs the suite on every core (pytest-xdist) and builds the docs site strictly
        "test": ["pytest>=8", "pytest-timeout>=2.3", "pytest-xdist>=3.5", "ruff>=0.6", "example-robot-data>=4.1",
                 "import-linter>=2.1", "mkdocs>=1.6", "mkdocs-material>=9.5"],
    },
    entry_points={
        "console_scripts": [
            "akd = akd_core.cli:main",
            "akd_replay = akd_ros.replay:main",
            "akd_generator = akd_ros.generator:main",
            "akd_sim = akd_ros.sim:main",
            "akd_policy = akd_ros.policy_node:main",
        ],
    },
    zip_safe=True,
)
