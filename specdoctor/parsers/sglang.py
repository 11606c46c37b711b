"""SGLang parsers: launch lines (0.5.9 and 0.5.23 flag spellings), Decode-batch log lines, HTTP bodies."""

from __future__ import annotations

import ast
import html
import itertools
import json
import math
import os
import re
import shlex
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel, Field, ValidationError

from specdoctor.errors import UsageError
from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.launch_args import LaunchArgs  # moved; re-exported for older imports
from specdoctor.parsers.text import clean_lines, clean_text, cut_marker, flag_clipped

__all__ = [
    "LaunchArgs",
    "parse_launch_command",
    "drop_speculative_flags",
    "split_command",
    "LaunchParseError",
    "DecodeLine",
    "parse_decode_lines",
    "parse_body",
    "BodyError",
    "ServerInfo",
    "normalise_server_info",
    "MetaInfo",
    "normalise_meta_info",
    "FLAG_DEST",
]

# Flag spelling -> argparse dest. Both versions' names; 0.5.23's `--cuda-graph-max-bs-decode` maps onto
# 0.5.9's `cuda_graph_max_bs` so callers see one field.
FLAG_DEST: dict[str, str] = {
    "--model-path": "model_path", "--model": "model_path", "--tokenizer-path": "tokenizer_path",
    "--host": "host", "--port": "port",
    "--tp-size": "tp_size", "--tensor-parallel-size": "tp_size",
    "--dp-size": "dp_size", "--data-parallel-size": "dp_size",
    "--ep-size": "ep_size", "--expert-parallel-size": "ep_size", "--pp-size": "pp_size",
    "--speculative-algorithm": "speculative_algorithm",
    "--speculative-draft-model-path": "speculative_draft_model_path",
    "--speculative-draft-model": "speculative_draft_model_path",
    "--speculative-draft-model-revision": "speculative_draft_model_revision",
    "--speculative-num-steps": "speculative_num_steps",
    "--speculative-eagle-topk": "speculative_eagle_topk",
    "--speculative-num-draft-tokens": "speculative_num_draft_tokens",
    "--speculative-attention-mode": "speculative_attention_mode",
    "--speculative-draft-attention-backend": "speculative_draft_attention_backend",
    "--speculative-accept-threshold-single": "speculative_accept_threshold_single",
    "--speculative-accept-threshold-acc": "speculative_accept_threshold_acc",
    "--speculative-token-map": "speculative_token_map",
    "--attention-backend": "attention_backend", "--prefill-attention-backend": "prefill_attention_backend",
    "--decode-attention-backend": "decode_attention_backend",
    "--cuda-graph-max-bs": "cuda_graph_max_bs", "--cuda-graph-max-bs-decode": "cuda_graph_max_bs",
    "--cuda-graph-max-bs-prefill": "cuda_graph_max_bs_prefill", "--cuda-graph-bs": "cuda_graph_bs",
    "--cuda-graph-backend-decode": "cuda_graph_backend_decode",
    "--cuda-graph-backend-prefill": "cuda_graph_backend_prefill", "--cuda-graph-config": "cuda_graph_config",
    "--mem-fraction-static": "mem_fraction_static", "--max-running-requests": "max_running_requests",
    "--chunked-prefill-size": "chunked_prefill_size", "--served-model-name": "served_model_name",
    "--dtype": "dtype", "--kv-cache-dtype": "kv_cache_dtype", "--context-length": "context_length",
    "--tool-call-parser": "tool_call_parser", "--reasoning-parser": "reasoning_parser",
    "--dist-init-addr": "dist_init_addr", "--nnodes": "nnodes", "--node-rank": "node_rank",
    "--decode-log-interval": "decode_log_interval", "--log-level": "log_level", "--random-seed": "random_seed",
    "--quantization": "quantization", "--load-format": "load_format", "--base-gpu-id": "base_gpu_id",
    "--page-size": "page_size", "--max-total-tokens": "max_total_tokens", "--schedule-policy": "schedule_policy",
    "--api-key": "api_key", "--json-model-override-args": "json_model_override_args",
    "--moe-a2a-backend": "moe_a2a_backend", "--moe-runner-backend": "moe_runner_backend",
    "--torch-compile-max-bs": "torch_compile_max_bs", "--watchdog-timeout": "watchdog_timeout",
}
_STORE_TRUE: dict[str, str] = {f: f[2:].replace("-", "_") for f in [
    "--disable-cuda-graph", "--disable-decode-cuda-graph", "--disable-prefill-cuda-graph",
    "--disable-custom-all-reduce", "--trust-remote-code", "--enable-torch-compile", "--disable-radix-cache",
    "--enable-metrics", "--enable-dp-attention", "--disable-overlap-schedule", "--enable-symm-mem",
    "--enable-nccl-nvls", "--skip-server-warmup", "--enable-mm-global-cache", "--keep-mm-feature-on-device",
    "--enable-cache-report", "--disable-cuda-graph-padding", "--enable-mixed-chunk", "--log-requests",
    "--skip-tokenizer-init", "--enable-metrics-for-all-schedulers",
]}
_NARGS_PLUS = {"cuda_graph_bs"}
_INT = {"tp_size", "dp_size", "ep_size", "pp_size", "port", "speculative_num_steps", "speculative_eagle_topk",
        "speculative_num_draft_tokens", "cuda_graph_max_bs", "cuda_graph_max_bs_prefill", "max_running_requests",
        "chunked_prefill_size", "context_length", "nnodes", "node_rank", "decode_log_interval", "random_seed",
        "base_gpu_id", "page_size", "max_total_tokens", "torch_compile_max_bs"}
