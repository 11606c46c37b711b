"""Where runs live on the controller: `~/.specdoctor` (or $SPECDOCTOR_HOME), run records and the checkpointer.

Checkpoints hold redacted values only (`RedactingSerializer`); what a resume needs to relaunch a server exactly
(launch line, environment, cwd) is kept apart in a 0600 file beside them (`save_relaunch` / `load_relaunch`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel, Field

from specdoctor.errors import UsageError
from specdoctor.host.redact import REDACTED, is_secret_name, redact_text, remember_secret

__all__ = ["RunRecord", "specdoctor_home", "new_run_id", "save_record", "load_record", "list_records",
           "open_checkpointer", "RedactingSerializer", "redact_deep", "Relaunch", "save_relaunch", "load_relaunch",
           "relaunch_path", "write_private"]


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
    engine: str | None = Field(default=None, description="The serving engine given (--engine) or found at the start.")
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


# -- no secret at rest -----------------------------------------------------------------------------------------------

def _remember(obj: Any, depth: int = 0) -> None:
    """First pass: values held under secret-looking names (api_key, HF_TOKEN, ...) become known secrets."""
    if depth > 60:
        return
    if isinstance(obj, BaseModel):
        obj = dict(obj)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, str) and isinstance(v, str) and v and v != REDACTED and is_secret_name(k):
                remember_secret(v)
            else:
                _remember(v, depth + 1)
    elif isinstance(obj, list | tuple | set | frozenset):
        for v in obj:
            _remember(v, depth + 1)


def _scrub(obj: Any, depth: int = 0) -> Any:
    if isinstance(obj, str):
        return redact_text(obj)
    if depth > 60:
        return obj
    if isinstance(obj, dict):
        return {k: (REDACTED if isinstance(k, str) and isinstance(v, str) and v and is_secret_name(k)
                    else _scrub(v, depth + 1)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_scrub(v, depth + 1) for v in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_scrub(v, depth + 1) for v in obj)
    if isinstance(obj, BaseModel):
        return obj.model_copy(update={k: _scrub(v, depth + 1) for k, v in obj})
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        try:
            return dataclasses.replace(obj, **{f.name: _scrub(getattr(obj, f.name), depth + 1)
                                               for f in dataclasses.fields(obj) if f.init})
        except (TypeError, ValueError):  # a dataclass whose fields cannot be replaced: kept as it is
            return obj
    return obj


def redact_deep(obj: Any) -> Any:
    """A copy of a state value with every string redacted and every secret-named string value replaced."""
    _remember(obj)
    return _scrub(obj)


class RedactingSerializer(JsonPlusSerializer):
    """LangGraph's serializer, redacting before it writes: a checkpoint's channel values and every pending write.

    Channel names, versions and ids are left alone (resume needs them). A subclass, not a wrapper, so LangGraph's
    strict msgpack allowlist (LANGGRAPH_STRICT_MSGPACK) still applies to it.
    """

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if isinstance(obj, dict) and "channel_values" in obj:
            obj = {**obj, "channel_values": redact_deep(obj["channel_values"])}
        else:
            obj = redact_deep(obj)
        return super().dumps_typed(obj)


class Relaunch(BaseModel):
    """What a resume needs to start a server exactly as it was: kept only in a 0600 file, never in checkpoints."""

    run_id: str
    argv: list[str] = Field(default_factory=list)
    command: str | None = Field(default=None, description="The launch line as a shell string, when that is the form.")
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    saved: float = Field(default_factory=time.time)


def relaunch_path(run_id: str) -> Path:
    return specdoctor_home() / "secrets" / f"{run_id}.relaunch.json"


def write_private(path: Path, text: str, *, private_dir: bool = True) -> Path:
    """Write a file only the user can read (0600, created so, then renamed into place: never half-written);
    `private_dir` also makes its folder 0700."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if private_dir:
        os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def save_relaunch(relaunch: Relaunch) -> Path:
    """Write the exact launch line and env to ~/.specdoctor/secrets/RUN.relaunch.json (folder 0700, file 0600)."""
    return write_private(relaunch_path(relaunch.run_id), relaunch.model_dump_json())


def load_relaunch(run_id: str) -> Relaunch | None:
    """The exact launch line and env saved for a run, or None (then ask the user again)."""
    path = relaunch_path(run_id)
    if not path.is_file():
        return None
    return Relaunch.model_validate_json(path.read_text())


@contextmanager
def open_checkpointer(spec: str | None) -> Iterator[Any]:
    """SQLite by default (embedded); `postgres://...` uses langgraph-checkpoint-postgres (optional extra).

    Either way checkpoints are written through RedactingSerializer, and SQLite files are created 0600.
    """
    serde = RedactingSerializer()
    if spec and spec.startswith(("postgres://", "postgresql://")):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver  # type: ignore[import-not-found]
        except ImportError:
            raise UsageError("Postgres checkpoints need `pip install specdoctor[postgres]`") from None
        with PostgresSaver.from_conn_string(spec) as saver:
            saver.serde = serde
            saver.setup()
            yield saver
        return
    path = Path(spec) if spec else specdoctor_home() / "state.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        yield _redacting_sqlite_saver()(conn, serde=serde)
    finally:
        conn.close()


@functools.cache
def _redacting_sqlite_saver() -> type:
    """SqliteSaver with redacted metadata (built on first use: langgraph stays a lazy import)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    class RedactingSqliteSaver(SqliteSaver):
        """SqliteSaver whose checkpoint metadata (stored as JSON, not through serde) is redacted too."""

        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            return super().put(config, checkpoint, redact_deep(metadata), new_versions)

    return RedactingSqliteSaver
