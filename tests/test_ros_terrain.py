"""The replay's terrain marker (issue 46): the run's terrain as a latched visualization_msgs/Marker.

The replay node and a transient_local subscriber run in separate processes (tests/ros_runs.py: SHM transport, one
ROS_DOMAIN_ID per test); the subscriber starts only after the node has published, so the mesh arriving at all shows
the latching. The mesh helpers are also checked in-process.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from akd_core.io.rundir import RunDir
from akd_core.model.terrain import parse_terrain_spec, run_terrain

from .ros_runs import PYTHON, REPO, make_run, replay_args, ros_env, start

pytest.importorskip("rclpy", reason="the ROS 2 wheels are not installed (pip install -e '.[ros]')")

from akd_ros.convert import TERRAIN_MARKER_NS, load_replay_data, terrain_mesh_around  # noqa: E402

TOPIC = "/akd/terrain"
STAIRS = "stairs:0.05,0.3"

# A subscriber of its own (akd_ros.monitor records no Marker): argv = out.json topic timeout_s.
SUBSCRIBER = """
import json, sys, time
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from visualization_msgs.msg import Marker

out, topic, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
context = rclpy.Context()
rclpy.init(args=[], context=context)
node = Node("terrain_listener", context=context)
got = []
qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                 durability=DurabilityPolicy.TRANSIENT_LOCAL)
node.create_subscription(Marker, topic, got.append, qos)
executor = SingleThreadedExecutor(context=context)
executor.add_node(node)
end = time.monotonic() + timeout
while not got and time.monotonic() < end:
    executor.spin_once(timeout_sec=0.05)
time.sleep(0.3)  # a second message (there should be none) would arrive now
executor.spin_once(timeout_sec=0.05)
markers = [{"frame_id": m.header.frame_id, "stamp": [m.header.stamp.sec, m.header.stamp.nanosec], "ns": m.ns,
            "id": m.id, "type": m.type, "action": m.action, "scale": [m.scale.x, m.scale.y, m.scale.z],
            "color_a": m.color.a, "orientation_w": m.pose.orientation.w,
            "points": [[p.x, p.y, p.z] for p in m.points]} for m in got]
with open(out, "w") as f:
    json.dump({"markers": markers, "TRIANGLE_LIST": Marker.TRIANGLE_LIST, "ADD": Marker.ADD,
               "DELETE": Marker.DELETE}, f)
