"""SGLang benchmark output: bench_serving result blocks and JSONL records, bench_one_batch_server, send_one, EAGLE bench lines."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.text import clean_lines, cut_marker, flag_clipped

__all__ = [
    "BenchServingResult",
    "parse_bench_serving",
    "parse_bench_serving_jsonl",
    "OneBatchResult",
    "parse_bench_one_batch_server",
    "SendOneResult",
    "parse_send_one",
    "EagleBenchLine",
    "parse_eagle_bench_lines",
]


class BenchServingResult(BaseModel):
    """One serving-benchmark result (text block or --output-file record); field names follow SGLang's JSONL keys."""

    layout: str = Field(description="'sglang' (sglang.bench_serving), 'vllm' (vLLM benchmark_serving look-alike) "
                                    "or 'unknown' (too little of the block to tell).")
    source: str = Field(default="text", description="'text' (the printed block) or 'jsonl' (--output-file record).")
    backend: str | None = None
    request_rate: float | None = Field(default=None, description="req/s; inf when not limited.")
    max_concurrency: int | None = Field(default=None, description="None when 'not set'.")
    completed: int | None = Field(default=None, description="Successful requests.")
    failed: int | None = None
    duration: float | None = Field(default=None, description="Seconds.")
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    total_output_tokens_retokenized: int | None = None
    request_throughput: float | None = None
    input_throughput: float | None = None
    output_throughput: float | None = None
    total_throughput: float | None = None
    concurrency: float | None = None
    accept_length: float | None = Field(default=None, description="None when not printed or null (no speculation).")
    mean_e2e_latency_ms: float | None = None
    median_e2e_latency_ms: float | None = None
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    metrics: dict[str, Any] = Field(default_factory=dict, description="Every line/key as read, by normalised name.")
    complete: bool = Field(default=False, description="The closing '=====' line (or a whole JSON record) was seen.")


_INTS = {"max_concurrency", "completed", "failed", "total_input_tokens", "total_output_tokens",
         "total_output_tokens_retokenized"}
_ALIASES = {
    "traffic_request_rate": "request_rate", "max_request_concurrency": "max_concurrency",
    "max_reqeuest_concurrency": "max_concurrency", "maximum_request_concurrency": "max_concurrency",
    "successful_requests": "completed", "failed_requests": "failed", "benchmark_duration_s": "duration",
    "total_generated_tokens": "total_output_tokens",
    "total_generated_tokens_retokenized": "total_output_tokens_retokenized",
    "request_throughput_req_s": "request_throughput", "input_token_throughput_tok_s": "input_throughput",
    "output_token_throughput_tok_s": "output_throughput", "total_token_throughput_tok_s": "total_throughput",
    "accept_length": "accept_length", "acceptance_length": "accept_length",
    "mean_e2e_latency_ms": "mean_e2e_latency_ms", "median_e2e_latency_ms": "median_e2e_latency_ms",
}
# Lines only SGLang's bench_serving prints, and lines only vLLM's benchmark_serving prints.
_SGLANG_MARKS = ("backend", "traffic_request_rate", "total_generated_tokens_retokenized", "max_request_concurrency",
                 "max_reqeuest_concurrency", "input_token_throughput_tok_s", "accept_length",
                 "section:end_to_end_latency")
_VLLM_MARKS = ("maximum_request_concurrency", "failed_requests", "section:speculative_decoding",
               "acceptance_rate", "request_goodput_req_s", "peak_concurrent_requests")
_LINE = re.compile(r"^\s*(?P<label>[A-Za-z#(][^:]{1,60}?):\s+(?P<value>\S.*?)\s*$")
_SECTION = re.compile(r"^\s*-{3,}\s*(?P<name>[^-].*?)\s*-{3,}\s*$")


def _norm(label: str) -> str:
    s = label.lower().replace("%", " pct ")
    return re.sub(r"[^a-z0-9]+", "_", s).strip("_")


def _value(key: str, raw: str) -> Any:
    v = raw.strip().split()[0] if raw.strip() else ""
    if v.lower() in ("inf", "infinity"):
        return math.inf
    if raw.strip().lower() in ("not set", "none", "null", "n/a"):
        return None
    try:
        f = float(v)
    except ValueError:
        return raw.strip()
    if key in _INTS and f.is_integer():
        return int(f)
    return f


