"""Env-var gates: SGLang's `sglang/srt/environ.py` registry (parsed with ast, never imported) and gate reads in code lines."""

from __future__ import annotations

import ast
import re
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.text import clean_text

__all__ = ["EnvDecl", "EnvironCatalog", "GateRead", "parse_environ_py", "find_gate_reads", "is_enabled_value"]

_ENV_TYPES = {"EnvBool": "bool", "EnvInt": "int", "EnvFloat": "float", "EnvStr": "str", "EnvTuple": "tuple",
              "EnvJSON": "json", "EnvBoolWithAlias": "bool", "EnvIntWithAlias": "int", "EnvStrWithAlias": "str",
              "EnvFloatWithAlias": "float"}


class EnvDecl(BaseModel):
    """One `NAME = EnvX(default)` field of SGLang's `Envs` class."""

    name: str
    type: str = Field(description="bool/int/float/str/tuple/json, from the Env* class.")
    env_class: str
    default: Any = Field(default=None, description="The literal default; None when it is computed.")
    default_source: str = Field(description="The default expression as written (e.g. 'lambda: ...').")
    deprecated_name: str | None = None
    line: int


class EnvironCatalog(BaseModel):
    """Every gate SGLang declares in environ.py, plus its deprecated names."""

    fields: list[EnvDecl] = Field(default_factory=list)
    deprecated: list[str] = Field(default_factory=list)

    def get(self, name: str) -> EnvDecl | None:
        return next((f for f in self.fields if f.name == name or f.deprecated_name == name), None)


def _literal(node: ast.expr) -> tuple[Any, str]:
    src = ast.unparse(node)
    try:
        return ast.literal_eval(node), src
    except (ValueError, SyntaxError, TypeError):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "tuple" \
                and not node.args:
            return (), src
        return None, src


def _decl(target: str, call: ast.Call) -> EnvDecl | None:
    func = call.func
    cls = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if not (cls.startswith("Env") and cls in _ENV_TYPES or re.fullmatch(r"Env[A-Z]\w*", cls or "")):
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    node = call.args[0] if call.args else kw.get("default")
    default, src = _literal(node) if node is not None else (None, "")
    alias = kw.get("deprecated_name")
    alias_name = alias.value if isinstance(alias, ast.Constant) and isinstance(alias.value, str) else None
    return EnvDecl(name=target, type=_ENV_TYPES.get(cls, cls.removeprefix("Env").lower()), env_class=cls,
                   default=default, default_source=src, deprecated_name=alias_name, line=call.lineno)


def parse_environ_py(text: str) -> EnvironCatalog:
    """Parse environ.py's source: the `Envs` class fields and the `_DEPRECATED_ENVS` keys (no import);
    ParseError when the text is not Python."""
    try:
        tree = ast.parse(clean_text(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ParseError(f"environ.py is not valid Python: {type(exc).__name__}: {str(exc)[:120]}") from None
    cat = EnvironCatalog()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Envs":
            for stmt in node.body:
                target, value = None, None
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    target, value = stmt.targets[0].id, stmt.value
                elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    target, value = stmt.target.id, stmt.value
                if target and isinstance(value, ast.Call):
                    decl = _decl(target, value)
                    if decl:
                        cat.fields.append(decl)
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        value = getattr(node, "value", None)
        if any(isinstance(t, ast.Name) and t.id == "_DEPRECATED_ENVS" for t in targets) and isinstance(value, ast.Dict):
            cat.deprecated = [k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return cat


class GateRead(BaseModel):
    """One place a line reads an env var: which helper, which name, which default."""

    name: str
    reader: str = Field(description="os.environ.get / os.environ[] / os.getenv / get_bool_env_var / envs.X.get / "
                                    "EnvBool declaration ...")
    default: str | None = Field(default=None, description="Default as written in the code (None: no default).")
    line: str


_STR = r"""(?P<q>['"])(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P=q)"""
_DEFAULT = r"""(?:\s*,\s*(?P<default>[^)]*?))?\s*\)"""
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("os.environ.get", re.compile(r"\bos\.environ\.get\(\s*" + _STR + _DEFAULT)),
    ("os.getenv", re.compile(r"\bos\.getenv\(\s*" + _STR + _DEFAULT)),
    ("os.environ[]", re.compile(r"\bos\.environ\[\s*" + _STR + r"\s*\]")),
    ("get_bool_env_var", re.compile(r"\bget_bool_env_var\(\s*" + _STR + _DEFAULT)),
    ("get_int_env_var", re.compile(r"\bget_int_env_var\(\s*" + _STR + _DEFAULT)),
    ("envs.get", re.compile(r"\benvs\.(?P<name>[A-Z][A-Z0-9_]*)\.get\(\s*\)")),
    ("envs.is_set", re.compile(r"\benvs\.(?P<name>[A-Z][A-Z0-9_]*)\.is_set\(\s*\)")),
    # vLLM reads its variables as module attributes: `if envs.VLLM_X:` (vllm/envs.py's __getattr__)
    ("envs.VLLM_X", re.compile(r"\benvs\.(?P<name>VLLM_[A-Z0-9_]*)\b(?!\s*[.(])")),
    ("declaration", re.compile(r"^\s*(?P<name>[A-Z][A-Z0-9_]*)\s*(?::[^=]+)?=\s*(?P<cls>Env[A-Za-z]+)\(\s*"
                               r"(?P<default>[^,)]*)")),
]
_HELPER_DEFAULTS = {"get_bool_env_var": '"false"', "get_int_env_var": "0"}


def find_gate_reads(line: str) -> list[GateRead]:
    """Every env-var read in one source line, with the default as written."""
    out: list[GateRead] = []
    code = line.split("#", 1)[0] if not line.lstrip().startswith(("'", '"')) else line
    for reader, pat in _PATTERNS:
        for m in pat.finditer(code):
            groups = m.groupdict()
            default = (groups.get("default") or "").strip() or None
            if reader in _HELPER_DEFAULTS and default is None:
                default = _HELPER_DEFAULTS[reader]
            name = groups["name"]
            if reader == "declaration":
                reader = f"{groups['cls']} declaration"
            out.append(GateRead(name=name, reader=reader, default=default, line=line.strip()))
    return out


_FALSY = {"", "0", "false", "no", "n", "off", "none"}


def is_enabled_value(value: str | None, default: str | None) -> bool:
    """Whether a runtime value switches a gate away from its default (a value equal to the default is not)."""
    if value is None:
        return False
    norm = value.strip().strip("'\"").lower()
    dflt = (default or "").strip().strip("'\"").lower()
    if norm == dflt:
        return False
    if dflt in _FALSY and norm in _FALSY:
        return False
    return True
