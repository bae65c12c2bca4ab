"""breakeven bench against an SGLang-shaped streaming server: a request's drafts come from the
``sglext.spec_tokens_details`` chunk SGLang streams when asked with
``return_spec_tokens_details`` (sgl-project/sglang PR 33518), which bench asks only of a server
it knows for SGLang (its ``/get_server_info``)."""

import csv
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from breakeven.bench.config import Config
from breakeven.bench.session import run_bench
from breakeven.iotools.replies import reply_drafts

# One request's spec_tokens_details as SGLang returned it, pasted by ormandj on
# https://github.com/sgl-project/sglang/pull/33518 (2026-08-07: DeepSeek-V4-Flash, DSpark block
# size 5, completion_tokens 106): 43 verify forwards, 63 of 215 drafts accepted.
COMPLETION_TOKENS = 106
SPEC_TOKENS_DETAILS = {
    "spec_accept_rate": 0.2930232558139535,
    "spec_accept_length": 2.4651162790697674,
    "spec_num_correct_drafts": 63,
    "spec_num_proposed_drafts": 215,
    "spec_verify_ct": 43,
    "spec_correct_drafts_histogram": [11, 14, 11, 4, 0, 3],
}


def _cycles() -> list[int]:
    """The tokens of each verify forward the histogram holds (1 + the drafts it accepted), as
    the server streams them: one chunk a forward."""
    histogram = SPEC_TOKENS_DETAILS["spec_correct_drafts_histogram"]
    return [1 + j for j, n in enumerate(histogram) for _ in range(n)]


class SGLangLike:
    """A server that streams as SGLang's OpenAI layer does
    (python/sglang/srt/entrypoints/openai/serving_chat.py ``_generate_chat_stream`` and
    serving_completions.py ``_generate_completion_stream``): content chunks with usage
    (``continuous_usage_stats``), a finish chunk, then, when the request asked with
    ``return_spec_tokens_details``, a chunk with no choices whose ``sglext`` holds
    ``spec_tokens_details``, then the usage chunk and ``[DONE]``.  With ``sglang`` false it
    says it is vLLM (``/version``) and has no ``/get_server_info``."""

    def __init__(self, sglang: bool = True) -> None:
        self.sglang = sglang
        self.bodies: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _json(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._json(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})
                elif self.path == "/get_server_info" and outer.sglang:
                    self._json(200, {"version": "0.5.21", "speculative_algorithm": "EAGLE"})
                elif self.path == "/version" and not outer.sglang:
                    self._json(200, {"version": "0.11.0"})
                else:
                    self._json(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                chat = self.path == "/v1/chat/completions"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                head = {
                    "id": "4f099bcb459f4f429fd04900425deb00",
                    "object": "chat.completion.chunk" if chat else "text_completion",
                    "created": int(time.time()),
                    "model": "m",
                }

                def send(chunk: dict) -> None:
                    self.wfile.write(f"data: {json.dumps({**head, **chunk})}\n\n".encode())
                    self.wfile.flush()

                def usage(n: int) -> dict:
                    return {"prompt_tokens": 7, "total_tokens": 7 + n, "completion_tokens": n}

                def choice(text: str, finish: str | None = None) -> dict:
                    if chat:
                        delta = {"delta": {"content": text} if text else {}}
                    else:
                        delta = {"text": text, "matched_stop": None}
                    return {"index": 0, **delta, "logprobs": None, "finish_reason": finish}

                sent = 0
                for n in _cycles():
                    time.sleep(0.002)
                    sent += n
                    send({"choices": [choice("x" * n)], "usage": usage(sent)})
                send({"choices": [choice("", "length")], "usage": None})
                if body.get("return_spec_tokens_details") and outer.sglang:
                    sglext = {"spec_tokens_details": SPEC_TOKENS_DETAILS}
                    send({"choices": [], "usage": None, "sglext": sglext})
                send({"choices": [], "usage": usage(sent)})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "SGLangLike":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _client_rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["origin"] == "client"]


@pytest.mark.parametrize("chat", [False, True])
def test_sglang_spec_tokens_details_give_each_request_its_drafts(tmp_path, chat):
    out = tmp_path / "r.csv"
    with SGLangLike() as server:
        run_bench(
            Config(url=server.url, label="s", max_tokens=COMPLETION_TOKENS, requests=2, chat=chat),
            out,
        )
    assert all(b["return_spec_tokens_details"] is True for b in server.bodies)
    got = _client_rows(out)
    assert len(got) == 2
    for r in got:
        assert r["engine"] == "sglang"
        assert r["completion_tokens"] == str(COMPLETION_TOKENS)
        assert r["accepted_tokens"] == "63" and r["draft_tokens"] == "215"
        assert r["num_drafts"] == "43" and r["acceptance_histogram"] == "11;14;11;4;0;3"
        # 1 + accepted / verify forwards: SGLang's own spec_accept_length (106 / 43, bonus
        # token included) and spec_accept_rate (63 / 215).
        assert float(r["accept_len"]) == pytest.approx(SPEC_TOKENS_DETAILS["spec_accept_length"])
        assert float(r["acceptance_rate"]) == pytest.approx(SPEC_TOKENS_DETAILS["spec_accept_rate"])


def test_the_flag_goes_only_to_a_server_known_for_sglang(tmp_path):
    out = tmp_path / "r.csv"
    with SGLangLike(sglang=False) as server:
        run_bench(Config(url=server.url, label="v", max_tokens=COMPLETION_TOKENS, requests=1), out)
    assert server.bodies and all("return_spec_tokens_details" not in b for b in server.bodies)
    (r,) = _client_rows(out)
    assert r["engine"] == "vllm"
    assert r["accepted_tokens"] == "" and r["num_drafts"] == "" and r["accept_len"] == ""


def test_drafted_reads_a_list_of_details_one_per_choice():
    # SGLang sends a list where the request asked n > 1 choices (serving_chat.py: spec_details
    # if request.n > 1 else spec_details[0]); bench asks one, the first is its.
    chunk = {"choices": [], "sglext": {"spec_tokens_details": [SPEC_TOKENS_DETAILS]}}
    drafts = reply_drafts(chunk)
    assert (drafts.drafted, drafts.accepted, drafts.steps) == (215, 63, 43)
    assert drafts.histogram == "11;14;11;4;0;3" and drafts.k is None
    assert reply_drafts({"choices": [], "sglext": {"spec_tokens_details": []}}).drafted is None
