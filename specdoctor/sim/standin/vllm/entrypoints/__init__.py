"""OpenAI-compatible entry points (stand-in)."""
