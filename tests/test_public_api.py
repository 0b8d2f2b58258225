"""The public API: `import akd_core` is light, and README's Python API example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def test_import_akd_core_loads_no_torch_mujoco_or_warp():
    code = "import sys, akd_core; print(sorted(m for m in ('torch', 'mujoco', 'warp', 'newton') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_public_names_resolve_to_the_stage_functions():
    import akd_core
    from akd_core.motion.stage import stage_gait
    from akd_core.physics.tracker import stage_track

    assert akd_core.stage_gait is stage_gait and akd_core.stage_track is stage_track
    assert set(akd_core.__all__) <= set(dir(akd_core))
    for name in akd_core.__all__:
        assert getattr(akd_core, name) is not None


def test_readme_python_api_example_runs(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md (Python API)", "exec"), {"__name__": "__readme__"})
    run = tmp_path / "runs" / "api_trot"
    with h5py.File(run / "export" / "dataset.hdf5") as f:
        actions = f["data/demo_0/actions"][()]
    tracked = np.load(run / "tracked.npz")
    np.testing.assert_allclose(actions, tracked["pd_targets"], atol=1e-6)
