"""Property: any argv (shell metacharacters, quotes, newlines, globs, unicode) reaches the program unchanged."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdoctor.errors import UsageError
from specdoctor.host import Host, LocalHost
from specdoctor.testing import SSHServer

ECHO = "import json,os,sys; print(json.dumps([sys.argv[1:], os.environ.get('SD_PROP')]))"

_NASTY = [";", "&&", "||", "|", "&", "$(", ")", "`", "'", '"', "\\", "\n", "\r", "\t", " ", "*", "?", "[", "]",
          "{", "}", "~", "!", "#", "<", ">", "$HOME", "${IFS}", "$(id)", "`id`", "'\"'", "-e", "--", "=", "%s",
          "é", "日本語", "🙂", "\u202e", "\x1b[31m", "\x01", "\x7f"]
# Any code point but NUL (rejected by contract) and lone surrogates (not encodable as UTF-8 argv bytes).
_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_ARG = st.lists(st.one_of(st.sampled_from(_NASTY), st.text(_CHARS, max_size=4)), max_size=6).map("".join)
_ARGV = st.lists(_ARG, max_size=6)


def _roundtrip(host: Host, python: str, argv: list[str], env_value: str) -> None:
    res = host.run([python, "-c", ECHO, *argv], env={"SD_PROP": env_value})
    assert json.loads(res.stdout) == [argv, env_value]


@pytest.fixture(scope="module")
def ssh_host(sshd: SSHServer) -> Iterator[Host]:
    with sshd.connect() as h:
        yield h


@settings(max_examples=200, deadline=None)
@given(argv=_ARGV, env_value=_ARG)
def test_local_argv_is_byte_identical(argv: list[str], env_value: str) -> None:
    _roundtrip(LocalHost(), sys.executable, argv, env_value)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=_ARGV, env_value=_ARG)
def test_ssh_argv_is_byte_identical(ssh_host: Host, sshd: SSHServer, argv: list[str], env_value: str) -> None:
    _roundtrip(ssh_host, sshd.python, argv, env_value)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script_arg=_ARG)
def test_ssh_quoted_script_pieces_stay_literal(ssh_host: Host, script_arg: str) -> None:
    """A Raw pipeline built from shlex-quoted pieces passes its pieces through unchanged too."""
    import shlex

    from specdoctor.host import Raw

    res = ssh_host.run(Raw(f"printf %s {shlex.quote(script_arg)} | od -An -v -tx1"))
    assert bytes.fromhex(res.stdout.replace("\n", " ")) == script_arg.encode()


@pytest.mark.parametrize("kind", ["local", "ssh"])
@pytest.mark.parametrize("argv", [["echo", "a\x00b"], ["\x00"], ["echo", "ok", "tail\x00"]])
def test_nul_in_argv_is_rejected_and_nothing_runs(kind: str, argv: list[str], ssh_host: Host) -> None:
    host = LocalHost() if kind == "local" else ssh_host
    mark = host.audit.mark()
    with pytest.raises(UsageError, match="NUL"):
        host.run(argv)
    assert host.audit.since(mark) == []
