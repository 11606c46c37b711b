"""Secret redaction for everything specdoctor stores or prints (audit log, reports, checkpoints)."""

from __future__ import annotations

import re
import threading

__all__ = ["is_secret_name", "redact_value", "redact_env", "redact_text", "remember_secret", "REDACTED"]

REDACTED = "***REDACTED***"

# Matched per `_`-separated word, not as a substring: GIT_AUTHOR_NAME is no secret, and treating it as one
# would remember its value (e.g. "specdoctor") and scrub that word from every later text.
_SECRET_WORD = re.compile(r"^(AUTH|CREDENTIALS?|PASS|PASSWORD|PASSWD|SECRETS?|[A-Z0-9]*(TOKEN|KEY|SECRET|PASSWORD))$")
# Names that match the pattern above but are not secrets.
_NOT_SECRET = {"SSH_AUTH_SOCK", "KEY_FILE", "PUBLIC_KEY", "TOKENIZERS_PARALLELISM", "NCCL_IB_PKEY"}
_URL_CRED = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:/@\s]+):(?P<pw>[^@/\s]+)@")
# NUL ends a value too: /proc/PID/environ text is NAME=value\0NAME=value...
_ASSIGN = re.compile(r"\b(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>[^\s'\"\x00]+)")
# Command-line flags whose value is a secret: a dash-separated part is exactly key/token/secret/password/...
# (so `--api-key X` and `--hf-token=X` are caught, `--tokenizer-path` is not).
_SECRET_FLAG = re.compile(r"(--(?:[A-Za-z0-9]+-)*(?:key|token|secret|password|passwd|auth)(?:-[A-Za-z0-9]+)*)"
                          r"(=|\s+)(?!-)([^\s'\"]+)", re.IGNORECASE)
_TOKEN_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{8,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{16,})\b")

_known: set[str] = set()
_lock = threading.Lock()


def is_secret_name(name: str) -> bool:
    """True for env-var names that look like they hold secrets (`*TOKEN*`, `*KEY*`, ...)."""
    upper = name.upper()
    words = re.split(r"[_\-.]+", upper)
    # "..._PER_TOKEN" names a rate or a mode (SGLANG_USE_AITER_FP8_PER_TOKEN), not a token
    return upper not in _NOT_SECRET and any(
        _SECRET_WORD.match(w) and not (i and words[i - 1] == "PER") for i, w in enumerate(words))


def remember_secret(value: str) -> None:
    """Remember a secret value seen anywhere so later text containing it is scrubbed too."""
    if len(value) >= 6:
        with _lock:
            _known.add(value)


def redact_value(name: str, value: str) -> str:
    """Value as it may be stored: secret names and URL credentials are redacted."""
    if is_secret_name(name):
        remember_secret(value)
        return REDACTED
    return _URL_CRED.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", value)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """A copy of an environment with secret-looking values redacted."""
    return {k: redact_value(k, v) for k, v in env.items()}


def redact_text(text: str) -> str:
    """Scrub free text: NAME=value assignments with secret names, URL credentials, token shapes, known secrets."""
    if not text:
        return text
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _ASSIGN.sub(lambda m: f"{m['name']}={REDACTED}" if is_secret_name(m["name"]) else m[0], text)
    text = _URL_CRED.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    text = _SECRET_FLAG.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}", text)
    return _TOKEN_SHAPES.sub(REDACTED, text)
