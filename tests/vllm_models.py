"""Tiny Hugging Face models for a real vLLM server (tests/test_vllm.py), made offline.

Run it with the vLLM venv's python, which has torch, transformers and tokenizers (the test venv
has none of them)::

    $VLLM_VENV/bin/python tests/vllm_models.py OUTDIR

It writes, in bf16, in a few seconds, five model directories under OUTDIR, each with the same
tokenizer, and prints their paths as JSON:

- ``target``: a Llama of 8 blocks, 256 wide, random weights;
- ``draft``: the target's first 2 blocks, with the same embeddings, final norm and head.  The
  target's later blocks add to the residual stream through their output projections
  (``o_proj``, ``down_proj``), which are scaled by EPS, as in the llama.cpp suite
  (breakeven/iotools/gguf_models.py): the smaller EPS, the more often the target's next token is the
  draft's, and the more drafted tokens it accepts;
- ``eagle3``: a random EAGLE-3 head for the target (``Eagle3LlamaForCausalLM`` in vLLM: one
  block over the target's embeddings and three of its hidden states), accepted about never;
- ``mimo``: a MiMo-style model (``MiMoForCausalLM``, Qwen2 blocks) with one MTP layer, served
  with ``{"method": "mtp"}``, whose draft is that layer (vLLM's ``MiMoMTP``), random too.

The tokenizer is a byte-level BPE trained here with ``tokenizers`` on a text made here from a
fixed seed, wrapped as ``PreTrainedTokenizerFast``: nothing is fetched from a hub.  Its
end-of-sequence token's row of every output head is zero, so that greedy decoding (whose other
logits' maximum is positive) never ends a request early.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, PreTrainedTokenizerFast, Qwen2Config

SPECIAL = ["<s>", "</s>", "<unk>"]
BOS, EOS = 0, 1


@dataclass(frozen=True)
class Shape:
    vocab: int = 1024
    hidden: int = 256
    heads: int = 4
    kv_heads: int = 2
    ff: int = 512
    layers: int = 8
    draft_layers: int = 2
    context: int = 2048
    eps: float = 0.05  # the target's blocks past the draft's are scaled by it
    seed: int = 7


def corpus(seed: int = 7, words: int = 60_000) -> list[str]:
    """Lines of made-up words and numbers, the same for a seed: enough for 1,024 BPE tokens."""
    rng = random.Random(seed)
    syllables = [a + b for a in "bcdfghklmnprstvz" for b in "aeiou"] + ["the", "and", "of"]
    lexicon = [
        "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(2000)
    ]
    text, line = [], []
    for _ in range(words):
        r = rng.random()
        line.append(str(rng.randint(0, 999)) if r < 0.05 else rng.choice(lexicon))
        if r > 0.92:
            text.append(" ".join(line) + rng.choice(".,;:!?"))
            line = []
    return text


def tokenizer(shape: Shape) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=shape.vocab,
        special_tokens=SPECIAL,
        # Printable ASCII and the byte-level symbols of space and newline only: no token is
        # part of a character, so every token a random model emits streams as text (with all
        # 256 bytes, a quarter of the streamed chunks held half a character and no text, and
        # vllm bench serve's client, which times chunks with text, read TPOT up to 40% low).
        initial_alphabet=[chr(b) for b in range(0x21, 0x7F)] + ["\u0120", "\u010a"],
        show_progress=False,
    )
    tok.train_from_iterator(corpus(shape.seed), trainer=trainer)
    if tok.get_vocab_size() != shape.vocab:
        raise RuntimeError(f"the BPE has {tok.get_vocab_size()} tokens, not {shape.vocab}")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=shape.context,
    )


class Weights:
    """Random tensors from one seeded generator, scaled by 1/sqrt(fan-in)."""

    def __init__(self, seed: int) -> None:
        self.gen = torch.Generator().manual_seed(seed)

    def dense(self, rows: int, cols: int, scale: float = 1.0) -> torch.Tensor:
        w = torch.randn(rows, cols, generator=self.gen) * (scale / cols**0.5)
        return w.to(torch.bfloat16)

    def vector(self, n: int, scale: float = 0.02) -> torch.Tensor:
        return (torch.randn(n, generator=self.gen) * scale).to(torch.bfloat16)

    @staticmethod
    def ones(n: int) -> torch.Tensor:
        return torch.ones(n, dtype=torch.bfloat16)


def block(w: Weights, shape: Shape, prefix: str, scale: float, *, bias: bool = False, q_in=None):
    """One Llama/Qwen2 decoder block's tensors; ``scale`` multiplies its output projections."""
    h, f = shape.hidden, shape.ff
    head = h // shape.heads
    kv = head * shape.kv_heads
    q_in = q_in or h
    out = {
        f"{prefix}.input_layernorm.weight": w.ones(h),
        f"{prefix}.self_attn.q_proj.weight": w.dense(h, q_in),
        f"{prefix}.self_attn.k_proj.weight": w.dense(kv, q_in),
        f"{prefix}.self_attn.v_proj.weight": w.dense(kv, q_in),
        f"{prefix}.self_attn.o_proj.weight": w.dense(h, h, scale),
        f"{prefix}.post_attention_layernorm.weight": w.ones(h),
        f"{prefix}.mlp.gate_proj.weight": w.dense(f, h),
        f"{prefix}.mlp.up_proj.weight": w.dense(f, h),
        f"{prefix}.mlp.down_proj.weight": w.dense(h, f, scale),
    }
    if bias:
        for name, n in (("q_proj", h), ("k_proj", kv), ("v_proj", kv)):
            out[f"{prefix}.self_attn.{name}.bias"] = w.vector(n)
    return out


