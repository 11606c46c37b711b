"""Scripts that run on the host: files here, not strings inside the tools, so a reader (and `sh -n`) sees them whole.

Two ways out: a tool sends a small script's text inline (`remote_text`, one round-trip, nothing left on the box),
or uploads a larger one once to a content-hashed folder (`ToolContext.remote_script`).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["remote_command", "remote_text"]


@cache
def remote_text(name: str) -> str:
    """The text of the script `specdoctor/tools/remote/NAME`, exactly as shipped in the package."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def remote_command(name: str) -> str:
    """A one-line script's text without the newline its file ends with: sent as the command itself (`sh -c`,
    `Raw`, an environment variable), byte for byte what the tool sent when the script was a string in it."""
    return remote_text(name).removesuffix("\n")
