"""Accelerators by their datasheets, and the free-text hardware strings runs carry read as one.

Pure data and string reading, no I/O.  Every number in :data:`ACCELERATORS` was checked
against the page its ``source`` names; a number that could not be checked is left out (a
``peak_tflops`` without an entry for a dtype, or an accelerator not in the table), never
guessed.  Peaks are dense (no 2:4 sparsity): where a datasheet gives only "with sparsity"
figures (H200), the dense peak is half of them, as NVIDIA's footnotes define them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class Accelerator:
    """One accelerator, as its datasheet gives it."""

    name: str
    memory_bw_gbs: float
    """Peak memory bandwidth [GB/s, 1e9 bytes a second]."""
    peak_tflops: Mapping[str, float] = field(default_factory=dict)
    """Dense peak [TFLOPs, 1e12 a second] by dtype: fp32, tf32, bf16, fp16, fp8, fp4, int8
    (TOPs), where the datasheet gives them."""
    memory_gib: float = 0.0
    """Memory as the datasheet states it (its "GB"; HBM capacities are GiB)."""
    source: str = ""
    """The page the numbers were checked against (the vendor's datasheet where one was found)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "peak_tflops", MappingProxyType(dict(self.peak_tflops)))


_A100_DATASHEET = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_A100_PEAKS = {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0}
"""A100's dense peaks, the same for every A100 (Glenn Lockwood's table of the datasheet)."""

_H100_PEAKS = {
    "fp32": 66.9,
    "tf32": 494.7,
    "bf16": 989.4,
    "fp16": 989.4,
    "fp8": 1978.9,
    "int8": 1978.9,
}
"""H100 SXM's dense peaks (https://glennklockwood.com/garden/processors/h100, from NVIDIA's
Hopper whitepaper)."""

_TABLE = (
    Accelerator(
        "NVIDIA H100 SXM",
        3350.0,
        _H100_PEAKS,
        80,
        "https://glennklockwood.com/garden/processors/h100",
    ),
    Accelerator(
        "NVIDIA H100 PCIe",
        2000.0,
        {},
        80,
        "https://manuals.plus/m/d4b5dc21484df3ba8fbe84918338461cc074a3fcebcc13423eadc2b10ac3bda4",
    ),
    Accelerator(
        "NVIDIA H200",
        4800.0,
        {"bf16": 989.5, "fp16": 989.5, "fp8": 1979.0, "int8": 1979.0},
        141,
        "https://www.morphllm.com/nvidia-h200",
    ),
    Accelerator("NVIDIA A100 SXM 80GB", 2039.0, _A100_PEAKS, 80, _A100_DATASHEET),
    Accelerator("NVIDIA A100 SXM 40GB", 1555.0, _A100_PEAKS, 40, _A100_DATASHEET),
    Accelerator("NVIDIA A100 PCIe 80GB", 1935.0, _A100_PEAKS, 80, _A100_DATASHEET),
    Accelerator("NVIDIA A100 PCIe 40GB", 1555.0, _A100_PEAKS, 40, _A100_DATASHEET),
    Accelerator(
        "NVIDIA A30",
        933.0,
        # GA100 like the A100: 56 SMs at a 1440 MHz boost against the A100's 108 at 1410 give
        # 312 x 56 x 1440 / (108 x 1410) = 165.2 dense BF16/FP16 TFLOPs, the datasheet's
        # "165 TF" (330 with sparsity).
        {"bf16": 165.0, "fp16": 165.0},
        24,
        "https://resources.nvidia.com/en-us-gpu-resources/a30-datasheet (bandwidth); dense "
        "peaks scaled from the A100 datasheet by SMs and boost clock",
    ),
    Accelerator(
        "NVIDIA A10",
        600.0,
        {},
        24,
        "https://resources.nvidia.com/en-us-gpu-resources/a10-datasheet-nvidia",
    ),
    Accelerator("NVIDIA A10G", 600.0, {}, 24, "https://aws.amazon.com/ec2/instance-types/g5/"),
    Accelerator(
        "NVIDIA L4",
        300.0,
        {},
        24,
        "https://resources.nvidia.com/en-us-gpu-resources/l4-tensor-datasheet",
    ),
    Accelerator(
        "NVIDIA L40",
        864.0,
        {"fp32": 90.5, "tf32": 90.5, "bf16": 181.05, "fp16": 181.05, "fp8": 362.0, "int8": 362.0},
        48,
        "https://www.mullet.se/product.html?product_id=355414",
    ),
    Accelerator(
        "NVIDIA L40S",
        864.0,
        {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0},
        48,
        "https://www.mullet.se/product.html?product_id=355414",
    ),
    Accelerator(
        "NVIDIA Tesla V100 SXM2",
        900.0,
        {"fp16": 125.0},
        32,
        "https://developer.nvidia.com/programming-tensor-cores-cuda-9-0",
    ),
    Accelerator(
        "NVIDIA Tesla V100 PCIe",
        900.0,
        {"fp32": 14.0, "fp16": 112.0},
        32,
        "https://www.io-tech.fi/uutinen/nvidia-esitteli-tesla-v100-pci-express-kiihdyttimen-tieteelliseen-laskentaan/",
    ),
    Accelerator(
        "NVIDIA T4",
        320.0,
        {"fp32": 8.141},
        16,
        "https://sysrqmts.com/gpus/compare/nvidia-a100-sxm4-40-gb-vs-nvidia-tesla-t4",
    ),
    Accelerator(
        "NVIDIA B200 (HGX)",
        8000.0,
        {
            "fp32": 80.0,
            "tf32": 1100.0,
            "bf16": 2250.0,
            "fp16": 2250.0,
            "fp8": 4500.0,
            "fp4": 9000.0,
            "int8": 4500.0,
        },
        180,
        "https://glennklockwood.com/garden/processors/B200",
    ),
    Accelerator(
        "NVIDIA RTX PRO 6000 Blackwell",
        1792.0,
        {},
        96,
        "https://gpu.name/posts/nvidia-unveils-rtx-pro-6000-blackwell-gpu-with-24-064-cores-and-96gb-memory",
    ),
    Accelerator(
        "NVIDIA GeForce RTX 5090",
        1792.0,
        {"fp32": 104.0},
        32,
        "https://pocketmags.com/linux-format-magazine/may-2025/articles/nvidia-geforce-rtx-5090",
    ),
    Accelerator(
        "NVIDIA GeForce RTX 5060 Ti 16GB",
        448.0,
        {},
        16,
        "https://utechway.com/nvidia-confirms-rtx-5060-series-specs",
    ),
    Accelerator(
        "NVIDIA GeForce RTX 4090",
        1008.0,
        {},
        24,
        "https://www.sipoch.com/en/articles/300330022705642",
    ),
    Accelerator(
        "NVIDIA GeForce RTX 4070",
        504.0,
        {},
        12,
        "https://guru3d.com/story/rumored-nvidia-rtx-5090-specs-cores-gddr7-memory-and-bandwidth",
    ),
    Accelerator(
        "NVIDIA GeForce RTX 3080 10GB",
        760.0,
        {},
        10,
        "https://www.itcreations.com/nvidia-gpu/nvidia-geforce-rtx-3080-gpu",
    ),
    Accelerator(
        "NVIDIA GeForce RTX 3090",
        936.0,
        {"fp32": 35.7},
        24,
        "https://fudzilla.net/news/graphics/51457-nvidia-rtx-30-series-specifications-are-now-official",
    ),
    Accelerator(
        "AMD Instinct MI300X",
        5300.0,
        {},
        192,
        "https://www.jaredwatkins.com/research/ai-accelerators/amd-instinct/mi300-series/",
    ),
    Accelerator(
        "AMD Instinct MI355X",
        8000.0,
        # AMD at ISSCC 2026: 256 CUs of 8,192 FP8 FLOPs a clock at 2.4 GHz, "five petaflops".
        {"fp8": 5033.0},
        288,
        "https://boston-uk-l.azurewebsites.net/blog/2025/08/14/amd-instinct-mi355x.aspx "
        "(bandwidth); https://www.world-today-news.com/?p=7253162 (FP8, AMD's ISSCC talk)",
    ),
    Accelerator(
        "AMD Radeon RX 7900 XTX",
        960.0,
        {},
        24,
        "https://gajed.com/pk/product/sapphire-pulse-rx-7900-xtx-oc-24gb-graphics-card/",
    ),
)

ACCELERATORS: Mapping[str, Accelerator] = MappingProxyType({a.name: a for a in _TABLE})
"""Every accelerator whose datasheet numbers were checked, by name."""

_NAMES: tuple[tuple[str, str], ...] = (
    (r"mi355x", "AMD Instinct MI355X"),
    (r"mi300x", "AMD Instinct MI300X"),
    (r"7900 ?xtx", "AMD Radeon RX 7900 XTX"),
    (r"rtx pro 6000", "NVIDIA RTX PRO 6000 Blackwell"),
    (r"\bb200\b", "NVIDIA B200 (HGX)"),
    (r"\bh200\b", "NVIDIA H200"),
    (r"\bh100\b.*\bpcie\b", "NVIDIA H100 PCIe"),
    (r"\bh100\b(?!.*\bnvl\b)", "NVIDIA H100 SXM"),
    (r"\ba100\b.*\bpcie\b.*\b40 ?gb\b|\ba100\b.*\b40 ?gb\b.*\bpcie\b", "NVIDIA A100 PCIe 40GB"),
    (r"\ba100\b.*\bpcie\b", "NVIDIA A100 PCIe 80GB"),
    (r"\ba100\b.*\b40 ?gb\b", "NVIDIA A100 SXM 40GB"),
    (r"\ba100\b", "NVIDIA A100 SXM 80GB"),
    (r"\ba30\b", "NVIDIA A30"),
    (r"\ba10g\b", "NVIDIA A10G"),
    (r"\ba10\b", "NVIDIA A10"),
    (r"\bl40s\b", "NVIDIA L40S"),
    (r"\bl40\b", "NVIDIA L40"),
    (r"\bl4\b", "NVIDIA L4"),
    (r"\bv100\b.*\bsxm", "NVIDIA Tesla V100 SXM2"),
    (r"\bv100\b", "NVIDIA Tesla V100 PCIe"),
    (r"\bt4\b", "NVIDIA T4"),
    (r"\b5090\b", "NVIDIA GeForce RTX 5090"),
    (r"\b5060 ?ti\b.*\b16 ?gb\b|\b5060 ?ti\b(?!.*\b8 ?gb\b)", "NVIDIA GeForce RTX 5060 Ti 16GB"),
    (r"\b4090\b", "NVIDIA GeForce RTX 4090"),
    (r"\b4070\b(?! ?ti)(?! ?super)", "NVIDIA GeForce RTX 4070"),
    (r"\b3090\b(?! ?ti)", "NVIDIA GeForce RTX 3090"),
    (r"\b3080\b(?! ?ti)(?!.*\b12 ?gb\b)", "NVIDIA GeForce RTX 3080 10GB"),
)
"""Patterns over the normalised hardware text (lower case, ``-`` and ``_`` as spaces), most
specific first, and the accelerator each names.  Choices where the text leaves the variant
open: "H100" alone is the SXM part (nvidia-smi names it ``H100 80GB HBM3``; the PCIe card says
``PCIe``); "A100" alone is the 80GB SXM4 part, the variant 8-GPU servers and clouds mostly
deploy; "V100" without ``SXM`` is the PCIe card (its bandwidth is the SXM2 part's 900 GB/s,
only its peak is lower); an RTX 5060 Ti without a size is the 16GB card (the 8GB card has
the same 448 GB/s)."""

_NOT_ALONE = re.compile(r"\+\s*cpu|cpu[ -]?moe|cpu experts|\+\s*\d+\s*gb\s+ram|not stated|laptop")
"""Hardware where the accelerator is not the whole story (experts or layers run from host
memory, a laptop part of unstated clocks) or not said: no accelerator is read."""

_COUNTS = (
    re.compile(r"(?:^|[\s(=,])(\d{1,4})\s*x\s"),  # "8x A30", "8 x H100"
    re.compile(r"[a-z0-9]x(\d{1,4})\b"),  # "H100x8"
    re.compile(r"\btp\s*=?\s*(\d{1,4})\b"),  # "TP8", "TP=4"
)
"""Where a device count is written: ``8x`` before the name, ``x8`` after it, or a tensor
parallel size (``TP8``: the weights are sharded over 8 devices)."""


def _normal(hardware: str) -> str:
    """``hardware`` in lower case with ``-``, ``_`` and ``/`` as spaces, spaces collapsed."""
    return " ".join(re.sub(r"[-_/]", " ", hardware.lower()).split())


def _device_count(text: str) -> int:
    """The device count ``text`` (normalised) writes, 1 where it writes none."""
    for pattern in _COUNTS:
        found = pattern.search(text)
        if found and int(found[1]) >= 1:
            return int(found[1])
    return 1


def accelerator_of(hardware: str) -> tuple[Accelerator, int] | None:
    """The accelerator a run's free-text ``hardware`` names, and how many of them.

    Reads what runs and engines write: ``1x NVIDIA A30 24GB per endpoint``, ``8x AMD
    MI355X, TP8``, ``NVIDIA H100 80GB HBM3`` (nvidia-smi), ``Tesla V100-SXM2-32GB``,
    ``gpu=H100x8``, ``TP4 A100``.  The count is ``8x`` before the name, ``x8`` after it or the
    tensor-parallel size (``TP8`` shards the weights over 8 devices, so bandwidth and peak add
    up), 1 where none is written.  Where the text leaves the variant open, the choice is the
    one :data:`_NAMES` documents (A100: the 80GB SXM part; H100: SXM).

    Returns None for hardware not in :data:`ACCELERATORS`, and for hardware whose model runs
    partly from host memory (``+ CPU experts``, ``--cpu-moe``, ``+ 64GB RAM``), a laptop
    part, or text that says the hardware is not stated: a datasheet's roofline does not
    describe those.
    """
    if not isinstance(hardware, str):
        return None
    text = _normal(hardware)
    if not text or _NOT_ALONE.search(text):
        return None
    named = re.sub(r"(?<=[a-z0-9])x(?=\d)", " x", text)  # "h100x8": the name apart
    for pattern, name in _NAMES:
        if re.search(pattern, named):
            return ACCELERATORS[name], _device_count(text)
    return None
