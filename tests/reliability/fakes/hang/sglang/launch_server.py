"""`python -m sglang.launch_server`: prints a start-up line, then never serves (a hung weight load)."""

import time

print("[2026-01-12 09:30:00] loading weights (this stand-in never finishes)", flush=True)
time.sleep(600)
