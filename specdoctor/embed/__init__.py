"""Embedding specdoctor in other agents: Python client, MCP server."""
