"""Host tools: basic facts about the machine (OS, Python, GPUs, git), in one round-trip."""

from __future__ import annotations

from pydantic import BaseModel, Field

from specdoctor.host.base import Raw
from specdoctor.parsers.sections import split_sections
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.remote import remote_text

__all__ = ["HostFactsInput", "HostFacts", "GpuInfo", "host_facts"]

_SCRIPT = remote_text("host_facts.sh")


class HostFactsInput(BaseModel):
    """Arguments of host_facts."""

    python: str = Field(default="python3", description="Python interpreter on the host to report on.")


class GpuInfo(BaseModel):
    """One GPU as nvidia-smi lists it."""

    index: int
    name: str
    driver: str
    memory_mib: int | None = None
    bus_id: str | None = None


class HostFacts(BaseModel):
    """What the host is."""

    os: str = ""
    python_version: str | None = None
    python_path: str | None = None
    git_version: str | None = None
    cpus: int | None = None
    gpus: list[GpuInfo] = Field(default_factory=list)
    nvidia_smi: bool = False
    problems: list[str] = Field(default_factory=list, description="Things that were missing or failed.")

    def summary_line(self) -> str:
        gpu = f"{len(self.gpus)}x {self.gpus[0].name}" if self.gpus else "no GPUs"
        return f"{self.os.splitlines()[0] if self.os else '?'}; python {self.python_version}; {gpu}; {self.git_version}"


@tool(effect="read")
def host_facts(ctx: ToolContext, args: HostFactsInput) -> HostFacts:
    """Basic facts about the host: OS, Python version, CPU count, git version and GPUs (via nvidia-smi)."""
    res = ctx.host.run(Raw(_SCRIPT), env={"PY": args.python}, check="ignore", timeout=60)
    sec = {k: [ln.strip() for ln in v if ln.strip()] for k, v in split_sections(res.stdout).items()}
    facts = HostFacts(os="\n".join(sec.get("os", [])))
    py = sec.get("python", [])
    if len(py) >= 2 and py[0][:1].isdigit():
        facts.python_version, facts.python_path = py[0], py[1]
    else:
        facts.problems.append(f"python {args.python!r} did not run: {' '.join(py)[:200]}")
    git = sec.get("git", [])
    if git and git[0].startswith("git version"):
        facts.git_version = git[0].removeprefix("git version ").strip()
    else:
        facts.problems.append("git is not installed on the host")
    n = sec.get("nproc", [])
    facts.cpus = int(n[0]) if n and n[0].isdigit() else None
    gpus = sec.get("gpus", [])
    if gpus and gpus[0] != "no-nvidia-smi":
        facts.nvidia_smi = True
        for line in gpus:
            cells = [c.strip() for c in line.split(",")]
            if len(cells) >= 3 and cells[0].isdigit():
                mem = cells[3] if len(cells) > 3 else ""
                facts.gpus.append(GpuInfo(index=int(cells[0]), name=cells[1], driver=cells[2],
                                          memory_mib=int(float(mem)) if mem.replace(".", "").isdigit() else None,
                                          bus_id=cells[4] if len(cells) > 4 else None))
            else:
                facts.problems.append(f"nvidia-smi: {line[:200]}")
    else:
        facts.problems.append("nvidia-smi not found on the host")
    return facts
