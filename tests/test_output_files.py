"""Output files (issue 29, item 4): --append writes through links, an output is never one of
its command's inputs, schedule --out never leaves a stale config beside a success, and a
full disk names the flag whose file could not be written."""

from __future__ import annotations

import csv
import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_checks import invoke, one_line_exit_2

from breakeven.iotools import atomic
from breakeven.iotools.records import RECORD_KEYS

ROOT = Path(__file__).resolve().parent.parent
CASE = ROOT / "tests" / "data" / "case_study"
BASE_LOG = CASE / "sglang_baseline.log"  # 3 records
SPEC_LOG = CASE / "sglang_eagle3_k3.log"  # 4 records
CURVE = ROOT / "data" / "llama3_8b_decode_curve.csv"
CASE_CSV = ROOT / "data" / "case_study.csv"
PUBLISHED = ROOT / "data" / "published.csv"
PROMPTS = ROOT / "data" / "prompts_by_category.jsonl"
PROM = ROOT / "tests" / "data" / "engines" / "vllm_metrics__pr41916_spec_decode_excerpt.prom"
NEVER_PAYS = ("--cost-curve", CURVE, "--alpha", 0.1, "--draft-step-ms", 5, "--max-k", 4)
"""A schedule where no k beats plain decoding at any batch (tests/test_schedule.py)."""


def rows(path):
    return list(csv.reader(Path(path).open()))


def ingest(*args):
    r = invoke("ingest", *args)
    assert r.exit_code == 0, r.output
    return r


def leftovers(directory):
    """Temporary files and journals a writer left behind."""
    return [p.name for p in Path(directory).iterdir() if p.name.startswith(".breakeven")]


# --append through links: the rows go to the file, the links stay as they are.


