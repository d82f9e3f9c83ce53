"""Worker processes seen from the parent: start, talk, time out, classify failures, replace.

A candidate can kill its worker (segfault, abort), poison its CUDA context (illegal address) or hang it. None of
that reaches the parent: each is turned into a status and a reason, the worker is replaced, and the next request
gets a healthy one.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from evaluator import record as R
from evaluator.gpu import visible_token


class WorkerDied(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


class WorkerProcess:
    """One worker subprocess pinned to one GPU."""

    def __init__(self, gpu: int, native_so: str, start_timeout: float = 180.0, argv: list[str] | None = None):
        self.gpu = gpu
        argv = argv or [sys.executable, "-m", "evaluator.worker", "--native", native_so]
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=visible_token(gpu), PYTHONUNBUFFERED="1")
        self.stderr_file = tempfile.NamedTemporaryFile(prefix=f"cudal2-worker{gpu}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(argv,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr_file,
                                     env=env, text=True, start_new_session=True,
                                     cwd=str(Path(__file__).resolve().parent.parent))
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ids = itertools.count(1)
        msg = self._next(start_timeout)
        if msg.get("event") != "ready":
            self.kill()
            raise RuntimeError(f"GPU worker failed to start: {msg.get('reason', msg)}\n{self.stderr_tail()}")
        self.gpu_info = msg.get("gpu", {})

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.strip()
            if line:
                try:
                    self.lines.put(json.loads(line))
                except ValueError:
                    self.lines.put({"event": "garbage", "line": line[:500]})
        self.lines.put(None)  # EOF: the worker is gone

    def _next(self, timeout: float) -> dict:
        try:
            msg = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise WorkerDied(R.TIMEOUT, f"no progress from the GPU worker for {timeout:.0f} s (hang); worker killed")
        if msg is None:
            self.proc.wait(timeout=10)
            raise WorkerDied(R.CRASH, f"GPU worker {describe_exit(self.proc.returncode)}\n{self.stderr_tail()}")
        return msg

    def request(self, req: dict, inactivity_timeout: float, on_progress=None) -> dict:
        """Send one request; every progress event restarts the inactivity clock. Raises WorkerDied."""
        req = dict(req, id=next(self.ids))
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerDied(R.CRASH, f"GPU worker {describe_exit(self.proc.poll())}\n{self.stderr_tail()}")
        while True:
            msg = self._next(inactivity_timeout)
            ev = msg.get("event")
            if ev == "progress":
                if on_progress:
                    on_progress(msg.get("msg", ""))
                continue
            if ev == "result" and msg.get("id") == req["id"]:
                res = msg["result"]
                if res.get("poisoned"):
                    self.kill()
                return res

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self, n: int = 3000) -> str:
        try:
            data = Path(self.stderr_file.name).read_text(errors="replace")
        except OSError:
            return ""
        return data[-n:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        try:
            os.unlink(self.stderr_file.name)
        except OSError:
            pass


class WorkerPool:
    """One worker per GPU. `run(request)` takes an idle worker (any GPU, or the one asked for), replaces dead ones."""

    def __init__(self, gpus: list[int] | None = None, native_so: str | None = None, arch: str | None = None,
                 worker_argv: list[str] | None = None):
        from evaluator.gpu import device_count

        self.gpus = list(gpus) if gpus is not None else list(range(max(1, device_count())))
        self._native_so = native_so
        self._arch = arch
        self._workers: dict[int, WorkerProcess | None] = {g: None for g in self.gpus}
        self._idle: queue.Queue = queue.Queue()
        for g in self.gpus:
            self._idle.put(g)
        self._lock = threading.Lock()
        self.replacements = 0
        self._worker_argv = worker_argv  # another worker program (tests of the failure handling)

    def native_so(self) -> str:
        with self._lock:
            if self._native_so is None:
                from evaluator.native import build

                self._native_so = build(self._arch)
            return self._native_so

    def run(self, req: dict, inactivity_timeout: float = 60.0, gpu: int | None = None, on_progress=None) -> dict:
        """Returns the worker's result dict; a dead or hung worker becomes {"status": crash|timeout, ...}."""
        g = self._take(gpu)
        held = time.monotonic()  # from here the GPU is this request's: the wait for it is not GPU time
        try:
            w = self._workers[g]
            if w is None or not w.alive():
                if w is not None:
                    self.replacements += 1
                    w.close()
                # Another worker program (tests) may need no native library: do not build one for it.
                so = (self._native_so or "") if self._worker_argv else self.native_so()
                w = self._workers[g] = WorkerProcess(g, so, argv=self._worker_argv)
            try:
                res = w.request(req, inactivity_timeout, on_progress)
            except WorkerDied as e:
                w.kill()
                return {"status": e.status, "reason": e.reason, "gpu_index": g, "held_s": time.monotonic() - held}
            res["gpu_index"] = g
            res["held_s"] = time.monotonic() - held
            return res
        finally:
            self._idle.put(g)

    @contextlib.contextmanager
    def holding(self, gpu: int | None = None):
        """Keeps this pool's evaluations off one GPU while the caller uses it for something else (a profiler, a
        sanitizer): their kernels and replays would otherwise run beside a timed candidate. Yields the GPU."""
        g = self._take(gpu)
        try:
            yield g
        finally:
            self._idle.put(g)

    def _take(self, gpu: int | None) -> int:
        if gpu is None:
            return self._idle.get()
        if gpu not in self._workers:
            raise ValueError(f"GPU {gpu} is not in this pool ({self.gpus})")
        held = []
        try:
            while True:
                g = self._idle.get()
                if g == gpu:
                    return g
                held.append(g)
                if len(held) == len(self.gpus):  # all others idle and ours busy: wait for ours
                    for h in held:
                        self._idle.put(h)
                    held = []
                    time.sleep(0.05)
        finally:
            for h in held:
                self._idle.put(h)

    def gpu_info(self, gpu: int | None = None) -> dict:
        res = self.run({"op": "ping"}, gpu=gpu)
        return res.get("gpu", {})

    def close(self) -> None:
        for g, w in self._workers.items():
            if w is not None:
                w.close()
                self._workers[g] = None
