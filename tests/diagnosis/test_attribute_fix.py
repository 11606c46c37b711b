"""Each confirmed delta's fix is the exact edit for where it comes from (file, launch line, patch, sitecustomize)."""

from __future__ import annotations

from specdoctor.diagnosis.delta_causes import cause_name as _cause_name
from specdoctor.diagnosis.delta_causes import fix_command
from specdoctor.engine.state import StateView
from specdoctor.models import Delta, Revert

VIEW = StateView({"params": {"repo": "/home/u/sglang"}, "facts": {}, "results": {}})


def _fix(d: Delta, view: StateView) -> str:
    """The fix as the attribute step asks for it: the run's checkout and the user's launch line."""
    return fix_command(d, repo=view.params.repo, launch=view.get("facts.launch"))


def _d(**kw) -> Delta:
    return Delta(revertible=True, **kw)


def test_fixes_follow_the_source_of_the_delta():
    site = _d(kind="env", name="NCCL_P2P_DISABLE", current="1", source="/venv/lib/site-packages/sitecustomize.py",
              revert=Revert(undo_sitecustomize=["NCCL_P2P_DISABLE"]))
    assert _fix(site, VIEW) == ('remove `os.environ["NCCL_P2P_DISABLE"] = ...` from '
                                "/venv/lib/site-packages/sitecustomize.py")
    rc = _d(kind="env", name="CUDA_LAUNCH_BLOCKING", current="1", source="/home/u/.bashrc",
            revert=Revert(unset=["CUDA_LAUNCH_BLOCKING"]))
    assert _fix(rc, VIEW) == "remove the line setting CUDA_LAUNCH_BLOCKING from /home/u/.bashrc, then relaunch"
    conf = _d(kind="env", name="NCCL_PROTO", current="Simple", source="/etc/nccl.conf",
              revert=Revert(env={"NCCL_PROTO": "LL,LL128,Simple"}))
    assert _fix(conf, VIEW).startswith("remove the line setting NCCL_PROTO from /etc/nccl.conf")
    shell = _d(kind="env", name="NCCL_ALGO", current="Ring", source="launch shell", revert=Revert(unset=["NCCL_ALGO"]))
    assert _fix(shell, VIEW) == "unset NCCL_ALGO in launch shell"
    flag = _d(kind="launch-flag", name="disable_cuda_graph", current="1", source="launch line",
              revert=Revert(argv_set={"disable_cuda_graph": None}))
    assert _fix(flag, VIEW) == "relaunch without --disable-cuda-graph"
    launched = StateView({"params": {}, "facts": {"launch": "python -m sglang.launch_server --model-path /m "
                                                            "--disable-cuda-graph --attention-backend triton --port 30000"},
                          "results": {}})
    assert _fix(flag, launched) == ("python -m sglang.launch_server --model-path /m --attention-backend triton "
                                    "--port 30000")  # the command to run: the user's line without the flag
    backend = _d(kind="launch-flag", name="attention_backend", current="triton", source="launch line",
                 revert=Revert(argv_set={"attention_backend": "fa3"}))
    assert _fix(backend, launched).endswith("--attention-backend fa3") and "triton" not in _fix(backend, launched)
    patch = _d(kind="code", name="python/sglang/x.py", revert=Revert(drop_patches=["python/sglang/x.py"]))
    assert "git -C /home/u/sglang apply -R x.revert.patch" in _fix(patch, VIEW)


def test_cause_names_say_value_and_source():
    flag = _d(kind="launch-flag", name="attention_backend", reference="fa3", current="triton", source="launch line",
              revert=Revert(argv_set={"attention_backend": "fa3"}))
    assert _cause_name(flag) == "--attention-backend triton (good run: fa3)"
    env = _d(kind="env", name="NCCL_P2P_DISABLE", current="1", source="sitecustomize.py",
             revert=Revert(undo_sitecustomize=["NCCL_P2P_DISABLE"]))
    assert _cause_name(env) == "NCCL_P2P_DISABLE=1 set by sitecustomize.py"
    lost = _d(kind="env", name="NCCL_PROTO", reference="LL", current=None, source="launcher",
              revert=Revert(env={"NCCL_PROTO": "LL"}))
    assert _cause_name(lost) == "NCCL_PROTO unset today (good run: LL; launcher)"


def test_a_switch_flag_is_named_without_an_empty_value():
    """Real launch-flag run (H100, 0.5.17): '--disable-cuda-graph  (good run: absent)' had an empty value."""
    added = _d(kind="launch-flag", name="disable_cuda_graph", reference=None, current="", source="launch line",
               revert=Revert(argv_set={"disable_cuda_graph": None}))
    assert _cause_name(added) == "--disable-cuda-graph (good run: absent)"
    dropped = _d(kind="launch-flag", name="enable_dp_attention", reference="", current=None, source="launch line",
                 revert=Revert(argv_set={"enable_dp_attention": ""}))
    assert _cause_name(dropped) == "--enable-dp-attention absent (good run: set)"
    claims = _d(kind="launch-flag", name="speculative_num_steps", reference="5", current="3", source="launch line",
                reference_label="claims", revert=Revert(argv_set={"speculative_num_steps": "5"}))
    assert _cause_name(claims) == "--speculative-num-steps 3 (claims: 5)"


def test_patches_join_the_revert_search_only_when_the_bisection_left_them_open():
    from specdoctor.engine.actions.attribute import _code_settled

    def view(**facts) -> StateView:
        return StateView({"params": {}, "facts": facts, "results": {}})

    faster = {"outcome": "DIFFERENT", "comparison": {"verdict": "better"}}
    assert _code_settled(view(subtraction={"outcome": "SAME"})) is not None  # patches change nothing
    assert _code_settled(view(subtraction={"outcome": "DIFFERENT", "comparison": {"verdict": "worse"}})) is not None
    assert _code_settled(view(subtraction=faster)) is None  # faster without them, no culprit confirmed: search
    assert _code_settled(view(subtraction={"outcome": "UNRESOLVED"})) is not None  # no evidence they matter
    assert _code_settled(view()) is None  # no subtraction at all (no backup): the search tries them
