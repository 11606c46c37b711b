"""Every host script is a file under specdoctor/tools/remote/, valid for its interpreter and used by a tool."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from specdoctor.tools.remote import remote_text

REMOTE = Path(__file__).resolve().parents[2] / "specdoctor" / "tools" / "remote"
TOOLS = REMOTE.parent
SCRIPTS = sorted(p.name for p in REMOTE.iterdir() if p.suffix in (".sh", ".py") and p.name != "__init__.py")


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_parses_and_a_tool_names_it(name: str) -> None:
    text = remote_text(name)
    assert text == (REMOTE / name).read_text()
    if name.endswith(".sh"):
        proc = subprocess.run(["sh", "-n"], input=text, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    else:
        ast.parse(text)
    users = [p.name for p in TOOLS.rglob("*.py") if REMOTE not in p.parents
             and (f'"{name}"' in p.read_text() or f"'{name}'" in p.read_text())]
    assert users, f"no tool uses remote/{name}"


def test_the_section_scripts_print_the_markers_their_tools_read() -> None:
    from specdoctor.parsers.sections import MARKER

    markers = {m.group(1) for line in remote_text("host_facts.sh").splitlines()
               if (m := MARKER.search(line.replace('"', "")))}
    assert markers == {"os", "python", "git", "nproc", "gpus"}
