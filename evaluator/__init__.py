"""cuda-l2 evaluator: everything that touches the GPU (compile, isolate, check, time, baselines, profile).

The seam to agent/ is the kernel contract (evaluator.contract) and the result record (evaluator.record).
"""
