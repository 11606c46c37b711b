"""The game-plan report: one Report model, rendered to markdown, JSON, HTML and the terminal."""

from specdoctor.report.diff import ReportDiff, diff_reports
from specdoctor.report.html import render_html
from specdoctor.report.markdown import render_markdown
from specdoctor.report.model import SCHEMA_VERSION, Report
from specdoctor.report.writer import load_report, redact_report, report_schema, write_report

__all__ = ["SCHEMA_VERSION", "Report", "ReportDiff", "diff_reports", "load_report", "redact_report",
           "render_html", "render_markdown", "report_schema", "write_report"]
