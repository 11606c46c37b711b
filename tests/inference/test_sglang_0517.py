"""The engine seam and the process finder on a real SGLang 0.5.17 server's process list (fixtures, no GPU)."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest

from specdoctor.inference import SGLANG_0_5_17, SGLang, get_engine
from specdoctor.tools.serving.server import Proc, find_servers

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-0.5.17-h200"
RUNS = ["spec", "nospec"]


def _procs(run: str) -> dict[int, dict]:
    return {int(pid): p for pid, p in json.loads((FIX / run / "procs.json").read_text()).items()}


def _as_proc(pid: int, p: dict) -> Proc:
    return Proc(pid=pid, ppid=p["ppid"], title=p["comm"], cmdline=p["cmdline"])


def _roles(run: str) -> dict[str, int]:
    """pid of each process by what it is, read from the real cmdlines (not from the engine under test)."""
    out = {}
    for pid, p in _procs(run).items():
        first = p["cmdline"][0]
        key = ("main" if "sglang.launch_server" in p["cmdline"] else
               "tracker" if "resource_tracker" in " ".join(p["cmdline"]) else first)
        out[key] = pid
    return out


@pytest.mark.parametrize("engine", [SGLANG_0_5_17, get_engine("sglang", version="0.5.17"), SGLang()])
@pytest.mark.parametrize("run", RUNS)
def test_the_finder_groups_the_real_processes(run, engine):
    roles = _roles(run)
    procs = [_as_proc(pid, p) for pid, p in _procs(run).items()]
    servers = find_servers(procs, engine=engine)
    assert len(servers) == 1
    s = servers[0]
    assert s.main.pid == roles["main"] and s.port == 30000
    assert [w.pid for w in s.workers] == [roles["sglang::scheduler"]]  # TP 1: one worker, no _TP0 in its title
    assert s.detokenizer is not None and s.detokenizer.pid == roles["sglang::detokenizer"]
    assert roles["tracker"] not in [w.pid for w in s.workers]
    assert (s.args.get("speculative_algorithm") == "EAGLE3") == (run == "spec")


@pytest.mark.parametrize("engine", [SGLANG_0_5_17, SGLang()])
def test_real_titles_and_comms_give_the_roles(engine):
    procs = _procs("spec")
    roles = _roles("spec")
    for key, want in (("sglang::scheduler", "worker"), ("sglang::detokenizer", "detokenizer"), ("tracker", "other")):
        p = procs[roles[key]]
        assert engine.process_role(p["cmdline"][0]) == want
        assert engine.process_role(p["comm"]) == want  # comm is cut at 15 characters: sglang::schedul
    assert engine.worker_rank(procs[roles["sglang::scheduler"]]["cmdline"][0]) is None
    assert not engine.is_main_process(procs[roles["tracker"]]["cmdline"])


@pytest.mark.parametrize("run", RUNS)
def test_ps_main_pattern_matches_only_the_main(run):
    lines = (FIX / run / "ps.txt").read_text().splitlines()[1:]
    hits = [int(ln.split()[0]) for ln in lines if SGLANG_0_5_17.ps_main_pattern.search(ln)]
    assert hits == [_roles(run)["main"]]


@pytest.mark.parametrize("run", RUNS)
def test_what_the_children_have_and_the_main_lacks_is_forced(run):
    """SGLang edits os.environ before it spawns: only the children's /proc environ shows it (procs.json)."""
    procs, roles = _procs(run), _roles(run)
    main = procs[roles["main"]]
    for key in ("sglang::scheduler", "sglang::detokenizer"):
        child = procs[roles[key]]
        added = {k for k in child["env_keys"] if k not in main["env_keys"]}
        ours = {k for k in added if any(fnmatch.fnmatch(k, pat) for pat in SGLANG_0_5_17.env_patterns)}
        assert ours and ours <= SGLANG_0_5_17.forced_env_names, ours - SGLANG_0_5_17.forced_env_names
        for name, how in SGLANG_0_5_17.forced_env().items():
            value = child["env_values"].get(name)
            if how.endswith("(always)") and how.split()[0] in ("0", "1", "8", "AUTO"):
                assert value == how.split()[0], (name, value, how)
    assert SGLANG_0_5_17.forced_env_names <= SGLang().forced_env_names  # the tolerant engine knows them too
