"""HTTP clients for the loopback ports specdoctor talks to (a server's port, reached through `Host.forward`).

httpx builds a TLS context (reads and parses the whole CA bundle) for every Client it makes, and `httpx.get` makes
one per call: a health poll that costs ~2 ms of work cost ~50-200 ms of CPU. Every URL here is plain http on
127.0.0.1, so the context is built once, on first use, and shared; the clients behave as httpx's defaults otherwise.
"""

from __future__ import annotations

import ssl
from functools import cache
from typing import Any

import httpx

__all__ = ["client", "get", "post"]


@cache
def _tls() -> ssl.SSLContext:
    """httpx's own default context (certifi, or SSL_CERT_FILE/DIR), made once per process."""
    return httpx.create_ssl_context()


def client(**kwargs: Any) -> httpx.Client:
    """An `httpx.Client(**kwargs)` sharing the one TLS context; use it as a context manager."""
    return httpx.Client(verify=_tls(), **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    """`httpx.get` without a new TLS context."""
    with client() as c:
        return c.get(url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    """`httpx.post` without a new TLS context."""
    with client() as c:
        return c.post(url, **kwargs)
