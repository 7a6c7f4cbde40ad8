"""docs/own_env.md cannot rot: its example files are the page's code, and all of it runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "own_env.md"
BLOCK = re.compile(r"```(\w+)([^\n]*)\n(.*?)```", re.S)

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `examples` imports as the guide's commands import it


def _blocks(lang):
    return [
        (extra.strip(), code)
        for kind, extra, code in BLOCK.findall(GUIDE.read_text())
        if kind == lang
    ]


def test_the_guides_files_are_the_example_files():
    files = [(extra, code) for extra, code in _blocks("python") if extra.startswith("file=")]
    assert [extra for extra, _ in files] == [
        "file=examples/catch.py",
        "file=examples/point_mass.py",
    ]
    for extra, code in files:
        assert code == (ROOT / extra.removeprefix("file=")).read_text(), extra


def test_the_guides_python_runs():
    snippets = [code for extra, code in _blocks("python") if not extra and "import" in code]
    assert len(snippets) == 2  # Catch, then PointMass
    for code in snippets:
        exec(compile(code, str(GUIDE), "exec"), {"__name__": "guide"})
    import jaxsim

    assert type(jaxsim.make("Catch-v0")).__name__ == "Catch"  # the guide registered it


def test_a_registered_guide_env_reaches_the_gymnasium_front():
    pytest.importorskip("gymnasium", reason="the Gymnasium front needs the gymnasium extra")
    import jaxsim
    import jaxsim.gymnasium
    from examples.catch import Catch

    jaxsim.register("GuideCatch-v0", Catch)
    envs = jaxsim.gymnasium.make_vec("GuideCatch-v0", num_envs=4)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (4, 10, 5)
    for _ in range(9):
        obs, reward, terminated, truncated, _ = envs.step(np.ones(4, np.int64))
    assert terminated.all() and set(np.unique(reward)) <= {-1.0, 1.0}  # landed at step 9


def test_the_guides_catch_trains_through_the_command(tmp_path):
    out = tmp_path / "catch"
    cmd = [sys.executable, "-m", "agents.train", "ppo", "--env", "examples.catch:Catch"]
    cmd += ["--seeds", "1", "--total-steps", "100000", "--target-return", "0.9", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((out / "eval.json").read_text())
    assert result["env"] == "examples.catch:Catch"
    assert result["mean_return"] >= 0.9 and all(result["solved_per_seed"])
