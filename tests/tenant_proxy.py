"""A multi-tenant front for the tests' real Prometheus, as Grafana Mimir and Cortex answer: on
127.0.0.1 only, the Prometheus API under a base path (``/prometheus``, Mimir's), each request
refused with HTTP 401 ``no org id`` unless it carries ``X-Scope-OrgID`` naming the one tenant
it knows, and forwarded to Prometheus without its base path when it does.  A wrong tenant is
echoed back in the 401's text (as a careless proxy does), so that a test sees it masked.  Every
request is kept (``seen``: path, headers, form) for the tests to look at."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

__all__ = ["BASE_PATH", "TENANT", "tenant_proxy"]

BASE_PATH = "/prometheus"
TENANT = "team"


class _Handler(BaseHTTPRequestHandler):
    server: _Proxy

    def _answer(self, status: int, body: bytes, kind: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        form = dict(parse_qsl(body.decode())) if body else {}
        with self.server.lock:
            self.server.seen.append((self.path, dict(self.headers), form))
        if not self.path.startswith(BASE_PATH + "/"):
            return self._answer(404, b"404 page not found\n")
        tenant = self.headers.get("X-Scope-OrgID")
        if tenant is None:
            return self._answer(401, b"no org id\n")
        if tenant != TENANT:
            return self._answer(401, f"the tenant {tenant} is not known here\n".encode())
        request = urllib.request.Request(
            self.server.upstream + self.path[len(BASE_PATH) :], data=body, method=method
        )
        if body is not None:
            request.add_header("Content-Type", self.headers.get("Content-Type", ""))
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                status, answer, kind = reply.status, reply.read(), reply.headers["Content-Type"]
        except urllib.error.HTTPError as e:
            status, answer, kind = e.code, e.read(), e.headers.get("Content-Type", "text/plain")
        self._answer(status, answer, kind or "application/json")

    def do_GET(self) -> None:
        self._forward("GET")

    def do_POST(self) -> None:
        self._forward("POST")

    def log_message(self, *args: object) -> None:
        pass


class _Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream = upstream
        self.seen: list[tuple[str, dict[str, str], dict[str, str]]] = []
        self.lock = threading.Lock()


@contextmanager
def tenant_proxy(upstream: str) -> Iterator[_Proxy]:
    """The front for the Prometheus at ``upstream``; its ``url`` is the base path's
    (``http://127.0.0.1:PORT/prometheus``); always stopped."""
    proxy = _Proxy(upstream)
    proxy.url = f"http://127.0.0.1:{proxy.server_address[1]}{BASE_PATH}"
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
