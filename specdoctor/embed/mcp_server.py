"""The MCP server: every allowed tool with its pydantic input schema, results as structured ToolResults."""

from __future__ import annotations

import copy
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from specdoctor import __version__
from specdoctor.embed.client import Client, connect
from specdoctor.errors import UsageError
from specdoctor.toolkit import ToolContext, ToolResult, ToolSpec

__all__ = ["HINTS_URI", "REPORT_URI", "ToolCancelled", "build_server", "summary_text", "latest_report", "output_schema", "run_mcp", "runs_dir",
           "serve_stdio", "stdout_to_stderr", "tool_definition"]

log = logging.getLogger("specdoctor.mcp")

HINTS_URI = "specdoctor://host/hints"
REPORT_URI = "specdoctor://report/latest"


def runs_dir() -> Path:
    """Where reports are looked for: `$SPECDOCTOR_RUNS`, else `./specdoctor-runs` (the CLI's default)."""
    return Path(os.environ.get("SPECDOCTOR_RUNS") or "specdoctor-runs")


def latest_report(root: Path | None = None) -> Path | None:
    """The newest `*/report.json` under the runs folder (by modification time), or None."""
    root = root or runs_dir()
    found = [p for p in root.glob("*/report.json") if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _prefix_refs(node: Any, prefix: str) -> Any:
    if isinstance(node, dict):
        return {k: (v.replace("#/$defs/", f"#/$defs/{prefix}", 1) if k == "$ref" and isinstance(v, str)
                    else _prefix_refs(v, prefix)) for k, v in node.items()}
    if isinstance(node, list):
        return [_prefix_refs(v, prefix) for v in node]
    return node


def output_schema(spec: ToolSpec) -> dict[str, Any]:
    """The ToolResult envelope's JSON schema with `output` typed as the tool's output model (or null)."""
    envelope = copy.deepcopy(ToolResult.model_json_schema(mode="serialization"))
    out = _prefix_refs(spec.output_model.model_json_schema(mode="serialization"), "out_")
    defs = envelope.setdefault("$defs", {})
    defs.update({f"out_{k}": v for k, v in out.pop("$defs", {}).items()})
    out.pop("title", None)
    envelope["properties"]["output"] = {"anyOf": [out, {"type": "null"}], "default": None,
                                        "description": f"{spec.output_model.__name__} when status is ok."}
    return envelope


def tool_definition(spec: ToolSpec) -> types.Tool:
    """One registry entry as an MCP Tool: input schema from the pydantic model, effect as annotations."""
    schema = copy.deepcopy(spec.input_model.model_json_schema())
    schema.pop("title", None)
    schema["type"] = "object"
    schema.setdefault("properties", {})
    read = spec.effect == "read"
    return types.Tool(
        name=spec.name, title=spec.summary_line[:120], description=f"[{spec.effect}] {spec.description}",
        input_schema=schema, output_schema=output_schema(spec),
        annotations=types.ToolAnnotations(read_only_hint=read, destructive_hint=not read, open_world_hint=False),
    )


def _instructions(client: Client) -> str:
    h = client.hints
    lines = [f"specdoctor {__version__}: typed tools that diagnose speculative-decoding (EAGLE-3 on SGLang) "
             f"performance regressions on host {client.host.name}."]
    if h.repo:
        lines.append(f"The SGLang checkout on this host is {h.repo} (pass it as `repo`).")
    if h.python:
        lines.append(f"Its python is {h.python}.")
    if h.launch:
        lines.append(f"The server's launch line: {h.launch}")
    lines.append(f"Read {HINTS_URI} for these hints as JSON and {REPORT_URI} for the newest report.")
    lines.append("Mutating/disruptive tools are exposed; the tree is backed up before the first mutation and "
                 "restored, and started servers stopped, when this server exits." if client.allow_mutations else
                 "Only read-only tools are exposed (start with --allow-mutations for the others).")
    return " ".join(lines)


class ToolCancelled(BaseException):
    """Raised inside a running tool (at its next progress message) when the MCP client cancelled the call or
    went away. A BaseException, like KeyboardInterrupt: a tool's `except Exception` cannot swallow it, its
    `finally` blocks (stop the trial server, put the trial tree back) still run."""


def summary_text(res: ToolResult) -> str:
    """The short text an agent reads first: status, the one-line summary (the key numbers), the error."""
    lines = [f"[{res.status}] {res.summary}"]
    if res.error and res.error not in res.summary:
        lines.append(f"error: {res.error[:500]}")
    if res.evidence:
        lines.append(f"({len(res.evidence)} host commands as evidence; the full result is the structured content)")
    return "\n".join(lines)


def _call_result(res: ToolResult) -> types.CallToolResult:
    data = res.model_dump(mode="json")
    return types.CallToolResult(content=[types.TextContent(text=summary_text(res))], structured_content=data,
                                is_error=res.status == "error")


class _Call:
    """One tool call run in a worker thread: relays its progress lines to the MCP client and stops it at the
    next one once the call is cancelled (a `notifications/cancelled`, or the client gone)."""

    def __init__(self, ctx: Any, name: str):
        self.ctx, self.name = ctx, name
        self.cancel = threading.Event()
        self.sent = 0

    def progress(self, message: str) -> None:  # runs in the worker thread
        if self.cancel.is_set():
            raise ToolCancelled(f"{self.name} cancelled by the MCP client")
        self.sent += 1
        try:  # a no-op when the client asked for no progress (no progressToken)
            anyio.from_thread.run(self.ctx.session.report_progress, float(self.sent), None, message[:500])
        except Exception:  # the client may be gone: the message is lost, the call goes on (or stops above)
            log.debug("progress for %s not delivered", self.name)

    async def watch(self) -> None:
        """Sleep beside the call: the SDK tears the request's scope down on `notifications/cancelled` and when
        the connection ends, which cancels this task too, and that flags the call (the thread sees it)."""
        try:
            await anyio.sleep_forever()
        finally:
            self.cancel.set()


def _stop_after_cancel(client: Client, name: str) -> None:
    """After a cancelled mutate/disrupt call (its partial work is unknown): stop the servers this session
    started and put backed-up trees back (verified). A cancelled read-only call needs none of this; when the
    client has left, `Client.close()` does the same for the whole session."""
    names = {s.name for s in client.registry.all()}
    ctx = ToolContext(host=client.host, run_id=client.run_id, auto_approve=True)
    steps: list[tuple[str, dict[str, Any]]] = [("stop_server", {})] if "stop_server" in names else []
    if "restore_worktree" in names:
        steps += [("restore_worktree", {"repo": repo, "backup_id": bid}) for repo, bid in client.backups.items()]
    for tool, args in steps:
        try:
            r = client.registry.call(ctx, tool, args)
            log.info("after cancelling %s: %s %s", name, tool, r.summary)
        except Exception as exc:  # keep going: each repo still deserves its restore
            log.warning("after cancelling %s: %s failed: %s", name, tool, exc)


def build_server(client: Client) -> Server[Any]:
    """A low-level MCP Server bound to one Client (its host, its effects, its safety net)."""
    specs = {s.name: s for s in client.tools()}
    definitions = [tool_definition(s) for s in specs.values()]
    # Calls wait for one another on the Client's lock; each one's progress lines go to its own _Call, found
    # through the worker thread that runs it (a shared hook swapped per call would cross them).
    current = threading.local()

    def route_progress(message: str) -> None:
        call = getattr(current, "call", None)
        if call is not None:
            call.progress(message)

    client.ctx.progress = route_progress

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=definitions)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in specs:
            why = " (a mutating tool: start the server with --allow-mutations)" if params.name in {
                s.name for s in client.registry.all()} else ""
            raise MCPError(INVALID_PARAMS, f"unknown tool {params.name!r}{why}")
        log.debug("call %s %s", params.name, json.dumps(params.arguments or {})[:300])
        call = _Call(ctx, params.name)

        def run() -> ToolResult:
            current.call = call  # a tool reports progress from the thread that runs it: this one
            try:
                return client.call(params.name, dict(params.arguments or {}))
            except UsageError as exc:
                return ToolResult(tool=params.name, status="error", summary=str(exc), error=str(exc))
            except ToolCancelled as exc:
                return ToolResult(tool=params.name, status="error", summary=str(exc), error="cancelled")
            finally:
                current.call = None

        async with anyio.create_task_group() as tg:
            tg.start_soon(call.watch)
            try:
                res = await anyio.to_thread.run_sync(run)  # not abandoned on cancel: the thread winds down first
            finally:
                if call.cancel.is_set():
                    log.info("%s cancelled by the client (or the client left) after %d progress messages",
                             params.name, call.sent)
                    if specs[params.name].effect != "read":
                        with anyio.CancelScope(shield=True):
                            await anyio.to_thread.run_sync(_stop_after_cancel, client, params.name)
                tg.cancel_scope.cancel()
        log.debug("done %s: %s %s", params.name, res.status, res.summary)
        return _call_result(res)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[
            types.Resource(uri=HINTS_URI, name="host-hints", mime_type="application/json",
                           description="What the host says about itself: repo path, python, launch line, claims."),
            types.Resource(uri=REPORT_URI, name="latest-report", mime_type="application/json",
                           description="The newest report.json under $SPECDOCTOR_RUNS or ./specdoctor-runs."),
        ])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == HINTS_URI:
            text = json.dumps({"host": client.host.name, "run_id": client.run_id,
                               "allow_mutations": client.allow_mutations, **client.hints.model_dump(mode="json")})
        elif uri == REPORT_URI:
            path = latest_report()
            if path is None:
                raise MCPError(INVALID_PARAMS, f"no report.json under {runs_dir().resolve()} yet")
            text = path.read_text()
        else:
            raise MCPError(INVALID_PARAMS, f"unknown resource {uri}")
        return types.ReadResourceResult(contents=[
            types.TextResourceContents(uri=uri, mime_type="application/json", text=text)])

    return Server("specdoctor", version=__version__, instructions=_instructions(client),
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_read_resource=read_resource)


