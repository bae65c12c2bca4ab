"""A URL no HTTP client can request is one line naming its flag, exit 2, on every command that
takes one (issue 40, from issue 39's round): ``bench --url``, ``fleet --prometheus`` and
``sweep --url``.  An IDNA host that does not decode (``xn--a``), a host of characters IDNA
refuses (a snowman, a zero-width space, U+0378 that Unicode does not assign), a control
character anywhere: each was an internal error (exit 3) where httpx or the idna package
raised its own exception, or, for the sweep, was found only when its first launch was
measured.  ``breakeven.iotools.httpclient.check_url`` refuses them before any request or
launch."""

from __future__ import annotations

import pytest
from cli_checks import one_line_exit_2, run_cli

URLS = [
    "http://xn--a.com",  # an A-label that is no Punycode of anything
    "http://xn--a.com:8000/v1",
    "https://xn--zz-zzz.com",  # decodes to a character IDNA 2008 disallows
    "http://xn--ls8h.la",  # an emoji host, as Punycode
    "http://xn--.com",  # an empty A-label
    "http://\u2603.com",  # a snowman: IDNA 2008 refuses symbols
    "http://a\u200bb.com",  # a zero-width space
    "http://ab\u0378.com",  # a code point Unicode does not assign
    "http://\ud800.com",  # a lone surrogate: no encoding holds it
    "http://a\x01b.com",  # a control character in the host
    "http://a.com/p\x7fq",  # ... in the path
    "http://exa\x00mple.com",  # a NUL
    "http://a\u2028b.com",  # a line separator
]


def _bench(url, tmp_path):
    return run_cli(["bench", "--url", url, "--label", "x", "--out", tmp_path / "runs.csv"])


def _fleet(url, tmp_path):
    return run_cli(["fleet", "--prometheus", url, "--since", "1h"])


def _sweep(url, tmp_path):
    started = tmp_path / "started"
    args = ["sweep", "--serve", f"touch {started}", "--engine", "vllm", "--url", url]
    r = run_cli([*args, "--out", tmp_path / "sweep", "--ready-timeout", 1])
    assert not started.exists()  # refused before any launch
    return r


@pytest.mark.parametrize("url", URLS, ids=[ascii(u) for u in URLS])
@pytest.mark.parametrize(
    "command,flag",
    [(_bench, "--url"), (_fleet, "--prometheus"), (_sweep, "--url")],
    ids=["bench", "fleet", "sweep"],
)
def test_a_url_no_client_can_request_is_one_line_naming_its_flag(tmp_path, command, flag, url):
    line = one_line_exit_2(command(url, tmp_path), f"{flag}: got ")
    assert "internal error" not in line
    assert all(c.isprintable() for c in line)  # the URL is shown escaped, never raw
