"""Pins the embedding API's public names: changing them must be a deliberate act."""

from __future__ import annotations

import subprocess
import sys

import specdoctor
import specdoctor.embed
import specdoctor.tools

PUBLIC = {
    "specdoctor": ["Client", "__version__", "connect", "investigate"],
    "specdoctor.embed": ["CleanupRecord", "Client", "connect", "investigate"],
}


def test_all_is_pinned_and_resolves() -> None:
    assert sorted(specdoctor.__all__) == sorted(PUBLIC["specdoctor"])
    assert sorted(specdoctor.embed.__all__) == sorted(PUBLIC["specdoctor.embed"])
    assert specdoctor.connect is specdoctor.embed.connect and specdoctor.Client is specdoctor.embed.Client
    assert specdoctor.investigate is specdoctor.embed.investigate
    assert {"as_langchain", "as_openai"} <= set(specdoctor.tools.__all__)
    assert callable(specdoctor.tools.as_langchain) and callable(specdoctor.tools.as_openai)
    assert isinstance(specdoctor.__version__, str) and specdoctor.__version__.count(".") == 2


def test_import_specdoctor_stays_light() -> None:
    code = ("import sys, specdoctor; heavy = [m for m in ('pydantic', 'paramiko', 'langgraph', 'openai', 'mcp') "
            "if m in sys.modules]; print(','.join(heavy)); specdoctor.connect; "
            "print('pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True"], out  # nothing heavy until the first attribute use, then pydantic
