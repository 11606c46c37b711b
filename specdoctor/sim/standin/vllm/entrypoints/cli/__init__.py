"""The `vllm` command line (stand-in)."""