_FLOAT = {"mem_fraction_static", "speculative_accept_threshold_single", "speculative_accept_threshold_acc",
          "watchdog_timeout"}
_ALL_FLAGS = sorted(set(FLAG_DEST) | set(_STORE_TRUE))
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PY = re.compile(r"^python[0-9.]*$")
_WRAPPERS = {"nohup", "setsid", "exec", "stdbuf", "time"}


class LaunchParseError(ParseError, UsageError):
    """A launch line shlex cannot split (unbalanced quotes, a trailing backslash)."""


_LAUNCH_MARK = re.compile(r"sglang\.launch_server|sglang\.srt\.server|\bsglang\s+serve\b|sglang::")
_ASSIGN_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_VAR = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_]\w*)(?:(?P<op>:?[-=])(?P<default>[^}]*))?\}|(?P<plain>[A-Za-z_]\w*))")


def _shell_step(ch: str, quote: str | None, depth: int) -> tuple[str | None, int, bool]:
    """One character of a quote- and `$(...)`-aware scan: (quote after it, paren depth after it, whether it is a
    bare character: outside quotes and neither a quote nor a paren, so it may separate)."""
    if quote:
        return (None if ch == quote else quote), depth, False
    if ch in "'\"":
        return ch, depth, False
    if ch == "(":
        return quote, depth + 1, False
    if ch == ")":
        return quote, max(0, depth - 1), False
    return quote, depth, True


def _segments(line: str) -> list[str]:
    """A logical line split at `&&`, `||` and `;` outside quotes."""
    out: list[str] = []
    buf: list[str] = []
    quote: str | None = None
    depth, i = 0, 0  # inside $(...) a separator belongs to the substitution
    while i < len(line):
        ch = line[i]
        quote, depth, bare = _shell_step(ch, quote, depth)
        if bare and depth == 0 and (line.startswith(("&&", "||"), i) or ch == ";"):
            out.append("".join(buf))
            buf = []
            i += 1 if ch == ";" else 2
            continue
        buf.append(ch)
        i += 1
    out.append("".join(buf))
    return [x.strip() for x in out if x.strip()]


class _Expansion(NamedTuple):
    """What one `_expand` call reads (the text, the variables) and records (`pending`, when given)."""

    text: str
    variables: dict[str, str]
    pending: set[str] | None


def _double_quoted(word: str) -> str:
    """The word double-quoted, escaping what shlex unescapes there (it stays one token)."""
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _next_quote(ch: str, quote: str | None) -> str | None:
    """The quote state after `ch`, read inside single quotes or at a quote character."""
    if quote == "'":
        return None if ch == "'" else quote
    return None if quote == ch else (ch if quote is None else quote)


def _expand_substitution(x: _Expansion, i: int, quote: str | None) -> tuple[str, int]:
    """A `$(...)`/backtick substitution at i: a pure `seq` is evaluated here (never run); any other stays as
    written, one token (double-quoted unless already inside double quotes), and is recorded as pending."""
    end = _subst_end(x.text, i)
    sub = x.text[i:end]
    pure = _pure_substitution(sub, x.variables)
    if pure is not None:
        return (pure if quote == '"' else " ".join(shlex.quote(w) for w in pure.split(" "))), end
    if x.pending is not None:
        x.pending.add(sub)
    return (sub if quote == '"' else _double_quoted(sub)), end


def _expand_variable(x: _Expansion, m: re.Match[str], quote: str | None) -> str:
    """`$VAR`/`${VAR}`/`${VAR:-default}`: its value, else its default, else as written (and recorded as pending)."""
    name = m["braced"] or m["plain"]
    if name in x.variables:
        value = x.variables[name]
        if x.pending and quote != '"' and any(p in value for p in x.pending):
            # a variable holding an unresolved $(...) stays one word, as the shell would keep it
            value = _double_quoted(value)
        return value
    if m["op"] and "$" not in (m["default"] or ""):
        return m["default"] or ""
    if x.pending is not None:
        x.pending.add(m.group(0))
    return m.group(0)


