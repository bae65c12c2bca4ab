"""Secrets are masked before any text is cut (issue 29, item 2).

A server that echoes the API key, the URL's password or the Basic token (as they are, in
Base64, or cut short) gets none of them into stdout, stderr, the CSV or any written file:
every echoed text is redacted before bench shortens it, and the redactor masks the start of a
secret (from 8 characters on) wherever it stands.  A URL's password may hold any character;
the configuration, the redactor and the clients show no secret in their ``repr``.
"""

from __future__ import annotations

import base64
import csv
import random
import re
import string
from urllib.parse import quote

import pytest
from cli_checks import run_cli
from hostile_server import (
    ECHO_MODELS_MODES,
    ECHO_ROUTES,
    ECHO_STREAM_MODES,
    HostileServer,
    Hostility,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from breakeven.bench.config import Config, server_root
from breakeven.bench.session import Bench, _printable
from breakeven.core.credentials import (
    MASK,
    PIECE_SCAN_CHARACTERS,
    PREFIX_CHARACTERS,
    AmbiguousURL,
    Redactor,
    hide_url_passwords,
    masked_url,
    split_url,
)
from breakeven.core.errors import BreakevenError
from breakeven.iotools.server import MAX_VALUE_CHARS, endpoint_pairs

KEY = "sk-Zq8Ht3Lw0Xv5Nb2Yc7Kd4Mf9Rg1Sj6Tp0UaVe3Wi"  # 43 characters, as the issue's
USER = "bench"
PASSWORD = "p#w/d?x@y:z-Hunter2-Secret"  # every character a URL parser trips on
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()  # Authorization: Basic


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# What a hostile server echoes: each secret whole, in its header, in Base64 (alone and inside
# an encoded header, at each of Base64's three alignments), and cut short by the server.
KEY_ECHOES = (
    KEY,
    f"Authorization: Bearer {KEY}",
    b64(KEY),
    b64(f"Authorization: Bearer {KEY}"),
    b64(f"X-Api-Key: {KEY}"),
    b64(f"Bearer  {KEY}"),
    KEY[:20],
    b64(KEY)[:12],
    KEY[:PREFIX_CHARACTERS],
)
PASSWORD_ECHOES = (
    PASSWORD,
    f"Authorization: Basic {TOKEN}",
    TOKEN,
    b64(PASSWORD),
    quote(PASSWORD, safe=""),
    PASSWORD[:10],
    TOKEN[:12],
    b64(f"pw={PASSWORD}"),
)


def _inner(encoded: str) -> str:
    """Base64 characters that only the secret decides, whatever stands around it."""
    return encoded[4:-4]


KEY_FORMS = (
    KEY,
    b64(KEY),
    _inner(b64(f" {KEY}")),
    _inner(b64(f"  {KEY}")),
    quote(KEY, safe=""),
)
PASSWORD_FORMS = (
    PASSWORD,
    TOKEN,
    b64(PASSWORD),
    _inner(b64(f" {PASSWORD}")),
    _inner(b64(f"  {PASSWORD}")),
    quote(PASSWORD, safe=""),
)


def windows(secret: str, size: int = PREFIX_CHARACTERS) -> set[str]:
    """Every ``size``-character substring of ``secret``."""
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


def leaks(text: str, forms) -> list[str]:
    """The 8-character pieces of ``forms`` that ``text`` holds (as printed, and with its
    white space removed: a message wrapped to the terminal's width splits a line)."""
    joined = re.sub(r"\s+", "", text)
    return sorted({w for form in forms for w in windows(form) if w in text or w in joined})


def bench(*args, env=None):
    return run_cli(["bench", *map(str, args)], env=env)


def written(tmp_path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())


FAST = ["--max-tokens", 8, "--idle-timeout", 5, "--request-timeout", 10, "--connect-timeout", 2]
ENGINES = {"props": "llamacpp", "version": "vllm", "sglang": "sglang"}
SERVED = {  # what each route's echo is recorded in, besides server_version
    "props": ("build_info=", "model_path="),
    "version": ("cache_config.block_size=",),
    "sglang": ("model_path=", "dtype="),
}


def _rotated(echoes: tuple[str, ...], i: int) -> tuple[str, ...]:
    """The echoes starting at the ``i``-th: the first is where bench's cut falls."""
    i %= len(echoes)
    return echoes[i:] + echoes[:i]


def _with_secret(secret: str, url: str):
    if secret == "key":
        return url, {"ECHO_KEY": KEY}, ["--api-key-env", "ECHO_KEY"]
    return url.replace("://", f"://{USER}:{PASSWORD}@"), None, []


# --- bench against a server that echoes secrets -------------------------------------------


@pytest.mark.parametrize("mode", ECHO_STREAM_MODES)
@pytest.mark.parametrize("route", ECHO_ROUTES)
@pytest.mark.parametrize("secret", ["key", "password"])
def test_echoed_secrets_reach_no_output_and_no_file(tmp_path, secret, route, mode):
    echoes = KEY_ECHOES if secret == "key" else PASSWORD_ECHOES
    forms = KEY_FORMS if secret == "key" else PASSWORD_FORMS
    case = ECHO_ROUTES.index(route) * len(ECHO_STREAM_MODES) + ECHO_STREAM_MODES.index(mode)
    hostility = Hostility(stream=mode, fault_every=2, echo=_rotated(echoes, case), echo_route=route)
    out = tmp_path / "runs.csv"
    with HostileServer(hostility) as server:
        url, env, extra = _with_secret(secret, server.url)
        as_json = ["--json"] if route == "sglang" else []
        args = ["--url", url, "--label", "t", "--requests", 4, "--out", out, *FAST]
        r = bench(*args, *extra, *as_json, env=env)
        seen = set(server.hostility.authorizations)
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "2 request(s) failed" in r.output
    # The echoes were recorded (masked, or cut before a secret's first 8 characters): the
    # engine and its version, what it serves, the model, and each failed request's reason.
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    for row in rows:
        assert row["engine"] == ENGINES[route]
        assert MASK in row["model"]
        pairs = dict(p.split("=", 1) for p in row["env"].split() if "=" in p)
        assert pairs["server_version"].startswith("v" * 10)
        for name in SERVED[route]:  # cut at 200 characters: inside the first echo, or before
            assert pairs[name.rstrip("=")].startswith(("mmmmm", "ccccc", "vvvvv")), name
    problems = [line for line in r.output.splitlines() if line.startswith("Problem: ")]
    reason = "HTTP 500 from" if mode == "echo_500" else "malformed server-sent event"
    pad = "e" * 20 if mode == "echo_500" else "o" * 20
    assert len(problems) == 2 and all(reason in line and pad in line for line in problems)
    # No 8 characters of any secret, or of its encoded forms, anywhere.
    assert leaks(r.output, forms) == []
    assert leaks(written(tmp_path), forms) == []
    if secret == "password":  # the URL's password, with # / ? @ :, was sent whole
        assert seen == {f"Basic {TOKEN}"}
        assert all(row["source"].startswith(f"bench http://{USER}:***@127.0.0.1:") for row in rows)
    else:
        assert seen == {f"Bearer {KEY}"}


@pytest.mark.parametrize("mode", ECHO_MODELS_MODES)
@pytest.mark.parametrize("secret", ["key", "password"])
def test_echoed_secrets_in_a_readiness_error_are_masked(tmp_path, secret, mode):
    echoes = KEY_ECHOES if secret == "key" else PASSWORD_ECHOES
    forms = KEY_FORMS if secret == "key" else PASSWORD_FORMS
    for i in range(len(echoes)):
        with HostileServer(Hostility(models=mode, echo=_rotated(echoes, i))) as server:
            url, env, extra = _with_secret(secret, server.url)
            r = bench("--url", url, "--label", "t", "--ready-timeout", 5, *extra, env=env)
        assert r.exit_code == 2 and r.output.startswith("Error: --url: "), r.output
        assert r.output.count("\n") == 1 and leaks(r.output, forms) == []


def test_printable_redacts_before_it_cuts():
    redact = Redactor(KEY, auth=(USER, PASSWORD))
    for text in (*KEY_ECHOES, *PASSWORD_ECHOES, f"Authorization: Bearer {KEY}\x1b[2J"):
        for pad in range(60):
            for limit in (40, 80):
                shown = _printable("v" * pad + text, limit, redact)
                assert leaks(shown, KEY_FORMS + PASSWORD_FORMS) == [], (pad, limit, shown)
    # A secret with control characters inside its first 8 is found once they are removed.
    assert _printable(f"x {KEY[:5]}\x00\x1b[2J{KEY[5:]}\x07", 80, redact) == "x ***"
    assert _printable(f"{'v' * 30}{KEY}", 40, redact) == "v" * 30 + MASK


def test_served_settings_are_redacted_before_they_are_cut():
    redact = Redactor(KEY)
    for pad in range(MAX_VALUE_CHARS - 30, MAX_VALUE_CHARS):
        body = {"model_path": "m" * pad + KEY, "build_info": b64(KEY)}
        pairs = endpoint_pairs("llamacpp", body, None, redact)
        assert leaks(" ".join(pairs), KEY_FORMS) == [] and pairs[0] == f"build_info={MASK}"
    # Without a redactor, as before.
    assert endpoint_pairs("llamacpp", {"build_info": "b1"}) == ["build_info=b1"]


# --- the redactor ------------------------------------------------------------------------------


def test_the_start_of_a_secret_is_masked_through_its_longest_start():
    redact = Redactor(KEY)
    assert redact(f"a {KEY[:20]}XYZ b") == "a ***XYZ b"
    assert redact(f"a {KEY[:PREFIX_CHARACTERS]}") == "a ***"
    assert redact(f"a {KEY[: PREFIX_CHARACTERS - 1]}") == f"a {KEY[: PREFIX_CHARACTERS - 1]}"
    assert redact(f"{KEY}{KEY}{KEY[:9]}") == MASK
    assert redact(f"Bearer {KEY}, key={quote(KEY)}") == "Bearer ***, key=***"
    assert redact(f"Basic {b64(KEY)[:10]}") == "Basic ***"
    assert Redactor(auth=(USER, PASSWORD))(f"Basic {TOKEN} {TOKEN[:9]}") == "Basic *** ***"
    # A secret that repeats its own start: an overlapping later start is masked too.
    periodic = "ab" * 5 + "QRSTUVWXYZ"
    assert Redactor(periodic)("ab" + periodic) == MASK
    # Short secrets: whole only; shorter than MIN_REDACTED: never in free text.
    assert Redactor("abcd")("abcde abc") == "***e abc"
    assert Redactor("ab")("ab") == "ab"


def test_the_redactor_and_the_configuration_show_no_secret_in_repr():
    redactor = Redactor(KEY, auth=(USER, PASSWORD))
    config = Config(
        url=f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1",
        label="t",
        api_key=KEY,
        env="HF_TOKEN=hf_abcdefgh12345 TP=8 PROXY=http://u:proxypass1@h:3128",
    )
    for shown in (repr(redactor), str(redactor), repr(config), str(config), repr([config])):
        assert leaks(shown, KEY_FORMS + PASSWORD_FORMS) == [], shown
        assert "hf_abcdefgh" not in shown and "proxypass1" not in shown
    assert f"url='http://{USER}:***@127.0.0.1:9/v1'" in repr(config)
    assert "api_key='***'" in repr(config) and "TP=8" in repr(config)
    assert "api_key=None" in repr(Config(url="http://h:9", label="t"))
    pytest.importorskip("httpx")
    keyed = Bench(Config(url="http://127.0.0.1:9", label="t", api_key=KEY))
    basic = Bench(Config(url=config.url, label="t"))
    for shown in (repr(keyed), str(keyed), repr(basic), repr(vars(keyed)["config"])):
        assert leaks(shown, KEY_FORMS + PASSWORD_FORMS) == [], shown


def test_the_fleet_client_shows_no_secret_in_repr():
    pytest.importorskip("httpx")
    from breakeven.iotools.query_range import PrometheusAPI

    api = PrometheusAPI(f"http://{USER}:{PASSWORD}@127.0.0.1:9/", KEY)
    try:
        for shown in (repr(api), str(api), repr(api.redact)):
            assert leaks(shown, KEY_FORMS + PASSWORD_FORMS) == [], shown
    finally:
        api.close()


# --- URLs whose password holds any character ---------------------------------------------------


@pytest.mark.parametrize(
    ("url", "bare", "auth"),
    [
        ("http://u:pw@h:8000/v1", "http://h:8000/v1", ("u", "pw")),
        (f"http://{USER}:{PASSWORD}@h:8000/v1", "http://h:8000/v1", (USER, PASSWORD)),
        ("http://u:a#b@h", "http://h", ("u", "a#b")),
        ("http://u:a/b@h/v1", "http://h/v1", ("u", "a/b")),
        ("http://u:a?b@h?q=1", "http://h?q=1", ("u", "a?b")),
        ("http://u:a@b@h", "http://h", ("u", "a@b")),
        ("http://u:a:b@h:1", "http://h:1", ("u", "a:b")),
        ("http://u:p%40ss@[::1]:8000/", "http://[::1]:8000/", ("u", "p@ss")),
        ("http://me@example.com:pw@h", "http://h", ("me@example.com", "pw")),
        ("http://u@h", "http://h", ("u", "")),
        ("http://h:8000/v1", "http://h:8000/v1", None),
        ("http://h/a@b", "http://h/a@b", None),  # the path's @
        ("localhost:8000", "localhost:8000", None),
    ],
)
def test_split_url_takes_the_user_and_password_to_the_last_at_before_a_host(url, bare, auth):
    assert split_url(url) == (bare, auth)
    if auth is not None and auth[1]:
        shown = masked_url(url)
        assert f":{MASK}@" in shown and auth[1] not in shown
        assert auth[1] not in hide_url_passwords(f"see {url} now")


@pytest.mark.parametrize(
    "url",
    [
        "http://u:hunter2pw@[::1",  # an @ in the authority, no host after it
        "http://h:8000/v1?mail=hunter2pw@example.com",  # a port, then a path's @ (or a password?)
        "http://u:12/hunter2pw@h",  # a password of digits, then /
    ],
)
def test_a_url_that_cannot_be_split_is_refused_in_one_line_without_its_password(url):
    with pytest.raises(AmbiguousURL) as caught:
        split_url(url)
    assert "hunter2pw" not in str(caught.value)
    with pytest.raises(BreakevenError):
        server_root(url)
    r = bench("--url", url, "--label", "t")
    assert r.exit_code == 2 and r.output.startswith("Error: --url: got ")
    assert r.output.count("\n") == 1 and "hunter2pw" not in r.output and MASK in r.output


def test_a_password_with_any_character_is_never_shown_by_bench():
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:9"
    r = bench("--url", url, "--label", "t", "--connect-timeout", 1, "--ready-timeout", 2)
    assert r.exit_code == 2 and f"{USER}:***@127.0.0.1:9" in r.output
    assert leaks(r.output, PASSWORD_FORMS) == []
    r = bench("--url", url.replace(":9", ":99999"), "--label", "t")
    assert r.exit_code == 2 and leaks(r.output, PASSWORD_FORMS) == [] and MASK in r.output


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("at http://u:a/b#c@h:1/x now", "at http://u:***@h:1/x now"),
        ("http://u:pw@h/ and ftp://v:x@y@z", "http://u:***@h/ and ftp://v:***@z"),
        ("http://h:8000/v1 no password", "http://h:8000/v1 no password"),
        ("http://me@example.com:pw@h", "http://me@example.com:***@h"),
    ],
)
def test_hide_url_passwords_masks_a_password_with_any_character(text, shown):
    assert hide_url_passwords(text) == shown


