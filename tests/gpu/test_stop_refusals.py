"""stop_user_server stops only the inference server it recorded: never another process, never a reused pid."""

from __future__ import annotations

import subprocess

from specdoctor.host.local import LocalHost
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.serving.user_server import capture


def test_refuses_a_process_that_is_not_an_inference_server():
    proc = subprocess.Popen(["sleep", "60"])
    try:
        ctx = ToolContext(host=LocalHost(name="local"), run_id="refuse", auto_approve=True)
        cap = capture(ctx.host, proc.pid)
        res = registry.call(ctx, "stop_user_server", {"pid": proc.pid, "starttime": cap.starttime})
        assert not res.ok and "not an inference server" in res.summary
        wrong = registry.call(ctx, "stop_user_server", {"pid": proc.pid, "starttime": cap.starttime + 1})
        assert not wrong.ok and "start time changed" in wrong.summary
        assert proc.poll() is None  # still running
    finally:
        proc.kill()
        proc.wait()
