"""`vllm serve MODEL ...` (vllm/entrypoints/cli/main.py in the real package)."""

from __future__ import annotations

import sys


def main() -> int:
    argv = sys.argv[1:]
    if not argv or argv[0] != "serve":
        sys.stderr.write("usage: vllm serve MODEL [options]\n")
        return 2
    from vllm._front.server import main as serve

    return serve(argv[1:], entry="serve")


if __name__ == "__main__":
    sys.exit(main())
