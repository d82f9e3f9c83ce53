"""Scripted OpenAI- and Anthropic-compatible HTTP servers for tests: real sockets on 127.0.0.1, ephemeral ports.

A server is driven by a `script`: a callable `(request_index, path, body_json) -> Reply`, called under a lock so
that concurrent requests are numbered deterministically by arrival. The server records every request (path,
headers, JSON body) and every problem a script reports through `server.fail(...)`, which the test asserts on in its
own thread (an assertion raised inside a handler thread would vanish).
"""
from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict -> JSON; str/bytes -> sent as is (garbage replies)
    delay_s: float = 0.0  # sleep before answering (timeouts)
    headers: dict[str, str] = field(default_factory=dict)
    trickle_s: float = 0.0  # send the body one byte at a time, this long apart (a server that is slow but alive)
    drop_after_s: float | None = None  # say nothing this long, then close the connection without an answer


@dataclass
class Request:
    index: int
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float


Script = Callable[[int, str, dict[str, Any]], Reply]


class ScriptedServer:
    def __init__(self, script: Script):
        self.script = script
        self.requests: list[Request] = []
        self.failures: list[str] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_unparsable": raw.decode(errors="replace")}
                with outer._lock:
                    idx = len(outer.requests)
                    outer.requests.append(Request(idx, self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                                                time.time()))
                    try:
                        reply = outer.script(idx, self.path, body)
                    except Exception as e:  # a broken script must show up in the test, not hang it
                        outer.failures.append(f"script raised on request {idx}: {e!r}")
                        reply = Reply(400, {"error": {"message": f"script error: {e}", "type": "invalid_request"}})
                if reply.drop_after_s is not None:
                    time.sleep(reply.drop_after_s)
                    self.close_connection = True
                    try:
                        self.connection.shutdown(2)  # socket.SHUT_RDWR: the client sees the connection drop
                    except OSError:
                        pass
                    return
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if isinstance(reply.body, (dict, list)):
                    data = json.dumps(reply.body).encode()
                    ctype = "application/json"
                else:
                    data = reply.body.encode() if isinstance(reply.body, str) else (reply.body or b"")
                    ctype = reply.headers.get("content-type", "application/json")
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", ctype)
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        if k.lower() != "content-type":
                            self.send_header(k, v)
                    self.end_headers()
                    if reply.trickle_s:
                        for i in range(len(data)):
                            self.wfile.write(data[i:i + 1])
                            self.wfile.flush()
                            time.sleep(reply.trickle_s)
                    else:
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail(self, msg: str) -> None:
        self.failures.append(msg)

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


# ---- reply builders in each provider's wire format ----

def openai_chat(text: str, *, model: str = "scripted-model", prompt_tokens: int = 100,
                completion_tokens: int = 50) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def anthropic_message(text: str, *, model: str = "scripted-claude", input_tokens: int = 120,
                      output_tokens: int = 60) -> dict[str, Any]:
    return {
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def openai_error(status: int, message: str) -> Reply:
    return Reply(status, {"error": {"message": message, "type": "server_error", "code": None}})


def anthropic_error(status: int, message: str, kind: str = "api_error") -> Reply:
    return Reply(status, {"type": "error", "error": {"type": kind, "message": message}})


def prompt_text(body: dict[str, Any]) -> str:
    """All prompt text in a chat-completions or messages request (system + user), for content checks."""
    parts: list[str] = []
    sys_ = body.get("system")
    if isinstance(sys_, str):
        parts.append(sys_)
    elif isinstance(sys_, list):
        parts += [b.get("text", "") for b in sys_ if isinstance(b, dict)]
    for m in body.get("messages", []):
        c = m.get("content")
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts += [b.get("text", "") for b in c if isinstance(b, dict)]
    return "\n".join(parts)


def kernel_source(tag: str, *, extra: str = "") -> str:
    """A small contract-conforming .cu file whose text carries `tag` (recorded results are looked up by it)."""
    return (
        f"// variant: {tag}\n"
        "#include <cuda_fp16.h>\n"
        "#include <cuda_runtime.h>\n\n"
        "__global__ void k_naive(const half* A, const half* B, half* C, int M, int N, int K) {\n"
        "  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (r >= M || c >= N) return;\n"
        "  float acc = 0.f;\n"
        "  for (int k = 0; k < K; ++k) acc += __half2float(A[r * K + k]) * __half2float(B[k * N + c]);\n"
        "  C[r * N + c] = __float2half(acc);\n"
        "}\n\n"
        f"{extra}"
        'extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,\n'
        "                     int M, int N, int K, cudaStream_t stream) {\n"
        "  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);\n"
        "  k_naive<<<grid, block, 0, stream>>>(A, B, C, M, N, K);\n"
        "  return cudaGetLastError() == cudaSuccess ? 0 : 1;\n"
        "}\n"
    )


# ---- recorded evaluation results: the GPU seam of CPU tests ----

RECORDED_RESULTS = Path(__file__).parent / "golden" / "recorded_results.json"
_TAG = re.compile(r"^// variant: (\S+)", re.MULTILINE)


class RecordedEvaluator:
    """evaluate_fn with evaluator.api.evaluate's signature, answering from results recorded on a GPU.

    The result is chosen by the `// variant: TAG` line of the source. Every call and every finished call is
    appended to `log_path` (one line each, flushed) so tests can prove which evaluations ran, across processes.
    `hang_on` names a tag whose evaluation blocks (after logging "start") — the kill-mid-evaluation test.
    """

    def __init__(self, log_path=None, hang_on: str | None = None):
        self.recorded = json.loads(RECORDED_RESULTS.read_text())
        self.log_path = log_path
        self.hang_on = hang_on
        self.calls: list[dict[str, Any]] = []

    def _log(self, line: str) -> None:
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write(line + "\n")
                f.flush()

    def __call__(self, source: str, shape, *, acc="fp32", mode="offline", profile="quick", sanitize=False,
                 ncu=False, arch=None):
        from agent.campaign.archive import source_hash
        from evaluator.record import EvalResult

        m = _TAG.search(source)
        tag = m.group(1) if m else "?"
        h = source_hash(source)
        self.calls.append({"tag": tag, "hash": h, "shape": tuple(shape), "acc": acc, "arch": arch})
        self._log(f"start {tag} {h}")
        if tag == self.hang_on:
            time.sleep(3600)
        if tag not in self.recorded:
            r = EvalResult(status="compile_error", reason=f"no recorded result for variant {tag!r}",
                           shape=tuple(shape), acc=acc)
        else:
            r = EvalResult.from_dict(self.recorded[tag])
            r.shape, r.acc = tuple(shape), acc
        r.source_hash, r.code_length = h, len(source)
        self._log(f"done {tag} {h}")
        return r


def scaled_result(r, factor: float):
    """The same evaluation with every speedup multiplied by `factor` (a slower or faster second measurement)."""
    from evaluator.record import EvalResult

    r = EvalResult.from_dict(r.to_dict())
    for t in r.baselines.values():
        t.speedup_mean = t.speedup_mean * factor if t.speedup_mean else t.speedup_mean
    return r