def _layout(keys: set[str], first: str | None) -> str:
    if keys & set(_SGLANG_MARKS):
        return "sglang"
    if keys & set(_VLLM_MARKS) or "total_token_throughput_tok_s@T" in keys:
        return "vllm"
    # SGLang's block opens with 'Backend:' (every version since 0.2); vLLM's opens with 'Successful requests:'
    if first == "successful_requests":
        return "vllm"
    return "unknown"


_STRS = {"backend"}
_NOT_VALUES = {"layout", "source", "metrics", "complete"}


def _fill(result: BenchServingResult, values: dict[str, Any]) -> None:
    """Copy the values whose type fits their typed field (an int field never takes 2.5, a str field no number)."""
    for key, value in values.items():
        name = _ALIASES.get(key, key)
        if name not in BenchServingResult.model_fields or name in _NOT_VALUES:
            continue
        if name in _STRS:
            if isinstance(value, str):
                setattr(result, name, value)
        elif value is None:
            setattr(result, name, None)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if name in _INTS:
                if isinstance(value, float) and not value.is_integer():
                    continue
                value = int(value)
            setattr(result, name, value)


_TITLE = "Serving Benchmark Result"


def _serving_cuts(text: str, results: list[BenchServingResult]) -> Iterator[str]:
    """The block opens with '==== Serving Benchmark Result ====' and closes with a '=====' rule; every line
    between is 'Label: value' or a '---name---' section rule. A title cut before its name, or a block that stops
    (at a line of neither kind, or at the end of the text) before its closing rule, was cut."""
    for line in clean_lines(text):
        s = line.strip()
        title = re.fullmatch(r"=+\s*(?P<words>[A-Za-z][\w ]*?)\s*", s)
        if title and cut_marker(title["words"], _TITLE):
            yield f"a result title cut before its name: {s!r}"
            return
    for res in results:
        if not res.complete:
            yield f"a {res.layout} result block without its closing '=====' rule (after {len(res.metrics)} lines)"
            return


@flag_clipped(_serving_cuts)
def parse_bench_serving(text: str) -> list[BenchServingResult]:
    """Every '== Serving Benchmark Result ==' block in `text`, told apart as SGLang's or vLLM's layout."""
    out: list[BenchServingResult] = []
    values: dict[str, Any] | None = None
    keys: set[str] = set()

    def close(complete: bool) -> None:
        nonlocal values
        if values:
            res = BenchServingResult(layout=_layout(keys, next(iter(values))), metrics=dict(values),
                                     complete=complete)
            _fill(res, values)
            out.append(res)
        values = None

    section = ""
    for line in clean_lines(text):
        if "Serving Benchmark Result" in line:
            close(False)
            values, section = {}, ""
            keys.clear()
            continue
        if values is None:
            continue
        s = line.strip()
        if re.fullmatch(r"={10,}", s):
            close(True)
            continue
        if m := _SECTION.match(s):
            section = _norm(m["name"])
            keys.add(f"section:{section}")
            continue
        m = _LINE.match(line)
        if not m:
            if s:
                close(False)
            continue
        key = _norm(m["label"])
        if key == "total_token_throughput_tok_s" and "Total Token" in m["label"]:
            keys.add("total_token_throughput_tok_s@T")  # vLLM capitalises 'Token'
        if section == "speculative_decoding" and key not in _ALIASES:
            key = f"spec_{key}"
        keys.add(key)
        values[key] = _value(_ALIASES.get(key, key), m["value"])
    close(False)
    return out


def parse_bench_serving_jsonl(text: str) -> list[BenchServingResult]:
    """Each JSON record line of bench_serving's --output-file (Infinity and null values as Python reads them)."""
    out: list[BenchServingResult] = []
    for line in clean_lines(text):
        s = line.strip()
        if not s.startswith("{"):
            continue
        try:
            rec = json.loads(s)
        except (ValueError, RecursionError):
            continue
        if not isinstance(rec, dict) or not ({"completed", "duration"} & rec.keys()):
            continue
        res = BenchServingResult(layout="sglang" if "total_output_tokens_retokenized" in rec or "accept_length" in rec
                                 else "unknown", source="jsonl", complete=True,
                                 metrics={k: v for k, v in rec.items() if isinstance(v, (str, int, float)) or v is None})
        _fill(res, res.metrics)
        out.append(res)
    return out


