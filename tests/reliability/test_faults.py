"""Dropped SSH links during backup, stash, apply, launch, benchmark and restore: tree byte-identical, no orphans."""

from __future__ import annotations

from specdoctor.testing import SSHServer

from .faults import PHASES, run_fault_campaign, sshd_connect


def test_dropped_link_in_every_phase_then_resume_style_recovery(sshd: SSHServer):
    camp = run_fault_campaign(sshd_connect(sshd), str(sshd.workdir), per_phase=3)
    assert camp.injected >= 20
    assert {o.fault.phase for o in camp.outcomes} == set(PHASES)
    assert all(size >= 2 for size in camp.phase_sizes.values()), camp.phase_sizes
    # the link really died in every case (the run did not finish on its own)
    assert all(o.raised == "ConnectionLost" for o in camp.outcomes), [o.raised for o in camp.outcomes]
    bad = camp.failures()
    assert not bad, "\n".join(f"{o.fault}: identical={o.identical} orphans={o.orphans} {o.detail}" for o in bad)
    # faults after the backup was written are undone by a verified restore, not by luck
    assert sum(o.restored for o in camp.outcomes if o.fault.phase != "backup") >= 12
