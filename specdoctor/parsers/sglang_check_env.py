"""`python -m sglang.check_env`: Python/CUDA/driver, GPUs, package versions and the topology matrix."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pydantic import BaseModel, Field

from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.nvidia_smi import Topology, parse_topo
from specdoctor.parsers.text import clean_lines, cut_marker, flag_clipped

__all__ = ["CheckEnv", "parse_check_env"]


class CheckEnv(BaseModel):
    """What check_env reported; `fields` keeps every 'Key: value' line as printed."""

    python: str | None = Field(default=None, description="The version number only ('3.10.12').")
    cuda_available: bool | None = None
    gpus: dict[int, str] = Field(default_factory=dict, description="GPU index -> name ('GPU 0,1: NAME' expanded).")
    compute_capability: dict[int, str] = Field(default_factory=dict)
    cuda_home: str | None = None
    nvcc: str | None = Field(default=None, description="The release number ('12.4').")
    driver: str | None = None
    packages: dict[str, str] = Field(default_factory=dict, description="Lower-case package -> version string.")
    missing: list[str] = Field(default_factory=list, description="Packages printed as 'Module Not Found'.")
    topology: Topology | None = None
    hypervisor: str | None = None
    ulimit_soft: int | None = None
    fields: dict[str, str] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list, description="What could not be read (cut, clipped), one line each.")

    @property
    def sglang(self) -> str | None:
        return self.packages.get("sglang")

    @property
    def torch(self) -> str | None:
        return self.packages.get("pytorch", self.packages.get("torch"))


_KV = re.compile(r"^(?P<key>[A-Za-z][\w .,/()+-]{0,60}?):\s*(?P<value>.*?)\s*$")
_GPU = re.compile(r"^GPU (?P<ids>\d+(?:\s*,\s*\d+)*)(?P<cc> Compute Capability)?$")
_PKG = re.compile(r"^[A-Za-z][\w.-]*$")
_NOT_PKG = {"python", "cuda_home", "nvcc", "hypervisor vendor", "ulimit soft", "cuda available", "rocm available",
            "hipcc", "rocm_home"}


# The keys read for the critical fields, in check_env's own words ('GPU 0' stands for every 'GPU 0,1,...').
_READ_KEYS = ("Python", "CUDA available", "GPU 0", "GPU 0 Compute Capability", "CUDA_HOME", "NVCC",
              "CUDA Driver Version", "sglang", "torch", "NVIDIA Topology", "ROCM available", "HIPCC")


def _check_env_cuts(text: str, env: CheckEnv) -> Iterator[str]:
    """check_env prints 'Key: value' lines: one of the keys read here cut before its ':' or left without its
    value, a Python line whose '(' or '[' never closes, or an NVCC line short of its 'release N.N' was cut."""
    for line in clean_lines(text):
        s = line.strip()
        if s.endswith("Topology:"):
            break  # the matrix below is parse_topo's (its own cuts are in env.topology.problems)
        key = re.sub(r"^GPU \d+(?:\s*,\s*\d+)*", "GPU 0", s.partition(":")[0].strip())
        if ":" not in s and (marker := cut_marker(key, *_READ_KEYS)):
            yield f"a {marker!r} line cut before its ':': {s!r}"
        elif key in _READ_KEYS and ":" in s and not s.partition(":")[2].strip():
            yield f"a {key!r} line without its value"
    if env.python and "(" in env.fields.get("Python", "") and not re.search(r"\)(?: \[[^\]]*\])?$",
                                                                            env.fields["Python"]):
        yield f"the Python line cut: {env.fields['Python'][-40:]!r}"
    nvcc = env.fields.get("NVCC", "")
    if nvcc.startswith("Cuda compilation tools") and not re.search(r"release \d+\.\d+, V\d+\.\d+\.\d+$", nvcc):
        yield f"the NVCC line cut: {nvcc[-40:]!r}"


def _read_gpu(env: CheckEnv, g: re.Match[str], value: str) -> None:
    """'GPU 0,1: NAME' / 'GPU 0,1 Compute Capability: 9.0': one entry per listed index."""
    ids = [int(x) for x in re.findall(r"\d+", g["ids"])]
    target = env.compute_capability if g["cc"] else env.gpus
    for i in ids:
        target[i] = value


def _read_package(env: CheckEnv, key: str, low: str, value: str) -> None:
    """A package line: its version (one starting with a digit or 'v<digit>'), or 'Module Not Found'."""
    if _PKG.match(key) and low not in _NOT_PKG and value and re.match(r"^v?\d", value):
        env.packages[low] = value
    elif _PKG.match(key) and value.lower() == "module not found":
        env.missing.append(low)


def _read_field(env: CheckEnv, key: str, value: str) -> None:
    """One 'Key: value' line onto the field it fills (GPU names, Python, CUDA, driver, ..., else a package)."""
    env.fields[key] = value
    low = key.lower()
    if g := _GPU.match(key):
        _read_gpu(env, g, value)
    elif low == "python":
        env.python = value.split()[0] if value else None
    elif low in ("cuda available", "rocm available"):
        env.cuda_available = value.lower() == "true"
    elif low in ("cuda_home", "rocm_home"):
        env.cuda_home = value or None
    elif low in ("nvcc", "hipcc"):
        r = re.search(r"release (\d+\.\d+)", value)
        env.nvcc = r.group(1) if r else (value or None)
    elif "driver version" in low:
        env.driver = value or None
    elif low == "hypervisor vendor":
        env.hypervisor = value or None
    elif low == "ulimit soft":
        env.ulimit_soft = int(value) if value.isdigit() else None
    else:
        _read_package(env, key, low, value)


@flag_clipped(_check_env_cuts)
def parse_check_env(text: str) -> CheckEnv:
    """Parse check_env output (CUDA or ROCm; a topology matrix after 'NVIDIA/AMD Topology:' is read with
    parse_topo); ParseError when no check_env line is present."""
    env = CheckEnv()
    lines = clean_lines(text)
    topo_lines: list[str] | None = None
    for line in lines:
        s = line.strip()
        if topo_lines is not None:
            if re.match(r"^(Hypervisor vendor|ulimit soft|Legend)\b", s):
                topo_lines.append("")
                env.topology = parse_topo("\n".join(topo_lines))
                topo_lines = None
            else:
                topo_lines.append(line)
                continue
        m = _KV.match(s)
        if not m:
            continue
        key, value = m["key"].strip(), m["value"]
        if key.endswith("Topology") and not value:
            topo_lines = []
            continue
        _read_field(env, key, value)
    if topo_lines:
        env.topology = parse_topo("\n".join(topo_lines))
    if not env.fields:
        raise ParseError("no check_env 'Key: value' lines in the text")
    if not (env.packages or env.gpus or env.python):
        raise ParseError("not check_env output: no Python, GPU or package version lines")
    return env