class OneBatchResult(BaseModel):
    """One batch of `sglang.bench_one_batch_server` (table row or the older 'key: value' lines)."""

    batch_size: int
    input_len: int | None = None
    output_len: int | None = None
    latency_s: float | None = None
    ttft_s: float | None = None
    input_throughput: float | None = None
    output_throughput: float | None = None
    overall_throughput: float | None = None
    last_gen_throughput: float | None = None
    acc_length: float | None = None
    itl_ms: float | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


_ONE_BATCH_KEYS = {
    "batch_size": "batch_size", "input_len": "input_len", "inp_len": "input_len", "output_len": "output_len",
    "out_len": "output_len", "latency": "latency_s", "latency_s": "latency_s", "ttft": "ttft_s", "ttft_s": "ttft_s",
    "input_throughput": "input_throughput", "input_throughput_tok_s": "input_throughput",
    "output_throughput": "output_throughput", "output_throughput_tok_s": "output_throughput",
    "input_output_throughput": "overall_throughput", "overall_throughput": "overall_throughput",
    "last_generation_throughput": "last_gen_throughput", "acc_length": "acc_length", "accept_length": "acc_length",
    "itl_ms": "itl_ms",
}


def _one(values: dict[str, str]) -> OneBatchResult | None:
    data: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, raw in values.items():
        name = _ONE_BATCH_KEYS.get(key)
        m = re.match(r"\s*(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)", raw)
        num = float(m.group(1)) if m else None
        if name is None:
            extra[key] = num if num is not None else raw.strip()
        elif num is not None:
            data[name] = num
    if "batch_size" not in data or not data["batch_size"].is_integer():
        return None
    for k in ("batch_size", "input_len", "output_len"):
        if k in data:
            if not data[k].is_integer():
                extra[k] = data.pop(k)
            else:
                data[k] = int(data[k])
    return OneBatchResult(**data, extra=extra)


def _one_batch_cuts(text: str, result: Any) -> Iterator[str]:
    """The result table's rows open and close with '|': a row that opens but does not close was cut."""
    for line in clean_lines(text):
        s = line.strip()
        if s.startswith("|") and not s.endswith("|") and s.count("|") >= 2:
            yield f"a table row that does not close: {s[-50:]!r}"
            return


@flag_clipped(_one_batch_cuts)
def parse_bench_one_batch_server(text: str) -> list[OneBatchResult]:
    """Rows of bench_one_batch_server's result table ('| batch size | input len | latency (s) | ...') or its
    older per-batch 'batch size: N' / 'latency: X s' / 'output throughput: Y token/s' lines."""
    out: list[OneBatchResult] = []
    header: list[str] | None = None
    block: dict[str, str] = {}
    for line in clean_lines(text):
        s = line.strip()
        if s.startswith("|") and s.endswith("|") and s.count("|") >= 3:
            cells = [c.strip() for c in s[1:-1].split("|")]
            if any(_norm(c) == "batch_size" for c in cells):
                header = [_norm(c) for c in cells]
            elif header and not all(re.fullmatch(r":?-+:?", c) for c in cells) and len(cells) == len(header):
                if row := _one(dict(zip(header, cells, strict=True))):
                    out.append(row)
            continue
        header = None
        m = re.match(r"^\s*([A-Za-z(][\w ()+/]*?)\s*[:=]\s*(\S.*)$", line)
        if not m:
            continue
        key = _norm(m.group(1))
        if key == "batch_size" or (block and key not in _ONE_BATCH_KEYS):
            if block and (row := _one(block)):
                out.append(row)
            block = {}
        if key == "batch_size" or (block and key in _ONE_BATCH_KEYS):
            block[key] = m.group(2)
    if block and (row := _one(block)):
        out.append(row)
    return out


