"""Start-up of the `specdoctor` command as a whole process, against `python -c 'import typer, rich'` in the same run.

Run: `.venv/bin/python benchmarks/cli_startup.py [--runs 15] [--before DIR] [--json]`.
Each round runs the yardstick and every command once, in turn, so a machine that slows down mid-run slows all of
them alike; the ratio is taken round by round and its median printed. Goal (issue #51): `specdoctor --help`
median ratio <= 3. `--before DIR` also times a source tree at DIR (e.g. `git archive OLD | tar -x -C DIR`) with
this venv's packages, so before and after share the run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

__all__ = ["Row", "bench", "main"]

_COMPLETE = {"_SPECDOCTOR_COMPLETE": "complete_bash", "COMP_WORDS": "specdoctor investigate --ho", "COMP_CWORD": "2"}
_COMPLETE_NAME = {"_SPECDOCTOR_COMPLETE": "complete_bash", "COMP_WORDS": "specdoctor inv", "COMP_CWORD": "1"}


class Row(BaseModel):
    """One command's wall seconds over the rounds and its ratio to the yardstick in the same rounds."""

    name: str
    median_s: float
    min_s: float
    max_s: float
    ratio_median: float | None = None


def _wall(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return took


def bench(runs: int, before: str | None) -> list[Row]:
    """Time each command `runs` times, interleaved with the yardstick; one warm-up round is not counted."""
    py = sys.executable
    home = tempfile.mkdtemp(prefix="sd-startup-")  # no config file: what a first run sees
    base = {**os.environ, "XDG_CONFIG_HOME": home}
    cases: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c 'import typer, rich'": ([py, "-c", "import typer, rich"], base),
        "specdoctor --help": ([py, "-m", "specdoctor", "--help"], base),
        "specdoctor --version": ([py, "-m", "specdoctor", "--version"], base),
        "completion (inv<TAB>)": ([py, "-m", "specdoctor"], {**base, **_COMPLETE_NAME}),
        "completion (investigate --ho<TAB>)": ([py, "-m", "specdoctor"], {**base, **_COMPLETE}),
    }
    if before:
        old = {**base, "PYTHONPATH": str(Path(before).resolve())}  # ahead of the editable install's finder
        cases["before: specdoctor --help"] = ([py, "-m", "specdoctor", "--help"], old)
        cases["before: completion (inv<TAB>)"] = ([py, "-m", "specdoctor"], {**old, **_COMPLETE_NAME})
        cases["before: completion (investigate --ho<TAB>)"] = ([py, "-m", "specdoctor"], {**old, **_COMPLETE})
    times: dict[str, list[float]] = {k: [] for k in cases}
    for i in range(runs + 1):
        for name, (argv, env) in cases.items():
            t = _wall(argv, env, home)  # not the checkout: `-m` would put it ahead of --before's tree
            if i:
                times[name].append(t)
    yard = times["python -c 'import typer, rich'"]
    rows = []
    for name, ts in times.items():
        ratio = statistics.median(t / y for t, y in zip(ts, yard, strict=True))
        rows.append(Row(name=name, median_s=statistics.median(ts), min_s=min(ts), max_s=max(ts),
                        ratio_median=round(ratio, 2)))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--before", help="a source tree of an older specdoctor to time in the same run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = bench(args.runs, args.before)
    if args.json:
        print(json.dumps([r.model_dump() for r in rows], indent=2))
    else:
        print(f"{'command':46} {'median s':>9} {'min s':>7} {'max s':>7} {'ratio':>6}")
        for r in rows:
            print(f"{r.name:46} {r.median_s:9.3f} {r.min_s:7.3f} {r.max_s:7.3f} {r.ratio_median or 0:6.2f}")
    help_row = next(r for r in rows if r.name == "specdoctor --help")
    return 0 if (help_row.ratio_median or 99) <= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
