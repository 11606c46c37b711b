"""The real upstream story (#50): "it got slower after I pulled" on the lent GPU, investigated over SSH.

Runs on the device as story `upstream` of `stories.py` (so `run_device.sh upstream` runs it), with the same box
layout. The user's checkout is `/root/sglang` at `v0.5.17` with one essential local patch, uncommitted: their drafter's
config names the architecture `LlamaForCausalLMEagle3Local`, which only the patch registers (without it the speculative
server cannot load the draft model), as the seeds' kimi_k25.py hooks. The story:
1. the good run: the clean base with the patch, served and measured with specdoctor's own benchmark and
   fingerprint (the fingerprint records the base commit);
2. the pull: 16 upstream-looking commits on top (docs, tests, refactors touching real files, one of them the
   drafter's own file; commit 9 adds a host sync + 4 ms sleep to every verify; commit 10 imports a name that does not
   exist into the scheduler — no server starts there — and commit 11 removes it), the patch re-applied on top;
3. the user's server started from HEAD, an sshd started on loopback (`ssh_box.py`), and `specdoctor investigate
   --host root@127.0.0.1:PORT --known-hosts … --identity …` — the real transport against the real engine;
4. checked without specdoctor's code: the server back as it was, every file of the checkout identical, the commit
   named, no innocent commit blamed, the broken commit skipped; the audit log kept. Then the checkout goes back to
   its base for the stories after this one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ssh_box  # noqa: E402
import stories as S  # noqa: E402

BASE_REF = os.environ.get("STORIES_BASE_REF", "v0.5.17")
SSH_PKG = Path(os.environ.get("STORIES_SSH_PKG", str(HERE.parents[1] / ".sshpkg")))
DRAFT_ALIAS = os.environ.get("STORIES_DRAFT_ALIAS", "1") == "1"  # the rehearsal's twin has no draft config to alias
UP_STATE = S.STATE / "upstream"
EAGLE3 = "python/sglang/srt/models/llama_eagle3.py"
ENTRY = "EntryClass = [LlamaForCausalLMEagle3]"
ALIAS = "LlamaForCausalLMEagle3Local"
ESSENTIAL = (f"class {ALIAS}(LlamaForCausalLMEagle3):\n"
             '    """Our drafter\'s architecture name (its config.json says so): the EAGLE-3 head as upstream builds '
             'it."""\n\n\n'
             f"EntryClass = [LlamaForCausalLMEagle3, {ALIAS}]")
COST_S = 1500  # good run (server start + 8 runs) + the user's server at HEAD + ~12 launches + the restart
_DATE0 = "2026-11-02T09:00:00+00:00"


@dataclass
class Edit:
    """A file change of one commit: a new file, a line appended, a line inserted after the first anchor found
    (after a whole signature for `def`/`class`), or the line containing `text` removed."""

    file: str
    kind: str  # new | append | after | remove
    text: str
    anchors: tuple[str, ...] = ()


@dataclass
class Commit:
    id: str
    subject: str
    edits: list[Edit] = field(default_factory=list)
    role: str = "innocent"  # innocent | culprit | breaks | fixes


