"""The twin as a fleet: N simulated hosts, alike but for planted departures, each its own SSH host on loopback.

One real OpenSSH `sshd` listens on one 127.0.0.1 port per host (at most 16 per daemon, OpenSSH's limit on
listening sockets); a `Match LocalPort` block per port gives that login the host's sandbox environment (PATH,
HOME, NCCL_CONF_FILE, the login shell's exports), so `sdtest@127.0.0.1:PORT` *is* that host to any SSH client.
Unreachable hosts are ports nothing listens on; hosts that refuse the login are ports with no authorized key.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specdoctor.errors import ScenarioError
from specdoctor.sim.ports import free_port
from specdoctor.sim.sandbox import Sandbox, build_sandbox
from specdoctor.sim.scenario import Scenario, load_scenario
from specdoctor.testing.sshd import SSHD, ensure_git_safe_directory, ensure_traversable, ensure_user

__all__ = ["PlantedHost", "FleetSpec", "SimFleet", "load_fleet", "list_fleets", "host_scenario", "build_fleet"]

_PORTS_PER_SSHD = 16  # OpenSSH's MAX_LISTEN_SOCKS
_CONFIG_HEAD = """\
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile none
AuthorizedKeysFile {authorized_keys}
AllowUsers {user}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PermitRootLogin no
AllowTcpForwarding yes
MaxSessions 200
MaxStartups 200:30:400
LogLevel ERROR
Subsystem sftp internal-sftp
"""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlantedHost(_Strict):
    """One host that departs from the others, and what a survey should say about it (ground truth)."""

    host: str
    what: str
    override: dict[str, Any] = Field(default_factory=dict, description="Deep-merged into that host's scenario.")
    outlier: bool = Field(description="Its performance differs from the fleet's (else: a harmless departure).")
    fields: list[str] = Field(default_factory=list, description="Fingerprint/launch keys that name the departure.")


class FleetSpec(_Strict):
    """A simulated fleet: a base scenario, what every host shares, the planted departures, the lost hosts."""

    name: str
    description: str = ""
    base: str = Field(description="Built-in scenario name or YAML path every host starts from.")
    size: int = Field(ge=1, le=256, description="Simulated hosts h01..hNN.")
    common: dict[str, Any] = Field(default_factory=dict, description="Deep-merged into every host's scenario.")
    planted: list[PlantedHost] = Field(default_factory=list)
    unreachable: list[str] = Field(default_factory=list, description="Hosts listed but not listening.")
    refuse_login: list[str] = Field(default_factory=list, description="Hosts whose sshd accepts no key.")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def list_fleets() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("specdoctor.sim.fleets").iterdir() if p.name.endswith(".yaml"))


def load_fleet(ref: str | Path) -> FleetSpec:
    """A built-in fleet by name (`alike`) or a fleet YAML by path."""
    name = str(ref)
    if name in list_fleets():
        text = resources.files("specdoctor.sim.fleets").joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    elif Path(name).is_file():
        text = Path(name).read_text(encoding="utf-8")
    else:
        raise ScenarioError(f"no built-in fleet or file named {name!r} (built-ins: {', '.join(list_fleets())})")
    try:
        return FleetSpec.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError) as exc:
        raise ScenarioError(f"fleet {name} is invalid: {exc}") from None


def host_name(i: int, width: int = 2) -> str:
    return f"h{i:0{width}d}"


def host_scenario(spec: FleetSpec, name: str, index: int, noise_seed: int = 0,
                  planted: list[PlantedHost] | None = None) -> Scenario:
    """The scenario of one host: base + common + its planted override, with its own noise seed."""
    base = load_scenario(spec.base).model_dump(by_alias=True, mode="json")
    raw = _merge(base, spec.common)
    for p in planted if planted is not None else spec.planted:
        if p.host == name:
            raw = _merge(raw, p.override)
    raw["name"] = f"{spec.name}-{name}"
    raw["seed"] = (int(base.get("seed", 0)) * 7919 + noise_seed * 104729 + index) % (1 << 31)
    raw["hardware"] = {**raw["hardware"], "hostname": name}
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioError(f"fleet {spec.name}, host {name}: invalid scenario: {exc}") from None


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True,
                   capture_output=True)


def _quote(item: str) -> str:
    return '"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False


class SimFleet:
    """A laid-out fleet: its sandboxes, sshd daemons and the files an SSH client (or `specdoctor survey`) needs."""

    def __init__(self, spec: FleetSpec, root: Path, user: str, planted: list[PlantedHost]):
        self.spec = spec
        self.root = root
        self.user = user
        self.planted = planted
        self.names: list[str] = []
        self.ports: dict[str, int] = {}
        self.sandboxes: dict[str, Sandbox] = {}
        self.daemons: list[subprocess.Popen[bytes]] = []
        self.key_path = root / "client_ed25519"
        self.host_key = root / "host_ed25519"
        self.known_hosts = root / "known_hosts"
        self.ssh_config = root / "ssh_config"
        self.hosts_file = root / "hosts.txt"

    def spec_of(self, name: str) -> str:
        return f"{self.user}@127.0.0.1:{self.ports[name]}"

    def cli_options(self) -> list[str]:
        """`specdoctor survey` options that reach this fleet (hosts file, key, known_hosts, empty ssh config)."""
        return ["--hosts", str(self.hosts_file), "--identity", str(self.key_path), "--known-hosts",
                str(self.known_hosts), "--ssh-config", str(self.ssh_config)]

    def truth(self) -> dict[str, PlantedHost]:
        return {p.host: p for p in self.planted if p.host in self.names}

    @property
    def lost(self) -> list[str]:
        return [n for n in self.names if n in self.spec.unreachable or n in self.spec.refuse_login]

    def connect(self, name: str) -> Any:
        """An SSHHost logged in to one simulated host (as any client would reach it)."""
        from specdoctor.host.ssh import SSHHost

        return SSHHost("127.0.0.1", user=self.user, port=self.ports[name], identity_files=[str(self.key_path)],
                       known_hosts=str(self.known_hosts), ssh_config=str(self.ssh_config), allow_agent=False)

    def stop(self) -> None:
        """Stop every simulated server and sshd by PID and delete the fleet's folder."""
        for sb in self.sandboxes.values():
            sb.stop_all()
        for proc in self.daemons:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        self.daemons.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> SimFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _match_block(port: int, sb: Sandbox | None, authorized: Path | None) -> str:
    lines = [f"Match LocalPort {port}"]
    if sb is not None:
        lines.append("  SetEnv " + " ".join(_quote(f"{k}={v}") for k, v in sorted(sb.base_env.items())))
    if authorized is not None:
        lines.append(f"  AuthorizedKeysFile {authorized}")
    return "\n".join(lines) + "\n"


