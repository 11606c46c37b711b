"""One run per checkout and a file-level proof: the lock taken first, the manifest before anything, compared at the end.

`investigate`, `resume` (and `restore`) hold the checkout's lock for the whole run; a second run is refused with
one line naming the holder, a dead holder's lock is taken over with a note. The manifest taken first is kept on
the controller (~/.specdoctor/manifests/RUN.json, 0600) so that a `resume` after a crash compares against the
state before the *first* start, not against whatever the crash left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from specdoctor.engine.runs import specdoctor_home, write_private
from specdoctor.engine.state import Decision
from specdoctor.errors import SpecdoctorError
from specdoctor.host.redact import redact_text
from specdoctor.models.box import CheckoutProofFact
from specdoctor.toolkit import ToolContext
from specdoctor.tools.checkout.checkout_lock import LockTaken, acquire_lock, heartbeat, release_lock
from specdoctor.tools.checkout.manifest import Manifest, take_manifest
from specdoctor.tools.checkout.trial_tree import remove_tree

__all__ = ["CheckoutGuard", "manifest_path"]


BEAT_EVERY_S = 300.0
"""Well inside checkout_lock.STALE_AFTER_S, so a live run on another controller is never taken for dead."""


def manifest_path(run_id: str) -> Path:
    return specdoctor_home() / "manifests" / f"{run_id}.json"


class CheckoutGuard:
    """The lock and the before/after manifests of one checkout for one run (no repo: does nothing)."""

    def __init__(self, ctx: ToolContext, repo: str | None, run_id: str):
        self.ctx, self.repo, self.run_id = ctx, repo, run_id
        self.lock: LockTaken | None = None
        self.before: Manifest | None = None
        self.problem: str | None = None

    def acquire(self) -> str | None:
        """Take the lock (RepoRefused when a live run holds it); the takeover note when a dead run held it."""
        if not self.repo:
            return None
        self.lock = acquire_lock(self.ctx, self.repo, self.run_id)
        if self.lock.note:
            self.ctx.say(self.lock.note)
        return self.lock.note

    def take_before(self, *, resuming: bool = False) -> Manifest | None:
        """The manifest before anything; on resume the one saved when the run first started (taken now if none)."""
        if not self.repo:
            return None
        path = manifest_path(self.run_id)
        if resuming and path.is_file():
            self.before = Manifest.model_validate_json(path.read_text())
            return self.before
        try:
            self.before = take_manifest(self.ctx, self.repo)
        except SpecdoctorError as exc:  # no proof is possible: said in the report, never silently skipped
            self.problem = f"no manifest before the run: {redact_text(str(exc))}"
            return None
        write_private(path, self.before.model_dump_json())
        return self.before

    def beat(self) -> None:
        """A sign of life for runs on other controllers (the same controller checks the pid)."""
        if self.repo and self.lock is not None:
            heartbeat(self.ctx, self.repo, self.run_id)

    def beating(self, progress: Callable[[str], None] | None) -> Callable[[str], None]:
        """The run's progress hook, refreshing the lock at most every BEAT_EVERY_S (runs are long, steps report)."""
        last = [time.monotonic()]

        def hook(message: str) -> None:
            if time.monotonic() - last[0] > BEAT_EVERY_S:
                last[0] = time.monotonic()
                try:
                    self.beat()
                except SpecdoctorError:  # a dropped link is the step's to report, not the heartbeat's
                    pass
            if progress is not None:
                progress(message)

        return hook

    def decision(self, fact: CheckoutProofFact) -> Decision:
        """The cleanup line the report's decisions show (the "box left as found" line reads the fact)."""
        found = (f"identical: manifest {fact.manifest_before} before and after" if fact.identical else
                 f"{len(fact.differences)} differences ({fact.manifest_before} → {fact.manifest_after}): "
                 + "; ".join(fact.differences[:5]) if fact.identical is False else fact.note or "no proof")
        return Decision(step="cleanup", tool="checkout_manifest", status="ok" if fact.identical else "error",
                        checked="the checkout file by file: every path, mode, hash, the index flags, HEAD, stashes",
                        found=found, decided="left as found" if fact.identical else "CHECKOUT NOT PROVEN UNCHANGED",
                        why="the manifest taken before anything must match byte for byte at the end")

    def remove_trees(self) -> str | None:
        """The run's trial trees and its snapshot of the user's changes go at the end (a problem, if any)."""
        try:
            remove_tree(self.ctx)
        except SpecdoctorError as exc:
            return f"could not remove the run's trial trees: {redact_text(str(exc))}"
        return None

    def prove(self) -> CheckoutProofFact | None:
        """The manifest again, compared byte for byte with the one taken first."""
        if not self.repo:
            return None
        holder = self.lock.holder.run_id if self.lock is not None else None
        left = self.remove_trees()
        notes = [x for x in ((self.lock.note if self.lock else None), left) if x]
        fact = CheckoutProofFact(repo=self.repo, lock_holder=holder, note="; ".join(notes))
        if self.before is None:
            fact.note = "; ".join(x for x in (fact.note, self.problem or "no manifest was taken before the run") if x)
            return fact
        fact.manifest_before = self.before.digest
        try:
            after = take_manifest(self.ctx, self.repo)
        except SpecdoctorError as exc:
            fact.note = "; ".join(x for x in (fact.note, f"no manifest after the run: {redact_text(str(exc))}") if x)
            return fact
        diff = self.before.diff(after)
        fact.manifest_after, fact.identical, fact.differences = after.digest, diff.same, diff.differences
        return fact

    def release(self) -> None:
        if self.repo and self.lock is not None:
            try:
                release_lock(self.ctx, self.repo, self.run_id)
            except SpecdoctorError:  # a lost connection: the lock's holder is dead for the next run, taken over
                pass
            self.lock = None
