"""The repo tools on a real messy checkout through LocalHost: catalog, triage, gates, backup/restore edge cases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import WEIRD, fingerprint, make_messy_repo

from specdoctor.errors import BackupError, RepoRefused
from specdoctor.host import LocalHost
from specdoctor.inference import get_engine
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.checkout.repo import (
    CatalogInput,
    TriageInput,
    catalog_diffs,
    classify_path,
    triage_diffs,
)
from specdoctor.tools.checkout.worktree import (
    ApplyInput,
    BackupInput,
    StashInput,
    apply_patches,
    backup_worktree,
    list_backups,
    make_backup,
    restore,
    stash_all,
)
from specdoctor.tools.environment.gates import GateInput, scan_feature_gates

SGLANG = get_engine("sglang")  # these tools act on an SGLang checkout: no detection from stray processes
KIMI = "python/sglang/srt/models/kimi_k25.py"
TOPK = "python/sglang/srt/layers/moe/topk.py"


def test_catalog_lists_everything_with_weird_names(local_ctx):
    ctx, repo = local_ctx
    cat = catalog_diffs(ctx, CatalogInput(repo=repo))
    by = {f.path: f for f in cat.files}
    assert set(by) == {KIMI, TOPK, WEIRD, "gone.txt", "new_untracked.py"}
    assert by["gone.txt"].status == "D" and by["new_untracked.py"].untracked
    assert by[KIMI].staged and by[KIMI].unstaged and not by[TOPK].staged
    assert by[WEIRD].added == 1 and by[WEIRD].hunks and by[WEIRD].hunks[0].text
    assert cat.branch == "main" and not cat.detached and len(cat.stashes) == 2
    assert cat.stashes[1].subject.startswith("WIP on main")
    assert cat.untracked == ["new_untracked.py"]  # the ignored server.log is not listed


def test_catalog_caps_big_hunks_but_keeps_files(local_ctx):
    ctx, repo = local_ctx
    Path(repo, TOPK).write_text("".join(f"x{i} = {i}\n\n\n\n\n\n\n" for i in range(400)))
    cat = catalog_diffs(ctx, CatalogInput(repo=repo, max_hunk_chars=200))
    topk = next(f for f in cat.files if f.path == TOPK)
    assert topk.summarized and topk.hunks and topk.added >= 400
    assert any(h.text is None for h in topk.hunks) and all(h.header.startswith("@@") for h in topk.hunks)


def test_catalog_detached_head(tmp_path):
    host = LocalHost(base_env={"HOME": str(tmp_path)})
    make_messy_repo(host, str(tmp_path / "r"), detached=True)
    cat = catalog_diffs(ToolContext(host=host, run_engine=SGLANG), CatalogInput(repo=str(tmp_path / "r")))
    assert cat.detached and cat.branch is None and "detached" in cat.summary_line()


def test_classify_path():
    assert classify_path("python/sglang/srt/layers/attention/flashinfer_mla_backend.py") == (
        "attention-backend", "flashinfer_mla")
    assert classify_path("python/sglang/srt/layers/moe/topk.py")[0] == "moe-routing"
    assert classify_path("python/sglang/srt/layers/communicator.py")[0] == "communicator"
    assert classify_path("python/sglang/srt/distributed/device_communicators/custom_all_reduce.py")[0] == \
        "communicator"
    assert classify_path("python/sglang/srt/speculative/eagle_worker.py")[0] == "speculative"
    assert classify_path("python/sglang/srt/models/llama_eagle3.py") == ("model", "llama_eagle3")
    assert classify_path("python/sglang/srt/managers/scheduler.py")[0] == "scheduler"
    assert classify_path("python/sglang/bench_serving.py")[0] == "benchmarks"


def test_triage_off_path_backend_model_and_essential(local_ctx, tmp_path):
    ctx, repo = local_ctx
    fl = Path(repo, "python/sglang/srt/layers/attention/flashinfer_mla_backend.py")
    fl.parent.mkdir(parents=True)
    fl.write_text("x = 1\n")
    Path(repo, "python/sglang/srt/models/llama_eagle3.py").write_text("EntryClass = [LlamaForCausalLMEagle3]\n")
    Path(repo, "python/sglang/srt/entrypoints/engine.py").write_text(
        "def launch():\n    logger.info(\n        'nccl %s', 1)\n    pass\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"],
                                                   "n_routed_experts": 384}))
    launch = (f"python -m sglang.launch_server --model-path {model} --attention-backend triton --tp 8 "
              "--speculative-algorithm EAGLE3 --speculative-draft-model-path /nowhere")
    tri = triage_diffs(ctx, TriageInput(repo=repo, launch=launch))
    rows = {r.path: r for r in tri.rows}
    assert tri.served.architectures == ["KimiK25ForConditionalGeneration"] and tri.served.moe
    assert rows[str(fl.relative_to(repo))].on_hot_path is False
    assert "triton" in rows[str(fl.relative_to(repo))].reason
    assert rows[KIMI].essential and rows[KIMI].on_hot_path and rows[KIMI].priority == len(tri.rows)
    assert rows["python/sglang/srt/models/llama_eagle3.py"].on_hot_path is False
    assert rows["python/sglang/srt/entrypoints/engine.py"].logging_only
    assert rows[TOPK].on_hot_path and rows[TOPK].priority == 1
    assert all(r.reason for r in tri.rows)


def test_gates_verified_in_real_worker_processes(local_ctx):
    ctx, repo = local_ctx
    port = 31000 + os.getpid() % 1000
    tree = (f"exec -a 'python3 -m sglang.launch_server --port {port}' bash -c '"
            "SGLANG_OEA_K0=0 bash -c \"exec -a sglang::scheduler_TP0 sleep 30\" & "
            "SGLANG_OEA_K0=4 bash -c \"exec -a sglang::scheduler_TP1 sleep 30\" & wait'")
    proc = subprocess.Popen(["bash", "-c", tree], start_new_session=True)
    try:
        time.sleep(0.5)
        scan = scan_feature_gates(ctx, GateInput(repo=repo, port=port))
        gate = next(g for g in scan.gates if g.name == "SGLANG_OEA_K0")
        assert gate.default == "'0'" and gate.file == TOPK
        assert gate.state == "ENABLED-at-runtime" and gate.values.get("sglang::scheduler_TP1") == "4"
        assert gate.values.get("parent") is None and len(scan.processes) == 3
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    scan = scan_feature_gates(ctx, GateInput(repo=repo, port=port))
    assert next(g for g in scan.gates if g.name == "SGLANG_OEA_K0").state == "unknown"


def test_round_trip_is_byte_identical(local_ctx):
    ctx, repo = local_ctx
    before = fingerprint(ctx.host, repo)
    stash_all(ctx, StashInput(repo=repo))
    assert fingerprint(ctx.host, repo) != before
    out = apply_patches(ctx, ApplyInput(repo=repo, files=[KIMI, "gone.txt"], hunks={TOPK: [0]}))
    assert out.verified and not Path(repo, "gone.txt").exists()
    assert restore(ctx, repo, ctx.run_id).verified
    assert fingerprint(ctx.host, repo) == before
    assert list_backups(ctx, repo)[0].restored


def test_patch_script_ambiguity_and_tree_check(local_ctx, tmp_path):
    ctx, repo = local_ctx
    script = tmp_path / "patch.py"
    script.write_text(f"import pathlib\npathlib.Path({KIMI!r}).write_text('other\\n')\n"
                      "print('1. SKIP - already imported')\nprint('2. WARN - could not find class definition')\n")
    out = apply_patches(ctx, ApplyInput(repo=repo, script=str(script), python=sys.executable))
    assert [a.kind for a in out.ambiguous] == ["SKIP", "WARN+could-not-find"]
    assert out.script_changed[0].path == KIMI and out.script_changed[0].vs_backup == "differs-from-backup"
    assert restore(ctx, repo, ctx.run_id).verified


def test_refuses_mid_merge_and_conflicts(local_ctx):
    ctx, repo = local_ctx
    gdir = Path(repo, ".git")
    (gdir / "MERGE_HEAD").write_text(subprocess.check_output(["git", "-C", repo, "rev-parse", "HEAD"], text=True))
    with pytest.raises(RepoRefused, match="merge is in progress"):
        backup_worktree(ctx, BackupInput(repo=repo))
    (gdir / "MERGE_HEAD").unlink()
    assert not list_backups(ctx, repo)


def test_disk_full_and_unwritable_backup_refused(local_ctx):
    ctx, repo = local_ctx
    before = fingerprint(ctx.host, repo)
    with pytest.raises(BackupError, match="not enough free disk"):
        make_backup(ctx, BackupInput(repo=repo, backup_id="big", reserve_mb=10**12))
    home = Path(ctx.host.home())
    (home / ".specdoctor").mkdir(exist_ok=True)  # the manifest walker is shipped there first
    (home / ".specdoctor" / "backups").write_text("a file where the folder should be")
    with pytest.raises(BackupError, match="checkout was not changed"):
        make_backup(ctx, BackupInput(repo=repo, backup_id="blocked"))
    assert not list_backups(ctx, repo) and fingerprint(ctx.host, repo) == before


def test_restore_command_from_another_process(local_ctx):
    ctx, repo = local_ctx
    before = fingerprint(ctx.host, repo)
    res = registry.call(ctx, "stash_all", {"repo": repo})
    assert res.ok and res.output["clean"] and res.output["stash_list_unchanged"]
    env = {**os.environ, "HOME": ctx.host.base_env["HOME"]}
    cli = [str(Path(sys.executable).parent / "specdoctor")]
    listing = subprocess.run([*cli, "restore", "--host", "local", "--repo", repo, "--list", "--json"], env=env,
                             capture_output=True, text=True, check=True)
    assert json.loads(listing.stdout)[0]["backup_id"] == ctx.run_id
    done = subprocess.run([*cli, "restore", "--host", "local", "--repo", repo], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert "verified" in done.stdout and fingerprint(ctx.host, repo) == before
    again = subprocess.run([*cli, "restore", "--host", "local", "--repo", repo], env=env, capture_output=True,
                           text=True)
    assert again.returncode == 2 and "no unrestored backup" in again.stderr
