"""SSHHost: the Host protocol over one persistent paramiko connection, host keys verified."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import os
import select
import shlex
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import paramiko

from specdoctor.errors import (
    CommandTimedOut,
    ConnectionLost,
    HostAuthFailed,
    HostError,
    HostKeyRejected,
    HostUnreachable,
    UsageError,
)
from specdoctor.host.audit import AuditLog
from specdoctor.host.base import Host, quote_command
from specdoctor.host.redact import redact_text

__all__ = ["SSHHost", "SYSTEM_KNOWN_HOSTS", "fingerprint", "map_paramiko_exceptions"]

log = logging.getLogger("specdoctor.ssh")

# OpenSSH's default GlobalKnownHostsFile: host keys an administrator installed for every user.
SYSTEM_KNOWN_HOSTS = ["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"]

# paramiko logs transport noise (e.g. "Secsh channel N open FAILED" when a forwarded port is closed) at ERROR;
# without a handler Python's last-resort handler prints it on the user's terminal. Failures reach the user as
# specdoctor's own one-line errors instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style SHA256 fingerprint, e.g. 'ssh-ed25519 SHA256:abc...'."""
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


class _KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """Unknown keys: refused with the fingerprint, or accepted and written to known_hosts when asked."""

    def __init__(self, accept_new: bool, known_hosts: Path):
        self.accept_new = accept_new
        self.known_hosts = known_hosts
        self.accepted: list[str] = []

    def missing_host_key(self, client, hostname, key):
        fp = fingerprint(key)
        if not self.accept_new:
            raise HostKeyRejected(
                f"host key for {hostname} is not in {self.known_hosts} ({fp}); "
                "verify it and re-run with --accept-new-host-key to trust it"
            )
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        with self.known_hosts.open("a") as fh:
            fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        self.accepted.append(f"{hostname} {fp}")


@contextmanager
def map_paramiko_exceptions(target: str, tried: str = "") -> Iterator[None]:
    """The one boundary where paramiko/socket exceptions become specdoctor's own."""
    try:
        yield
    except HostError:
        raise
    except paramiko.BadHostKeyException as exc:
        raise HostKeyRejected(
            f"host key for {target} CHANGED: known_hosts has {fingerprint(exc.expected_key)}, "
            f"server offered {fingerprint(exc.key)}; refusing (possible man-in-the-middle)"
        ) from None
    except paramiko.AuthenticationException as exc:
        raise HostAuthFailed(f"authentication failed for {target} (tried: {tried or 'nothing'}): {exc}") from None
    except socket.gaierror as exc:
        raise HostUnreachable(f"cannot resolve {target}: {exc.strerror or exc}") from None
    except (TimeoutError, ConnectionRefusedError, OSError, paramiko.ssh_exception.NoValidConnectionsError) as exc:
        raise HostUnreachable(f"cannot connect to {target}: {getattr(exc, 'strerror', None) or exc}") from None
    except paramiko.SSHException as exc:
        if "authentication methods" in str(exc):  # no key given, none in ~/.ssh, an agent with no keys
            raise HostAuthFailed(f"authentication failed for {target} (tried: {tried or 'nothing'}): {exc}") from None
        if "protocol banner" in str(exc):  # something listens there, but it does not greet as an SSH server
            raise HostUnreachable(f"{target} is not an SSH server: the port accepted the connection but sent no "
                                  "SSH greeting (another service listens there? check the port)") from None
        raise ConnectionLost(f"SSH connection to {target} failed: {exc}") from None
    except EOFError as exc:
        raise ConnectionLost(f"SSH connection to {target} failed: {exc}") from None


_EOF_GRACE = 0.5  # seconds without output after the exit status before giving up on EOF


def _feed(chan: paramiko.Channel, data: bytes) -> None:
    with contextlib.suppress(OSError, EOFError, paramiko.SSHException):  # the channel closed (timeout, exit)
        chan.sendall(data)
        chan.shutdown_write()


