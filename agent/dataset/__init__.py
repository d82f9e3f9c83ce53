"""Campaign runs as fine-tuning data: `cudal2 dataset export` (see docs/train_your_model.md).

runs.py reads a run (archive, transcript, finals) into step groups; prompts.py gives each group the prompt the loop
sent or would have rendered; formats.py builds chat, preference and reward records; privacy.py keeps keys and paths
out; splits.py splits by shape and writes the files with their manifest; export.py ties them together.
"""
from agent.dataset.export import NothingToExport, export_dataset
from agent.dataset.runs import DatasetError

__all__ = ["DatasetError", "NothingToExport", "export_dataset"]
