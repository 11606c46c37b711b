"""No secret at rest: a real LangGraph run checkpointed to SQLite keeps redacted values only; relaunch data is 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

from specdoctor.engine.runs import REDACTED, Relaunch, load_relaunch, open_checkpointer, save_relaunch

from .test_secret_corpus import corpus


class Seen(BaseModel):
    """A tool output shaped like the ones in the run state (a command, its env and a log tail)."""

    command: str
    env: dict[str, str]
    log_tail: list[str]


class State(TypedDict, total=False):
    params: dict[str, Any]
    results: dict[str, Any]


def _graph(seen: Seen):
    def examine(state: State) -> State:
        return {"results": {"examine": seen.model_dump()}}

    def trial(state: State) -> State:
        return {"results": {**state["results"], "trial": {"stdout": "\n".join(seen.log_tail)}}}

    g = StateGraph(State)
    g.add_node("examine", examine)
    g.add_node("trial", trial)
    g.add_edge(START, "examine")
    g.add_edge("examine", "trial")
    g.add_edge("trial", END)
    return g


def test_checkpoints_hold_redacted_values_only_and_the_run_still_resumes(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))
    pairs = corpus()
    key = "Kq" + os.urandom(8).hex()
    seen = Seen(command=f"python -m sglang.launch_server --model-path /m --api-key {key} --tp 8",
                env={"HF_TOKEN": "hf_" + os.urandom(12).hex(), "MY_SERVICE_PASSWORD": "plain" + os.urandom(5).hex(),
                     "NCCL_PROTO": "Simple"},
                log_tail=[line for line, _ in pairs])
    secrets = [key, *seen.env.values(), *(s for _, s in pairs)]
    secrets.remove("Simple")
    db = tmp_path / "state.sqlite"
    cfg = {"configurable": {"thread_id": "run-1"}}
    with open_checkpointer(str(db)) as saver:
        app = _graph(seen).compile(checkpointer=saver)
        app.invoke({"params": {"launch": seen.command, "env": seen.env}, "results": {}}, cfg)
        values = app.get_state(cfg).values  # loads back: the checkpoint is still a valid one
    assert values["results"]["examine"]["env"]["NCCL_PROTO"] == "Simple"
    assert values["results"]["examine"]["env"]["HF_TOKEN"] == REDACTED
    assert "--api-key " + REDACTED in values["params"]["launch"]
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    blob = b"".join(p.read_bytes() for p in tmp_path.glob("state.sqlite*"))
    leaked = [s for s in secrets if s.encode() in blob]
    assert not leaked, leaked
    assert b"Simple" in blob  # the check reads the real rows: ordinary values are there


def test_relaunch_data_lives_in_a_0600_file_beside_the_checkpoint(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))
    key = "Kq" + os.urandom(8).hex()
    r = Relaunch(run_id="run-2", argv=["python", "-m", "sglang.launch_server", "--api-key", key],
                 env={"HF_TOKEN": "hf_" + key}, cwd="/srv")
    path = save_relaunch(r)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    back = load_relaunch("run-2")
    assert back is not None and back.argv == r.argv and back.env == r.env  # exact, unredacted
    assert load_relaunch("no-such-run") is None
