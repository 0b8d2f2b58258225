"""Terrain: the ground a clip is generated, tracked, rendered and exported on.

A :class:`Terrain` is a handful of static primitives in the world frame, the same ones MuJoCo and Newton collide with:
planes (:class:`TerrainPlane`), boxes (:class:`TerrainBox`) and height fields (:class:`HeightGrid`). Everything else
is derived from them, so the numbers agree across consumers:

- ``height(x, y)`` / ``normal(x, y)`` (vectorised): the first surface a ray straight down meets, what ``mujoco.mj_ray``
  returns on the compiled geoms (height fields interpolated on MuJoCo's and Newton's triangles);
- ``edges`` / ``edge_distance(x, y)``: the height discontinuities (stair nosings, step and terrain borders) for
  foothold placement;
- ``mjcf_fragment()`` / ``add_to_mjspec()`` / ``write_mjcf_scene()``: the MuJoCo geoms; ``add_to_newton(builder)``:
  the Newton shapes; ``render_mesh()``: a triangle mesh; ``to_npz()`` / ``from_npz()``: a height grid file.

Where terrains come from: ``--terrain SPEC`` (:func:`parse_terrain_spec`), an MJCF scene (:meth:`Terrain.from_mjcf`:
its static boxes, height fields and planes), prompt words (:func:`terrain_from_prompt`), all three arbitrated by
:func:`resolve_terrain`.

Layout conventions (docs/terrain.md):

- z up, metres, z = 0 is the ground under the start; the robot starts at x = y = 0 facing +x (the *start heading
  frame*). ``heading`` (degrees, about +z) turns a whole procedural layout.
- A procedural feature begins ``start`` metres ahead of x = 0 (``start_x``, default :data:`DEFAULT_START_X`; the gait
  stage passes its front feet's x plus a gap, so the feature begins at most 0.5 m ahead of them) and runs ``length``
  metres (default :data:`DEFAULT_LENGTH`), ``width`` metres wide centred on y = 0; :data:`BACK` metres of flat ground
  lie behind x = 0. Outside that region (``bounds``) the ground drops to a lower plane.
- ``slope:DEG``: DEG > 0 rises along +x; a height field (exact: planar cells).
- ``stairs:RISE,RUN[,up|down[,STEPS]]``: treads RUN deep, each RISE above (``up``) or below (``down``) the last, the
  first nosing at ``start``; they go on to the end of ``length``, or after STEPS steps end in a landing that does.
  Boxes. ``steps:HEIGHT,LENGTH[,COUNT]``: COUNT blocks HEIGHT tall (< 0: pits) and LENGTH long, LENGTH apart. Boxes.
- ``rough:AMPLITUDE[,WAVELENGTH]``: smooth noise (random plane waves around WAVELENGTH, default
  :data:`DEFAULT_ROUGH_WAVELENGTH` m) scaled to peak +-AMPLITUDE, faded in over one wavelength after ``start``,
  ``seed=N`` (default 0); a height field.
- ``heightmap:FILE[,CELL[,SCALE]]``: a PNG (seen from above: columns +x, top row +y; grey / full scale x SCALE m)
  or a ``.npy`` (heights[i, j] at x = start + i CELL, y centred, metres x SCALE); CELL default
  :data:`DEFAULT_HEIGHTMAP_CELL` m, SCALE 1.

This module imports numpy, :mod:`akd_core.io` and :mod:`akd_core.model.spatial`; MuJoCo, imageio and Newton/Warp
are imported inside the functions that need them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from akd_core.io.errors import ConfigError, MJCFError
from akd_core.io.fileio import save_npz_atomic, write_text_atomic
from akd_core.model.spatial import fmt, matrix_to_quat, quat_to_matrix, xyzw_to_wxyz, yaw_quat

DEFAULT_START_X = 0.3  # m ahead of x = 0 where a procedural feature begins
DEFAULT_LENGTH = 20.0  # m of feature ahead of its start
DEFAULT_WIDTH = 4.0  # m, centred on y = 0
BACK = 2.0  # m of flat ground at z = 0 behind x = 0 inside the terrain's bounds
DEFAULT_ROUGH_WAVELENGTH = 0.5  # m
DEFAULT_HEIGHTMAP_CELL = 0.05  # m
NPZ_CELL = 0.02  # m: the default and largest cell of terrain.npz (docs/terrain.md)
CATCH_GAP = 0.05  # m: the plane under a height-field terrain lies this far below its lowest point
BOX_FOOT = 0.1  # m: boxes reach this far below the plane they stand on (no seam at the plane)
EDGE_MIN_JUMP = 0.01  # m: a height discontinuity at least this tall is an edge
EDGE_MAX_SLOPE = math.tan(math.radians(70.0))  # height-grid neighbours steeper than this straddle an edge
SCHEMA = 1  # terrain.npz

_PROMPT_RISE = 0.10  # m, stairs named in a prompt
_PROMPT_RUN = 0.30
_PROMPT_SLOPE_DEG = 10.0
_PROMPT_STEP_SIZE = (0.08, 1.0)  # height, length m
_PROMPT_ROUGH_AMPLITUDE = 0.03  # m
_NOISE_WAVES = 32


# ----------------------------------------------------------------------------- primitives
@dataclass(frozen=True, eq=False)
class TerrainPlane:
    """An infinite plane through ``point`` (3,) m with unit upward ``normal`` (3,) (normal z > 0)."""

    point: np.ndarray
    normal: np.ndarray

    @classmethod
    def horizontal(cls, z: float = 0.0) -> TerrainPlane:
        return cls(np.array([0.0, 0.0, float(z)]), np.array([0.0, 0.0, 1.0]))

    @property
    def is_horizontal(self) -> bool:
        return bool(abs(self.normal[0]) < 1e-12 and abs(self.normal[1]) < 1e-12)


@dataclass(frozen=True, eq=False)
class TerrainBox:
    """A static box: ``center`` (3,) m, ``quat_xyzw`` (4,), ``half_size`` (3,) m along its own axes."""

    center: np.ndarray
    quat_xyzw: np.ndarray
    half_size: np.ndarray


@dataclass(frozen=True, eq=False)
class HeightGrid:
    """A height field (MuJoCo ``hfield``, Newton ``Heightfield``): ``heights`` (nx, ny) m, absolute z, with
    ``heights[i, j]`` the surface at local (-hx + i cell_x, -hy + j cell_y) of a frame at ``center`` (2,) m turned
    ``yaw`` rad about +z (hx, hy = :attr:`half_extent`). Each cell is two triangles split along its (i, j)-(i+1, j+1)
    diagonal, as MuJoCo and Newton's contacts do. The solid reaches down to ``bottom_z`` (< every height)."""

    center: np.ndarray
    yaw: float
    cell: np.ndarray  # (2,) cell_x, cell_y m
    heights: np.ndarray
    bottom_z: float

    @property
    def half_extent(self) -> np.ndarray:
        return 0.5 * (np.array(self.heights.shape, dtype=np.float64) - 1.0) * self.cell


@dataclass(frozen=True)
class MjcfFragment:
    """MuJoCo XML of a terrain: ``assets`` (``<hfield>`` elements for ``<asset>``) and ``geoms`` (for
    ``<worldbody>``); both may be empty strings."""

    assets: str
    geoms: str


