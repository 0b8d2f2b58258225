"""launch/*.launch.py: valid Python that uses only the launch API, starts executables setup.py installs,
and passes parameters the nodes really declare.

launch / launch_ros are not on PyPI, so the files cannot be executed here; they are read with ``ast``.
With a ROS 2 install (launch_ros importable), the last test also builds each LaunchDescription.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((REPO / "launch").glob("*.launch.py"))
ALLOWED_IMPORTS = {"launch", "launch_ros"} | set(sys.stdlib_module_names)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)]


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _console_scripts() -> dict[str, str]:
    """console_scripts of setup.py's setup(entry_points=...): {name: "module:function"}."""
    (setup_call,) = _calls(_tree(REPO / "setup.py"), "setup")
    entry_points = ast.literal_eval(_keyword(setup_call, "entry_points"))
    scripts = {}
    for line in entry_points.get("console_scripts", []):
        name, _, target = line.partition("=")
        scripts[name.strip()] = target.strip()
    return scripts


def _exec_depends() -> set[str]:
    return {e.text.strip() for e in ET.parse(REPO / "package.xml").getroot().iter("exec_depend")}


def _node_parameter_names() -> dict[str, set[str]]:
    pytest.importorskip("rclpy", reason="the ROS 2 wheels are not installed (pip install -e '.[ros]')")
    from akd_ros import generator, policy_node, replay, sim

    return {"akd_replay": set(replay.parameter_names()), "akd_generator": set(generator.parameter_names()),
            "akd_sim": set(sim.parameter_names()), "akd_policy": set(policy_node.parameter_names()) | {"use_sim_time"}}


def test_every_launch_file_exists():
    assert {p.name for p in LAUNCH_FILES} == {"replay.launch.py", "generate.launch.py", "sim.launch.py",
                                              "policy.launch.py", "velocity.launch.py"}


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_imports_only_launch_api_and_stdlib(path):
    tree = _tree(path)
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    bad = sorted(m for m in modules if m.split(".")[0] not in ALLOWED_IMPORTS)
    assert not bad, f"{path.name} imports {bad}; a launch file may import only launch, launch_ros and the stdlib"
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in funcs
    args = funcs["generate_launch_description"].args
    assert not args.args and not args.vararg and not args.kwonlyargs


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_starts_executables_that_are_installed(path):
    nodes = _calls(_tree(path), "Node")
    assert nodes, f"{path.name} starts no Node"
    scripts = _console_scripts()
    depends = _exec_depends()
    for call in nodes:
        package = ast.literal_eval(_keyword(call, "package"))
        executable = ast.literal_eval(_keyword(call, "executable"))
        if package == "akd":
            assert executable in scripts, (
                f"{path.name} starts akd/{executable}, but setup.py installs only {sorted(scripts)}; add "
                f"'{executable} = akd_ros.{executable.removeprefix('akd_')}:main' to console_scripts")
            module, _, func = scripts[executable].partition(":")
            assert importlib.util.find_spec(module) is not None, f"{scripts[executable]}: no module {module}"
            assert f"def {func}(" in (REPO / (module.replace(".", "/") + ".py")).read_text()
        else:
            assert package in depends, f"{path.name} starts {package}, which package.xml does not exec_depend on"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_arguments_are_declared_and_node_parameters_exist(path):
    tree = _tree(path)
    arguments = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                     and getattr(n.targets[0], "id", None) == "ARGUMENTS")
    declared = {name for name, _, _ in arguments}
    used = {ast.literal_eval(c.args[0]) for c in _calls(tree, "LaunchConfiguration") if c.args
            and isinstance(c.args[0], ast.Constant)}
    used |= {c.args[1].value for name in ("_flag", "_text") for c in _calls(tree, name)
             if len(c.args) > 1 and isinstance(c.args[1], ast.Constant)}
    assert used <= declared, f"{path.name} reads undeclared launch arguments {sorted(used - declared)}"
    known = _node_parameter_names()
    for call in _calls(tree, "Node"):
        executable = ast.literal_eval(_keyword(call, "executable"))
        if executable not in known:
            continue
        params = _keyword(call, "parameters")
        keys = {ast.literal_eval(k) for d in ast.walk(params) if isinstance(d, ast.Dict) for k in d.keys}
        assert keys and keys <= known[executable], (
            f"{path.name} passes {sorted(keys - known[executable])} which {executable} does not declare")


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_description_builds_with_ros_installed(path):
    pytest.importorskip("launch_ros", reason="launch_ros is not on PyPI; needs a ROS 2 installation")
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from launch import LaunchDescription

    assert isinstance(module.generate_launch_description(), LaunchDescription)
