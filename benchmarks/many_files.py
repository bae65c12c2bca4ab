"""Speed of ``breakeven ingest`` on many small logs, side by side with the same lines in one log.

N files (default 1000) of a few lines each (default 3) are made of real engine lines, taken
from the fixtures of tests/data/engines/ and tests/data/case_study/: SGLang's Decode batch
lines, vLLM V1's throughput and SpecDecoding metrics lines, llama.cpp's and TensorRT-LLM's
lines; each file holds consecutive lines of one fixture, so what spans lines (a throughput
line and the spec-decode line beside it) stays as the engine printed it.  The one log holds
the same lines, the files' one after the other.  ``breakeven ingest FILES --out CSV`` and
``breakeven ingest LOG --out CSV`` run in this process (``breakeven.cli.main``: no
interpreter start-up in the times) or, with --subprocess, each in a new Python process (as a
user runs them: start-up included), best of --repeat, and the ratio of the two is printed.

Small inputs are read together (:mod:`breakeven.iotools.batch`); ``--per-file`` also times
each input read alone (``batch.SMALL_BYTES = 0``: the scanner reads each file block by
block, as before batching, with the scanner's other savings kept), for a before/after in
one run.  No test asserts these times.

    python benchmarks/many_files.py [--files 1000] [--lines 3] [--repeat 3] [--per-file]
        [--subprocess]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
FIXTURES = (
    "case_study/sglang_eagle3_k3.log",
    "case_study/sglang_baseline.log",
    "engines/sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt",
    "engines/sglang_decode_batch_pr22331_no_spec_comma_format.txt",
    "engines/vllm_v1_specdecoding_pr24127_throughput_format.txt",
    "engines/vllm_v1_specdecoding_issue19254_ngram_qwen3_32b.txt",
    "engines/vllm_v1_windows_club3090_issue105_prefill_then_decode.txt",
    "engines/llamacpp_server_pr24536_eagle3_mean_acceptance_length_format.txt",
    "engines/trtllm_iter_log_pr3914_print_iter_log_before_after.txt",
)
"""Fixtures whose lines the files are made of (their comment lines left out)."""


def fixture_lines() -> list[list[str]]:
    """Each fixture's engine lines (those holding a line kind's marker), less comments."""
    from breakeven.iotools.engines import engines
    from breakeven.iotools.lines import TextScanner

    marked = re.compile(TextScanner("", engines()).marker_pattern)
    out = []
    for name in FIXTURES:
        text = (DATA / name).read_text(encoding="utf-8")
        lines = [
            ln + "\n" for ln in text.splitlines() if marked.search(ln) and not ln.startswith("#")
        ]
        if lines:
            out.append(lines)
    return out


def generate(work: Path, files: int, lines: int, seed: int = 0) -> tuple[list[str], str]:
    """``files`` logs of ``lines`` lines each in ``work``, and one log of all their lines."""
    rng = random.Random(seed)
    sources = fixture_lines()
    (work / "files").mkdir()
    paths, every = [], []
    for i in range(files):
        source = sources[i % len(sources)]
        start = rng.randrange(max(1, len(source) - lines + 1))
        chunk = [source[(start + j) % len(source)] for j in range(lines)]
        path = work / "files" / f"{i:05d}.log"
        path.write_text("".join(chunk), encoding="utf-8")
        paths.append(str(path))
        every += chunk
    one = work / "one.log"
    one.write_text("".join(every), encoding="utf-8")
    return paths, str(one)


# A new process's ingest, with small inputs read together or not (argv[1]: SMALL_BYTES).
_IN_A_PROCESS = (
    "import sys; from breakeven.iotools import batch; batch.SMALL_BYTES = int(sys.argv.pop(1)); "
    "from breakeven.cli import main; main(sys.argv[1:])"
)


def ingest(paths: list[str], out: Path, subprocess_: bool = False) -> None:
    """``breakeven ingest PATHS --out OUT --force``, in this process (or a new one), quietly."""
    if subprocess_:
        from breakeven.iotools import batch

        command = [sys.executable, "-c", _IN_A_PROCESS, str(batch.SMALL_BYTES), "ingest"]
        done = subprocess.run(
            [*command, *paths, "--out", str(out), "--force"], capture_output=True, text=True
        )
        if done.returncode not in (0, 2):
            raise RuntimeError(f"ingest exited with {done.returncode}: {done.stderr}")
        return
    from breakeven.cli import main

    errors = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
        try:
            main(["ingest", *paths, "--out", str(out), "--force"])
        except SystemExit as e:  # exit 2, problems (a file of 3 of a request's 5 lines), is fine
            if e.code not in (0, None) and "problem(s) reading" not in errors.getvalue():
                raise RuntimeError(f"ingest exited with {e.code}: {errors.getvalue()}") from None


def best(paths: list[str], out: Path, repeat: int, subprocess_: bool = False) -> float:
    """The shortest of ``repeat`` runs of :func:`ingest` [s], after one to warm up."""
    ingest(paths, out, subprocess_)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        ingest(paths, out, subprocess_)
        times.append(time.perf_counter() - start)
    return min(times)


def compare(
    paths: list[str], one: str, work: Path, repeat: int, subprocess_: bool = False
) -> tuple[float, float]:
    """Best times of the many files and of the one log (both CSVs hold as many records)."""
    many_s = best(paths, work / "many.csv", repeat, subprocess_)
    one_s = best([one], work / "one.csv", repeat, subprocess_)
    rows = [len((work / name).read_text().splitlines()) for name in ("many.csv", "one.csv")]
    if rows[0] != rows[1]:
        print(f"  (records differ: {rows[0] - 1} from the files, {rows[1] - 1} from one log)")
    return many_s, one_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000, help="small logs (N)")
    parser.add_argument("--lines", type=int, default=3, help="lines in each")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the best counts")
    parser.add_argument(
        "--per-file", action="store_true", help="also time each input read alone (no batch)"
    )
    parser.add_argument(
        "--subprocess", action="store_true", help="run each ingest in a new Python process"
    )
    args = parser.parse_args()
    from breakeven.iotools import batch

    work = Path(tempfile.mkdtemp(prefix="breakeven-many-"))
    try:
        paths, one = generate(work, args.files, args.lines)
        where = "new processes" if args.subprocess else "this process"
        print(
            f"{args.files} files of {args.lines} lines, against the same lines in one log "
            f"(ingest in {where}, best of {args.repeat}):"
        )
        modes = [("read together", batch.SMALL_BYTES)]
        if args.per_file:
            modes.append(("each read alone", 0))
        for name, small in modes:
            batch.SMALL_BYTES = small
            many_s, one_s = compare(paths, one, work, args.repeat, args.subprocess)
            print(
                f"  {name:16s} {args.files} files {many_s:7.3f} s   one log {one_s:7.3f} s   "
                f"ratio {many_s / one_s:6.1f}x"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