# ----------------------------------------------------------------------------- the terrain
@dataclass(frozen=True, eq=False)
class Terrain:
    """The static ground: planes, boxes and height grids in the world frame (module docstring).

    ``kind``: flat, slope, stairs, steps, rough, heightmap or mjcf; ``spec``: the ``--terrain`` text that re-creates
    it (every parameter explicit; a file path for mjcf); ``region``: ((xmin, xmax), (ymin, ymax)) m the layout was
    made for (None: the primitives' footprint); ``notes``: what a reader should know (ignored geoms, defaults).
    """

    kind: str = "flat"
    spec: str = "flat"
    planes: tuple[TerrainPlane, ...] = (TerrainPlane.horizontal(0.0),)
    boxes: tuple[TerrainBox, ...] = ()
    grids: tuple[HeightGrid, ...] = ()
    region: np.ndarray | None = None
    notes: tuple[str, ...] = field(default=())

    def __repr__(self) -> str:
        return (f"Terrain(kind={self.kind!r}, spec={self.spec!r}, planes={len(self.planes)}, boxes={len(self.boxes)}, "
                f"grids={len(self.grids)})")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def flat(cls) -> Terrain:
        """The plane z = 0: ``height`` is exactly 0 everywhere (AKD's ground before terrains existed)."""
        return cls()

    @classmethod
    def slope(cls, degrees: float, *, start_x: float = DEFAULT_START_X, heading_deg: float = 0.0,
              length: float = DEFAULT_LENGTH, width: float = DEFAULT_WIDTH) -> Terrain:
        """A plane rising ``degrees`` (< 0: falling) along the heading from ``start_x`` for ``length`` m."""
        _check_range("DEG", degrees, -60.0, 60.0, "slope:DEG", "slope:10")
        _check_layout(start_x, length, width)
        spec = _canonical("slope", [degrees], start=start_x, heading=heading_deg, length=length, width=width)
        if degrees == 0.0:
            return cls(kind="slope", spec=spec)
        dx = length / math.ceil(length / 1.0)  # ~1 m cells, a grid line at the start: every cell is planar
        back_cells = max(1, math.ceil((start_x + BACK) / dx))
        s = start_x + dx * np.arange(-back_cells, round(length / dx) + 1)
        profile = np.maximum(s - start_x, 0.0) * math.tan(math.radians(degrees))
        heights = np.repeat(profile[:, None], 2, axis=1)  # (nx, 2): planar across the width
        grid_cell = np.array([dx, width])
        return _grid_terrain("slope", spec, heights, grid_cell, s0=s[0], heading_deg=heading_deg,
                             region=_region(start_x, length, width, heading_deg))

    @classmethod
    def stairs(cls, rise: float, run: float, *, direction: str = "up", steps: int | None = None,
               start_x: float = DEFAULT_START_X, heading_deg: float = 0.0, length: float = DEFAULT_LENGTH,
               width: float = DEFAULT_WIDTH) -> Terrain:
        """Stairs: the first nosing at ``start_x``, treads ``run`` deep, each ``rise`` above (``direction`` "up") or
        below ("down") the last; ``steps`` None: to the end of ``length``; else ``steps`` steps, then a landing."""
        _check_range("RISE", rise, 0.005, 1.0, "stairs:RISE,RUN", "stairs:0.1,0.3")
        _check_range("RUN", run, 0.05, 5.0, "stairs:RISE,RUN", "stairs:0.1,0.3")
        if direction not in ("up", "down"):
            raise ConfigError(f"stairs direction must be 'up' or 'down', got '{direction}'; e.g. stairs:0.1,0.3,down")
        _check_layout(start_x, length, width)
        if steps is not None and (steps < 1 or steps * run > length - run):
            raise ConfigError(f"stairs STEPS={steps} with RUN={run:g} m needs STEPS >= 1 and STEPS x RUN <= length - "
                              f"RUN ({length:g} - {run:g} m) so a landing follows; lower STEPS or raise length=")
        count = steps if steps is not None else math.ceil(length / run)
        sign = 1.0 if direction == "up" else -1.0
        pieces = []
        for k in range(1, count + 1):
            s1 = start_x + k * run if (steps is not None or k < count) else start_x + length
            pieces.append((start_x + (k - 1) * run, min(s1, start_x + length), sign * k * rise))
        if steps is not None:
            pieces.append((start_x + steps * run, start_x + length, sign * steps * rise))  # the landing
        positional: list = [rise, run, direction] + ([steps] if steps is not None else [])
        spec = _canonical("stairs", positional, start=start_x, heading=heading_deg, length=length, width=width)
        return _box_terrain("stairs", spec, pieces, start_x=start_x, heading_deg=heading_deg, length=length,
                            width=width)

    @classmethod
    def steps(cls, height: float, length_each: float, *, count: int = 1, start_x: float = DEFAULT_START_X,
              heading_deg: float = 0.0, length: float = DEFAULT_LENGTH, width: float = DEFAULT_WIDTH) -> Terrain:
        """``count`` blocks ``height`` tall (< 0: pits that deep) and ``length_each`` long, ``length_each`` apart,
        the first from ``start_x``."""
        if height == 0.0 or abs(height) > 1.0:
            raise ConfigError(f"steps HEIGHT must be non-zero and within +-1 m, got {height:g}; e.g. steps:0.08,1.0")
        _check_range("LENGTH", length_each, 0.05, 50.0, "steps:HEIGHT,LENGTH", "steps:0.08,1.0")
        _check_layout(start_x, length, width)
        if count < 1 or (2 * count - 1) * length_each > length:
            raise ConfigError(f"steps COUNT={count} of LENGTH={length_each:g} m do not fit in length={length:g} m "
                              "(COUNT >= 1, (2 COUNT - 1) x LENGTH <= length); lower COUNT or raise length=")
        pieces = []
        for k in range(count):
            s0 = start_x + 2 * k * length_each
            pieces.append((s0, s0 + length_each, height))
            end = s0 + 2 * length_each if k < count - 1 else start_x + length
            pieces.append((s0 + length_each, end, 0.0))
        spec = _canonical("steps", [height, length_each, count], start=start_x, heading=heading_deg, length=length,
                          width=width)
        return _box_terrain("steps", spec, pieces, start_x=start_x, heading_deg=heading_deg, length=length,
                            width=width)

    @classmethod
    def rough(cls, amplitude: float, wavelength: float = DEFAULT_ROUGH_WAVELENGTH, *, seed: int = 0,
              start_x: float = DEFAULT_START_X, heading_deg: float = 0.0, length: float = DEFAULT_LENGTH,
              width: float = DEFAULT_WIDTH) -> Terrain:
        """Smooth noise peaking at +-``amplitude`` m around ``wavelength`` m, faded in over one wavelength after
        ``start_x`` (flat z = 0 before), drawn from ``seed``; a height grid of cell min(0.05, wavelength / 10)."""
        _check_range("AMPLITUDE", amplitude, 1e-4, 0.5, "rough:AMPLITUDE[,WAVELENGTH]", "rough:0.03")
        _check_range("WAVELENGTH", wavelength, 0.1, 20.0, "rough:AMPLITUDE[,WAVELENGTH]", "rough:0.03,0.5")
        _check_layout(start_x, length, width)
        step = min(0.05, wavelength / 10.0)
        s = start_x + step * np.arange(-math.ceil((start_x + BACK) / step), math.ceil(length / step) + 1)  # a node at
        ny = math.ceil(width / step) + 1  # the start: exactly flat up to it
        t = np.linspace(-width / 2, width / 2, ny)
        rng = np.random.default_rng(seed)
        angle = rng.uniform(0.0, 2 * np.pi, _NOISE_WAVES)
        lam = wavelength * np.exp(rng.uniform(np.log(0.7), np.log(1.4), _NOISE_WAVES))
        phase = rng.uniform(0.0, 2 * np.pi, _NOISE_WAVES)
        weight = lam / wavelength  # longer waves a little taller (a 1/f-like spectrum)
        k = 2 * np.pi / lam
        arg = (k * np.cos(angle))[None, None, :] * s[:, None, None] + (k * np.sin(angle))[None, None, :] * \
            t[None, :, None] + phase
        noise = np.sum(weight * np.cos(arg), axis=-1)  # (nx, ny)
        ramp = np.clip((s - start_x) / wavelength, 0.0, 1.0)
        noise *= (ramp * ramp * (3.0 - 2.0 * ramp))[:, None]  # smoothstep: no seam at the start
        heights = noise * (amplitude / np.max(np.abs(noise)))
        spec = _canonical("rough", [amplitude, wavelength], seed=seed, start=start_x, heading=heading_deg,
                          length=length, width=width)
        cell = np.array([step, width / (ny - 1)])
        return _grid_terrain("rough", spec, heights, cell, s0=float(s[0]), heading_deg=heading_deg,
                             region=_region(start_x, length, width, heading_deg))

    @classmethod
    def heightmap(cls, path: str | Path, cell: float = DEFAULT_HEIGHTMAP_CELL, scale: float = 1.0, *,
                  start_x: float = DEFAULT_START_X, heading_deg: float = 0.0) -> Terrain:
        """A height map file (PNG or ``.npy``; module docstring) whose first column lies at ``start_x``, centred on
        y = 0, with flat ground z = 0 padded behind it back to x = -BACK."""
        path = Path(path).expanduser()
        _check_range("CELL", cell, 0.005, 5.0, "heightmap:FILE[,CELL[,SCALE]]", "heightmap:map.png,0.05,0.5")
        if not math.isfinite(scale) or scale == 0.0:
            raise ConfigError(f"heightmap SCALE must be a non-zero number, got {scale}; "
                              "e.g. heightmap:map.png,0.05,0.5")
        data = _read_heightmap(path) * float(scale)  # (mx, my) m
        back_cells = max(1, math.ceil((start_x + BACK) / cell))
        heights = np.concatenate([np.zeros((back_cells, data.shape[1])), data], axis=0)
        spec = _canonical("heightmap", [str(path.resolve()), cell, scale], start=start_x, heading=heading_deg)
        return _grid_terrain("heightmap", spec, heights, np.array([cell, cell]), s0=start_x - back_cells * cell,
                             heading_deg=heading_deg)

    @classmethod
    def from_mjcf(cls, path: str | Path) -> Terrain:
        """The terrain of an MJCF scene: the planes, boxes and height fields fixed to the world (the world body and
        bodies welded to it, not mocap) that collide (``contype`` or ``conaffinity`` non-zero), posed as MuJoCo
        compiles them. A robot the scene includes (bodies below a free joint) is not terrain; other static geom types
        (meshes, spheres, ...) are left out and named in ``notes``."""
        import mujoco

        path = Path(path).expanduser()
        if not path.is_file():
            raise ConfigError(f"terrain scene {path} does not exist; give an MJCF scene file (e.g. scene_stairs.xml)")
        try:
            model = mujoco.MjModel.from_xml_path(str(path))
        except Exception as exc:  # MuJoCo's message names the element
            raise MJCFError(f"{path}: MuJoCo cannot compile this terrain scene ({exc}); fix the file or give "
                            "another --terrain") from exc
        terrain = _terrain_of_model(model, spec=str(path.resolve()), source=str(path))
        if not (terrain.planes or terrain.boxes or terrain.grids):
            raise ConfigError(f"{path}: no plane, box or hfield geom is fixed to the world, so there is no terrain to "
                              "use; give a scene with its ground (or a spec such as stairs:0.1,0.3)")
        return terrain

    @classmethod
    def from_npz(cls, path: str | Path) -> Terrain:
        """The terrain of a ``terrain.npz`` (:meth:`to_npz`): its height grid (a plane :data:`CATCH_GAP` below it
        outside), ``kind`` and ``spec`` as recorded. A flat file gives exactly :meth:`flat`."""
        path = Path(path).expanduser()
        if not path.is_file():
            raise ConfigError(f"terrain file {path} does not exist; write one with Terrain.to_npz")
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in ("heights", "cell", "origin") if k not in npz.files]
            if missing:
                raise ConfigError(f"{path}: field(s) {', '.join(missing)} missing; it is not a terrain.npz "
                                  "(heights (nx, ny), cell, origin (2,))")
            heights = np.asarray(npz["heights"], dtype=np.float64)
            cell = float(npz["cell"])
            origin = np.asarray(npz["origin"], dtype=np.float64)
            kind = str(npz["kind"]) if "kind" in npz.files else "heightmap"
            spec = str(npz["spec"]) if "spec" in npz.files else str(path.resolve())
        if heights.ndim != 2 or min(heights.shape) < 2 or not np.all(np.isfinite(heights)):
            raise ConfigError(f"{path}: field heights must be a finite (nx, ny) array with nx, ny >= 2, got shape "
                              f"{heights.shape}; re-write it with Terrain.to_npz")
        if not (cell > 0.0) or origin.shape != (2,):
            raise ConfigError(f"{path}: field cell must be > 0 and origin (2,), got cell={cell}, origin "
                              f"{origin.shape}; re-write it with Terrain.to_npz")
        if kind == "flat" and not np.any(heights):
            return cls.flat()
        center = origin + 0.5 * (np.array(heights.shape) - 1.0) * cell
        grid = HeightGrid(center=center, yaw=0.0, cell=np.array([cell, cell]), heights=heights,
                          bottom_z=float(heights.min()) - CATCH_GAP - 0.1)
        return cls(kind=kind, spec=spec, planes=(TerrainPlane.horizontal(float(heights.min()) - CATCH_GAP),),
                   grids=(grid,), notes=(f"read from {path}",))

    # ------------------------------------------------------------------ queries
    @property
    def is_flat(self) -> bool:
        """Exactly the plane z = 0 and nothing else."""
        return (not self.boxes and not self.grids and len(self.planes) == 1 and self.planes[0].is_horizontal
                and self.planes[0].point[2] == 0.0)

    @property
    def bounds(self) -> np.ndarray:
        """((xmin, xmax), (ymin, ymax)) m (2, 2): the layout's region, else the footprint of its boxes and grids;
        +-inf for a terrain of planes only."""
        if self.region is not None:
            return np.array(self.region, dtype=np.float64)
        corners = [c for c in (_box_corners(b)[:, :2] for b in self.boxes)]
        corners += [_grid_corners(g) for g in self.grids]
        if not corners:
            return np.array([[-np.inf, np.inf], [-np.inf, np.inf]])
        points = np.concatenate(corners, axis=0)
        return np.stack([points.min(axis=0), points.max(axis=0)], axis=1)

    def height(self, x, y) -> np.ndarray:
        """Surface height (m) at (x, y) (arrays, broadcast): the first surface a ray straight down meets; -inf where
        there is none (a scene without a ground plane, off its geoms)."""
        return self.surface(x, y)[0]

    def normal(self, x, y) -> np.ndarray:
        """Unit upward surface normal (..., 3) at (x, y): the face a ray straight down meets (height fields: the
        triangle's); (0, 0, 1) where there is no surface."""
        return self.surface(x, y)[1]

    def surface(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        """(height (...), normal (..., 3)) at (x, y) broadcast, in one pass."""
        x, y = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
        shape = x.shape
        px, py = x.ravel(), y.ravel()
        z = np.full(px.shape, -np.inf)
        n = np.zeros(px.shape + (3,))
        n[:, 2] = 1.0
        for plane in self.planes:
            zp = plane.point[2] - (plane.normal[0] * (px - plane.point[0]) + plane.normal[1] * (py - plane.point[1])) \
                / plane.normal[2]
            take = zp > z
            z = np.where(take, zp, z)
            n[take] = plane.normal
        for grid in self.grids:
            zg, ng = _grid_surface(grid, px, py)
            take = zg > z
            z = np.where(take, zg, z)
            n[take] = ng[take]
        if self.boxes:
            zb, nb = self._boxes_surface(px, py)
            take = zb > z
            z = np.where(take, zb, z)
            n[take] = nb[take]
        return z.reshape(shape), n.reshape(shape + (3,))

    @cached_property
    def edges(self) -> np.ndarray:
        """Height discontinuities of at least :data:`EDGE_MIN_JUMP` m as horizontal segments (E, 2, 2): endpoints
        [[x0, y0], [x1, y1]] m. Stair nosings and risers, step borders, the drop at a terrain's border, cliffs in a
        height grid (neighbours steeper than 70 degrees). Empty for a terrain of planes."""
        segments = [self._box_edges()]
        for grid in self.grids:
            segments.append(_grid_steep_edges(grid))
            segments.append(self._jump_filtered(_grid_border(grid)))
        out = np.concatenate([s.reshape(-1, 2, 2) for s in segments], axis=0)
        return _unique_segments(out)

    def edge_distance(self, x, y) -> np.ndarray:
        """Horizontal distance (m) from (x, y) (broadcast) to the nearest of :attr:`edges`; +inf without edges."""
        x, y = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
        points = np.stack([x.ravel(), y.ravel()], axis=-1)
        edges = self.edges
        out = np.full(len(points), np.inf)
        if len(edges):
            a, ab = edges[:, 0], edges[:, 1] - edges[:, 0]
            ab2 = np.maximum(np.sum(ab * ab, axis=-1), 1e-300)
            chunk = max(1, 2_000_000 // len(edges))
            for i in range(0, len(points), chunk):
                p = points[i:i + chunk, None, :]  # (P, 1, 2)
                t = np.clip(np.sum((p - a) * ab, axis=-1) / ab2, 0.0, 1.0)
                d = p - (a + t[..., None] * ab)
                out[i:i + chunk] = np.sqrt(np.min(np.sum(d * d, axis=-1), axis=1))
        return out.reshape(x.shape)

    # ------------------------------------------------------------------ MuJoCo
    def mjcf_fragment(self, *, prefix: str = "terrain", geom_attrs: dict[str, str] | None = None,
                      rgba: str = "0.62 0.64 0.66 1") -> MjcfFragment:
        """The MuJoCo XML of the terrain: ``<hfield>`` assets and the geoms ``{prefix}_plane{k}``,
        ``{prefix}_box{k}``, ``{prefix}_hfield{k}``; ``geom_attrs`` (e.g. ``{"friction": "1 0.005 0.0001"}``) are
        set on every geom; boxes and height fields take ``rgba``. Every geom collides (``contype`` and
        ``conaffinity`` 1 unless ``geom_attrs`` says otherwise), whatever the defaults of a robot file around it."""
        attrs = {"contype": "1", "conaffinity": "1", **(geom_attrs or {})}
        extra = "".join(f' {k}="{v}"' for k, v in attrs.items() if k != "rgba")
        rgba = attrs.get("rgba", rgba)
        plane_rgba = f' rgba="{attrs["rgba"]}"' if "rgba" in attrs else ""
        assets, geoms = [], []
        for k, plane in enumerate(self.planes):
            quat = xyzw_to_wxyz(_quat_z_to(plane.normal))
            geoms.append(f'<geom name="{prefix}_plane{k}" type="plane" size="0 0 1" pos="{fmt(plane.point)}" '
                         f'quat="{fmt(quat)}"{plane_rgba}{extra}/>')
        for k, box in enumerate(self.boxes):
            geoms.append(f'<geom name="{prefix}_box{k}" type="box" pos="{fmt(box.center)}" size="{fmt(box.half_size)}" '
                         f'quat="{fmt(xyzw_to_wxyz(box.quat_xyzw))}" rgba="{rgba}"{extra}/>')
        for k, grid in enumerate(self.grids):
            name = f"{prefix}_hfield{k}"
            hfield = _mujoco_hfield(grid)
            rows = hfield["data"][::-1]  # MJCF's elevation text lists the +y row first (MuJoCo flips it on load)
            elevation = "\n".join(" ".join(f"{v:.9g}" for v in row) for row in rows)
            assets.append(f'<hfield name="{name}" nrow="{hfield["nrow"]}" ncol="{hfield["ncol"]}" '
                          f'size="{fmt(hfield["size"])}" elevation="{elevation}"/>')
            geoms.append(f'<geom name="{name}" type="hfield" hfield="{name}" pos="{fmt(hfield["pos"])}" '
                         f'quat="{fmt(xyzw_to_wxyz(yaw_quat(grid.yaw)))}" rgba="{rgba}"{extra}/>')
        return MjcfFragment(assets="\n".join(assets), geoms="\n".join(geoms))

    def mjcf_scene(self, robot_mjcf: str | Path | None = None, *, prefix: str = "terrain",
                   geom_attrs: dict[str, str] | None = None) -> str:
        """A whole MJCF document: the terrain, and ``robot_mjcf`` (a robot's own file, not a scene with a floor)
        pulled in by ``<include>`` with its absolute path."""
        fragment = self.mjcf_fragment(prefix=prefix, geom_attrs=geom_attrs)
        include = (f'  <include file="{Path(robot_mjcf).expanduser().resolve()}"/>\n'
                   if robot_mjcf is not None else "")
        assets = f"  <asset>\n{fragment.assets}\n  </asset>\n" if fragment.assets else ""
        return (f'<mujoco model="akd_terrain_{self.kind}">\n{include}{assets}'
                f"  <worldbody>\n{fragment.geoms}\n  </worldbody>\n</mujoco>\n")

    def write_mjcf_scene(self, path: str | Path, robot_mjcf: str | Path | None = None, *,
                         prefix: str = "terrain", geom_attrs: dict[str, str] | None = None) -> Path:
        """Write :meth:`mjcf_scene` to ``path`` atomically after MuJoCo compiled it. A robot file that brings its own
        ground (a scene with a floor) is a ConfigError: include the robot's file itself."""
        import mujoco

        text = self.mjcf_scene(robot_mjcf, prefix=prefix, geom_attrs=geom_attrs)
        if robot_mjcf is not None and not Path(robot_mjcf).expanduser().is_file():
            raise ConfigError(f"robot MJCF {robot_mjcf} does not exist; give the robot's XML file")
        try:
            model = mujoco.MjModel.from_xml_string(text)
        except Exception as exc:
            raise MJCFError(f"{path}: the terrain scene does not compile in MuJoCo ({exc}); check the robot MJCF "
                            f"{robot_mjcf}") from exc
        if robot_mjcf is not None:
            extra = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom {g}"
                     for g in _static_geoms(model) if not (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or
                                                          "").startswith(f"{prefix}_")]
            if extra:
                raise ConfigError(f"robot MJCF {robot_mjcf} brings its own ground ({', '.join(extra[:3])}); "
                                  "include the robot's own file (e.g. go2.xml, not scene.xml) so the terrain is the "
                                  "only ground")
        return write_text_atomic(path, text)

    def add_to_mjspec(self, spec, *, prefix: str = "terrain", **geom_fields) -> list[str]:
        """Add the terrain to a ``mujoco.MjSpec`` (world body geoms, hfield assets); ``geom_fields`` (``friction``,
        ``solref``, ``priority``, ``condim``, ``contype``, ...) are set on every geom (``contype`` and
        ``conaffinity`` default to 1). Returns the geom names."""
        import mujoco

        geom_fields = {"contype": 1, "conaffinity": 1, **geom_fields}
        names = []
        for k, plane in enumerate(self.planes):
            names.append(f"{prefix}_plane{k}")
            spec.worldbody.add_geom(name=names[-1], type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 1.0],
                                    pos=plane.point, quat=xyzw_to_wxyz(_quat_z_to(plane.normal)), **geom_fields)
        for k, box in enumerate(self.boxes):
            names.append(f"{prefix}_box{k}")
            spec.worldbody.add_geom(name=names[-1], type=mujoco.mjtGeom.mjGEOM_BOX, size=box.half_size,
                                    pos=box.center, quat=xyzw_to_wxyz(box.quat_xyzw), **geom_fields)
        for k, grid in enumerate(self.grids):
            names.append(f"{prefix}_hfield{k}")
            hfield = _mujoco_hfield(grid)
            spec.add_hfield(name=names[-1], nrow=hfield["nrow"], ncol=hfield["ncol"], size=hfield["size"],
                            userdata=hfield["data"].ravel().tolist())  # userdata: row 0 is -y (hfield_data order)
            spec.worldbody.add_geom(name=names[-1], type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=names[-1],
                                    pos=hfield["pos"], quat=xyzw_to_wxyz(yaw_quat(grid.yaw)), **geom_fields)
        return names

    # ------------------------------------------------------------------ Newton
    def add_to_newton(self, builder, *, cfg=None, prefix: str = "terrain") -> list[int]:
        """Add the terrain to a ``newton.ModelBuilder`` (z up) as static shapes: planes (``add_shape_plane``,
        infinite), boxes (``add_shape_box``), height grids (``add_shape_heightfield``: Newton's contacts split cells
        along the same diagonal as MuJoCo). ``cfg``: the ``ShapeConfig`` (contact material) of every shape (default:
        the builder's). Returns the shape indices."""
        import newton
        import warp as wp

        ids = []
        for k, plane in enumerate(self.planes):
            xform = wp.transform(wp.vec3(*plane.point), wp.quat(*_quat_z_to(plane.normal)))
            ids.append(builder.add_shape_plane(xform=xform, width=0.0, length=0.0, cfg=cfg, label=f"{prefix}_plane{k}"))
        for k, box in enumerate(self.boxes):
            xform = wp.transform(wp.vec3(*box.center), wp.quat(*box.quat_xyzw))
            hx, hy, hz = (float(v) for v in box.half_size)
            ids.append(builder.add_shape_box(-1, xform=xform, hx=hx, hy=hy, hz=hz, cfg=cfg, label=f"{prefix}_box{k}"))
        for k, grid in enumerate(self.grids):
            hx, hy = (float(v) for v in grid.half_extent)
            lo, hi = float(grid.heights.min()), float(grid.heights.max())
            field = newton.Heightfield(data=grid.heights.T.astype(np.float32), nrow=grid.heights.shape[1],
                                       ncol=grid.heights.shape[0], hx=hx, hy=hy, min_z=lo, max_z=max(hi, lo + 1e-6))
            xform = wp.transform(wp.vec3(float(grid.center[0]), float(grid.center[1]), 0.0),
                                 wp.quat(*yaw_quat(grid.yaw)))
            ids.append(builder.add_shape_heightfield(xform=xform, heightfield=field, cfg=cfg,
                                                     label=f"{prefix}_hfield{k}"))
        return ids

    # ------------------------------------------------------------------ render mesh, grid file
    def render_mesh(self, x_range: Sequence[float] | None = None,
                    y_range: Sequence[float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A triangle mesh of the terrain: ``vertices`` (V, 3) float32 m, ``faces`` (M, 3) int32, counter-clockwise
        seen from outside. Boxes and height grids (top, side walls, bottom) whole; planes as a quad over
        ``x_range`` x ``y_range`` (default: :attr:`bounds` grown by 2 m, or +-10 m for planes only)."""
        (x0, x1), (y0, y1) = _ranges(self.bounds, x_range, y_range, grow=2.0, default=10.0)
        vertices, faces = [], []

        def add(v, f):
            faces.append(np.asarray(f) + sum(len(a) for a in vertices))
            vertices.append(np.asarray(v, dtype=np.float64))

        for plane in self.planes:
            xy = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
            z = plane.point[2] - (plane.normal[0] * (xy[:, 0] - plane.point[0])
                                  + plane.normal[1] * (xy[:, 1] - plane.point[1])) / plane.normal[2]
            add(np.column_stack([xy, z]), [[0, 1, 2], [0, 2, 3]])
        for box in self.boxes:
            add(*_box_mesh(box))
        for grid in self.grids:
            add(*_grid_mesh(grid))
        if not vertices:
            return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32)
        return np.concatenate(vertices).astype(np.float32), np.concatenate(faces).astype(np.int32)

    def sample_grid(self, x_range: Sequence[float] | None = None, y_range: Sequence[float] | None = None,
                    cell: float = NPZ_CELL) -> tuple[np.ndarray, np.ndarray]:
        """(origin (2,), heights (nx, ny)): ``heights[i, j]`` = :meth:`height` at origin + (i, j) ``cell``, over
        ``x_range`` x ``y_range`` (default :attr:`bounds`; both ends included, the far one rounded up to a cell)."""
        (x0, x1), (y0, y1) = _ranges(self.bounds, x_range, y_range, grow=0.0, default=None)
        nx, ny = math.ceil((x1 - x0) / cell - 1e-9) + 1, math.ceil((y1 - y0) / cell - 1e-9) + 1
        xs, ys = x0 + cell * np.arange(nx), y0 + cell * np.arange(ny)
        heights = self.height(xs[:, None], ys[None, :])
        return np.array([x0, y0]), heights

    def to_npz(self, path: str | Path, x_range: Sequence[float] | None = None,
               y_range: Sequence[float] | None = None, cell: float = NPZ_CELL) -> Path:
        """Write ``terrain.npz`` atomically: ``heights`` (nx, ny) float32 m with heights[i, j] the surface at
        x = origin[0] + i cell, y = origin[1] + j cell; ``cell`` (m, <= 0.02), ``origin`` (2,) m, ``kind``, ``spec``
        (str), ``schema``. Ranges default to :attr:`bounds` (required for a terrain of planes only)."""
        if not (0.0 < cell <= NPZ_CELL):
            raise ConfigError(f"terrain.npz cell must be in (0, {NPZ_CELL}] m, got {cell}; pass a finer cell")
        origin, heights = self.sample_grid(x_range, y_range, cell)
        if not np.all(np.isfinite(heights)):
            raise ConfigError(f"{path}: the terrain has no surface over part of x {x_range} y {y_range} (a scene "
                              "without a ground plane); pass x_range / y_range within its geoms")
        return save_npz_atomic(path, heights=heights.astype(np.float32), cell=np.float64(cell),
                               origin=origin.astype(np.float64), kind=np.str_(self.kind), spec=np.str_(self.spec),
                               schema=np.int64(SCHEMA))

    # ------------------------------------------------------------------ internals
    @cached_property
    def _box_arrays(self):
        centers = np.array([b.center for b in self.boxes], dtype=np.float64).reshape(-1, 3)
        rot = quat_to_matrix(np.array([b.quat_xyzw for b in self.boxes], dtype=np.float64).reshape(-1, 4))
        half = np.array([b.half_size for b in self.boxes], dtype=np.float64).reshape(-1, 3)
        corners = np.array([_box_corners(b)[:, :2] for b in self.boxes]).reshape(-1, 8, 2)
        return centers, rot, half, corners.min(axis=1), corners.max(axis=1)

    def _boxes_surface(self, px: np.ndarray, py: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Top of the boxes along vertical lines through (px, py) (P,): (z (P,), normal (P, 3)); -inf off them."""
        centers, rot, half, lo, hi = self._box_arrays
        order = np.argsort(px, kind="stable")  # chunks of nearby points meet few boxes
        px, py = px[order], py[order]
        z = np.full(px.shape, -np.inf)
        n = np.zeros(px.shape + (3,))
        n[:, 2] = 1.0
        chunk = 2048
        for start in range(0, len(px), chunk):
            x, y = px[start:start + chunk], py[start:start + chunk]
            near = np.flatnonzero((lo[:, 0] <= x.max()) & (hi[:, 0] >= x.min()) & (lo[:, 1] <= y.max())
                                  & (hi[:, 1] >= y.min()))
            if not len(near):
                continue
            c, r, h = centers[near], rot[near], half[near]
            d = np.stack([x[:, None] - c[None, :, 0], y[:, None] - c[None, :, 1],
                          np.broadcast_to(-c[None, :, 2], (len(x), len(near)))], axis=-1)  # (P, N, 3)
            o = np.einsum("nji,pnj->pni", r, d)  # the line's point at z = 0, box frame
            u = r[:, 2, :]  # +z in the box frame (N, 3); the line is o + t u, t = world z
            with np.errstate(divide="ignore", invalid="ignore"):
                t1, t2 = (-h - o) / u, (h - o) / u
            parallel = np.abs(u) < 1e-12
            inside = np.abs(o) <= h
            low = np.where(parallel, np.where(inside, -np.inf, np.inf), np.minimum(t1, t2))
            high = np.where(parallel, np.where(inside, np.inf, -np.inf), np.maximum(t1, t2))
            t_in, t_out = low.max(axis=-1), high.min(axis=-1)
            top = np.where(t_in <= t_out, t_out, -np.inf)  # (P, N)
            best = np.argmax(top, axis=1)
            rows = np.arange(len(x))
            zc = top[rows, best]
            axis = np.argmin(high[rows, best], axis=-1)
            sign = np.sign(u[best, axis])  # the exit face: + side where +z runs along +axis
            nc = r[best, :, axis] * np.where(sign == 0, 1.0, sign)[:, None]
            take = zc > z[start:start + chunk]
            z[start:start + chunk] = np.where(take, zc, z[start:start + chunk])
            n[start:start + chunk][take] = nc[take]
        out_z, out_n = np.empty_like(z), np.empty_like(n)
        out_z[order], out_n[order] = z, n
        return out_z, out_n

    def _box_edges(self) -> np.ndarray:
        """Edges of the boxes' top faces where the surface really jumps (E, 2, 2)."""
        if not self.boxes:
            return np.zeros((0, 2, 2))
        candidates = []
        for box in self.boxes:
            corners = _box_corners(box)  # (8, 3), index bits x, y, z
            rot = quat_to_matrix(box.quat_xyzw)
            axis = int(np.argmax(np.abs(rot[2])))  # the box axis closest to vertical
            up = rot[2, axis] > 0
            face = [k for k in range(8) if bool((k >> axis) & 1) == up]  # the 4 corners of the top face
            others = [a for a in range(3) if a != axis]
            ring = sorted(face, key=lambda k: (((k >> others[0]) & 1), ((k >> others[1]) & 1)))
            a, b, c, d = ring  # (0,0) (0,1) (1,0) (1,1) in the two other axes' bits
            for p, q in ((a, b), (b, d), (d, c), (c, a)):
                candidates.append([corners[p, :2], corners[q, :2]])
        return self._jump_filtered(np.array(candidates))

    def _jump_filtered(self, candidates: np.ndarray, piece: float = 0.05, eps: float = 1e-3) -> np.ndarray:
        """The parts of candidate segments (C, 2, 2) across which the height jumps by >= EDGE_MIN_JUMP, tested at
        pieces of ``piece`` m, ``eps`` m to either side, merged into runs."""
        if not len(candidates):
            return np.zeros((0, 2, 2))
        a, b = candidates[:, 0], candidates[:, 1]
        lengths = np.linalg.norm(b - a, axis=-1)
        keep = lengths > 1e-9
        a, b, lengths = a[keep], b[keep], lengths[keep]
        counts = np.maximum(1, np.ceil(lengths / piece).astype(int))
        owner = np.repeat(np.arange(len(a)), counts)
        index = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        f0, f1 = index / counts[owner], (index + 1) / counts[owner]
        direction = (b - a) / lengths[:, None]
        across = np.stack([-direction[:, 1], direction[:, 0]], axis=-1)[owner]
        mid = a[owner] + ((f0 + f1) / 2)[:, None] * (b - a)[owner]
        h1 = self.height(mid[:, 0] + eps * across[:, 0], mid[:, 1] + eps * across[:, 1])
        h2 = self.height(mid[:, 0] - eps * across[:, 0], mid[:, 1] - eps * across[:, 1])
        with np.errstate(invalid="ignore"):
            jump = np.abs(h1 - h2)
        flag = np.where(np.isnan(jump), False, jump >= EDGE_MIN_JUMP)  # -inf on both sides: no surface, no edge
        out = []
        starts = np.cumsum(counts) - counts
        for k in range(len(a)):
            f = flag[starts[k]:starts[k] + counts[k]]
            for run_start, run_end in _runs(f):
                span = b[k] - a[k]
                out.append([a[k] + (run_start / counts[k]) * span, a[k] + (run_end / counts[k]) * span])
        return np.array(out).reshape(-1, 2, 2)


# ----------------------------------------------------------------------------- spec, prompt, arbitration
_KINDS = ("flat", "slope", "stairs", "steps", "rough", "heightmap")
_FORMS = ("flat | slope:DEG | stairs:RISE,RUN[,up|down[,STEPS]] | steps:HEIGHT,LENGTH[,COUNT] | "
          "rough:AMPLITUDE[,WAVELENGTH] | heightmap:FILE[,CELL[,SCALE]] | SCENE.xml | terrain.npz, "
          "options ,start=M ,heading=DEG ,length=M ,width=M (rough: ,seed=N)")
_OPTIONS = {"slope": {"start", "heading", "length", "width"}, "stairs": {"start", "heading", "length", "width"},
            "steps": {"start", "heading", "length", "width"}, "rough": {"start", "heading", "length", "width", "seed"},
            "heightmap": {"start", "heading"}}


def parse_terrain_spec(spec: str, *, start_x: float = DEFAULT_START_X, source: str = "--terrain") -> Terrain:
    """The terrain a ``--terrain`` value names (module docstring; docs/terrain.md): ``flat``, ``slope:DEG``,
    ``stairs:RISE,RUN[,up|down[,STEPS]]``, ``steps:HEIGHT,LENGTH[,COUNT]``, ``rough:AMPLITUDE[,WAVELENGTH]``,
    ``heightmap:FILE[,CELL[,SCALE]]`` (metres, degrees), each with options ``,start=M`` (default ``start_x``),
    ``,heading=DEG``, ``,length=M``, ``,width=M`` (rough also ``,seed=N``); or a file: an MJCF scene (``.xml``) or a
    ``terrain.npz``. A bad value is a ConfigError naming ``source``, the field and an example."""
    text = str(spec).strip()
    where = f"{source} '{text}'"
    if not text:
        raise ConfigError(f"{source} is empty; give one of {_FORMS}")
    kind, sep, rest = text.partition(":")
    kind = kind.strip().lower()
    if kind == "flat" and not rest:
        return Terrain.flat()
    if not sep and kind in _KINDS:
        raise ConfigError(f"{where}: {kind} needs its values after a colon; give one of {_FORMS}")
    if not sep or kind not in _KINDS:
        path = Path(text).expanduser()
        if path.suffix.lower() == ".xml":
            return Terrain.from_mjcf(path)
        if path.suffix.lower() == ".npz":
            return Terrain.from_npz(path)
        raise ConfigError(f"{where}: unknown terrain '{kind if sep else text}'; give one of {_FORMS}")
    items = [s.strip() for s in rest.split(",")] if rest.strip() else []
    positional, options = [], {}
    for item in items:
        if "=" in item:
            key, _, value = item.partition("=")
            key = key.strip().lower()
            if key not in _OPTIONS.get(kind, set()):
                raise ConfigError(f"{where}: option '{key}' is not one of {kind}'s "
                                  f"({', '.join(sorted(_OPTIONS.get(kind, ())))}); e.g. {kind}:...,start=0.5")
            options[key] = value.strip()
        elif options:
            raise ConfigError(f"{where}: value '{item}' follows an option; put positional values first, e.g. "
                              "stairs:0.1,0.3,up,start=0.5")
        else:
            positional.append(item)

    def number(text_value: str, name: str, example: str) -> float:
        try:
            value = float(text_value)
        except ValueError:
            raise ConfigError(f"{where}: {name} must be a number, got '{text_value}'; e.g. {example}") from None
        if not math.isfinite(value):
            raise ConfigError(f"{where}: {name} must be finite, got '{text_value}'; e.g. {example}")
        return value

    def integer(text_value: str, name: str, example: str) -> int:
        value = number(text_value, name, example)
        if value != int(value):
            raise ConfigError(f"{where}: {name} must be a whole number, got '{text_value}'; e.g. {example}")
        return int(value)

    def need(count_min: int, count_max: int, form: str, example: str) -> None:
        if len(positional) < count_min:
            names = form.split(":", 1)[1].replace("[", "").replace("]", "").split(",")
            raise ConfigError(f"{where}: {names[len(positional)]} is missing; write {form}, e.g. {example}")
        if len(positional) > count_max:
            raise ConfigError(f"{where}: too many values ({len(positional)}); write {form}, e.g. {example}")

    layout = {"start_x": number(options["start"], "start", f"{kind}:...,start=0.5") if "start" in options else start_x,
              "heading_deg": number(options["heading"], "heading", f"{kind}:...,heading=90") if "heading" in options
              else 0.0}
    if "length" in options:
        layout["length"] = number(options["length"], "length", f"{kind}:...,length=10")
    if "width" in options:
        layout["width"] = number(options["width"], "width", f"{kind}:...,width=3")
    try:
        if kind == "flat":
            raise ConfigError(f"{where}: flat takes no values; write flat")
        if kind == "slope":
            need(1, 1, "slope:DEG", "slope:10")
            return Terrain.slope(number(positional[0], "DEG", "slope:10"), **layout)
        if kind == "stairs":
            need(2, 4, "stairs:RISE,RUN[,up|down[,STEPS]]", "stairs:0.1,0.3,up")
            direction = positional[2].lower() if len(positional) > 2 else "up"
            if direction not in ("up", "down"):
                raise ConfigError(f"{where}: direction must be up or down, got '{positional[2]}'; e.g. "
                                  "stairs:0.1,0.3,down")
            steps = integer(positional[3], "STEPS", "stairs:0.1,0.3,up,8") if len(positional) > 3 else None
            return Terrain.stairs(number(positional[0], "RISE", "stairs:0.1,0.3"),
                                  number(positional[1], "RUN", "stairs:0.1,0.3"), direction=direction, steps=steps,
                                  **layout)
        if kind == "steps":
            need(2, 3, "steps:HEIGHT,LENGTH[,COUNT]", "steps:0.08,1.0")
            count = integer(positional[2], "COUNT", "steps:0.08,1.0,3") if len(positional) > 2 else 1
            return Terrain.steps(number(positional[0], "HEIGHT", "steps:0.08,1.0"),
                                 number(positional[1], "LENGTH", "steps:0.08,1.0"), count=count, **layout)
        if kind == "rough":
            need(1, 2, "rough:AMPLITUDE[,WAVELENGTH]", "rough:0.03,0.5")
            wavelength = (number(positional[1], "WAVELENGTH", "rough:0.03,0.5") if len(positional) > 1
                          else DEFAULT_ROUGH_WAVELENGTH)
            seed = integer(options["seed"], "seed", "rough:0.03,seed=2") if "seed" in options else 0
            return Terrain.rough(number(positional[0], "AMPLITUDE", "rough:0.03"), wavelength, seed=seed, **layout)
        need(1, 3, "heightmap:FILE[,CELL[,SCALE]]", "heightmap:map.png,0.05,0.5")
        cell = (number(positional[1], "CELL", "heightmap:map.png,0.05") if len(positional) > 1
                else DEFAULT_HEIGHTMAP_CELL)
        scale = number(positional[2], "SCALE", "heightmap:map.png,0.05,0.5") if len(positional) > 2 else 1.0
        return Terrain.heightmap(positional[0], cell, scale, **layout)
    except ConfigError as exc:
        message = str(exc)
        raise ConfigError(message if message.startswith(source) else f"{where}: {message}") from None


_PROMPT_STAIRS = re.compile(r"\b(stair(?:s|case|way)?|upstairs|downstairs)\b", re.IGNORECASE)
_PROMPT_SLOPE = re.compile(r"\b(slope|incline|inclined|ramp|hill|hillside|uphill|downhill|decline)\b", re.IGNORECASE)
_PROMPT_DOWN = re.compile(r"\b(down\w*|descend\w*|decline)\b", re.IGNORECASE)
_PROMPT_STEP = re.compile(r"\b(onto|over|up|down|off)\s+(?:a|an|the|some)\s+(?:[\w°.-]+\s+){0,3}?"
                          r"(step|curb|kerb|ledge|block)\b", re.IGNORECASE)
_PROMPT_ROUGH = re.compile(r"\b(rough|uneven|rocky|bumpy)\s+(?:\w+\s+)?"
                           r"(ground|terrain|surface|floor|road|trail|path)\b", re.IGNORECASE)
_PROMPT_DEGREES = re.compile(r"(\d+(?:\.\d+)?)\s*(?:°|-?\s*deg(?:ree)?s?\b)", re.IGNORECASE)
_PROMPT_LENGTH = re.compile(r"(\d+(?:\.\d+)?)\s*-?\s*(cm|mm|centimet(?:er|re)s?|millimet(?:er|re)s?)\b", re.IGNORECASE)


def terrain_from_prompt(prompt: str, *, start_x: float = DEFAULT_START_X) -> tuple[Terrain | None, list[str]]:
    """The terrain prompt words name, and notes saying what was read: "up the stairs" / "down the stairs"
    (rise 0.10 m or the prompt's "15 cm", run 0.30 m), "up/down a 10 degree slope" (hill, incline, ramp; 10 degrees
    unless given), "onto a step" / "off a curb" (0.08 m or the prompt's cm, 1 m long), "over rough ground" (rough,
    uneven, rocky, bumpy + ground, terrain, ...; 0.03 m or the prompt's cm). None when the prompt names no terrain.
    The first found of stairs, slope, step, rough wins; the others are named in the notes."""
    text = prompt or ""
    found: list[tuple[int, str, Terrain, str]] = []
    lengths = [(float(m.group(1)) * (0.001 if m.group(2).lower().startswith("m") else 0.01), m.group(0))
               for m in _PROMPT_LENGTH.finditer(text)]

    def prompt_length(default: float, low: float, high: float) -> tuple[float, str]:
        for value, words in lengths:
            if low <= value <= high:
                return value, f" ({words})"
        return default, ""

    def clause(m: re.Match) -> str:
        """The words of the match's clause up to it: "trots down a 10 degree slope"."""
        return re.split(r"[.;,]|\b(?:then|and|but)\b", text[:m.end()])[-1].strip()

    if m := _PROMPT_STAIRS.search(text):
        words = clause(m)
        rise, said = prompt_length(_PROMPT_RISE, 0.02, 0.4)
        direction = "down" if _PROMPT_DOWN.search(words) else "up"
        terrain = Terrain.stairs(rise, _PROMPT_RUN, direction=direction, start_x=start_x)
        found.append((m.start(), "stairs", terrain, f"'{words}'{said}"))
    if m := _PROMPT_SLOPE.search(text):
        words = clause(m)
        down = bool(_PROMPT_DOWN.search(words))
        degrees_match = _PROMPT_DEGREES.search(words) or _PROMPT_DEGREES.search(text)
        degrees = float(degrees_match.group(1)) if degrees_match else _PROMPT_SLOPE_DEG
        if not 0.0 < degrees < 60.0:
            degrees = _PROMPT_SLOPE_DEG
        terrain = Terrain.slope(-degrees if down else degrees, start_x=start_x)
        found.append((m.start(), "slope", terrain, f"'{words}'"))
    if m := _PROMPT_STEP.search(text):
        height, said = prompt_length(_PROMPT_STEP_SIZE[0], 0.02, 0.4)
        how = m.group(1).lower()
        if how == "over":  # a block to cross: up and down again
            terrain = Terrain.steps(height, _PROMPT_STEP_SIZE[1], start_x=start_x)
        else:  # onto / up a step: one step up and stay there; off / down: one step down
            terrain = Terrain.stairs(height, _PROMPT_STEP_SIZE[1], direction="down" if how in ("down", "off") else "up",
                                     steps=1, start_x=start_x)
        found.append((m.start(), "steps", terrain, f"'{m.group(0)}'{said}"))
    if m := _PROMPT_ROUGH.search(text):
        amplitude, said = prompt_length(_PROMPT_ROUGH_AMPLITUDE, 0.005, 0.3)
        terrain = Terrain.rough(amplitude, start_x=start_x)
        found.append((m.start(), "rough", terrain, f"'{m.group(0)}'{said}"))
    if not found:
        return None, []
    order = {"stairs": 0, "slope": 1, "steps": 2, "rough": 3}
    found.sort(key=lambda f: order[f[1]])
    _, kind, terrain, words = found[0]
    notes = [f"terrain from the prompt's {words}: {terrain.spec} (set it exactly with --terrain)"]
    notes += [f"the prompt also names {other} terrain ({w}); only one terrain is used: {kind}"
              for _, other, _, w in found[1:]]
    return terrain, notes


def resolve_terrain(spec_or_file: str | Path | None, prompt: str = "", *, robot_path: str | Path | None = None,
                    start_x: float = DEFAULT_START_X) -> tuple[Terrain, list[str]]:
    """The terrain of a run, and notes: ``--terrain`` (``spec_or_file``) wins; else the robot's own MJCF scene
    (``robot_path``) when it holds more than a flat floor; else the prompt's words (:func:`terrain_from_prompt`);
    else :meth:`Terrain.flat`. Prompt words that lose are named in the notes."""
    from_prompt, prompt_notes = terrain_from_prompt(prompt, start_x=start_x)
    if spec_or_file is not None and str(spec_or_file).strip():
        terrain = parse_terrain_spec(str(spec_or_file), start_x=start_x)
        notes = [f"terrain from --terrain: {terrain.spec}"]
        if from_prompt is not None:
            notes.append(f"--terrain wins over the prompt's terrain words ({from_prompt.kind}: {from_prompt.spec})")
        return terrain, notes + list(terrain.notes)
    scene = _scene_terrain(robot_path) if robot_path is not None else None
    if scene is not None:
        notes = [f"terrain from the robot's scene {robot_path}"]
        if from_prompt is not None:
            notes.append(f"the robot's scene wins over the prompt's terrain words ({from_prompt.kind}); pass "
                         "--terrain to choose")
        return scene, notes + list(scene.notes)
    if from_prompt is not None:
        return from_prompt, prompt_notes
    return Terrain.flat(), []


def _scene_terrain(robot_path: str | Path) -> Terrain | None:
    """The terrain of a robot's MJCF scene, None for a URDF, a robot file without ground, or a flat z = 0 floor."""
    path = Path(robot_path).expanduser()
    if path.suffix.lower() != ".xml" or not path.is_file():
        return None
    try:
        terrain = Terrain.from_mjcf(path)
    except ConfigError:
        return None
    if not terrain.boxes and not terrain.grids and all(p.is_horizontal and p.point[2] == 0.0 for p in terrain.planes):
        return None
    return terrain


# ----------------------------------------------------------------------------- builders (internal)
def _check_range(name: str, value: float, low: float, high: float, form: str, example: str) -> None:
    if not (math.isfinite(value) and low <= value <= high):
        raise ConfigError(f"{form.split(':')[0]} {name} must be within [{low:g}, {high:g}], got {value:g}; "
                          f"write {form}, e.g. {example}")


def _check_layout(start_x: float, length: float, width: float) -> None:
    if not (math.isfinite(start_x) and -BACK < start_x <= 10.0):
        raise ConfigError(f"terrain start must be within (-{BACK:g}, 10] m ahead of x = 0, got {start_x:g}; "
                          "e.g. start=0.5")
    if not (math.isfinite(length) and 0.5 <= length <= 500.0):
        raise ConfigError(f"terrain length must be within [0.5, 500] m, got {length:g}; e.g. length=20")
    if not (math.isfinite(width) and 0.2 <= width <= 500.0):
        raise ConfigError(f"terrain width must be within [0.2, 500] m, got {width:g}; e.g. width=4")


def _canonical(kind: str, positional: list, **options) -> str:
    def text(v) -> str:
        return f"{v:.12g}" if isinstance(v, float) else str(v)

    return f"{kind}:" + ",".join([text(v) for v in positional] + [f"{k}={text(v)}" for k, v in options.items()])


def _region(start_x: float, length: float, width: float, heading_deg: float) -> np.ndarray:
    corners = np.array([[-BACK, -width / 2], [start_x + length, -width / 2], [start_x + length, width / 2],
                        [-BACK, width / 2]])
    world = corners @ _yaw2(math.radians(heading_deg)).T
    return np.stack([world.min(axis=0), world.max(axis=0)], axis=1)


def _yaw2(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s], [s, c]])