async def _serve(client: Client) -> None:
    server = build_server(client)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point fd 1 at stderr for a while: processes started meanwhile (a simulated host's server) inherit
    stderr, not the protocol pipe. `stdio_server` does the same while serving."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def run_mcp(host: str, *, allow_mutations: bool = False, accept_new_host_key: bool = False,
            audit: Path | None = None, known_hosts: str | None = None,
            identity_files: list[str] | None = None) -> None:
    """`specdoctor mcp`: open the host (stdout kept clean), then serve until the MCP client leaves."""
    from specdoctor.host import AuditLog, open_host

    with stdout_to_stderr():
        opened = open_host(host, audit=AuditLog(audit) if audit else None, accept_new_host_key=accept_new_host_key,
                           known_hosts=known_hosts, identity_files=identity_files)
        client = connect(opened, allow_mutations=allow_mutations)
    log.info("serving %d tools for %s (%s)", len(client.tools()), client.host.name,
             "mutations allowed" if allow_mutations else "read-only")
    try:
        serve_stdio(client)
    finally:
        opened.close()  # connect() was handed an open Host: closing it stays ours


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def serve_stdio(client: Client) -> None:
    """Serve MCP on stdin/stdout until the client disconnects, then run the Client's safety net.

    MCP clients close stdin, wait ~2 s, then SIGTERM the process group and SIGKILL ~2 s later: SIGTERM
    while serving ends the loop (cleanup still runs); during cleanup it is ignored so the restore finishes.
    """
    main = threading.current_thread() is threading.main_thread()
    if main:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        anyio.run(_serve, client)
    finally:
        if main:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for row in client.close():
            log.info("cleanup %s %s: %s %s", row.tool, row.repo or "", row.status, row.summary)
