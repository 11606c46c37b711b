"""Parsers for real tool output: nvidia-smi, nccl-tests, NCCL logs, SGLang logs and JSON, git."""