def head(w: Weights, shape: Shape) -> torch.Tensor:
    """An output head whose end-of-sequence row is zero (see the module's docstring)."""
    lm = w.dense(shape.vocab, shape.hidden, 4.0)
    lm[EOS] = 0
    return lm


def common(shape: Shape) -> dict:
    return {
        "vocab_size": shape.vocab,
        "hidden_size": shape.hidden,
        "intermediate_size": shape.ff,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "max_position_embeddings": shape.context,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "torch_dtype": "bfloat16",
    }


def save(path: Path, config, tensors: dict, tok: PreTrainedTokenizerFast) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(path)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path / "model.safetensors"))
    tok.save_pretrained(path)
    return path


def llama_pair(out: Path, shape: Shape, tok) -> tuple[Path, Path]:
    w = Weights(shape.seed)
    tensors = {
        "model.embed_tokens.weight": (torch.randn(shape.vocab, shape.hidden, generator=w.gen)).to(
            torch.bfloat16
        ),
        "model.norm.weight": w.ones(shape.hidden),
        "lm_head.weight": head(w, shape),
    }
    for i in range(shape.layers):
        scale = 1.0 if i < shape.draft_layers else shape.eps
        tensors.update(block(w, shape, f"model.layers.{i}", scale))
    config = LlamaConfig(num_hidden_layers=shape.layers, **common(shape))
    config.architectures = ["LlamaForCausalLM"]
    target = save(out / "target", config, tensors, tok)
    draft_tensors = {
        k: v
        for k, v in tensors.items()
        if not k.startswith("model.layers.") or int(k.split(".")[2]) < shape.draft_layers
    }
    config = LlamaConfig(num_hidden_layers=shape.draft_layers, **common(shape))
    config.architectures = ["LlamaForCausalLM"]
    draft = save(out / "draft", config, draft_tensors, tok)
    return target, draft


def eagle3(out: Path, shape: Shape, tok) -> Path:
    """An EAGLE-3 head in the layout vLLM's Eagle3LlamaForCausalLM loads: ``midlayer.*`` (one
    block whose attention reads the token's embedding and the fused hidden state, 2 x hidden),
    ``fc`` (3 target hidden states to one), ``norm``, ``lm_head``; the embeddings are the
    target's (none in the checkpoint), and the draft vocabulary is the target's (no ``d2t``)."""
    w = Weights(shape.seed + 1)
    h = shape.hidden
    tensors = block(w, shape, "midlayer", 1.0, q_in=2 * h)
    tensors.update(
        {
            "midlayer.hidden_norm.weight": w.ones(h),
            "fc.weight": w.dense(h, 3 * h),
            "norm.weight": w.ones(h),
            "lm_head.weight": head(w, shape),
        }
    )
    config = LlamaConfig(num_hidden_layers=1, draft_vocab_size=shape.vocab, **common(shape))
    config.architectures = ["LlamaForCausalLM"]  # vLLM names it Eagle3LlamaForCausalLM
    return save(out / "eagle3", config, tensors, tok)


def mimo(out: Path, shape: Shape, tok) -> Path:
    """A MiMo-style model: Qwen2 blocks (biased q/k/v) and one MTP layer, ``model.mtp_layers.0``
    (token and hidden norms, ``input_proj`` of the two, a Qwen2 block, a final norm), which
    vLLM's MiMoForCausalLM skips and its MiMoMTP drafter loads with the shared embeddings and
    head.  The config is a Qwen2 one (transformers knows no ``mimo`` type without remote code)
    with MiMo's architecture and ``num_nextn_predict_layers``."""
    w = Weights(shape.seed + 2)
    h = shape.hidden
    layers = 4
    tensors = {
        "model.embed_tokens.weight": torch.randn(shape.vocab, h, generator=w.gen).to(
            torch.bfloat16
        ),
        "model.norm.weight": w.ones(h),
        "lm_head.weight": head(w, shape),
    }
    for i in range(layers):
        tensors.update(block(w, shape, f"model.layers.{i}", 1.0, bias=True))
    mtp = "model.mtp_layers.0"
    tensors.update(block(w, shape, mtp, 1.0, bias=True))
    tensors.update(
        {
            f"{mtp}.token_layernorm.weight": w.ones(h),
            f"{mtp}.hidden_layernorm.weight": w.ones(h),
            f"{mtp}.input_proj.weight": w.dense(h, 2 * h),
            f"{mtp}.final_layernorm.weight": w.ones(h),
        }
    )
    config = Qwen2Config(num_hidden_layers=layers, num_nextn_predict_layers=1, **common(shape))
    config.architectures = ["MiMoForCausalLM"]
    return save(out / "mimo", config, tensors, tok)


def write_all(out: Path, shape: Shape = Shape()) -> dict[str, str]:
    torch.manual_seed(shape.seed)
    tok = tokenizer(shape)
    target, draft = llama_pair(out, shape, tok)
    made = {
        "target": target,
        "draft": draft,
        "eagle3": eagle3(out, shape, tok),
        "mimo": mimo(out, shape, tok),
    }
    return {name: str(path) for name, path in made.items()}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/vllm_models.py OUTDIR")
    print(json.dumps(write_all(Path(sys.argv[1]))))