def _box_terrain(kind: str, spec: str, pieces: list[tuple[float, float, float]], *, start_x: float,
                 heading_deg: float, length: float, width: float) -> Terrain:
    """Flat pieces (s0, s1, z) along the heading ahead of the ground z = 0 behind ``start_x``: a plane at the lowest
    level, a box from below it up to every piece above it (the ground behind the start too when something lies
    lower)."""
    merged: list[list[float]] = []
    for s0, s1, z in [(-BACK, start_x, 0.0)] + [p for p in pieces if p[1] > p[0] + 1e-12]:
        if merged and merged[-1][2] == z and abs(merged[-1][1] - s0) < 1e-12:
            merged[-1][1] = s1  # one box per level: abutting boxes of one height would double contacts
        else:
            merged.append([s0, s1, z])
    pieces = [tuple(p) for p in merged]
    floor = min(p[2] for p in pieces)
    yaw = math.radians(heading_deg)
    turn = _yaw2(yaw)
    quat = yaw_quat(yaw)
    boxes = []
    for s0, s1, z in pieces:
        if z <= floor + 1e-12:
            continue
        bottom = floor - BOX_FOOT
        center = turn @ np.array([(s0 + s1) / 2, 0.0])
        boxes.append(TerrainBox(center=np.array([center[0], center[1], (z + bottom) / 2]), quat_xyzw=quat.copy(),
                                half_size=np.array([(s1 - s0) / 2, width / 2, (z - bottom) / 2])))
    return Terrain(kind=kind, spec=spec, planes=(TerrainPlane.horizontal(floor),), boxes=tuple(boxes),
                   region=_region(start_x, length, width, heading_deg))


