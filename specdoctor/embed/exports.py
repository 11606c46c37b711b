"""`specdoctor.tools.as_langchain` / `as_openai`: the registry's exports, scoped to what a Client allows."""

from __future__ import annotations

from specdoctor.tools import as_langchain, as_openai

__all__ = ["as_langchain", "as_openai"]
