"""`investigate --good-ref REF`: the good run's commit named by the user, checked on the host before any launch.

A user who "got slower after I updated" knows when it was fast — a tag, a sha, a date — more often than they kept a
fingerprint. The reference is resolved on the host (read-only) before the playbook starts, so a ref that does not
resolve, or is not an ancestor of HEAD, is refused in one line with the bad-input exit code instead of ending the
run halfway; the playbook's `good_ref` parameter then carries it to `catalog_commits` and `bisect_commits`.
"""

from __future__ import annotations

from typing import Any

from specdoctor.errors import UsageError

__all__ = ["good_ref_params", "check_good_ref"]


def good_ref_params(params: dict[str, Any], ref: str | None) -> dict[str, Any]:
    """--good-ref REF as the playbook's `good_ref` parameter (refused beside a different `--param good_ref=`)."""
    if ref is None:  # a sha given as `--param good_ref=1234567` parses as a number: the ref is text
        given = params.get("good_ref")
        return params if given is None else {**params, "good_ref": str(given)}
    if not ref.strip() or ref.strip().startswith("-"):
        raise UsageError(f"--good-ref takes a commit, a tag or a date (YYYY-MM-DD), got {ref!r}")
    given = params.get("good_ref")
    if given is not None and str(given) != ref.strip():
        raise UsageError(f"--good-ref {ref.strip()} and --param good_ref={given} disagree; give one")
    return {**params, "good_ref": ref.strip()}


def check_good_ref(host: Any, repo: str | None, ref: str | None) -> str | None:
    """The commit REF names in `repo` on the host, or UsageError (exit 2) when it names none or is not an ancestor of
    HEAD (no range to search). Read-only. None when no ref was given."""
    if ref is None:
        return None
    from specdoctor.errors import ToolRetry
    from specdoctor.toolkit import ToolContext
    from specdoctor.tools.checkout.commits import resolve_good_ref
    from specdoctor.tools.checkout.repo import git

    if not repo:
        raise UsageError("--good-ref needs the checkout it names a commit of: pass --repo")
    ctx = ToolContext(host=host, run_id="preflight")
    try:
        sha = resolve_good_ref(ctx, repo, ref)
    except ToolRetry as exc:
        raise UsageError(f"--good-ref: {exc}") from None
    anc = host.run(git(repo, "merge-base", "--is-ancestor", sha, "HEAD"), check="ignore")
    if not anc.ok:
        raise UsageError(f"--good-ref {ref} ({sha[:10]}) is not an ancestor of HEAD in {repo}: no range to search")
    return sha
