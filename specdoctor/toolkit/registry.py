"""The tool registry: plain typed functions, registered once, called with validation and evidence."""

from __future__ import annotations

import difflib
import inspect
import threading
import time
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, cast

from pydantic import BaseModel, ValidationError

from specdoctor.errors import (
    HostError,
    NoData,
    ResultShapeError,
    SpecdoctorError,
    ToolFailed,
    ToolRetry,
    Unresolved,
    UsageError,
)
from specdoctor.host.redact import redact_text
from specdoctor.toolkit.builtin import builtin_tools
from specdoctor.toolkit.context import ApprovalRequest, ToolContext
from specdoctor.toolkit.result import ToolResult

__all__ = ["Effect", "ResultShapeError", "ToolMark", "ToolSpec", "ToolRegistry", "registry", "tool", "tool_mark"]

Effect = Literal["read", "mutate", "disrupt"]
M = TypeVar("M", bound=BaseModel)
InT = TypeVar("InT", bound=BaseModel)
OutT = TypeVar("OutT", bound=BaseModel)


def first_error(exc: ValidationError) -> str:
    """`field.path: message` of a validation error's first problem, in one line."""
    e = exc.errors()[0]
    return f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"


@dataclass(frozen=True)
class ToolSpec:
    """A registered tool: `fn(ctx, args: input_model) -> output_model`."""

    name: str
    fn: Callable[[ToolContext, Any], BaseModel]
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    effect: Effect
    description: str

    @property
    def summary_line(self) -> str:
        return self.description.strip().splitlines()[0] if self.description.strip() else self.name


