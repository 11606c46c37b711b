"""Pins the public surface (`__all__`) of the foundation packages: changing it must be a deliberate act."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "specdoctor.host": [
        "AuditEntry", "AuditLog", "Host", "HostHints", "HostSpec", "LocalHost", "MockHost", "Raw", "Result",
        "open_host", "parse_host_spec", "quote_command",
    ],
    "specdoctor.toolkit": [
        "ApprovalRequest", "Effect", "ToolContext", "ToolRegistry", "ToolResult", "ToolSpec", "ToolStatus",
        "registry", "tool",
    ],
    "specdoctor.errors": [
        "SpecdoctorError", "ResultShapeError", "UsageError", "HostError", "HostUnreachable", "HostAuthFailed", "HostKeyRejected",
        "ConnectionLost", "CommandFailed", "CommandTimedOut", "RepoRefused", "BackupError", "ScenarioError",
        "ToolRetry", "ToolFailed", "NoData", "Unresolved",
    ],
    "specdoctor.testing": ["SSHServer", "ensure_git_safe_directory", "ensure_user", "start_sshd"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_all_is_pinned_and_every_name_exists(module: str) -> None:
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PUBLIC[module])
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert missing == []


def test_exit_codes_are_stable_and_distinct() -> None:
    from specdoctor import errors

    codes = {name: getattr(errors, name).exit_code for name in PUBLIC["specdoctor.errors"]}
    assert codes["UsageError"] == 2
    assert (codes["HostUnreachable"], codes["HostAuthFailed"], codes["HostKeyRejected"]) == (11, 12, 13)
    assert (codes["ConnectionLost"], codes["CommandFailed"], codes["CommandTimedOut"]) == (14, 15, 16)
    host_codes = [codes[n] for n in PUBLIC["specdoctor.errors"] if issubclass(getattr(errors, n), errors.HostError)]
    assert len(host_codes) == len(set(host_codes))
    assert all(issubclass(getattr(errors, n), errors.SpecdoctorError) for n in PUBLIC["specdoctor.errors"])
