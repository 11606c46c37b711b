"""report.html: one self-contained page (inline CSS, plots as data: PNGs, no script, no external URL).

Evidence is one click away: every evidence link is a <details> that opens the commands behind the number,
with their exit status and output. Tables scroll inside their own box, so the page never scrolls sideways.
"""

from __future__ import annotations

from html import escape

from specdoctor.host.audit import AuditEntry
from specdoctor.host.redact import redact_text
from specdoctor.report import fmt
from specdoctor.report.doc import (
    LLM_MARK,
    Block,
    Bullets,
    Code,
    Details,
    Ev,
    Figure,
    Para,
    Quote,
    Span,
    Table,
    build,
)
from specdoctor.report.model import Report

__all__ = ["render_html"]

_OUTPUT_LINES = 12
_CARD_COLUMNS = 9

_CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1f24;background:#fff}
main{max-width:1200px;margin:0 auto;padding:20px}
h1{font-size:22px;margin:0 0 4px;overflow-wrap:anywhere}
h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
.sub{color:#57606a;margin-bottom:8px;overflow-wrap:anywhere}
nav{font-size:13px;margin:8px 0 16px;display:flex;flex-wrap:wrap;gap:4px 12px}
nav a{color:#0969da;text-decoration:none}
.tw{max-width:100%;overflow-x:auto;margin:8px 0}
table{border-collapse:collapse;font-size:13px;min-width:50%}
caption{text-align:left;color:#57606a;font-size:12px;padding:2px 0}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top;max-width:36em;
 overflow-wrap:break-word}
th{background:#f6f8fa}tr:nth-child(even) td{background:#fbfcfd}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f3f4f6;padding:1px 4px;border-radius:4px;
 overflow-wrap:break-word;white-space:pre-wrap}
.para code,li code{overflow-wrap:anywhere}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:6px;font-size:12px;white-space:pre-wrap;
 overflow-wrap:anywhere;max-height:16em;overflow-y:auto;margin:4px 0}
pre.quote{background:#fff8c5;border-color:#d4a72c}
p,li,.para{overflow-wrap:anywhere}.para{margin:12px 0}
.answer{border:2px solid #d0d7de;border-radius:8px;padding:8px 16px;margin-top:8px}
.answer h2{border:0;margin-top:8px}
.verdict{font-size:18px;margin:6px 0}.badge{display:inline-block;padding:2px 10px;border-radius:12px;color:#fff}
.badge code{background:transparent;color:#fff;font-size:16px}
.v-no-regression{background:#1a7f37}.v-code-regression{background:#cf222e}.v-environment{background:#9a6700}
.v-baseline-not-reproducible{background:#8250df}.v-inconclusive{background:#57606a}
.note{background:#fbefff;border-left:4px solid #8250df;padding:4px 8px}
.gap{font-weight:600}.box{color:#1a7f37;font-weight:600}
.llm{border-left:3px solid #8250df;padding-left:8px}.llm-mark{color:#8250df;font-weight:600}
figure{margin:12px 0}figure img{max-width:100%;height:auto;border:1px solid #d0d7de}
figcaption{color:#57606a;font-size:12px}
details.ev{display:inline}details.ev>summary{display:inline;cursor:pointer;color:#0969da;font-size:12px}
details.ev[open]{display:block;border:1px solid #d0d7de;border-radius:6px;padding:4px 8px;margin:4px 0;
 background:#fff}
details.ev pre,details.ev code{overflow-wrap:anywhere}
section{position:relative}
td details.ev[open]{border:0;padding:0;margin:0}
td details.ev[open]>.evb{position:absolute;left:0;right:0;z-index:5;background:#fff;border:1px solid #8c959f;
 border-radius:6px;box-shadow:0 4px 14px rgba(0,0,0,.18);padding:8px 12px;max-height:60vh;overflow:auto}
details.ev ol{margin:4px 0;padding-left:20px}
details.more>summary{cursor:pointer;color:#0969da;margin:6px 0}
@media (max-width:640px){
 main{padding:10px}.answer{padding:4px 10px}
 table.cards,table.cards tbody,table.cards tr,table.cards td{display:block;max-width:none}
 table.cards thead{display:none}table.cards tr{border:1px solid #d0d7de;margin:0 0 8px;border-radius:6px}
 table.cards td{border:0;border-bottom:1px solid #eaeef2;padding:3px 8px}
 table.cards td::before{content:attr(data-label) ": ";color:#57606a;font-size:12px}
 table.cards tr:nth-child(even) td{background:#fff}
}
"""


def _ev(e: Ev, commands: list[AuditEntry], in_cell: bool = False) -> str:
    """An evidence link: a <details> whose body lists the commands (output tails included)."""
    head = " · ".join(x for x in (f"tool {e.tool}" if e.tool else "", f"step {e.step}" if e.step else "") if x)
    n = len(e.ids) + len(e.literal)
    if n == 0:      # nothing to open: say where it came from, without a link that leads nowhere
        return f'<small class="src">source: {escape(head)}</small>'
    label = f"{n} command{'s' if n != 1 else ''}"
    items = []
    for i in e.ids:
        if not 0 <= i < len(commands):
            continue
        c = commands[i]
        out = "\n".join(redact_text(c.stdout_tail + ("\n" + c.stderr_tail if c.stderr_tail else "")).rstrip()
                        .splitlines()[-_OUTPUT_LINES:])
        meta = f"#{i} · exit {fmt.DASH if c.exit is None else c.exit} · {fmt.seconds(c.seconds)}"
        items.append(f'<li><code>{escape(redact_text(c.command))}</code> <small>{escape(meta)}</small>'
                     + (f"<pre>{escape(out)}</pre>" if out.strip() else "") + "</li>")
    items += [f"<li><code>{escape(redact_text(c))}</code></li>" for c in e.literal]
    # In a table cell the body opens as a panel across the section (absolute, outside the table's scroll box).
    body = ('<div class="evb">' + (f"<div><small>{escape(head)}</small></div>" if head else "")
            + (f"<ol>{''.join(items)}</ol>" if items else "") + "</div>")
    prefix = "" if in_cell else "evidence: "          # a table's column header already says 'evidence'
    return f'{prefix}<details class="ev"><summary>{escape(label)}</summary>{body}</details>'


def _spans(spans: list[Span], commands: list[AuditEntry], in_cell: bool = False) -> str:
    out = []
    for s in spans:
        if isinstance(s, Code):
            out.append(f"<code>{escape(redact_text(s.text))}</code>")
        elif isinstance(s, Ev):
            out.append(_ev(s, commands, in_cell))
        else:
            text = escape(redact_text(s))
            out.append(text.replace(escape(LLM_MARK), f'<span class="llm-mark">{escape(LLM_MARK)}</span>'))
    return "".join(out)


def _block(b: Block, plots: dict[str, str], verdict: str, commands: list[AuditEntry]) -> str:
    if isinstance(b, Para):
        inner = _spans(b.spans, commands)
        if b.strong:
            return f'<p class="verdict"><span class="badge v-{escape(verdict)}">{inner}</span></p>'
        if b.llm_made:
            return f'<div class="para llm"><span class="llm-mark">{escape(LLM_MARK)}</span> {inner}</div>'
        # A <div>, not a <p>: an evidence <details> inside a <p> would end the paragraph early.
        return f'<div class="para {escape(b.role)}">{inner}</div>'
    if isinstance(b, Table):
        cap = f"<caption>{escape(b.caption)}</caption>" if b.caption else ""
        head = "".join(f'<th scope="col">{escape(h)}</th>' for h in b.headers)
        labels = [escape(h, quote=True) for h in b.headers]
        body = "".join("<tr>" + "".join(f'<td data-label="{lab}">{_spans(c, commands, in_cell=True)}</td>'
                                        for lab, c in zip(labels, row, strict=False)) + "</tr>" for row in b.rows)
        # Narrow screens: tables up to _CARD_COLUMNS wide become one card per row; wider grids scroll in their box.
        cls = ' class="cards"' if len(b.headers) <= _CARD_COLUMNS else ""
        return f'<div class="tw"><table{cls}>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{_spans(i, commands)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, Quote):
        return '<pre class="quote">' + escape("\n".join(redact_text(line) for line in b.lines)) + "</pre>"
    if isinstance(b, Figure):
        png = plots.get(b.key)
        if png is None:
            return f"<p><em>{escape(b.caption)}: no data.</em></p>"
        alt = escape(b.caption, quote=True)
        return (f'<figure id="plot-{escape(b.key)}"><img alt="{alt}" src="data:image/png;base64,{png}">'
                f"<figcaption>{escape(b.caption)}</figcaption></figure>")
    if isinstance(b, Details):
        inner = "".join(_block(x, plots, verdict, commands) for x in b.blocks)
        return f'<details class="more"><summary>{escape(b.summary)}</summary>{inner}</details>'
    raise TypeError(f"unknown block {type(b).__name__}")


def render_html(report: Report, plots: dict[str, str] | None = None) -> str:
    """The whole report as one HTML page; `plots` defaults to `render_plots(report)`."""
    if plots is None:
        from specdoctor.report.plots import render_plots

        plots = render_plots(report)
    doc = build(report)
    nav = "".join(f'<a href="#{s.id}">{escape(s.title)}</a>' for s in doc.sections)
    parts = []
    for s in doc.sections:
        cls = ' class="answer"' if s.id == "verdict" else ""
        parts.append(f'<section id="{s.id}"{cls}><h2>{escape(s.title)}</h2>'
                     + "".join(_block(b, plots, report.verdict, doc.commands) for b in s.blocks) + "</section>")
    answer, rest = parts[0], parts[1:]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{escape(doc.title)}</title>"
            f"<style>{_CSS}</style></head><body><main><h1>{escape(doc.title)}</h1>"
            f"<div class=\"sub\">{escape(redact_text(doc.subtitle))}</div>{answer}<nav>{nav}</nav>{''.join(rest)}"
            "</main></body></html>\n")
