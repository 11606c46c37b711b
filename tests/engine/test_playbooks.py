"""Playbooks: built-ins validate, bad YAML and bad references fail with one-line errors."""

from __future__ import annotations

import pytest

from specdoctor.engine.playbook import list_playbooks
from specdoctor.engine.playbook_check import check_references, load_playbook
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
    # Read-only examination first (the user's server still runs), then its GPUs are freed (with consent) for the
    # launching steps, and it is given back before the verdict.
    order = ["fingerprint", "user_server", "catalog", "triage", "gates", "propagation", "nccl", "free_gpus",
             "reproduce", "backup", "essentials", "subtract", "bisect", "restore", "give_back", "breakeven", "conclude"]
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
        check_references(load_playbook(str(p)))


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


def _load_error(tmp_path, steps: str, extra: str = "") -> str:
    """The one-line error loading a playbook with these steps gives (it must fail at load, not at run)."""
    p = tmp_path / "mine.yaml"
    p.write_text(f"name: mine\n{extra}steps:\n{steps}")
    with pytest.raises(UsageError) as exc:
        load_playbook(str(p))
    msg = str(exc.value)
    assert "\n" not in msg and str(p) in msg
    return msg


def test_a_misspelled_step_key_fails_at_load_naming_file_step_and_key(tmp_path):
    msg = _load_error(tmp_path, "  - {id: catalog, tool: catalog_diffs, args: {repo: $params.repo}, on_eror: retry}\n")
    assert "step catalog, key on_eror: unknown key" in msg


def test_a_misspelled_top_level_key_fails_at_load(tmp_path):
    msg = _load_error(tmp_path, "  - {id: catalog, tool: catalog_diffs, args: {repo: $params.repo}}\n",
                      extra="prerequisite: [has_repo]\n")
    assert "key prerequisite: unknown key" in msg


def test_an_argument_the_tool_does_not_take_fails_at_load(tmp_path):
    msg = _load_error(tmp_path, "  - {id: catalog, tool: catalog_diffs, args: {repo: $params.repo, rpeo: /x}}\n")
    assert "step catalog, key args.rpeo: catalog_diffs takes no argument 'rpeo'" in msg


def test_a_literal_argument_of_the_wrong_type_fails_at_load(tmp_path):
    msg = _load_error(tmp_path, "  - {id: prop, tool: check_env_propagation, args: {port: lots}}\n")
    assert "step prop, key args.port:" in msg and "'lots'" in msg


def test_a_required_argument_nobody_gives_fails_at_load(tmp_path):
    msg = _load_error(tmp_path, "  - {id: catalog, tool: catalog_diffs}\n")
    assert "step catalog, key args.repo: catalog_diffs needs argument 'repo'" in msg


def test_a_reference_to_a_later_step_fails_at_load(tmp_path):
    msg = _load_error(tmp_path, "  - {id: triage, tool: triage_diffs, args: {repo: $state.catalog.repo}}\n"
                                "  - {id: catalog, tool: catalog_diffs, args: {repo: $params.repo}}\n")
    assert "step triage, key args.repo:" in msg and "'catalog', which runs later" in msg


def test_references_must_name_a_parameter_and_a_field_the_earlier_tool_returns(tmp_path):
    msg = _load_error(tmp_path, "  - {id: catalog, tool: catalog_diffs, args: {repo: $params.checkout}}\n")
    assert "step catalog, key args.repo: '$params.checkout' names no parameter" in msg
    msg = _load_error(tmp_path, "  - {id: catalog, tool: catalog_diffs, args: {repo: $params.repo}}\n"
                                "  - {id: triage, tool: triage_diffs, args: {repo: $params.repo, launch: "
                                "$state.catalog.lanch}}\n")
    assert "step triage, key args.launch:" in msg and "catalog_diffs output has no field 'lanch'" in msg


def test_a_saved_fact_must_name_a_field_of_the_output(tmp_path):
    msg = _load_error(tmp_path, "  - {id: backup, tool: backup_worktree, args: {repo: $params.repo}, "
                                "save: {backup_id: id}}\n")
    assert "step backup, key save.backup_id: backup_worktree output has no field 'id'" in msg


def test_an_action_that_takes_no_arguments_refuses_one(tmp_path):
    msg = _load_error(tmp_path, "  - {id: conclude, action: conclude, args: {verbose: true}}\n")
    assert "step conclude, key args.verbose: action conclude takes no argument 'verbose'" in msg


def test_a_declared_parameter_earlier_steps_and_literals_load(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text("name: ok\nparameters:\n  checkout: {default: /srv/sglang}\nsteps:\n"
                 "  - {id: catalog, tool: catalog_diffs, args: {repo: $params.checkout}}\n"
                 "  - {id: triage, tool: triage_diffs, args: {repo: $state.catalog.repo, port: 30000}}\n"
                 "  - {id: conclude, action: conclude}\n")
    assert [s.id for s in load_playbook(str(p)).steps] == ["catalog", "triage", "conclude"]


def test_a_fact_saved_under_an_undeclared_name_fails_at_load_in_one_line(tmp_path):
    """`save:` names are run facts (diagnosis/facts.py RunFacts): a typo fails before any step runs, not at the write."""
    p = tmp_path / "pb.yaml"
    p.write_text("name: t\nsteps:\n  - {id: catalog, tool: catalog_diffs, args: {repo: $params.repo},"
                 " save: {backup_idd: repo}}\n  - {id: conclude, action: conclude}\n")
    with pytest.raises(UsageError, match=r"step catalog, key save.backup_idd: no run fact 'backup_idd'") as err:
        load_playbook(str(p))
    assert "\n" not in str(err.value)


def test_the_playbook_models_import_no_action():
    """The circle playbook → actions → conclude → context → playbook is gone: the models import no engine part."""
    import grimp

    graph = grimp.build_graph("specdoctor")
    engine = {m for m in graph.modules if m.startswith("specdoctor.engine")}
    assert not (graph.find_upstream_modules("specdoctor.engine.playbook") & engine)
    assert graph.find_shortest_chain(importer="specdoctor.engine.actions.conclude",
                                     imported="specdoctor.engine.playbook_check") is None
