"""A trained policy as one ONNX graph with everything a deployment needs in its metadata, and the onnxruntime
runner the ROS 2 policy node uses.

Graph (opset 17, batch dimension ``N`` free): input ``obs`` [N, D] float32 in the layout of
:func:`akd_core.learn.observation.observation_layout`; output ``pd_target`` [N, J] float32, the absolute PD targets
(rad) in ``joint_names`` order. Normalisation, the MLP (Gemm + Elu) and, for ``action_mode = reference``, the
addition of the observation's ``ref_joint_pos_1`` are inside the graph. The caller clips the targets to the joint
limits and rate-limits them (``limits`` below), as :func:`akd_core.learn.policy.clip_to_limits` does.

``metadata_props`` (all strings; JSON where structured):
``akd_format`` ("akd-policy-onnx"), ``akd_version``, ``robot``, ``joint_names``, ``control_hz``, ``dt``,
``observation_layout`` ([[name, size], ...]), ``reference_offsets``, ``action`` (text), ``action_mode``, ``kp``,
``kd`` (N m/rad, N m s/rad per joint: the PD law ``tau = kp (target - q) - kd qdot`` the policy was trained under),
``default_pose`` (the first clip's starting PD targets), ``limits`` ({lower, upper, velocity}), ``physics``
(armature, sim_dt, contact), ``clips`` (the reference clips, :meth:`ReferenceClip.to_dict` as JSON lists),
``start_states`` (each clip's first simulated state: where an episode starts), ``method``, ``train_summary``,
``task`` ("reference" or "velocity").

A velocity-command policy (``task`` "velocity") has no clips and no reference offsets; the command is part of
``obs``, and ``command`` says where and in what units: ``{"indices": [start, stop], "names": ["vx", "vy",
"yaw_rate"], "units": ["m/s", "m/s", "rad/s"], "frame": "heading", "box": {...}, "clock": {...}}`` (the box it was
trained on: :class:`akd_core.learn.command.CommandBox`, clip commands into it; the gait clock the caller keeps:
:class:`akd_core.learn.command.GaitClock`, its ``indices`` in ``obs`` and its ``rule``). Its ``start_states`` are the
library demos' first states (a stand in an ``akd library`` clip) with their gait ``phase``. With ``action_mode``
"residual" the graph also holds the library feedforward (initializers ``ff_*``: a table of library frames' keys and
PD targets, :class:`akd_core.learn.velocity_feedforward.LibraryFeedforward`): ``pd_target`` is that feedforward at
``obs``'s command and clock plus the bounded residual (a steering policy, ``--steer``: at the command shifted by
its last three network outputs); ``feedforward`` in the metadata states the rule. The caller
runs the graph as for any policy: nothing of the library is needed at run time. A policy trained with ``--history``
ends ``obs`` with a ``history`` term, and ``history`` in the metadata says what it holds: ``{"steps": H, "terms":
[...], "order": ...}``, the measured terms of the H control steps before the current one, newest first
(:class:`akd_core.learn.observation.ObservationHistory`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from akd_core.io.errors import ConfigError, DependencyError
from akd_core.io.fileio import atomic_path
from akd_core.learn.observation import HISTORY_TERMS, REFERENCE_OFFSETS, history_frames, observation_slices
from akd_core.learn.policy import PolicyMeta, TrackingPolicy
from akd_core.learn.reference import ReferenceClip
from akd_core.learn.velocity_feedforward import FF_COMMAND_SCALE, FF_MOVING_RAMP, FF_PHASE_SCALE

ONNX_FORMAT = "akd-policy-onnx"
ONNX_VERSION = 1
OPSET = 17


def _onnx():
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:
        raise DependencyError("exporting a policy to ONNX needs the onnx package: pip install onnx") from exc
    return onnx, TensorProto, helper, numpy_helper


def _plain(value: Any) -> Any:
    """JSON-ready copy: arrays -> lists rounded to float32 precision (7 significant digits)."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            return [float(f"{v:.7g}") for v in value.reshape(-1)] if value.ndim <= 1 else \
                [_plain(row) for row in value]
        return value.tolist()
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def onnx_metadata(meta: PolicyMeta, action_mode: str, steer: list[float] | None = None) -> dict[str, str]:
    """The ``metadata_props`` of the export (module docstring)."""
    train = {k: v for k, v in meta.train.items() if isinstance(v, (int, float, str, bool))}
    starts = [{k: np.asarray(v)[0] for k, v in s.items()} for s in meta.starts]
    fields = {
        "akd_format": ONNX_FORMAT, "akd_version": ONNX_VERSION, "robot": meta.robot,
        "joint_names": list(meta.joint_names), "control_hz": 1.0 / meta.dt, "dt": meta.dt,
        "observation_layout": [[n, s] for n, s in meta.obs_layout],
        "reference_offsets": list(REFERENCE_OFFSETS) if meta.task == "reference" else [],
        "action": "absolute PD targets (rad) per joint in joint_names order, for the PD law tau = kp (target - q) - "
                  "kd qdot; sent every 1/control_hz s, linear between control frames" + (
                      "; inside the graph: the library feedforward at obs's command and clock (a kernel-weighted "
                      "table of library frames, initializers ff_*) + feedforward_bound * tanh(network)"
                      if action_mode == "residual" else ""),
        "action_mode": action_mode, "kp": np.asarray(meta.kp, np.float64), "kd": np.asarray(meta.kd, np.float64),
        "default_pose": np.asarray(meta.starts[0]["actions"][0], np.float64) if meta.starts else [],
        "limits": meta.limits, "physics": meta.physics, "clips": [c.to_dict() for c in meta.clips],
        "start_states": starts, "method": meta.method, "train_summary": train, "task": meta.task,
    }
    if meta.task == "velocity":
        fields["command"] = meta.command
        steps = history_frames(meta.obs_layout, len(meta.joint_names))
        if steps > 0:
            fields["history"] = {"steps": steps, "terms": list(HISTORY_TERMS),
                                 "order": "newest first: the terms of obs's first columns one control step ago, two "
                                          "steps ago, ...; at a start every slot holds the first observation's terms"}
    if action_mode == "residual":
        fields["feedforward"] = {
            "initializers": {"keys": "ff_keys_t", "half_key_sq": "ff_half_key_sq", "targets": "ff_targets",
                             "bound": "ff_bound"},
            "command_scale": list(FF_COMMAND_SCALE), "phase_scale": FF_PHASE_SCALE, "moving_ramp": FF_MOVING_RAMP,
            "rule": "key = [command / command_scale, clip(max|command| / moving_ramp, 0, 1) * clock / phase_scale]; "
                    "w = softmax(key . keys - half_key_sq); feedforward = w @ targets; "
                    "pd_target = feedforward + bound * tanh(network output)"}
        if steer is not None:
            fields["feedforward"].update(
                steer_bound=list(steer), rule="command' = command + steer_bound * tanh(network output[J:J+3]); key = "
                "[command' / command_scale, clip(max|command'| / moving_ramp, 0, 1) * clock / phase_scale]; "
                "w = softmax(key . keys - half_key_sq); feedforward = w @ targets; "
                "pd_target = feedforward + bound * tanh(network output[:J])")
            fields["feedforward"]["initializers"]["steer_bound"] = "ff_steer_bound"
    return {k: v if isinstance(v, str) else json.dumps(_plain(v)) for k, v in fields.items()}


