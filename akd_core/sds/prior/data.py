"""`akd prior data`: a captioned training video set rendered exactly as `akd distill` renders.

The built-in quadruped performs gait-library motions (trot, pace, bound, gallop, walk, and standing) at random
speeds, headings, turn rates, cadences and start times, seen through distill's cameras (``follow``: distill's
default direction, re-framed every frame; ``orbit``: a random azimuth and elevation) with distill's optional
render blur. Every clip goes through :class:`akd_core.sds.distill.ClipRenderer` (FK -> LBS of the Gaussian asset ->
splatting over the checkerboard ground with its shadow -> blur), the code path SDS scores, so a prior trained on
this set sees the renders it will later be asked about.

Layout of DIR::

    DIR/config.json          the DataConfig (a resume with other settings is refused)
    DIR/index.json           {"config", "clips": [{"file", "prompt", "gait", "camera", ...}, ...]}
    DIR/clips/000123.npz     frames uint8 (F, H, W, 3); prompt str; meta (JSON str: gait spec, camera, blur);
                             joint_names, joint_pos (F, J), root_pos (F, 3), root_quat (F, 4) xyzw (the pose shown)

Clip ``i`` is drawn from its own random stream (seed, i), so the set is identical whatever the order or the number
of runs that wrote it; existing clips are skipped (resume), and each file is written atomically (Ctrl-C safe).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from akd_core.io.errors import ConfigError
from akd_core.io.fileio import save_npz_atomic, write_json_atomic
from akd_core.model.legs import find_legs
from akd_core.model.load import load_robot
from akd_core.model.spatial import quat_multiply, quat_yaw, yaw_quat
from akd_core.motion.clip import Motion
from akd_core.motion.gait import GaitSpec, generate_gait_result, resolve_spec, speed_for_level, stance_pose
from akd_core.render import to_uint8_frames
from akd_core.sds.clip_render import ClipRenderer, MotionParameters, RenderView, fit_clip

BANK_SECONDS = 4.0  # length of the gait clips that training clips are cut from
BANK_FPS = 25.0
SPEED_LEVELS = (0.1, 0.35, 0.6, 0.85)
FREQUENCY_SCALES = (0.9, 1.0, 1.1)
TURN_RATES = (0.0, 0.0, 0.4, -0.4)  # straight twice as often
GAITS = ("trot", "pace", "bound", "gallop", "walk", "standing")
LEGACY_DEFAULTS = {"min_stride_frames": 0.0}  # what a config.json without the key was made with
CLIPS_DIR = "clips"
MOTIONS_DIR = "motions"
INDEX = "index.json"
CONFIG = "config.json"

# prompt templates per gait; {noun} a dog/robot word, {how} a speed/heading phrase (may be empty)
PROMPT_TEMPLATES: dict[str, tuple[str, ...]] = {
    "trot": ("a {noun} trotting{how}", "a {noun} trots{how}", "a trotting {noun}{how}"),
    "pace": ("a {noun} pacing{how}", "a {noun} paces{how}", "a {noun} walking with a pacing gait{how}"),
    "bound": ("a {noun} bounding{how}", "a {noun} bounds{how}", "a {noun} hopping forward in bounds{how}"),
    "gallop": ("a {noun} galloping{how}", "a {noun} gallops{how}", "a {noun} running fast in a gallop{how}"),
    "walk": ("a {noun} walking{how}", "a {noun} walks{how}", "a {noun} strolling{how}"),
    "standing": ("a {noun} standing still", "a {noun} stands on the ground", "a {noun} standing in place"),
}
NOUNS = ("dog", "robot dog", "quadruped robot", "four-legged robot")
# per gait, the gait whose footfall pattern differs least (trot / pace: diagonal vs lateral pairs; bound / gallop:
# the lead-leg offset; walk / pace: the four-beat vs lateral pairs; standing / walk: the slowest motion)
PARTNER_GAIT = {"trot": "pace", "pace": "trot", "bound": "gallop", "gallop": "bound", "walk": "pace",
                "standing": "walk"}


@dataclass(frozen=True)
class DataConfig:
    """What `akd prior data` renders. Defaults: 9 frames (8n+1) at 8 fps (distill's video rate), 64x64."""

    clips: int = 100
    seed: int = 0
    frames: int = 9
    width: int = 64
    height: int = 64
    fps: float = 8.0
    robot: str = "quadruped"
    n_gaussians: int = 2000
    asset_seed: int = 0  # distill's default seed: the same Gaussian asset distill renders
    backend: str = "auto"
    orbit_fraction: float = 0.7  # the rest: distill's follow camera (azimuth -70, elevation 20)
    blur_fraction: float = 0.4
    max_blur_px: float = 4.0
    standing_fraction: float = 1.0 / 6.0
    # initial body yaw drawn from +-this around +x, the heading `akd distill` starts from (180: any direction, so
    # the follow camera sees the body from every side; a small spread keeps distill's side view of the legs)
    heading_spread_deg: float = 180.0
    # every stride spans at least this many video frames: a gait whose cadence is above fps / this value is slowed
    # to it, speed and cadence together (same step length). At 8 fps the gait library's natural cadence for the
    # built-in quadruped is 2.3-5 Hz (trot, pace), 1.6-3.5 frames per stride, a strobe in which the footfall order
    # is hardly visible and, above 4 Hz, aliased; SDS from a neutral start steps at 0.8-1.7 Hz
    # (docs/prior_training.md, "What did not work"). 4 frames resolve a quarter cycle (a walk's four beats). 0: no cap.
    min_stride_frames: float = 4.0

    def __post_init__(self) -> None:
        if self.clips < 1:
            raise ConfigError(f"--clips must be >= 1, got {self.clips}")
        if self.frames < 2:
            raise ConfigError(f"--frames must be >= 2, got {self.frames}")
        if self.width < 8 or self.height < 8:
            raise ConfigError(f"--size must be at least 8 x 8 pixels, got {self.width} x {self.height}")
        for name in ("orbit_fraction", "blur_fraction", "standing_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(self, name)}")
        if self.min_stride_frames != 0.0 and self.min_stride_frames < 2.0:
            raise ConfigError(f"--min-stride-frames must be 0 (no cap) or >= 2 (the Nyquist limit), got "
                              f"{self.min_stride_frames}")
        if not 0.0 <= self.heading_spread_deg <= 180.0:
            raise ConfigError(f"--heading-spread must be in [0, 180] degrees, got {self.heading_spread_deg}")


def clip_recipe(config: DataConfig, index: int) -> dict[str, Any]:
    """The random choices of clip ``index`` (from its own stream (seed, index)): gait, speed level, heading, ..."""
    rng = np.random.default_rng([config.seed, index])
    spread = math.radians(config.heading_spread_deg)  # radians(180) == pi: the sets made before the option agree
    standing = rng.random() < config.standing_fraction
    gait = "standing" if standing else str(rng.choice(GAITS[:-1]))
    recipe: dict[str, Any] = {
        "gait": gait,
        "speed_level": float(rng.choice(SPEED_LEVELS)),  # of the pattern's Froude range (0 slow, 1 fast)
        "frequency_scale": float(rng.choice(FREQUENCY_SCALES)),  # x the gait library's cadence for that speed
        "turn_rate": float(rng.choice(TURN_RATES)),  # rad/s, + = left
        "heading": float(rng.uniform(-spread, spread)),  # initial yaw of the body in the world
        "start": float(rng.uniform(0.0, 1.0)),  # fraction of the bank clip's latest start (0: the ramp from rest)
        "camera": "orbit" if rng.random() < config.orbit_fraction else "follow",
        "azimuth_deg": float(rng.uniform(-180.0, 180.0)),
        "elevation_deg": float(rng.uniform(10.0, 40.0)),
        "margin": float(rng.uniform(0.9, 1.4)),
        "blur_px": float(rng.uniform(0.0, config.max_blur_px)) if rng.random() < config.blur_fraction else 0.0,
        "template": int(rng.integers(len(PROMPT_TEMPLATES[gait]))),
        "noun": str(rng.choice(NOUNS)),
    }
    if recipe["camera"] == "follow":  # distill's default follow camera
        recipe["azimuth_deg"], recipe["elevation_deg"], recipe["margin"] = -70.0, 20.0, 1.4
    return recipe


def prompt_for(recipe: dict[str, Any]) -> str:
    """Caption from the gait's templates: speed words from the speed level, turning words from the turn rate."""
    gait = recipe["gait"]
    parts = []
    if gait != "standing":
        level = recipe["speed_level"]
        if level < 0.3:
            parts.append("slowly")
        elif level > 0.7:
            parts.append("fast")
        turn = recipe["turn_rate"]
        parts.append("turning left" if turn > 0.2 else "turning right" if turn < -0.2 else "forward")
    how = (" " + " ".join(parts)) if parts else ""
    return PROMPT_TEMPLATES[gait][recipe["template"]].format(noun=recipe["noun"], how=how)


def rival_prompt(prompt: str, gait: str, other: str) -> str:
    """``prompt`` (a caption of ``gait`` from :data:`PROMPT_TEMPLATES`) told with ``other``'s template of the same
    number, noun and speed/heading words: "a dog trotting fast forward" -> "a dog pacing fast forward". The
    contrastive term of `akd prior train` scores a clip under such a caption, which differs only in the gait.
    A caption no template of ``gait`` produces raises ConfigError."""
    for number, template in enumerate(PROMPT_TEMPLATES[gait]):
        for noun in NOUNS:
            head = template.replace("{noun}", noun).split("{how}")[0]  # every template ends with {how} or has none
            how = prompt[len(head):] if "{how}" in template and prompt.startswith(head) else None
            if how is None and prompt != head:
                continue
            if gait == "standing" or how is None:
                how = " forward"
            rival = PROMPT_TEMPLATES[other][number % len(PROMPT_TEMPLATES[other])]
            return rival.format(noun=noun, how=how)
    raise ConfigError(f"caption {prompt!r} is not one of the {gait} templates of "
                      "akd_core.sds.prior.data.PROMPT_TEMPLATES; "
                      "train the contrastive term only on `akd prior data` clips (or set --contrast-weight 0)")


def caption_words() -> list[str]:
    """Every whitespace-separated word a caption from :func:`prompt_for` can contain (sorted): the vocabulary a
    prior's tokenizer needs so that no caption word falls back to letters."""
    hows = ("slowly", "fast", "forward", "turning", "left", "right")
    words = set(hows)
    for templates in PROMPT_TEMPLATES.values():
        for template in templates:
            for noun in NOUNS:
                words.update(template.format(noun=noun, how="").split())
    return sorted(words)


# ----------------------------------------------------------------------------- the renderer
class DataRenderer:
    """The robot, its legs and stance, and one distill ClipRenderer shared by every clip."""

    def __init__(self, config: DataConfig, bank: Path | None = None):

        self.config = config
        self.robot = load_robot(config.robot)
        self.legs = find_legs(self.robot)
        if len(self.legs) != 4:
            raise ConfigError(f"akd prior data renders quadruped gaits; robot {config.robot!r} has "
                              f"{len(self.legs)} legs")
        self.stance = stance_pose(self.robot, self.legs)
        self.bank = bank
        self._cache: dict[str, tuple[Any, dict[str, Any]]] = {}
        self.renderer = ClipRenderer(self.robot, config.width, config.height, config.n_gaussians,
                                     config.asset_seed, config.backend)

    def gait_motion(self, recipe: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The long gait clip a recipe cuts from, from the motion bank DIR/motions (generated once per key).

        generate_gait costs ~4 s per call on the 2 shared cores (most of it the stance search), so a set reuses
        one clip per (gait, speed level, cadence, turn rate) key: at most 5 x 4 x 3 x 3 = 180 generations.
        """

        key = (f"{recipe['gait']}_s{recipe['speed_level']:.2f}_f{recipe['frequency_scale']:.2f}"
               f"_t{recipe['turn_rate']:+.2f}")
        max_cadence = self.config.fps / self.config.min_stride_frames if self.config.min_stride_frames else None
        if max_cadence is not None:
            key += f"_c{max_cadence:.2f}"
        path = self.bank / f"{key}.npz" if self.bank is not None else None
        if key in self._cache:
            return self._cache[key]
        if path is not None and path.exists():
            with np.load(path, allow_pickle=False) as data:
                motion = Motion(fps=float(data["fps"]), joint_names=[str(n) for n in data["joint_names"]],
                                joint_pos=data["joint_pos"], root_pos=data["root_pos"], root_quat=data["root_quat"])
                spec = json.loads(str(data["spec"]))
        else:
            speed = speed_for_level(recipe["gait"], self.legs, self.stance.leg_length, recipe["speed_level"])
            # the level body the shipped prior was trained on: its slowed gaits (<= 2 Hz) would fly too long to carry
            spec0 = GaitSpec(pattern=recipe["gait"], speed=speed, turn_rate=recipe["turn_rate"], level_body=True)
            cadence = resolve_spec(spec0, self.legs, self.stance).frequency * recipe["frequency_scale"]
            spec0 = GaitSpec(pattern=recipe["gait"], speed=speed, turn_rate=recipe["turn_rate"], frequency=cadence,
                             level_body=True)
            if max_cadence is not None:
                spec0 = spec0.slowed_to(max_cadence, cadence)
            gait_log = logging.getLogger("akd.gait")
            level = gait_log.level
            gait_log.setLevel(logging.ERROR)  # slow-downs are kept as notes in the spec, not printed per clip
            try:
                result = generate_gait_result(self.robot, spec0, duration=BANK_SECONDS, fps=BANK_FPS,
                                              legs=self.legs)
            finally:
                gait_log.setLevel(level)
            motion = result.motion
            spec = result.spec.to_dict()
            if path is not None:
                save_npz_atomic(path, fps=np.float64(motion.fps), joint_names=np.array(motion.joint_names),
                                joint_pos=motion.joint_pos, root_pos=motion.root_pos, root_quat=motion.root_quat,
                                spec=np.array(json.dumps(spec)))
        self._cache[key] = (motion, spec)
        return motion, spec

    def motion(self, recipe: dict[str, Any]):
        """The clip's Motion at the video rate, config.frames frames, rotated to the recipe's heading."""

        cfg = self.config
        seconds = (cfg.frames - 1) / cfg.fps
        if recipe["gait"] == "standing":
            frames = cfg.frames
            joint_pos = np.tile(self.stance.joint_pos, (frames, 1))
            root_pos = np.tile([0.0, 0.0, self.stance.body_height], (frames, 1))
            root_quat = np.tile([0.0, 0.0, 0.0, 1.0], (frames, 1))
            motion = Motion(fps=cfg.fps, joint_names=self.robot.joint_names, joint_pos=joint_pos,
                            root_pos=root_pos, root_quat=root_quat)
            spec: dict[str, Any] = {"pattern": "standing", "speed": 0.0}
        else:
            full, spec = self.gait_motion(recipe)
            latest = max(BANK_SECONDS - seconds, 0.0)
            first = int(round(recipe["start"] * latest * full.fps))
            # the cut starts at the world origin, heading +x: the recipe's heading is applied below
            yaw0 = quat_yaw(full.root_quat[first])
            pos = full.root_pos[first:].astype(np.float64) - full.root_pos[first] * np.array([1.0, 1.0, 0.0])
            unrot = np.array([[math.cos(-yaw0), -math.sin(-yaw0), 0.0], [math.sin(-yaw0), math.cos(-yaw0), 0.0],
                              [0.0, 0.0, 1.0]])
            motion = Motion(fps=full.fps, joint_names=full.joint_names, joint_pos=full.joint_pos[first:],
                            root_pos=pos @ unrot.T,
                            root_quat=quat_multiply(yaw_quat(-yaw0), full.root_quat[first:].astype(np.float64)))
            motion = fit_clip(motion, cfg.frames, cfg.fps)
        yaw = recipe["heading"]
        rot = np.array([[math.cos(yaw), -math.sin(yaw), 0.0], [math.sin(yaw), math.cos(yaw), 0.0], [0.0, 0.0, 1.0]])
        motion.root_pos = (motion.root_pos.astype(np.float64) @ rot.T).astype(np.float32)
        motion.root_quat = quat_multiply(yaw_quat(yaw), motion.root_quat.astype(np.float64)).astype(np.float32)
        return motion, spec

    @torch.no_grad()
    def render(self, motion, recipe: dict[str, Any]) -> np.ndarray:
        """(F, H, W, 3) uint8: distill's ClipRenderer through the recipe's camera and blur (a RenderView)."""

        r = self.renderer
        means, covars = r.pose(*r.link_poses(MotionParameters(motion, self.robot)))
        r.margin = recipe["margin"]
        viewmats, K = r.camera(means, azimuth_deg=recipe["azimuth_deg"], elevation_deg=recipe["elevation_deg"])
        video = r.render_view(means, covars, RenderView(viewmats, K, recipe["blur_px"]))  # (F, 3, H, W)
        return to_uint8_frames(video)


def clip_path(out: Path, index: int) -> Path:
    return out / CLIPS_DIR / f"{index:06d}.npz"


def read_clip_meta(path: Path) -> dict[str, Any]:
    with np.load(path, allow_pickle=False) as data:
        return json.loads(str(data["meta"]))


def make_dataset(out: str | Path, config: DataConfig, progress: bool = True) -> dict[str, Any]:
    """Render ``config.clips`` clips into ``out`` (skipping the ones already there); returns a summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg_path = out / CONFIG
    cfg_dict = asdict(config)
    if cfg_path.exists():
        # keys added later: their defaults, or the value that reproduces the sets written before them
        old = {**asdict(DataConfig()), **LEGACY_DEFAULTS, **json.loads(cfg_path.read_text())}
        differ = {k: (old.get(k), v) for k, v in cfg_dict.items() if k != "clips" and old.get(k) != v}
        if differ:
            raise ConfigError(f"{out} holds clips made with other settings {differ} (old, new); use another --out "
                              "or the same settings to add clips")
    write_json_atomic(cfg_path, cfg_dict)
    todo = [i for i in range(config.clips) if not clip_path(out, i).exists()]
    renderer = DataRenderer(config, bank=out / MOTIONS_DIR) if todo else None
    started, rendered = time.perf_counter(), 0
    bar = tqdm(total=config.clips, initial=config.clips - len(todo), desc="prior data", unit="clip",
               disable=not progress, dynamic_ncols=True)
    try:
        for i in todo:
            recipe = clip_recipe(config, i)
            motion, spec = renderer.motion(recipe)
            frames = renderer.render(motion, recipe)
            prompt = prompt_for(recipe)
            meta = {"index": i, "prompt": prompt, "gait": recipe["gait"], "spec": spec, "recipe": recipe,
                    "camera": {"mode": recipe["camera"], "azimuth_deg": recipe["azimuth_deg"],
                               "elevation_deg": recipe["elevation_deg"], "margin": recipe["margin"]},
                    "blur_px": recipe["blur_px"], "fps": config.fps}
            save_npz_atomic(clip_path(out, i), frames=frames, prompt=np.array(prompt), meta=np.array(json.dumps(meta)),
                            joint_names=np.array(motion.joint_names), joint_pos=motion.joint_pos,
                            root_pos=motion.root_pos, root_quat=motion.root_quat)
            rendered += 1
            bar.update(1)
            bar.set_postfix(gait=recipe["gait"])
    finally:
        bar.close()
    seconds = time.perf_counter() - started
    entries = []
    for i in range(config.clips):
        meta = read_clip_meta(clip_path(out, i))
        entries.append({"file": f"{CLIPS_DIR}/{i:06d}.npz", **{k: meta[k] for k in ("prompt", "gait", "camera",
                                                                                      "blur_px")}})
    write_json_atomic(out / INDEX, {"config": cfg_dict, "clips": entries})
    return {"clips": config.clips, "rendered": rendered, "skipped": config.clips - rendered, "seconds": seconds,
            "clips_per_min": 60.0 * rendered / seconds if rendered and seconds > 0 else None}


def load_index(data: str | Path) -> dict[str, Any]:
    data = Path(data)
    path = data / INDEX
    if not path.exists():
        raise ConfigError(f"{path} not found: make the training set first with `akd prior data --out {data}`")
    return json.loads(path.read_text())
