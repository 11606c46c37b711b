"""Tests of the embedding surface: Python client, LangChain/OpenAI exports, MCP server, examples."""
