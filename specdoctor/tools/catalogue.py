"""The tool catalogue: every built-in tool, listed by family, in one place; the registry is built from it.

A tool is a plain function declared with `@tool(effect=…)` in its family's module; it becomes a tool when it is
listed here (`specdoctor.toolkit.registry.load_builtin_tools` registers `TOOLS` on first use). Nothing registers by
being imported, so importing a family never changes the registry and no module imports another only to have it
registered. The families follow the playbooks' steps; a test checks this list against every `@tool` function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specdoctor.tools.breakeven import breakeven, breakeven_empirical
from specdoctor.tools.checkout import (
    backup_mirror,
    bisect,
    commit_bisect,
    commits,
    manifest,
    repo,
    trial_tree,
    worktree,
)
from specdoctor.tools.environment import deltas, fingerprint, gates, hardware_probe, host, trial_env
from specdoctor.tools.nccl import nccl, nccl_promote
from specdoctor.tools.serving import launch, measure, phase_times, plan, server, user_server

__all__ = ["CATALOGUE", "ENGINE_DETECTORS", "FAMILIES", "TOOLS"]

CATALOGUE: dict[str, tuple[Callable[..., Any], ...]] = {
    "environment": (
        host.host_facts, fingerprint.fingerprint, fingerprint.fingerprint_diff, deltas.list_deltas,
        hardware_probe.probe_hardware, gates.scan_feature_gates, server.check_env_propagation,
        server.read_process_env, trial_env.check_trial_env,
    ),
    "checkout and trials": (
        repo.catalog_diffs, repo.triage_diffs, worktree.backup_worktree, worktree.restore_worktree,
        worktree.stash_all, worktree.apply_patches, backup_mirror.mirror_backup, manifest.checkout_manifest,
        trial_tree.build_trial_tree, trial_tree.remove_trial_tree, trial_tree.engine_origin,
        trial_tree.sglang_origin,
        bisect.find_essential_patches, bisect.bisect_patches, commits.catalog_commits, commit_bisect.bisect_commits,
    ),
    "server and measurement": (
        server.find_server_processes, server.server_info, launch.launch_server, launch.stop_server,
        measure.benchmark, measure.compare_samples, phase_times.phase_times, user_server.inspect_user_server,
        user_server.stop_user_server, plan.launch_cost, plan.plan_launches,
    ),
    "NCCL": (nccl.nccl_inventory, nccl.nccl_sweep, nccl_promote.nccl_promote),
    "break-even": (breakeven.breakeven, breakeven_empirical.breakeven_empirical),
}
"""Family → its tools, in the order a regression playbook meets them."""

TOOLS: tuple[Callable[..., Any], ...] = tuple(fn for tools in CATALOGUE.values() for fn in tools)
"""Every built-in tool function; the registry registers exactly these."""

FAMILIES: tuple[str, ...] = tuple(sorted({fn.__module__.rsplit(".", 1)[1] for fn in TOOLS}))
"""The modules that hold the catalogue's tools, by name."""

ENGINE_DETECTORS: tuple[Callable[..., Any], ...] = (server._engine_on_host,)
"""How a context tells a host's engine from what runs on it when nothing else says (the process listing)."""
