"""torchgate: a declarative regression pipeline for PyTorch workloads.

Each DVC stage is a thin module (`python -m stages.<name>`) over small, pure modules:
records (file formats), stats (comparison), timing (clocks), worker/launcher (processes).
"""
