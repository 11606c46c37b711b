"""File-level manifest of a git checkout, taken on the host in one process (stdlib + git only), printed as JSON.

Run on the host: `python3 checkout_manifest.py REPO [OPTIONS_JSON]`. Nothing in the checkout (not even the
index: git runs with GIT_OPTIONAL_LOCKS=0) is written. File names are bytes on disk; a name that is not
UTF-8 (or that starts with "b64:") is written as "b64:" + base64 of its bytes, so every name round-trips.
Options: {"big_bytes": N, "content_all": bool, "hash_paths": [...]}: ignored files larger than big_bytes are
hashed by size+mtime (listed as such, never skipped) unless content_all; hash_paths forces content hashes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
import subprocess
import sys

_ENV = dict(os.environ, GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
_FLAGS = {0x8000: "assume-unchanged", 0x40000000: "skip-worktree", 0x20000000: "intent-to-add"}
_DEBUG_ENTRY = re.compile(rb"(\d{6}) ([0-9a-f]{40,64}) (\d)\t([^\0]*)\0(?:[^\0]*?)flags: ([0-9a-f]+)\n", re.S)


def enc(name: bytes) -> str:
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return "b64:" + base64.b64encode(name).decode()
    return "b64:" + base64.b64encode(name).decode() if text.startswith("b64:") else text


def git(repo: bytes, *args: str) -> bytes:
    res = subprocess.run(["git", "-C", repo, *args], capture_output=True, env=_ENV, check=False)
    return res.stdout if res.returncode == 0 else b""


def sha_file(path: bytes) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha_of(path: bytes) -> str | None:
    try:
        return sha_file(path)
    except OSError:
        return None


def git_facts(top: bytes, rel: bytes) -> dict:
    """HEAD, branch, index (with flags), stash list, refs (specdoctor's own apart), worktrees, config hashes."""
    repo = os.path.join(top, rel) if rel else top
    index = []
    for m in _DEBUG_ENTRY.finditer(git(repo, "ls-files", "-z", "-s", "--debug")):
        flags = int(m.group(5), 16)
        index.append({"path": enc(m.group(4)), "mode": m.group(1).decode(), "sha": m.group(2).decode(),
                      "stage": int(m.group(3)), "flags": [n for bit, n in _FLAGS.items() if flags & bit]})
    refs: dict[str, str] = {}
    own: dict[str, str] = {}
    for line in git(repo, "for-each-ref", "--format=%(objectname) %(refname)").decode("utf-8", "replace").splitlines():
        sha, _, name = line.partition(" ")
        (own if name.startswith("refs/specdoctor/") else refs)[name] = sha
    common = git(repo, "rev-parse", "--git-common-dir").strip()
    common = common if os.path.isabs(common) else os.path.join(repo, common)
    wts = git(repo, "worktree", "list", "--porcelain").decode("utf-8", "replace")
    return {
        "path": enc(rel), "head": git(repo, "rev-parse", "--verify", "-q", "HEAD").decode().strip() or None,
        "branch": git(repo, "symbolic-ref", "-q", "HEAD").decode("utf-8", "replace").strip() or None,
        "index": index, "stashes": git(repo, "stash", "list", "--format=%H %gs").decode("utf-8", "replace").splitlines(),
        "refs": refs, "own_refs": own,
        "worktrees": [ln[9:] for ln in wts.splitlines() if ln.startswith("worktree ")],
        "config_sha": sha_of(os.path.join(common, b"config")),
        "exclude_sha": sha_of(os.path.join(common, b"info", b"exclude")),
    }


def ignored_prefixes(repo: bytes) -> list[bytes]:
    out = git(repo, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
    return [p for p in out.split(b"\0") if p]


def main() -> int:
    top = os.fsencode(os.path.realpath(sys.argv[1]))
    opts = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    big, content_all = int(opts.get("big_bytes", 32 << 20)), bool(opts.get("content_all", False))
    forced = {p.encode("utf-8", "surrogateescape") for p in opts.get("hash_paths", [])}
    root = git(top, "rev-parse", "--show-toplevel").strip()
    if not root:
        print(json.dumps({"error": f"{sys.argv[1]} is not a git checkout"}))
        return 3
    top = root
    repos: list[bytes] = [b""]
    tracked: dict[bytes, set[bytes]] = {}
    ignored: dict[bytes, list[bytes]] = {}

    def load(rel: bytes) -> None:
        base = os.path.join(top, rel) if rel else top
        tracked[rel] = {p for p in git(base, "ls-files", "-z").split(b"\0") if p}
        ignored[rel] = ignored_prefixes(base)

    load(b"")
    entries, problems = [], []
    counts = {"content": 0, "stat": 0, "bytes_hashed": 0}

    def owner(rel: bytes) -> bytes:
        return max((r for r in repos if not r or rel == r or rel.startswith(r + b"/")), key=len)

    def status(rel: bytes, is_dir: bool) -> str:
        r = owner(rel)
        inner = rel[len(r) + 1:] if r else rel
        if inner in tracked[r] or (is_dir and any(t.startswith(inner + b"/") for t in tracked[r])):
            return "tracked"
        if any(inner == p.rstrip(b"/") or inner.startswith(p if p.endswith(b"/") else p + b"/")
               for p in ignored[r]):
            return "ignored"
        return "untracked"

    for dirpath, dirnames, filenames in os.walk(top):
        rel_dir = os.path.relpath(dirpath, top) if dirpath != top else b""
        rel_dir = b"" if rel_dir == b"." else rel_dir
        if b".git" in dirnames:  # a repo's own git dir: described by git_facts, not walked
            dirnames.remove(b".git")
            if rel_dir:
                repos.append(rel_dir)
                load(rel_dir)
        elif rel_dir and os.path.isfile(os.path.join(dirpath, b".git")) and rel_dir not in repos:
            repos.append(rel_dir)  # a submodule (its .git is a file pointing into the superproject's modules)
            load(rel_dir)
        dirnames.sort()
        for name in sorted(dirnames) + sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.join(rel_dir, name) if rel_dir else name
            try:
                st = os.lstat(full)
            except OSError as exc:
                problems.append(f"{enc(rel)}: {exc.strerror}")
                continue
            e = {"path": enc(rel), "mode": stat.S_IMODE(st.st_mode), "size": 0, "sha256": None, "hashed": "none",
                 "target": None}
            if stat.S_ISLNK(st.st_mode):
                e.update(kind="symlink", target=enc(os.readlink(full)), size=st.st_size)
            elif stat.S_ISDIR(st.st_mode):
                e["kind"] = "dir"
            elif stat.S_ISREG(st.st_mode):
                e.update(kind="file", size=st.st_size)
            else:
                e["kind"] = "other"
            e["status"] = status(rel, e["kind"] == "dir")
            if e["kind"] == "file":
                by_stat = (e["status"] == "ignored" and st.st_size > big and not content_all and rel not in forced)
                if by_stat:
                    e.update(sha256=f"stat:{st.st_size}:{st.st_mtime_ns}", hashed="stat")
                    counts["stat"] += 1
                else:
                    digest = sha_of(full)
                    if digest is None:
                        problems.append(f"{enc(rel)}: unreadable")
                        e.update(sha256="unreadable", hashed="none")
                    else:
                        e.update(sha256=digest, hashed="content")
                        counts["content"] += 1
                        counts["bytes_hashed"] += st.st_size
            entries.append(e)
    facts = [git_facts(top, r) for r in repos]
    print(json.dumps({"top": enc(top), "entries": entries, "git": facts, "problems": problems,
                      "counts": counts, "big_bytes": big, "content_all": content_all}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
