"""Host spec strings: every accepted form, and one-line UsageErrors for bad input."""

from __future__ import annotations

import pytest

from specdoctor.errors import UsageError
from specdoctor.host import HostSpec, LocalHost, open_host, parse_host_spec


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("local", HostSpec(kind="local")),
        ("  local ", HostSpec(kind="local")),
        ("sim:seed", HostSpec(kind="sim", scenario="seed")),
        ("sim:path/to/scenario.yaml", HostSpec(kind="sim", scenario="path/to/scenario.yaml")),
        ("gpu-box", HostSpec(kind="ssh", host="gpu-box")),
        ("root@gpu-box", HostSpec(kind="ssh", host="gpu-box", user="root")),
        ("root@gpu-box:2222", HostSpec(kind="ssh", host="gpu-box", user="root", port=2222)),
        ("gpu-box.example.com:22", HostSpec(kind="ssh", host="gpu-box.example.com", port=22)),
        ("ubuntu@10.0.0.7", HostSpec(kind="ssh", host="10.0.0.7", user="ubuntu")),
        ("ssh://root@gpu-box:2222", HostSpec(kind="ssh", host="gpu-box", user="root", port=2222)),
        ("ssh://gpu-box", HostSpec(kind="ssh", host="gpu-box")),
        ("ssh://root@gpu-box/", HostSpec(kind="ssh", host="gpu-box", user="root")),
        ("root@[::1]", HostSpec(kind="ssh", host="::1", user="root")),
        ("root@[fe80::1]:2222", HostSpec(kind="ssh", host="fe80::1", user="root", port=2222)),
        ("ssh://root@[::1]:2222", HostSpec(kind="ssh", host="::1", user="root", port=2222)),
        ("first.last_1@box", HostSpec(kind="ssh", host="box", user="first.last_1")),
    ],
)
def test_accepted_forms(spec: str, expected: HostSpec) -> None:
    assert parse_host_spec(spec) == expected


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("", "empty host spec"),
        ("   ", "empty host spec"),
        ("sim:", "sim: needs a scenario"),
        ("root@", "invalid host name"),
        ("@gpu-box", "empty user"),
        ("gpu-box:", "invalid port"),
        ("gpu-box:ssh", "invalid port"),
        ("gpu-box:0", "port out of range"),
        ("gpu-box:70000", "port out of range"),
        ("gpu box", "invalid host name"),
        ("gpu-box:22:33", "invalid host name"),
        ("us er@gpu-box", "invalid user name"),
        ("a@b@gpu-box", "invalid user name"),
        ("root@gpu;rm -rf /", "invalid host name"),
        ("root@$(id)", "invalid host name"),
        ("ssh://", "invalid ssh URL"),
        ("ssh://root@gpu-box:abc", "invalid port"),
        ("ssh://root@gpu-box:99999", "invalid port"),
        ("ssh://root:hunter2@gpu-box", "no password"),
        ("ssh://root@gpu-box/srv/repo", "no password or path"),
        ("[gpu-box]", "only IPv6"),
        ("[::1]:x", "invalid port"),
        ("root@[::1:22", "unbalanced brackets"),
        ("root@::1]:22", "unbalanced brackets"),
        ("root@[fe80::1", "unbalanced brackets"),
        ("ssh://root:hunter2@[::1:22", "unbalanced brackets"),
        ("ssh://root:hunter2@::1]:22", "unbalanced brackets"),
        ("ssh://root@[gpu-box]:22", "invalid ssh URL"),
    ],
)
def test_bad_specs_are_one_line_usage_errors(spec: str, why: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_host_spec(spec)
    msg = str(info.value)
    assert why in msg and "\n" not in msg
    assert "hunter2" not in msg
    assert info.value.exit_code == 2


@pytest.mark.parametrize("spec", ["local", "sim:seed", "root@gpu-box:2222", "gpu-box", "root@[::1]:2222"])
def test_str_roundtrips(spec: str) -> None:
    parsed = parse_host_spec(spec)
    assert str(parsed) == spec and parse_host_spec(str(parsed)) == parsed


def test_open_host_local() -> None:
    with open_host("local") as h:
        assert isinstance(h, LocalHost) and h.run(["true"]).ok
