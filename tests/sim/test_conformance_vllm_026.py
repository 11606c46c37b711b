"""The twin's vLLM stand-in held to vLLM's own output shapes: log lines, /metrics families, /version, launch lines.

Two kinds of fixture set, each test labelled with its kind:
- `constructed-from-source` (tests/fixtures/vllm-0.26-constructed/): lines built by hand from vLLM 0.26.0's format
  strings — no server ran for them; they hold the stand-in to the source, not to a real run;
- `real` (tests/fixtures/real-vllm/<capture>/): what a real vLLM 0.26.0 server wrote on the lent GPU, brought back
  by benchmarks/real_vllm/stories.py (its `capture/` folder) and copied here by to_fixtures.py. None yet: when the
  first real run comes back, these tests pick its folders up with no edit.
A shape is a line or a body with its numbers, paths and names taken out: the stand-in's numbers are its own, its
shapes must be vLLM's."""

from __future__ import annotations

import importlib.util
import json
import re
import time
import urllib.request
from pathlib import Path

import pytest

from specdoctor.inference.vllm import VLLM_0_26_0
from specdoctor.sim.sandbox import build_sandbox

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SETS = [("constructed-from-source", FIX / "vllm-0.26-constructed")] + [
    ("real", d) for d in sorted((FIX / "real-vllm").glob("*")) if d.is_dir()]
IDS = [f"{kind}:{path.name}" for kind, path in SETS]
# the log lines specdoctor reads, by what starts their message
KINDS = {"version": "vLLM server version", "stats": "Engine 000: Avg prompt throughput",
         "spec": "SpecDecoding metrics:", "graphs": "Graph capturing finished", "start": "Starting vLLM server on"}
_PREFIX = re.compile(r"^\((?P<proc>[A-Za-z_]+)(?:_\w+)? pid=\d+\) (?P<level>[A-Z]+) \d\d-\d\d \d\d:\d\d:\d\d "
                     r"\[(?P<where>[\w.]+:\d+)\] (?P<msg>.*)$")


def shape(line: str) -> str:
    """A log line with its variable parts out: pid, time, paths, URLs, numbers (a list of numbers is one)."""
    m = _PREFIX.match(line)
    if not m:
        return f"<unprefixed> {line}"
    msg = re.sub(r"https?://\S+", "<url>", m["msg"])
    msg = re.sub(r"(?<![\w.])/[^\s,']+", "<path>", msg)
    msg = re.sub(r"-?\d+(?:\.\d+)*", "#", msg)
    msg = re.sub(r"#(?:, #)+", "#…", msg)
    return f"({m['proc']}) {m['level']} [{m['where'].split(':')[0]}] {msg}"


def kinds_of(log: str) -> dict[str, str]:
    """The first line of each kind, as its shape."""
    out: dict[str, str] = {}
    for line in log.splitlines():
        m = _PREFIX.match(line)
        for kind, start in KINDS.items():
            if m and m["msg"].startswith(start) and kind not in out:
                out[kind] = shape(line)
    return out


