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
``odometry`` (text: "none", or how the graph estimates the base velocity itself; see below).

A policy trained with ``--odometry`` carries leg odometry (:mod:`akd_core.learn.odometry`): the graph computes the
feet's forward kinematics from ``obs``'s joint angles (Sin, Cos, MatMul per link of the chains from the base to the
feet), their velocities by a central difference along ``joint_vel``, the stance weights from ``gravity_body``, and
appends the 3 numbers to ``obs`` before the normalisation. The input stays the observation of the layout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from akd_core.io.errors import ConfigError, DependencyError
from akd_core.io.fileio import atomic_path
from akd_core.learn.observation import REFERENCE_OFFSETS, observation_slices
from akd_core.learn.policy import PolicyMeta, TrackingPolicy
from akd_core.learn.reference import ReferenceClip

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


def onnx_metadata(meta: PolicyMeta, action_mode: str, odometry: bool = False) -> dict[str, str]:
    """The ``metadata_props`` of the export (module docstring)."""
    train = {k: v for k, v in meta.train.items() if isinstance(v, (int, float, str, bool))}
    starts = [{k: np.asarray(v)[0] for k, v in s.items()} for s in meta.starts]
    fields = {
        "akd_format": ONNX_FORMAT, "akd_version": ONNX_VERSION, "robot": meta.robot,
        "joint_names": list(meta.joint_names), "control_hz": 1.0 / meta.dt, "dt": meta.dt,
        "observation_layout": [[n, s] for n, s in meta.obs_layout], "reference_offsets": list(REFERENCE_OFFSETS),
        "action": "absolute PD targets (rad) per joint in joint_names order, for the PD law tau = kp (target - q) - "
                  "kd qdot; sent every 1/control_hz s, linear between control frames",
        "action_mode": action_mode, "kp": np.asarray(meta.kp, np.float64), "kd": np.asarray(meta.kd, np.float64),
        "default_pose": np.asarray(meta.starts[0]["actions"][0], np.float64) if meta.starts else [],
        "limits": meta.limits, "physics": meta.physics, "clips": [c.to_dict() for c in meta.clips],
        "start_states": starts, "method": meta.method, "train_summary": train,
        "odometry": ("leg odometry inside the graph: the base velocity estimated from joint_pos, joint_vel, "
                     "ang_vel_body and gravity_body (akd_core.learn.odometry) is appended to obs before the network"
                     if odometry else "none"),
    }
    return {k: v if isinstance(v, str) else json.dumps(_plain(v)) for k, v in fields.items()}


class _Graph:
    """Collects ONNX nodes and constant initialisers under generated names."""

    def __init__(self, helper, numpy_helper):
        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def const(self, value: np.ndarray, stem: str = "c") -> str:
        name = self.name(stem)
        array = np.asarray(value)
        array = array.astype(np.int64 if array.dtype.kind in "iu" else np.float32)
        self.inits.append(self.numpy_helper.from_array(array, name))
        return name

    def op(self, kind: str, *inputs: str, stem: str | None = None, **attrs: Any) -> str:
        out = self.name(stem or kind.lower())
        self.nodes.append(self.helper.make_node(kind, list(inputs), [out], **attrs))
        return out


