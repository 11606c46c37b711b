"""`specdoctor mcp` as a real subprocess, driven by the MCP SDK's own stdio client."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from specdoctor.toolkit import registry

from .conftest import SEED_FILES, SPECDOCTOR, child_env, tree_state


@asynccontextmanager
async def session(args: list[str], env: dict[str, str], cwd: Path) -> AsyncIterator[tuple[ClientSession, str]]:
    params = StdioServerParameters(command=SPECDOCTOR, args=["mcp", *args], env=env, cwd=str(cwd))
    with open(cwd / "mcp-stderr.log", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            init = await s.initialize()
            yield s, init.instructions or ""


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_read_only_server_on_the_seed(tmp_path: Path, home: Path) -> None:
    runs, audit = tmp_path / "runs", tmp_path / "audit.jsonl"
    env = child_env(home, SPECDOCTOR_RUNS=str(runs))

    async def main() -> None:
        async with session(["--host", "sim:seed", "--audit", str(audit)], env, tmp_path) as (s, instructions):
            listed = (await s.list_tools()).tools
            assert sorted(t.name for t in listed) == sorted(x.name for x in registry.all(["read"]))
            for t in listed:
                assert t.input_schema["type"] == "object" and "properties" in t.input_schema
                assert t.output_schema and "output" in t.output_schema["properties"]
                assert t.annotations and t.annotations.read_only_hint is True
                assert t.description and t.description.startswith("[read] ")
            assert "stash_all" not in {t.name for t in listed}

            hints = json.loads((await s.read_resource("specdoctor://host/hints")).contents[0].text)
            assert hints["host"] == "sim:seed" and hints["allow_mutations"] is False
            assert hints["repo"] and hints["repo"] in instructions

            res = await s.call_tool("catalog_diffs", {"repo": hints["repo"]})  # SDK validates output_schema
            assert res.is_error is False
            data = res.structured_content
            assert data["status"] == "ok" and data["tool"] == "catalog_diffs"
            assert len([f for f in data["output"]["files"] if not f.get("untracked")]) == SEED_FILES
            assert len(res.content) == 1 and res.content[0].text.startswith(f"[ok] {data['summary']}\n")
            assert len(res.content[0].text) < 600 < len(json.dumps(data))  # short text; the whole result structured

            ran = _lines(audit)
            assert ran >= len(data["evidence"]) > 0
            bad = await s.call_tool("catalog_diffs", {"repo": 42, "max_hunk_chars": -1})
            assert bad.is_error and bad.structured_content["status"] == "error"
            assert "repo" in bad.structured_content["error"] and "max_hunk_chars" in bad.structured_content["error"]
            assert bad.structured_content["evidence"] == [] and _lines(audit) == ran  # nothing executed

            with pytest.raises(MCPError, match="--allow-mutations"):
                await s.call_tool("stash_all", {"repo": hints["repo"]})
            assert _lines(audit) == ran

            with pytest.raises(MCPError, match="no report.json"):
                await s.read_resource("specdoctor://report/latest")
            for name, verdict, age in (("old", "inconclusive", 100), ("new", "no-regression", 0)):
                (runs / name).mkdir(parents=True)
                (runs / name / "report.json").write_text(json.dumps({"verdict": verdict}))
                os.utime(runs / name / "report.json", (1e9 - age, 1e9 - age))
            latest = await s.read_resource("specdoctor://report/latest")
            assert json.loads(latest.contents[0].text) == {"verdict": "no-regression"}

    anyio.run(main)
    assert "Traceback" not in (tmp_path / "mcp-stderr.log").read_text()


def test_mutations_are_exposed_only_when_allowed_and_undone_on_exit(tmp_path: Path, home: Path, repo: Path) -> None:
    before = tree_state(repo)
    env = child_env(home)

    async def main() -> None:
        async with session(["--host", "local", "--allow-mutations"], env, tmp_path) as (s, instructions):
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == {x.name for x in registry.all()}
            assert tools["stash_all"].annotations.destructive_hint is True
            assert "restored" in instructions
            res = await s.call_tool("stash_all", {"repo": str(repo)})
            assert res.structured_content["status"] == "ok", res.structured_content["summary"]
            assert tree_state(repo) != before  # really mutated while the session lives

    anyio.run(main)
    log = (tmp_path / "mcp-stderr.log").read_text()
    assert tree_state(repo) == before, log  # put back when the MCP client went away
    assert "backed up" in log and "cleanup restore_worktree" in log
