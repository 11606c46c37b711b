"""The report of a real `sim:seed` investigation (the twin, real git, real processes): short report.md with
commands.md beside it, no raw id lists or fragments, PNGs beside it, and in Chromium it fits and links work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.report.writer import load_report

from .browser import check_page

SNAPSHOTS = Path(__file__).parent / "snapshots"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    mp = pytest.MonkeyPatch()
    mp.setenv("SPECDOCTOR_HOME", str(home))
    try:
        out = tmp_path_factory.mktemp("seed") / "out"
        investigate(InvestigateOptions(host="sim:seed", yes=True, out=str(out)))
    finally:
        mp.undo()
    return out


def test_report_md_is_short_and_commands_md_is_beside_it(run_dir: Path) -> None:
    md = (run_dir / "report.md").read_text()
    report = load_report(run_dir)
    # 270: the measured phase times (#31) added a phase line, a 'phases' decision row and the break-even's measured
    # lines; 280: the game plan's levers (#48) and the workload line; the bound still catches a section that dumps
    # rows (the appendix stays in commands.md)
    assert len(md.splitlines()) < 280, len(md.splitlines())
    commands = (run_dir / "commands.md").read_text()
    assert len(report.commands) > 100
    for i in (0, len(report.commands) // 2, len(report.commands) - 1):
        assert f'<a id="cmd-{i}"></a>' in commands
    for link in set(re.findall(r"\(commands\.md#([a-z0-9-]+)\)", md)):
        assert f'<a id="{link}"></a>' in commands, link
    for png in re.findall(r"\]\(([a-z]+\.png)\)", md):
        assert (run_dir / png).stat().st_size > 5000, png


def test_no_raw_id_lists_fragments_or_reprs(run_dir: Path) -> None:
    md = (run_dir / "report.md").read_text()
    assert not re.search(r"#\d+, #\d+", md), "raw command-id list"
    assert "…" not in " ".join(re.findall(r"#\d+ … #\d+", md))
    assert not re.search(r"median — ", md) and "Variables not checked" not in md
    assert "{'" not in md and "[{" not in md, "a Python repr"
    claims = md.split("## Claims vs measured\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in claims.splitlines() if line.startswith("| ") and "metric" not in line]
    assert rows and all("commands.md#" in row for row in rows), "claims without evidence"
    header = next(line for line in claims.splitlines() if line.startswith("| metric"))
    for line in md.splitlines():            # no column that is empty in every row of its table
        assert not re.fullmatch(r"\|( — \|)+", line.strip())
    assert "| p |" not in header or all(not row.split("|")[-3].strip() == "—" for row in rows)


def test_verdict_reads_plainly(run_dir: Path) -> None:
    md = (run_dir / "report.md").read_text()
    answer = md.split("## Verdict and what to do\n", 1)[1].split("\n## ", 1)[0]
    assert "`baseline-not-reproducible`" in answer
    assert re.search(r"Not reproduced on this box today: .*spec: claimed 94\.0, measured \d+\.\d tok/s", answer)
    assert "Measured gap (spec)" in answer and "Box left as found" in answer
    assert "| 1 |" in answer and "| 3 |" in answer           # the top three actions
    assert "sglang.launch_server" in answer                   # …with the exact command where one exists
    assert "--speculative" not in answer.split("Serve without speculation", 1)[1].split("\n", 1)[0]


def test_verdict_section_snapshot(run_dir: Path) -> None:
    """The answer's shape (numbers, paths, hashes and ports normalised) stays as reviewed."""
    md = (run_dir / "report.md").read_text()
    answer = md.split("## Verdict and what to do\n", 1)[1].split("\n## ", 1)[0]
    norm = re.sub(r"/tmp/[^\s`|]+", "<path>", answer)
    norm = re.sub(r"\b[0-9a-f]{12}\b", "<hash>", norm)
    norm = re.sub(r"[-+]?\d+\.\d+|\b\d{4,5}\b", "<n>", norm)
    norm = re.sub(r"\b\d+ (launch(?:es)?|min)\b|\bmade \d+", lambda m: re.sub(r"\d+", "<n>", m.group(0)), norm)
    path = SNAPSHOTS / "sim_seed_answer.md"
    import os

    if os.environ.get("SPECDOCTOR_UPDATE_SNAPSHOTS") == "1":
        path.write_text(norm)
    assert norm == path.read_text()


def test_in_chromium_it_fits_and_every_link_opens(run_dir: Path) -> None:
    for check in check_page(run_dir / "report.html"):
        assert check.overflow["nbad"] == 0 and check.overflow_open["nbad"] == 0, check.overflow["bad"]
        assert check.verdict_box is not None and check.verdict_box["y"] + check.verdict_box["height"] < 900
        assert check.no_data == [] and {p["id"] for p in check.plots} >= {"plot-waterfall", "plot-breakeven",
                                                                          "plot-nccl", "plot-throughput"}
        assert all(p["w"] > 300 for p in check.plots)
        assert len(check.evidence) > 10 and all(e["open"] and e["commands"] > 0 for e in check.evidence)
