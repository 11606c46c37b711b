"""The Python API for embedding agents: `connect(host)` → a `Client` that calls typed tools safely."""

from __future__ import annotations

import atexit
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from specdoctor.errors import UsageError
from specdoctor.host import AuditLog, Host, HostHints, open_host
from specdoctor.inference import get_engine
from specdoctor.toolkit import ApprovalRequest, Effect, ToolContext, ToolResult, ToolSpec, registry
from specdoctor.toolkit.registry import ToolRegistry
from specdoctor.toolkit.safety import safety_net
from specdoctor.tools.checkout.worktree import Backup

__all__ = ["Client", "CleanupRecord", "connect", "READ_ONLY", "ALL_EFFECTS"]

log = logging.getLogger("specdoctor.embed")

READ_ONLY: tuple[Effect, ...] = ("read",)
ALL_EFFECTS: tuple[Effect, ...] = ("read", "mutate", "disrupt")
# Tools that manage the safety net themselves: never trigger an automatic backup.
_SAFETY_TOOLS = frozenset({"backup_worktree", "restore_worktree"})


class CleanupRecord(BaseModel):
    """What `Client.close()` did to leave the host as it found it (one row per safety action)."""

    tool: str
    repo: str | None = None
    status: str
    summary: str


def _new_run_id() -> str:
    return "embed-" + time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


