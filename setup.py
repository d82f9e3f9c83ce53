"""The package list lives here, not in pyproject.toml, because the top-level data folders prompts/ and
retrieval_corpus/ are shipped as the packages agent.prompts and agent.retrieval_corpus: a `packages.find` table
cannot be combined with that mapping, and a fixed list would miss the next subpackage."""
from setuptools import find_packages, setup

DATA = {"agent.prompts": "prompts", "agent.retrieval_corpus": "retrieval_corpus"}

setup(
    packages=[*find_packages(include=["agent", "agent.*", "evaluator", "evaluator.*"]), *DATA],
    package_dir=DATA,
    package_data={"evaluator": ["native/*.cu", "native/*.h"], "agent": ["families/*.cu.j2"],
                  "agent.prompts": ["*.j2"], "agent.retrieval_corpus": ["*.md"]},
)
