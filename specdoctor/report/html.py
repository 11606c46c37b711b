"""report.html: one self-contained page (inline CSS, plots as data: PNGs, no script, no external URL)."""

from __future__ import annotations

from html import escape

from specdoctor.host.redact import redact_text
from specdoctor.report.doc import LLM_MARK, Block, Bullets, Code, Figure, Para, Quote, Span, Table, build
from specdoctor.report.model import Report

__all__ = ["render_html"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1f24;background:#fff}
main{max-width:1200px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
.sub{color:#57606a;margin-bottom:12px}
nav{font-size:13px;margin:8px 0 16px}nav a{margin-right:10px;color:#0969da;text-decoration:none}
table{border-collapse:collapse;margin:8px 0;font-size:13px;display:block;overflow-x:auto}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}tr:nth-child(even) td{background:#fbfcfd}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f3f4f6;padding:1px 4px;border-radius:4px}
pre{background:#fff8c5;border:1px solid #d4a72c;padding:8px;font-size:12px;overflow-x:auto}
.verdict{font-size:18px}.badge{display:inline-block;padding:2px 10px;border-radius:12px;color:#fff}
.badge code{background:transparent;color:#fff;font-size:16px}
.v-no-regression{background:#1a7f37}.v-code-regression{background:#cf222e}.v-environment{background:#9a6700}
.v-baseline-not-reproducible{background:#8250df}.v-inconclusive{background:#57606a}
.llm{border-left:3px solid #8250df;padding-left:8px}.llm-mark{color:#8250df;font-weight:600}
figure{margin:12px 0}figure img{max-width:100%;border:1px solid #d0d7de}figcaption{color:#57606a;font-size:12px}
"""


def _spans(spans: list[Span]) -> str:
    out = []
    for s in spans:
        if isinstance(s, Code):
            out.append(f"<code>{escape(redact_text(s.text))}</code>")
        else:
            text = escape(redact_text(s))
            out.append(text.replace(escape(LLM_MARK), f'<span class="llm-mark">{escape(LLM_MARK)}</span>'))
    return "".join(out)


def _block(b: Block, plots: dict[str, str], verdict: str) -> str:
    if isinstance(b, Para):
        inner = _spans(b.spans)
        if b.strong:
            inner = f'<span class="badge v-{escape(verdict)}">{inner}</span>'
            return f'<p class="verdict">{inner}</p>'
        if b.llm_made:
            return f'<p class="llm"><span class="llm-mark">{escape(LLM_MARK)}</span> {inner}</p>'
        return f"<p>{inner}</p>"
    if isinstance(b, Table):
        head = "".join(f"<th>{escape(h)}</th>" for h in b.headers)
        body = "".join("<tr>" + "".join(f"<td>{_spans(c)}</td>" for c in row) + "</tr>" for row in b.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{_spans(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, Quote):
        return "<pre>" + escape("\n".join(redact_text(line) for line in b.lines)) + "</pre>"
    if isinstance(b, Figure):
        png = plots.get(b.key)
        if png is None:
            return f"<p><em>{escape(b.caption)}: no data.</em></p>"
        alt = escape(b.caption, quote=True)
        return (f'<figure id="plot-{escape(b.key)}"><img alt="{alt}" src="data:image/png;base64,{png}">'
                f"<figcaption>{escape(b.caption)}</figcaption></figure>")
    raise TypeError(f"unknown block {type(b).__name__}")


def render_html(report: Report, plots: dict[str, str] | None = None) -> str:
    """The whole report as one HTML page; `plots` defaults to `render_plots(report)`."""
    if plots is None:
        from specdoctor.report.plots import render_plots

        plots = render_plots(report)
    doc = build(report)
    nav = "".join(f'<a href="#{s.id}">{escape(s.title)}</a>' for s in doc.sections)
    parts = [f'<section id="{s.id}"><h2>{escape(s.title)}</h2>'
             + "".join(_block(b, plots, report.verdict) for b in s.blocks) + "</section>"
             for s in doc.sections]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{escape(doc.title)}</title>"
            f"<style>{_CSS}</style></head><body><main><h1>{escape(doc.title)}</h1>"
            f"<div class=\"sub\">{escape(redact_text(doc.subtitle))}</div><nav>{nav}</nav>{''.join(parts)}"
            "</main></body></html>\n")
