"""Checkout and trials: the user's tree (catalogue, triage, backup, restore, manifest, lock), the trial trees built beside it, and the searches over patches and upstream commits."""
