"""The scripted OpenAI-compatible server now ships in the package (`specdoctor.testing.openai_stub`, for the
examples' `--demo`); the tests keep importing it from here."""

from specdoctor.testing.openai_stub import OpenAIStub, Reply, ScriptEntry, ToolCall

__all__ = ["OpenAIStub", "Reply", "ScriptEntry", "ToolCall"]