class ToolRegistry:
    """Name → ToolSpec. Every export (OpenAI, LangChain, MCP) reads from here."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}

    def register(self, fn: Callable, *, effect: Effect, name: str | None = None) -> ToolSpec:
        hints = typing.get_type_hints(fn)
        params = list(inspect.signature(fn).parameters)
        if len(params) != 2:
            raise UsageError(f"tool {fn.__name__} must take (ctx, args), got {params}")
        input_model = hints.get(params[1])
        output_model = hints.get("return")
        if not (isinstance(input_model, type) and issubclass(input_model, BaseModel)):
            raise UsageError(f"tool {fn.__name__}: second parameter must be annotated with a pydantic model")
        if not (isinstance(output_model, type) and issubclass(output_model, BaseModel)):
            raise UsageError(f"tool {fn.__name__}: return type must be a pydantic model")
        if not (fn.__doc__ or "").strip():
            raise UsageError(f"tool {fn.__name__} needs a docstring (it becomes the description)")
        tool_name = name or fn.__name__
        if tool_name in self._tools and self._tools[tool_name].fn is not fn:
            raise UsageError(f"tool {tool_name} registered twice")
        spec = ToolSpec(tool_name, fn, input_model, output_model, effect, inspect.cleandoc(fn.__doc__ or ""))
        self._tools[tool_name] = spec
        return spec

    def register_declared(self, fn: Callable) -> ToolSpec:
        """Register a function declared with `@tool`, with the effect and name it declares."""
        mark = tool_mark(fn)
        if mark is None:
            raise UsageError(f"{getattr(fn, '__name__', fn)!r} is not declared with @tool, so it is not a tool")
        return self.register(fn, effect=mark.effect, name=mark.name)

    def unregister(self, name: str) -> None:
        """Remove a tool (tests and embedders that register temporary tools clean up with this)."""
        self._tools.pop(name, None)

    def get(self, name: str) -> ToolSpec:
        load_builtin_tools()
        try:
            return self._tools[name]
        except KeyError:
            raise UsageError(f"unknown tool {name!r} (see `specdoctor tools list`)") from None

    def all(self, effects: Iterable[Effect] | None = None) -> list[ToolSpec]:
        load_builtin_tools()
        allowed = set(effects) if effects is not None else None
        return [t for t in sorted(self._tools.values(), key=lambda t: t.name) if allowed is None or t.effect in allowed]

    def output_model(self, name: str) -> type[BaseModel]:
        """The output model the tool `name` was registered with (what every reader validates against)."""
        return self.get(name).output_model

    def typed_output(self, result: ToolResult, model: type[M], *, where: str | None = None,
                     unresolved: bool = False) -> M | None:
        """`result.output` as `model`, validated against the registry's output model for `result.tool`.

        None when the call did not succeed (or, with `unresolved=True`, was not ok/unresolved) or has no
        output. Raises `ResultShapeError` naming `where` (a step id), the tool and the field when the tool
        does not return `model` or the stored output does not validate.
        """
        at = f"step {where!r}" if where else "result"
        try:
            spec = self.get(result.tool)
        except UsageError:
            raise ResultShapeError(f"{at}: tool {result.tool!r} is not registered, so its result cannot be read "
                                   f"as {model.__name__}") from None
        if not issubclass(spec.output_model, model):
            raise ResultShapeError(f"{at}: tool {result.tool} returns {spec.output_model.__name__}, "
                                   f"not {model.__name__}")
        if result.output is None or not (result.ok or (unresolved and result.status == "unresolved")):
            return None
        try:  # a reader's own copy, made from the JSON (five times cheaper than a deep copy of the model)
            out = spec.output_model.model_validate(result.output)
        except ValidationError as exc:
            raise ResultShapeError(f"{at} (tool {result.tool}): output field {first_error(exc)}") from None
        assert isinstance(out, model)
        return out

    def call_fn(self, ctx: ToolContext, fn: Callable[[ToolContext, InT], OutT], args: InT | dict[str, Any], *,
                where: str | None = None, unresolved: bool = False) -> Called[OutT]:
        """Call the tool `fn` with its typed input (or the input's JSON, validated here: a bad value is the call's
        `error` result, as for any caller): `call`'s approval and evidence, and its output as the tool's own model
        (with `unresolved=True`, an unresolved call's partial output too)."""
        name = tool_name(fn)
        result = self.call(ctx, name, args)
        model = cast("type[OutT]", self.get(name).output_model)
        own = result.typed_value() if result.ok else None  # the caller's own call: the tool's object itself
        if isinstance(own, model):
            return Called(result, own)
        return Called(result, self.typed_output(result, model, where=where or name, unresolved=unresolved))

    def call(self, ctx: ToolContext, name: str, args: BaseModel | dict[str, Any] | None = None) -> ToolResult:
        """Validate, ask approval for mutate/disrupt, run, and return a ToolResult with evidence.

        Invalid arguments come back as status `error` and nothing runs. Host/infrastructure failures
        (unreachable, connection lost) propagate: the engine decides what they mean for the run.
        """
        spec = self.get(name)
        t0 = time.perf_counter()
        unknown = _unknown_keys(spec.input_model, args) if isinstance(args, dict) else []
        if unknown:  # a misspelt key would silently fall back to a default (another port: another server)
            known = ", ".join(sorted(spec.input_model.model_fields))
            msg = "; ".join(f"{k}: unknown argument" + (f" (did you mean {m[0]!r}?)" if (
                m := difflib.get_close_matches(k, list(spec.input_model.model_fields), 1)) else "") for k in unknown)
            return ToolResult(tool=name, status="error", summary=f"invalid arguments: {msg}; {name} takes {known}",
                              error=msg, retryable=True)
        try:
            parsed = args if isinstance(args, spec.input_model) else spec.input_model.model_validate(
                args.model_dump() if isinstance(args, BaseModel) else (args or {}))
        except ValidationError as exc:
            msg = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'args'}: {e['msg']}" for e in exc.errors())
            return ToolResult(tool=name, status="error", summary=f"invalid arguments: {msg}", error=msg,
                              retryable=True)
        if spec.effect != "read" and not ctx.auto_approve:
            request = ApprovalRequest(name, spec.effect, parsed.model_dump(mode="json"), spec.summary_line)
            if ctx.approve is None or not ctx.approve(request):
                why = "no approver" if ctx.approve is None else "declined"
                return ToolResult(tool=name, status="needs_approval",
                                  summary=f"{name} ({spec.effect}) needs approval ({why}); nothing was run")
        mark = ctx.host.audit.mark()
        status: str = "ok"
        output: BaseModel | None = None
        error = None
        retryable = False
        try:
            output = spec.fn(ctx, parsed)
            summary = _summary(output, spec)
        except NoData as exc:
            status, summary = "no_data", str(exc)
        except Unresolved as exc:
            status, summary, error = "unresolved", str(exc), str(exc)
            output = exc.output if isinstance(exc.output, BaseModel) else None
        except ToolRetry as exc:
            status, summary, error, retryable = "error", str(exc), str(exc), True
        except HostError:
            raise
        except (ToolFailed, SpecdoctorError) as exc:
            status, summary, error = "error", str(exc), str(exc)
        result = ToolResult(
            tool=name,
            status=status,  # type: ignore[arg-type]
            summary=redact_text(summary),
            output=output.model_dump(mode="json") if output is not None else None,
            error=redact_text(error) if error else None,
            retryable=retryable,
            evidence=ctx.host.audit.since(mark),
            seconds=round(time.perf_counter() - t0, 4),
        )
        if output is not None:
            result.keep_typed(output)
        return result