class SendOneResult(BaseModel):
    """The result line/table of `python -m sglang.test.send_one`."""

    latency_s: float | None = None
    tokens: int | None = None
    acc_length: float | None = None
    speed: float | None = Field(default=None, description="token/s")


def parse_send_one(text: str) -> SendOneResult:
    """send_one's pretty table ('Latency (s) | Tokens | Acc Length | Speed (token/s)') or its older
    'acc_length=… / speed=… token/s' lines; ParseError when neither is there."""
    lines = clean_lines(text)
    header: list[str] | None = None
    for line in lines:
        s = line.strip()
        if not (s.startswith("|") and s.endswith("|")):
            continue
        cells = [c.strip() for c in s[1:-1].split("|")]
        norm = [_norm(c) for c in cells]
        if "acc_length" in norm and "tokens" in norm:
            header = norm
            continue
        if header and len(cells) == len(header):
            vals = dict(zip(header, cells, strict=True))
            try:
                return SendOneResult(latency_s=float(vals.get("latency_s", "nan")),
                                     tokens=int(vals["tokens"]) if vals.get("tokens", "").isdigit() else None,
                                     acc_length=float(vals.get("acc_length", "nan")),
                                     speed=float(vals.get("speed_token_s", "nan")))
            except ValueError:
                header = None
    found: dict[str, float] = {}
    for line in lines:
        for m in re.finditer(r"\b(latency|acc_length|accept_length|speed|tokens)\s*[=:]\s*(\d+(?:\.\d+)?)", line):
            found[m.group(1)] = float(m.group(2))
    if not found:
        raise ParseError("no send_one result (table or acc_length=/speed= lines) in the text")
    tokens = found.get("tokens")
    return SendOneResult(latency_s=found.get("latency"), tokens=int(tokens) if tokens is not None else None,
                         acc_length=found.get("acc_length", found.get("accept_length")), speed=found.get("speed"))


class EagleBenchLine(BaseModel):
    """One result line of SGLang's EAGLE/MT-bench scripts ('#questions: 80, Throughput: … token/s, Accept…')."""

    label: str | None = Field(default=None, description="The nearest non-empty line above, when it is a label.")
    questions: int | None = None
    throughput: float | None = Field(default=None, description="token/s")
    accept_length: float | None = None
    latency_s: float | None = None
    values: dict[str, float] = Field(default_factory=dict)


# Lines that lay a paste out without saying anything: markdown fences, rules, blank quote/table markers.
_LAYOUT_ONLY = re.compile(r"^\s*(?:(?:```|~~~)[\w+-]*|[-=_*~#>|+:\s]+)\s*$")


def _eagle_cuts(text: str, result: Any) -> Iterator[str]:
    """bench_sglang_eagle prints '#questions: N, Throughput: X token/s, Acceptance length: Y': a '#questions'
    line without both of the later fields was cut."""
    for line in clean_lines(text):
        s = line.strip()
        if s.startswith("#questions:") and not (re.search(r"Throughput: \d", s) and re.search(r"Accept\w* length: \d", s)):
            yield f"a '#questions' line without its throughput and accept length: {s[-50:]!r}"
            return


@flag_clipped(_eagle_cuts)
def parse_eagle_bench_lines(text: str) -> list[EagleBenchLine]:
    """Lines with a 'Throughput: N token/s' and an 'Accept(ance) length: X' part (any order, any extra keys)."""
    out: list[EagleBenchLine] = []
    prev = None
    for line in clean_lines(text):
        parts = dict(re.findall(r"(#?[A-Za-z][\w ]*?)\s*:\s*(-?\d+(?:\.\d+)?)", line))
        norm = {_norm(k): float(v) for k, v in parts.items()}
        tput = norm.get("throughput")
        acc = norm.get("acceptance_length", norm.get("accept_length"))
        if tput is not None and acc is not None:
            q = norm.get("questions")
            out.append(EagleBenchLine(label=prev, questions=int(q) if q is not None and q.is_integer() else None,
                                      throughput=tput, accept_length=acc, latency_s=norm.get("latency"),
                                      values=norm))
        elif line.strip() and not _LAYOUT_ONLY.match(line):
            prev = line.strip().rstrip(":") if len(line.strip()) < 80 else None
    return out
