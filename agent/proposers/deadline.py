"""Hard deadlines for model requests, bounded retries, and the errors that must stop a run at once.

A client's own timeout bounds each socket read, not the request: a server that sends one byte every 2 s holds a
request with a 10 s timeout for as long as it likes. Here every read, write and connect of a request is given at
most the time left until the request's deadline (`request_deadline`), through the network backend of the HTTP
client the backends are built with (`http_client`); past the deadline the request fails as a timeout, whatever
the server does. Retries (`call_with_retries`) stop at `max_retry_s` in total.

Some answers no retry can fix and no other request will get right: a rejected key (401, 403), a model the
endpoint does not serve (404, or a 400 that says so), a key that is not set. They raise `EndpointFatal`; the
proposer latches it (`FatalLatch`), sends nothing more, and the commands exit with code 3.
"""
from __future__ import annotations

import random
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

# the HTTP stack both model SDKs are built on (httpx2 is httpx's successor under a new name)
import httpcore2 as httpcore
import httpx2 as httpx

EXIT_FATAL = 3
T = TypeVar("T")


class RetryableError(Exception):
    """A transient failure the backend maps its client's exception to (429, 5xx, timeout, connection)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class FatalError(Exception):
    """A failure that retrying will not fix (400, a reply that is not a chat completion)."""


class EndpointFatal(FatalError):
    """A failure no request to this endpoint with this configuration can avoid (key rejected or unset, model
    unknown): the run stops at the first one (exit code 3), and its message says what to change."""


# ---------------------------------------------------------------- the deadline of one request

_local = threading.local()


@contextmanager
def request_deadline(seconds: float):
    """Every network operation of the requests made in this block (this thread) ends by `seconds` from now."""
    prev = getattr(_local, "at", None)
    _local.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _local.at = prev


def _cap(timeout: float | None) -> float | None:
    at = getattr(_local, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream):
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, _cap(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, _cap(timeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore.NetworkStream:
        return _DeadlineStream(self.inner.start_tls(ssl_context, server_hostname, _cap(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self):
        self.inner = httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return _DeadlineStream(self.inner.connect_tcp(host, port, _cap(timeout), local_address, socket_options))

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _DeadlineStream(self.inner.connect_unix_socket(path, _cap(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def http_client(timeout_s: float) -> httpx.Client:
    """An httpx client whose requests keep the deadline of the `request_deadline` block they are made in."""
    transport = httpx.HTTPTransport()
    # httpx takes no network backend, so its connection pool is rebuilt with one (as httpx builds it, plus ours);
    # tests/test_llm_faults.py holds a trickling server to the deadline and fails if this stops taking effect.
    transport._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(), max_connections=100,
                                              max_keepalive_connections=20, keepalive_expiry=5.0,
                                              network_backend=_DeadlineBackend())
    return httpx.Client(transport=transport, timeout=httpx.Timeout(timeout_s), follow_redirects=True)


# ---------------------------------------------------------------- retries

def backoff(attempt: int, initial: float, maximum: float, retry_after: float | None = None) -> float:
    """Exponential backoff with full jitter, never shorter than a server's Retry-After (capped at `maximum`)."""
    base = min(maximum, initial * (2 ** (attempt - 1)))
    w = random.uniform(base / 2, base)
    if retry_after:
        w = max(w, min(float(retry_after), maximum))
    return w


@dataclass
class RetryOutcome:
    value: Any
    attempts: int
    latency_s: float  # the successful attempt alone


def call_with_retries(fn: Callable[[], T], *, request_timeout: float, max_attempts: int, max_retry_s: float,
                      backoff_initial_s: float, backoff_max_s: float, where: str,
                      note: Callable[[str], None] | None = None, stop: "FatalLatch | None" = None) -> RetryOutcome:
    """fn() under a hard deadline per attempt, retried on RetryableError until max_attempts or max_retry_s (the
    whole time, waits included; an attempt gets no more than what is left of it, the first excepted). Raises the
    last RetryableError (with `.attempts`), or a FatalError at once."""
    t0 = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        if stop is not None:
            stop.check()
        left = max_retry_s - (time.monotonic() - t0)
        per = request_timeout if attempt == 1 else max(0.001, min(request_timeout, left))
        s = time.monotonic()
        try:
            with request_deadline(per):
                value = fn()
            return RetryOutcome(value, attempt, time.monotonic() - s)
        except RetryableError as e:
            e.attempts = attempt
            spent = time.monotonic() - t0
            if attempt >= max_attempts:
                raise
            wait = backoff(attempt, backoff_initial_s, backoff_max_s, e.retry_after)
            if spent + wait >= max_retry_s:
                err = RetryableError(f"{e} (gave up after {spent:.1f} s: --max-retry-seconds {max_retry_s:g})",
                                     e.retry_after)
                err.attempts = attempt
                raise err from e
            if note is not None:
                note(f"{e}; attempt {attempt} of {max_attempts}, retrying in {wait:.1f} s")
            time.sleep(wait)
        except FatalError as e:
            e.attempts = attempt
            raise


def timeout_message(seconds: float, where: str) -> str:
    return f"request timed out: no complete answer from {where} within the {seconds:g} s deadline (--request-timeout)"


# ---------------------------------------------------------------- fatal answers

_MODEL_UNKNOWN = re.compile(r"model.*(not (be )?found|does not exist|unknown|not exist|invalid|not available|"
                            r"no such)|(unknown|invalid) model", re.IGNORECASE | re.DOTALL)


def classify_status(status: int, message: str, *, where: str, model: str | None, key_env: str | None) -> Exception:
    """The error an HTTP error status from a model endpoint stands for."""
    msg = f"HTTP {status} from {where}: {message}"
    if status in (408, 409, 425, 429, 529) or status >= 500:
        return RetryableError(msg)
    if status in (401, 403):
        return EndpointFatal(f"{msg}. The endpoint rejected the API key read from ${key_env}: check its value, or "
                             "name another variable with --api-key-env")
    if status == 404 or (status in (400, 422) and _MODEL_UNKNOWN.search(message or "")):
        return EndpointFatal(f"{msg}. The endpoint does not serve the model {model!r} (or the URL is wrong): set "
                             "--model-name (or model_name in the config file) to a model it serves")
    return FatalError(msg)


class FatalLatch:
    """Shared by every proposer of one model configuration (all lanes of a campaign): once one request met an
    EndpointFatal answer, no other request is sent."""

    def __init__(self):
        self._error: EndpointFatal | None = None
        self._lock = threading.Lock()
        self.probed = False  # a request has been answered without such an error

    def trip(self, error: EndpointFatal) -> None:
        from agent.secrets import scrub

        with self._lock:
            if self._error is None:  # providers echo keys in their errors: the stored message never holds one
                self._error = EndpointFatal(scrub(str(error)))

    @property
    def error(self) -> EndpointFatal | None:
        return self._error

    def check(self) -> None:
        if self._error is not None:
            raise EndpointFatal(str(self._error))


_latch_lock = threading.Lock()


def latch_for(config: Any) -> FatalLatch:
    """The latch of a model configuration object (kept on it, outside its dataclass fields)."""
    with _latch_lock:
        latch = config.__dict__.get("_fatal_latch")
        if latch is None:
            latch = config.__dict__["_fatal_latch"] = FatalLatch()
        return latch