node.destroy_node()
rclpy.shutdown(context=context)
print(f"terrain_listener: {len(got)} marker(s)", flush=True)
"""


def _finish(proc: subprocess.Popen, timeout: float) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"process {proc.args} did not finish within {timeout} s")


def _late_terrain(tmp: Path, run_dir: Path, **params: object) -> tuple[dict, str]:
    """Start a looping replay, wait until it streams (the terrain went out before), then subscribe; returns
    (what the subscriber received, the node's log)."""
    env = ros_env(tmp)
    log_path = tmp / "node.log"
    node = start(replay_args(run_dir, loop=True, **params), env, log_path)
    out = tmp / "terrain.json"
    try:
        deadline = time.monotonic() + 40
        while "replaying" not in log_path.read_text():
            assert node.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        listener = start(["-c", SUBSCRIBER, str(out), TOPIC, "20"], env, tmp / "listener.log")
        _finish(listener, 40)
    finally:
        node.send_signal(signal.SIGINT)
        rc = _finish(node, 15)
    log = log_path.read_text()
    assert rc == 0, log
    assert out.exists(), f"the subscriber wrote nothing:\n{(tmp / 'listener.log').read_text()}\nnode:\n{log}"
    return json.loads(out.read_text()), log


def _stairs_run(path: Path) -> RunDir:
    """The synthetic a1 run (root walks x 0 -> 0.3 m) on stairs, as `akd gait --terrain` records them."""
    run = make_run(path, steps=100, tracked=False)
    run.update_manifest(terrain={"kind": "stairs", "spec": parse_terrain_spec(STAIRS).spec})
    return run


def _top_surface(points: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The highest up-facing triangle of ``points`` (3M, 3) over each (x, y): the height a ray straight down meets
    on the mesh (-inf where none)."""
    tri = points.reshape(-1, 3, 3)
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    up = np.cross(b - a, c - a)[:, 2] > 1e-12
    a, b, c = a[up], b[up], c[up]
    px, py = x[:, None], y[:, None]
    det = (b[:, 1] - c[:, 1]) * (a[:, 0] - c[:, 0]) + (c[:, 0] - b[:, 0]) * (a[:, 1] - c[:, 1])
    w0 = ((b[:, 1] - c[:, 1]) * (px - c[:, 0]) + (c[:, 0] - b[:, 0]) * (py - c[:, 1])) / det
    w1 = ((c[:, 1] - a[:, 1]) * (px - c[:, 0]) + (a[:, 0] - c[:, 0]) * (py - c[:, 1])) / det
    w2 = 1.0 - w0 - w1
    inside = (w0 >= -1e-9) & (w1 >= -1e-9) & (w2 >= -1e-9)
    z = w0 * a[:, 2] + w1 * b[:, 2] + w2 * c[:, 2]
    return np.where(inside, z, -np.inf).max(axis=1)


def test_stairs_run_publishes_a_latched_triangle_mesh_on_the_terrain_in_the_replay_frame(tmp_path):
    run = _stairs_run(tmp_path / "run")
    terrain = run_terrain(run)
    assert terrain.kind == "stairs" and not terrain.is_flat
    got, log = _late_terrain(tmp_path, run.path, odom_frame="world")
    assert len(got["markers"]) == 1, got["markers"]  # published once
    (marker,) = got["markers"]
    assert marker["frame_id"] == "world"  # the replay's fixed frame (odom_frame, also the root odometry's)
    assert marker["type"] == got["TRIANGLE_LIST"] and marker["action"] == got["ADD"]
    assert marker["ns"] == TERRAIN_MARKER_NS and marker["scale"] == [1.0, 1.0, 1.0]
    assert marker["color_a"] == 1.0 and marker["orientation_w"] == 1.0
    points = np.array(marker["points"])
    assert len(points) and len(points) % 3 == 0
    assert "published /akd/terrain: stairs terrain" in log and "in world (transient_local)" in log

    # the mesh spans the root path (x 0 .. 0.3, y 0) plus 1 m, and no further than the boxes cut by that range
    root = load_replay_data(run, "reference").root_pos
    assert points[:, 0].min() <= root[:, 0].min() - 1.0 + 1e-6 and points[:, 0].max() >= root[:, 0].max() + 1.0 - 1e-6
    assert points[:, 1].min() <= -1.0 + 1e-6 and points[:, 1].max() >= 1.0 - 1e-6
    assert points[:, 0].max() < root[:, 0].max() + 1.0 + 0.3 + 1e-6  # one tread (0.3 m) past the range at most

    # tread vertices (corners of up-facing horizontal triangles): Terrain.height there, nudged onto the tread
    tri = points.reshape(-1, 3, 3)
    normal_z = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])[:, 2]
    flat = np.ptp(tri[:, :, 2], axis=1) < 1e-9
    treads = tri[(normal_z > 0) & flat & (tri[:, 0, 2] > 1e-6)]  # above the z = 0 ground: the stair boxes
    assert len(treads) >= 2 * 3  # x up to 1.3 m: the treads at 0.05, 0.10, 0.15 m (0.33 m start, 0.3 m run)
    centroid = treads.mean(axis=1, keepdims=True)
    nudged = treads + 1e-3 * (centroid - treads) / np.linalg.norm(centroid - treads, axis=-1, keepdims=True)
    np.testing.assert_allclose(treads[:, :, 2], terrain.height(nudged[:, :, 0], nudged[:, :, 1]), atol=1e-6)
    assert sorted({round(z, 6) for z in treads[:, 0, 2]})[:3] == [0.05, 0.1, 0.15]

    # and everywhere over the path's range (off the nosings), the mesh's top surface is Terrain.height
    gx, gy = np.meshgrid(np.linspace(-0.95, 1.25, 45), np.linspace(-0.95, 0.95, 9), indexing="ij")
    x, y = gx.ravel(), gy.ravel()
    away = terrain.edge_distance(x, y) > 0.01
    np.testing.assert_allclose(_top_surface(points, x[away], y[away]), terrain.height(x[away], y[away]), atol=1e-6)


def test_flat_run_publishes_a_delete_and_no_mesh(tmp_path):
    run = make_run(tmp_path / "run", steps=50, tracked=False)
    assert run_terrain(run).is_flat
    got, log = _late_terrain(tmp_path, run.path)
    assert len(got["markers"]) == 1, got["markers"]
    (marker,) = got["markers"]
    assert marker["action"] == got["DELETE"] and marker["points"] == []
    assert marker["ns"] == TERRAIN_MARKER_NS and marker["frame_id"] == "odom"
    assert "flat ground, a DELETE of the terrain marker" in log


def test_terrain_topic_can_be_turned_off(tmp_path):
    run = _stairs_run(tmp_path / "run")
    proc = subprocess.run([PYTHON, *replay_args(run.path, terrain_topic="''", rate=1000.0, linger=0.0)], cwd=REPO,
                          env=ros_env(tmp_path), capture_output=True, text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "replay finished" in out and "/akd/terrain" not in out


def test_a_mesh_over_the_budget_is_resampled_on_the_surface():
    terrain = parse_terrain_spec("rough:0.05")  # a 0.05 m height grid
    path = np.array([[0.0, 0.0, 0.3], [12.0, 0.5, 0.3]])
    whole = terrain_mesh_around(terrain, path)
    assert whole.resampled_cell is None and whole.num_triangles == whole.full_triangles > 20_000
    small = terrain_mesh_around(terrain, path, max_triangles=20_000)
    assert small.num_triangles <= 20_000 and small.full_triangles == whole.num_triangles
    assert small.resampled_cell is not None and small.resampled_cell > 0.05
    v = small.vertices.astype(np.float64)
    assert v[:, 0].min() == pytest.approx(-1.0) and v[:, 0].max() == pytest.approx(13.0, abs=1e-5)
    np.testing.assert_allclose(v[:, 2], terrain.height(v[:, 0], v[:, 1]), atol=1e-6)
    assert small.faces.min() == 0 and small.faces.max() == len(v) - 1  # every vertex used


def test_mesh_keeps_only_the_path_surroundings():
    terrain = parse_terrain_spec(STAIRS)  # 67 boxes over 20 m
    mesh = terrain_mesh_around(terrain, np.array([[0.0, 0.0, 0.3], [0.3, 0.0, 0.3]]))
    assert mesh.x_range == pytest.approx((-1.0, 1.3)) and mesh.y_range == pytest.approx((-1.0, 1.0))
    assert mesh.vertices[:, 0].max() <= 1.3 + 0.3 + 1e-6  # the boxes reaching into the range, no more
    # the ground quad, and of the 4 stair boxes that start before x = 1.3 the faces reaching into the range: top,
    # bottom, front and back (the side walls at y = +-2 m are out), the last box's back (x = 1.5) out too
    assert mesh.num_triangles == 2 + 3 * 8 + 6
