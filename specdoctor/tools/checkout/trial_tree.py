"""Trial trees: HEAD + exactly one trial's patches, built under ~/.specdoctor/trees/RUN/NAME; the checkout is only read.

A trial tree is its own small git repository whose object store borrows the user's objects read-only
(`objects/info/alternates`), so nothing is written to the user's .git (no `git worktree add`, no refs, no
index). The user's changes are copied once per run into a source snapshot (a tar of every changed and
untracked file, bytes-exact: modes, CRLF, symlinks, non-UTF-8 names), and each trial takes from it exactly
the files (or hunks) it asks for. The user's patch script runs inside the trial tree; a change to the user's
checkout (file-level manifest before/after) or a new file elsewhere under $HOME or /tmp is reported.
"""

from __future__ import annotations

import base64
import re
import shlex
import time

from pydantic import BaseModel, Field

from specdoctor.errors import ToolRetry, Unresolved
from specdoctor.host.base import Raw
from specdoctor.parsers.git import Ambiguous, ambiguous_lines, select_hunks
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.checkout.manifest import decode_name, encode_name, take_manifest
from specdoctor.tools.checkout.patch_script import script_command
from specdoctor.tools.remote import remote_command
from specdoctor.tools.serving.server import resolve_origin

__all__ = ["SourceChange", "TrialSource", "TreeInput", "TrialTree", "RemoveInput", "Removed", "OriginInput",
           "EngineOrigin", "prepare_source", "build_tree", "remove_tree", "engine_origin_of", "build_trial_tree",
           "remove_trial_tree", "engine_origin", "sglang_origin", "trees_root", "trial_env", "map_into_tree"]

