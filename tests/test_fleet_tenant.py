"""breakeven fleet on a multi-tenant Prometheus (issue 45): Grafana Mimir and Cortex, which pick
the tenant from an ``X-Scope-OrgID`` header and serve the API under a base path, and Thanos,
whose queries take ``dedup`` and ``partial_response`` and whose answers carry ``warnings``.

The real Prometheus the suite runs (tests/prometheus_server.py) sits behind a loopback-only
front (tests/tenant_proxy.py) that answers 401 ``no org id`` without the tenant, as Mimir
does, and serves under ``/prometheus``.  A header's value is a secret: it never appears in any
output, even when a server echoes it back.
"""

from __future__ import annotations

import base64
import json
import os
import time

import pytest
from cli_checks import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_server import backfill, binaries, free_port, prometheus
from tenant_proxy import BASE_PATH, TENANT, tenant_proxy
from test_fleet_hostile import STEADY, FakePrometheus, _by_quantity, matrix, one_error, send

from breakeven.core.headers import REFUSED, Header, parse_headers
from breakeven.iotools.query_range import PrometheusAPI

END = (int(time.time()) // 60) * 60 - 600
START = END - 3600
SECRET = "tenant-s3cret-0123456789"
"""A tenant (or key) that must never be shown."""

needs_prometheus = pytest.mark.skipif(
    binaries() is None and not os.environ.get("CI"),
    reason="Prometheus is not installed (apt-get install prometheus); CI installs it",
)


def _om() -> str:
    """One vLLM server, accept_len 3 (20 accepted a draft of 10), over START..END."""
    labels = 'instance="a:8000",job="vllm",model_name="m"'
    out = []
    for name, rate in (
        ("vllm:spec_decode_num_drafts", 10.0),
        ("vllm:spec_decode_num_accepted_tokens", 20.0),
        ("vllm:spec_decode_num_draft_tokens", 40.0),
        ("vllm:generation_tokens", 300.0),
    ):
        out.append(f"# TYPE {name} counter")
        out += [
            f"{name}_total{{{labels}}} {rate * (t - START):.1f} {t}"
            for t in range(START, END + 1, 15)
        ]
    out.append("# TYPE vllm:num_requests_running gauge")
    out += [f"vllm:num_requests_running{{{labels}}} 8 {t}" for t in range(START, END + 1, 15)]
    return "\n".join([*out, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def mimir(tmp_path_factory):
    tsdb = tmp_path_factory.mktemp("tenant") / "tsdb"
    backfill(_om(), tsdb)
    with prometheus(tsdb) as url, tenant_proxy(url) as proxy:
        yield proxy


def fleet(url, *args, env=None):
    return run_cli(["fleet", "--prometheus", url, "--start", START, "--end", END, *args], env=env)


# -- Mimir and Cortex: a tenant header and a base path -----------------------------------------


@needs_prometheus
@pytest.mark.parametrize("slash", ["", "/"])
def test_fleet_reads_a_tenant_under_its_base_path(mimir, slash):
    before = len(mimir.seen)
    r = fleet(mimir.url + slash, "--header", f"X-Scope-OrgID: {TENANT}", "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    (server,) = got["instances"]
    assert server["instance"] == "a:8000" and server["accept_len"] == pytest.approx(3.0)
    assert got["headers"] == ["X-Scope-OrgID: ***"] and got["query_params"] == {}
    assert got["prometheus"] == mimir.url  # the base path kept, shown once
    seen = mimir.seen[before:]
    assert seen and all(path == BASE_PATH + "/api/v1/query_range" for path, _, _ in seen)
    assert all(headers.get("X-Scope-OrgID") == TENANT for _, headers, _ in seen)
    assert not any("dedup" in form or "partial_response" in form for _, _, form in seen)


@needs_prometheus
def test_without_the_tenant_is_one_line_naming_the_header_to_give(mimir):
    line = one_error(fleet(mimir.url), "--prometheus", "HTTP 401", "no org id")
    assert "--header 'X-Scope-OrgID: TENANT'" in line


@needs_prometheus
def test_a_wrong_tenant_echoed_back_is_never_shown(mimir):
    r = fleet(mimir.url, "--header", f"X-Scope-OrgID: {SECRET}", "--json")
    line = one_error(r, "--header", "HTTP 401", "X-Scope-OrgID: ***", "is not known here")
    assert SECRET not in r.output and SECRET[:8] not in line


@needs_prometheus
def test_a_path_outside_the_base_path_is_not_prometheus(mimir):
    """The front answers 404 outside /prometheus: a URL without the base path fails in one
    line naming --prometheus."""
    root = mimir.url[: -len(BASE_PATH)]
    one_error(fleet(root, "--header", f"X-Scope-OrgID: {TENANT}"), "--prometheus", "HTTP 404")


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("http://h:1/prometheus", "http://h:1/prometheus"),
        ("http://h:1/prometheus/", "http://h:1/prometheus"),
        ("http://h:1/a/b/prometheus//", "http://h:1/a/b/prometheus"),
        ("http://h:1", "http://h:1"),
        ("http://h:1/", "http://h:1"),
    ],
)
def test_every_api_path_is_joined_under_the_base_path(url, root):
    api = PrometheusAPI(url)
    try:
        assert api.root == root and api.shown == root
    finally:
        api.close()


# -- Bad --header: one line, the value never shown ---------------------------------------------


@pytest.mark.parametrize(
    ("headers", "fragment"),
    [
        ([f"X-Scope-OrgID {SECRET}"], "without ':'"),
        ([f": {SECRET}"], "no name"),
        ([f"X Scope: {SECRET}"], "not an HTTP token"),
        ([f"X-Scope\nOrgID: {SECRET}"], "not an HTTP token"),
        ([f"Tëam: {SECRET}"], "not an HTTP token"),
        ([f"X-Scope-OrgID: {SECRET}\r\nHost: evil"], "cannot carry"),
        ([f"X-Scope-OrgID: {SECRET}\x00"], "cannot carry"),
        ([f"X-Scope-OrgID: {SECRET}\t1"], "cannot carry"),
        ([f"X-Scope-OrgID: tëam-{SECRET}"], "cannot carry"),
        (["X-Scope-OrgID:  "], "empty value"),
        ([f"Host: {SECRET}"], "the host is the URL's"),
        ([f"content-length: {SECRET}"], "frames the request"),
        ([f"Transfer-Encoding: {SECRET}"], "frames the request"),
        ([f"Connection: {SECRET}"], "hop by hop"),
        ([f"Accept-Encoding: {SECRET}"], "decompresses"),
        ([f"Authorization: Bearer {SECRET}"], "--token-env"),
        ([f"X-Scope-OrgID: {SECRET}", f"x-scope-orgid: {SECRET}"], "given twice"),
    ],
)
def test_a_bad_header_is_one_line_naming_header(headers, fragment):
    args = [a for h in headers for a in ("--header", h)]
    r = fleet(f"http://127.0.0.1:{free_port()}/prometheus", *args)
    one_error(r, "--header", fragment)
    assert SECRET not in r.output and SECRET[:8] not in r.output


def test_every_refused_name_has_its_reason():
    for name in REFUSED:
        with pytest.raises(ValueError, match="not sent from here"):
            parse_headers([f"{name.title()}: value"])


def test_a_header_and_the_client_show_no_value_in_repr():
    (header,) = parse_headers([f"X-Scope-OrgID:{SECRET}  "])
    assert header == Header("X-Scope-OrgID", SECRET)
    api = PrometheusAPI("http://127.0.0.1:9/prometheus", headers=[header])
    try:
        for shown in (repr(header), str(header), header.shown, repr(api), str(api)):
            assert SECRET not in shown and "X-Scope-OrgID" in shown and "***" in shown, shown
        assert api.redact(f"tenant {SECRET} refused") == "tenant *** refused"
    finally:
        api.close()


# -- Thanos: dedup, partial_response and warnings ----------------------------------------------


def thanos(warnings=(), values=STEADY):
    """A responder that answers vLLM's quantities as STEADY, with ``warnings`` (Thanos'
    partial responses), and no series of the other engines."""
    known = _by_quantity()

    def respond(handler, form) -> None:
        engine, name = known[form["query"]]
        result = []
        if engine == "vllm" and name in values:
            start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
            samples = [
                [start + j * step, values[name]] for j in range(round((end - start) / step) + 1)
            ]
            result = [{"metric": {"instance": "a:8000", "model_name": "m"}, "values": samples}]
        answer = matrix(*result)
        if warnings:
            answer["warnings"] = list(warnings)
        send(handler, json.dumps(answer).encode())

    return respond


@pytest.mark.parametrize(
    ("flags", "sent"),
    [
        ([], {}),
        (["--dedup"], {"dedup": "true"}),
        (["--no-dedup"], {"dedup": "false"}),
        (["--partial-response"], {"partial_response": "true"}),
        (["--no-dedup", "--no-partial-response"], {"dedup": "false", "partial_response": "false"}),
    ],
)
def test_thanos_parameters_are_sent_exactly_when_given(flags, sent):
    with FakePrometheus(thanos()) as server:
        r = fleet(server.url, *flags, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["query_params"] == sent
    assert server.seen
    for _, form in server.seen:
        given = {k: v for k, v in form.items() if k in ("dedup", "partial_response")}
        assert given == sent


def test_thanos_warnings_are_notes_never_silent():
    warnings = ["receive-1: store unavailable", f"sidecar of tenant {SECRET} timed out"]
    with FakePrometheus(thanos(warnings)) as server:
        text = fleet(server.url, "--partial-response", "--header", f"X-Scope-OrgID: {SECRET}")
        as_json = fleet(
            server.url, "--partial-response", "--header", f"X-Scope-OrgID: {SECRET}", "--json"
        )
    assert text.exit_code == 0 and as_json.exit_code == 0, text.output + as_json.output
    notes = json.loads(as_json.stdout)["notes"]
    partial = [n for n in notes if "warned" in n]
    assert len(partial) == 2 and all("(the series may be partial)" in n for n in partial)
    assert any("receive-1: store unavailable" in n for n in partial)
    assert any("sidecar of tenant *** timed out" in n for n in partial)
    assert "Note: " in text.stderr and "receive-1: store unavailable" in text.stderr
    for r in (text, as_json):
        assert SECRET not in r.output and SECRET[:8] not in r.output


def test_a_flood_of_distinct_warnings_is_bounded():
    with FakePrometheus(thanos([f"store {n} unavailable" for n in range(50)])) as server:
        r = fleet(server.url, "--json")
    assert r.exit_code == 0, r.output
    notes = [n for n in json.loads(r.stdout)["notes"] if "warn" in n]
    assert len(notes) == 11 and "more warnings, not shown" in notes[-1]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--header", f"X-Scope-OrgID: {SECRET}"], ["--header", "(X-Scope-OrgID: ***)"]),
        ([], ["--prometheus", "--header 'X-Scope-OrgID: TENANT'"]),
    ],
)
def test_a_401_in_prometheus_json_says_what_the_tenant_needs(args, fragments):
    """A front that answers 401 in Prometheus' own JSON, echoing the headers."""
    with FakePrometheus(_echo("json401")) as server:
        r = fleet(server.url, *args)
    one_error(r, "Prometheus refused the query", "HTTP 401", *fragments)
    assert SECRET not in r.output and SECRET[:8] not in r.output


# -- Fuzz: any --header, a server that echoes what it was sent ---------------------------------


def _echo(style):
    """A responder that refuses every query, echoing the headers it was sent: in a 401's text,
    in Prometheus' JSON error, or in Base64."""

    def respond(handler, form) -> None:
        sent = "; ".join(f"{k}={v}" for k, v in handler.headers.items())
        if style == "401":
            send(handler, f"unauthorized: {sent}".encode(), 401)
        elif style in ("json", "json401"):
            error = {"status": "error", "errorType": "bad_data", "error": f"bad tenant {sent}"}
            send(handler, json.dumps(error).encode(), 401 if style == "json401" else 400)
        else:
            send(handler, base64.b64encode(sent.encode()), 502)

    return respond


_names = st.sampled_from(["X-Scope-OrgID", "X-Api-Key", "Host", "Authorization", ""]) | st.text(
    alphabet="Xy-_ \t\r\n\x00é/", max_size=6
)
_values = st.text(
    alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FF, blacklist_characters="Zq:"),
    max_size=20,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=_names, value=_values, style=st.sampled_from(["401", "json", "json401", "base64"]))
def test_any_header_value_is_never_shown(name, value, style):
    """Whatever --header holds, fleet exits 2 in one line, never a traceback, and the value
    (marked by 'Zq', which no message holds) never appears, even echoed back."""
    secret = f"Zq{value}Zq"
    with FakePrometheus(_echo(style)) as server:
        r = fleet(server.url, "--header", f"{name}: {secret}", "--json")
    line = one_error(r)
    assert "--header" in line or "--prometheus" in line, line
    assert secret.strip(" \t") not in r.output
    assert "Zq" not in r.output, r.output
