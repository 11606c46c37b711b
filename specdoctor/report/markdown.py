"""report.md: the document as GitHub-flavoured markdown (tables, stable section order, secrets redacted)."""

from __future__ import annotations

from specdoctor.host.redact import redact_text
from specdoctor.report.doc import LLM_MARK, Block, Bullets, Code, Figure, Para, Quote, Span, Table, build
from specdoctor.report.model import Report

__all__ = ["render_markdown"]


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


def _spans(spans: list[Span], cell: bool = False) -> str:
    out = "".join(_code(s.text) if isinstance(s, Code) else _text(s) for s in spans)
    return out.replace("|", "\\|").replace("\n", "<br>") if cell else out


def _block(b: Block) -> list[str]:
    if isinstance(b, Para):
        text = _spans(b.spans)
        if b.strong:
            text = f"**{text}**"
        if b.llm_made:
            text = f"*{_text(LLM_MARK)}* {text}"
        return [text, ""]
    if isinstance(b, Table):
        lines = ["| " + " | ".join(_text(h) for h in b.headers) + " |",
                 "|" + "|".join("---" for _ in b.headers) + "|"]
        lines += ["| " + " | ".join(_spans(c, cell=True) for c in row) + " |" for row in b.rows]
        return [*lines, ""]
    if isinstance(b, Bullets):
        return [*(f"- {_spans(item)}" for item in b.items), ""]
    if isinstance(b, Quote):
        return ["```text", *(redact_text(line).replace("```", "`\u200b``") for line in b.lines), "```", ""]
    if isinstance(b, Figure):
        return [f"*Figure: {_text(b.caption)} (in report.html).*", ""]
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
