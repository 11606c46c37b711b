"""Which SGLang a scenario runs, for the shapes that differ by version.

0.5.17 was measured on a real H200 (tests/fixtures/sglang-0.5.17-h200/): its shapes apply to the 0.5.17 line
only. 0.5.9 and 0.5.23 keep the documented shapes (shared/reference/sglang.md) until a real run says otherwise.
"""

from __future__ import annotations

__all__ = ["measured_0517"]


def measured_0517(version: str) -> bool:
    """The 0.5.17 line (0.5.17, 0.5.17.post1): the real server's titles, log lines, endpoints and env."""
    return version == "0.5.17" or version.startswith("0.5.17.")