_NO_LOCKS = {"GIT_OPTIONAL_LOCKS": "0"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _q(s: str) -> str:
    return shlex.quote(s)


def trees_root(ctx: ToolContext) -> str:
    """~/.specdoctor/trees/RUN on the host: every trial tree of this run lives below it."""
    run = re.sub(r"[^A-Za-z0-9._-]+", "-", ctx.run_id).strip(".-") or "adhoc"
    return f"{ctx.state_dir}/trees/{run}"


class SourceChange(BaseModel):
    """One path that differs between HEAD and the user's working tree."""

    path: str = Field(description="Bytes-safe name (b64:... when not UTF-8).")
    status: str = Field(description="M/A/D/T against HEAD, '?' untracked.")


class TrialSource(BaseModel):
    """The run's read-only snapshot of the user's changes, from which every trial tree is built."""

    repo: str
    top: str
    head: str
    objects: str = Field(description="The user's object store (borrowed read-only through alternates).")
    root: str
    tar: str
    changes: list[SourceChange] = Field(default_factory=list)
    gitlinks: list[str] = Field(default_factory=list, description="Submodule folders (copied as they are).")
    diff_algorithm: str | None = None

    def changes_paths(self) -> list[str]:
        return [c.path for c in self.changes]

    def status_of(self, path: str) -> str | None:
        return next((c.status for c in self.changes if c.path == path), None)


def _b64_lines(ctx: ToolContext, script: str, **kw) -> list[bytes]:
    """NUL-separated output of a host command, carried bytes-exact through base64."""
    out = ctx.host.run(["bash", "-c", f"set -o pipefail; ({script}) | base64 -w0"], **kw).stdout.strip()
    return [p for p in base64.b64decode(out).split(b"\0") if p] if out else []


def prepare_source(ctx: ToolContext, repo: str) -> TrialSource:
    """Snapshot the user's changes once per run (cached on the context); reads the checkout, writes only under root."""
    key = f"trial_tree:source:{repo}"
    if key in ctx.cache:
        return ctx.cache[key]
    res = ctx.host.run(["sh", "-c", 'cd "$1" && git rev-parse --show-toplevel && (cd "$(git rev-parse '
                        '--git-common-dir)" && pwd -P) && git rev-parse --verify HEAD', "source", repo],
                       env=_NO_LOCKS, check="ignore")
    lines = res.stdout.splitlines()
    if not res.ok or len(lines) < 3:
        raise ToolRetry(f"{repo} is not a git checkout with a commit on {ctx.host.name}: "
                        f"{(res.stderr.strip().splitlines() or ['?'])[-1][:200]}")
    top, common, head = lines[0], lines[1], lines[2]
    g = f"git --no-optional-locks -C {_q(top)}"
    raw = _b64_lines(ctx, f"{g} diff --name-status -z --no-renames HEAD")
    changes = [SourceChange(path=encode_name(raw[i + 1]), status=raw[i].decode()[:1]) for i in range(0, len(raw) - 1, 2)]
    changes += [SourceChange(path=encode_name(p), status="?")
                for p in _b64_lines(ctx, f"{g} ls-files -z --others --exclude-standard")]
    links = [p.split(b"\t", 1)[1] for p in _b64_lines(ctx, f"{g} ls-files -z -s") if p.startswith(b"160000 ")]
    algo = ctx.host.run(["git", "-C", top, "config", "--get", "diff.algorithm"], check="ignore").stdout.strip()
    root = trees_root(ctx)
    tar = f"{root}/source.tar"
    ctx.host.run(["mkdir", "-p", root])
    present = [decode_name(c.path) for c in changes if c.status != "D"]
    listing = b"".join(p + b"\0" for p in present + links)
    # --no-recursion: a listed folder (a submodule) is added whole by the second tar below, never twice
    ctx.host.run(Raw(f"cd {_q(top)} && tar --null --no-recursion --sparse -T - -cf {_q(tar)}"), stdin=listing, timeout=900)
    for link in links:  # a submodule's working tree as it is, without its .git pointer
        _add_gitlink(ctx, top, tar, link)
    src = TrialSource(repo=repo, top=top, head=head, objects=f"{common}/objects", root=root, tar=tar, changes=changes,
                      gitlinks=[encode_name(p) for p in links], diff_algorithm=algo or None)
    ctx.host.put((src.model_dump_json(indent=1) + "\n").encode(), f"{root}/source.json")
    ctx.cache[key] = src
    return src


def _add_gitlink(ctx: ToolContext, top: str, tar: str, link: bytes) -> None:
    """Append a submodule's files (not its .git) to the source tar, under the submodule's path."""
    b64 = base64.b64encode(link).decode()
    script = (f'p="$(printf %s {b64} | base64 -d)"; cd {_q(top)} && '
              f'find "./$p" -path "./$p/.git" -prune -o ! -type d -print0 | '
              f"tar --null --no-recursion --sparse --transform 's,^\\./,,' -T - -rf {_q(tar)}")
    ctx.host.run(Raw(script), timeout=900)


class TreeInput(BaseModel):
    """Arguments of build_trial_tree."""

    repo: str = Field(description="The user's checkout on the host (read only).")
    name: str = Field(description="The trial's name (letters, digits, . _ -): the tree is ~/.specdoctor/trees/RUN/NAME.")
    files: list[str] = Field(default_factory=list, description="Changed paths whose whole change the trial keeps.")
    hunks: dict[str, list[int]] = Field(default_factory=dict, description="path → hunk indices (catalog order).")
    all_changes: bool = Field(default=False, description="Keep every change (the user's tree as it is).")
    script: str | None = Field(default=None, description="The user's patch script, run inside the trial tree.")
    script_args: list[str] = Field(default_factory=list,
                                   description="Its arguments; one equal to the checkout's path becomes the tree's.")
    python: str = Field(default="python3", description="Interpreter for the script.")
    timeout_s: float = Field(default=600, gt=0)


class TrialTree(BaseModel):
    """A built trial tree, what it holds, and the proof that the user's checkout was not touched."""

    name: str
    path: str
    head: str
    pythonpath: str = Field(description="Put first on PYTHONPATH so the engine's package is imported from this "
                            "tree.")
    applied_files: list[str] = Field(default_factory=list)
    applied_hunks: dict[str, list[int]] = Field(default_factory=dict)
    differs_from_head: list[str] = Field(default_factory=list, description="Paths of the tree that differ from HEAD.")
    script_exit: int | None = None
    script_output: str | None = None
    ambiguous: list[Ambiguous] = Field(default_factory=list)
    outside_writes: list[str] = Field(default_factory=list,
                                      description="Writes by the script outside the tree (checkout, $HOME, /tmp).")
    checkout_before: str | None = Field(default=None, description="Manifest digest of the user's checkout before "
                                        "the build; None when no patch script ran (the build itself only reads it, "
                                        "and the run compares the whole checkout at its end).")
    checkout_after: str | None = None

    def summary_line(self) -> str:
        untouched = "checkout untouched" if self.checkout_before == self.checkout_after else "CHECKOUT CHANGED"
        out = f"; {len(self.outside_writes)} writes outside the tree" if self.outside_writes else ""
        return (f"trial tree {self.name}: HEAD {self.head[:10]} + {len(self.applied_files)} files, "
                f"{sum(map(len, self.applied_hunks.values()))} hunks{' + script' if self.script_exit is not None else ''}"
                f" at {self.path}; {untouched}{out}")


def _check_name(name: str) -> str:
    if not _NAME.match(name) or name in {"source.tar", "source.json"} or ".." in name:
        raise ToolRetry(f"invalid trial tree name {name!r} (letters, digits, '.', '_', '-'; at most 100)")
    return name


def _extract(ctx: ToolContext, src: TrialSource, tree: str, paths: list[bytes]) -> None:
    if paths:
        ctx.host.run(Raw(f"tar -xpf {_q(src.tar)} -C {_q(tree)} --null --no-recursion -T -"),
                     stdin=b"".join(p + b"\0" for p in paths), timeout=900)


def build_tree(ctx: ToolContext, args: TreeInput) -> TrialTree:
    """Build HEAD + the asked changes under the run's trees folder (see the module doc); refuses an existing name."""
    name = _check_name(args.name)
    src = prepare_source(ctx, args.repo)
    before = take_manifest(ctx, src.top) if args.script else None  # only the user's script could write there
    tree = f"{src.root}/{name}"
    if ctx.host.exists(tree):
        raise ToolRetry(f"trial tree {name} already exists at {tree}; remove it or pick another name")
    wanted = _wanted_changes(src, args)
    _init_tree(ctx, src, tree)
    whole = [p for p in wanted if p not in args.hunks]
    _apply_changes(ctx, src, tree, whole, args.hunks)
    out = TrialTree(name=name, path=tree, head=src.head, pythonpath=_pythonpath(ctx, tree), applied_files=whole,
                    applied_hunks={p: i for p, i in args.hunks.items() if i}, checkout_before=before.digest if before else None,
                    checkout_after=before.digest if before else None)
    if args.script:
        _run_script(ctx, src, tree, args, out)
    out.differs_from_head = _differs_from_head(ctx, tree)
    if before is None:
        return out
    after = take_manifest(ctx, src.top)
    out.checkout_after = after.digest
    if after.digest != before.digest:
        out.outside_writes += [f"user checkout: {d}" for d in before.diff(after).differences]
    return out


def _wanted_changes(src: TrialSource, args: TreeInput) -> list[str]:
    """The changed paths the trial keeps whole or by hunks (every change with all_changes); refuses unknown ones."""
    wanted = list(dict.fromkeys([*src.changes_paths()] if args.all_changes else [*args.files]))
    unknown = [p for p in [*wanted, *args.hunks] if src.status_of(p) is None]
    if unknown:
        raise ToolRetry(f"not changes of {args.repo}: {', '.join(map(repr, unknown[:5]))}")
    return wanted


def _init_tree(ctx: ToolContext, src: TrialSource, tree: str) -> None:
    """A fresh repository at HEAD borrowing the user's objects, with the submodules' files as the user has them."""
    gt = f"git -C {_q(tree)}"
    setup = (f"set -e; git init -q {_q(tree)}; printf '%s\\n' {_q(src.objects)} > {_q(tree)}/.git/objects/info/alternates"
             f"; {gt} read-tree {src.head}; {gt} checkout-index -a -f; {gt} update-ref --no-deref HEAD {src.head}")
    ctx.host.run(Raw(setup), timeout=900)
    for link in src.gitlinks:  # submodules: their files as the user has them (HEAD's gitlink has no files)
        _extract(ctx, src, tree, [p for p in _tar_members(ctx, src) if p.startswith(decode_name(link) + b"/") and not p.endswith(b"/")])


def _apply_changes(ctx: ToolContext, src: TrialSource, tree: str, whole: list[str],
                   hunks: dict[str, list[int]]) -> None:
    """Whole files from the source snapshot (deleted ones removed), then the chosen hunks."""
    _extract(ctx, src, tree, [decode_name(p) for p in whole if src.status_of(p) != "D"])
    gone = [decode_name(p) for p in whole if src.status_of(p) == "D"]
    if gone:
        ctx.host.run(Raw(f"cd {_q(tree)} && xargs -0 rm -f --"), stdin=b"".join(p + b"\0" for p in gone))
    for path, idx in hunks.items():
        if idx:
            _apply_hunks(ctx, src, tree, path, idx)


def _differs_from_head(ctx: ToolContext, tree: str) -> list[str]:
    """The tree's paths that differ from HEAD (submodules ignored), bytes-safe names."""
    return [encode_name(p) for p in _b64_lines(
        ctx, f"git --no-optional-locks -C {_q(tree)} status --porcelain=v1 -z --untracked-files=all "
             f"--ignore-submodules=all | cut -z -c4-")]


def trial_env(tree: TrialTree, env: dict[str, str]) -> dict[str, str]:
    """The launch env for a trial server: the tree's package folder first on PYTHONPATH (nothing else changed)."""
    rest = env.get("PYTHONPATH", "")
    return {**env, "PYTHONPATH": f"{tree.pythonpath}:{rest}" if rest else tree.pythonpath}


def map_into_tree(path: str | None, top: str, tree: TrialTree) -> str | None:
    """A path inside the user's checkout (e.g. the server's cwd: `python -m` imports from it first) moved into
    the trial tree; a path outside the checkout is returned as it is."""
    if path is None:
        return None
    top = top.rstrip("/")
    if path == top or path.startswith(top + "/"):
        return tree.path + path[len(top):]
    return path


def _tar_members(ctx: ToolContext, src: TrialSource) -> list[bytes]:
    key = f"trial_tree:members:{src.tar}"
    if key not in ctx.cache:
        names = _b64_lines(ctx, f"tar -tf {_q(src.tar)} | tr '\\n' '\\0'")
        ctx.cache[key] = [n[2:] if n.startswith(b"./") else n for n in names]
    return ctx.cache[key]


def _apply_hunks(ctx: ToolContext, src: TrialSource, tree: str, path: str, wanted: list[int]) -> None:
    raw = decode_name(path)
    if src.status_of(path) in ("?", "D"):
        raise ToolRetry(f"{path!r} is {'untracked' if src.status_of(path) == '?' else 'deleted'}: keep it whole "
                        "(files), not by hunks")
    _extract(ctx, src, tree, [raw])
    algo = [f"--diff-algorithm={src.diff_algorithm}"] if src.diff_algorithm else []
    diff = ctx.host.run(["git", "-C", tree, "diff", "--no-color", "--no-ext-diff", "--no-renames", "--src-prefix=a/",
                         "--dst-prefix=b/", *algo, "--", raw.decode("utf-8", "surrogateescape")]).stdout
    ctx.host.run(["git", "-C", tree, "checkout-index", "-f", "--", raw.decode("utf-8", "surrogateescape")])
    try:
        patch, _lines = select_hunks(diff, wanted)
    except ValueError as exc:
        raise ToolRetry(f"{path}: {exc}") from None
    res = ctx.host.run(["git", "-C", tree, "apply", "--whitespace=nowarn", "-"], stdin=patch.encode(), check="ignore")
    if not res.ok:
        raise Unresolved(f"patch conflict applying hunks {wanted} of {path}: {res.stderr.strip()[:300]}")


def _pythonpath(ctx: ToolContext, tree: str) -> str:
    """The folder holding the `sglang` package: python/ in an SGLang checkout, else the tree itself."""
    return f"{tree}/python" if ctx.host.exists(f"{tree}/python/sglang") else tree


# New files after the script started, outside the tree: under $HOME and beside the checkout (the checkout itself
# is compared file by file with its manifest). /tmp is left out: other users' processes write there all the time.
_FIND_NEW = remote_command("find_new.sh")


def _run_script(ctx: ToolContext, src: TrialSource, tree: str, args: TreeInput, out: TrialTree) -> None:
    assert args.script is not None
    marker = f"{src.root}/.script-start-{time.time_ns()}"
    ctx.host.run(["touch", marker])
    tops = {args.repo.rstrip("/"), src.top.rstrip("/")}
    argv = [tree if a.rstrip("/") in tops else a for a in args.script_args]
    res = ctx.host.run(script_command(ctx, args.script, args.python, argv), cwd=tree, check="ignore",
                       timeout=args.timeout_s)
    text = res.stdout + ("\n" + res.stderr if res.stderr.strip() else "")
    out.script_exit, out.script_output = res.exit, text[-4000:]
    out.ambiguous = ambiguous_lines(text, res.exit)
    beside = src.top.rstrip("/").rsplit("/", 1)[0] or "/"
    found = ctx.host.run(["sh", "-c", _FIND_NEW, "find-new", marker, beside, src.top], check="ignore", timeout=120)
    ctx.host.run(["rm", "-f", "--", marker], check="ignore")
    out.outside_writes += [ln for ln in found.stdout.splitlines() if ln.strip() and ln != marker]


class RemoveInput(BaseModel):
    """Arguments of remove_trial_tree."""

    name: str | None = Field(default=None, description="The trial tree to remove; None: every tree of this run.")


class Removed(BaseModel):
    """What remove_trial_tree took away."""

    removed: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        return f"removed {len(self.removed)} trial trees"


def remove_tree(ctx: ToolContext, name: str | None = None) -> Removed:
    """Remove one trial tree (or the run's whole trees folder, source snapshot included); only below trees_root."""
    root = trees_root(ctx)
    target = f"{root}/{_check_name(name)}" if name else root
    if not ctx.host.exists(target):
        return Removed()
    real = ctx.host.run(["realpath", "-e", "--", target]).stdout.strip()
    base = ctx.host.run(["realpath", "-m", "--", f"{ctx.state_dir}/trees"]).stdout.strip()
    if not real.startswith(base + "/"):
        raise ToolRetry(f"{target} resolves outside {base}; not removed")
    ctx.host.run(["rm", "-rf", "--", real], timeout=900)
    if not name:
        for k in [k for k in ctx.cache if k.startswith("trial_tree:")]:
            del ctx.cache[k]
    return Removed(removed=[real])


class OriginInput(BaseModel):
    """Arguments of engine_origin."""

    pid: int | None = Field(default=None, ge=1, description="Check the environment of this running process.")
    python: str = Field(default="python3", description="Interpreter (ignored with pid: the process's own).")
    env: dict[str, str] = Field(default_factory=dict, description="The exact environment (ignored with pid).")
    cwd: str | None = Field(default=None, description="Working folder (ignored with pid).")
    expect_under: str | None = Field(default=None, description="The tree the engine's package must come "
                                        "from.")


class EngineOrigin(BaseModel):
    """Where `import <engine package>` (sglang, vllm) resolves in an environment, and whether that is inside the
    expected tree."""

    package: str | None = Field(default=None, description="The engine's package that was resolved (older records "
                                "name none: sglang).")
    origin: str | None
    locations: list[str] = Field(default_factory=list)
    python: str
    expect_under: str | None = None
    inside: bool | None = Field(default=None, description="None when no tree was expected.")
    editable_from: str | None = Field(default=None, description="An editable install's source (PEP 610 "
                                      "direct_url.json of the engine's distribution), e.g. file:///home/u/sglang.")

    def summary_line(self) -> str:
        where = self.origin or (self.locations[0] if self.locations else "not importable")
        verdict = "" if self.inside is None else (" (inside the trial tree)" if self.inside else " (NOT the trial tree)")
        return f"{self.package or 'the engine'} imports from {where}{verdict}"


def engine_origin_of(ctx: ToolContext, args: OriginInput) -> EngineOrigin:
    """Resolve the run's engine package (`ctx.engine.package`) with exactly the given (or the running process's)
    interpreter, environment and cwd.

    Only the import machinery runs (importlib.util.find_spec): the engine itself is not imported.
    """
    python, env, cwd = args.python, dict(args.env), args.cwd
    if args.pid is not None:
        p = f"/proc/{args.pid}"
        res = ctx.host.run(Raw(f"readlink {p}/exe && readlink {p}/cwd && base64 -w0 {p}/environ && echo && "
                               f"head -z -n1 {p}/cmdline | tr -d '\\0'"), check="ignore")
        parts = res.stdout.splitlines()
        if not res.ok or len(parts) < 3:
            raise ToolRetry(f"cannot read process {args.pid} on {ctx.host.name} (gone, or not ours)")
        python, cwd = parts[0], parts[1]
        # argv[0] as it was run (a venv's bin/python): /proc/PID/exe is the symlink's target, whose sys.prefix
        # is the base interpreter's, so its site-packages would not be the venv's.
        argv0 = parts[3].strip() if len(parts) > 3 else ""
        if "python" in argv0.rsplit("/", 1)[-1]:
            python = argv0 if argv0.startswith("/") or "/" not in argv0 else f"{cwd}/{argv0}"
        env = dict(kv.split("=", 1) for kv in base64.b64decode(parts[2]).decode("utf-8", "replace").split("\0")
                   if "=" in kv)
    info, why = resolve_origin(ctx.host, python, env, cwd, ctx.engine.package)
    if info is None:
        raise ToolRetry(f"{python} could not resolve {ctx.engine.package} on {ctx.host.name}: {why}")
    out = EngineOrigin(package=ctx.engine.package, origin=info["origin"], locations=info["locations"], python=python,
                       expect_under=args.expect_under, editable_from=info.get("editable"))
    if args.expect_under:
        base = ctx.host.run(["realpath", "-m", "--", args.expect_under]).stdout.strip().rstrip("/")
        seen = [x for x in [out.origin, *out.locations] if x]
        out.inside = bool(seen) and all(x == base or x.startswith(base + "/") for x in seen)
    return out


@tool(effect="mutate")
def build_trial_tree(ctx: ToolContext, args: TreeInput) -> TrialTree:
    """Build a trial tree elsewhere on the host: HEAD + exactly the given changes (+ the patch script, run inside it).

    The user's checkout is only read (its manifest before and after is compared, and reported); the tree lives
    at ~/.specdoctor/trees/RUN/NAME and borrows the checkout's git objects read-only. Launch the trial server
    with PYTHONPATH=<pythonpath> and check it with engine_origin.
    """
    return build_tree(ctx, args)


@tool(effect="mutate")
def remove_trial_tree(ctx: ToolContext, args: RemoveInput) -> Removed:
    """Remove a trial tree of this run (or all of them, with the run's source snapshot); nothing else is touched."""
    return remove_tree(ctx, args.name)


@tool(effect="read")
def engine_origin(ctx: ToolContext, args: OriginInput) -> EngineOrigin:
    """Where the engine's package (sglang, vllm) resolves for a running process (by pid) or a given python + env +
    cwd; inside a tree?"""
    return engine_origin_of(ctx, args)


@tool(effect="read")
def sglang_origin(ctx: ToolContext, args: OriginInput) -> EngineOrigin:
    """Deprecated: the old name of engine_origin (kept so embedders calling it by name keep working); call engine_origin.

    Same arguments and answer: where the run's engine package resolves, and whether inside the expected tree."""
    return engine_origin_of(ctx, args)