# --- properties --------------------------------------------------------------------------------

_PRINTABLE = st.characters(blacklist_categories=("Cc", "Cs"))


def _clean(output: str, secret: str, left: str, right: str) -> bool:
    """No 8-character window of ``secret`` in ``output``; the cases where masking alone could
    not help (the text around holds a window, or forms one with the mask) are assumed away."""
    around = left + MASK + right
    assume(not any(w in around for w in windows(secret)))
    return not any(w in output for w in windows(secret))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=st.text(_PRINTABLE, min_size=8, max_size=64),
    left=st.text(max_size=40),
    right=st.text(max_size=40),
    data=st.data(),
)
def test_a_secret_or_any_start_of_it_leaves_no_8_characters(secret, left, right, data):
    k = data.draw(st.integers(PREFIX_CHARACTERS, len(secret)), label="start")
    output = Redactor(secret)(left + secret[:k] + right)
    assert _clean(output, secret, left, right), output


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=st.text(_PRINTABLE, min_size=8, max_size=64),
    inserted=st.lists(st.sampled_from(["\n", " ", "...", "\x1b[2J", "\x00", "|"]), max_size=3),
    left=st.text(max_size=40),
    right=st.text(max_size=40),
    data=st.data(),
)
def test_a_secret_split_by_inserted_characters_leaves_no_8_characters(
    secret, inserted, left, right, data
):
    # A server (or a proxy, a log) that breaks an echoed key at any places, at once.
    cuts = sorted(data.draw(st.lists(st.integers(1, len(secret) - 1), max_size=len(inserted))))
    pieces, at = [], 0
    for cut, text in zip(cuts, inserted, strict=False):
        pieces += [secret[at:cut], text]
        at = cut
    split = "".join([*pieces, secret[at:]])
    output = Redactor(secret)(left + split + right)
    assert _clean(output, secret, left, right), output


