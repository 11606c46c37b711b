"""Outside the SGLang package's own files, specdoctor speaks engine-neutral words: every `sglang_` identifier left
there is in a short allow-list, each with the reason it must stay (an old name still read, a deprecated alias)."""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import specdoctor

ROOT = Path(specdoctor.__file__).parent
SGLANG_PACKAGE = ("inference/sglang.py", "parsers/sglang*.py", "sim/standin/sglang/*")
"""The SGLang engine's own files: its seam member, its parsers, its twin stand-in."""
WORD = re.compile(r"\b\w*sglang_\w*")

ALLOWED: dict[str, tuple[tuple[str, ...], str]] = {
    "sglang_origin": (("tools/checkout/trial_tree.py", "tools/catalogue.py", "engine/dry_run.py", "diagnosis/facts.py",
                       "engine/actions/user_server.py"),
                      "engine_origin's deprecated tool name (embedders call tools by name) and the fact's name in "
                      "checkpoints written before the second engine"),
    "sglang_version": (("models/fingerprint.py", "tools/nccl/nccl.py", "tools/environment/fingerprint.py", "sim/scenarios/*.yaml"),
                       "saved fingerprints and inventories say sglang_version: read as engine_version; the stories "
                       "keep good-run fingerprints as older specdoctor wrote them"),
    "sglang_forced_env": (("tools/nccl/nccl.py", "commands/sweep_nccl.py"),
                          "older nccl_inventory outputs' name for engine_forced_env, still read"),
    "sglang_gates": (("tools/environment/gates.py",), "older GateScan outputs' name for engine_gates, still read"),
    "sglang_startup": (("tools/serving/plan.py",), "launch_cost still reads start-up timings with the SGLang parser for "
                       "every engine (engine knowledge outside the seam, not moved yet)"),
    "sglang_trace": (("parsers/torch_trace.py",), "a docstring naming the SGLang trace reader that shares it"),
    "sglang_server": (("sim/scenario.py",), "the twin's default log file name in a story (the user's file)"),
    "sglang_install": (("sim/sandbox.py",), "the twin's SGLang stand-in install mode, passed to that stand-in"),
}


def _outside_sglang(root: Path) -> list[Path]:
    files = [p for p in root.rglob("*") if p.suffix in {".py", ".yaml", ".yml", ".toml", ".json", ".md"}
             and "__pycache__" not in p.parts]
    return [p for p in files if not any(fnmatch.fnmatch(str(p.relative_to(root)), g) for g in SGLANG_PACKAGE)]


def _found(root: Path = ROOT) -> dict[tuple[str, str], list[int]]:
    """(identifier, file relative to the package) -> line numbers, for every `sglang_` word outside the package."""
    out: dict[tuple[str, str], list[int]] = {}
    for p in _outside_sglang(root):
        rel = str(p.relative_to(root))
        for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for word in WORD.findall(line):
                out.setdefault((word.lower(), rel), []).append(n)
    return out


def test_no_sglang_identifiers_outside_the_sglang_package_but_the_allowed_ones():
    bad = [f"{rel}:{lines[0]}: {word}" for (word, rel), lines in sorted(_found().items())
           if word not in ALLOWED or not any(fnmatch.fnmatch(rel, g) for g in ALLOWED[word][0])]
    assert not bad, "engine-specific names outside the SGLang package (rename, or allow with a reason):\n" + \
        "\n".join(bad)


def test_every_allowed_name_is_still_needed_where_it_is_allowed():
    found = _found()
    for word, (globs, _why) in ALLOWED.items():
        for g in globs:
            assert any(w == word and fnmatch.fnmatch(rel, g) for w, rel in found), f"{word} in {g}: stale allowance"


def test_the_check_sees_a_new_sglang_name(tmp_path: Path):
    """The scan must be able to fail: a new `sglang_x` in a shared module is reported, the package's own are not."""
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "new.py").write_text("sglang_knob = 1\n")
    (tmp_path / "parsers").mkdir()
    (tmp_path / "parsers" / "sglang_new.py").write_text("sglang_ok = 1\n")
    assert set(_found(tmp_path)) == {("sglang_knob", "tools/new.py")}


def test_launch_args_live_in_a_neutral_module_and_the_old_import_still_works():
    from specdoctor.parsers import launch_args, sglang

    assert sglang.LaunchArgs is launch_args.LaunchArgs
    for rel in ("inference/base.py", "inference/vllm.py", "parsers/vllm.py"):
        tree = ast.parse((ROOT / rel).read_text())
        from_sglang = {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                       and node.module == "specdoctor.parsers.sglang" for a in node.names}
        assert "LaunchArgs" not in from_sglang, rel
