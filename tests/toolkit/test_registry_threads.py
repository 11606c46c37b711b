"""The registry is built on first use; threads that use it first at the same moment (a fleet survey probes its
hosts at once) must all find every tool. The first build marked itself done before registering: a thread arriving
meanwhile found `find_server_processes` unknown, and the survey lost every host to that error."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import threading
from specdoctor.toolkit import registry
go = threading.Barrier(24)
errors = []
def first_use():
    go.wait()
    try:
        registry.get("find_server_processes")
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=first_use) for _ in range(24)]
for t in threads: t.start()
for t in threads: t.join()
print(len(errors), errors[:1])
"""


def test_threads_using_the_registry_first_all_find_the_tools():
    for _ in range(3):  # a fresh process each time: the build happens under the threads
        out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120, check=True)
        assert out.stdout.startswith("0 "), out.stdout + out.stderr
