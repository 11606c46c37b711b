"""Bad input at the CLI (hosts, keys, host keys, specs, options, files): one line, stable exit code, no traceback."""

from __future__ import annotations

from pathlib import Path

from specdoctor.testing import SSHServer

from .badinput import run_bad_campaign


def test_every_bad_input_is_one_line_with_its_exit_code(sshd: SSHServer, tmp_path: Path):
    outcomes = run_bad_campaign(sshd, tmp_path)
    assert len(outcomes) >= 20
    bad = [o for o in outcomes if not o.one_line]
    assert not bad, "\n".join(f"{o.case.name}: exit {o.code}: {o.stderr.strip()[-400:]}" for o in bad)


def test_nothing_is_written_on_the_host_when_it_cannot_be_reached(sshd: SSHServer, tmp_path: Path):
    """Refused connections (auth, host key) leave no ~/.specdoctor on the host and no run record locally."""
    def ours(h) -> str:
        """What specdoctor would leave in the login's home, less runs/ (below): every path with its type, and each
        file's digest. Not `ls -la`: its '..' is the shared /tmp, whose link count other workers change (seen)."""
        return h.run(f"cd {h.home()}/.specdoctor 2>/dev/null && "
                     "{ find . -path ./runs -prune -o -printf '%y %p\\n' | sort; "
                     "find . -path ./runs -prune -o -type f -exec sha256sum {} + | sort; }; true").stdout

    def runs(h) -> dict[str, str]:
        """runs/<id>/ of the shared login home (/tmp): parallel test workers' runs write there meanwhile (seen: a
        started.json of another worker's run), so a new one counts only if it names this campaign's folder."""
        res = h.run(f"cd {h.home()}/.specdoctor/runs 2>/dev/null && for d in *; do printf '%s\\0' \"$d\"; "
                    f"cat \"$d\"/* 2>/dev/null | grep -c -F {str(tmp_path)!r}; done; true").stdout
        return dict(x.split("\0", 1) for x in res.splitlines() if "\0" in x)

    with sshd.connect() as h:
        before, runs_before = ours(h), runs(h)
    outcomes = run_bad_campaign(sshd, tmp_path, only=lambda c: c.kind in ("host-auth", "host-key",
                                                                           "host-unreachable"))
    assert len(outcomes) == 7 and all(o.one_line for o in outcomes)
    with sshd.connect() as h:
        assert ours(h) == before
        new = {d: n for d, n in runs(h).items() if d not in runs_before}
    assert all(n.strip() == "0" for n in new.values()), new
    assert not (tmp_path / "sdhome" / "runs").exists() or not any((tmp_path / "sdhome" / "runs").iterdir())
