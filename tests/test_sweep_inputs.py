"""The sweep's own inputs (issue 40): every bad one is one line naming its flag or file, exit
2, before any server starts, never an internal error: a --spec-method holding a model id, an --out
that cannot be made or written (a full disk), a hand-edited, empty, truncated or deeply nested
manifest on --resume; a hypothesis fuzz of the sweep's arguments (with --plan, which starts
nothing) and of a tampered manifest (a server already on the port, so that a manifest that
passes is refused there, and nothing starts either way)."""

from __future__ import annotations

import copy
import errno
import json
import os
import sys
from pathlib import Path

import pytest
from cli_checks import one_line_exit_2, run_cli
from fake_server import FakeServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakeven.iotools import atomic
from breakeven.iotools.manifest import write_manifest
from breakeven.sweep.plan import plan_sweep
from breakeven.sweep.run import LaunchOutcome

FAKE = Path(__file__).parent / "fake_server.py"
SERVE = f"{sys.executable} {FAKE} --port {{port}}"
NO_SPACE = os.strerror(errno.ENOSPC)


def _args(out, port=8000, *more):
    args = ["sweep", "--serve", SERVE, "--engine", "vllm", "--spec-method", "ngram", "-k", "0,2"]
    return [*args, "--port", str(port), "--out", str(out), *map(str, more)]


def test_a_model_id_given_as_method_is_one_line_before_anything_runs(tmp_path):
    out = tmp_path / "s"
    args = _args(out)
    args[args.index("ngram")] = "meta-llama/Llama-3.1-8B-Instruct"
    last = one_line_exit_2(run_cli(args), "--spec-method", "'meta-llama/Llama-3.1-8B-Instruct'")
    assert "--draft" in last
    assert not out.exists()


@pytest.mark.parametrize("where", ["under a file", "full disk"])
def test_an_out_that_cannot_be_made_or_written_is_one_line(tmp_path, monkeypatch, where):
    if where == "under a file":
        (tmp_path / "file").write_text("")
        out = tmp_path / "file" / "sweep"
        wanted = ["--out: cannot write", str(out)]
    else:
        out = tmp_path / "sweep"
        monkeypatch.setattr(
            atomic,
            "_publish",
            lambda *a, **k: (_ for _ in ()).throw(OSError(errno.ENOSPC, NO_SPACE)),
        )
        wanted = ["--out: cannot write", NO_SPACE, "every completed row is kept"]
    one_line_exit_2(run_cli(_args(out)), *wanted)
    assert not (out / "logs").exists()  # nothing started


def _stored_sweep(out: Path, port: int) -> dict:
    """A sweep's directory as a run that did its first launch leaves it: the manifest (its
    plan as the command plans it, its id, launch 1's outcome) and a runs.csv."""
    plan = plan_sweep(SERVE, "vllm", [0, 2], method="ngram", port=port)
    out.mkdir()
    done = [
        LaunchOutcome(
            1, "baseline", 0, True, start_s=1.5, log=str(out / "logs" / "001.log")
        ).__dict__
    ]
    write_manifest(str(out), plan.to_dict(), done, "0123456789abcdef")
    (out / "runs.csv").write_text("label\nbaseline\n")
    return json.loads((out / "manifest.json").read_text())


@pytest.mark.parametrize(
    ("tamper", "wanted"),
    [
        (lambda m: "", "is not JSON"),
        (lambda m: json.dumps(m)[:40], "is not JSON"),
        (lambda m: "[" * 100_000 + "]" * 100_000, "nested"),
        (lambda m: json.dumps({**m, "done": {"1": True}}), "its done is not a list"),
        (lambda m: json.dumps({**m, "sweep": "x\u0000y"}), "sweep id"),
        (lambda m: json.dumps({**m, "done": [{**m["done"][0], "index": "1"}]}), "index is '1'"),
        (lambda m: json.dumps({**m, "done": [{**m["done"][0], "index": 99}]}), "not one of 1 to 2"),
        (lambda m: json.dumps({**m, "done": [{**m["done"][0], "ok": "yes"}]}), "ok is 'yes'"),
        (lambda m: json.dumps({**m, "done": [[1, 2]]}), "is list, not an object"),
        (lambda m: json.dumps({**m, "done": [{**m["done"][0], "extra": 1}]}), "'extra'"),
        (lambda m: json.dumps({**m, "plan": [m["plan"]]}), "no plan in it"),
    ],
    ids=[
        "empty",
        "truncated",
        "deep",
        "done-object",
        "sweep-nul",
        "index-text",
        "index-out",
        "ok-text",
        "done-list",
        "extra-key",
        "plan-list",
    ],
)
def test_a_tampered_manifest_is_one_line_naming_it(tmp_path, tamper, wanted):
    out, port = tmp_path / "s", 8000
    stored = _stored_sweep(out, port)
    (out / "manifest.json").write_text(tamper(stored))
    last = one_line_exit_2(run_cli([*_args(out, port), "--resume"]), "manifest.json", wanted)
    assert "nothing to resume" in last
    assert not (out / "logs").exists()


