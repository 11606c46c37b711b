"""Where runs live on the controller: `~/.specdoctor` (or $SPECDOCTOR_HOME), run records and the checkpointer."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.errors import UsageError

__all__ = ["RunRecord", "specdoctor_home", "new_run_id", "save_record", "load_record", "list_records",
           "open_checkpointer"]


def specdoctor_home() -> Path:
    """The controller-side state folder; $SPECDOCTOR_HOME overrides ~/.specdoctor."""
    return Path(os.environ.get("SPECDOCTOR_HOME") or Path.home() / ".specdoctor")


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


class RunRecord(BaseModel):
    """What `resume` needs besides the checkpoint: how to reopen the host and where the report goes."""

    run_id: str
    host: str = Field(description="Host spec as given.")
    reopen: str = Field(description="Spec that reopens the same host (a simulated host's sandbox included).")
    host_options: dict[str, Any] = Field(default_factory=dict)
    playbook: str
    out_dir: str
    checkpoint: str
    yes: bool = False
    dry_run: bool = False
    llm: str | None = None
    llm_base_url: str | None = None
    status: str = "running"
    verdict: str | None = None
    started: float = Field(default_factory=time.time)
    finished: float | None = None


def _records_dir() -> Path:
    return specdoctor_home() / "runs"


def save_record(rec: RunRecord) -> None:
    d = _records_dir()
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{rec.run_id}.json.tmp"
    tmp.write_text(rec.model_dump_json(indent=2))
    os.replace(tmp, d / f"{rec.run_id}.json")


def load_record(run_id: str) -> RunRecord:
    path = _records_dir() / f"{run_id}.json"
    if not path.is_file():
        raise UsageError(f"no run {run_id!r} in {_records_dir()} (see `specdoctor runs`)")
    return RunRecord.model_validate(json.loads(path.read_text()))


def list_records() -> list[RunRecord]:
    d = _records_dir()
    if not d.is_dir():
        return []
    recs = []
    for p in sorted(d.glob("*.json")):
        try:
            recs.append(RunRecord.model_validate(json.loads(p.read_text())))
        except Exception:  # a half-written or foreign file is not a run
            continue
    return sorted(recs, key=lambda r: r.started)


@contextmanager
def open_checkpointer(spec: str | None):
    """SQLite by default (embedded); `postgres://...` uses langgraph-checkpoint-postgres (optional extra)."""
    if spec and spec.startswith(("postgres://", "postgresql://")):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver  # type: ignore[import-not-found]
        except ImportError:
            raise UsageError("Postgres checkpoints need `pip install specdoctor[postgres]`") from None
        with PostgresSaver.from_conn_string(spec) as saver:
            saver.setup()
            yield saver
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(spec) if spec else specdoctor_home() / "state.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()
