"""The HTTP client breakeven talks to servers with (``bench``: the engine; ``fleet``: a
Prometheus server): httpx, and httpx-sse for streamed completions, both optional (the
``bench`` extra)."""

from __future__ import annotations

from typing import Any

from breakeven.errors import BreakevenError

INSTALL_HINT = "breakeven bench needs httpx and httpx-sse: pip install 'breakeven[bench]'"


def require_http() -> tuple[Any, Any]:
    """The modules ``httpx`` and ``httpx_sse``; a BreakevenError saying what to install when
    they are not."""
    try:
        import httpx  # lazy: an optional extra, and costly to import
        import httpx_sse  # lazy: an optional extra
    except ImportError:
        raise BreakevenError(INSTALL_HINT) from None
    return httpx, httpx_sse


__all__ = ["INSTALL_HINT", "require_http"]
