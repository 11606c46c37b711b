"""`python -m vllm.entrypoints.openai.api_server` (stand-in)."""
