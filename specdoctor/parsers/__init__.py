"""Parsers for real tool output: nvidia-smi, nccl-tests, NCCL logs, SGLang logs/args/bench/env, JSON bodies, git."""