_STRICT = "from sglang.srt.utils import get_bool_env_var_strict  # stricter parsing of SGLANG_* flags"
WORKER = S.WORKER
HISTORY = [
    Commit("docs-eagle3", "[Docs] speculative decoding: EAGLE-3 drafters for dense Llama targets (#21001)",
           [Edit("docs/advanced_features/eagle3_llama.md", "new",
                 "# EAGLE-3 for dense Llama targets\n\nPass `--speculative-algorithm EAGLE3` and a drafter path.\n")]),
    Commit("ci-accept-tol", "[CI] spec: an accept-length tolerance helper (#21004)",
           [Edit("test/srt/spec/test_accept_tolerance.py", "new",
                 "def test_accept_tolerance():\n    assert abs(2.98 - 3.0) < 0.05\n")]),
    Commit("sched-comment", "[Refactor] scheduler: say why the overlap loop keeps one batch in flight (#21009)",
           [Edit("python/sglang/srt/managers/scheduler.py", "append",
                 "# The overlap loop keeps one batch in flight so that the CPU plans the next while the GPU runs.")]),
    Commit("eagle3-doc", "[Model] llama_eagle3: document the draft head's fused fc (#21013)",
           [Edit(EAGLE3, "after", '    """EAGLE-3 draft head: one decoder layer over the fused target hidden states."""',
                 ("class LlamaForCausalLMEagle3(",))]),
    Commit("docs-draft-tokens", "[Docs] server arguments: --speculative-num-draft-tokens (#21017)",
           [Edit("docs/advanced_features/server_arguments_spec.md", "new",
                 "# --speculative-num-draft-tokens\n\nWith topk 1 it is num_steps + 1.\n")]),
    Commit("ci-idle", "[CI] scheduler: an idle-batch smoke test (#21020)",
           [Edit("test/srt/test_scheduler_idle.py", "new", "def test_idle_batch():\n    assert [] == []\n")]),
    Commit("triton-comment", "[Refactor] triton backend: name the decode split constant in a comment (#21024)",
           [Edit("python/sglang/srt/layers/attention/triton_backend.py", "append",
                 "# decode attention splits the KV range into num_kv_splits chunks (see the split heuristic above)")]),
    Commit("worker-comment", "[Spec] eagle_worker_v2: comment on the draft/verify overlap (#21028)",
           [Edit(WORKER, "append", "# draft(i+1) is planned while verify(i) runs when the overlap scheduler is on")]),
    Commit("verify-sync", "[Spec] verify: make sure the draft tokens have landed before verifying (#21031)",
           [Edit(WORKER, "after", "        import time as _t; torch.cuda.synchronize(); _t.sleep(0.004)  "
                 "# wait for the draft tokens (debug)", ("def verify(", "def forward_batch_generation("))],
           role="culprit"),
    Commit("sched-strict-env", "[Refactor] scheduler: stricter parsing of SGLANG_* flags (#21035)",
           [Edit("python/sglang/srt/managers/scheduler.py", "after", _STRICT, ("import logging",))], role="breaks"),
    Commit("sched-strict-revert", "[Fix] scheduler: drop the helper import from #21035, it is not in utils (#21036)",
           [Edit("python/sglang/srt/managers/scheduler.py", "remove", _STRICT)], role="fixes"),
    Commit("docs-changelog", "[Docs] changelog for v0.5.18 (#21040)",
           [Edit("docs/changelog.md", "new", "# v0.5.18\n\n- speculative decoding docs\n- scheduler fixes\n")]),
    Commit("ci-eagle3-dummy", "[CI] EAGLE-3 with dummy weights starts (#21043)",
           [Edit("test/srt/spec/test_eagle3_dummy.py", "new", "def test_eagle3_dummy():\n    assert 'EAGLE3'\n")]),
    Commit("args-comment", "[Refactor] server_args: note where the speculative flags are grouped (#21047)",
           [Edit("python/sglang/srt/server_args.py", "append",
                 "# speculative flags: see the --speculative-* group in add_cli_args")]),
    Commit("llama-comment", "[Model] llama: comment on the rope scaling default (#21050)",
           [Edit("python/sglang/srt/models/llama.py", "append",
                 "# rope_scaling defaults to None: the config's own value is used as is")]),
    Commit("docs-quickstart", "[Docs] EAGLE-3 quick start (#21055)",
           [Edit("docs/eagle3_quickstart.md", "new", "# EAGLE-3 quick start\n\nSee eagle3_llama.md.\n")]),
]


def git(*args: str, env: dict[str, str] | None = None) -> str:
    res = subprocess.run(["git", "-C", str(S.REPO), *args], capture_output=True, text=True,
                         env={**os.environ, **(env or {})})
    if res.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {res.stderr.strip()}")
    return res.stdout.strip()


def apply_edit(e: Edit) -> None:
    path = S.REPO / e.file
    if e.kind == "new":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(e.text if e.text.endswith("\n") else e.text + "\n")
        return
    text = path.read_text()
    if e.kind == "append":
        path.write_text(text + ("" if text.endswith("\n") else "\n") + e.text + "\n")
        return
    lines = text.splitlines(keepends=True)
    if e.kind == "remove":
        kept = [ln for ln in lines if e.text not in ln]
        if len(kept) == len(lines):
            raise SystemExit(f"{e.file}: no line with {e.text!r} to remove")
        path.write_text("".join(kept))
        return
    for anchor in e.anchors:
        for i, line in enumerate(lines):
            if anchor in line:
                lines.insert(S._signature_end(lines, i) + 1, e.text + "\n")
                path.write_text("".join(lines))
                return
    raise SystemExit(f"{e.file}: none of the anchors {e.anchors} found")


def apply_essential() -> None:
    """The user's local patch (uncommitted): register the drafter's architecture name."""
    path = S.REPO / EAGLE3
    text = path.read_text()
    if ENTRY not in text:
        raise SystemExit(f"{EAGLE3}: {ENTRY!r} not found")
    path.write_text(text.replace(ENTRY, ESSENTIAL, 1))


