"""Trial trees: HEAD + exactly a trial's changes elsewhere on the host; the user's checkout stays identical (manifest)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from states import NON_UTF8, SGLANG_INIT, STATES, build_state

from specdoctor.host import LocalHost
from specdoctor.inference import get_engine
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.checkout.manifest import encode_name, take_manifest

SGLANG = get_engine("sglang")  # these tools act on an SGLang checkout: no detection from stray processes

KIMI = "python/sglang/srt/models/kimi_k25.py"
TOPK = "python/sglang/srt/layers/moe/topk.py"
_n = itertools.count()


@pytest.fixture()
def local(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    return LocalHost(base_env={"HOME": str(home)}), tmp_path


def _ctx(host: LocalHost) -> ToolContext:
    return ToolContext(host=host, run_id=f"trial{next(_n)}", auto_approve=True, run_engine=SGLANG)


def _changed_entries(m, paths: set[str]):
    return {e.path: (e.kind, e.mode, e.sha256, e.target) for e in m.entries if e.path in paths}


@pytest.mark.parametrize("state", sorted(STATES))
def test_building_using_and_removing_trial_trees_leaves_every_state_identical(local, state: str):
    host, tmp = local
    repo = str(tmp / "repo")
    build_state(host, repo, state)
    ctx = _ctx(host)
    before = take_manifest(ctx, repo)
    every = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": "every", "all_changes": True})
    assert every.ok and every.output["checkout_before"] == every.output["checkout_after"], every.summary
    # the all-changes tree holds the user's changed files bytes-exact (content, mode, symlink target)
    wanted = set(every.output["applied_files"])
    tree = take_manifest(ctx, every.output["path"])
    mine = _changed_entries(before, wanted)
    assert mine and _changed_entries(tree, wanted) == mine
    one = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": "one-hunk", "hunks": {KIMI: [0]},
                                                  "files": [TOPK]})
    assert one.ok and set(one.output["differs_from_head"]) == {KIMI, TOPK}, one.output["differs_from_head"]
    origin = registry.call(ctx, "engine_origin", {"env": {"PYTHONPATH": one.output["pythonpath"], "PATH": os.defpath},
                                                  "python": sys.executable, "expect_under": one.output["path"]})
    assert origin.ok and origin.output["inside"] and origin.output["origin"].endswith(SGLANG_INIT), origin.summary
    assert registry.call(ctx, "remove_trial_tree", {"name": "one-hunk"}).output["removed"]
    assert registry.call(ctx, "remove_trial_tree", {}).ok
    assert not host.exists(every.output["path"])
    after = take_manifest(ctx, repo)
    assert before.diff(after).same, before.diff(after).differences


def test_a_trial_keeps_exactly_its_changes(local):
    host, tmp = local
    repo = str(tmp / "repo")
    build_state(host, repo, "all", without={"big-untracked"})
    ctx = _ctx(host)
    bare = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": "head"})
    assert bare.ok and bare.output["differs_from_head"] == []
    gone = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": "gone", "files": ["gone.txt",
                                                                                         encode_name(NON_UTF8)]})
    assert sorted(gone.output["differs_from_head"]) == sorted(["gone.txt", encode_name(NON_UTF8)])
    assert not host.exists(f"{gone.output['path']}/gone.txt")
    bad = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": "bad", "files": ["not/a/change.py"]})
    assert bad.status != "ok" and "not changes of" in bad.summary
    again = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": "head"})
    assert again.status != "ok" and "already exists" in again.summary
    for hostile in ("../escape", "a/b", "", ".hidden", "x" * 101):
        r = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": hostile})
        assert r.status != "ok" and "invalid trial tree name" in r.summary, hostile
    assert registry.call(ctx, "remove_trial_tree", {}).ok


def test_patch_script_runs_in_the_tree_and_writes_outside_are_reported(local):
    host, tmp = local
    repo = str(tmp / "repo")
    build_state(host, repo, "modes")
    ctx = _ctx(host)
    script = tmp / "patch.py"
    script.write_text("import os, sys\n"
                      "open(os.path.join(sys.argv[1], 'PATCHED'), 'w').write('in tree')\n"
                      "print('patched', os.getcwd())\n")
    clean = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": "s1", "script": str(script),
                                                    "script_args": [repo], "python": sys.executable})
    assert clean.ok and clean.output["script_exit"] == 0 and clean.output["outside_writes"] == [], clean.output
    assert host.exists(f"{clean.output['path']}/PATCHED") and not host.exists(f"{repo}/PATCHED")
    assert "PATCHED" in clean.output["differs_from_head"]
    rogue = tmp / "rogue.py"
    rogue.write_text(f"open({repo + '/private.key'!r}, 'a').write('x')\n"
                     "import os; open(os.path.expanduser('~/stray.txt'), 'w').write('x')\n")
    dirty = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": "s2", "script": str(rogue),
                                                    "python": sys.executable})
    writes = dirty.output["outside_writes"]
    assert any("user checkout: 'private.key'" in w for w in writes), writes
    assert any(w.endswith("/stray.txt") for w in writes), writes
    assert dirty.output["checkout_before"] != dirty.output["checkout_after"]
    assert "CHECKOUT CHANGED" in dirty.summary


def test_engine_origin_of_a_running_process(local):
    host, tmp = local
    repo = str(tmp / "repo")
    build_state(host, repo, "modes")
    ctx = _ctx(host)
    t = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": "srv", "all_changes": True}).output
    code = "import time; time.sleep(60)"
    inside = subprocess.Popen([sys.executable, "-c", code], env={"PYTHONPATH": t["pythonpath"], "PATH": os.defpath},
                              cwd="/", start_new_session=True)
    outside = subprocess.Popen([sys.executable, "-c", code], env={"PYTHONPATH": f"{repo}/python",
                                                                   "PATH": os.defpath}, cwd="/",
                               start_new_session=True)
    try:
        a = registry.call(ctx, "engine_origin", {"pid": inside.pid, "expect_under": t["path"]})
        assert a.ok and a.output["inside"] is True, a.summary
        b = registry.call(ctx, "engine_origin", {"pid": outside.pid, "expect_under": t["path"]})
        assert b.ok and b.output["inside"] is False and b.output["origin"].startswith(repo), b.summary
        assert "NOT the trial tree" in b.summary
    finally:
        for p in (inside, outside):
            os.killpg(p.pid, signal.SIGKILL)  # our own processes, by their group
            p.wait(timeout=10)
    gone = registry.call(ctx, "engine_origin", {"pid": inside.pid})
    assert gone.status != "ok" and "cannot read process" in gone.summary


def test_a_server_started_from_the_checkout_folder_imports_the_checkout_unless_its_cwd_is_mapped(local):
    """`python -m sglang...` puts its cwd first on sys.path: PYTHONPATH alone is not enough; map the cwd too."""
    from specdoctor.tools.checkout.trial_tree import TrialTree, map_into_tree, trial_env

    host, tmp = local
    repo = str(tmp / "repo")
    build_state(host, repo, "modes")
    ctx = _ctx(host)
    tree = TrialTree.model_validate(registry.call(ctx, "build_trial_tree", {"repo": repo, "name": "cwd"}).output)
    env = trial_env(tree, {"PATH": os.defpath, "PYTHONPATH": "/opt/other"})
    assert env["PYTHONPATH"] == f"{tree.pythonpath}:/opt/other"
    user_cwd = f"{repo}/python"
    naive = registry.call(ctx, "engine_origin", {"python": sys.executable, "env": env, "cwd": user_cwd,
                                                 "expect_under": tree.path})
    mapped_cwd = map_into_tree(user_cwd, repo, tree)
    assert mapped_cwd == f"{tree.path}/python" and map_into_tree("/elsewhere", repo, tree) == "/elsewhere"
    mapped = registry.call(ctx, "engine_origin", {"python": sys.executable, "env": env, "cwd": mapped_cwd,
                                                  "expect_under": tree.path})
    assert naive.ok and naive.output["inside"] is False and naive.output["origin"].startswith(repo), naive.summary
    assert mapped.ok and mapped.output["inside"] is True, mapped.summary


def test_a_trial_server_is_measured_only_when_it_imports_from_its_own_tree(local):
    """trial_code builds and removes the tree; check_origin passes the server in the tree, refuses the other."""
    from specdoctor.tools.checkout.trial_code import WrongTree, check_origin, in_tree, trial_code
    from specdoctor.tools.serving.launch import LaunchResult
    from specdoctor.tools.serving.trial import LaunchConfig, TrialHandle

    host, tmp = local
    repo = str(tmp / "repo")
    build_state(host, repo, "modes")
    ctx = _ctx(host)
    before = take_manifest(ctx, repo)
    code = "import time; time.sleep(60)"
    with trial_code(ctx, repo, "origin", [KIMI]) as tree:
        cfg = in_tree(LaunchConfig(command="python -m sglang.launch_server", cwd=f"{repo}/python"), tree, repo)
        assert cfg.tree == tree.path and cfg.cwd == f"{tree.path}/python"  # `python -m` imports its cwd first
        assert cfg.launch_args()["env"]["PYTHONPATH"] == f"{tree.path}/python"
        procs = {where: subprocess.Popen([sys.executable, "-c", code], env={"PYTHONPATH": f"{where}/python",
                                                                             "PATH": os.defpath},
                                         cwd="/", start_new_session=True) for where in (tree.path, repo)}
        try:
            def handle(p: subprocess.Popen) -> TrialHandle:
                return TrialHandle(config=cfg, launch=LaunchResult(pids=[p.pid], port=1, log_path="/dev/null"),
                                   ctx=ctx)

            assert check_origin(handle(procs[tree.path]), tree).inside is True
            with pytest.raises(WrongTree, match="not its tree"):
                check_origin(handle(procs[repo]), tree)
        finally:
            for p in procs.values():
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
    assert not Path(tree.path).exists()  # removed on exit
    assert before.diff(take_manifest(ctx, repo)).same
