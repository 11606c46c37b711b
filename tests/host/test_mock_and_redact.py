"""MockHost (handler-driven unit-test host) and secret redaction rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdoctor.errors import CommandFailed, UsageError
from specdoctor.host import MockHost, Raw, Result
from specdoctor.host.redact import REDACTED, is_secret_name, redact_env, redact_text, redact_value


def test_mock_host_answers_with_each_handler_shape(tmp_path: Path) -> None:
    seen: list[tuple[object, dict[str, str], str | None]] = []

    def handler(cmd: list[str] | str, env: dict[str, str], cwd: str | None) -> Result | tuple[int, str, str] | str:
        seen.append((cmd, env, cwd))
        if cmd == ["nvidia-smi"]:
            return "GPU 0: H200\n"
        if isinstance(cmd, str):
            return (3, "", "script failed\n")
        return Result(command=cmd, stdout="from result", exit=0)

    host = MockHost(handler, files={"/etc/os-release": b"ID=debian\n"})
    assert host.run(["nvidia-smi"]).stdout == "GPU 0: H200\n"
    assert host.run(["git", "status"], cwd="/repo", env={"A": "1"}).stdout == "from result"
    with pytest.raises(CommandFailed) as info:
        host.run(Raw("exit 3"))
    assert info.value.result.stderr == "script failed\n"
    assert host.calls == [["nvidia-smi"], ["git", "status"], "exit 3"]
    assert seen[1] == (["git", "status"], {"A": "1"}, "/repo")
    assert [e.exit for e in host.audit.entries] == [0, 0, 3]


def test_mock_host_files_and_forward(tmp_path: Path) -> None:
    host = MockHost(lambda *_: "")
    host.put(b"abc", "/x/y")
    src = tmp_path / "f"
    src.write_bytes(b"\x00\xff")
    host.put(src, "/x/z")
    assert (host.read("/x/y"), host.read("/x/z")) == (b"abc", b"\x00\xff")
    with pytest.raises(UsageError, match="/missing"):
        host.read("/missing")
    with host.forward(30000) as port:
        assert port == 30000


def test_mock_host_rejects_nul_before_the_handler() -> None:
    host = MockHost(lambda *_: "")
    with pytest.raises(UsageError):
        host.run(["echo", "\x00"])
    assert host.calls == []


@pytest.mark.parametrize("name", ["HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "github_token",
                                  "HUGGING_FACE_HUB_TOKEN", "MY_CREDENTIALS", "AUTH_HEADER", "APIKEY", "accessToken",
                                  "WANDB_API_KEY", "ANTHROPIC_API_KEY", "SLACK_SECRET", "HF_HUB_TOKEN"])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)
    assert redact_value(name, "some-value-123") == REDACTED


@pytest.mark.parametrize("name", ["PATH", "NCCL_PROTO", "SSH_AUTH_SOCK", "TOKENIZERS_PARALLELISM", "CUDA_VISIBLE_DEVICES",
                                  "GIT_AUTHOR_NAME", "GIT_AUTHOR_DATE", "SGLANG_USE_AITER_FP8_PER_TOKEN",
                                  "MAX_NEW_TOKENS", "PWD", "NCCL_IB_PKEY"])
def test_non_secret_names_keep_values(name: str) -> None:
    assert not is_secret_name(name)
    assert redact_value(name, "value") == "value"


def test_redact_env_keeps_names() -> None:
    assert redact_env({"HF_TOKEN": "hf_x", "NCCL_ALGO": "Ring"}) == {"HF_TOKEN": REDACTED, "NCCL_ALGO": "Ring"}


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("export HF_TOKEN=hf_abc12345XYZ done", "hf_abc12345XYZ"),
        ("OPENAI_API_KEY=sk-verysecretvalue", "sk-verysecretvalue"),
        ("key is sk-proj-abcdefgh1234 in prose", "sk-proj-abcdefgh1234"),
        ("token hf_ABCDEFGHabcdefgh seen", "hf_ABCDEFGHabcdefgh"),
        ("git clone https://user:p4ssw0rd@github.com/x/y", "p4ssw0rd"),
        ("AKIAABCDEFGHIJKLMNOP leaked", "AKIAABCDEFGHIJKLMNOP"),
        ("ghp_abcdefghijklmnop1234 token", "ghp_abcdefghijklmnop1234"),
    ],
)
def test_redact_text_scrubs_secrets(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out and REDACTED in out


def test_values_seen_under_secret_names_are_scrubbed_anywhere_later() -> None:
    redact_value("MY_SERVICE_TOKEN", "plainlookingvalue42")
    assert redact_text("the server printed plainlookingvalue42 in a log") == f"the server printed {REDACTED} in a log"


def test_git_identity_is_not_remembered_as_a_secret() -> None:
    """A substring match on AUTH once made GIT_AUTHOR_NAME=specdoctor scrub "specdoctor" from every report."""
    assert redact_env({"GIT_AUTHOR_NAME": "specdoctor"}) == {"GIT_AUTHOR_NAME": "specdoctor"}
    assert redact_text("specdoctor report") == "specdoctor report"


def test_redact_text_leaves_ordinary_text_alone() -> None:
    text = "NCCL_PROTO=Simple python -m sglang.launch_server --tp 2 --speculative-algorithm EAGLE3"
    assert redact_text(text) == text