def _feedforward_nodes(policy: TrackingPolicy, numpy_helper, helper) -> tuple[list, list]:
    """Initializers and nodes computing ``feedforward`` [N, J] from ``obs``: the library table's kernel-weighted
    PD targets at the observation's command and clock (:class:`~akd_core.learn.velocity_feedforward.
    LibraryFeedforward`, the same arithmetic)."""
    ff = policy.feedforward
    arr = lambda value, name, dtype=np.float32: numpy_helper.from_array(np.asarray(value, dtype), name)  # noqa: E731
    inits = [arr([ff.command_slice.start], "ff_cmd_start", np.int64), arr([ff.command_slice.stop], "ff_cmd_stop",
                                                                             np.int64),
             arr([ff.clock_slice.start], "ff_clock_start", np.int64), arr([ff.clock_slice.stop], "ff_clock_stop",
                                                                           np.int64),
             arr([1], "ff_axis", np.int64), arr(ff.command_scale.numpy(), "ff_command_scale"),
             arr(FF_MOVING_RAMP, "ff_ramp"), arr(0.0, "ff_zero"), arr(1.0, "ff_one"),
             arr(1.0 / FF_PHASE_SCALE, "ff_phase_gain"), arr(ff.keys.numpy().T, "ff_keys_t"),
             arr(ff.half_key_sq.numpy(), "ff_half_key_sq"), arr(ff.targets.numpy(), "ff_targets"),
             arr(ff.bound.numpy(), "ff_bound")]
    node = helper.make_node
    nodes = [node("Slice", ["obs", "ff_cmd_start", "ff_cmd_stop", "ff_axis"], ["ff_command"]),
             node("Slice", ["obs", "ff_clock_start", "ff_clock_stop", "ff_axis"], ["ff_clock"])]
    if ff.steer_dims:  # the table is queried at the command shifted by steer_bound * tanh(the steering actions)
        j = policy.num_joints
        inits += [arr([j], "steer_start", np.int64), arr([j + ff.steer_dims], "steer_stop", np.int64),
                  arr(ff.steer_bound.numpy(), "ff_steer_bound")]
        nodes += [node("Slice", ["action", "steer_start", "steer_stop", "ff_axis"], ["steer_action"]),
                  node("Tanh", ["steer_action"], ["steer_squashed"]),
                  node("Mul", ["steer_squashed", "ff_steer_bound"], ["steer_offset"]),
                  node("Add", ["ff_command", "steer_offset"], ["ff_query_command"])]
    else:
        nodes.append(node("Identity", ["ff_command"], ["ff_query_command"]))
    nodes += [node("Div", ["ff_query_command", "ff_command_scale"], ["ff_cmd_key"]),
             node("Abs", ["ff_query_command"], ["ff_abs"]),
             node("ReduceMax", ["ff_abs"], ["ff_max"], axes=[1], keepdims=1),
             node("Div", ["ff_max", "ff_ramp"], ["ff_ramped"]),
             node("Clip", ["ff_ramped", "ff_zero", "ff_one"], ["ff_gate"]),
             node("Mul", ["ff_clock", "ff_gate"], ["ff_gated"]),
             node("Mul", ["ff_gated", "ff_phase_gain"], ["ff_phase_key"]),
             node("Concat", ["ff_cmd_key", "ff_phase_key"], ["ff_query"], axis=1),
             node("MatMul", ["ff_query", "ff_keys_t"], ["ff_dot"]),
             node("Sub", ["ff_dot", "ff_half_key_sq"], ["ff_logits"]),
             node("Softmax", ["ff_logits"], ["ff_weights"], axis=1),
             node("MatMul", ["ff_weights", "ff_targets"], ["feedforward"])]
    return inits, nodes