def _start_daemons(fleet: SimFleet, listening: list[str]) -> None:
    nobody = fleet.root / "no_keys"
    nobody.write_text("")
    os.chmod(nobody, 0o644)
    for start in range(0, len(listening), _PORTS_PER_SSHD):
        chunk = listening[start:start + _PORTS_PER_SSHD]
        cfg = _CONFIG_HEAD.format(host_key=fleet.host_key, authorized_keys=fleet.root / "authorized_keys",
                                  user=fleet.user)
        cfg += "".join(f"Port {fleet.ports[n]}\n" for n in chunk)
        cfg += "".join(_match_block(fleet.ports[n], fleet.sandboxes.get(n),
                                    nobody if n in fleet.spec.refuse_login else None) for n in chunk)
        path = fleet.root / f"sshd_config.{start // _PORTS_PER_SSHD}"
        path.write_text(cfg)
        log = (fleet.root / "sshd.log").open("ab")
        fleet.daemons.append(subprocess.Popen([SSHD, "-f", str(path), "-D", "-e"], stdin=subprocess.DEVNULL,
                                              stdout=log, stderr=log))
        log.close()
    deadline = time.monotonic() + 15
    waiting = list(listening)
    while waiting and time.monotonic() < deadline:
        waiting = [n for n in waiting if not _answers(fleet.ports[n])]
        if any(p.poll() is not None for p in fleet.daemons):
            break
        if waiting:
            time.sleep(0.05)
    if waiting:
        log_text = (fleet.root / "sshd.log").read_text(errors="replace")[-500:]
        raise ScenarioError(f"fleet sshd did not answer on {', '.join(waiting)}: {log_text}")


def build_fleet(spec: FleetSpec | str, *, size: int | None = None, noise_seed: int = 0,
                planted: list[str] | None = None, root: Path | None = None, parallel: int = 4) -> SimFleet:
    """Lay out the fleet and start its servers (as the SSH user, through sshd) and its sshd daemons.

    `size` overrides the number of simulated hosts; `planted` keeps only the named planted hosts (default: all
    of them). The unreachable and login-refusing hosts come after the simulated ones in the hosts file.
    """
    if not os.path.exists(SSHD):
        raise ScenarioError(f"{SSHD} is missing: install openssh-server")
    fs = load_fleet(spec) if isinstance(spec, str) else spec
    n = size or fs.size
    width = max(2, len(str(n + len(fs.unreachable) + len(fs.refuse_login))))
    sim_names = [host_name(i + 1, width) for i in range(n)]
    lost = [x for x in fs.unreachable + fs.refuse_login if x not in sim_names]
    keep = [p for p in fs.planted if (planted is None or p.host in planted) and p.host in sim_names]
    user = ensure_user() if os.geteuid() == 0 else os.environ.get("USER", "root")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)
        ensure_git_safe_directory()
        ensure_traversable(Path(os.path.realpath(shutil.which("python3") or "/usr/bin/python3")))
    base = Path(tempfile.mkdtemp(prefix=f"specdoctor-fleet-{fs.name}-")) if root is None else Path(root)
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)
    fleet = SimFleet(fs, base.resolve(), user, keep)
    try:
        _keygen(fleet.host_key)
        _keygen(fleet.key_path)
        shutil.copyfile(fleet.key_path.with_suffix(".pub"), fleet.root / "authorized_keys")
        os.chmod(fleet.root / "authorized_keys", 0o644)
        fleet.ssh_config.write_text("")
        fleet.names = sim_names + lost
        fleet.ports = {name: free_port() for name in fleet.names}
        for i, name in enumerate(sim_names):
            sc = host_scenario(fs, name, i, noise_seed, keep)
            box_root = fleet.root / name
            box_root.mkdir(mode=0o777)
            os.chmod(box_root, 0o777)
            fleet.sandboxes[name] = build_sandbox(sc, box_root, start_server=False, port=free_port())
        host_pub = fleet.host_key.with_suffix(".pub").read_text().split()
        fleet.known_hosts.write_text("".join(f"[127.0.0.1]:{fleet.ports[x]} {host_pub[0]} {host_pub[1]}\n"
                                             for x in fleet.names))
        _start_daemons(fleet, [x for x in fleet.names if x not in fs.unreachable])
        # Every simulated host shares this machine's process table, so each line names its own server's port.
        fleet.hosts_file.write_text("".join(
            f"{x} {fleet.spec_of(x)}" + (f" port={fleet.sandboxes[x].port}" if x in fleet.sandboxes else "") + "\n"
            for x in fleet.names))

        def start(name: str) -> None:
            with fleet.connect(name) as host:
                fleet.sandboxes[name].start_server(host)

        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            list(pool.map(start, sim_names))
    except BaseException:
        fleet.stop()
        raise
    return fleet