def _expand_at(x: _Expansion, i: int, quote: str | None) -> tuple[str, int]:
    """What the text at i (outside single quotes, not a quote character) expands to, and where it ends."""
    text, ch = x.text, x.text[i]
    if ch == "\\" and i + 1 < len(text):
        return text[i:i + 2], i + 2
    if text.startswith("$(", i) or ch == "`":
        return _expand_substitution(x, i, quote)
    if ch == "{" and quote is None and (b := _BRACE.match(text, i)) and (i == 0 or text[i - 1].isspace()):
        return " ".join(str(v) for v in _int_range(int(b[1]), int(b[2]), int(b[3] or 1))), b.end()
    if ch == "$" and (m := _VAR.match(text, i)):
        return _expand_variable(x, m, quote), m.end()
    return ch, i + 1


def _expand(text: str, variables: dict[str, str], pending: set[str] | None = None) -> str:
    """Shell-style `$VAR`/`${VAR}`/`${VAR:-default}` expansion from `variables` (not inside single quotes);
    what cannot be resolved stays as written, and `$(...)`/backticks are kept as one token."""
    x = _Expansion(text, variables, pending)
    out: list[str] = []
    i, quote = 0, None
    while i < len(text):
        ch = text[i]
        if quote == "'" or ch in "'\"":
            quote = _next_quote(ch, quote)
            out.append(ch)
            i += 1
            continue
        piece, i = _expand_at(x, i, quote)
        out.append(piece)
    return "".join(out)


_BRACE = re.compile(r"\{(-?\d{1,6})\.\.(-?\d{1,6})(?:\.\.(-?\d{1,6}))?\}(?=\s|$)")
_SEQ = re.compile(r"^seq(?:\s+-s\s*(?P<sep>'[^']*'|\"[^\"]*\"|\S+))?(?P<nums>(?:\s+-?\d{1,6}){1,3})\s*$")
_MAX_WORDS = 4096


def _int_range(first: int, last: int, step: int) -> list[int]:
    """A brace/seq range as bash and coreutils count it (either direction), capped at _MAX_WORDS values."""
    step = abs(step) or 1
    values = list(range(first, last + 1, step)) if first <= last else list(range(first, last - 1, -step))
    return values[:_MAX_WORDS]


def _pure_substitution(sub: str, variables: dict[str, str]) -> str | None:
    """The output of `$(seq [-s SEP] [FIRST [INCR]] LAST)` (variables expanded first), or None for any other
    command: only this pure, bounded form is evaluated; the rest is flagged, never executed."""
    body = sub[2:-1] if sub.startswith("$(") else sub[1:-1]
    m = _SEQ.match(_expand(body, variables).strip())
    if not m:
        return None
    nums = [int(n) for n in m["nums"].split()]
    first, step, last = (1, 1, nums[0]) if len(nums) == 1 else (nums[0], 1, nums[1]) if len(nums) == 2 else nums
    if step == 0:
        return None
    values = _int_range(first, last, step) if (last - first) * step >= 0 else []
    sep = _unquote(m["sep"]) if m["sep"] else "\n"
    return (" " if sep in ("\n", " ") else sep).join(str(v) for v in values)


def _subst_end(text: str, i: int) -> int:
    """Index just past the `$(...)` (balanced) or backtick substitution starting at i."""
    if text[i] == "`":
        j = text.find("`", i + 1)
        return len(text) if j < 0 else j + 1
    depth, j = 0, i + 1
    while j < len(text):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(text)


def _words(segment: str) -> list[str] | None:
    """Shell words as written (quotes kept), a $(...) with spaces inside staying one word; None if unbalanced."""
    words: list[str] = []
    buf: list[str] = []
    quote: str | None = None
    depth = 0
    for ch in segment:
        quote, depth, bare = _shell_step(ch, quote, depth)
        if bare and ch.isspace() and depth == 0:
            if buf:
                words.append("".join(buf))
                buf = []
            continue
        buf.append(ch)
    if quote or depth:
        return None
    if buf:
        words.append("".join(buf))
    return words


def _assignments(segment: str) -> list[tuple[str, str, bool]] | None:
    """(name, raw value, exported) for an `export A=1 B=2` / `A=1` segment; None if it runs a command."""
    words = _words(segment)
    if words is None:
        return None
    exported = bool(words) and words[0] in ("export", "declare", "typeset")
    if exported:
        words = [w for w in words[1:] if not w.startswith("-")]
    if not words:
        return None
    out = []
    for w in words:
        if _ASSIGN_WORD.match(w):
            k, _, v = w.partition("=")
            out.append((k, v, exported))
        elif exported and re.fullmatch(r"[A-Za-z_]\w*", w):
            out.append((w, "", True))  # `export NAME` of a variable set earlier
        else:
            return None
    return out


