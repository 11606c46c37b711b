"""The same tools over a real loopback sshd: launch, find, propagation, server_info, benchmark, fingerprint, stop."""

from __future__ import annotations

import uuid

from specdoctor.toolkit import ToolContext, registry

from .helpers import FAKE, free_port


def test_tools_over_ssh(sshd):
    port = free_port()
    with sshd.connect(base_env={"PYTHONPATH": str(FAKE), "FAKE_MS_PER_TOKEN": "1"}) as host:
        ctx = ToolContext(host=host, run_id=f"ssh-{uuid.uuid4().hex[:8]}", auto_approve=True)
        cmd = (f"NCCL_ALGO=Ring python -m sglang.launch_server --model-path /m --tp-size 2 --port {port} "
               "--speculative-algorithm EAGLE3 --speculative-draft-model-path /d")
        try:
            r = registry.call(ctx, "launch_server", {"command": cmd, "python": sshd.python, "timeout_s": 30,
                                                    "env": {"NCCL_PROTO": "LL", "FAKE_DROP": "NCCL_PROTO"}})
            assert r.ok, r.summary
            assert r.output["log_path"].startswith(f"{host.home()}/.specdoctor/runs/{ctx.run_id}/")
            found = registry.call(ctx, "find_server_processes", {"port": port})
            s = found.output["servers"][0]
            assert sorted(s["ranks"]) == ["TP0", "TP1"] and s["args"]["speculative_algorithm"] == "EAGLE3"
            prop = registry.call(ctx, "check_env_propagation", {"port": port})
            rows = {x["name"]: x for x in prop.output["rows"]}
            assert rows["NCCL_PROTO"]["status"] == "dropped-for-workers" and rows["NCCL_PROTO"]["parent"] == "LL"
            assert rows["NCCL_ALGO"]["status"] == "propagated"
            info = registry.call(ctx, "server_info", {"port": port})  # through the SSH port forward
            assert info.ok and info.output["speculative_algorithm"] == "EAGLE3"
            bench = registry.call(ctx, "benchmark", {"port": port, "runs": 3, "requests_per_run": 1,
                                                    "max_new_tokens": 10, "log_path": r.output["log_path"]})
            assert bench.ok and len(bench.output["samples"]) == 3 and bench.output["accept_length"] == 2.0
            fp = registry.call(ctx, "fingerprint", {"port": port, "python": sshd.python})
            assert fp.ok and fp.output["worker_env"].get("NCCL_ALGO") == "Ring"
            assert "NCCL_PROTO" not in fp.output["worker_env"] and fp.output["server_version"] == "0.5.9-fake"
        finally:
            stop = registry.call(ctx, "stop_server", {"grace_s": 3})
        assert stop.ok and len(stop.output["stopped"]) == 1
        assert registry.call(ctx, "find_server_processes", {"port": port}).status == "no_data"
