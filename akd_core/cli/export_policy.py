"""`akd export-policy POLICY.pt -o POLICY.onnx`: the policy as one ONNX graph with its deployment metadata."""

from __future__ import annotations

import argparse
from pathlib import Path

from akd_core.learn.onnx_export import export_onnx
from akd_core.learn.policy import load_policy


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", type=Path, help="policy file from `akd train-policy` (.pt)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="ONNX file to write")


def run(args: argparse.Namespace) -> int:
    policy, meta = load_policy(args.policy)
    path = export_onnx(policy, meta, args.output)
    print(f"{args.policy} -> {path} (input 'obs' [N, {sum(s for _, s in meta.obs_layout)}], output 'pd_target' "
          f"[N, {len(meta.joint_names)}] absolute PD targets in rad, {1.0 / meta.dt:g} Hz)")
    return 0
