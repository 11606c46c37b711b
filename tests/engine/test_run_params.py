"""The run's parameters are typed: what was given round-trips through the checkpoint, `$params` references resolve as
over the old dict, and a value of the wrong kind is one line naming the parameter, before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.engine.params import run_params
from specdoctor.engine.state import RunState, StateView
from specdoctor.errors import UsageError


def test_given_values_round_trip_and_defaults_stay_out_of_the_checkpoint() -> None:
    given = {"repo": "/r", "runs": 8, "expect": {"spec": 120.0}, "good_ref": "v1", "tp": None,
             "playbook_only": [1, 2]}  # a playbook's own parameter, unknown to the model: kept as given
    state = RunState.from_checkpoint({"run_id": "r1", "params": given})
    assert state.params.runs == 8 and state.params.requests_per_run == 3  # read typed, with the default
    assert state.to_checkpoint()["params"] == given  # only what was given, as given
    view = StateView(state)
    assert view.get("params.repo") == "/r" and view.get("params.playbook_only") == [1, 2]
    # a reference to a parameter nobody gave resolves to nothing, as over the dict (a tool keeps its own default)
    assert view.get("params.max_new_tokens") is None


def test_a_sha_given_as_a_number_is_text_and_a_path_or_json_fingerprint_both_read() -> None:
    assert run_params({"good_ref": 1234567}).good_ref == "1234567"
    assert run_params({"good_fingerprint": {"tok_s": {"spec": 1.0}}}).good_fingerprint == {"tok_s": {"spec": 1.0}}


@pytest.mark.parametrize(("values", "name"), [({"runs": "many"}, "runs"), ({"expect": "spec=100"}, "expect"),
                                              ({"max_new_tokens": 0}, "max_new_tokens")])
def test_a_wrong_value_is_one_line_naming_it(values: dict, name: str) -> None:
    with pytest.raises(UsageError) as exc:
        run_params(values)
    assert str(exc.value).startswith(f"parameter {name}=") and "\n" not in str(exc.value)


def test_the_cli_refuses_a_wrong_param_in_one_line_and_starts_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", "from specdoctor.cli import main; main()", "investigate",
                           "--host", "sim:seed", "--yes", "--out", str(out), "--param", "runs=many"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert any("parameter runs='many'" in ln for ln in lines), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists() or not list(out.iterdir())  # no checkpoint, no report: nothing ran


def test_a_checkpoint_an_older_version_wrote_still_reads_as_written() -> None:
    # `--param essential=foo.py` reached the record as text before parameters were typed: refused at a new start,
    # but a run that recorded it must still resume, restore and clean up (the safety net reads this record)
    old = {"repo": "/r", "essential": "foo.py", "launch_timeout_s": 30}
    with pytest.raises(UsageError):
        run_params(old)
    state = RunState.from_checkpoint({"run_id": "r0", "params": old})
    assert state.params.repo == "/r" and state.params.launch_timeout_s == 30
    assert state.to_checkpoint()["params"] == old


def test_the_error_line_redacts_and_cuts_the_value() -> None:
    with pytest.raises(UsageError) as exc:
        run_params({"runs": "x" * 500 + " --api-key sk-secretsecretsecret"})
    line = str(exc.value)
    assert "sk-secretsecretsecret" not in line and len(line) < 400, line
    with pytest.raises(UsageError) as exc:
        run_params({"good_fingerprint": [1, 2]})  # neither a path nor a JSON object: named once, no branch
    assert str(exc.value).startswith("parameter good_fingerprint=")
