"""`sglang serve <flags>` / `sglang version` (stand-in console script)."""

import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write("usage: sglang {serve,version} ...\n")
        return 0 if argv else 2
    if argv[0] == "version":
        from sglang import __version__

        sys.stdout.write(f"sglang {__version__}\n")
        return 0
    if argv[0] == "serve":
        from sglang._twin.server import main as serve

        return serve(argv[1:], prog="sglang serve", entry="serve")
    sys.stderr.write(f"usage: sglang {{serve,version}} ...\nsglang: error: invalid choice: {argv[0]!r}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
