"""CLI command groups, one module each; cli.py mounts them."""
