"""cuda-l2 agent: the per-shape LangGraph loop, proposers, retrieval client, archive, campaigns and CLI."""
