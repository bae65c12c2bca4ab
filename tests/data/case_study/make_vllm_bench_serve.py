"""Write the case study's two ``vllm bench serve --save-result`` JSONs (run once; committed).

CONSTRUCTED, not engine output: the project's source documents (shared/seeds/) report the case
study's runs only as figures, from SGLang: a 62.9 tok/s baseline and EAGLE-3 with 3 draft tokens
at 75.9 tok/s, concurrency 1, accept_len about 2.1.  These files put those figures in the shape
``vllm bench serve --save-result`` writes: the keys of the ``result`` dict that
vllm/benchmarks/serve.py builds (commit 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1: ``duration``,
``completed``, ..., the ``spec_decode_*`` deltas of the server's counters, and the
``mean/median/std/p99`` of ttft, tpot, itl and e2el), plus the run's metadata that its ``main``
adds (``date``, ``endpoint_type``, ``backend``, ``label``, ``model_id``, ``tokenizer_id``,
``num_prompts``, ``request_rate``, ``burstiness``, ``max_concurrency``).  Per request, TPOT is
``(latency - ttft) / (output_len - 1)``, as vLLM computes it; under speculation a streamed chunk
carries about accept_len tokens, so the ITLs are chunk gaps of about accept_len x TPOT.

    python tests/data/case_study/make_vllm_bench_serve.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REQUESTS, OUTPUT_LEN, INPUT_LEN = 8, 256, 298


def result(label: str, tok_s: float, accept_len: float | None, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    tpot_s = 1.0 / (tok_s * (1 + rng.normal(0, 0.004, REQUESTS)))
    tpot_s *= (1.0 / tok_s) / tpot_s.mean()  # the mean TPOT is the run's figure exactly
    ttfts = 0.120 + rng.normal(0, 0.004, REQUESTS)
    latencies = ttfts + tpot_s * (OUTPUT_LEN - 1)
    per_chunk = accept_len or 1.0
    chunks = round((OUTPUT_LEN - 1) / per_chunk)
    itls = [list(np.full(chunks, t * (OUTPUT_LEN - 1) / chunks)) for t in tpot_s]
    starts = np.cumsum(np.r_[0.0, latencies[:-1]])
    duration = float(latencies.sum())
    out = {
        "date": "20260226-170210",
        "endpoint_type": "openai-chat",
        "backend": "openai-chat",
        "label": label,
        "model_id": "moonshotai/Kimi-K2.5",
        "tokenizer_id": "moonshotai/Kimi-K2.5",
        "num_prompts": REQUESTS,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 1,
        "duration": duration,
        "completed": REQUESTS,
        "failed": 0,
        "total_input_tokens": REQUESTS * INPUT_LEN,
        "total_output_tokens": REQUESTS * OUTPUT_LEN,
        "request_throughput": REQUESTS / duration,
        "request_goodput": None,
        "output_throughput": REQUESTS * OUTPUT_LEN / duration,
        "total_token_throughput": REQUESTS * (INPUT_LEN + OUTPUT_LEN) / duration,
        "input_lens": [INPUT_LEN] * REQUESTS,
        "output_lens": [OUTPUT_LEN] * REQUESTS,
        "ttfts": list(ttfts),
        "itls": itls,
        "latencies": list(latencies),
        "start_times": list(starts),
        "queue_times": [0.0] * REQUESTS,
        "generated_texts": [""] * REQUESTS,
        "errors": [""] * REQUESTS,
        "max_output_tokens_per_s": float(per_chunk / tpot_s.min()),
        "max_concurrent_requests": 1,
        "rtfx": 0.0,
    }
    if accept_len is not None:
        per_position = [605, 322, 146]  # accepted at each of the 3 draft positions
        accepted = sum(per_position)
        drafts = round(accepted / (accept_len - 1))
        out.update(
            {
                "spec_decode_acceptance_rate": 100.0 * accepted / (3 * drafts),
                "spec_decode_acceptance_length": 1 + accepted / drafts,
                "spec_decode_num_drafts": drafts,
                "spec_decode_draft_tokens": 3 * drafts,
                "spec_decode_accepted_tokens": accepted,
                "spec_decode_per_position_acceptance_rates": [a / drafts for a in per_position],
            }
        )
    for name, values in (
        ("ttft", ttfts),
        ("tpot", tpot_s),
        ("itl", np.concatenate(itls)),
        ("e2el", latencies),
    ):
        ms = np.asarray(values) * 1000
        out.update(
            {
                f"mean_{name}_ms": float(ms.mean()),
                f"median_{name}_ms": float(np.median(ms)),
                f"std_{name}_ms": float(ms.std()),
                f"p99_{name}_ms": float(np.percentile(ms, 99)),
            }
        )
    return out


if __name__ == "__main__":
    for name, args in (
        ("vllm_bench_serve_baseline.json", ("baseline", 62.9, None, 1)),
        ("vllm_bench_serve_eagle3_k3.json", ("eagle3-k3", 75.9, 2.1, 2)),
    ):
        (HERE / name).write_text(json.dumps(result(*args), indent=2) + "\n")
        print(HERE / name)
