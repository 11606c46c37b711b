"""`python -m sglang.launch_server <flags>`: launch the (stand-in) SGLang server."""

if __name__ == "__main__":
    import sys

    from sglang._twin.server import main

    sys.exit(main(sys.argv[1:], prog="launch_server.py", entry="launch_server"))