def make_history(base: str) -> list[str]:
    """Commit HISTORY on top of `base` (6 h apart, as pulled from upstream); the shas, oldest first."""
    git("reset", "-q", "--hard", base)
    git("clean", "-fdq")
    shas = []
    for i, c in enumerate(HISTORY, 1):
        for e in c.edits:
            apply_edit(e)
        when = (datetime.fromisoformat(_DATE0) + timedelta(hours=6 * i)).isoformat()
        env = {"GIT_AUTHOR_NAME": "sglang-dev", "GIT_AUTHOR_EMAIL": "dev@sglang.invalid", "GIT_AUTHOR_DATE": when,
               "GIT_COMMITTER_NAME": "sglang-dev", "GIT_COMMITTER_EMAIL": "dev@sglang.invalid",
               "GIT_COMMITTER_DATE": when}
        git("add", "-A", env=env)
        git("commit", "-q", "-m", c.subject, env=env)
        shas.append(git("rev-parse", "HEAD"))
    return shas


def draft_alias() -> None:
    """The user's drafter as theirs is named: a copy of the draft model's folder whose config names the alias
    architecture (weights are dummy: the other files are links), and the launch line pointed at it."""
    i = S.FLAGS.index("--speculative-draft-model-path")
    src = Path(S.FLAGS[i + 1])
    dst = src.with_name(src.name + "-local")
    if not (dst / "config.json").exists():
        dst.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            if f.name != "config.json" and not (dst / f.name).exists():
                (dst / f.name).symlink_to(f.resolve())
        cfg = json.loads((src / "config.json").read_text())
        cfg["architectures"] = [ALIAS]
        (dst / "config.json").write_text(json.dumps(cfg, indent=1))
    S.FLAGS[i + 1] = str(dst)


def ensure_paramiko() -> None:
    """specdoctor's SSH client stack in this venv (the device's sd venv is built without it): the carried wheels."""
    try:
        import paramiko  # noqa: F401
    except ImportError:
        wheels = sorted(str(w) for w in (SSH_PKG / "whl").glob("*.whl"))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", *wheels], check=True)


def good_run(out: Path) -> dict[str, object]:
    """The good run at the base commit (with the essential patch), measured with specdoctor's own tools."""
    import specdoctor

    startup = S.start_user_server(STORY)
    with specdoctor.connect("local", engine="sglang") as client:
        bench = client.call("benchmark", port=S.PORT, runs=8, requests_per_run=3, label="good-run")
        fp = client.call("fingerprint", port=S.PORT, repo=str(S.REPO))
    if bench.status != "ok" or fp.status != "ok":
        raise SystemExit(f"good run not measured: {bench.summary} / {fp.summary}")
    UP_STATE.mkdir(parents=True, exist_ok=True)
    (UP_STATE / "good_fingerprint.json").write_text(json.dumps(fp.output, indent=1))
    claims = {"spec": round(bench.output["median"], 1), "good_run": bench.summary, "startup_s": round(startup, 1)}
    (UP_STATE / "claims.json").write_text(json.dumps(claims, indent=1))
    (out / "good_run.json").write_text(json.dumps(claims, indent=1))
    S.stop_user_server()
    return claims


