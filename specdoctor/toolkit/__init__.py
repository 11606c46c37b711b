"""The typed-tool framework: registry, context, results, and exports for other agents."""

from specdoctor.toolkit.context import ApprovalRequest, ToolContext
from specdoctor.toolkit.registry import Effect, ToolRegistry, ToolSpec, registry, tool
from specdoctor.toolkit.result import ToolResult, ToolStatus

__all__ = ["ApprovalRequest", "Effect", "ToolContext", "ToolRegistry", "ToolResult", "ToolSpec", "ToolStatus",
           "registry", "tool"]
