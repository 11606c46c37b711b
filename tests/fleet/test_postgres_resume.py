"""A survey checkpointed to a real PostgreSQL server by one process is listed and resumed by another."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from specdoctor.sim.fleet import build_fleet
from specdoctor.testing.postgres import PostgresServer, find_pg_bin, start_postgres

SPECDOCTOR = str(Path(sys.executable).with_name("specdoctor"))


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    if find_pg_bin() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed: apt-get install postgresql")
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


def _rows_written(url: str) -> int:
    """Rows channel writes in the store (the run's input counts as one; each finished host adds one)."""
    import psycopg

    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT count(*) FROM checkpoint_writes WHERE channel = 'rows'").fetchone()
    except psycopg.Error:  # the tables appear when the first controller sets the store up
        return 0
    return int(row[0]) if row else 0


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SPECDOCTOR, "survey", *args], capture_output=True, text=True, env=env, timeout=300)


def test_survey_killed_on_one_controller_is_listed_and_resumed_on_another(postgres, tmp_path):
    # Each controller gets its own home: nothing is shared but the Postgres store.
    env_a = {**os.environ, "SPECDOCTOR_HOME": str(tmp_path / "a")}
    env_b = {**os.environ, "SPECDOCTOR_HOME": str(tmp_path / "b")}
    with build_fleet("alike", size=2, planted=[]) as fleet:
        first = subprocess.Popen([SPECDOCTOR, "survey", *fleet.cli_options(), "--parallel", "1",
                                  "--checkpoint", postgres.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env_a)
        try:
            deadline = time.monotonic() + 240
            while _rows_written(postgres.url) < 2 and time.monotonic() < deadline and first.poll() is None:
                time.sleep(0.1)
        finally:  # never leave the controller running (and its pipes open) when the wait fails
            first.send_signal(signal.SIGKILL)
            first.communicate(timeout=30)
        assert first.returncode == -signal.SIGKILL, "the first controller finished before it could be interrupted"

        listed = _cli("--list", "--json", "--checkpoint", postgres.url, env=env_b)
        assert listed.returncode == 0, listed.stderr
        runs = json.loads(listed.stdout)
        assert len(runs) == 1 and not runs[0]["finished"]
        before = runs[0]["surveyed"]
        assert 1 <= before < runs[0]["hosts"] == len(fleet.names)

        resumed = _cli("--resume", runs[0]["run_id"], "--json", "--checkpoint", postgres.url,
                       "--out", str(tmp_path / "report"), env=env_b)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        run = json.loads(resumed.stdout)
        rows = {r["name"]: r for r in run["rows"]}
        assert sorted(rows) == sorted(fleet.names)
        by_first = [n for n, r in rows.items() if r["controller"].endswith(f":{first.pid}")]
        assert len(by_first) == before, "the hosts the first controller finished were surveyed again"
        assert sorted(run["resumed_rows"]) == sorted(set(fleet.names) - set(by_first))
        assert all(not rows[n]["controller"].endswith(f":{first.pid}") for n in run["resumed_rows"])
        assert {rows[n]["status"] for n in fleet.names if n in fleet.sandboxes} == {"ok"}, \
            {n: (r["status"], r.get("error")) for n, r in rows.items()}
        assert rows["h09"]["status"] == "unreachable"
        assert run["analysis"]["outliers"] == []

        again = json.loads(_cli("--list", "--json", "--checkpoint", postgres.url, env=env_a).stdout)
        assert again[0]["finished"] and again[0]["surveyed"] == len(fleet.names)
        refused = _cli("--resume", runs[0]["run_id"], "--checkpoint", postgres.url, env=env_a)
        assert refused.returncode == 2 and "finished" in refused.stderr
