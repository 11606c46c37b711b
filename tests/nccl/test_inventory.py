"""nccl_inventory on this machine: captured topologies, a model config.json, nccl.conf files, a launch line."""

from __future__ import annotations

import json
import socket
import sys

from specdoctor.toolkit import registry
from specdoctor.tools.nccl.nccl import NcclInventory

from .conftest import FIXTURES

LAUNCH = ("python -m sglang.launch_server --model-path {model} --tp 8 --speculative-algorithm EAGLE3 "
          "--speculative-num-steps 2 --speculative-num-draft-tokens 3 --port 30123")


def _inventory(ctx, tmp_path, topo: str, tp: int | None = None) -> NcclInventory:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["KimiK25"], "text_config": {"hidden_size": 7168}}))
    conf = tmp_path / "my-nccl.conf"
    conf.write_text("# tuned by someone\nNCCL_PROTO=Simple\n")
    ctx.host.base_env.update({"FAKE_TOPO": str(FIXTURES / topo), "NCCL_CONF_FILE": str(conf)})
    args = {"launch": LAUNCH.format(model=model), "python": sys.executable}
    if tp:
        args["tp"] = tp
    res = registry.call(ctx, "nccl_inventory", args)
    assert res.ok, res.summary
    return NcclInventory.model_validate(res.output)


def test_pcie_two_numa_box(perf_ctx, tmp_path):
    inv = _inventory(perf_ctx, tmp_path, "8gpu-pcie-pix-phb-sys-2numa-with-prompt.txt")
    assert (inv.interconnect, inv.gpus, inv.tp) == ("pcie", 8, 8)
    assert inv.link_kinds == {"PIX": 4, "PHB": 8, "SYS": 16}
    assert inv.numa_nodes == ["0", "1"] and inv.crosses_numa is True
    assert inv.hidden_size == 7168 and inv.draft_tokens == 3
    assert [(s.label, s.bytes) for s in inv.sizes] == [("decode b=1", 14336), ("verify b=1", 43008),
                                                       ("decode b=16", 229376), ("verify b=16", 688128)]
    assert inv.bench_tool == "all_reduce_perf" and inv.all_reduce_perf.endswith("tests/nccl/bin/all_reduce_perf")
    assert list(inv.nccl_conf.values()) == [{"NCCL_PROTO": "Simple"}]
    assert any("custom all-reduce is disabled" in n for n in inv.notes)
    assert inv.torch_version and inv.torch_version.startswith("2.")  # read from the host's python


def test_nvlink_subset_by_tp(perf_ctx, tmp_path):
    inv = _inventory(perf_ctx, tmp_path, "8x-h100-nv18-9nic-tabs-EXCERPT.txt", tp=4)
    assert inv.interconnect == "nvlink" and inv.tp == 4 and inv.link_kinds == {"NV18": 6}
    assert inv.crosses_numa is False


def test_no_topology_and_no_model(bare_ctx):
    with socket.socket() as s:  # a port nobody serves: other tests' servers on this machine stay out of it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = registry.call(bare_ctx, "nccl_inventory", {"tp": 2, "python": sys.executable, "port": port})
    inv = NcclInventory.model_validate(res.output)
    assert inv.interconnect == "unknown" and inv.sizes == []
    assert any("hidden size unknown" in n for n in inv.notes)
    assert inv.launcher_drops is None  # no server: propagation not claimed either way
