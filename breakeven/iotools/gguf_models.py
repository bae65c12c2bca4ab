"""Tiny llama-architecture GGUF models, made on the spot, for a real llama.cpp server: the
models of ``breakeven demo`` and of the real-engine tests.

Nothing is downloaded and no model file is kept in the repository: the vocabulary is made
here (SentencePiece-style, the 256 byte tokens and three control tokens, so that any prompt
tokenizes), and the weights are random with a fixed seed.

The target has ``layers`` blocks; the draft is its first ``draft_layers`` blocks, with the
same embeddings, final norm and output head.  The target's later blocks add to the residual
stream through their output projections (``attn_output``, ``ffn_down``), which are scaled by
``eps``: at ``eps = 0`` the target computes what the draft computes and every drafted token is
accepted; the larger ``eps``, the more the later blocks change the target's next token, and
the fewer drafted tokens it accepts.

Writing them needs ``gguf`` (the ``engine`` extra).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from breakeven.iotools.atomic import atomic_path


@dataclass(frozen=True)
class TinyLlama:
    """The shape of the tiny models."""

    embd: int = 64
    heads: int = 4
    ff: int = 128
    layers: int = 12
    draft_layers: int = 2
    context: int = 1024
    seed: int = 7


_CONTROL = ["<unk>", "<s>", "</s>"]


def _vocabulary() -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and types: the three control tokens, then <0x00>..<0xFF> (byte tokens,
    type 6), which is all llama.cpp's SentencePiece tokenizer needs to spell any text."""
    tokens = [*_CONTROL, *(f"<0x{b:02X}>" for b in range(256))]
    scores = [0.0] * len(tokens)
    types = [2, 3, 3] + [6] * 256  # unknown, control, control, byte
    return tokens, scores, types


def _weights(shape: TinyLlama, eps: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(shape.seed)
    n_vocab = len(_CONTROL) + 256
    e, f = shape.embd, shape.ff

    def dense(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    out = {
        "token_embd.weight": rng.standard_normal((n_vocab, e)).astype(np.float32),
        "output_norm.weight": np.ones(e, dtype=np.float32),
        "output.weight": dense(n_vocab, e) * 4.0,
    }
    for i in range(shape.layers):
        scale = 1.0 if i < shape.draft_layers else eps
        out.update(
            {
                f"blk.{i}.attn_norm.weight": np.ones(e, dtype=np.float32),
                f"blk.{i}.attn_q.weight": dense(e, e),
                f"blk.{i}.attn_k.weight": dense(e, e),
                f"blk.{i}.attn_v.weight": dense(e, e),
                f"blk.{i}.attn_output.weight": dense(e, e) * scale,
                f"blk.{i}.ffn_norm.weight": np.ones(e, dtype=np.float32),
                f"blk.{i}.ffn_gate.weight": dense(f, e),
                f"blk.{i}.ffn_up.weight": dense(f, e),
                f"blk.{i}.ffn_down.weight": dense(e, f) * scale,
            }
        )
    return out


def weights_mib(shape: TinyLlama, layers: int | None = None) -> float:
    """The size of the weights of the first ``layers`` blocks (default all) [MiB]: F32, 4
    bytes a number."""
    e, f, vocab = shape.embd, shape.ff, len(_CONTROL) + 256
    block = 2 * e + 4 * e * e + 3 * e * f
    numbers = 2 * vocab * e + e + block * (shape.layers if layers is None else layers)
    return numbers * 4 / 2**20


def write_model(
    path: Path, shape: TinyLlama, *, eps: float, layers: int | None = None, name: str = "tiny-llama"
) -> Path:
    """A GGUF of the first ``layers`` blocks (default all) of the model at ``eps``, written
    whole or not at all (to a temporary file beside ``path``, then renamed over it)."""
    with atomic_path(str(path), force=True, name="model") as tmp:
        _write_gguf(Path(tmp), shape, eps, shape.layers if layers is None else layers, name)
    return path


def _write_gguf(path: Path, shape: TinyLlama, eps: float, keep: int, name: str) -> None:
    import gguf  # lazy: the engine extra, needed only to write a model

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.embd)
    writer.add_block_count(keep)
    writer.add_feed_forward_length(shape.ff)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.heads)
    writer.add_rope_dimension_count(shape.embd // shape.heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(0)  # all F32
    tokens, scores, types = _vocabulary()
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    for tensor, value in _weights(shape, eps).items():
        if tensor.startswith("blk.") and int(tensor.split(".")[1]) >= keep:
            continue
        writer.add_tensor(tensor, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_pair(directory: Path, eps: float, shape: TinyLlama = TinyLlama()) -> tuple[Path, Path]:
    """(target, draft) GGUFs for ``eps``, in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    tag = f"{eps:g}".replace(".", "p")
    target = write_model(
        directory / f"target-eps{tag}.gguf", shape, eps=eps, name=f"tiny-llama-eps{tag}"
    )
    draft = write_model(
        directory / f"draft-eps{tag}.gguf",
        shape,
        eps=eps,
        layers=shape.draft_layers,
        name="tiny-llama-draft",
    )
    return target, draft
