"""Test helpers that ship with specdoctor: a throwaway real OpenSSH server on loopback."""

from specdoctor.testing.sshd import SSHServer, ensure_git_safe_directory, ensure_user, start_sshd

__all__ = ["SSHServer", "ensure_git_safe_directory", "ensure_user", "start_sshd"]