def families(metrics: str) -> dict[str, tuple[str, frozenset[str]]]:
    """/metrics as {name: (type, label keys)} for vLLM's own families."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", metrics, re.M))
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for name, labels in re.findall(r"^(vllm:[\w:]+?)(?:_bucket|_count|_sum)?\{([^}]*)\}", metrics, re.M):
        base = name if name in types else re.sub(r"_(bucket|count|sum)$", "", name)
        keys = frozenset(k for k in re.findall(r"(\w+)=", labels) if k != "le")
        out.setdefault(base, (types.get(base, "?"), keys))
    return out


def test_shape_takes_out_numbers_paths_and_pids_but_keeps_the_words():
    a = "(APIServer pid=4101) INFO 12-06 10:41:30 [loggers.py:310] Engine 000: Avg generation throughput: 141.7 tokens/s"
    b = "(APIServer pid=77) INFO 01-01 00:00:00 [loggers.py:310] Engine 000: Avg generation throughput: 9.0 tokens/s"
    c = "(APIServer pid=77) INFO 01-01 00:00:00 [loggers.py:310] Engine 000: Avg generation throughput: 9.0 tok/s"
    assert shape(a) == shape(b) != shape(c)
    assert shape("(EngineCore_DP0 pid=9) INFO 12-06 10:40:01 [utils.py:325] vLLM server version 0.26.0, serving "
                 "model /m/x") == "(EngineCore) INFO [utils.py] vLLM server version #, serving model <path>"
    # prometheus_client's text format names a counter's TYPE with `_total`; another TYPE name leaves it unknown
    assert families('# TYPE vllm:x counter\nvllm:x_total{engine="0",model_name="m"} 1.0\n') == {
        "vllm:x_total": ("?", frozenset({"engine", "model_name"}))}
    assert families('# TYPE vllm:x_total counter\nvllm:x_total{engine="0",model_name="m"} 1.0\n') == {
        "vllm:x_total": ("counter", frozenset({"engine", "model_name"}))}


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """The stand-in serving the vLLM no-regression box: its /version, /v1/models, /metrics around a few requests,
    and its log once a SpecDecoding line is in it."""
    sb = build_sandbox("vllm-no-regression", root=tmp_path_factory.mktemp("vllm-conf") / "box", start_server=True)
    base = f"http://127.0.0.1:{sb.port}"

    def get(path: str) -> str:
        with urllib.request.urlopen(base + path, timeout=10) as r:
            return r.read().decode()

    try:
        before = get("/metrics")
        body = json.dumps(VLLM_0_26_0.generate_payload("hello " * 16, 64)).encode()
        log_path = Path(sb.server_log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "SpecDecoding metrics" not in log_path.read_text(errors="replace"):
            req = urllib.request.Request(base + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=30).read()
        yield {"version": get("/version"), "models": get("/v1/models"), "before": before, "after": get("/metrics"),
               "log": log_path.read_text(errors="replace"), "launch": sb.launch}
    finally:
        sb.stop_all()


@pytest.mark.parametrize("kind, folder", SETS, ids=IDS)
def test_the_stand_ins_log_lines_have_vllms_shapes(twin, kind, folder):
    want = kinds_of((folder / "server.log").read_text())
    got = kinds_of(twin["log"])
    assert {"stats", "spec"} <= set(want), f"{kind} set {folder.name} lacks the lines specdoctor reads"
    for k, s in want.items():
        assert got.get(k) == s, f"{k}: {kind} {folder.name} says {s!r}, the stand-in {got.get(k)!r}"


@pytest.mark.parametrize("kind, folder", SETS, ids=IDS)
def test_the_stand_ins_metrics_have_vllms_spec_families(twin, kind, folder):
    """Every vllm:spec_decode_* family of the fixture, with its type and label keys, is in the stand-in's /metrics;
    and specdoctor reads the same acceptance shape from both."""
    want = {n: f for n, f in families((folder / "metrics-after.txt").read_text()).items() if "spec_decode" in n}
    got = families(twin["after"])
    assert want, f"{kind} set {folder.name} has no spec-decode families"
    for name, fam in want.items():
        assert got.get(name) == fam, f"{name}: {kind} {folder.name} has {fam}, the stand-in {got.get(name)}"
    for before, after in ((folder / "metrics-before.txt", folder / "metrics-after.txt"), (None, None)):
        b, a = (before.read_text(), after.read_text()) if before else (twin["before"], twin["after"])
        tau = VLLM_0_26_0.accept_length_from_metrics(b, a)
        assert tau is not None and 1.0 <= tau <= 1 + 3, (kind, folder.name, tau)


@pytest.mark.parametrize("kind, folder", SETS, ids=IDS)
def test_version_and_models_bodies_have_vllms_keys(twin, kind, folder):
    """/version is `{"version": …}` (serve/instrumentator/basic.py:53); /v1/models an OpenAI list. Only a real
    capture has the bodies; a constructed set is held to the source's keys."""
    version = json.loads((folder / "version.json").read_text()) if (folder / "version.json").exists() \
        else {"version": "0.26.0"}
    assert set(json.loads(twin["version"])) == set(version)
    assert VLLM_0_26_0.read_server_info(version).version == VLLM_0_26_0.read_server_info(
        json.loads(twin["version"])).version == "0.26.0"
    if (folder / "models.json").exists():
        real = json.loads((folder / "models.json").read_text())
        mine = json.loads(twin["models"])
        assert set(mine) == set(real) and set(mine["data"][0]) >= set(real["data"][0]) - {"permission"}


def _standin_args():
    path = Path(__file__).resolve().parents[2] / "specdoctor/sim/standin/vllm/_front/args.py"
    spec = importlib.util.spec_from_file_location("vllm_standin_args", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("kind, folder", SETS, ids=IDS)
def test_the_launch_lines_parse_alike_in_specdoctor_and_the_stand_in(kind, folder):
    """Each launch line of the set (launch*.txt) is read by specdoctor's parser and accepted by the stand-in's,
    and both find the same speculative method and draft tokens."""
    from specdoctor.parsers.sglang import split_command

    args = _standin_args()
    lines = sorted(folder.glob("launch*.txt"))
    assert lines, f"{kind} set {folder.name} has no launch line"
    for f in lines:
        line = f.read_text().replace("\\\n", " ").strip()
        tokens = split_command(line)
        parsed = VLLM_0_26_0.parse_launch(tokens)
        entry = "serve" if "serve" in tokens else "api_server"
        flags = tokens[tokens.index("serve") + 1:] if entry == "serve" else parsed.flags
        a = args.parse_args(list(flags), entry)
        assert a["speculative_algorithm"] in ("EAGLE3", "EAGLE"), f.name
        assert str(a["speculative_num_steps"]) in line, f.name
