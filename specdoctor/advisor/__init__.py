"""The advisor: deterministic rules by default, an optional OpenAI-compatible LLM."""
