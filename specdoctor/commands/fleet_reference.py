"""`--reference fleet:RUN` (a command-level concern: it reads the survey store through the engine and places
the fleet's majority fingerprint on the host as a good run)."""

from __future__ import annotations

from specdoctor.errors import UsageError
from specdoctor.host.base import Host
from specdoctor.models import Fingerprint

__all__ = ["PREFIX", "fleet_run_id", "majority_of", "place_reference"]

PREFIX = "fleet:"


def fleet_run_id(reference: str) -> str:
    """`fleet:RUN` → RUN (a one-line error for anything else)."""
    if not reference.startswith(PREFIX) or not reference[len(PREFIX):].strip():
        raise UsageError(f"--reference takes fleet:RUN (a survey run id, see `specdoctor survey --list`), "
                         f"got {reference!r}")
    return reference[len(PREFIX):].strip()


def majority_of(reference: str, checkpoint: str | None) -> Fingerprint:
    """The majority fingerprint of a finished survey in the checkpoint store."""
    from specdoctor.engine.survey_graph import load_survey

    run_id = fleet_run_id(reference)
    run = load_survey(run_id, checkpoint)
    if run.analysis is None:
        raise UsageError(f"survey {run_id} is not finished (resume it with `specdoctor survey --resume {run_id}`)")
    if run.analysis.majority_fingerprint is None:
        raise UsageError(f"survey {run_id} fingerprinted no host: it has no majority to compare with")
    return run.analysis.majority_fingerprint


def place_reference(host: Host, reference: str, fingerprint: Fingerprint) -> str:
    """Write the majority fingerprint under specdoctor's folder on the host (never the user's tree); its path."""
    path = f"{host.home()}/.specdoctor/references/fleet-{fleet_run_id(reference)}.json"
    host.put(fingerprint.model_dump_json(indent=2).encode(), path, mode=0o644)
    return path


def reference_on_host(reference: str, host_spec: str, *, checkpoint: str | None, known_hosts: str | None = None,
                      identity_files: list[str] | None = None, accept_new_host_key: bool = False) -> str:
    """Resolve `fleet:RUN` and place it on the host `investigate` is about to examine; the path to pass as
    its good fingerprint. A simulated host (`sim:`) is laid out afresh on every open, so it cannot take one."""
    from specdoctor.host import open_host, parse_host_spec

    if parse_host_spec(host_spec).kind == "sim":
        raise UsageError("--reference fleet:RUN needs the fleet member's SSH host (or local), not a sim: host")
    fingerprint = majority_of(reference, checkpoint)
    with open_host(host_spec, known_hosts=known_hosts, identity_files=identity_files,
                   accept_new_host_key=accept_new_host_key) as host:
        return place_reference(host, reference, fingerprint)
