"""`investigate --reference fleet:RUN`: a survey's majority fingerprint becomes the outlier's good run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from specdoctor.engine.survey_graph import run_survey
from specdoctor.fleet.models import SurveyParams
from specdoctor.fleet.reference import reference_on_host
from specdoctor.fleet.targets import parse_hosts
from specdoctor.models import Fingerprint
from specdoctor.sim.fleet import build_fleet
from specdoctor.toolkit import ToolContext, registry

SPECDOCTOR = str(Path(sys.executable).with_name("specdoctor"))


def test_the_majority_is_placed_on_the_outlier_and_its_diff_names_the_lost_variable(tmp_path):
    store = str(tmp_path / "s.sqlite")
    with build_fleet("alike", size=7, planted=["h07"]) as fleet:
        params = SurveyParams(targets=parse_hosts(str(fleet.hosts_file)), identity_files=[str(fleet.key_path)],
                              known_hosts=str(fleet.known_hosts), ssh_config=str(fleet.ssh_config))
        run = run_survey(params, checkpoint=store, parallel=8)
        assert run.analysis is not None and run.analysis.outliers == ["h07"]
        path = reference_on_host(f"fleet:{run.run_id}", fleet.spec_of("h07"), checkpoint=store,
                                 known_hosts=str(fleet.known_hosts), identity_files=[str(fleet.key_path)])
        with fleet.connect("h07") as host:
            placed = Fingerprint.model_validate_json(host.read(path))
            assert placed.worker_env.get("NCCL_PROTO") == "LL"  # what the other six hosts' workers have
            assert path.startswith(host.home() + "/.specdoctor/")
            ctx = ToolContext(host=host)
            now = registry.call(ctx, "fingerprint", {"port": fleet.sandboxes["h07"].port})
            diff = registry.call(ctx, "fingerprint_diff", {"a": path, "b": now.output})
            assert diff.ok, diff.error
            assert [c["key"] for c in diff.output["changes"]][:1] == ["worker_env.NCCL_PROTO"]
        with fleet.connect("h01") as host:  # an alike host shows no departure of consequence from the majority
            ctx = ToolContext(host=host)
            now = registry.call(ctx, "fingerprint", {"port": fleet.sandboxes["h01"].port})
            diff = registry.call(ctx, "fingerprint_diff", {"a": placed.model_dump(mode="json"), "b": now.output})
            assert [c["key"] for c in diff.output["changes"] if c["impact"] != "low"] == []


def test_bad_references_are_one_line_errors(tmp_path):
    env = {**os.environ, "SPECDOCTOR_HOME": str(tmp_path)}
    cases = [(["--host", "sim:seed", "--reference", "fleet:x"], "sim: host"),
             (["--host", "u@127.0.0.1:1", "--reference", "fleet:", "--checkpoint", str(tmp_path / "s.sqlite")],
              "fleet:RUN"),
             (["--host", "u@127.0.0.1:1", "--reference", "fleet:nope", "--checkpoint", str(tmp_path / "s.sqlite")],
              "no survey 'nope'")]
    for args, words in cases:
        res = subprocess.run([SPECDOCTOR, "investigate", *args], capture_output=True, text=True, env=env, timeout=120)
        assert res.returncode == 2, res.stderr
        assert words in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