def _mutations(value):
    """A JSON value with one part replaced, removed or deepened: every place of it."""
    json_values = st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=5,
    )

    def places(v, path=()):
        yield path
        if isinstance(v, dict):
            for k, x in v.items():
                yield from places(x, (*path, k))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                yield from places(x, (*path, i))

    paths = list(places(value))

    @st.composite
    def mutated(draw):
        path = draw(st.sampled_from(paths[1:]))
        body = copy.deepcopy(value)
        parent = body
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
        return body

    return mutated()


@pytest.fixture(scope="module")
def occupied():
    """A server on the sweep's port: a manifest that passes every check is then refused
    there, before any launch, so that no example starts anything."""
    with FakeServer() as server:
        yield int(server.url.rsplit(":", 1)[1])


_STORED = None


def _stored_for_fuzz(tmp_path_factory, port):
    global _STORED
    if _STORED is None:
        _STORED = _stored_sweep(tmp_path_factory.mktemp("stored") / "s", port)
    return _STORED


@settings(
    max_examples=int(os.environ.get("BREAKEVEN_FUZZ_SWEEP", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_tampered_manifest_is_one_line_exit_2_and_starts_nothing(
    tmp_path_factory, occupied, data
):
    stored = _stored_for_fuzz(tmp_path_factory, occupied)
    body = data.draw(_mutations(stored))
    out = tmp_path_factory.mktemp("fuzz") / "s"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps(body))
    r = run_cli([*_args(out, occupied), "--resume"])
    last = one_line_exit_2(r)
    assert "manifest.json" in last or "another server is there" in last, last
    assert not (out / "logs").exists()


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
_NUMBER = st.one_of(
    st.integers(-(10**400), 10**400).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e400", "-0", "0x10", "", " ", "nan", "2,4", "1 2"]),
    _TEXT,
)
_OPTIONS = {
    "--serve": _TEXT,
    "--engine": st.sampled_from(["vllm", "sglang", "llamacpp", "trtllm", ""]) | _TEXT,
    "--spec-method": _TEXT,
    "--draft": _TEXT,
    "-k": _NUMBER,
    "--concurrency": _NUMBER,
    "--repeats": _NUMBER,
    "--requests": _NUMBER,
    "--max-tokens": _NUMBER,
    "--port": _NUMBER,
    "--ready-timeout": _NUMBER,
    "--stop-grace": _NUMBER,
    "--url": _TEXT,
    "--stop": _TEXT,
}


@settings(
    max_examples=int(os.environ.get("BREAKEVEN_FUZZ_SWEEP", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    changed=st.dictionaries(st.sampled_from(sorted(_OPTIONS)), st.just(None), max_size=4),
    data=st.data(),
)
def test_any_sweep_arguments_plan_or_are_one_line_exit_2(tmp_path_factory, changed, data):
    """--plan with any values: a plan (exit 0) or one line naming a flag (exit 2); never an
    internal error, a traceback or a hang."""
    given = {"--serve": SERVE, "--engine": "vllm", "--spec-method": "ngram", "-k": "0,2"}
    for name in changed:
        given[name] = data.draw(_OPTIONS[name], label=name)
    args = ["sweep", "--plan", "--out", str(tmp_path_factory.mktemp("p") / "s")]
    for name, value in given.items():
        args += [name, value]
    r = run_cli(args)
    assert r.exit_code in (0, 2), r.output
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    if r.exit_code == 2:
        one_line_exit_2(r)