def test_a_key_split_past_its_first_8_characters_is_masked_on_both_sides():
    redact = Redactor(KEY)
    assert redact(f"key {KEY[:13]}\n{KEY[13:]} end") == "key ***\n*** end"
    assert redact(f"{KEY[:20]}...{KEY[25:]}") == "***...***"
    # bench's server text: masked, made printable, masked again, then cut.
    shown = _printable(f"error: {KEY[:10]}\x1b[2J\n{KEY[10:]}", 80, redact)
    assert leaks(shown, KEY_FORMS) == [] and shown.count(MASK) == 2, shown
    # Past PIECE_SCAN_CHARACTERS only starts are found; what is shown is searched again.
    long = "x" * PIECE_SCAN_CHARACTERS + f"{KEY[:13]} {KEY[13:]}"
    assert KEY[13:] in redact(long)
    assert leaks(_printable(long[-200:], 80, redact), KEY_FORMS) == []


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    user=st.text(_PRINTABLE.filter(lambda c: c != ":"), max_size=12),
    password=st.text(_PRINTABLE, min_size=1, max_size=40),
    key=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=64),
    left=st.text(max_size=40),
    right=st.text(max_size=40),
    data=st.data(),
)
def test_a_start_of_a_base64_form_leaves_no_8_characters(user, password, key, left, right, data):
    redact = Redactor(key, auth=(user, password))
    for form in (b64(f"{user}:{password}"), b64(key), b64(password)):
        if len(form) < PREFIX_CHARACTERS:
            continue
        k = data.draw(st.integers(PREFIX_CHARACTERS, len(form)))
        output = redact(left + form[:k] + right)
        assert _clean(output, form, left, right), (form, output)


def test_a_megabyte_is_redacted_whole():
    # Linear work: a megabyte of random text with secrets, their starts and URLs in it, and one
    # that repeats a secret's start throughout (no timing asserted: it would only be slow).
    rng = random.Random(29)
    pieces = []
    while sum(map(len, pieces)) < 1 << 20:
        pieces.append("".join(rng.choices(string.printable, k=rng.randrange(1, 400))))
        pieces.append(rng.choice([KEY, KEY[: rng.randrange(8, 43)], TOKEN[:9], b64(KEY)]))
        pieces.append(f" http://u:{PASSWORD}@h/ ")
    text = "".join(pieces)
    output = Redactor(KEY, auth=(USER, PASSWORD))(text)
    assert leaks(output, KEY_FORMS + PASSWORD_FORMS) == []
    assert len(output) < len(text)
    assert Redactor("a" * 43)("a" * (1 << 20)) == MASK
    assert Redactor(KEY)(KEY[:9] * (1 << 17)) == MASK
