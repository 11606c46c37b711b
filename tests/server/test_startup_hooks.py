"""A variable's source found by running the interpreter's start-up hooks one at a time (#32 part 1), and reverted in
a trial by the shadow sitecustomize whatever hook set it — on a real venv, real processes, nothing mocked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.host import LocalHost
from specdoctor.tools.environment.revert import shadow_sitecustomize
from specdoctor.tools.environment.startup_hooks import observe_startup_hooks

SHOW = "import json, os; print(json.dumps({k: os.environ.get(k) for k in ('NCCL_ALGO', 'NCCL_PROTO', 'OMP_NUM_THREADS')}))"


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("hooks")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "v")], check=True)
    py = root / "v" / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "aa_harmless.pth").write_text("import os\n")  # runs code, sets nothing
    (site / "zz_tuning.pth").write_text("import os; os.environ.setdefault('NCCL_ALGO', 'Tree')\n")
    (site / "sitecustomize.py").write_text("import os\nos.environ.update({'NCCL_PROTO': 'Simple', 'OMP_NUM_THREADS': '8'})\n")
    return py, site


def test_each_variable_is_named_with_the_hook_that_set_it(venv):
    py, site = venv
    hooks = observe_startup_hooks(LocalHost(), str(py))
    assert not hooks.problems
    got = {s.name: (s.value, Path(s.source).name) for s in hooks.sets}
    assert got == {"NCCL_ALGO": ("Tree", "zz_tuning.pth"), "NCCL_PROTO": ("Simple", "sitecustomize.py"),
                   "OMP_NUM_THREADS": ("8", "sitecustomize.py")}


def test_an_interpreter_that_cannot_run_is_a_problem_not_a_crash(tmp_path):
    hooks = observe_startup_hooks(LocalHost(), str(tmp_path / "no-python"))
    assert hooks.sets == [] and hooks.problems and "not observed" in hooks.problems[0]


def test_the_shadow_gives_every_hooked_variable_its_launch_value_in_the_process_and_its_children(venv, tmp_path):
    py, site = venv
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(shadow_sitecustomize(["NCCL_ALGO", "NCCL_PROTO"], str(site / "sitecustomize.py")))
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {SHOW!r}])"
    env = ["env", "-i", "PATH=/usr/bin:/bin"]
    plain = subprocess.run([*env, str(py), "-c", SHOW], capture_output=True, text=True, check=True).stdout
    assert json.loads(plain) == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple", "OMP_NUM_THREADS": "8"}
    for code in (SHOW, child):  # the trial sets the reference value at launch (NCCL_ALGO=Ring) or leaves it unset
        out = subprocess.run([*env, f"PYTHONPATH={shadow}", "NCCL_ALGO=Ring", str(py), "-c", code],
                             capture_output=True, text=True, check=True).stdout
        assert json.loads(out) == {"NCCL_ALGO": "Ring", "NCCL_PROTO": None, "OMP_NUM_THREADS": "8"}


def test_no_sitecustomize_at_all_still_makes_a_valid_shadow(venv, tmp_path):
    """The shadow's hint was json.dumps(None) = 'null', a NameError in every process of the trial."""
    py, _site = venv
    shadow = tmp_path / "s2"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(shadow_sitecustomize(["NCCL_ALGO"], None))
    res = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", f"PYTHONPATH={shadow}", str(py), "-c", SHOW],
                         capture_output=True, text=True)
    assert res.returncode == 0 and json.loads(res.stdout)["NCCL_ALGO"] is None, res.stderr
