"""Every playbook predicate says the sentence of the value it actually had, true and false both."""

from __future__ import annotations

from typing import Any

import pytest

from specdoctor.engine.predicates import PREDICATES, evaluate, explain
from specdoctor.engine.state import StateView
from specdoctor.toolkit import ToolResult


def _tool(tool: str, output: dict[str, Any]) -> dict[str, Any]:
    return ToolResult(tool=tool, status="ok", summary="", output=output).model_dump(mode="json")


def _catalog(files: list[str]) -> dict[str, Any]:
    return {"catalog": _tool("catalog_diffs", {"repo": "/r", "head": "abc", "untracked": files})}


def _prop(status: str) -> dict[str, Any]:
    row = {"name": "NCCL_PROTO", "shell": "LL", "parent": "LL", "workers": {"0": None}, "status": status}
    return {"propagation": _tool("check_env_propagation", {"port": 1, "main_pid": 2, "shell_source": "given",
                                                           "rows": [row]})}


def _deltas(kind: str) -> dict[str, Any]:
    delta = {"kind": kind, "name": "pcie-link" if kind == "hardware" else "NCCL_PROTO", "current": "x"}
    return {"deltas": _tool("list_deltas", {"reference": "good run", "deltas": [delta]})}


def _commits(n: int) -> dict[str, Any]:
    rows = [{"index": i + 1, "sha": f"{i:040d}", "subject": f"commit {i}", "date": "2026-12-01", "merge": False}
            for i in range(n)]
    return {"commits": _tool("catalog_commits", {"repo": "/r", "good": "a" * 40, "good_source": "good_ref",
                                                 "head": "b" * 40, "commits": rows})}


def _user_server(*, restarts_it: bool) -> dict[str, Any]:
    return {"pid": 7, "starttime": 1, "port": 30000, "argv": ["python"], "cwd": "/", "user": "u", "stdout": "/l",
            "stderr": "/l", "identity": "i", "supervisor": "supervisord" if restarts_it else "nohup",
            "supervisor_detail": "pid 2", "restarts_it": restarts_it, "holds_gpus": True}


_MEASURED = {"median": 10.0, "samples": [10.0, 10.0, 10.0]}
_SAME = {"outcome": "SAME", "comparison": {"outcome": "SAME", "verdict": "same"}}
_FASTER = {"outcome": "DIFFERENT", "comparison": {"outcome": "DIFFERENT", "verdict": "better"}}
_HELD = {"claimed": 10.0, "outcome": "SAME", "pct_change": 0.0, "median": 10.0, "ci_low": 9.8, "ci_high": 10.2}
_SHORT = {"claimed": 12.0, "outcome": "DIFFERENT", "pct_change": -16.7, "median": 10.0, "ci_low": 9.8,
          "ci_high": 10.2}