class Client:
    """One host, the tool registry and a ToolContext: `client.call("catalog_diffs", repo=...)`.

    Read-only tools always run. `mutate`/`disrupt` tools come back `needs_approval` (nothing run) unless
    `allow_mutations=True`; then the CLI's safety contract holds: before the first mutating call on a repo
    the client backs the working tree up itself (a refused backup refuses the call), and `close()` — also
    run by `with`, and by an atexit hook if the process exits first — restores every backup (verified) and
    stops every server this client's run started. `approve`, when given, is asked before each mutation.
    `owns_host=False` leaves the Host open on close (its opener closes it); the safety net still runs.
    """

    def __init__(self, host: Host, *, allow_mutations: bool = False,
                 approve: Callable[[ApprovalRequest], bool] | None = None, run_id: str | None = None,
                 progress: Callable[[str], None] | None = None, reg: ToolRegistry = registry,
                 owns_host: bool = True, engine: str | None = None):
        self.host = host
        self.owns_host = owns_host
        self.registry = reg
        self.allow_mutations = allow_mutations
        self.ctx = ToolContext(host=host, run_id=run_id or _new_run_id(), auto_approve=allow_mutations and not approve,
                               approve=approve if allow_mutations else None, progress=progress,
                               run_engine=get_engine(engine) if engine else None)
        self.backups: dict[str, str] = {}  # repo → backup id made (or seen) by this client
        self.cleanup: list[CleanupRecord] = []
        self._mutated = False
        self._closed = False
        self._lock = threading.RLock()  # a Host is one connection: one call at a time
        atexit.register(self.close)

    # -- what the client offers -----------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self.ctx.run_id

    @property
    def hints(self) -> HostHints:
        """What the host says about itself (repo path, python, launch line): user inputs, not findings."""
        return self.host.hints or HostHints()

    @property
    def effects(self) -> tuple[Effect, ...]:
        """The effect classes this client will run."""
        return ALL_EFFECTS if self.allow_mutations else READ_ONLY

    def tools(self, effects: Iterable[Effect] | None = None) -> list[ToolSpec]:
        """The registered tools this client exposes (default: the effects it allows)."""
        return self.registry.all(tuple(effects) if effects is not None else self.effects)

    # -- calling --------------------------------------------------------------------------------
    def call(self, name: str, args: BaseModel | dict[str, Any] | None = None, /, **kwargs: Any) -> ToolResult:
        """Validate and run one tool; the outcome (ok, error, needs_approval, ...) is data, never an exception.

        Host failures (unreachable, connection lost) raise `HostError`: the host is gone, not the call.
        """
        if self._closed:
            raise UsageError("this specdoctor Client is closed")
        spec = self.registry.get(name)
        payload: dict[str, Any] = args.model_dump() if isinstance(args, BaseModel) else dict(args or {})
        payload.update(kwargs)
        with self._lock:
            if spec.effect == "read":
                return self.registry.call(self.ctx, name, payload)
            if not self.allow_mutations:
                return ToolResult(tool=name, status="needs_approval",
                                  summary=f"{name} ({spec.effect}) is refused: this client was opened without "
                                          "allow_mutations=True; nothing was run")
            try:
                parsed = spec.input_model.model_validate(payload)
            except ValidationError:  # the registry reports it as status `error`; nothing runs, no backup
                return self.registry.call(self.ctx, name, payload)
            repo = getattr(parsed, "repo", None)
            if name not in _SAFETY_TOOLS and isinstance(repo, str) and repo:
                refused = self._ensure_backup(name, repo)
                if refused is not None:
                    return refused
            self._mutated = True
            result = self.registry.call(self.ctx, name, parsed)
            if name == "backup_worktree" and result.ok and isinstance(repo, str):
                self.backups.setdefault(repo, _backup_id(result))
            return result

    def call_json(self, name: str, arguments: str | dict[str, Any] | None = None) -> str:
        """Run a tool from a model's JSON arguments and return the ToolResult as JSON (for tool messages)."""
        try:
            args = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else (arguments or {})
        except json.JSONDecodeError as exc:
            res = ToolResult(tool=name, status="error", summary=f"arguments are not JSON: {exc}", error=str(exc),
                             retryable=True)
            return res.model_dump_json()
        if not isinstance(args, dict):
            res = ToolResult(tool=name, status="error", summary="arguments must be a JSON object", retryable=True,
                             error="arguments must be a JSON object")
            return res.model_dump_json()
        try:
            return self.call(name, args).model_dump_json()
        except UsageError as exc:  # unknown tool name: tell the model, it can pick another
            return ToolResult(tool=name, status="error", summary=str(exc), error=str(exc)).model_dump_json()

    def openai_tool_message(self, tool_call: Any) -> dict[str, Any]:
        """Answer one OpenAI tool call — a `tool_calls` entry (SDK object or dict) or a Responses-API
        `function_call` item: run it, return the `{"role": "tool", ...}` / `function_call_output` message."""
        from specdoctor.embed.openai_calls import answer_tool_call

        return answer_tool_call(self, tool_call)

    # -- the safety net -------------------------------------------------------------------------
    def _ensure_backup(self, name: str, repo: str) -> ToolResult | None:
        """Back `repo` up once per run before its first mutation; a failed backup refuses the call."""
        if repo in self.backups:
            return None
        if "backup_worktree" not in {s.name for s in self.registry.all()}:
            return ToolResult(tool=name, status="error", error="backup_worktree is not available",
                              summary=f"{name} refused: no backup_worktree tool to protect {repo} first")
        res = self.registry.call(self._safety_ctx(), "backup_worktree", {"repo": repo})
        if not res.ok or not _backup_id(res):
            return ToolResult(tool=name, status="error", error=res.error or res.summary, evidence=res.evidence,
                              summary=f"{name} refused: backing up {repo} first failed: {res.summary}")
        self.backups[repo] = _backup_id(res)
        log.info("backed up %s as %s before %s; close() restores it (by hand: specdoctor restore --host %s "
                 "--repo %s --backup %s)", repo, self.backups[repo], name, self.host.name, repo, self.backups[repo])
        return None

    def _safety_ctx(self) -> ToolContext:
        return ToolContext(host=self.host, run_id=self.ctx.run_id, auto_approve=True, progress=self.ctx.progress,
                           cache=self.ctx.cache)

    def close(self) -> list[CleanupRecord]:
        """Stop the servers this run started, restore every backup (verified), close the host. Idempotent."""
        with self._lock:
            if self._closed:
                return self.cleanup
            self._closed = True
            atexit.unregister(self.close)
            try:
                if self._mutated:
                    self._cleanup()
            finally:
                if self.owns_host:
                    self.host.close()
            return self.cleanup

    def _cleanup(self) -> None:
        # The same net as a playbook run's (specdoctor.toolkit.safety): stop our servers, restore every backup.
        for st in safety_net(self._safety_ctx(), self.backups, reg=self.registry):
            self.cleanup.append(CleanupRecord(tool=st.tool, repo=st.repo, status=st.status, summary=st.summary))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "mutations allowed" if self.allow_mutations else "read-only"
        return f"<specdoctor.Client {self.host.name} run={self.run_id} {mode}>"


def _backup_id(res: ToolResult) -> str:
    b = registry.typed_output(res, Backup, where="backup_worktree")
    return b.backup_id if b is not None else ""


def connect(host: str | Host, *, allow_mutations: bool = False,
            approve: Callable[[ApprovalRequest], bool] | None = None, accept_new_host_key: bool = False,
            audit: AuditLog | None = None, run_id: str | None = None,
            progress: Callable[[str], None] | None = None, engine: str | None = None) -> Client:
    """Open a host spec (`user@gpu-box`, `local`, `sim:seed`) or wrap an open Host, and return a Client.

    A Host you pass in stays yours: `close()` runs the safety net but leaves that Host open. `engine` ("sglang",
    "vllm") names the serving engine, as `--engine` does; None: told by the host's running server when a tool needs
    it (an error then asks for it where no server or several engines run).
    """
    if isinstance(host, Host):
        return Client(host, allow_mutations=allow_mutations, approve=approve, run_id=run_id, progress=progress,
                      owns_host=False, engine=engine)
    h = open_host(host, audit=audit, accept_new_host_key=accept_new_host_key)
    return Client(h, allow_mutations=allow_mutations, approve=approve, run_id=run_id, progress=progress,
                  engine=engine)
