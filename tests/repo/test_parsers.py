"""Pure parsers: SGLang's environ.py (real 0.5.9 / 0.5.23 files), gate reads, git -z output, logging-only lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specdoctor.parsers.environ import find_gate_reads, is_enabled_value, parse_environ_py
from specdoctor.parsers.git import (
    ambiguous_lines,
    logging_only,
    parse_name_status_z,
    parse_numstat_z,
    parse_stash_list,
    parse_submodule_status,
    unquote_c_path,
)

FIX = Path(__file__).parent.parent / "fixtures" / "sglang_environ"


def _declared(text: str) -> set[str]:
    body = text.split("\nclass Envs:", 1)[1].split("\nenvs = Envs()", 1)[0]
    body = re.split(r"\n(?:class|def) ", body, maxsplit=1)[0]
    return set(re.findall(r"^    ([A-Z][A-Z0-9_]+)\s*(?::[^=\n]+)?=\s*Env[A-Za-z]*\(", body, re.M))


@pytest.mark.parametrize(("version", "minimum"), [("0.5.9", 200), ("0.5.23", 760)])
def test_environ_catalog_matches_every_declaration(version, minimum):
    text = (FIX / f"environ_{version}.py").read_text()
    cat = parse_environ_py(text)
    names = {f.name for f in cat.fields}
    assert len(names) >= minimum
    assert names == _declared(text)


def test_environ_defaults_and_types_per_version():
    old = parse_environ_py((FIX / "environ_0.5.9.py").read_text())
    new = parse_environ_py((FIX / "environ_0.5.23.py").read_text())
    spec_v2 = old.get("SGLANG_ENABLE_SPEC_V2")
    assert spec_v2 is not None and spec_v2.type == "bool" and spec_v2.default is False
    assert new.get("SGLANG_ENABLE_SPEC_V2") is None  # removed in 0.5.2x
    acc = new.get("SGLANG_SIMULATE_ACC_LEN")
    assert acc is not None and acc.type == "float" and acc.default == -1
    alias = new.get("SGLANG_OPT_RELEASE_PREFILL_SWA")
    assert alias is not None and alias.deprecated_name and new.get(alias.deprecated_name) == alias
    computed = new.get("SGLANG_QWEN4_PLE_FILE_DIR")
    assert computed is not None and computed.default is None and computed.default_source.startswith("lambda")
    assert new.get("SGLANG_DISABLED_MODEL_ARCHS").default == ()
    assert "SGLANG_ENABLE_CP_V2" in new.deprecated


def test_gate_reads_every_reader_with_defaults():
    line = ('if get_bool_env_var("SGLANG_A") and envs.SGLANG_B.get() and os.getenv("NCCL_X", "1") '
            'and os.environ["SGLANG_C"]: k = int(os.environ.get("SGLANG_OEA_K0", "0"))')
    reads = {r.name: r for r in find_gate_reads(line)}
    assert reads["SGLANG_OEA_K0"].reader == "os.environ.get" and reads["SGLANG_OEA_K0"].default == '"0"'
    assert reads["SGLANG_A"].default == '"false"'
    assert reads["SGLANG_B"].reader == "envs.get" and reads["SGLANG_B"].default is None
    assert reads["NCCL_X"].default == '"1"'
    assert reads["SGLANG_C"].reader == "os.environ[]"
    decl = find_gate_reads("    SGLANG_OEA_K0 = EnvInt(0)")
    assert decl[0].reader == "EnvInt declaration" and decl[0].default == "0"
    assert find_gate_reads("# os.environ.get('X', 1) in a comment") == []


@pytest.mark.parametrize(("value", "default", "enabled"), [
    (None, '"0"', False), ("0", '"0"', False), ("4", '"0"', True), ("false", '"false"', False),
    ("1", '"false"', True), ("", "0", False), ("0", '"1"', True)])
def test_enabled_value(value, default, enabled):
    assert is_enabled_value(value, default) is enabled


def test_git_z_parsers():
    nums = parse_numstat_z("3\t1\ta b.py\x00-\t-\tlogo.png\x005\t0\tx\ny.py\x00")
    assert [(n.path, n.added, n.removed, n.binary) for n in nums] == [
        ("a b.py", 3, 1, False), ("logo.png", None, None, True), ("x\ny.py", 5, 0, False)]
    assert parse_name_status_z("M\x00a b.py\x00D\x00gone\x00A\x00x\ny.py\x00") == {
        "a b.py": "M", "gone": "D", "x\ny.py": "A"}
    st = parse_stash_list("aaa1\x00WIP on main: 1 x\nbbb2\x00On main: second\n")
    assert [(s.index, s.sha, s.subject) for s in st] == [(0, "aaa1", "WIP on main: 1 x"), (1, "bbb2", "On main: second")]
    subs = parse_submodule_status(" 1234567abc third_party/a (v1.0)\n+89abcdef0 b c\n-0123456 d\n")
    assert [(s.path, s.flag, s.moved) for s in subs] == [("third_party/a", " ", False), ("b c", "+", True),
                                                         ("d", "-", False)]


def test_unquote_c_path():
    assert unquote_c_path('"a/sp ace \\303\\251.py"') == "sp ace \u00e9.py"
    assert unquote_c_path('"b/nl\\nx\\t\\"q\\".py"') == 'nl\nx\t"q".py'
    assert unquote_c_path("a/plain.py") == "plain.py"


def test_logging_only_lines():
    assert logging_only(["    logger.info(", '        "nccl env %s",', "        os.environ.get('NCCL_PROTO'))",
                         "", "    # comment", "    print(f'x {y}')"])
    assert not logging_only(["    logger.info('x')", "    torch.cuda.synchronize()"])
    assert not logging_only([])


def test_ambiguous_patch_script_lines():
    out = "1. SKIP - already imported\n2. WARN - could not find class definition\n3. OK - added\n\nDone!\n"
    found = ambiguous_lines(out, 0)
    assert [(a.line_no, a.kind) for a in found] == [(1, "SKIP"), (2, "WARN+could-not-find")]
    assert found[1].line == "2. WARN - could not find class definition"
    assert ambiguous_lines("Done!\n", 3)[-1].kind == "exit-code"
