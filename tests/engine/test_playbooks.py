"""Playbooks: built-ins validate, bad YAML and bad references fail with one-line errors."""

from __future__ import annotations

import pytest

from specdoctor.engine.playbook import list_playbooks, load_playbook
from specdoctor.engine.refs import resolve_args
from specdoctor.engine.state import StateView
from specdoctor.errors import UsageError


def test_builtin_playbooks_are_listed_and_valid():
    names = list_playbooks()
    assert {"regression", "gate-audit", "patch-bisect", "nccl-sweep", "breakeven"} <= set(names)
    for name in names:
        pb = load_playbook(name)
        assert pb.steps, name


def test_regression_playbook_follows_the_seed_flow_in_order():
    ids = [s.id for s in load_playbook("regression").steps]
    order = ["fingerprint", "reproduce", "catalog", "triage", "gates", "propagation", "backup", "essentials",
             "subtract", "bisect", "restore", "nccl", "breakeven", "conclude"]
    assert [i for i in ids if i in order] == order


def test_unknown_playbook_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown playbook"):
        load_playbook("no-such-playbook")


def test_invalid_yaml_and_schema_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps: [ {id: a, tool: host_facts, action: conclude} ]\n")
    with pytest.raises(UsageError, match="exactly one of tool / action"):
        load_playbook(str(bad))
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        load_playbook(str(broken))


def test_unknown_predicate_is_reported_before_running(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\nsteps:\n  - {id: a, tool: host_facts, when: moon_is_full}\n")
    with pytest.raises(UsageError, match="unknown predicate 'moon_is_full'"):
        load_playbook(str(p)).check_references()


def test_references_resolve_without_evaluation():
    view = StateView({"params": {"repo": "/r"}, "facts": {"server": {"port": 31000}},
                      "results": {"catalog": {"tool": "catalog_diffs", "status": "ok", "summary": "1 file",
                                              "output": {"files": [{"path": "a.py"}]}}}})
    args = resolve_args({"repo": "$params.repo", "port": "$facts.server.port", "files": "$state.catalog.files",
                         "missing": "$facts.nothing", "lit": {"literal": "$params.repo"}, "n": 3}, view)
    assert args == {"repo": "/r", "port": 31000, "files": [{"path": "a.py"}], "lit": "$params.repo", "n": 3}


def test_reserved_step_ids_are_refused(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("name: r\nsteps:\n  - {id: facts, tool: host_facts}\n")
    with pytest.raises(UsageError, match="reserved"):
        load_playbook(str(p))