# name -> (state where it holds, state where it does not, a word the false sentence must carry)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any] | None, str]] = {
    "always": ({}, None, ""),
    "server_running": ({"facts": {"server": {"running": True}}}, {"facts": {"server": {"running": False}}}, "no"),
    "has_launch": ({"facts": {"launch": "python -m sglang.launch_server"}}, {}, "no"),
    "has_repo": ({"params": {"repo": "/r"}}, {"params": {}}, "no"),
    "has_claims": ({"params": {"expect": {"spec": 100}}}, {"params": {}}, "no"),
    "has_changes": ({"results": _catalog(["a.py"])}, {"results": _catalog([])}, "no"),
    "has_backup": ({"facts": {"backup_id": "b1"}}, {}, "no"),
    "has_measurements": ({"facts": {"measure": {"baseline": _MEASURED, "spec": _MEASURED}}},
                         {"facts": {"measure": {"baseline": _MEASURED}}}, "not"),
    "subtraction_changed_performance": ({"facts": {"subtraction": _FASTER}}, {"facts": {"subtraction": _SAME}},
                                        "did not"),
    "needs_nccl_sweep": ({"facts": {"topology": {"gpu_count": 2, "interconnect": "pcie"}}},
                         {"facts": {"topology": {"gpu_count": 2, "interconnect": "nvlink"}},
                          "results": _prop("propagated")}, "not"),
    "has_good_fingerprint": ({"params": {"good_fingerprint": {"x": 1}}}, {"params": {}}, "no"),
    "has_hardware_deltas": ({"results": _deltas("hardware")}, {"results": _deltas("env")}, "no"),
    "user_server_holds_gpus": ({"facts": {"user_server_record": _user_server(restarts_it=False)}},
                               {"facts": {"user_server_record": _user_server(restarts_it=True)}}, "supervisord"),
    "has_served_changes": ({"results": _catalog(["a.py"]), "facts": {"sglang_origin": {"from_checkout": True}}},
                           {"results": _catalog(["a.py"]),
                            "facts": {"sglang_origin": {"from_checkout": False, "where": "/site/sglang",
                                                        "repo": "/r"}}}, "not from the --repo"),
    # box time: the identity the plan step records settles what a good run's digests and the running server show
    "must_stop_user_server": ({"facts": {"user_server_record": _user_server(restarts_it=False)}},
                              {"facts": {"user_server_record": _user_server(restarts_it=False),
                                         "identity": {"claims_hold_running": True,
                                                      "notes": ["every claim holds on the running server"]}}},
                              "need not"),
    "reproduce_needed": ({"facts": {"launch": "python -m sglang.launch_server"}},
                         {"facts": {"launch": "python -m sglang.launch_server",
                                    "identity": {"claims_hold_running": True,
                                                 "notes": ["every claim holds on the running server"]}}},
                         "every claim held"),
    "code_trials_needed": ({"results": _catalog(["a.py"]), "facts": {"sglang_origin": {"from_checkout": True}}},
                           {"results": _catalog(["a.py"]), "facts": {"sglang_origin": {"from_checkout": True},
                                                                     "identity": {"code": "identical"}}},
                           "same code as the good run"),
    # a gap to explain: every claim held today (a material shortfall ruled out) spares every explaining trial
    "gap_to_explain": ({"facts": {"measure": {"spec": _MEASURED}, "claims": {"spec": _SHORT}}},
                       {"facts": {"measure": {"spec": _MEASURED}, "claims": {"spec": _HELD}}}, "every claim held"),
    "nccl_promotion_needed": ({"facts": {"topology": {"gpu_count": 2, "interconnect": "pcie"}}},
                              {"facts": {"topology": {"gpu_count": 2, "interconnect": "pcie"},
                                         "measure": {"spec": _MEASURED}, "claims": {"spec": _HELD}}}, "modelled"),
    "commit_trials_needed": ({"results": _commits(1), "facts": {"launch": "python -m sglang.launch_server"}},
                             {"results": _commits(1), "facts": {"launch": "python -m sglang.launch_server",
                                                                "measure": {"spec": _MEASURED},
                                                                "claims": {"spec": _HELD}}}, "every claim held"),
    # upstream commits: a reference commit is known, and HEAD has moved past it
    "has_reference_commit": ({"params": {"good_ref": "v0.5.17"}}, {"params": {}}, "no reference commit"),
    "upstream_moved": ({"results": _commits(1), "facts": {"launch": "python -m sglang.launch_server"}},
                       {"results": _commits(0), "facts": {"launch": "python -m sglang.launch_server"}},
                       "HEAD is the good run's commit"),
}


def test_every_predicate_has_a_case() -> None:
    assert set(CASES) == set(PREDICATES), "a new predicate needs a true and a false case here"


@pytest.mark.parametrize("name", sorted(CASES))
def test_true_and_false_sentences(name: str) -> None:
    when_true, when_false, negation = CASES[name]
    value, said = explain(name, StateView(when_true))
    assert value is True and evaluate(name, StateView(when_true))
    assert said.startswith(PREDICATES[name].description)
    if when_false is None:  # `always` has no false state
        return
    value, said = explain(name, StateView(when_false))
    assert value is False
    assert said.startswith(PREDICATES[name].when_false)
    assert said != PREDICATES[name].description and "not the case" not in said
    assert negation in said.split()  or negation in said


def test_subtraction_sentence_carries_the_comparator_outcome() -> None:
    # the old text said "not the case: removing the non-essential patches made it faster" after a SAME
    _, said = explain("subtraction_changed_performance", StateView({"facts": {"subtraction": _SAME}}))
    assert said == "removing the non-essential patches did not make it faster (comparator SAME, same)"
    _, said = explain("subtraction_changed_performance", StateView({"facts": {"subtraction": _FASTER}}))
    assert said.startswith("removing the non-essential patches made it faster (comparator DIFFERENT")
