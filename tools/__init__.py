"""specdoctor's typed tools, one module per family; importing this package registers them all.

Shipped inside the wheel as `specdoctor.tools` (see pyproject's package-dir mapping).
"""

from importlib import import_module

# Each family registers its tools on import; a family whose issue has not landed yet is simply absent.
_FAMILIES = ["host", "repo", "gates", "worktree", "bisect", "server", "measure", "fingerprint", "nccl", "breakeven"]

for _name in _FAMILIES:
    try:
        import_module(f"specdoctor.tools.{_name}")
    except ModuleNotFoundError as exc:  # only tolerate the family module itself being absent
        if exc.name != f"specdoctor.tools.{_name}":
            raise

__all__: list[str] = []
