"""A real Prometheus for the tests: Debian's ``prometheus`` package (``.ci/run`` installs it),
on 127.0.0.1 on a free port with a temporary TSDB, filled by ``promtool tsdb
create-blocks-from openmetrics`` or by scraping a local exporter; bounded in time, always
stopped."""

from __future__ import annotations

import shutil
import subprocess
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from local_process import free_port, serving

__all__ = ["backfill", "binaries", "exporter", "free_port", "prometheus"]


def binaries() -> tuple[str, str] | None:
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    return (prometheus, promtool) if prometheus and promtool else None


def backfill(openmetrics: str, tsdb: Path) -> None:
    """Blocks in ``tsdb`` from OpenMetrics text (timestamps in seconds, ``# EOF`` last)."""
    _, promtool = binaries()
    source = tsdb.parent / "backfill.om"
    source.write_text(openmetrics)
    tsdb.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(tsdb)],
        check=True,
        capture_output=True,
        timeout=120,
    )


@contextmanager
def prometheus(
    tsdb: Path, scrape: str | None = None, interval: str = "1s", path: str = "/metrics"
) -> Iterator[str]:
    """Prometheus on ``tsdb`` (scraping ``scrape``, host:port, at ``path``, if given); its URL."""
    exe, _ = binaries()
    config = tsdb.parent / "prometheus.yml"
    jobs = (
        (
            f"scrape_configs:\n  - job_name: engine\n    scrape_interval: {interval}\n"
            f"    metrics_path: {path}\n"
            f"    static_configs:\n      - targets: ['{scrape}']\n"
        )
        if scrape
        else "scrape_configs: []\n"
    )
    config.write_text(f"global:\n  scrape_interval: {interval}\n{jobs}")
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        with urllib.request.urlopen(url + "/-/ready", timeout=2) as reply:
            return reply.status == 200

    args = [
        exe,
        f"--config.file={config}",
        f"--storage.tsdb.path={tsdb}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=30d",
    ]
    with serving(args, tsdb.parent / "prometheus.log", ready, "prometheus"):
        yield url


@contextmanager
def exporter(text: str | Callable[[], str]) -> Iterator[str]:
    """A local /metrics endpoint serving ``text`` (or what it returns at each scrape, when a
    function), at any path; its host:port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = (text() if callable(text) else text).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
