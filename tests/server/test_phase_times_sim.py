"""phase_times on the twin: SGLang's profiler routes write a real-shaped trace holding the scenario's phase times."""

from __future__ import annotations

import pytest

from specdoctor.models.phases import PhaseTimes
from specdoctor.parsers.sglang import parse_launch_command
from specdoctor.sim import open_sim_host
from specdoctor.sim.predict import predict
from specdoctor.stats.phases import cycle_account_line
from specdoctor.toolkit import ToolContext, registry


@pytest.fixture(scope="module")
def seed():
    with open_sim_host("seed") as host:
        yield host


def test_seed_verify_is_measured_from_the_profiler(seed):
    ctx = ToolContext(host=seed, run_id="sim-phases")
    port = parse_launch_command(seed.hints.launch).port
    res = registry.call(ctx, "phase_times", {"port": port, "runs": 3, "requests_per_run": 2, "max_new_tokens": 48,
                                             "baseline_tps": [82.0, 81.0, 83.0]})
    assert res.ok, res.summary
    out = res.output
    truth = predict(seed.sandbox)  # type: ignore[attr-defined]
    assert out["source"] == "profiler-gpu" and out["cycles"] >= 60 and out["steps"] == 2
    assert out["verify_ms"]["ms"] == pytest.approx(truth.t_verify_ms, rel=0.06)
    assert out["draft_ms"]["ms"] == pytest.approx(truth.t_draft_ms, rel=0.06)
    lo, hi = out["verify_ms"]["ci"]
    assert lo <= out["verify_ms"]["ms"] <= hi and out["verify_ms"]["cpu_ms"] < out["verify_ms"]["ms"]
    assert "TARGET_VERIFY" in out["verify_ms"]["source"] and out["decode_ms"]["source"].startswith("derived")
    assert out["overhead"]["tps_with"] < out["overhead"]["tps_without"]
    assert out["trace_path"].endswith("-TP-0.trace.json.gz") and "/profile/specdoctor-" in out["trace_path"]
    # SGLang's cycle keeps its draft-extend part (vLLM's has none: tests/sim/test_trace_conformance_vllm.py)
    assert out["phases"] == ["draft", "verify", "draft_extend"]
    times = PhaseTimes.model_validate(out)
    line = cycle_account_line(times, times)
    assert line is not None and "draft-extend +0.00" in line and "sample" not in line, line


def test_a_trace_still_being_written_is_read_once_whole(tmp_path):
    """Real 0.5.17: torch's export streams into the final name, and a reader that took the file as soon as it
    appeared got a truncated gzip (both real phase runs ended no_data). The tool waits for the end of stream."""
    import gzip
    import threading
    import time

    from specdoctor.host.local import LocalHost
    from specdoctor.tools.serving.phase_times import _finished_trace

    path = tmp_path / "specdoctor-1-TP-0.trace.json.gz"
    text = '{"traceEvents": [' + ",".join(f'{{"ph": "X", "ts": {i}}}' for i in range(20000)) + "]}"

    def export() -> None:
        with gzip.open(path, "wt") as fh:
            for i in range(6):
                fh.write(text[len(text) * i // 6:len(text) * (i + 1) // 6])
                fh.flush()
                time.sleep(0.3)

    writer = threading.Thread(target=export)
    writer.start()
    while not path.exists() or path.stat().st_size == 0:
        time.sleep(0.01)
    host = LocalHost()
    with pytest.raises(EOFError):  # what the first real reader met
        gzip.decompress(host.read(str(path)))
    data = _finished_trace(ToolContext(host=host, run_id="t"), str(path), time.monotonic() + 30, 30)
    writer.join()
    assert gzip.decompress(data).decode() == text


def test_a_trace_never_finished_is_no_data_in_one_line(tmp_path):
    import gzip
    import time

    from specdoctor.errors import NoData
    from specdoctor.host.local import LocalHost
    from specdoctor.tools.serving.phase_times import _finished_trace

    path = tmp_path / "x-TP-0.trace.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}' * 1000)[:-20])
    with pytest.raises(NoData, match="still being written after 1 s") as err:
        _finished_trace(ToolContext(host=LocalHost(), run_id="t"), str(path), time.monotonic() + 1, 1)
    assert "\n" not in str(err.value)


def test_the_twin_writes_its_trace_into_the_final_name_as_it_goes(tmp_path, monkeypatch):
    """Conformance with torch's export (what broke the first real reader): no temporary name, the stream grows.
    Looked at in each pause between the writes (a watching thread raced the writer on a loaded CI box)."""
    import gzip

    from specdoctor.sim.standin.sglang._twin import profiler

    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", str(tmp_path))
    perf = {"speculative": True, "k": 2, "t_draft_ms": 3.0, "t_verify_ms": 20.0}
    state: dict = {"engine": type("E", (), {"perf": perf, "running": 1})()}
    assert profiler.start_profile(state, {"num_steps": 1000})[0] == 200
    prof = state["profiler"]
    assert prof.with_stack  # SGLang's default
    for _ in range(100):
        prof.on_step(state, 25.0)

    def _complete(data: bytes) -> bool:
        try:
            gzip.decompress(data)
            return True
        except EOFError:
            return False

    seen: list[tuple[list[str], bool]] = []

    def look(_seconds: float) -> None:  # the writer's pause: what a reader would find now
        names = sorted(p.name for p in tmp_path.iterdir())
        seen.append((names, len(names) == 1 and _complete((tmp_path / names[0]).read_bytes())))

    monkeypatch.setattr(profiler.time, "sleep", look)
    assert profiler.stop_profile(state)[0] == 200
    monkeypatch.undo()
    assert len(seen) > 1 and all(len(n) == 1 and n[0].endswith("-TP-0.trace.json.gz") for n, _ in seen)
    assert [whole for _, whole in seen[:-1]] == [False] * (len(seen) - 1)  # half written under its final name
    assert _complete(next(tmp_path.iterdir()).read_bytes())  # then whole
    assert not any(p.name.endswith(".part") for p in tmp_path.iterdir())
