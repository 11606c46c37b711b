"""The file-level manifest: it names every kind of change, stays equal when nothing changed, and catches the in-place path."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from states import IN_PLACE_LOSES, NON_UTF8, STATES, build_state

from specdoctor.host import LocalHost
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.checkout.manifest import Manifest, decode_name, encode_name, take_manifest

_n = itertools.count()


@pytest.fixture()
def local(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    host = LocalHost(base_env={"HOME": str(home)})
    return host, tmp_path


def _state(local, name: str) -> tuple[ToolContext, str]:
    host, tmp = local
    repo = str(tmp / f"{name}-{next(_n)}")
    build_state(host, repo, name)
    return ToolContext(host=host, run_id=f"m{next(_n)}", auto_approve=True), repo


def test_names_round_trip_bytes_exact():
    for raw in (b"plain.py", NON_UTF8, b"b64:looks-encoded", "na\u00efve\nname".encode()):
        assert decode_name(encode_name(raw)) == raw
    assert encode_name(NON_UTF8).startswith("b64:") and encode_name(b"b64:x").startswith("b64:")


def test_manifest_covers_every_state_and_is_stable_when_nothing_changes(local):
    ctx, repo = _state(local, "all")
    m = take_manifest(ctx, repo)
    by_path = {e.path: e for e in m.entries}
    assert decode_name(next(p for p in by_path if p.startswith("b64:") and "f" not in p[4:5])) in (
        NON_UTF8, b"d\xffir", b"d\xffir/f")
    assert {encode_name(NON_UTF8), encode_name(b"d\xffir/f")} <= by_path.keys()
    assert by_path["private.key"].mode == 0o600 and by_path["group.txt"].mode == 0o664
    assert by_path["all.sh"].mode == 0o777
    assert by_path["empty_b/nested/deeper"].kind == "dir"
    assert by_path["kimi_link.py"].target == "python/sglang/srt/models/kimi_k25.py"
    assert by_path["keep.dat"].status == "ignored" and by_path["scratch/a.bin"].status == "ignored"
    assert by_path["scratch/notes.txt"].status == "untracked"
    assert by_path["big_untracked.bin"].size == 200 << 20 and by_path["big_untracked.bin"].hashed == "content"
    index = {i.path: i for i in m.git[0].index}
    assert index["python/sglang/srt/entrypoints/engine.py"].flags == ["assume-unchanged"]
    assert index["run.sh"].flags == ["skip-worktree"]
    assert index["python/sglang/srt/ita_new.py"].flags == ["intent-to-add"]
    assert len(m.git[0].stashes) == 2 and m.git[0].branch == "refs/heads/main"
    # must NOT fire: a status (which may refresh the index's stat data), a touched mtime, a second manifest
    ctx.host.run(["git", "-C", repo, "status"])
    ctx.host.run(["touch", f"{repo}/run.sh", f"{repo}/python/sglang/__init__.py"])
    again = take_manifest(ctx, repo)
    assert again.digest == m.digest and m.diff(again).same, m.diff(again).differences


CHANGES = [
    ("chmod 644 private.key", "'private.key': mode 0600 → 0644"),
    ("printf 'a = 2\\nb = 3\\n' > crlf.py", "'crlf.py': size 14 → 12, content"),
    ("rmdir empty_a", "removed dir 'empty_a'"),
    ("ln -sfn other kimi_link.py", "'kimi_link.py': size 36 → 5, target"),
    ("git update-index --no-assume-unchanged python/sglang/srt/entrypoints/engine.py",
     "git index 'python/sglang/srt/entrypoints/engine.py': flags ['assume-unchanged'] → []"),
    ("git update-index --no-skip-worktree run.sh", "git index 'run.sh': flags ['skip-worktree'] → []"),
    ("git rm -q --cached python/sglang/srt/ita_new.py", "git index 'python/sglang/srt/ita_new.py': removed"),
    ("printf x > \"$(printf 'caf\\351-latin1.py')\"", f"{encode_name(NON_UTF8)!r}: size 6 → 1, content"),
    ("git stash drop -q", "git stashes"),
    ("git checkout -q --detach", "git branch: 'refs/heads/main' → None"),
    ("printf '*.log\\n' > .gitignore", "'keep.dat': status 'ignored' → 'untracked'"),
]


def test_diff_names_each_kind_of_change(local):
    """One change at a time, each compared with the manifest taken just before it."""
    host, tmp = local
    repo = str(tmp / "changes")
    build_state(host, repo, "all", without={"big-untracked"})
    ctx = ToolContext(host=host, run_id="changes")
    before = take_manifest(ctx, repo)
    for change, expect in CHANGES:
        ctx.host.run(["bash", "-c", f'cd "$1" && {change}', "change", repo])
        after = take_manifest(ctx, repo)
        d = before.diff(after)
        assert not d.same and d.before != d.after, change
        assert any(line.startswith(expect) for line in d.differences), (change, d.differences)
        before = after


def test_large_ignored_files_are_hashed_by_stat_listed_and_hashed_on_demand(local):
    ctx, repo = _state(local, "gitignore-modified")
    ctx.host.run(["truncate", "-s", "3M", f"{repo}/huge.dat"])
    m = take_manifest(ctx, repo, big_bytes=1 << 20)
    e = next(x for x in m.entries if x.path == "huge.dat")
    assert e.hashed == "stat" and e.sha256 and e.sha256.startswith("stat:3145728:") and m.stat_hashed == 1
    assert "1 large ignored files hashed by size+mtime" in m.summary_line()
    forced = take_manifest(ctx, repo, big_bytes=1 << 20, hash_paths=["huge.dat"])
    assert next(x for x in forced.entries if x.path == "huge.dat").hashed == "content" and forced.stat_hashed == 0
    ctx.host.run(["bash", "-c", 'printf x | dd of="$1" bs=1 seek=100 conv=notrunc status=none', "w",
                  f"{repo}/huge.dat"])
    os.utime(f"{repo}/huge.dat", ns=(1, 1))  # same size; a stat hash still sees the new mtime
    assert not m.diff(take_manifest(ctx, repo, big_bytes=1 << 20)).same


def test_the_tool_is_read_only_and_refuses_a_non_repo(local):
    host, tmp = local
    ctx = ToolContext(host=host, run_id="plain")
    (tmp / "plain").mkdir()
    r = registry.call(ctx, "checkout_manifest", {"repo": str(tmp / "plain")})
    assert r.status != "ok" and "not a git checkout" in r.summary and len(r.summary.splitlines()) == 1
    ctx2, repo = _state(local, "modes")
    ok = registry.call(ToolContext(host=host, run_id="ro"), "checkout_manifest", {"repo": repo})
    assert ok.ok and Manifest.model_validate(ok.output).digest == take_manifest(ctx2, repo).digest


def _legacy(ctx: ToolContext, repo: str) -> None:
    """Make this run's backup look like a first-round one (no manifest, no exact copy): restore uses git's view."""
    b = registry.call(ctx, "backup_worktree", {"repo": repo}).output
    for name in ("manifest.json", "exact.tar", "index.raw"):
        ctx.host.run(["rm", "-f", "--", f"{b['dir']}/{name}"])


@pytest.mark.parametrize("state", sorted(IN_PLACE_LOSES))
def test_manifest_catches_what_the_in_place_path_loses(local, state: str):
    """The first round's backup → stash_all → restore says 'verified' (or fails); the manifest names what changed."""
    ctx, repo = _state(local, state)
    before = take_manifest(ctx, repo)
    _legacy(ctx, repo)
    assert registry.call(ctx, "stash_all", {"repo": repo}).ok
    registry.call(ctx, "restore_worktree", {"repo": repo})  # verified by git's view, or an error: either way ...
    d = before.diff(take_manifest(ctx, repo))
    assert not d.same and d.differences, state  # ... the file-level proof says it is not the same checkout