class TestAppendThroughLinks:
    def test_a_symbolic_link_is_written_through(self, tmp_path):
        target = tmp_path / "data" / "runs.csv"
        target.parent.mkdir()
        ingest(BASE_LOG, "--out", target)
        link = tmp_path / "runs.csv"
        link.symlink_to(target)
        inode = target.stat().st_ino
        ingest(SPEC_LOG, "--out", link, "--append")
        assert link.is_symlink() and os.readlink(link) == str(target)
        assert target.stat().st_ino == inode  # added in place, not replaced
        got = rows(target)
        assert got[0] == list(RECORD_KEYS) and len(got) == 1 + 3 + 4
        assert not leftovers(tmp_path) and not leftovers(target.parent)

    def test_a_dangling_symbolic_link_gets_its_file_made(self, tmp_path):
        link = tmp_path / "runs.csv"
        link.symlink_to("made.csv")
        ingest(SPEC_LOG, "--out", link, "--append")
        assert link.is_symlink() and len(rows(tmp_path / "made.csv")) == 1 + 4

    def test_a_hard_link_shares_the_rows(self, tmp_path):
        first = tmp_path / "runs.csv"
        ingest(BASE_LOG, "--out", first)
        (tmp_path / "other").mkdir()
        second = tmp_path / "other" / "same.csv"
        os.link(first, second)
        ingest(SPEC_LOG, "--out", second, "--append")
        assert first.stat().st_ino == second.stat().st_ino and first.stat().st_nlink == 2
        assert first.read_bytes() == second.read_bytes() and len(rows(first)) == 1 + 3 + 4

    @pytest.mark.parametrize("link", ["symbolic", "hard", "none"])
    def test_the_mode_and_owner_are_kept(self, tmp_path, link):
        target = tmp_path / "runs.csv"
        ingest(BASE_LOG, "--out", target)
        target.chmod(0o640)
        path = tmp_path / "via.csv"
        if link == "symbolic":
            path.symlink_to(target)
        elif link == "hard":
            os.link(target, path)
        else:
            path = target
        before = target.stat()
        ingest(SPEC_LOG, "--out", path, "--append")
        after = target.stat()
        assert (after.st_mode, after.st_uid, after.st_gid, after.st_ino) == (
            before.st_mode,
            before.st_uid,
            before.st_gid,
            before.st_ino,
        )
        assert len(rows(target)) == 1 + 3 + 4

    def test_concurrent_appends_through_a_link_write_one_header(self, tmp_path):
        target = tmp_path / "runs.csv"
        link = tmp_path / "link.csv"
        link.symlink_to(target)  # the file does not exist yet: one of them makes it
        args = [sys.executable, "-m", "breakeven", "ingest", str(SPEC_LOG), "--out", str(link)]
        procs = [
            subprocess.Popen([*args, "--append"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
            for _ in range(10)
        ]
        errors = [p.communicate(timeout=300)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 10, errors
        got = rows(target)
        assert got[0] == list(RECORD_KEYS) and got.count(list(RECORD_KEYS)) == 1
        assert len(got) == 1 + 10 * 4 and link.is_symlink()
        assert not leftovers(tmp_path)

    def test_force_replaces_a_symbolic_link_never_its_target(self, tmp_path):
        target = tmp_path / "kept.csv"
        target.write_text("not to be touched\n")
        link = tmp_path / "runs.csv"
        link.symlink_to(target)
        ingest(BASE_LOG, "--out", link, "--force")
        assert not link.is_symlink() and len(rows(link)) == 1 + 3
        assert target.read_text() == "not to be touched\n"

    def test_a_file_that_is_not_regular_is_refused_before_any_work(self, tmp_path):
        fifo = tmp_path / "pipe.csv"
        os.mkfifo(fifo)
        r = invoke("ingest", BASE_LOG, "--out", fifo, "--append")
        one_line_exit_2(r, "--out", repr(str(fifo)), "not a regular file")


class TestAppendIsAllOrNothing:
    def test_an_appender_killed_while_adding_is_cut_off_by_the_next(self, tmp_path):
        out = tmp_path / "runs.csv"
        ingest(BASE_LOG, "--out", out)
        whole = out.read_bytes()
        st = out.stat()
        journal = tmp_path / f"{atomic.JOURNAL_PREFIX}{st.st_dev}-{st.st_ino}"
        journal.write_text(f"{len(whole)} {len(whole) + 500}\n")  # as a killed appender leaves
        with out.open("ab") as f:
            f.write(b"r,half a row")  # what it had added when it was killed
        ingest(SPEC_LOG, "--out", out, "--append")
        assert out.read_bytes().startswith(whole) and len(rows(out)) == 1 + 3 + 4
        assert b"half a row" not in out.read_bytes() and not leftovers(tmp_path)

    def test_an_appender_killed_after_adding_every_byte_keeps_its_rows(self, tmp_path):
        out = tmp_path / "runs.csv"
        ingest(BASE_LOG, "--out", out)
        size = out.stat().st_size
        ingest(SPEC_LOG, "--out", out, "--append")
        st = out.stat()
        journal = tmp_path / f"{atomic.JOURNAL_PREFIX}{st.st_dev}-{st.st_ino}"
        journal.write_text(f"{size} {st.st_size}\n")  # killed before removing its journal
        ingest(SPEC_LOG, "--out", out, "--append")
        assert len(rows(out)) == 1 + 3 + 4 + 4 and not leftovers(tmp_path)

    def test_kill_9_while_reading_leaves_the_file_as_it_was(self, tmp_path):
        out = tmp_path / "runs.csv"
        ingest(BASE_LOG, "--out", out)
        before = out.read_bytes()
        big = tmp_path / "big.log"
        big.write_bytes(SPEC_LOG.read_bytes() * 20_000)  # the rows take a while
        process = subprocess.Popen(
            [sys.executable, "-m", "breakeven", "ingest", str(big), "--out", str(out), "--append"],
            stderr=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
            p.name.startswith(atomic.TEMP_PREFIX) for p in tmp_path.iterdir()
        ):
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        assert out.read_bytes() == before
        ingest(SPEC_LOG, "--out", out, "--append")  # and the next appender cleans up
        assert len(rows(out)) == 1 + 3 + 4 and not leftovers(tmp_path)

    def test_a_readers_error_passes_as_it_is(self, tmp_path):
        out = tmp_path / "runs.csv"
        ingest(BASE_LOG, "--out", out)
        before = out.read_bytes()

        def chunks():
            yield b"a,row\n"
            raise OSError(errno.EIO, "Input/output error")

        header = before.split(b"\n", 1)[0] + b"\n"
        with pytest.raises(OSError, match="Input/output"):
            atomic.append_bytes(str(out), header, chunks())
        assert out.read_bytes() == before and not leftovers(tmp_path)


# An output that is one of the command's inputs: refused, even with --force.


def _fit_file(tmp_path):
    fit = tmp_path / "fit.json"
    r = invoke("fit", PUBLISHED, "--out", fit)
    assert r.exit_code == 0, r.output
    return fit


def _copy(source, tmp_path, name):
    path = tmp_path / name
    if path.parent != tmp_path:
        path.parent.mkdir(exist_ok=True)
    shutil.copyfile(source, path)
    return path


# Each case: (the input it makes, the command line given that input, the flag, the input named).
CASES = {
    "ingest": (
        lambda t: _copy(BASE_LOG, t, "base.log"),
        lambda p: ["ingest", p, "--out", p, "--force"],
        "--out",
        "FILE",
    ),
    "ingest LABEL=FILE": (
        lambda t: _copy(BASE_LOG, t, "base.log"),
        lambda p: ["ingest", f"base={p}", "--out", p, "--force"],
        "--out",
        "FILE",
    ),
    "ingest --append": (
        lambda t: _copy(CASE_CSV, t, "runs.csv"),
        lambda p: ["ingest", p, "--out", p, "--append"],
        "--out",
        "FILE",
    ),
    "ingest --before": (
        lambda t: _copy(PROM, t, "before.prom"),
        lambda p: ["ingest", PROM, "--before", p, "--out", p, "--force"],
        "--out",
        "--before",
    ),
    "fit": (
        lambda t: _copy(PUBLISHED, t, "runs.csv"),
        lambda p: ["fit", p, "--out", p, "--force"],
        "--out",
        "RUNS.csv",
    ),
    "schedule --cost-curve": (
        lambda t: _copy(CURVE, t, "curve.csv"),
        lambda p: [
            "schedule",
            "--cost-curve",
            p,
            "--alpha",
            0.7,
            "--engine",
            "vllm",
            "--out",
            p,
            "--force",
        ],
        "--out",
        "--cost-curve",
    ),
    "schedule --fit-file": (
        _fit_file,
        lambda p: ["schedule", "--fit-file", p, "--engine", "vllm", "--out", p, "--force"],
        "--out",
        "--fit-file",
    ),
    "schedule --load": (
        lambda t: _copy(CASE_CSV, t, "load.csv"),
        lambda p: [
            "schedule",
            "--cost-curve",
            CURVE,
            "--alpha",
            0.7,
            "--engine",
            "vllm",
            "--load",
            p,
            "--out",
            p,
            "--force",
        ],
        "--out",
        "--load",
    ),
    "compare --report": (
        lambda t: _copy(SPEC_LOG, t, "r/report.html"),
        lambda p: ["compare", BASE_LOG, p, "-k", 3, "--report", p.parent, "--force"],
        "--report",
        "SPEC",
    ),
    "compare --report, a launch of a run": (
        lambda t: _copy(BASE_LOG, t, "r/report.html"),
        lambda p: ["compare", f"base={BASE_LOG},{p}", SPEC_LOG, "-k", 3, "--report", p.parent],
        "--report",
        "BASELINE",
    ),
    "compare --report --fit-file": (
        lambda t: _copy(_fit_file(t), t, "r/report.html"),
        lambda p: ["compare", BASE_LOG, SPEC_LOG, "-k", 3, "--fit-file", p, "--report", p.parent],
        "--report",
        "--fit-file",
    ),
    "report": (
        lambda t: _copy(CASE_CSV, t, "r/report.html"),
        lambda p: ["report", p, "--out", p.parent, "--force"],
        "--out",
        "MEASUREMENTS",
    ),
    "plot check": (
        lambda t: _copy(CASE_CSV, t, "check.png"),
        lambda p: ["plot", "check", p, "--cycle-ms", 29.9, "--out", p, "--force"],
        "--out",
        "MEASUREMENTS",
    ),
    "plot surface --from": (
        lambda t: _copy(CASE_CSV, t, "surface.png"),
        lambda p: [
            "plot",
            "surface",
            "--baseline-tok-s",
            62.9,
            "--verify-ms",
            28.7,
            "--accept-len",
            2.1,
            "--from",
            p,
            "--out",
            p,
            "--force",
        ],
        "--out",
        "--from",
    ),
    "plot k --cost-curve": (
        lambda t: _copy(CURVE, t, "k.png"),
        lambda p: ["plot", "k", "--alpha", 0.7, "--cost-curve", p, "--out", p, "--force"],
        "--out",
        "--cost-curve",
    ),
    "plot batch --cost-curve": (
        lambda t: _copy(CURVE, t, "batch.png"),
        lambda p: ["plot", "batch", "--cost-curve", p, "--alpha", 0.7, "--out", p, "--force"],
        "--out",
        "--cost-curve",
    ),
    "plot schedule --load": (
        lambda t: _copy(CASE_CSV, t, "schedule.png"),
        lambda p: [
            "plot",
            "schedule",
            "--cost-curve",
            CURVE,
            "--alpha",
            0.7,
            "--load",
            p,
            "--out",
            p,
            "--force",
        ],
        "--out",
        "--load",
    ),
    "fleet --out --fit-file": (
        _fit_file,
        lambda p: [
            "fleet",
            "--prometheus",
            "http://127.0.0.1:9",
            "--fit-file",
            p,
            "--out",
            p,
            "--force",
        ],
        "--out",
        "--fit-file",
    ),
    "bench --prompts": (
        lambda t: _copy(PROMPTS, t, "prompts.csv"),
        lambda p: [
            "bench",
            "--url",
            "http://127.0.0.1:9",
            "--label",
            "x",
            "--prompts",
            p,
            "--out",
            p,
        ],
        "--out",
        "--prompts",
    ),
    "sweep --server-env-from": (
        lambda t: _copy(CASE_CSV, t, "sweep/runs.csv"),
        lambda p: [
            "sweep",
            "--serve",
            "serve --port {port}",
            "--engine",
            "vllm",
            "--server-env-from",
            p,
            "--out",
            p.parent,
            "--plan",
        ],
        "--out",
        "--server-env-from",
    ),
}


# Outputs that are directories (a report's, a sweep's): given through a symbolic link only, as
# a directory has no hard links.
DIRECTORY_CASES = {
    "compare --report",
    "compare --report, a launch of a run",
    "compare --report --fit-file",
    "report",
    "sweep --server-env-from",
}


@pytest.mark.parametrize(
    ("case", "via"),
    [
        (case, via)
        for case in CASES
        for via in ("same path", "symbolic link", "hard link")
        if not (via == "hard link" and case in DIRECTORY_CASES)
    ],
)
def test_an_output_that_is_an_input_is_refused_even_with_force(tmp_path, case, via):
    make, command, flag, named = CASES[case]
    read = make(tmp_path)
    before = read.read_bytes()
    args = command(read)
    directory = read.parent != tmp_path  # the output is a directory: report, sweep
    assert directory == (case in DIRECTORY_CASES)
    if via != "same path":  # the output given through a link to the input (or its directory)
        given = read.parent if directory else read
        link = tmp_path / ("linked" if directory else "link" + read.suffix)
        if via == "hard link":
            os.link(given, link)
        else:
            link.symlink_to(given)
        args[max(i for i, a in enumerate(args) if a == given)] = link
    r = invoke(*args)
    even = "" if case.startswith(("bench", "sweep")) else ", even with --force"  # no --force
    line = one_line_exit_2(r, f"{flag}: ", "is the input " + named, "the command reads" + even)
    assert read.read_bytes() == before, line
    assert not leftovers(read.parent)


# schedule --out with nothing to write: exit 2, the old file as it was.


@pytest.mark.parametrize("exists", [True, False])
def test_schedule_out_with_no_config_to_write_exits_2_and_keeps_the_old_file(tmp_path, exists):
    out = tmp_path / "config.json"
    old = b'{"num_speculative_tokens": 3}\n'  # a stale config a pipeline would deploy
    if exists:
        out.write_bytes(old)
    r = invoke("schedule", *NEVER_PAYS, "--engine", "vllm", "--out", out, "--force")
    line = one_line_exit_2(r, "--out: no config to write", "no k beats plain decoding")
    assert "Wrote" not in r.output
    if exists:
        assert out.read_bytes() == old and "is left as it was" in line
    else:
        assert not out.exists() and "nothing written" in line
    assert not leftovers(tmp_path)


def test_schedule_out_for_sglang_at_one_k_says_the_flags_are_printed_without_it(tmp_path):
    out = tmp_path / "adaptive.json"
    r = invoke(
        "schedule",
        "--cost-curve",
        CURVE,
        "--alpha",
        0.8,
        "--draft-step-ms",
        0.5,
        "--max-k",
        8,
        "--max-batch",
        46,
        "--min-gain",
        1,
        "--engine",
        "sglang",
        "--out",
        out,
    )
    one_line_exit_2(r, "--out: no config to write", "no schedule is needed", "without --out")
    assert not out.exists()


# A full disk: one line naming the flag and the path, exit 2, nothing under the final name.


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


NO_SPACE = os.strerror(errno.ENOSPC)


class TestFullDisk:
    def test_ingest_out(self, tmp_path, monkeypatch):
        out = tmp_path / "runs.csv"
        monkeypatch.setattr(atomic, "_publish", _full)
        r = invoke("ingest", BASE_LOG, "--out", out)
        one_line_exit_2(r, "--out: cannot write", repr(str(out)), NO_SPACE)
        assert not out.exists() and not leftovers(tmp_path)

    def test_ingest_append_to_a_file(self, tmp_path, monkeypatch):
        out = tmp_path / "runs.csv"
        ingest(BASE_LOG, "--out", out)
        before = out.read_bytes()
        real_write = os.write

        def write(fd, data):  # the disk fills half way through the rows
            if len(data) > 50 and os.fstat(fd).st_ino == out.stat().st_ino:
                real_write(fd, bytes(data[:50]))
                raise OSError(errno.ENOSPC, NO_SPACE)
            return real_write(fd, data)

        monkeypatch.setattr(os, "write", write)
        r = invoke("ingest", SPEC_LOG, "--out", out, "--append")
        one_line_exit_2(r, "--out: cannot add rows to", repr(str(out)), NO_SPACE, "as it was")
        assert out.read_bytes() == before and not leftovers(tmp_path)

    def test_ingest_append_to_a_new_file(self, tmp_path, monkeypatch):
        out = tmp_path / "runs.csv"
        monkeypatch.setattr(os, "fsync", _full)
        r = invoke("ingest", SPEC_LOG, "--out", out, "--append")
        one_line_exit_2(r, "--out: cannot add rows to", repr(str(out)), NO_SPACE)
        assert not out.exists() and not leftovers(tmp_path)

    def test_compare_report(self, tmp_path, monkeypatch):
        report = tmp_path / "report"
        monkeypatch.setattr(atomic, "_publish", _full)
        r = invoke("compare", BASE_LOG, SPEC_LOG, "-k", 3, "--report", report)
        one_line_exit_2(r, "--report: cannot write", repr(str(report)), NO_SPACE)
        assert not (report / "report.html").exists() and not leftovers(report)

    @pytest.mark.parametrize("fills", ["fsync", "_publish"])
    def test_fleet_out(self, tmp_path, monkeypatch, fills):
        """fleet's steps are streamed to --out as Prometheus answers; a disk full when they are
        flushed (``fsync``) or put in place (``_publish``) is one line naming --out (it named
        the writer's own argument, ``path``), and nothing is left."""
        from test_fleet_hostile import STEADY, FakePrometheus, fleet, vllm_server

        out = tmp_path / "fleet.csv"
        monkeypatch.setattr(os if fills == "fsync" else atomic, fills, _full)
        with FakePrometheus(vllm_server(lambda name, t: STEADY[name])) as server:
            r = fleet(server.url, "--out", out)
        one_line_exit_2(r, "--out: cannot write", repr(str(out)), NO_SPACE)
        assert not out.exists() and not leftovers(tmp_path)

    @pytest.mark.parametrize("command", ["fit", "schedule", "report"])
    def test_out_of_the_other_writers(self, tmp_path, monkeypatch, command):
        out = tmp_path / ("r" if command == "report" else "out.json")
        args = {
            "fit": ["fit", PUBLISHED],
            "schedule": ["schedule", "--cost-curve", CURVE, "--alpha", 0.7, "--engine", "vllm"],
            "report": ["report", CASE_CSV],
        }[command]
        monkeypatch.setattr(atomic, "_publish", _full)
        r = invoke(*args, "--out", out)
        one_line_exit_2(r, "--out: cannot write", repr(str(out)), NO_SPACE)
        written = out / "report.html" if command == "report" else out
        assert not written.exists() and not leftovers(tmp_path)


def test_the_library_raises_for_no_config_only_when_asked(tmp_path):
    from breakeven import BreakevenError
    from breakeven.jobs.schedules import schedule_from_files

    out = tmp_path / "config.json"
    out.write_text("stale\n")
    inputs = dict(cost_curve=str(CURVE), alpha=0.1, draft_step_ms=5.0, k_max=4)
    data = schedule_from_files(engine="vllm", out=str(out), force=True, **inputs)
    assert data["config"] is None and out.read_text() == "stale\n"  # as a sweep's answer asks
    with pytest.raises(BreakevenError) as info:
        schedule_from_files(engine="vllm", out=str(out), force=True, require_config=True, **inputs)
    assert info.value.names == ("out",) and out.read_text() == "stale\n"
