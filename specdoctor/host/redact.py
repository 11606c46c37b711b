"""Secret redaction for everything specdoctor stores or prints (audit log, reports, checkpoints)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from functools import lru_cache

__all__ = ["is_secret_name", "redact_value", "redact_env", "redact_text", "remember_secret", "REDACTED"]

REDACTED = "***REDACTED***"

# Matched per `_`-separated word, not as a substring: GIT_AUTHOR_NAME is no secret, and treating it as one
# would remember its value (e.g. "specdoctor") and scrub that word from every later text.
_SECRET_WORD = re.compile(r"^(AUTH|CREDENTIALS?|PASS|PASSWORD|PASSWD|SECRETS?|[A-Z0-9]*(TOKEN|KEY|SECRET|PASSWORD))$")
# Names that match the pattern above but are not secrets.
# A bare "key" is a record's field name (Change.key, CauseFact.key: a variable or flag name), not a secret: treating
# it as one made every diff key and cause key (NCCL_PROTO, pcie-link) a "known secret" redacted from the report.
_NOT_SECRET = {"SSH_AUTH_SOCK", "KEY_FILE", "PUBLIC_KEY", "TOKENIZERS_PARALLELISM", "NCCL_IB_PKEY", "KEY"}
# Linear time on long word runs (a 20 kB argument took seconds): a scheme only starts where no letter precedes it, and
# is matched possessively. Neither changes a match: a later start in the same run of scheme characters ends where
# the earliest does (at `://`), and the earliest is tried first; nothing after the run is a scheme character.
_URL_CRED = re.compile(r"(?P<scheme>(?<![a-zA-Z])[a-zA-Z][a-zA-Z0-9+.-]*+://)(?P<user>[^:/@\s]+):(?P<pw>[^@/\s]+)@")
# NUL ends a value too: /proc/PID/environ text is NAME=value\0NAME=value...
_ASSIGN = re.compile(r"\b(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>[^\s'\"\x00]+)")
# Command-line flags whose value is a secret: a dash-separated part is exactly key/token/secret/password/...
# (so `--api-key X` and `--hf-token=X` are caught, `--tokenizer-path` is not).
_SECRET_FLAG = re.compile(r"(--(?:[A-Za-z0-9]+-)*(?:key|token|secret|password|passwd|auth)(?:-[A-Za-z0-9]+)*)"
                          r"(=|\s+)(?!-)([^\s'\"]+)", re.IGNORECASE)
# Shapes real credentials have, whatever surrounds them (a whole AWS key pair `AKIA…:secret` included).
_TOKEN_SHAPES = re.compile(
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}(?::[A-Za-z0-9/+=]{16,})?"  # AWS access key id (+ its secret)
    r"|\bsk-(?:proj-|ant-(?:api\d\d-)?)?[A-Za-z0-9_-]{8,}"  # OpenAI / Anthropic
    r"|\b[sr]k_(?:live|test)_[A-Za-z0-9]{10,}"  # Stripe
    r"|\bhf_[A-Za-z0-9]{8,}|\bgh[pousr]_[A-Za-z0-9]{16,}|\bgithub_pat_[A-Za-z0-9_]{20,}"  # Hugging Face / GitHub
    r"|\bglpat-[A-Za-z0-9_-]{16,}|\bxox[abposr]-[A-Za-z0-9-]{10,}|\bnpm_[A-Za-z0-9]{30,}"  # GitLab / Slack / npm
    r"|\bAIza[0-9A-Za-z_-]{30,}"  # Google API key
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # a JWT
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S)
# name='v' / name="v" / "name": "v" / 'name': 'v' / name: v / name = v, where the name is secret-looking
# (api_key, hf_token, aws_secret_access_key, password, ...): Python reprs (ServerArgs(api_key='…')), JSON, YAML.
# The name starts where no letter precedes it and is matched possessively, for the same reason as _URL_CRED.
_QUOTED = re.compile(r"""(?P<lead>(?P<q0>["']?)(?<![A-Za-z_])(?P<name>[A-Za-z_][A-Za-z0-9_.-]*+)(?P=q0)\s*(?::|=|=>)\s*)"""
                     r"""(?P<q>["'])(?P<value>(?:\\.|(?!(?P=q)).)*)(?P=q)""")
_COLON = re.compile(r"(?P<lead>\b(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)[ \t]*[:=][ \t]*)(?P<value>[^\s'\",;}\]]+)")
# HTTP credentials: Authorization / Proxy-Authorization headers and any `Bearer X` / `Basic X` / `Token X`.
_AUTH_HEADER = re.compile(r"(?P<lead>\b(?:Proxy-)?Authorization\b[\"']?\s*[:=]\s*[\"']?"
                          r"(?:(?:Bearer|Basic|Token|Digest|Negotiate)\s+)?)(?P<value>[^\s\"',;]+)", re.I)
_BEARER = re.compile(r"(?P<lead>\b(?:Bearer|Basic|Token)\s+)(?P<value>[A-Za-z0-9._~+/=-]{8,})")
# Prose: "password hunter2", "secret is x", "passwd: y" — the word, then a value that does not read as a word.
_WORD_SECRET = re.compile(r"(?P<lead>\b(?:password|passwd|passphrase|pwd|secret)\b(?:\s+is)?(?:\s*[:=]\s*|\s+))"
                          r"(?P<value>[^\s'\",;]+)", re.I)
# Flags whose value is quoted: --api-key 'x y', --password="x".
_SECRET_FLAG_QUOTED = re.compile(r"(--(?:[A-Za-z0-9]+-)*(?:key|token|secret|password|passwd|auth)(?:-[A-Za-z0-9]+)*)"
                                 r"(=|\s+)([\"'])((?:(?!\3).)*)\3", re.IGNORECASE)


# "token_usage: 0.05" is a statistic: numbers, booleans and null after a secret-looking name are left alone.
_PLAIN_SCALAR = re.compile(r"^(?:[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?%?|true|false|none|null)$", re.I)


def _looks_like_value(v: str) -> bool:
    """A token after 'password'/'secret' that is a value, not the next word of a sentence."""
    return bool(re.search(r"[0-9_/+=@#$%^&*!-]", v)) or (v != v.lower() and v != v.capitalize()) or len(v) >= 20


_known: set[str] = set()
_lock = threading.Lock()
_generation = 0
"""Bumped whenever a secret is added to `_known`: remembered redactions from before it are not reused."""


def is_secret_name(name: str) -> bool:
    """True for env-var names that look like they hold secrets (`*TOKEN*`, `*KEY*`, ...)."""
    upper = name.upper()
    words = re.split(r"[_\-.]+", upper)
    # "..._PER_TOKEN" names a rate or a mode (SGLANG_USE_AITER_FP8_PER_TOKEN), not a token
    return upper not in _NOT_SECRET and any(
        _SECRET_WORD.match(w) and not (i and words[i - 1] == "PER") for i, w in enumerate(words))


def remember_secret(value: str) -> None:
    """Remember a secret value seen anywhere so later text containing it is scrubbed too."""
    global _generation
    if len(value) >= 6:
        with _lock:
            if value not in _known:
                _known.add(value)
                _generation += 1


def redact_value(name: str, value: str) -> str:
    """Value as it may be stored: secret names and URL credentials are redacted."""
    if is_secret_name(name):
        remember_secret(value)
        return REDACTED
    return _URL_CRED.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", value)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """A copy of an environment with secret-looking values redacted."""
    return {k: redact_value(k, v) for k, v in env.items()}


def _scrub(m: re.Match[str]) -> str:
    return f"{m['lead']}{REDACTED}"


# Each step runs only where its pattern could match: a literal every match contains must be in the text (the
# case-insensitive ones checked case-insensitively, as their patterns match). Most texts (commands, paths, numbers)
# carry none of them; the steps and their order are as before (tests/host/test_redact_linear.py checks both ways).
_MAY_AUTH = re.compile(r"authorization", re.I)
_MAY_WORD = re.compile(r"pass|pwd|secret", re.I)
_Step = tuple[re.Pattern[str], Callable[[re.Match[str]], str] | str, Callable[[str], bool]]
_STEPS: list[_Step] = [
    (_TOKEN_SHAPES, REDACTED, lambda t: True),
    (_QUOTED, lambda m: m[0] if not is_secret_name(m["name"]) or m["value"] == REDACTED else
     f"{m['lead']}{m['q']}{REDACTED}{m['q']}", lambda t: ("'" in t or '"' in t) and (":" in t or "=" in t)),
    (_ASSIGN, lambda m: f"{m['name']}={REDACTED}" if is_secret_name(m["name"]) else m[0], lambda t: "=" in t),
    (_COLON, lambda m: _scrub(m) if is_secret_name(m["name"]) and m["value"] != REDACTED
     and not _PLAIN_SCALAR.match(m["value"]) else m[0], lambda t: ":" in t or "=" in t),
    (_URL_CRED, lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", lambda t: "://" in t and "@" in t),
    (_SECRET_FLAG_QUOTED, lambda m: f"{m[1]}{m[2]}{m[3]}{REDACTED}{m[3]}", lambda t: "--" in t),
    (_SECRET_FLAG, lambda m: f"{m[1]}{m[2]}{REDACTED}", lambda t: "--" in t),
    (_AUTH_HEADER, lambda m: m[0] if m["value"] == REDACTED else _scrub(m), lambda t: bool(_MAY_AUTH.search(t))),
    (_BEARER, lambda m: m[0] if m["value"].startswith(REDACTED) else _scrub(m),
     lambda t: "Bearer" in t or "Basic" in t or "Token" in t),
    (_WORD_SECRET, lambda m: _scrub(m) if _looks_like_value(m["value"]) and REDACTED not in m["value"] else m[0],
     lambda t: bool(_MAY_WORD.search(t))),
]
_CACHED_CHARS = 4096
"""Texts up to this long are remembered (a report renders the same command lines and prose several times)."""


def redact_text(text: str) -> str:
    """Scrub free text: secret-named assignments (plain, quoted, JSON, repr), credentials in URLs, headers and
    flags, password/secret words, token shapes (AWS pairs, sk-, hf_, ghp_, JWTs, private keys) and known secrets."""
    if not text:
        return text
    if len(text) > _CACHED_CHARS:
        return _redact(text)
    return _redact_cached(text, _generation)


@lru_cache(maxsize=8192)
def _redact_cached(text: str, generation: int) -> str:
    """`_redact`, remembered per set of known secrets (`generation` changes whenever one is added)."""
    return _redact(text)


def _redact(text: str, *, guarded: bool = True) -> str:
    """The steps in order; `guarded=False` runs every step (the reference the guards are tested against)."""
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, REDACTED)
    for pattern, repl, may_match in _STEPS:
        if not guarded or may_match(text):
            text = pattern.sub(repl, text)
    return text