@dataclass(frozen=True)
class Called(Generic[OutT]):
    """One call of a tool through its function: the whole `ToolResult` (status, summary, evidence, the JSON for the
    record) and the tool's own output model (None when the call did not succeed)."""

    result: ToolResult
    output: OutT | None

    @property
    def ok(self) -> bool:
        return self.result.ok


def tool_name(fn: Callable[..., Any]) -> str:
    """The name `fn` is registered under (its `@tool` name, else the function's)."""
    mark = tool_mark(fn)
    return (mark.name if mark is not None else None) or fn.__name__


def _summary(output: BaseModel, spec: ToolSpec) -> str:
    fn = getattr(output, "summary_line", None)
    if callable(fn):
        return str(fn())
    return f"{spec.name}: ok"


registry = ToolRegistry()


TOOL_MARK = "__specdoctor_tool__"
"""The attribute `@tool` sets on a function: its `ToolMark`."""


@dataclass(frozen=True)
class ToolMark:
    """What `@tool` declares about a function: its effect and, when not the function's name, its tool name."""

    effect: Effect
    name: str | None = None


def tool(effect: Effect = "read", name: str | None = None) -> Callable[[Callable], Callable]:
    """Decorator: declare a typed tool's effect (and name). It registers nothing: the registry registers what the
    catalogue (`specdoctor/tools/catalogue.py`) lists, so importing a module never changes the registry."""

    def deco(fn: Callable) -> Callable:
        setattr(fn, TOOL_MARK, ToolMark(effect, name))
        return fn

    return deco


def tool_mark(fn: Callable) -> ToolMark | None:
    """The `@tool` declaration of `fn`, None when it has none."""
    mark = getattr(fn, TOOL_MARK, None)
    return mark if isinstance(mark, ToolMark) else None


_loaded = False
_loading = threading.RLock()  # threads (a fleet survey probes hosts at once) must never see a half-built registry


def load_builtin_tools() -> None:
    """Register the built-in catalogue's tools (`specdoctor.tools.catalogue.TOOLS`) once, on first use. Marked
    loaded only once every tool is in: a concurrent first use waits on the lock instead of finding none."""
    global _loaded
    if _loaded:
        return
    with _loading:
        if not _loaded:
            for fn in builtin_tools():
                registry.register_declared(fn)
            _loaded = True


def _unknown_keys(model: type[BaseModel], args: dict[str, Any]) -> list[str]:
    """Keys that name no field (nor an alias) of the tool's input model, unless the model takes extra keys."""
    if model.model_config.get("extra") == "allow":
        return []
    names = set(model.model_fields) | {f.alias for f in model.model_fields.values() if f.alias} \
        | {f.validation_alias for f in model.model_fields.values() if isinstance(f.validation_alias, str)}
    return [k for k in args if k not in names]
