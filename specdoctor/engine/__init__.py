"""The playbook engine: YAML playbooks compiled to a LangGraph state machine."""

import os as _os

# Checkpoints hold only JSON-able data; strict msgpack makes LangGraph refuse anything else instead of warning.
# LangGraph reads this once at import, so it is set here, before any engine module imports LangGraph.
_os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
