"""The twin honours what a revert trial does on a real box: a shadow sitecustomize on PYTHONPATH, env over nccl.conf."""

from __future__ import annotations

import statistics
import textwrap
from pathlib import Path

import httpx

from specdoctor.sim.standin.sglang._twin.perf import effective_nccl_env

from .conftest import free_port

# A shadow module as a revert trial would write it: run the sitecustomize Python would have run, then put the
# named variables back to what they were before it ran. Python imports the first `sitecustomize` on sys.path,
# and PYTHONPATH entries come before site-packages: that is the whole mechanism.
SHADOW = textwrap.dedent('''
    import importlib.machinery, importlib.util, os, sys
    _names = {names!r}
    _before = {{k: os.environ.get(k) for k in _names}}
    _here = os.path.dirname(os.path.abspath(__file__))
    _rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    _spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
    if _spec is not None and _spec.loader is not None:
        _mod = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_mod)
    for _k, _v in _before.items():
        if _v is None:
            os.environ.pop(_k, None)
        else:
            os.environ[_k] = _v
''')


def _nccl_lines(log: str) -> dict[str, str]:
    """'NAME set by environment to VALUE' lines of NCCL_DEBUG=INFO (what NCCL itself read in the workers)."""
    out = {}
    for line in log.splitlines():
        if " set by environment to " in line and "NCCL INFO " in line:
            name, _, value = line.split("NCCL INFO ", 1)[1].partition(" set by environment to ")
            out[name.strip()] = value.strip()
    return out


def _tps(port: int, runs: int = 6) -> float:
    vals = []
    for _ in range(runs):
        body = {"text": "Explain speculative decoding. " * 20, "sampling_params": {"max_new_tokens": 128,
                                                                                  "temperature": 0}}
        meta = httpx.post(f"http://127.0.0.1:{port}/generate", json=body, timeout=30).json()["meta_info"]
        vals.append(meta["completion_tokens"] / meta["e2e_latency"])
    return statistics.median(vals)


def test_shadow_sitecustomize_on_pythonpath_restores_the_variables_in_every_worker(local_box, tmp_path):
    box = local_box("sitecustomize-foreign", start=False)
    sb = box.sandbox
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(SHADOW.format(names=["NCCL_P2P_DISABLE"]))
    tps = {}
    for label, env in (("as is", {}), ("shadowed", {"PYTHONPATH": str(shadow)})):
        port = free_port()
        log = str(tmp_path / f"{label.replace(' ', '-')}.log")
        res = sb.launch_server(box.host, line=sb.launch.replace(f"--port {sb.port}", f"--port {port}"),
                               env={**env, "NCCL_DEBUG": "INFO"}, log=log, port=port)
        assert res.healthy, Path(log).read_text()[-2000:]
        workers = [p for p in sb.server_pids() if "scheduler" in box.proc_text(p, "cmdline")]
        envs = [box.environ(p) for p in workers]
        seen = _nccl_lines(Path(log).read_text())
        if label == "as is":  # the original sitecustomize forces both in every process
            assert all(e.get("NCCL_P2P_DISABLE") == "1" and e.get("NCCL_IB_DISABLE") == "1" for e in envs)
            assert seen.get("NCCL_P2P_DISABLE") == "1"
        else:  # restored in the parent (so the workers' exec env) and in the workers' own sitecustomize run
            assert envs and all("NCCL_P2P_DISABLE" not in e for e in envs)
            assert all(e.get("NCCL_IB_DISABLE") == "1" for e in envs)  # the original still ran
            assert "NCCL_P2P_DISABLE" not in seen and seen.get("NCCL_IB_DISABLE") == "1"
        tps[label] = _tps(port)
        sb.stop_all()
    # the twin's numbers follow: P2P back on is faster (truth: 77.7 -> 83.7 tok/s spec)
    assert tps["shadowed"] > tps["as is"] * 1.04, tps


def test_nccl_reads_conf_files_as_real_nccl_does(tmp_path):
    system = tmp_path / "etc-nccl.conf"
    system.write_text("NCCL_PROTO=Simple\nNCCL_ALGO=Ring\n")
    user = tmp_path / "user.conf"
    user.write_text("# user file\nNCCL_ALGO=Tree\n")
    empty = tmp_path / "empty.conf"
    empty.write_text("")
    # /etc/nccl.conf is always read: pointing NCCL_CONF_FILE at an empty file does not unset its lines
    assert effective_nccl_env({"NCCL_CONF_FILE": str(empty)}, str(system))["NCCL_PROTO"] == "Simple"
    # NCCL_CONF_FILE is read first and wins over /etc/nccl.conf; the environment wins over both
    eff = effective_nccl_env({"NCCL_CONF_FILE": str(user)}, str(system))
    assert eff["NCCL_ALGO"] == "Tree" and eff["NCCL_PROTO"] == "Simple"
    eff = effective_nccl_env({"NCCL_CONF_FILE": str(user), "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, str(system))
    assert eff["NCCL_PROTO"] == "LL" and eff["NCCL_ALGO"] == "Ring"
    assert "NCCL_PROTO" not in effective_nccl_env({}, None)