def _unquote(raw: str) -> str:
    try:
        parts = shlex.split(raw)
    except ValueError:
        return raw
    return parts[0] if len(parts) == 1 else " ".join(parts)


def _prepare(cmd: str, pending: set[str] | None = None) -> tuple[str, dict[str, str]]:
    """(the launch command text with what the script's own lines define expanded, exported variables);
    the expansions left as written are added to `pending`."""
    logical = []
    for raw in clean_text(cmd).replace("\\\n", " ").split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^(?:\S*[$#]|\([^)]*\)\s*\S*[$#])\s+(?=\S)", line)
        if m and ("sglang" in line[m.end():] or line[m.end():].startswith(("--", "export "))):
            line = line[m.end():]
        logical.extend(_segments(line))
    variables: dict[str, str] = {}
    exported: dict[str, str] = {}
    commands: list[str] = []
    for seg in logical:
        assigns = _assignments(seg)
        if assigns is None:
            commands.append(seg)
            continue
        for name, value, is_export in assigns:
            if value or not is_export:
                variables[name] = _unquote(_expand(value, variables, pending))
            if is_export:
                exported[name] = variables.get(name, "")
    launch = [i for i, c in enumerate(commands) if _LAUNCH_MARK.search(c)]
    if launch:
        first = launch[0]
        tail = []
        for c in commands[first + 1:]:
            if not c.startswith("--"):
                break
            tail.append(c)
        commands = [commands[first], *tail]
    return _expand(" ".join(commands), variables, pending), exported


def split_command(cmd: str | list[str]) -> list[str]:
    """Tokens of a launch line; backslash continuations, prompts, `#` comments and shell-script lines
    (`export VAR=...`, `$VAR` / `${VAR}` defined there, `cd ... &&`) are tolerated."""
    if isinstance(cmd, list):
        return list(cmd)
    text, _ = _prepare(cmd, set())
    try:
        return _drop_redirections(shlex.split(text))
    except ValueError as exc:  # unbalanced quotes / trailing backslash: the caller's input, not a crash
        raise LaunchParseError(f"cannot parse the launch line ({exc}): {text[:200]!r}") from None


_REDIRECT = re.compile(r"^(?:\d*>>?|&>>?|<)(?P<target>.*)$")


def _drop_redirections(tokens: list[str]) -> list[str]:
    """The command without shell plumbing: `> log 2>&1`, `| tee log`, a trailing `&` (not server flags)."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t in ("|", "|&"):
            break
        m = _REDIRECT.match(t)
        if m:
            i += 1 if m["target"] else 2  # '>file' / '2>&1' carry their target; '>' takes the next token
            continue
        if t == "&" and i == len(tokens) - 1:
            break
        out.append(t)
        i += 1
    return out


def _unresolved(value: str, pending: AbstractSet[str]) -> bool:
    """Whether a value still holds one of the expansions the given lines could not resolve."""
    return any(p in value for p in pending)


def _resolve_flag(name: str) -> tuple[str | None, str | None]:
    """(canonical flag, problem) with argparse-style unique-prefix abbreviation."""
    if name in FLAG_DEST or name in _STORE_TRUE:
        return name, None
    matches = [f for f in _ALL_FLAGS if f.startswith(name)]
    dests = {FLAG_DEST.get(f) or _STORE_TRUE.get(f) for f in matches}
    if len(dests) == 1:
        return matches[0], None
    if len(dests) > 1:
        pick = min(matches, key=len)
        return pick, (f"abbreviation {name} is ambiguous in newer SGLang ({', '.join(matches[:4])}); "
                      f"read as {pick}")
    return None, None


def _locate(tokens: list[str]) -> tuple[dict[str, str], list[str], str, str | None, int]:
    """(env, prefix, entry, python, index of first server flag)."""
    env: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if _ENV_ASSIGN.match(t):
            k, _, v = t.partition("=")
            env[k] = v
        elif t == "env" or os.path.basename(t) == "env" or t in _WRAPPERS:
            pass
        elif t.startswith("-") and i > 0 and tokens[i - 1] in ("env", "stdbuf"):
            pass
        else:
            break
        i += 1
    start = i
    for j in range(i, len(tokens)):
        t = tokens[j]
        base = os.path.basename(t)
        if t == "-m" and j + 1 < len(tokens) and tokens[j + 1] in ("sglang.launch_server", "sglang.srt.server"):
            py = tokens[j - 1] if j > start else None
            return env, tokens[start:j + 2], "launch_server", py, j + 2
        if t == "serve" and j > start and os.path.basename(tokens[j - 1]) in ("sglang", "sglang.cli.main", "main"):
            py = tokens[start] if _PY.match(os.path.basename(tokens[start])) else None
            return env, tokens[start:j + 1], "serve", py, j + 1
        if t.startswith("--"):
            return env, tokens[start:j], "bare", None, j
        if base.startswith("sglang::"):
            return env, tokens[start:j + 1], "title", None, j + 1
    return env, tokens[start:], "bare", None, len(tokens)


_BAD = object()  # a value that does not fit its flag's type


def _convert(dest: str, value: str, problems: list[str], pending: AbstractSet[str] = frozenset()) -> Any:
    try:
        if dest in _INT:
            return int(value)
        if dest in _FLOAT:
            f = float(value)
            return f if math.isfinite(f) else _BAD
    except ValueError:
        if not _unresolved(value, pending):
            problems.append(f"--{dest.replace('_', '-')}: not a number: {value!r}")
        return _BAD
    return value


def _launch_cuts(cmd: str | list[str], result: Any) -> Iterator[str]:
    """A command written over several lines ends each but the last with '\\': a line followed by an indented
    '--flag' line but without its '\\' lost its end (the value before it may be cut too)."""
    if not isinstance(cmd, str):
        return
    lines = [ln for ln in clean_lines(cmd) if ln.strip()]
    for a, b in itertools.pairwise(lines):
        if b[:1].isspace() and b.lstrip().startswith("--") and not a.rstrip().endswith("\\") \
                and not a.lstrip().startswith("#"):
            yield f"a command line without its closing '\\' before {b.strip()[:30]!r}: {a.strip()[-40:]!r}"
            return


@dataclass
class _FlagReader:
    """Reads the server flags of a token list into dest -> value (and the value as written, for `unresolved`)."""

    tokens: list[str]
    problems: list[str]
    pending: set[str]
    values: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)

    def read(self, i: int) -> None:
        while i < len(self.tokens):
            i = self._flag(i)

    def _flag(self, i: int) -> int:
        """The flag at i (with its value); returns the index after it."""
        tok = self.tokens[i]
        i += 1
        if not tok.startswith("--"):
            self.problems.append(f"stray argument {tok!r}")
            return i
        name, eq, inline = tok.partition("=")
        flag, problem = _resolve_flag(name)
        if problem:
            self.problems.append(problem)
        if flag in _STORE_TRUE:
            self.values[_STORE_TRUE[flag]] = True
            return i
        dest = FLAG_DEST[flag] if flag else name[2:].replace("-", "_")
        if flag and flag.startswith("--cuda-graph-max-bs-decode"):
            self.values["cuda_graph_max_bs_decode"] = True  # marks the 0.5.23 spelling
        if eq:
            self.values[dest], self.raw[dest] = _convert(dest, inline, self.problems, self.pending), inline
            return i
        if dest in _NARGS_PLUS:
            return self._list(i, dest)
        return self._value(i, flag, dest)

    def _list(self, i: int, dest: str) -> int:
        """An nargs='+' flag: every token up to the next flag."""
        items = []
        while i < len(self.tokens) and not self.tokens[i].startswith("--"):
            items.append(self.tokens[i])
            i += 1
        conv = [_convert("cuda_graph_max_bs", x, self.problems, self.pending) for x in items]
        self.values[dest], self.raw[dest] = (_BAD if _BAD in conv else conv), " ".join(items)
        return i

    def _value(self, i: int, flag: str | None, dest: str) -> int:
        """The next token as the flag's value; without one an unknown flag is a boolean, a known one a problem."""
        if i < len(self.tokens) and not self.tokens[i].startswith("--"):
            value = self.tokens[i]
            self.values[dest], self.raw[dest] = _convert(dest, value, self.problems, self.pending), value
            return i + 1
        if flag is None:
            self.values[dest] = True  # unknown boolean flag
        else:
            self.problems.append(f"{flag} expects a value")
        return i


def _set_aside_unresolved_env(out: LaunchArgs, pending: set[str]) -> None:
    for k, v in list(out.env.items()):
        if _unresolved(v, pending):  # never hand a literal '$(...)' to a process as its value
            out.unresolved[f"env.{k}"] = out.env.pop(k)


def _derive_flags(values: dict[str, Any], out: LaunchArgs) -> None:
    """Which spelling set cuda_graph_max_bs, and the decode-graph switches that mean disable_cuda_graph."""
    if values.pop("cuda_graph_max_bs_decode", None):
        out.extra["cuda_graph_max_bs_flag"] = "--cuda-graph-max-bs-decode"
    if values.get("cuda_graph_backend_decode") == "disabled" or values.get("disable_decode_cuda_graph"):
        values["disable_cuda_graph"] = True


def _set_aside_unresolved(values: dict[str, Any], raw: dict[str, str], out: LaunchArgs, pending: set[str]) -> None:
    """Values of the wrong type or still holding an unresolved expansion go to `unresolved`, as written."""
    for dest, value in list(values.items()):
        if value is _BAD or (isinstance(value, str) and _unresolved(value, pending)):
            out.unresolved[dest] = raw.get(dest, str(value))
            del values[dest]
    if out.unresolved:
        out.problems.append("unresolved from the given lines: " + ", ".join(
            f"{k}={v}" for k, v in list(out.unresolved.items())[:6]))


def _assign_values(values: dict[str, Any], out: LaunchArgs) -> None:
    """Typed fields for the dests LaunchArgs names, `extra` for the rest."""
    known = set(LaunchArgs.model_fields)
    for dest, value in values.items():
        if dest in known and dest not in ("extra", "problems", "argv", "env", "prefix", "flags", "unresolved"):
            setattr(out, dest, value)
        else:
            out.extra[dest] = value
    if out.speculative_algorithm:
        out.speculative_algorithm = out.speculative_algorithm.upper()


@flag_clipped(_launch_cuts)
def parse_launch_command(cmd: str | list[str]) -> LaunchArgs:
    """Parse `python -m sglang.launch_server ...`, `sglang serve ...` or a bare flag list into LaunchArgs."""
    exported: dict[str, str] = {}
    pending: set[str] = set()
    if isinstance(cmd, str):
        _, exported = _prepare(cmd, pending)
    tokens = split_command(cmd)
    env, prefix, entry, python, i = _locate(tokens)
    out = LaunchArgs(argv=tokens, env={**exported, **env}, prefix=prefix, entry=entry, python=python,
                     flags=tokens[i:])
    _set_aside_unresolved_env(out, pending)
    reader = _FlagReader(tokens, out.problems, pending)
    reader.read(i)
    _derive_flags(reader.values, out)
    _set_aside_unresolved(reader.values, reader.raw, out, pending)
    _assign_values(reader.values, out)
    return out


def drop_speculative_flags(argv: str | list[str]) -> list[str]:
    """The baseline command: the same argv without any `--speculative-*` flag (abbreviations included)."""
    tokens = split_command(argv)
    _, _, _, _, i = _locate(tokens)
    out = tokens[:i]
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("--"):
            out.append(tok)
            continue
        name, eq, _ = tok.partition("=")
        flag, _ = _resolve_flag(name)
        dest = (FLAG_DEST.get(flag or "") or _STORE_TRUE.get(flag or "") or name[2:].replace("-", "_"))
        if dest.startswith("speculative_"):
            if not eq and flag not in _STORE_TRUE and i < len(tokens) and not tokens[i].startswith("--"):
                i += 1
            continue
        out.append(tok)
    return out


# -- logs ---------------------------------------------------------------------------------------------

_RANK = re.compile(r"\b(TP\d+|DP\d+|PP\d+|EP\d+)\b")


class DecodeLine(BaseModel):
    """One `Decode batch` log line; fields missing in older layouts stay None."""

    time: str | None = None
    rank: str | None = None
    running_req: int | None = None
    tokens: int | None = None
    token_usage: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    graph: bool | None = Field(default=None, description="`cuda graph:` (or npu/cpu graph) value.")
    gen_throughput: float | None = None
    queue_req: int | None = None


def _num(v: str) -> float | None:
    """The leading number of a value; None for elided ('...'), N/A or non-finite values."""
    m = re.match(r"\s*(-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)", v, re.I)
    if not m:
        return None
    f = float(m.group(1))
    return f if math.isfinite(f) else None


def _int(v: str) -> int | None:
    f = _num(v)
    return int(f) if f is not None else None


_BRACKET = re.compile(r"\[(?P<ts>[^\[\]]*)\][^\[\]]*$")


# Every Decode batch line since 0.2 carries '#queue-req: N'; later fields follow it ', key: value' each.
_DATED_MSG = re.compile(r"\[[^\[\]]*\d{2}:\d{2}:\d{2}[^\[\]]*\] (?P<msg>[^\[\]]*)$")
_QUEUE_FIELD = re.compile(r"#queue-req: \d+(?:,|$)")


def _decode_cuts(text: str, result: Any) -> Iterator[str]:
    """A Decode batch line is cut when it lacks its '#queue-req: N' field, or when a field after it has a key
    without its ': value'."""
    for raw in clean_lines(text):
        idx = raw.find("Decode batch")
        if idx < 0:
            dated = _DATED_MSG.search(raw)
            if dated and cut_marker(dated["msg"], "Decode batch"):
                yield f"a log line cut inside 'Decode batch': {raw.strip()[-50:]!r}"
                return
            continue
        body = raw[idx:].rstrip().rstrip(",").rstrip()
        queue = _QUEUE_FIELD.search(body)
        if queue is None:
            yield f"a Decode batch line without its '#queue-req: N' field: {body[-50:]!r}"
            return
        tail = body[queue.end():]
        if any(part.strip() and not re.search(r":\s*\S", part) for part in tail.split(",")):
            yield f"a Decode batch line cut after '#queue-req': {body[-50:]!r}"
            return


@flag_clipped(_decode_cuts)
def parse_decode_lines(text: str) -> list[DecodeLine]:
    """Every `Decode batch` line in a log (0.2 period form to 0.5.23 comma form, any rank prefix)."""
    out: list[DecodeLine] = []
    for raw in clean_lines(text):
        idx = raw.find("Decode batch")
        if idx < 0:
            continue
        line = DecodeLine()
        head = raw[:idx]
        # the '[time TPn]' part is the last bracket before 'Decode batch'; Ray/srun/docker prefixes may precede it
        m = _BRACKET.search(head)
        if m:
            ts = m.group("ts")
            ranks = _RANK.findall(ts)
            line.rank = " ".join(ranks) or None
            line.time = _RANK.sub("", ts).strip() or None
        body = re.sub(r"^Decode batch(\s*\[\d+\])?[.,]?\s*", "", raw[idx:])
        for part in body.split(","):
            key, sep, val = part.partition(":")
            if not sep:
                continue
            key = key.strip().lower()
            val = val.strip()
            if key == "#running-req":
                line.running_req = _int(val)
            elif key in ("#token", "#full token"):
                line.tokens = _int(val)
            elif key in ("token usage", "full token usage"):
                line.token_usage = _num(val)
            elif key == "accept len":
                line.accept_len = _num(val)
            elif key == "accept rate":
                line.accept_rate = _num(val)
            elif key.endswith(" graph"):
                line.graph = val.lower().startswith("true")
            elif key.startswith("gen throughput"):
                line.gen_throughput = _num(val)
            elif key == "#queue-req":
                line.queue_req = _int(val)
        out.append(line)
    return out


# -- HTTP bodies ----------------------------------------------------------------------------------------

class BodyError(ParseError):
    """A body that is neither JSON nor a Python literal (an HTML error page, a truncated reply), or one whose
    values do not fit the model (a string where a port number belongs)."""


def _literal(s: str) -> Any:
    """JSON, else a Python literal (inf/nan read as None); ValueError when neither."""
    try:
        return json.loads(s)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(re.sub(r"\b(inf|nan|Infinity|NaN)\b", "None", s))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(type(exc).__name__) from None


_INLINE_TAG = re.compile(r"<(?P<tag>strong|b|pre|code|span|tt)(?:\s[^<>]*)?>(?P<body>.*)</(?P=tag)>", re.S | re.I)
# A label printed before the body ('result {...}', 'Response: {...}', 'meta_info = {...}'): words only.
_LABEL = re.compile(r"^[A-Za-z_][\w .#>-]{0,60}?\s*[:=]?\s*$")


def parse_body(text: str) -> Any:
    """JSON, or the Python-repr form SGLang docs print (single quotes, True/None), alone or after a one-phrase
    label ('result {...}'); HTML pages, truncated and ambiguous text are refused with BodyError."""
    s = clean_text(text or "").strip()
    if not s:
        raise BodyError("empty body")
    # a notebook/doc page that printed the body inside one inline element (print_highlight's <strong ...>)
    wrapped = _INLINE_TAG.fullmatch(s)
    if wrapped and "<" not in wrapped["body"]:
        s = html.unescape(wrapped["body"]).strip()
    if s[:1] == "<" or s[:15].lower().startswith("<!doctype"):
        title = re.search(r"<title>(.*?)</title>", s, re.I | re.S)
        raise BodyError(f"HTML page, not JSON: {(title.group(1) if title else s[:80]).strip()}")
    try:
        return _literal(s)
    except ValueError as exc:
        first_error = str(exc)
    starts = [i for i in (s.find("{"), s.find("[")) if i > 0]
    if starts:
        at = min(starts)
        if _LABEL.match(s[:at]):
            try:
                return _literal(s[at:])
            except ValueError:
                pass
    raise BodyError(f"not JSON nor a Python literal ({first_error}): {s[:80]!r}")


class ServerInfo(BaseModel):
    """`/server_info` (0.5.23) or `/get_server_info` (0.5.9) normalised to one set of names."""

    version: str | None = None
    model_path: str | None = None
    port: int | None = None
    tp_size: int | None = None
    attention_backend: str | None = None
    speculative_algorithm: str | None = None
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    disable_cuda_graph: bool | None = None
    cuda_graph_max_bs: int | None = None
    disable_custom_all_reduce: bool | None = None
    accept_length: float | None = Field(default=None, description="internal_states[0].avg_spec_accept_length.")
    last_gen_throughput: float | None = None
    launch_command: str | None = None
    resolved: dict[str, Any] = Field(default_factory=dict, description="Every scalar resolved arg as reported.")


def normalise_server_info(data: Any) -> ServerInfo:
    """Map either version's server-info dict (also a PD router's `{"decode": [...]}`) onto ServerInfo; BodyError
    when it is not an object or a value has the wrong type."""
    if isinstance(data, dict) and isinstance(data.get("decode"), list) and data["decode"]:
        data = data["decode"][0]
    if not isinstance(data, dict):
        raise BodyError(f"server info is a {type(data).__name__}, expected an object")
    states = data.get("internal_states") or []
    state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    merged = {**state, **data}

    def get(*names: str) -> Any:
        for n in names:
            if merged.get(n) is not None:
                return merged[n]
        return None

    try:
        return _server_info(data, merged, state, get)
    except ValidationError as exc:
        raise BodyError(f"server info with a value of the wrong type: {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (got {str(err.get('input'))[:40]!r})"


def _server_info(data: dict, merged: dict, state: dict, get: Any) -> ServerInfo:
    disable = get("disable_cuda_graph")
    if merged.get("cuda_graph_backend_decode") == "disabled" or merged.get("disable_decode_cuda_graph"):
        disable = True
    algo = get("speculative_algorithm")
    return ServerInfo(
        version=str(data["version"]) if data.get("version") is not None else None,
        model_path=get("model_path"), port=get("port"), tp_size=get("tp_size"),
        attention_backend=get("attention_backend", "decode_attention_backend"),
        speculative_algorithm=str(algo).upper() if algo else None,
        speculative_draft_model_path=get("speculative_draft_model_path"),
        speculative_num_steps=get("speculative_num_steps"), speculative_eagle_topk=get("speculative_eagle_topk"),
        speculative_num_draft_tokens=get("speculative_num_draft_tokens"),
        disable_cuda_graph=bool(disable) if disable is not None else None,
        cuda_graph_max_bs=get("cuda_graph_max_bs", "cuda_graph_max_bs_decode"),
        disable_custom_all_reduce=get("disable_custom_all_reduce"),
        accept_length=state.get("avg_spec_accept_length", data.get("avg_spec_accept_length")),
        last_gen_throughput=state.get("last_gen_throughput", data.get("last_gen_throughput")),
        launch_command=get("launch_command"),
        resolved={k: v for k, v in data.items() if isinstance(v, (str, int, float, bool)) or v is None},
    )


class MetaInfo(BaseModel):
    """A `/generate` response's meta_info with 0.5.9 and 0.5.23 key names unified."""

    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    e2e_latency: float | None = Field(default=None, description="Seconds (server side).")
    first_token_latency: float | None = None
    spec_accept_length: float | None = None
    spec_accept_rate: float | None = None
    spec_verify_ct: int | None = None
    spec_num_correct_drafts: int | None = None
    spec_num_proposed_drafts: int | None = None
    retractions: int | None = None
    finish_reason: str | None = None


def normalise_meta_info(meta: Any) -> MetaInfo:
    """Unify `spec_accept_token_num`/`spec_num_correct_drafts`, `total_retractions`/`num_retractions`, ...;
    BodyError when a value has the wrong type."""
    if not isinstance(meta, dict):
        return MetaInfo()
    fr = meta.get("finish_reason")
    try:
        return _meta_info(meta, fr)
    except ValidationError as exc:
        raise BodyError(f"meta_info with a value of the wrong type: {_first_error(exc)}") from None


def _first_token(meta: dict) -> Any:
    """`first_token_latency` (0.5.9–0.5.2x with metrics), else the server's own clock: 0.5.17 has no such field but
    stamps `request_received_ts` and `prefill_finished_time` (the prefill yields the first token)."""
    if meta.get("first_token_latency") is not None:
        return meta["first_token_latency"]
    start, prefill, e2e = meta.get("request_received_ts"), meta.get("prefill_finished_time"), meta.get("e2e_latency")
    nums = [v for v in (start, prefill, e2e) if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(nums) == 3:
        ttft = nums[1] - nums[0]
        return ttft if 0 < ttft < nums[2] else None
    return None


def _meta_info(meta: dict, fr: Any) -> MetaInfo:
    return MetaInfo(
        completion_tokens=meta.get("completion_tokens"), prompt_tokens=meta.get("prompt_tokens"),
        e2e_latency=meta.get("e2e_latency"), first_token_latency=_first_token(meta),
        spec_accept_length=meta.get("spec_accept_length"), spec_accept_rate=meta.get("spec_accept_rate"),
        spec_verify_ct=meta.get("spec_verify_ct"),
        spec_num_correct_drafts=meta.get("spec_num_correct_drafts", meta.get("spec_accept_token_num")),
        spec_num_proposed_drafts=meta.get("spec_num_proposed_drafts", meta.get("spec_draft_token_num")),
        retractions=meta.get("num_retractions", meta.get("total_retractions")),
        finish_reason=fr.get("type") if isinstance(fr, dict) else (str(fr) if fr is not None else None),
    )
