"""The playbook engine: YAML playbooks compiled to a LangGraph state machine."""
