"""Embedding specdoctor in other agents: the Python client, `investigate()`, and the MCP server."""

from specdoctor.embed.client import CleanupRecord, Client, connect
from specdoctor.embed.run import investigate

__all__ = ["Client", "CleanupRecord", "connect", "investigate"]
