"""The optional LLM advisor: any OpenAI-compatible endpoint; structured answers, marked as LLM-made.

It sees the run's state and returns typed suggestions. It never holds a Host: in `explore` mode it asks
for read-only tools by name and the engine runs them. It never replaces a measured number.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from specdoctor.diagnosis import PlanAction, Verdict
from specdoctor.host.redact import redact_text
from specdoctor.models import Claims, MeasureFacts
from specdoctor.models import StateReader as StateView

__all__ = ["LLMAdvisor", "Narrative", "TriageGuess", "TriageGuesses"]

log = logging.getLogger("specdoctor.advisor")


class Narrative(BaseModel):
    """Prose for the report's summary; numbers in it must come from the facts given."""

    summary: str = Field(description="Two to five sentences for the report's opening.")
    caveats: list[str] = Field(default_factory=list)


class TriageGuess(BaseModel):
    path: str
    subsystem: str
    on_hot_path: bool | None = None
    reason: str = ""


class TriageGuesses(BaseModel):
    files: list[TriageGuess] = Field(default_factory=list)


def _decoded_arguments(name: str, args: Any) -> Any:
    """Strict-schema arguments (maps as key/value entries) back to what the tool takes."""
    from specdoctor.toolkit import registry
    from specdoctor.toolkit.exports import openai_arguments

    if not isinstance(args, dict) or name not in {s.name for s in registry.all()}:
        return args
    return openai_arguments(registry.get(name), args)


class LLMAdvisor:
    """Talks to `base_url` (OpenAI-compatible) with `model`; the key comes from OPENAI_API_KEY."""

    def __init__(self, model: str, base_url: str | None = None, client: Any = None, max_tool_steps: int = 6):
        from openai import OpenAI

        self.model = model
        self.max_tool_steps = max_tool_steps
        self.client = client or OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY") or "unused",
                                       max_retries=1, timeout=60)

    def _structured(self, model_cls: type[BaseModel], system: str, user: str) -> BaseModel | None:
        """One structured-output request (the SDK sends `model_cls` as a strict JSON schema and parses the
        answer into it). A refusal, a cut or filtered answer, or one that does not parse is "no advice"."""
        from openai import LengthFinishReasonError, OpenAIError

        completions = self.client.chat.completions
        parse = getattr(completions, "parse", None) or self.client.beta.chat.completions.parse  # older SDKs
        try:
            resp = parse(model=self.model, response_format=model_cls, temperature=0,
                         messages=[{"role": "system", "content": system},
                                   {"role": "user", "content": redact_text(user)}])
        except (ValidationError, ValueError, LengthFinishReasonError) as exc:
            log.info("LLM answer for %s did not parse: %s", model_cls.__name__, str(exc)[:200])
            return None
        except OpenAIError as exc:  # ContentFilterFinishReasonError is one; connection errors are others
            if type(exc).__name__ == "ContentFilterFinishReasonError":
                log.info("LLM answer for %s was filtered", model_cls.__name__)
                return None
            raise
        message = resp.choices[0].message
        if getattr(message, "refusal", None):
            log.info("LLM refused %s: %s", model_cls.__name__, str(message.refusal)[:200])
            return None
        parsed = message.parsed
        return parsed if isinstance(parsed, model_cls) else None

    def narrate(self, view: StateView, verdict: Verdict, plan: list[PlanAction]) -> Narrative | None:
        measure, claims = view.fact("measure", MeasureFacts), view.fact("claims", Claims)
        facts = {"verdict": verdict.model_dump(),
                 "measure": measure.model_dump(mode="json") if measure is not None else None,
                 "claims": claims.model_dump(mode="json") if claims is not None else None,
                 "plan": [p.title for p in plan]}
        out = self._structured(Narrative, "You summarise a performance investigation for engineers. Use only "
                               "numbers present in the facts. Answer as JSON.", json.dumps(facts, default=str)[:20000])
        return out if isinstance(out, Narrative) else None

    def triage_unknown(self, files: list[dict[str, Any]]) -> list[TriageGuess]:
        if not files:
            return []
        out = self._structured(TriageGuesses, "Classify each changed SGLang file by subsystem (attention backend, "
                               "MoE routing, communicator, speculative worker, model file, scheduler/engine, "
                               "benchmarks, logging). Answer as JSON.", json.dumps(files, default=str)[:20000])
        return out.files if isinstance(out, TriageGuesses) else []

    def refine(self, view: StateView, verdict: Verdict, plan: list[PlanAction]):
        """Called by the conclude action: the rules' verdict stays; the LLM adds narrative (marked)."""
        return verdict, plan

    def explore(self, view: StateView, call_read_tool, schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Let the model pick read-only tools within the step budget; returns [{tool, args, summary}]."""
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You investigate a speculative-decoding slowdown. Call read-only tools "
                                          "to gather evidence, then answer with a short finding."},
            {"role": "user", "content": redact_text(json.dumps({"facts": view.facts, "params": view.params.to_json()},
                                                               default=str)[:20000])}]
        trail: list[dict[str, Any]] = []
        for _ in range(self.max_tool_steps):
            resp = self.client.chat.completions.create(model=self.model, messages=messages,  # type: ignore[arg-type]
                                                       tools=schemas, temperature=0)  # type: ignore[arg-type]
            msg = resp.choices[0].message
            calls = msg.tool_calls or []
            if not calls:
                if msg.content:
                    trail.append({"tool": None, "args": {}, "summary": redact_text(msg.content)})
                break
            messages.append({"role": "assistant", "content": msg.content or "",
                             "tool_calls": [c.model_dump() for c in calls]})
            for c in calls:
                fn = getattr(c, "function", None)  # custom (non-function) tool calls are not ours to run
                name = getattr(fn, "name", "") or ""
                try:
                    args = json.loads(getattr(fn, "arguments", None) or "{}")
                except json.JSONDecodeError:
                    args = {}
                args = _decoded_arguments(name, args)
                result = call_read_tool(name, args)
                trail.append({"tool": name, "args": args, "summary": result.summary,
                              "status": result.status})
                messages.append({"role": "tool", "tool_call_id": c.id,
                                 "content": redact_text(json.dumps(result.model_dump(mode="json"),
                                                                   default=str))[:8000]})
        return trail