@pytest.mark.parametrize("state", sorted(s for s in STATES if s != "submodule-local-changes"))
def test_exact_backups_restore_every_state_manifest_identical(local, state: str):
    """Backups now cover what the manifest covers: stash, apply, restore gives the same checkout path for path."""
    ctx, repo = _state(local, state)
    before = take_manifest(ctx, repo)
    assert registry.call(ctx, "stash_all", {"repo": repo}).ok
    assert registry.call(ctx, "apply_patches", {"repo": repo, "files": ["python/sglang/srt/models/kimi_k25.py"]}).ok
    assert not before.diff(take_manifest(ctx, repo)).same
    r = registry.call(ctx, "restore_worktree", {"repo": repo})
    assert r.ok and r.output["manifest_verified"] and r.output["manifest_expected"] == before.digest, r.summary
    d = before.diff(take_manifest(ctx, repo))
    assert d.same, d.differences


def test_a_change_the_backup_cannot_repair_is_named_not_hidden(local):
    ctx, repo = _state(local, "gitignore-modified")
    ctx.host.run(["truncate", "-s", "40M", f"{repo}/huge.dat"])  # ignored and large: hashed by size+mtime only
    assert registry.call(ctx, "stash_all", {"repo": repo}).ok
    ctx.host.run(["truncate", "-s", "41M", f"{repo}/huge.dat"])
    r = registry.call(ctx, "restore_worktree", {"repo": repo})
    assert r.status == "error" and "differs from its manifest" in r.summary and "huge.dat" in r.summary, r.summary


def test_states_cover_the_issue_list():
    need = {"gitignore-modified", "nested-gitignore", "assume-unchanged", "skip-worktree", "intent-to-add",
            "crlf-text-auto", "modes", "empty-dirs", "non-utf8", "big-untracked", "submodule-local-changes"}
    assert need <= STATES.keys()