class SSHHost(Host):
    """One persistent connection reused for every command; reconnects once if it was dropped."""

    def __init__(
        self,
        hostname: str,
        *,
        user: str | None = None,
        port: int | None = None,
        identity_files: list[str] | None = None,
        known_hosts: str | Path | None = None,
        accept_new_host_key: bool = False,
        ssh_config: str | Path | None = None,
        allow_agent: bool = True,
        connect_timeout: float = 10.0,
        audit: AuditLog | None = None,
        base_env: Mapping[str, str] | None = None,
        proxy_jump: str | None = None,
        system_known_hosts: list[str] | None = None,
    ):
        super().__init__(audit=audit, base_env=base_env)
        cfg_path = Path(ssh_config) if ssh_config else Path.home() / ".ssh" / "config"
        cfg: dict = {}
        if cfg_path.is_file():
            cfg = paramiko.SSHConfig.from_path(str(cfg_path)).lookup(hostname)
        self.hostname = cfg.get("hostname", hostname)
        self.user = user or cfg.get("user") or os.environ.get("USER") or "root"
        self.port = int(port or cfg.get("port") or 22)
        self.identity_files = list(identity_files or cfg.get("identityfile", []) or [])
        # the jump chain (OpenSSH: "a,b" = through a, then b) or a ProxyCommand; "none" switches either off
        jump = proxy_jump if proxy_jump is not None else cfg.get("proxyjump")
        self.proxy_jump = None if not jump or jump.strip().lower() == "none" else jump.strip()
        command = cfg.get("proxycommand")
        self.proxy_command = None if self.proxy_jump or not command or command.strip().lower() == "none" else command
        user_known = (cfg.get("userknownhostsfile") or "").split()
        self.known_hosts = Path(os.path.expanduser(str(known_hosts) if known_hosts else user_known[0] if user_known
                                                   else "~/.ssh/known_hosts"))
        # read like OpenSSH's GlobalKnownHostsFile: trusted, never written to
        globals_ = cfg.get("globalknownhostsfile")
        self.system_known_hosts = [os.path.expanduser(p) for p in (
            system_known_hosts if system_known_hosts is not None
            else globals_.split() if globals_ else SYSTEM_KNOWN_HOSTS)]
        self.accept_new_host_key = accept_new_host_key
        self.allow_agent = allow_agent
        self.connect_timeout = connect_timeout
        self.ssh_config = ssh_config
        self.name = f"{self.user}@{self.hostname}" + (f":{self.port}" if self.port != 22 else "")
        self._client: paramiko.SSHClient | None = None
        self._jump: SSHHost | None = None
        self._proxy: paramiko.ProxyCommand | None = None
        self._lock = threading.Lock()
        self.policy = _KnownHostsPolicy(accept_new_host_key, self.known_hosts)
        self.connect()

    # -- connection -----------------------------------------------------------------------------
    def _tried(self) -> str:
        parts = [f"user {self.user}"]
        if self.identity_files:
            parts.append("keys " + ", ".join(self.identity_files))
        if self.allow_agent:
            agent = None
            try:
                agent = paramiko.Agent()
                n = len(agent.get_keys())
            except Exception:
                n = 0
            finally:
                if agent is not None:
                    agent.close()  # an unclosed agent socket leaks (ResourceWarning)
            parts.append(f"ssh-agent ({n} keys)")
        return "; ".join(parts)

    def _open_jump(self) -> paramiko.Channel:
        """Reach this host through the last hop of the ProxyJump chain (itself reached through the ones before)."""
        from specdoctor.host.spec import parse_host_spec

        assert self.proxy_jump is not None
        *before, last = [h.strip() for h in self.proxy_jump.split(",") if h.strip()]
        try:
            hop = parse_host_spec(last)  # user@host:port, user@[v6]:port, ssh://...
        except UsageError as exc:
            raise UsageError(f"ProxyJump hop {last!r} of {self.name}: {exc}") from None
        if hop.kind != "ssh" or hop.host is None:
            raise UsageError(f"ProxyJump hop {last!r} of {self.name} is not an SSH host")
        log.info("%s: through jump host %s%s", self.name, last, f" (after {', '.join(before)})" if before else "")
        self._jump = SSHHost(hop.host, user=hop.user, port=hop.port, known_hosts=self.known_hosts,
                             accept_new_host_key=self.accept_new_host_key, ssh_config=self.ssh_config,
                             audit=self.audit, system_known_hosts=self.system_known_hosts,
                             proxy_jump=",".join(before) if before else None, connect_timeout=self.connect_timeout,
                             allow_agent=self.allow_agent)
        assert self._jump._client is not None
        transport = self._jump._client.get_transport()
        assert transport is not None
        with map_paramiko_exceptions(self.name):
            return transport.open_channel("direct-tcpip", (self.hostname, self.port), ("127.0.0.1", 0))

    def connect(self) -> None:
        client = paramiko.SSHClient()
        for path in self.system_known_hosts:
            if os.path.isfile(path):
                client.load_system_host_keys(path)  # consulted, never written (as OpenSSH does)
        if self.known_hosts.is_file():
            client.load_host_keys(str(self.known_hosts))
        client.set_missing_host_key_policy(self.policy)
        sock: Any = None
        if self.proxy_jump:
            sock = self._open_jump()
        elif self.proxy_command:
            log.info("%s: through ProxyCommand %s", self.name, self.proxy_command)
            with map_paramiko_exceptions(self.name):
                sock = self._proxy = paramiko.ProxyCommand(self.proxy_command)
        try:
            with map_paramiko_exceptions(self.name, self._tried()):
                client.connect(
                    self.hostname,
                    port=self.port,
                    username=self.user,
                    key_filename=self.identity_files or None,  # type: ignore[arg-type]  # paramiko takes a list too
                    allow_agent=self.allow_agent,
                    look_for_keys=not self.identity_files,
                    timeout=self.connect_timeout,
                    banner_timeout=self.connect_timeout,
                    auth_timeout=self.connect_timeout,
                    sock=sock,
                )
        except HostError:
            client.close()  # the failed attempt's transport thread and agent socket
            raise
        transport = client.get_transport()
        if transport is not None and transport.sock is not None and isinstance(transport.sock, socket.socket):
            # Without TCP_NODELAY every command waits ~45 ms on Nagle + delayed ACK.
            transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if transport is not None:
            transport.set_keepalive(15)
        self._client = client
        log.info("connected to %s (%s)", self.name, transport.remote_version if transport is not None else "?")

    def _transport(self) -> paramiko.Transport:
        with self._lock:
            t = self._client.get_transport() if self._client else None
            if t is None or not t.is_active():
                self.connect()  # one reconnect after a drop: restores and resumes need a live link
                t = self._client.get_transport() if self._client else None
            if t is None:
                raise ConnectionLost(f"no SSH transport to {self.name}")
            return t

    # -- commands -------------------------------------------------------------------------------
    def _cmdline(self, cmd: list[str] | str, env: dict[str, str], cwd: str | None) -> str:
        merged = {**self.base_env, **env}
        body = shlex.join(["sh", "-c", cmd]) if isinstance(cmd, str) else shlex.join(cmd)
        if merged:
            body = "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in merged.items()) + " " + body
        if cwd:
            body = f"cd {shlex.quote(cwd)} && {body}"
        return body

    def _exec_raw(self, cmd, *, env, cwd, timeout, stdin) -> tuple[int, bytes, bytes]:
        line = self._cmdline(cmd, env, cwd)
        if log.isEnabledFor(logging.DEBUG):  # -vv: the command, redacted as in the audit log; env values not shown
            log.debug("%s$ %s", self.name, redact_text(quote_command(cmd))[:500])
        transport = self._transport()
        with map_paramiko_exceptions(self.name):
            chan = transport.open_session(timeout=self.connect_timeout)
            chan.exec_command(line)
            if stdin is None:
                chan.shutdown_write()
            else:  # fed from a thread: a program echoing big stdin would otherwise deadlock on the window
                threading.Thread(target=_feed, args=(chan, stdin), daemon=True).start()
            out, err = bytearray(), bytearray()
            deadline = time.monotonic() + timeout if timeout else None
            last_data = time.monotonic()
            while True:
                if chan.recv_ready():
                    out += chan.recv(65536)
                    last_data = time.monotonic()
                    continue
                if chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    last_data = time.monotonic()
                    continue
                # The exit status may overtake output still held back by the flow-control window, so wait
                # for EOF too; a background child that keeps the pipe open only gets a short grace period.
                if chan.exit_status_ready() and (chan.eof_received or time.monotonic() - last_data > _EOF_GRACE):
                    break
                if not transport.is_active():
                    raise ConnectionLost(f"SSH connection to {self.name} dropped while running: {quote_command(cmd)}")
                if deadline is not None and time.monotonic() > deadline:
                    chan.close()
                    raise CommandTimedOut(self.name, quote_command(cmd), timeout)
                if chan.eof_received:  # the pipe stays readable after EOF: wait on the exit status instead
                    chan.status_event.wait(0.05)
                else:
                    select.select([chan], [], [], 0.05)
            code = chan.recv_exit_status()
            # drain anything that raced the exit status
            while chan.recv_ready():
                out += chan.recv(65536)
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
            chan.close()
        return code, bytes(out), bytes(err)

    def _exec(self, cmd, *, env, cwd, timeout, stdin):
        code, out, err = self._exec_raw(cmd, env=env, cwd=cwd, timeout=timeout, stdin=stdin)
        return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def read(self, path: str) -> bytes:
        t0 = time.perf_counter()
        code, out, err = self._exec_raw(["cat", "--", path], env={}, cwd=None, timeout=120, stdin=None)
        self.audit.record(host=self.name, command=shlex.join(["cat", "--", path]), cwd=None, env=None, exit=code,
                          seconds=time.perf_counter() - t0, stderr=err.decode("utf-8", "replace"))
        if code != 0:
            raise UsageError(f"cannot read {path} on {self.name}: {err.decode('utf-8', 'replace').strip()}")
        return out

    def put(self, data: bytes | Path, remote_path: str, *, mode: int | None = None) -> None:
        payload = data.read_bytes() if isinstance(data, Path) else data
        parent = os.path.dirname(remote_path) or "."
        tmp = f"{remote_path}.specdoctor-tmp"
        script = f"mkdir -p {shlex.quote(parent)} && cat > {shlex.quote(tmp)}"
        if mode is not None:
            script += f" && chmod {mode:o} {shlex.quote(tmp)}"
        script += f" && mv -f {shlex.quote(tmp)} {shlex.quote(remote_path)}"
        self.run(script, stdin=payload)

    # -- port forwarding ------------------------------------------------------------------------
    @contextmanager
    def _forward(self, remote_port: int, remote_host: str) -> Iterator[int]:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        stop = threading.Event()

        def pump(a, b) -> None:
            try:
                while not stop.is_set():
                    r, _, _ = select.select([a, b], [], [], 0.2)
                    for s in r:
                        data = s.recv(65536)
                        if not data:
                            return
                        (b if s is a else a).sendall(data)
            except Exception:
                return
            finally:
                for s in (a, b):
                    with contextlib.suppress(Exception):
                        s.close()

        def accept_loop() -> None:
            while not stop.is_set():
                try:
                    r, _, _ = select.select([listener], [], [], 0.2)
                    if not r:
                        continue
                    conn, peer = listener.accept()
                except OSError:
                    return
                try:
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    chan = self._transport().open_channel("direct-tcpip", (remote_host, remote_port), peer)
                except Exception:
                    conn.close()
                    continue
                threading.Thread(target=pump, args=(conn, chan), daemon=True).start()

        thread = threading.Thread(target=accept_loop, daemon=True)
        thread.start()
        try:
            yield listener.getsockname()[1]
        finally:
            stop.set()
            listener.close()
            thread.join(timeout=1)

    def close(self) -> None:
        if self._client is not None:
            transport = self._client.get_transport()
            self._client.close()
            self._client = None
            if transport is not None and transport.is_alive() and transport is not threading.current_thread():
                transport.join(timeout=5)  # its last act closes the socket (a ProxyCommand: signals it)
        if self._jump is not None:
            self._jump.close()
            self._jump = None
        if self._proxy is not None:  # paramiko signals the ProxyCommand; reap it and close its pipes
            proc, self._proxy = self._proxy.process, None
            with contextlib.suppress(OSError):
                proc.terminate()
            try:
                proc.wait(timeout=5)
            except Exception:
                proc.kill()
                proc.wait(timeout=5)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
