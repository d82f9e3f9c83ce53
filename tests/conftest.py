import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def pytest_collection_modifyitems(config, items):
    from evaluator.gpu import has_gpu

    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device with: pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
