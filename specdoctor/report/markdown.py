"""report.md and commands.md: the document as GitHub-flavoured markdown; the command log lives in commands.md."""

from __future__ import annotations

import re

from specdoctor.host.redact import redact_text
from specdoctor.report import fmt
from specdoctor.report.doc import (
    COMMAND_HEAD,
    LLM_MARK,
    Block,
    Bullets,
    Code,
    Details,
    Document,
    Ev,
    Figure,
    Para,
    Quote,
    Span,
    Table,
    build,
    command_rows,
)
from specdoctor.report.model import Report

__all__ = ["render_markdown", "render_commands_markdown", "evidence_steps", "step_anchor", "COMMANDS_FILE"]

COMMANDS_FILE = "commands.md"
_OUTPUT_LINES = 20


def step_anchor(step: str | None) -> str:
    """The anchor of a step's section in commands.md (and of its evidence block in report.html)."""
    return "step-" + re.sub(r"[^a-z0-9]+", "-", (step or "other").lower()).strip("-")


def _code(text: str) -> str:
    """Inline code that survives backticks inside it."""
    text = redact_text(text).replace("\n", " ")
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _text(text: str) -> str:
    """Plain text with markdown's active characters escaped."""
    text = redact_text(text)
    for ch in ("\\", "*", "<", ">", "`"):
        text = text.replace(ch, "\\" + ch)
    return text


def _ev(e: Ev, cell: bool = False) -> str:
    """A short evidence line: tool, step, and a link to the step's commands in commands.md."""
    bits = [f"tool {_code(e.tool)}"] if e.tool else []
    if e.step:
        bits.append(f"step {_code(e.step)}")
    n = len(e.ids)
    if n:
        bits.append(f"[{n} command{'s' if n != 1 else ''}]({COMMANDS_FILE}#{step_anchor(e.step)})")
    bits += [_code(c) for c in e.literal]
    if not bits:
        return fmt.DASH
    return ("" if cell else "evidence: ") + " · ".join(bits)     # in a table the column says 'evidence'


def _spans(spans: list[Span], cell: bool = False) -> str:
    out = "".join(_code(s.text) if isinstance(s, Code) else _ev(s, cell) if isinstance(s, Ev) else _text(s)
                  for s in spans)
    return out.replace("|", "\\|").replace("\n", "<br>") if cell else out


def _table(b: Table) -> list[str]:
    lines = [f"*{_text(b.caption)}*", ""] if b.caption else []
    lines += ["| " + " | ".join(_text(h) for h in b.headers) + " |",
              "|" + "|".join("---" for _ in b.headers) + "|"]
    lines += ["| " + " | ".join(_spans(c, cell=True) for c in row) + " |" for row in b.rows]
    return [*lines, ""]


def _block(b: Block) -> list[str]:
    if isinstance(b, Para):
        text = _spans(b.spans)
        if b.strong:
            text = f"**{text}**"
        if b.llm_made:
            text = f"*{_text(LLM_MARK)}* {text}"
        return [text, ""]
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Bullets):
        return [*(f"- {_spans(item)}" for item in b.items), ""]
    if isinstance(b, Quote):
        return ["```text", *(redact_text(line).replace("```", "`\u200b``") for line in b.lines), "```", ""]
    if isinstance(b, Figure):
        return [f"![{_text(b.caption)}]({b.key}.png)", ""]
    if isinstance(b, Details):
        return [line for inner in b.md_short for line in _block(inner)]
    raise TypeError(f"unknown block {type(b).__name__}")


def render_markdown(report: Report) -> str:
    """The whole report as markdown; ends with a newline."""
    doc = build(report)
    lines = [f"# {_text(doc.title)}", "", _text(doc.subtitle), ""]
    for sec in doc.sections:
        lines += [f"## {_text(sec.title)}", ""]
        for b in sec.blocks:
            lines += _block(b)
    return "\n".join(lines).rstrip("\n") + "\n"


def _walk_evs(blocks: list[Block]) -> list[Ev]:
    out: list[Ev] = []
    for b in blocks:
        cells: list[list[Span]] = []
        if isinstance(b, Para):
            cells = [b.spans]
        elif isinstance(b, Table):
            cells = [c for row in b.rows for c in row]
        elif isinstance(b, Bullets):
            cells = b.items
        elif isinstance(b, Details):
            out += _walk_evs(b.blocks)
        out += [sp for cell in cells for sp in cell if isinstance(sp, Ev)]
    return out


def evidence_steps(doc: Document) -> dict[str, list[int]]:
    """Every command cited as evidence, grouped by the step that cited it (ids once each, in log order)."""
    steps: dict[str, set[int]] = {}
    for sec in doc.sections:
        for e in _walk_evs(sec.blocks):
            steps.setdefault(e.step or "other", set()).update(e.ids)
    return {k: sorted(v) for k, v in steps.items() if v}


def _fence(text: str) -> list[str]:
    lines = redact_text(text).rstrip("\n").splitlines()
    if len(lines) > _OUTPUT_LINES:
        lines = [f"… ({len(lines) - _OUTPUT_LINES} earlier lines)", *lines[-_OUTPUT_LINES:]]
    return ["```text", *(line.replace("```", "`\u200b``") for line in lines), "```"]


def render_commands_markdown(report: Report) -> str:
    """commands.md: the commands behind each step's evidence, then the full log with each command's output."""
    doc = build(report)
    lines = [f"# Commands of run {_text(report.meta.run_id or fmt.DASH)}", "",
             f"{len(report.commands)} commands, in the order they ran. report.md links here per step; "
             "the same log is in audit.jsonl.", ""]
    for step, ids in evidence_steps(doc).items():
        lines += [f'<a id="{step_anchor(step)}"></a>', "", f"## Step {_code(step)}", ""]
        lines += _table(Table(COMMAND_HEAD, command_rows(report, ids)))
    lines += ["## Full log", ""]
    for i, c in enumerate(report.commands):
        lines += [f'<a id="cmd-{i}"></a>', "", f"### #{i} · exit {fmt.DASH if c.exit is None else c.exit} · "
                  f"{fmt.seconds(c.seconds)}", "", "```sh", redact_text(c.command).replace("```", "`\u200b``"), "```",
                  ""]
        if c.cwd:
            lines += [f"cwd {_code(c.cwd)}", ""]
        for name, text in (("stdout", c.stdout_tail), ("stderr", c.stderr_tail)):
            if text.strip():
                lines += [f"{name}:", "", *_fence(text), ""]
    return "\n".join(lines).rstrip("\n") + "\n"
