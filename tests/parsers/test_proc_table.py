"""The process table in one grep: every process's argv exactly as the kernel holds it, however hostile."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from specdoctor.host import LocalHost
from specdoctor.parsers.proc_table import parse_proc_table
from specdoctor.tools.serving.server import list_processes


def _pids() -> set[int]:
    return {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()}


def test_records_pair_stat_and_arguments_and_drop_what_does_not_parse() -> None:
    text = ("/proc/7/stat:7 (a) b) S 1 7 7 0\n\x00/proc/7/cmdline:x\x00/proc/7/cmdline:\x00/proc/7/cmdline:y\x00"
            "/proc/7/cmdline:\x00/proc/7/cmdline:\x00"       # trailing empty arguments are dropped
            "/proc/8/stat:8 (kthread) S 2 0 0 0\n\x00"         # no cmdline record: a kernel thread, argv []
            "/proc/9/cmdline:gone\x00"                        # no stat: the process ended between reads
            "/proc/10/stat:10 (two\nlines) S 1 0\n\x00"       # a comm with a newline does not parse (as before)
            "junk\x00/proc/x/stat:1 (y) S 1\x00")
    rows = parse_proc_table(text)
    assert [(r.pid, r.ppid, r.comm, r.argv) for r in rows] == [(7, 1, "a) b", ["x", "", "y"]), (8, 2, "kthread", [])]


def test_a_real_process_with_hostile_arguments_is_read_byte_for_byte() -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(30)", "a b", "", "x:y", "/proc/1/cmdline:forged",
            "new\nline", "$(id)", "é"]
    child = subprocess.Popen(argv)
    try:
        deadline = time.time() + 10
        while Path(f"/proc/{child.pid}/cmdline").read_bytes().count(b"\0") < len(argv) and time.time() < deadline:
            time.sleep(0.05)  # until the child has exec'd
        before = _pids()
        procs = {p.pid: p for p in list_processes(LocalHost())}
        stable = before & _pids()
        assert procs[child.pid].cmdline == argv
        me = procs[child.pid]
        assert me.ppid == int(Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert 1 not in procs or procs[1].cmdline != ["forged"]
        # every process alive before and after the scan is listed (the table is complete, not the first few)
        assert stable <= set(procs), stable - set(procs)
    finally:
        child.kill()
        child.wait()
