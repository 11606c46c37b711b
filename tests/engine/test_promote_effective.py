"""The NCCL promotion launches no candidate whose setting a relaunch cannot tell from one already launched (#46):
removing a variable that sitecustomize.py or nccl.conf sets inside every process leaves today's value, so 'as in
the good run' can be today's setting (sitecustomize-foreign) or 'remove the rest' (two-sources-a100). Must not
fire: a good run whose setting a relaunch can reach is still tried."""

from __future__ import annotations

from specdoctor.tools.nccl.nccl_promote import PromoteInput, _expand, planned_launches

LAUNCH = "python -m sglang.launch_server --model-path m --tp-size 2"
SITE = {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}


def test_the_good_run_that_only_removes_sitecustomize_variables_is_todays_setting():
    args = PromoteInput(command=LAUNCH, current=dict(SITE), good={}, not_removable=sorted(SITE))
    assert _expand(args) == [] and planned_launches(args) == 0


def test_the_good_run_equal_to_removing_the_rest_is_launched_once():
    cur = {**SITE, "NCCL_CONF_FILE": "/etc/nccl.conf"}
    args = PromoteInput(command=LAUNCH, current=cur, good={}, not_removable=sorted(SITE))
    assert [c.label for c in _expand(args)] == ["remove NCCL_CONF_FILE"]
    assert planned_launches(args) == 1 + 1


def test_a_good_run_a_relaunch_can_reach_is_still_tried():
    args = PromoteInput(command=LAUNCH, current=dict(SITE), good={"NCCL_PROTO": "LL"}, not_removable=sorted(SITE))
    assert [c.label for c in _expand(args)] == ["as in the good run (NCCL_PROTO=LL)"]
    lost = PromoteInput(command=LAUNCH, current={}, good={"NCCL_SOCKET_IFNAME": "eth0"})
    assert len(_expand(lost)) == 1  # a variable the workers lost: setting it back is a different setting


def test_a_removable_variable_still_gets_its_remove_trial():
    args = PromoteInput(command=LAUNCH, current={"NCCL_ALGO": "Ring"}, good={"NCCL_ALGO": "Tree"})
    assert [c.label for c in _expand(args)] == ["remove NCCL_ALGO", "as in the good run (NCCL_ALGO=Tree)"]
