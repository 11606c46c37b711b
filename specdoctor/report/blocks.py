"""The neutral document's parts: spans, blocks, sections and the document that md/html/rich render."""

from __future__ import annotations

from dataclasses import dataclass, field

from specdoctor.host.audit import AuditEntry

__all__ = ["Code", "Ev", "Span", "Para", "Table", "Bullets", "Quote", "Figure", "Details", "Block", "Section", "Document",
           "LLM_MARK"]

LLM_MARK = "[LLM-made]"


@dataclass(frozen=True)
class Code:
    """Inline code (commands, paths, variable names)."""

    text: str


@dataclass(frozen=True)
class Ev:
    """A link to the evidence behind a claim: which tool/step, and the commands (ids into Report.commands)."""

    tool: str | None
    step: str | None
    ids: tuple[int, ...]
    literal: tuple[str, ...] = ()


Span = str | Code | Ev


@dataclass
class Para:
    spans: list[Span]
    llm_made: bool = False
    strong: bool = False
    role: str = ""


@dataclass
class Table:
    headers: list[str]
    rows: list[list[list[Span]]]
    caption: str = ""


@dataclass
class Bullets:
    items: list[list[Span]]


@dataclass
class Quote:
    """Verbatim lines (patch-script output, stdout tails)."""

    lines: list[str]


@dataclass
class Figure:
    """A plot slot (`key` picks the plot); markdown links the PNG next to it, HTML embeds it."""

    key: str
    caption: str


@dataclass
class Details:
    """Blocks a reader opens on demand (HTML: <details>; markdown: shown in `md_short` form or dropped)."""

    summary: str
    blocks: list[Block]
    md_short: list[Block] = field(default_factory=list)


Block = Para | Table | Bullets | Quote | Figure | Details


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    subtitle: str
    sections: list[Section]
    commands: list[AuditEntry] = field(default_factory=list)

