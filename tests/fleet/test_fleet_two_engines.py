"""A surveyed host whose box also runs another engine's server: the engine is the surveyed port's server's.

On a real box an SGLang server and a vLLM one can run side by side; the host's processes alone then name two engines
and cannot say which one to measure. The survey names a port, and that port's server says which engine it is.
"""

from __future__ import annotations

from specdoctor.engine.survey_graph import run_survey
from specdoctor.fleet.models import SurveyParams
from specdoctor.fleet.targets import parse_hosts
from specdoctor.sim import build_sandbox, load_scenario
from specdoctor.sim.fleet import build_fleet
from specdoctor.sim.ports import free_port


def test_a_vllm_server_beside_the_surveyed_sglang_servers_does_not_stop_their_measurement(tmp_path):
    other = build_sandbox(load_scenario("vllm-enforce-eager"), tmp_path / "vllm-box", start_server=True,
                          port=free_port())
    try:
        assert other.server_pids(), "the vLLM server beside the fleet did not start"
        with build_fleet("alike", size=3, planted=[]) as fleet:
            params = SurveyParams(targets=parse_hosts(str(fleet.hosts_file)), identity_files=[str(fleet.key_path)],
                                  known_hosts=str(fleet.known_hosts), ssh_config=str(fleet.ssh_config))
            run = run_survey(params, checkpoint=str(tmp_path / "s.sqlite"), parallel=3)
            rows = {r.name: r for r in run.rows if r.name in fleet.sandboxes}
            assert len(rows) == 3
            assert {n: (r.status, r.error) for n, r in rows.items()} == {n: ("ok", None) for n in rows}
            assert all(r.throughput is not None and r.throughput.median > 0 for r in rows.values())
    finally:
        other.remove()