def _odometry_graph(g: _Graph, policy: TrackingPolicy, obs: str) -> str:
    """Nodes computing :class:`akd_core.learn.odometry.LegOdometry` of ``obs`` [N, D]; returns the [N, 3] output."""
    from akd_core.learn.odometry import DIFF_STEP_S, STANCE_TAU_M, _skew

    chains = policy.odometry.chains
    axis1 = g.const(np.array([1]))

    def columns(sl: slice) -> str:
        return g.op("Slice", obs, g.const(np.array([sl.start])), g.const(np.array([sl.stop])), axis1)

    s = policy.slices
    q, qd, gyro, gravity = (columns(s[k]) for k in ("joint_pos", "joint_vel", "ang_vel_body", "gravity_body"))
    zeros = g.op("Mul", g.op("Slice", obs, g.const(np.array([0])), g.const(np.array([1])), axis1),
                 g.const(np.zeros(1)))  # [N, 1]
    batch_eye = g.op("Add", g.op("Unsqueeze", zeros, g.const(np.array([2]))), g.const(np.eye(3)))  # [N, 3, 3]
    batch_zero3 = g.op("Add", zeros, g.const(np.zeros(3)))  # [N, 3]

    def feet(angles: str) -> list[str]:
        rots: list[str] = []
        poss: list[str] = []
        for m, parent in enumerate(chains.parent.tolist()):
            local = g.const(chains.origin_rot[m])
            d = int(chains.dof[m])
            if d >= 0:
                angle = g.op("Unsqueeze", g.op("Slice", angles, g.const(np.array([d])), g.const(np.array([d + 1])),
                                                axis1), g.const(np.array([2])))  # [N, 1, 1]
                k = _skew(chains.axis[m])
                rodrigues = g.op("Add", g.op("Add", g.const(np.eye(3)),
                                             g.op("Mul", g.op("Sin", angle), g.const(k))),
                                 g.op("Mul", g.op("Sub", g.const(np.ones(1)), g.op("Cos", angle)), g.const(k @ k)))
                local = g.op("MatMul", local, rodrigues)
            parent_rot = batch_eye if parent < 0 else rots[parent]
            parent_pos = batch_zero3 if parent < 0 else poss[parent]
            rots.append(g.op("MatMul", parent_rot, local))
            shift = g.op("Squeeze", g.op("MatMul", parent_rot, g.const(chains.origin_pos[m][:, None])),
                         g.const(np.array([2])))
            poss.append(g.op("Add", parent_pos, shift))
        return [g.op("Add", poss[f], g.op("Squeeze", g.op("MatMul", rots[f], g.const(chains.foot_offset[i][:, None])),
                                            g.const(np.array([2]))))
                for i, f in enumerate(chains.foot_link.tolist())]

    step = g.op("Mul", qd, g.const(np.array([DIFF_STEP_S])))
    here, plus, minus = feet(q), feet(g.op("Add", q, step)), feet(g.op("Sub", q, step))
    up = g.op("Div", g.op("Neg", gravity), g.op("Max", g.op("ReduceL2", gravity, axes=[1], keepdims=1),
                                                g.const(np.array([1e-6]))))
    i120, i201 = g.const(np.array([1, 2, 0])), g.const(np.array([2, 0, 1]))
    velocities, heights = [], []
    for p, a, b in zip(here, plus, minus):
        relative = g.op("Div", g.op("Sub", a, b), g.const(np.array([2.0 * DIFF_STEP_S])))
        cross = g.op("Sub", g.op("Mul", g.op("Gather", gyro, i120, axis=1), g.op("Gather", p, i201, axis=1)),
                     g.op("Mul", g.op("Gather", gyro, i201, axis=1), g.op("Gather", p, i120, axis=1)))
        velocities.append(g.op("Unsqueeze", g.op("Neg", g.op("Add", relative, cross)), axis1))  # [N, 1, 3]
        heights.append(g.op("ReduceSum", g.op("Mul", p, up), axis1, keepdims=1))  # [N, 1]
    weight = g.op("Softmax", g.op("Div", g.op("Neg", g.op("Concat", *heights, axis=1)),
                                  g.const(np.array([STANCE_TAU_M]))), axis=1)  # [N, K]
    weighted = g.op("Mul", g.op("Concat", *velocities, axis=1), g.op("Unsqueeze", weight, g.const(np.array([2]))))
    return g.op("ReduceSum", weighted, axis1, keepdims=0, stem="base_lin_vel_est")


def build_onnx(policy: TrackingPolicy, meta: PolicyMeta):
    """The ONNX ModelProto of ``policy`` (module docstring)."""
    onnx, TensorProto, helper, numpy_helper = _onnx()
    state = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in policy.state_dict().items()}
    obs_dim, joints = policy.obs_dim, state["act_mean"].size
    inits = [numpy_helper.from_array(state[k], k) for k in ("obs_mean", "obs_std", "act_mean", "act_std")]
    features = "obs"
    nodes = []
    if policy.odometry is not None:
        g = _Graph(helper, numpy_helper)
        velocity = _odometry_graph(g, policy, "obs")
        nodes += [*g.nodes, helper.make_node("Concat", ["obs", velocity], ["features"], axis=1)]
        inits += g.inits
        features = "features"
    nodes += [helper.make_node("Sub", [features, "obs_mean"], ["centred"]),
              helper.make_node("Div", ["centred", "obs_std"], ["x0"])]
    linears = [m for m in policy.net if isinstance(m, torch.nn.Linear)]
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
    else:
        nodes.append(helper.make_node("Identity", ["action"], ["pd_target"]))
    graph = helper.make_graph(nodes, "akd_policy", [helper.make_tensor_value_info("obs", TensorProto.FLOAT,
                                                                                    ["N", obs_dim])],
                              [helper.make_tensor_value_info("pd_target", TensorProto.FLOAT, ["N", joints])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="akd")
    model.ir_version = min(model.ir_version, 10)
    for key, value in onnx_metadata(meta, policy.action_mode, policy.odometry is not None).items():
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
            self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for a corrupt file
            raise ConfigError(f"{path} is not a loadable ONNX model ({exc})") from exc
        props = self.session.get_modelmeta().custom_metadata_map
        if props.get("akd_format") != ONNX_FORMAT:
            raise ConfigError(f"{path} is not an AKD policy export (metadata akd_format != '{ONNX_FORMAT}'); "
                              "write one with `akd export-policy`")
        self.path = path
        text = ("akd_format", "robot", "action", "action_mode", "method", "odometry")
        self.meta = {k: (v if k in text else json.loads(v))
                     for k, v in props.items()}
        self.joint_names: list[str] = list(self.meta["joint_names"])
        self.dt = float(self.meta["dt"])
        self.layout = [(str(n), int(s)) for n, s in self.meta["observation_layout"]]
        self.clips = [ReferenceClip.from_dict(c) for c in self.meta["clips"]]
        self.limits = {k: np.asarray([np.inf if v is None else v for v in vals], np.float64)
                       for k, vals in self.meta["limits"].items()}
        self.start_states = [{k: np.asarray(v, np.float64) for k, v in s.items()} for s in self.meta["start_states"]]

    def act(self, obs: np.ndarray) -> np.ndarray:
        """PD targets (N, J) float64 from observations (N, D)."""
        out = self.session.run(["pd_target"], {"obs": np.asarray(obs, dtype=np.float32).reshape(-1, self.obs_dim)})
        return out[0].astype(np.float64)

    @property
    def obs_dim(self) -> int:
        return sum(s for _, s in self.layout)
