"""Secret campaign: plant secrets in the simulated server's environment and the user's shell, run the CLI, grep.

The scenario is the built-in `seed` plus secrets in `server.running_env` (so they sit in the running server's
and its workers' /proc/PID/environ, which specdoctor reads) and in `shell_env`. After a whole
`specdoctor investigate`, no secret value may appear in report.md/json/html, audit.jsonl, anything under
SPECDOCTOR_HOME (the SQLite checkpoints, run records) or the terminal output. A decoy process titled like an
SGLang scheduler runs beside it the whole time and must survive (specdoctor never kills by name).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

__all__ = ["DECOY_TITLE", "SecretRun", "plant_scenario", "planted", "start_decoy", "run_secret_campaign",
           "run_host_folder_campaign", "grep_secrets"]

DECOY_TITLE = "sglang::scheduler_TP0"
_DECOY = ("import ctypes, time\n"
          "ctypes.CDLL(None).prctl(15, b'sglang::schedul', 0, 0, 0)\n"  # PR_SET_NAME: what pgrep/pkill -x match
          "time.sleep(900)\n")


def planted() -> dict[str, str]:
    """Fresh secret values (random each run, so a hit is a real leak) in the shapes real ones have."""
    pw = "Pw" + secrets.token_hex(10)
    return {
        "HF_TOKEN": "hf_" + secrets.token_hex(17),
        "OPENAI_API_KEY": "sk-proj-" + secrets.token_hex(20),
        "AWS_SECRET_ACCESS_KEY": secrets.token_urlsafe(30)[:40],
        "HTTPS_PROXY": f"http://svc-user:{pw}@proxy.internal:3128",
        "_URL_PASSWORD": pw,
    }


def plant_scenario(dest: Path, values: dict[str, str]) -> Path:
    """The seed scenario with the secrets in the running server's env and the user's shell env."""
    raw = yaml.safe_load(resources.files("specdoctor.sim.scenarios").joinpath("seed.yaml").read_text())
    env = {k: v for k, v in values.items() if not k.startswith("_")}
    raw["name"] = "seed-secrets"
    raw.setdefault("server", {}).setdefault("running_env", {}).update(env)
    raw.setdefault("shell_env", {}).update(env)
    dest.write_text(yaml.safe_dump(raw, sort_keys=False))
    return dest


def start_decoy() -> subprocess.Popen[bytes]:
    """A process whose argv[0] and comm look like an SGLang scheduler; not started by specdoctor."""
    return subprocess.Popen(["bash", "-c", f'exec -a {DECOY_TITLE} "$0" -c "$1"', sys.executable, _DECOY],
                            start_new_session=True)


@dataclass
class SecretRun:
    """Where each planted secret turned up (nothing, when all is well) and what else the run showed."""

    planted: int
    places_searched: int
    leaks: list[str] = field(default_factory=list)
    exit_code: int = 0
    verdict: str = ""
    decoy_alive: bool = True
    read_env: bool = False
    terminal_tail: str = ""


def _files(*roots: Path) -> list[Path]:
    return [p for r in roots if r.exists() for p in ([r] if r.is_file() else r.rglob("*")) if p.is_file()]


def run_secret_campaign(tmp: Path, timeout: float = 420) -> SecretRun:
    """Run `specdoctor investigate --host sim:<secret scenario> --yes` with a decoy beside it; search everything."""
    values = planted()
    tmp.mkdir(parents=True, exist_ok=True)
    scenario = plant_scenario(tmp / "seed-secrets.yaml", values)
    home, out = tmp / "sdhome", tmp / "out"
    env = {**os.environ, "SPECDOCTOR_HOME": str(home), "COLUMNS": "100", **{k: v for k, v in values.items()
                                                                          if not k.startswith("_")}}
    decoy = start_decoy()
    try:
        proc = subprocess.run([sys.executable, "-m", "specdoctor.cli", "investigate", "--host", f"sim:{scenario}",
                               "--yes", "--out", str(out)], capture_output=True, env=env, cwd=tmp,
                              stdin=subprocess.DEVNULL, timeout=timeout)
        alive = decoy.poll() is None
    finally:
        if decoy.poll() is None:
            os.killpg(decoy.pid, signal.SIGKILL)  # our own decoy, by its PID's group
        decoy.wait(timeout=10)
    places = {"terminal": proc.stdout + proc.stderr}
    for f in _files(out, home):
        places[str(f.relative_to(tmp))] = f.read_bytes()
    run = SecretRun(planted=len(values) - 1, places_searched=len(places), exit_code=proc.returncode,
                    decoy_alive=alive, terminal_tail=proc.stderr.decode("utf-8", "replace")[-1500:])
    for name, value in values.items():
        needle = value.encode()
        for where, data in places.items():
            if needle in data:
                run.leaks.append(f"{name} in {where}")
    audit = (out / "audit.jsonl").read_text() if (out / "audit.jsonl").exists() else ""
    run.read_env = "/environ" in audit  # the run really looked at process environments
    report = out / "report.json"
    if report.exists():
        import json

        run.verdict = json.loads(report.read_text()).get("verdict", "")
    return run


def grep_secrets(values: dict[str, str], places: dict[str, bytes]) -> list[str]:
    """'NAME in PLACE' for every planted value found in any of the places."""
    return [f"{name} in {where}" for name, value in values.items() for where, data in places.items()
            if value.encode() in data]


def run_host_folder_campaign(tmp: Path) -> SecretRun:
    """A whole investigate in this process on a sim host it keeps open, so the host's ~/.specdoctor (backups,
    trial trees, server logs, shipped scripts) can be searched too, with the run folder and SPECDOCTOR_HOME."""
    from specdoctor.engine.runner import InvestigateOptions, investigate
    from specdoctor.sim.host import open_sim_host

    values = planted()
    tmp.mkdir(parents=True, exist_ok=True)
    scenario = plant_scenario(tmp / "seed-secrets.yaml", values)
    home, out, sandbox = tmp / "sdhome", tmp / "out", tmp / "sandbox"
    saved = os.environ.get("SPECDOCTOR_HOME")
    os.environ["SPECDOCTOR_HOME"] = str(home)
    host = open_sim_host(str(scenario), root=sandbox)
    try:
        outcome = investigate(InvestigateOptions(host=f"sim:{scenario}", yes=True, out=str(out)), host=host)
        host_folder = sandbox / "home" / ".specdoctor"
        places = {str(f.relative_to(tmp)): f.read_bytes() for f in _files(out, home, host_folder)}
        run = SecretRun(planted=len(values) - 1, places_searched=len(places), verdict=outcome.verdict,
                        exit_code=0 if outcome.status == "finished" else 1)
        run.leaks = grep_secrets(values, places)
        run.read_env = host_folder.exists() and any("/.specdoctor/" in p for p in places)
        return run
    finally:
        host.close()
        if saved is None:
            os.environ.pop("SPECDOCTOR_HOME", None)
        else:
            os.environ["SPECDOCTOR_HOME"] = saved
