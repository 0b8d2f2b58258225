"""`akd export-policy POLICY.pt -o POLICY.onnx`: the policy as one ONNX graph with its deployment metadata (for a
velocity-command policy, where the command sits in ``obs`` and in what units)."""

from __future__ import annotations

import argparse
from pathlib import Path

from akd_core.learn.observation import history_frames, observation_slices
from akd_core.learn.onnx_export import export_onnx
from akd_core.learn.policy import load_policy


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", type=Path, help="policy file from `akd train-policy` (.pt)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="ONNX file to write")


def run(args: argparse.Namespace) -> int:
    policy, meta = load_policy(args.policy)
    path = export_onnx(policy, meta, args.output)
    command = ""
    if meta.task == "velocity":
        start, stop = meta.command["indices"]
        command = (f"; the command {', '.join(meta.command['names'])} ({', '.join(meta.command['units'])}, heading "
                   f"frame) at obs[{start}:{stop}]")
        history = observation_slices(meta.obs_layout).get("history")
        if history is not None:
            steps = history_frames(meta.obs_layout, len(meta.joint_names))
            command += f"; the {steps} steps before at obs[{history.start}:{history.stop}], newest first"
    print(f"{args.policy} -> {path} (input 'obs' [N, {sum(s for _, s in meta.obs_layout)}], output 'pd_target' "
          f"[N, {len(meta.joint_names)}] absolute PD targets in rad, {1.0 / meta.dt:g} Hz{command})")
    return 0
