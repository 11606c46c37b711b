"""A fast start: `import specdoctor.cli` and the root help load no heavy part, and lose nothing by it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("scipy", "langgraph", "paramiko", "matplotlib", "numpy", "pydantic", "openai", "mcp", "rich.console")


def _loaded_after(code: str, env: dict[str, str] | None = None) -> list[str]:
    probe = (f"import sys\n{code}\n"
             f"print('\\n' + __import__('json').dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **(env or {})})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_cli_loads_no_heavy_part() -> None:
    assert _loaded_after("import specdoctor.cli") == []


@pytest.mark.parametrize("argv", [["--help"], ["--version"], []])
def test_root_help_and_version_load_no_heavy_part(argv: list[str], tmp_path) -> None:
    code = f"from specdoctor.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    assert _loaded_after(code, {"XDG_CONFIG_HOME": str(tmp_path)}) == []


def test_a_named_command_still_loads_what_it_needs() -> None:  # the probe can see a heavy import
    code = "from specdoctor.cli import main\ntry:\n    main(['breakeven', '--baseline-tps', 'x'])\nexcept SystemExit:\n    pass"
    loaded = _loaded_after(code)
    assert loaded == [] or all(m.startswith(HEAVY) for m in loaded)  # usage error: typer's own, before the body
    code = "from specdoctor.config import load_config\nload_config()"
    assert "pydantic" in _loaded_after(code)


def test_root_help_from_stand_ins_is_the_full_trees_help() -> None:
    """The root help built from stand-ins lists the same commands with the same text as the whole tree."""
    from specdoctor.cli import build_command

    full, _ = build_command({})
    lazy, _ = build_command({}, argv=["--help"])
    assert list(lazy.commands) == list(full.commands)
    ctx_full, ctx_lazy = full.make_context("specdoctor", ["--help"], resilient_parsing=True), \
        lazy.make_context("specdoctor", ["--help"], resilient_parsing=True)
    assert lazy.get_help(ctx_lazy) == full.get_help(ctx_full)


@pytest.mark.parametrize(("argv", "built"), [
    (["investigate", "--host", "sim:seed"], "investigate"),
    (["-v", "tools", "list"], "tools"),
    (["nosuch"], None),
])
def test_only_the_named_command_is_built(argv: list[str], built: str | None) -> None:
    from specdoctor.cli import build_command

    full, _ = build_command({})
    cmd, _ = build_command({}, argv=argv)
    if built is None:  # an unknown name: the stand-ins, so click's "No such command" is as before
        assert list(cmd.commands) == list(full.commands)
    else:
        assert list(cmd.commands) == [built]
        assert [p.name for p in cmd.commands[built].params] == [p.name for p in full.commands[built].params]


def test_completion_builds_the_command_being_completed(monkeypatch: pytest.MonkeyPatch) -> None:
    from specdoctor.cli import _named_command

    monkeypatch.setenv("_SPECDOCTOR_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "specdoctor investigate --ho")
    assert _named_command([]) == "investigate"
    monkeypatch.setenv("COMP_WORDS", "specdoctor inv")
    assert _named_command([]) is None  # completing the name itself: the stand-ins know every name


def test_completion_of_an_option_works_end_to_end() -> None:
    env = {**os.environ, "_SPECDOCTOR_COMPLETE": "complete_bash", "COMP_WORDS": "specdoctor investigate --ho",
           "COMP_CWORD": "2"}
    out = subprocess.run([sys.executable, "-m", "specdoctor"], capture_output=True, text=True, env=env, timeout=120)
    assert "--host" in out.stdout, out.stdout + out.stderr
    env["COMP_WORDS"], env["COMP_CWORD"] = "specdoctor inv", "1"
    out = subprocess.run([sys.executable, "-m", "specdoctor"], capture_output=True, text=True, env=env, timeout=120)
    assert "investigate" in out.stdout, out.stdout + out.stderr
