"""`investigate --good-ref REF`: the parameter it sets, and a ref checked on the host before anything runs.

The CLI runs in-process on a twin whose server is not started (a refused ref must exit before any launch, so none
is needed); the sandbox's git checkout is real.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from specdoctor.cli import main
from specdoctor.commands.good_ref import check_good_ref, good_ref_params
from specdoctor.errors import UsageError
from specdoctor.sim import SimHost, build_sandbox
from specdoctor.tools.checkout.commits import CommitCatalog


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def box() -> Any:
    b = build_sandbox("upstream-innocent", start_server=False)
    host = SimHost(b)
    yield b, host
    host.close()


def test_flag_sets_the_parameter_and_refuses_a_disagreeing_param() -> None:
    assert good_ref_params({"runs": 5}, " v0.5.9 ") == {"runs": 5, "good_ref": "v0.5.9"}
    assert good_ref_params({"good_ref": "v0.5.9"}, "v0.5.9")["good_ref"] == "v0.5.9"
    assert good_ref_params({"good_ref": 1234567}, None) == {"good_ref": "1234567"}  # a short sha parsed as JSON
    assert good_ref_params({}, None) == {}
    with pytest.raises(UsageError, match="disagree"):
        good_ref_params({"good_ref": "v0.5.8"}, "v0.5.9")
    with pytest.raises(UsageError, match="takes a commit"):
        good_ref_params({}, "  ")


def test_ref_resolves_by_sha_tag_and_date_or_is_refused(box) -> None:
    b, host = box
    line = _git(b.repo, "rev-list", "--first-parent", "--reverse", "HEAD").split()
    assert check_good_ref(host, b.repo, None) is None
    assert check_good_ref(host, b.repo, line[3][:12]) == line[3]
    # the twin's commits are 6 h apart from 2026-01-12 09:30: the base is the last one before 10:00
    assert check_good_ref(host, b.repo, "2026-01-12 10:00") == line[0]
    with pytest.raises(UsageError, match="not a commit, tag or date"):
        check_good_ref(host, b.repo, "no-such-tag")
    with pytest.raises(UsageError, match="older than"):  # a bare date is its midnight: before the base
        check_good_ref(host, b.repo, "2026-01-12")
    with pytest.raises(UsageError, match="--repo"):
        check_good_ref(host, None, "v0.5.9")


def test_a_ref_off_heads_line_is_refused(box) -> None:
    b, host = box
    tree = _git(b.repo, "rev-parse", "HEAD^{tree}")
    stray = subprocess.run(["git", "-C", b.repo, "commit-tree", tree, "-m", "stray"], capture_output=True, text=True,
                           check=True, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                                            "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout.strip()
    with pytest.raises(UsageError, match="not an ancestor of HEAD"):
        check_good_ref(host, b.repo, stray)


def test_cli_refuses_an_unknown_ref_in_one_line_before_any_launch(box, monkeypatch, tmp_path, capsys) -> None:
    b, host = box
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(host, "close", lambda: None)  # the module's fixture closes it
    monkeypatch.setattr("specdoctor.host.open_host", lambda *a, **k: host)
    head = _git(b.repo, "rev-parse", "HEAD")
    with pytest.raises(SystemExit) as exited:
        main(["investigate", "--host", "sim:upstream-innocent", "--yes", "--good-ref", "v9.9.9",
              "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("specdoctor: error [usage]: --good-ref: 'v9.9.9' is not a commit, tag or date")
    assert not (tmp_path / "out").exists() and _git(b.repo, "rev-parse", "HEAD") == head
    assert not host.run(["sh", "-c", "ls $HOME/.specdoctor/runs 2>/dev/null; true"]).stdout.strip()


def test_the_catalogue_line_says_where_the_reference_came_from() -> None:
    cat = CommitCatalog(repo="/r", good="a" * 40, good_source="--good-ref v0.5.9", head="b" * 40)
    assert cat.summary_line().startswith("reference commit: aaaaaaaaaa (from --good-ref v0.5.9); 0 upstream commits")
