"""A trial's code: its own tree (HEAD + exactly its patches), the launch moved into it, the import checked, removed after.

    with trial_code(ctx, repo, "bisect-3", files, script=..., python=...) as tree:
        with trial(ctx, in_tree(config, tree)) as handle:
            check_origin(handle, tree)        # sglang imports from the tree in the server's own environment
            measure(handle)
    # the tree is gone here; the user's checkout was only read
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from specdoctor.errors import SpecdoctorError, ToolRetry, Unresolved
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.checkout.manifest import decode_name
from specdoctor.tools.checkout.trial_tree import (
    EngineOrigin,
    TreeInput,
    TrialTree,
    build_tree,
    prepare_source,
    remove_tree,
)
from specdoctor.tools.serving.trial import LaunchConfig, TrialHandle

__all__ = ["WrongTree", "trial_code", "in_tree", "check_origin", "tree_problem", "source_names"]


class WrongTree(Unresolved):
    """The trial server does not import the engine from its trial tree (or the tree is not what was asked)."""


def tree_problem(tree: TrialTree) -> str | None:
    """Why a built tree cannot be trusted for a trial: the patch script wrote outside it (the checkout above all)."""
    if tree.checkout_before != tree.checkout_after:
        return "building the trial tree changed the user's checkout: " + "; ".join(tree.outside_writes[:3])
    return None


def source_names(ctx: ToolContext, repo: str, files: list[str]) -> list[str]:
    """The trial source's bytes-safe names for `files`: a name that git printed lossily (a non-UTF-8 name decoded
    with U+FFFD, as the backup lists it) becomes the one change it stands for; a name matching none is kept (and
    refused by build_tree, one line)."""
    changes = prepare_source(ctx, repo).changes_paths()
    known = set(changes)
    lossy: dict[str, list[str]] = {}
    for c in changes:
        lossy.setdefault(decode_name(c).decode("utf-8", "replace"), []).append(c)
    out = []
    for f in files:
        hits = [f] if f in known else lossy.get(f, [f])
        if len(hits) > 1:
            raise ToolRetry(f"{f!r} stands for several changed paths whose names are not UTF-8; name one exactly")
        out.append(hits[0])
    return out


@contextmanager
def trial_code(ctx: ToolContext, repo: str, name: str, files: list[str], *, script: str | None = None,
               python: str | None = None) -> Iterator[TrialTree]:
    """Build the trial's tree (the patch script, if any, runs inside it with the checkout's path mapped), yield it,
    remove it on exit whatever happens."""
    args = TreeInput(repo=repo, name=name, files=sorted(set(source_names(ctx, repo, files))), script=script,
                     script_args=[repo] if script else [], python=python or "python3")
    remove_tree(ctx, name)  # a tree left by a killed run of the same id
    tree = build_tree(ctx, args)
    try:
        yield tree
    finally:
        try:
            remove_tree(ctx, name)
        except SpecdoctorError:  # a lost host: the run's trees folder goes at its end (or with the next run)
            pass


def in_tree(config: LaunchConfig, tree: TrialTree, top: str | None = None) -> LaunchConfig:
    """The same launch, importing from the tree: PYTHONPATH first and the working folder moved into the tree
    (`python -m` imports from its cwd first; a cwd outside the checkout stays where it was)."""
    cwd = config.cwd
    if cwd is not None and top is not None:
        t = top.rstrip("/")
        cwd = tree.path + cwd[len(t):] if cwd == t or cwd.startswith(t + "/") else cwd
    return config.model_copy(update={"tree": tree.path, "cwd": cwd})


def check_origin(handle: TrialHandle, tree: TrialTree) -> EngineOrigin:
    """Where the running trial server resolves the engine's package (its exe, env and cwd from /proc); WrongTree when
    not inside the trial tree. Recorded as evidence like every tool call of the trial."""
    last = "no server process to check"
    for pid in handle.pids[:4]:  # the group leader may be a wrapper (a shell): the first python that answers
        res = registry.call(handle.ctx, "engine_origin", {"pid": pid, "expect_under": tree.path})
        if handle.record is not None:
            handle.record(f"origin_{handle.config.label}", res)
        out = registry.typed_output(res, EngineOrigin, where=f"origin_{handle.config.label}")
        if out is None:
            last = res.summary
            continue
        if not out.inside:
            raise WrongTree(f"trial server imports {out.package or 'the engine'} from {out.origin or out.locations}, "
                            f"not its tree {tree.path}")
        return out
    raise WrongTree(f"could not check where the trial server imports the engine from: {last}")