def build_onnx(policy: TrackingPolicy, meta: PolicyMeta):
    """The ONNX ModelProto of ``policy`` (module docstring)."""
    onnx, TensorProto, helper, numpy_helper = _onnx()
    state = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in policy.state_dict().items()
             if not k.startswith("feedforward.")}
    obs_dim, joints = state["obs_mean"].size, len(meta.joint_names)
    inits = [numpy_helper.from_array(state[k], k) for k in ("obs_mean", "obs_std", "act_mean", "act_std")]
    nodes = [helper.make_node("Sub", ["obs", "obs_mean"], ["centred"]),
             helper.make_node("Div", ["centred", "obs_std"], ["x0"])]
    linears = [m for m in policy.net if hasattr(m, "weight")]
    x = "x0"
    for i, layer in enumerate(linears):
        w, b = f"w{i}", f"b{i}"
        inits += [numpy_helper.from_array(layer.weight.detach().numpy().astype(np.float32), w),
                  numpy_helper.from_array(layer.bias.detach().numpy().astype(np.float32), b)]
        nodes.append(helper.make_node("Gemm", [x, w, b], [f"h{i}"], transB=1))
        x = f"h{i}"
        if i < len(linears) - 1:
            nodes.append(helper.make_node("Elu", [x], [f"a{i}"], alpha=1.0))
            x = f"a{i}"
    nodes += [helper.make_node("Mul", [x, "act_std"], ["scaled"]),
              helper.make_node("Add", ["scaled", "act_mean"], ["action"])]
    if policy.action_mode == "reference":
        ref = observation_slices(meta.obs_layout)["ref_joint_pos_1"]
        inits += [numpy_helper.from_array(np.array([ref.start], np.int64), "ref_start"),
                  numpy_helper.from_array(np.array([ref.stop], np.int64), "ref_stop"),
                  numpy_helper.from_array(np.array([1], np.int64), "ref_axis")]
        nodes += [helper.make_node("Slice", ["obs", "ref_start", "ref_stop", "ref_axis"], ["ref_joint_pos_1"]),
                  helper.make_node("Add", ["ref_joint_pos_1", "action"], ["pd_target"])]
    elif policy.action_mode == "residual":
        inits_ff, nodes_ff = _feedforward_nodes(policy, numpy_helper, helper)
        inits += inits_ff
        if policy.feedforward.steer_dims:  # the joint residual is the action's first J components
            inits += [numpy_helper.from_array(np.array([0], np.int64), "residual_start"),
                      numpy_helper.from_array(np.array([joints], np.int64), "residual_stop")]
            nodes_ff.append(helper.make_node("Slice", ["action", "residual_start", "residual_stop", "ff_axis"],
                                             ["joint_action"]))
        else:
            nodes_ff.append(helper.make_node("Identity", ["action"], ["joint_action"]))
        nodes += nodes_ff + [helper.make_node("Tanh", ["joint_action"], ["squashed"]),
                             helper.make_node("Mul", ["squashed", "ff_bound"], ["residual"]),
                             helper.make_node("Add", ["feedforward", "residual"], ["pd_target"])]
    else:
        nodes.append(helper.make_node("Identity", ["action"], ["pd_target"]))
    graph = helper.make_graph(nodes, "akd_policy", [helper.make_tensor_value_info("obs", TensorProto.FLOAT,
                                                                                    ["N", obs_dim])],
                              [helper.make_tensor_value_info("pd_target", TensorProto.FLOAT, ["N", joints])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="akd")
    model.ir_version = min(model.ir_version, 10)
    ff = policy.feedforward
    steer = ff.steer_bound.tolist() if ff is not None and ff.steer_dims else None
    for key, value in onnx_metadata(meta, policy.action_mode, steer).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(model)
    return model


def export_onnx(policy: TrackingPolicy, meta: PolicyMeta, path: str | Path) -> Path:
    """Write ``policy`` as ONNX to ``path`` atomically."""
    model = build_onnx(policy, meta)
    path = Path(path)
    with atomic_path(path) as tmp:
        Path(tmp).write_bytes(model.SerializeToString())
    return path


class OnnxPolicy:
    """An exported policy run by onnxruntime, with its metadata parsed (what the ROS 2 policy node runs)."""

    def __init__(self, path: str | Path):
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"ONNX policy {path} does not exist; write one with "
                              "`akd export-policy POLICY.pt -o POLICY.onnx`")
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise DependencyError("running an ONNX policy needs onnxruntime: pip install onnxruntime") from exc
        try:
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            self.ort_session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for a corrupt file
            raise ConfigError(f"{path} is not a loadable ONNX model ({exc})") from exc
        props = self.ort_session.get_modelmeta().custom_metadata_map
        if props.get("akd_format") != ONNX_FORMAT:
            raise ConfigError(f"{path} is not an AKD policy export (metadata akd_format != '{ONNX_FORMAT}'); "
                              "write one with `akd export-policy`")
        self.path = path
        self.meta = {k: (v if k in ("akd_format", "robot", "action", "action_mode", "method", "task")
                         else json.loads(v)) for k, v in props.items()}
        self.task = str(self.meta.get("task", "reference"))
        self.command: dict[str, Any] = self.meta.get("command") or {}
        self.joint_names: list[str] = list(self.meta["joint_names"])
        self.dt = float(self.meta["dt"])
        self.layout = [(str(n), int(s)) for n, s in self.meta["observation_layout"]]
        self.clips = [ReferenceClip.from_dict(c) for c in self.meta["clips"]]
        self.limits = {k: np.asarray([np.inf if v is None else v for v in vals], np.float64)
                       for k, vals in self.meta["limits"].items()}
        self.start_states = [{k: np.asarray(v, np.float64) for k, v in s.items()} for s in self.meta["start_states"]]

    def act(self, obs: np.ndarray) -> np.ndarray:
        """PD targets (N, J) float64 from observations (N, D)."""
        out = self.ort_session.run(["pd_target"], {"obs": np.asarray(obs, dtype=np.float32).reshape(-1, self.obs_dim)})
        return out[0].astype(np.float64)

    @property
    def obs_dim(self) -> int:
        return sum(s for _, s in self.layout)