def investigate(box: ssh_box.SSHBox, out: Path, claims: dict[str, object], timeout: float) -> tuple[int, float]:
    cmd = [S.SPECDOCTOR, "investigate", *box.cli_args(), "--repo", str(S.REPO), "--python", S.PY,
           "--expect", f"spec={claims['spec']}", "--good-fingerprint", str(UP_STATE / "good_fingerprint.json"),
           "--essential", EAGLE3, "--yes", "--out", str(out / "run"), "-v", *S.INVESTIGATE_EXTRA]
    S.log(f"[upstream] {' '.join(cmd)}")
    t0 = time.monotonic()
    with open(out / "run.log", "w") as runlog:
        proc = subprocess.Popen(cmd, stdout=runlog, stderr=subprocess.STDOUT, cwd=S.WORK,
                                env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # Ctrl-C, as a user would: its safety net restarts the user's server
            proc.send_signal(signal.SIGINT)
            try:
                rc = proc.wait(timeout=150)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
    return rc, time.monotonic() - t0


def judge(report: dict, shas: list[str]) -> dict[str, object]:
    """What the report names against the plant: the culprit commit, no innocent one, the broken one skipped."""
    by_role = {c.role: (sha, c.subject) for sha, c in zip(shas, HISTORY, strict=True)}
    causes = [c for c in (report.get("attribution") or {}).get("causes") or [] if c.get("confirmed", True)]
    named = [c["name"] for c in causes if c["name"].startswith("upstream commit")]
    culprit_sha, culprit_subject = by_role["culprit"]
    innocent = [n for n in named if culprit_subject not in n]
    text = json.dumps(report)
    return {"commit_named": any(culprit_subject in n and culprit_sha[:10] in n for n in named),
            "innocent_commits_blamed": innocent, "broken_commit_skipped": by_role["breaks"][0][:10] in text
            and "skip" in text, "phase_named": sorted({c["phase_effect"]["phase"] for c in causes
                                                       if c.get("phase_effect")})}


STORY = S.Story("upstream", "code-regression", "16 upstream commits on v0.5.17 (one adds a host sync + 4 ms sleep to "
                "every verify, one cannot start), an essential local patch on top; investigated over SSH",
                phase="verify", cost_s=COST_S)


def run(out_root: Path, deadline: float) -> dict[str, object]:
    """The whole story; returns its summary row (also what stories.py appends to summary.json)."""
    out = out_root / STORY.name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    ensure_paramiko()
    S.stop_user_server()
    git("checkout", "-q", "--", ".")
    git("clean", "-fdq")
    base = git("rev-parse", f"{BASE_REF}^{{commit}}") if BASE_REF else git("rev-parse", "HEAD")
    git("reset", "-q", "--hard", base)
    if DRAFT_ALIAS:
        draft_alias()
    (S.WORK / "server.log").unlink(missing_ok=True)
    S.WORK.mkdir(parents=True, exist_ok=True)
    apply_essential()
    claims = good_run(out)
    S.log(f"[upstream] good run at {base[:10]}: {claims['good_run']}")
    shas = make_history(base)
    apply_essential()
    startup = S.start_user_server(STORY)
    S.log(f"[upstream] {len(shas)} commits on {base[:10]}; the user's server at HEAD healthy in {startup:.0f} s")
    env = {"PATH": S.user_env(STORY)["PATH"], **json.loads(os.environ.get("STORIES_SSH_ENV", "{}"))}
    box = ssh_box.start(SSH_PKG, session_env=env, root=S.WORK / "sshd")
    before, tree_before = S.identity(), S.manifest()
    started_at = time.time()
    try:
        rc, wall = investigate(box, out, claims, max(60.0, deadline - time.monotonic()))
    finally:
        box.stop()
        shutil.copy(box.log, out / "sshd.log")
    time.sleep(2)
    after, tree_after = S.identity(), S.manifest()
    for name in ("report.json", "report.md", "audit.jsonl"):
        if (out / "run" / name).exists():
            shutil.copy(out / "run" / name, out / name)
    shutil.copy(S.WORK / "server.log", out / "server.log")
    S.keep_trace(out, started_at)  # the culprit's and its parent's phase profiles
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    env_b, env_a = before.pop("env", {}), after.pop("env", {})
    env_diff = sorted(k for k in set(env_b) | set(env_a) if env_b.get(k) != env_a.get(k))
    same_server = all(before.get(k) == after.get(k) for k in ("running", "argv", "cwd")) and not env_diff \
        and after.get("health") == 200
    diff = sorted(k for k in set(tree_before) | set(tree_after) if tree_before.get(k) != tree_after.get(k))
    (out / "box.json").write_text(json.dumps({"server_before": before, "server_after": after,
                                              "env_differences": env_diff, "checkout_identical": not diff,
                                              "checkout_differences": diff[:20]}, indent=1))
    (out / "history.json").write_text(json.dumps([{"sha": s, "id": c.id, "subject": c.subject, "role": c.role}
                                                  for s, c in zip(shas, HISTORY, strict=True)], indent=1))
    audit = (out / "audit.jsonl").read_text().splitlines() if (out / "audit.jsonl").exists() else []
    row = {"story": STORY.name, "about": STORY.about, "truth_verdict": STORY.truth, "verdict": report.get("verdict"),
           "exit_code": rc, "launches": report.get("launches_made"), "wall_s": round(wall, 1),
           "box_minutes": round(wall / 60, 1), "user_server_startup_s": round(startup, 1),
           "box_left_as_found": same_server and not diff,
           "box_left_as_found_by_specdoctor": S._specdoctor_box_ok(report.get("box") or {}),
           "over_ssh": (report.get("meta") or {}).get("host") == box.host_spec, "audit_commands": len(audit),
           "base": base, "head": shas[-1], "claims": {"spec": claims.get("spec")}, "summary": report.get("summary"),
           **judge(report, shas)}
    S.log(f"[upstream] verdict {row['verdict']}, commit named {row['commit_named']}, rc {rc}, {wall:.0f} s, "
          f"launches {row['launches']}, left as found {row['box_left_as_found']}, over ssh {row['over_ssh']}")
    S.stop_user_server()  # the next story lays out its own box, from the base again
    git("reset", "-q", "--hard", base)
    git("clean", "-fdq")
    return row


if __name__ == "__main__":
    root = Path(sys.argv[1])
    root.mkdir(parents=True, exist_ok=True)
    result = run(root, time.monotonic() + float(os.environ.get("STORY_TIMEOUT_S", "1500")))
    print(json.dumps(result, indent=1, default=str))
