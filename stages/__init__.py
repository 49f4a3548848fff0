"""torchgate: a declarative regression pipeline for PyTorch workloads.

Each DVC stage is a thin module (`python -m torchgate.<name>`) over small, pure modules:
records (file formats), stats (comparison), timing (clocks), worker/launcher (processes).
"""
