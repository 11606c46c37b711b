"""The loopback HTTP helper: httpx's behaviour on a real server, one TLS context per process instead of per call."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from specdoctor.host import http


class _Echo(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(200 if self.path == "/health" else 404, b"ok")

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(200, json.dumps({"got": json.loads(body)}).encode())

    def _answer(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_get_post_and_client_answer_as_httpx_does(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made = []
    real = httpx.create_ssl_context
    monkeypatch.setattr(httpx, "create_ssl_context", lambda *a, **k: made.append(1) or real(*a, **k))
    http._tls.cache_clear()
    try:
        for _ in range(5):
            assert http.get(url + "/health", timeout=5).text == "ok"
        assert http.get(url + "/nope", timeout=5).status_code == 404
        assert http.post(url + "/x", json={"a": 1}, timeout=5).json() == {"got": {"a": 1}}
        with http.client(base_url=url, timeout=5) as c:
            assert c.get("/health").status_code == 200
        assert len(made) == 1  # one TLS context for every call, not one per call
    finally:
        http._tls.cache_clear()


def test_a_closed_port_raises_httpx_s_own_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(httpx.HTTPError):
        http.get(f"http://127.0.0.1:{port}/health", timeout=2)