def _grid_terrain(kind: str, spec: str, heights: np.ndarray, cell: np.ndarray, *, s0: float, heading_deg: float,
                  region: np.ndarray | None = None) -> Terrain:
    """A height grid whose first column lies at s = ``s0`` along the heading, centred across it, over a plane
    CATCH_GAP below its lowest point."""
    yaw = math.radians(heading_deg)
    half = 0.5 * (np.array(heights.shape) - 1.0) * cell
    center = _yaw2(yaw) @ np.array([s0 + half[0], 0.0])
    lowest = float(heights.min())
    grid = HeightGrid(center=center, yaw=yaw, cell=np.asarray(cell, dtype=np.float64),
                      heights=np.asarray(heights, dtype=np.float64), bottom_z=lowest - CATCH_GAP - 0.1)
    return Terrain(kind=kind, spec=spec, planes=(TerrainPlane.horizontal(lowest - CATCH_GAP),), grids=(grid,),
                   region=region)


def _read_heightmap(path: Path) -> np.ndarray:
    """(mx, my) heights from a PNG (grey / full scale; image columns +x, top row +y) or a .npy ([i, j] = [x, y])."""
    if not path.is_file():
        raise ConfigError(f"heightmap file {path} does not exist; give a PNG or .npy height map")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        try:
            data = np.load(path, allow_pickle=False)
        except Exception as exc:
            raise ConfigError(f"heightmap {path} cannot be read as .npy ({exc}); save it with numpy.save") from exc
        data = np.asarray(data, dtype=np.float64)
    elif suffix == ".png":
        import imageio.v3 as iio

        try:
            image = np.asarray(iio.imread(path))
        except Exception as exc:
            raise ConfigError(f"heightmap {path} cannot be read as PNG ({exc}); save it as a grey PNG") from exc
        full = 65535.0 if image.dtype == np.uint16 else 255.0 if image.dtype == np.uint8 else 1.0
        if image.ndim == 3:
            image = image[..., :3].mean(axis=-1) if image.shape[-1] >= 3 else image[..., 0]
        data = (np.asarray(image, dtype=np.float64) / full)[::-1, :].T  # rows top = +y -> [x, y]
    else:
        raise ConfigError(f"heightmap {path}: suffix '{path.suffix}' is not .png or .npy; convert the map")
    if data.ndim != 2 or min(data.shape) < 2 or not np.all(np.isfinite(data)):
        raise ConfigError(f"heightmap {path} must be a finite 2-D map of at least 2 x 2, got shape {data.shape}")
    return data


