"""Write a report to disk (report.json/md/html, commands.md, the plots as PNG) and read it back; secrets scrubbed."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from specdoctor.errors import UsageError
from specdoctor.host.redact import redact_text
from specdoctor.report.claimed_gap import fill_claimed_gap
from specdoctor.report.html import render_html
from specdoctor.report.markdown import COMMANDS_FILE, render_commands_markdown, render_markdown
from specdoctor.report.model import SCHEMA_VERSION, Report
from specdoctor.report.plots import render_plot_pngs

__all__ = ["write_report", "load_report", "redact_report", "report_schema", "FILES"]

FILES = {"json": "report.json", "md": "report.md", "html": "report.html"}


def _scrub(obj: Any) -> Any:
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, list):
        return [_scrub(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _scrub(v) for k, v in obj.items()}
    return obj


def redact_report(report: Report) -> Report:
    """A copy with every string (commands, stdout tails, env values, prose) run through redact_text."""
    return Report.model_validate(_scrub(report.model_dump(mode="json")))


def report_schema() -> dict[str, Any]:
    """The JSON Schema of report.json (what `specdoctor report schema` prints)."""
    schema = Report.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$comment"] = f"specdoctor report schema_version {SCHEMA_VERSION}"
    return schema


def _atomic_write(path: Path, text: str) -> None:
    """Write via a temp file + rename, so a report interrupted mid-write never leaves half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_report(report: Report, out_dir: Path | str) -> dict[str, Path]:
    """Write report.json/md/html, commands.md and one PNG per plot into out_dir; returns their paths by kind
    ('json', 'md', 'html', 'commands', 'plot:<key>')."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    clean = redact_report(report)
    paths = {k: out / name for k, name in FILES.items()}
    paths["commands"] = out / COMMANDS_FILE
    pngs = render_plot_pngs(clean)
    _atomic_write(paths["json"], clean.model_dump_json(indent=2) + "\n")
    _atomic_write(paths["md"], render_markdown(clean))
    _atomic_write(paths["commands"], render_commands_markdown(clean))
    _atomic_write(paths["html"], render_html(clean, {k: base64.b64encode(v).decode("ascii") for k, v in pngs.items()}))
    for key, png in pngs.items():
        p = out / f"{key}.png"
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        tmp.write_bytes(png)
        os.replace(tmp, p)
        paths[f"plot:{key}"] = p
    return paths


def load_report(path: Path | str) -> Report:
    """Read a saved report: a run directory or the report.json itself."""
    p = Path(path)
    if p.is_dir():
        p = p / FILES["json"]
    if not p.is_file():
        raise UsageError(f"no report at {p}")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{p} is not valid JSON: {exc}") from exc
    version = str(data.get("schema_version", ""))
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise UsageError(f"{p} has schema_version {version!r}; this specdoctor reads {SCHEMA_VERSION}")
    from pydantic import ValidationError

    try:
        report = Report.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{p} does not match the report schema: {exc.error_count()} errors, "
                         f"first: {exc.errors()[0]['loc']} {exc.errors()[0]['msg']}") from exc
    fill_claimed_gap(report)  # a report.json written before the builder filled it reads as it did
    return report
