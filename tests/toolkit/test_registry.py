"""The tool registry: signature checks at registration, validation, approval, outcomes and evidence."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from specdoctor.errors import HostUnreachable, NoData, ToolFailed, ToolRetry, Unresolved, UsageError
from specdoctor.host import MockHost
from specdoctor.toolkit import ApprovalRequest, ToolContext, ToolRegistry, registry


class EchoIn(BaseModel):
    """Arguments of the test tools."""

    text: str = Field(description="What to echo.")
    times: int = Field(default=1, ge=1, le=3)


class EchoOut(BaseModel):
    """What the test tools return."""

    lines: list[str]

    def summary_line(self) -> str:
        return f"echoed {len(self.lines)} line(s)"


def _echo(ctx: ToolContext, args: EchoIn) -> EchoOut:
    """Echo text on the host, `times` times."""
    return EchoOut(lines=[ctx.host.run(["echo", args.text]).stdout.strip() for _ in range(args.times)])


def _handler(cmd: Any, env: dict[str, str], cwd: str | None) -> tuple[int, str, str]:
    if isinstance(cmd, list) and cmd[0] == "echo":
        return 0, " ".join(cmd[1:]) + "\n", ""
    return 1, "", "unexpected\n"


@pytest.fixture
def reg() -> ToolRegistry:
    r = ToolRegistry()
    r.register(_echo, effect="read", name="echo")
    r.register(_echo, effect="mutate", name="echo_mutate")
    r.register(_echo, effect="disrupt", name="echo_disrupt")
    return r


@pytest.fixture
def host() -> MockHost:
    return MockHost(_handler)


def _bad_no_args(ctx: ToolContext) -> EchoOut:
    """Doc."""
    raise AssertionError


def _bad_three(ctx: ToolContext, args: EchoIn, extra: int) -> EchoOut:
    """Doc."""
    raise AssertionError


def _bad_untyped(ctx, args):  # type: ignore[no-untyped-def]
    """Doc."""
    raise AssertionError


def _bad_dict_input(ctx: ToolContext, args: dict) -> EchoOut:
    """Doc."""
    raise AssertionError


def _bad_return(ctx: ToolContext, args: EchoIn) -> dict:
    """Doc."""
    raise AssertionError


def _bad_no_doc(ctx: ToolContext, args: EchoIn) -> EchoOut:
    raise AssertionError


@pytest.mark.parametrize(
    ("fn", "why"),
    [(_bad_no_args, "must take"), (_bad_three, "must take"), (_bad_untyped, "pydantic model"),
     (_bad_dict_input, "pydantic model"), (_bad_return, "return type"), (_bad_no_doc, "docstring")],
)
def test_bad_signatures_are_rejected_at_registration(fn: Any, why: str) -> None:
    r = ToolRegistry()
    with pytest.raises(UsageError, match=why):
        r.register(fn, effect="read")
    assert r._tools == {}


def test_a_name_cannot_be_taken_twice(reg: ToolRegistry) -> None:
    def echo(ctx: ToolContext, args: EchoIn) -> EchoOut:
        """Another echo."""
        raise AssertionError

    with pytest.raises(UsageError, match="registered twice"):
        reg.register(echo, effect="read")
    assert reg.register(_echo, effect="read", name="echo").fn is _echo  # re-registering the same fn is fine


def test_spec_is_derived_from_the_function(reg: ToolRegistry) -> None:
    spec = reg.get("echo")
    assert (spec.input_model, spec.output_model, spec.effect) == (EchoIn, EchoOut, "read")
    assert spec.summary_line == "Echo text on the host, `times` times."
    assert [s.name for s in reg.all(["mutate", "disrupt"])] == ["echo_disrupt", "echo_mutate"]
    with pytest.raises(UsageError, match="unknown tool 'nope'"):
        reg.get("nope")


def test_ok_call_returns_output_summary_and_evidence(reg: ToolRegistry, host: MockHost) -> None:
    host.run(["echo", "before"])  # not part of the call's evidence
    res = reg.call(ToolContext(host=host), "echo", {"text": "hi", "times": 2})
    assert (res.status, res.ok, res.summary) == ("ok", True, "echoed 2 line(s)")
    assert res.output == {"lines": ["hi", "hi"]}
    assert [e.command for e in res.evidence] == ["echo hi", "echo hi"]
    assert all(e.exit == 0 and e.stdout_tail == "hi\n" for e in res.evidence)


def test_args_may_be_a_model_instance(reg: ToolRegistry, host: MockHost) -> None:
    assert reg.call(ToolContext(host=host), "echo", EchoIn(text="x")).output == {"lines": ["x"]}


@pytest.mark.parametrize("args", [{}, {"text": 5}, {"text": "x", "times": 9}, {"text": "x", "times": "many"}])
def test_invalid_args_are_an_error_result_and_nothing_runs(reg: ToolRegistry, host: MockHost,
                                                           args: dict[str, Any]) -> None:
    res = reg.call(ToolContext(host=host, auto_approve=True), "echo_disrupt", args)
    assert (res.status, res.retryable) == ("error", True)
    assert res.summary.startswith("invalid arguments:") and res.error
    assert ("text" in res.error) or ("times" in res.error)
    assert host.calls == [] and res.evidence == []


def test_an_unknown_key_is_an_error_that_names_the_nearest_field_and_nothing_runs(reg: ToolRegistry,
                                                                                  host: MockHost) -> None:
    # a misspelt key must not fall back to the field's default (for a port: another server)
    res = reg.call(ToolContext(host=host, auto_approve=True), "echo_disrupt", {"text": "x", "tiems": 2})
    assert (res.status, res.retryable) == ("error", True)
    assert "tiems: unknown argument (did you mean 'times'?)" in res.summary and "takes text, times" in res.summary
    assert host.calls == [] and res.evidence == []
    # must not fire: known keys pass
    assert reg.call(ToolContext(host=host, auto_approve=True), "echo_disrupt", {"text": "x", "times": 2}).ok


@pytest.mark.parametrize("name", ["echo_mutate", "echo_disrupt"])
def test_mutating_calls_without_an_approver_need_approval(reg: ToolRegistry, host: MockHost, name: str) -> None:
    res = reg.call(ToolContext(host=host), name, {"text": "x"})
    assert res.status == "needs_approval" and "no approver" in res.summary
    assert host.calls == []


def test_declined_approval_runs_nothing(reg: ToolRegistry, host: MockHost) -> None:
    asked: list[ApprovalRequest] = []

    def no(req: ApprovalRequest) -> bool:
        asked.append(req)
        return False

    res = reg.call(ToolContext(host=host, approve=no), "echo_disrupt", {"text": "x"})
    assert res.status == "needs_approval" and "declined" in res.summary
    assert host.calls == []
    assert asked == [ApprovalRequest("echo_disrupt", "disrupt", {"text": "x", "times": 1},
                                     "Echo text on the host, `times` times.")]


def test_granted_approval_runs(reg: ToolRegistry, host: MockHost) -> None:
    res = reg.call(ToolContext(host=host, approve=lambda req: req.tool == "echo_mutate"), "echo_mutate",
                   {"text": "y"})
    assert res.status == "ok" and host.calls == [["echo", "y"]]


def test_auto_approve_never_asks(reg: ToolRegistry, host: MockHost) -> None:
    def ask(req: ApprovalRequest) -> bool:
        raise AssertionError("must not be asked under auto_approve")

    res = reg.call(ToolContext(host=host, auto_approve=True, approve=ask), "echo_disrupt", {"text": "z"})
    assert res.status == "ok"


def test_read_tools_never_ask(reg: ToolRegistry, host: MockHost) -> None:
    res = reg.call(ToolContext(host=host, approve=lambda req: False), "echo", {"text": "r"})
    assert res.status == "ok"


def _outcome_tool(kind: str) -> Any:
    def fn(ctx: ToolContext, args: EchoIn) -> EchoOut:
        """Raises the outcome named in args.text after running one command."""
        ctx.host.run(["echo", "HF_TOKEN=hf_secretsecret123"])
        if kind == "nodata":
            raise NoData("no server is running")
        if kind == "unresolved":
            raise Unresolved("patch conflict", output=EchoOut(lines=["partial"]))
        if kind == "retry":
            raise ToolRetry("port 1 is not a server; try 30000")
        if kind == "failed":
            raise ToolFailed("token hf_secretsecret123 rejected")
        if kind == "usage":
            raise UsageError("bad developer input")
        raise HostUnreachable("cannot connect to gpu-box")

    fn.__name__ = f"outcome_{kind}"
    return fn


@pytest.mark.parametrize(
    ("kind", "status", "retryable"),
    [("nodata", "no_data", False), ("unresolved", "unresolved", False), ("retry", "error", True),
     ("failed", "error", False), ("usage", "error", False)],
)
def test_domain_outcomes_become_statuses_with_evidence(host: MockHost, kind: str, status: str,
                                                       retryable: bool) -> None:
    r = ToolRegistry()
    r.register(_outcome_tool(kind), effect="read")
    res = r.call(ToolContext(host=host), f"outcome_{kind}", {"text": "x"})
    assert (res.status, res.retryable) == (status, retryable)
    assert [e.command for e in res.evidence] == ["echo HF_TOKEN=***REDACTED***"]
    assert "hf_secretsecret123" not in res.model_dump_json()
    if kind == "unresolved":
        assert res.output == {"lines": ["partial"]}


def test_host_errors_propagate(host: MockHost) -> None:
    r = ToolRegistry()
    r.register(_outcome_tool("host"), effect="read")
    with pytest.raises(HostUnreachable):
        r.call(ToolContext(host=host), "outcome_host", {"text": "x"})


def test_builtin_registry_has_host_facts() -> None:
    spec = registry.get("host_facts")
    assert spec.effect == "read" and spec.description


def test_context_paths_and_progress(host: MockHost) -> None:
    said: list[str] = []
    h = MockHost(lambda cmd, env, cwd: "/home/u\n" if isinstance(cmd, str) else "")
    ctx = ToolContext(host=h, run_id="r1", progress=said.append)
    ctx.say("step 1")
    assert said == ["step 1"]
    assert (ctx.state_dir, ctx.run_dir) == ("/home/u/.specdoctor", "/home/u/.specdoctor/runs/r1")
    assert ctx.sh("a b", "c") == "'a b' c"
