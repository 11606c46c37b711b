"""NCCL: the inventory, the all-reduce sweep over its grid, and the end-to-end A/B of a winner."""