def _mujoco_hfield(grid: HeightGrid) -> dict:
    """MuJoCo's description of a grid: nrow (y), ncol (x), data (nrow, ncol) in [0, 1] with row 0 at -y, size
    (hx, hy, elevation range, base depth) and the geom pos (x, y, lowest height)."""
    lo, hi = float(grid.heights.min()), float(grid.heights.max())
    span = hi - lo
    data = (grid.heights.T - lo) / span if span > 0 else np.zeros(grid.heights.T.shape)
    hx, hy = grid.half_extent
    return {"nrow": grid.heights.shape[1], "ncol": grid.heights.shape[0], "data": data,
            "size": np.array([hx, hy, span if span > 0 else 1e-6, lo - grid.bottom_z]),
            "pos": np.array([grid.center[0], grid.center[1], lo])}


def _grid_surface(grid: HeightGrid, px: np.ndarray, py: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Height (P,) and normal (P, 3) of a grid's triangles at (px, py); -inf off its footprint."""
    c, s = math.cos(grid.yaw), math.sin(grid.yaw)
    dx, dy = px - grid.center[0], py - grid.center[1]
    hx, hy = grid.half_extent
    fx = (c * dx + s * dy + hx) / grid.cell[0]
    fy = (-s * dx + c * dy + hy) / grid.cell[1]
    nx, ny = grid.heights.shape
    tol = 1e-9
    inside = (fx >= -tol) & (fx <= nx - 1 + tol) & (fy >= -tol) & (fy <= ny - 1 + tol)
    i = np.clip(np.floor(fx).astype(np.int64), 0, nx - 2)
    j = np.clip(np.floor(fy).astype(np.int64), 0, ny - 2)
    u, v = np.clip(fx - i, 0.0, 1.0), np.clip(fy - j, 0.0, 1.0)
    h = grid.heights
    h00, h10, h01, h11 = h[i, j], h[i + 1, j], h[i, j + 1], h[i + 1, j + 1]
    lower = u >= v  # triangle (i, j) (i+1, j) (i+1, j+1); else (i, j) (i+1, j+1) (i, j+1)
    z = np.where(lower, h00 + u * (h10 - h00) + v * (h11 - h10), h00 + v * (h01 - h00) + u * (h11 - h01))
    gx = np.where(lower, h10 - h00, h11 - h01) / grid.cell[0]
    gy = np.where(lower, h11 - h10, h01 - h00) / grid.cell[1]
    n = np.stack([-(c * gx - s * gy), -(s * gx + c * gy), np.ones_like(gx)], axis=-1)
    n /= np.linalg.norm(n, axis=-1, keepdims=True)
    return np.where(inside, z, -np.inf), n


def _grid_corners(grid: HeightGrid) -> np.ndarray:
    hx, hy = grid.half_extent
    local = np.array([[-hx, -hy], [hx, -hy], [hx, hy], [-hx, hy]])
    return local @ _yaw2(grid.yaw).T + grid.center


def _grid_border(grid: HeightGrid) -> np.ndarray:
    corners = _grid_corners(grid)
    return np.stack([corners, np.roll(corners, -1, axis=0)], axis=1)


def _grid_steep_edges(grid: HeightGrid) -> np.ndarray:
    """Segments between grid neighbours that differ by >= EDGE_MIN_JUMP and are steeper than EDGE_MAX_SLOPE, on the
    line half-way between them, merged along runs (E, 2, 2) world."""
    h = grid.heights
    hx, hy = grid.half_extent
    cx, cy = grid.cell
    out = []
    for axis, (step, other) in enumerate(((cx, cy), (cy, cx))):
        jump = np.abs(np.diff(h, axis=axis))
        flag = (jump >= EDGE_MIN_JUMP) & (jump >= EDGE_MAX_SLOPE * step)
        if axis == 1:
            flag = flag.T  # rows: the line's index along y; columns: position along x
        n_other = flag.shape[1]
        for line in np.flatnonzero(flag.any(axis=1)):
            for a, b in _runs(flag[line]):
                lo_, hi_ = max(a - 0.5, 0.0), min(b - 0.5, n_other - 1.0)  # runs of nodes -> spans between them
                pos = -(hx if axis == 0 else hy) + (line + 0.5) * step
                t0 = -(hy if axis == 0 else hx) + lo_ * other
                t1 = -(hy if axis == 0 else hx) + hi_ * other
                seg = [[pos, t0], [pos, t1]] if axis == 0 else [[t0, pos], [t1, pos]]
                out.append(seg)
    if not out:
        return np.zeros((0, 2, 2))
    local = np.array(out, dtype=np.float64)
    return local @ _yaw2(grid.yaw).T + grid.center


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of the runs of True in a 1-D bool array."""
    padded = np.concatenate([[False], np.asarray(flags, dtype=bool), [False]])
    change = np.flatnonzero(padded[1:] != padded[:-1])
    return list(zip(change[::2].tolist(), change[1::2].tolist()))


def _unique_segments(segments: np.ndarray) -> np.ndarray:
    if not len(segments):
        return np.zeros((0, 2, 2))
    ordered = np.where((segments[:, 0, 0] > segments[:, 1, 0])
                       | ((segments[:, 0, 0] == segments[:, 1, 0]) & (segments[:, 0, 1] > segments[:, 1, 1])),
                       True, False)
    canon = np.where(ordered[:, None, None], segments[:, ::-1], segments)
    _, index = np.unique(np.round(canon.reshape(-1, 4), 9), axis=0, return_index=True)
    return canon[np.sort(index)]


def _box_corners(box: TerrainBox) -> np.ndarray:
    """(8, 3) world corners; corner k has sign bits x = k & 1, y = k >> 1 & 1, z = k >> 2 & 1 (1: +half)."""
    signs = np.array([[1 if (k >> a) & 1 else -1 for a in range(3)] for k in range(8)], dtype=np.float64)
    return (signs * box.half_size) @ quat_to_matrix(box.quat_xyzw).T + box.center


def _box_mesh(box: TerrainBox) -> tuple[np.ndarray, np.ndarray]:
    corners = _box_corners(box)
    quads = [(0, 2, 6, 4), (1, 5, 7, 3), (0, 4, 5, 1), (2, 3, 7, 6), (0, 1, 3, 2), (4, 6, 7, 5)]
    faces = []
    for a, b, c, d in quads:
        for tri in ((a, b, c), (a, c, d)):
            p = corners[list(tri)]
            outward = np.dot(np.cross(p[1] - p[0], p[2] - p[0]), p.mean(axis=0) - box.center) > 0
            faces.append(tri if outward else tri[::-1])
    return corners, np.array(faces)


def _grid_mesh(grid: HeightGrid) -> tuple[np.ndarray, np.ndarray]:
    """Top surface (the contact triangles), side walls and bottom of a grid, outward faces."""
    nx, ny = grid.heights.shape
    hx, hy = grid.half_extent
    lx = -hx + grid.cell[0] * np.arange(nx)
    ly = -hy + grid.cell[1] * np.arange(ny)
    gx, gy = np.meshgrid(lx, ly, indexing="ij")
    xy = np.stack([gx.ravel(), gy.ravel()], axis=-1) @ _yaw2(grid.yaw).T + grid.center
    top = np.column_stack([xy, grid.heights.ravel()])
    bottom = np.column_stack([xy, np.full(len(xy), grid.bottom_z)])
    vertices = np.concatenate([top, bottom])
    idx = np.arange(nx * ny).reshape(nx, ny)
    v00, v10, v01, v11 = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel()
    faces = [np.stack([v00, v10, v11], 1), np.stack([v00, v11, v01], 1)]  # up: counter-clockwise from above
    faces += [np.stack([v00, v11, v10], 1) + nx * ny, np.stack([v00, v01, v11], 1) + nx * ny]  # bottom: down
    ring = np.concatenate([idx[:, 0], idx[-1, 1:], idx[-2::-1, -1], idx[0, -2:0:-1]])  # counter-clockwise from above
    nxt = np.roll(ring, -1)
    faces += [np.stack([ring, nxt + nx * ny, nxt], 1), np.stack([ring, ring + nx * ny, nxt + nx * ny], 1)]
    return vertices, np.concatenate(faces)


def _quat_z_to(normal: np.ndarray) -> np.ndarray:
    """xyzw rotation taking +z to the unit ``normal`` (the shortest arc)."""
    n = np.asarray(normal, dtype=np.float64) / np.linalg.norm(normal)
    axis = np.cross([0.0, 0.0, 1.0], n)
    s = np.linalg.norm(axis)
    if s < 1e-12:
        return np.array([0.0, 0.0, 0.0, 1.0]) if n[2] > 0 else np.array([1.0, 0.0, 0.0, 0.0])
    angle = math.atan2(s, n[2])
    return np.concatenate([axis / s * math.sin(angle / 2), [math.cos(angle / 2)]])


def _ranges(bounds: np.ndarray, x_range, y_range, *, grow: float, default: float | None):
    out = []
    for k, given in enumerate((x_range, y_range)):
        if given is not None:
            lo, hi = (float(v) for v in given)
        elif np.all(np.isfinite(bounds[k])):
            lo, hi = bounds[k, 0] - grow, bounds[k, 1] + grow
        elif default is not None:
            lo, hi = -default, default
        else:
            raise ConfigError("this terrain has no bounds (planes only); pass x_range and y_range, e.g. "
                              "to_npz(path, (-1, 10), (-2, 2))")
        if not hi > lo:
            raise ConfigError(f"terrain range ({lo}, {hi}) is empty; give (low, high) with high > low")
        out.append((lo, hi))
    return out


def _static_geoms(model) -> list[int]:
    """Geoms fixed to the world (world body or bodies welded to it, not mocap) that collide."""
    out = []
    for g in range(model.ngeom):
        body = int(model.geom_bodyid[g])
        if model.body_weldid[body] != 0 or model.body_mocapid[body] >= 0:
            continue
        if model.geom_contype[g] == 0 and model.geom_conaffinity[g] == 0:
            continue
        out.append(g)
    return out


def _terrain_of_model(model, *, spec: str, source: str) -> Terrain:
    """Planes, boxes and height fields of a compiled scene (:meth:`Terrain.from_mjcf`)."""
    import mujoco

    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    planes, boxes, grids, skipped = [], [], [], []
    for g in _static_geoms(model):
        kind = int(model.geom_type[g])
        pos = np.array(data.geom_xpos[g], dtype=np.float64)
        rot = np.array(data.geom_xmat[g], dtype=np.float64).reshape(3, 3)
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom {g}"
        if kind == mujoco.mjtGeom.mjGEOM_PLANE:
            if rot[2, 2] <= 1e-9:
                skipped.append(f"{name} (a plane facing down or sideways)")
                continue
            planes.append(TerrainPlane(point=pos, normal=rot[:, 2].copy()))
        elif kind == mujoco.mjtGeom.mjGEOM_BOX:
            boxes.append(TerrainBox(center=pos, quat_xyzw=matrix_to_quat(rot),
                                    half_size=np.array(model.geom_size[g], dtype=np.float64)))
        elif kind == mujoco.mjtGeom.mjGEOM_HFIELD:
            if abs(rot[2, 2] - 1.0) > 1e-9:
                skipped.append(f"{name} (a tilted height field)")
                continue
            h = int(model.geom_dataid[g])
            nrow, ncol = int(model.hfield_nrow[h]), int(model.hfield_ncol[h])
            adr = int(model.hfield_adr[h])
            rx, ry, elevation, base = (float(v) for v in model.hfield_size[h])
            values = np.array(model.hfield_data[adr:adr + nrow * ncol], dtype=np.float64).reshape(nrow, ncol)
            heights = pos[2] + values.T * elevation  # (ncol = x, nrow = y)
            grids.append(HeightGrid(center=pos[:2].copy(), yaw=math.atan2(rot[1, 0], rot[0, 0]),
                                    cell=np.array([2 * rx / (ncol - 1), 2 * ry / (nrow - 1)]), heights=heights,
                                    bottom_z=pos[2] - base))
        else:
            skipped.append(f"{name} ({mujoco.mjtGeom(kind).name.removeprefix('mjGEOM_').lower()})")
    notes = ()
    if skipped:
        notes = (f"{source}: static geoms other than planes, boxes and height fields are not terrain: "
                 f"{', '.join(skipped[:8])}{' ...' if len(skipped) > 8 else ''}",)
    return Terrain(kind="mjcf", spec=spec, planes=tuple(planes), boxes=tuple(boxes), grids=tuple(grids), notes=notes)


__all__ = ["Terrain", "TerrainPlane", "TerrainBox", "HeightGrid", "MjcfFragment", "parse_terrain_spec",
           "terrain_from_prompt", "resolve_terrain", "DEFAULT_START_X", "DEFAULT_LENGTH", "DEFAULT_WIDTH", "BACK",
           "DEFAULT_ROUGH_WAVELENGTH", "DEFAULT_HEIGHTMAP_CELL", "NPZ_CELL", "EDGE_MIN_JUMP"]


# ----------------------------------------------------------------------------- run directories
TERRAIN_MARGIN = 1.0  # m around the clip's root path that a run's terrain.npz covers


def save_run_terrain(run, terrain: Terrain, root_xy: np.ndarray, notes: Sequence[str] = ()) -> None:
    """Record ``terrain`` in a run directory (``run``: :class:`akd_core.io.rundir.RunDir`): manifest ``terrain``
    (kind, spec, notes) and, unless flat, RUN/terrain.npz sampled over the clip's root path ``root_xy`` (F,2) plus
    TERRAIN_MARGIN m (docs/terrain.md)."""
    from akd_core.io.rundir import TERRAIN

    path = run.file(TERRAIN)
    if terrain.is_flat:
        path.unlink(missing_ok=True)
    else:
        lo, hi = root_xy.min(axis=0) - TERRAIN_MARGIN, root_xy.max(axis=0) + TERRAIN_MARGIN
        terrain.to_npz(path, (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1])))
    run.update_manifest(terrain={"kind": terrain.kind, "spec": terrain.spec, "notes": list(notes)})


def run_terrain(run) -> Terrain:
    """The terrain a run was made on: its manifest's spec re-parsed where it is procedural, or its MJCF scene read
    again while the file is there (exact edges), else RUN/terrain.npz, else flat ground."""
    from akd_core.io.rundir import TERRAIN

    info = run.manifest().get("terrain") or {}
    spec, kind = str(info.get("spec") or ""), str(info.get("kind") or "flat")
    if kind == "flat" or not spec or spec == "flat":
        return Terrain.flat() if not run.file(TERRAIN).exists() else Terrain.from_npz(run.file(TERRAIN))
    if kind in ("slope", "stairs", "steps", "rough"):
        try:
            return parse_terrain_spec(spec, source=f"{run.path}/manifest.json terrain.spec")
        except ConfigError:
            pass
    if spec.lower().endswith(".xml") and Path(spec).is_file():  # an MJCF scene: its exact boxes and height fields
        try:
            return Terrain.from_mjcf(spec)
        except (ConfigError, MJCFError):
            pass
    if run.file(TERRAIN).exists():
        return Terrain.from_npz(run.file(TERRAIN))
    raise ConfigError(f"{run.path}: manifest.json names terrain {spec!r} but {TERRAIN} is missing; run `akd gait` "
                      "again with --terrain")
