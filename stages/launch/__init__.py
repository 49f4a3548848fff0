"""The launch room: orchestration on the host, around the worker processes.

It plans and runs a cell's units (cells.py: processes, lock-step pairs, adaptive rounds),
starts each worker on a backend (backends.py: local.py starts subprocesses here,
ray_backend.py sends each unit to a Ray cluster node placed by ray_placement.py's request),
counts progress (progress.Progress) and captures an interpreter's environment where its units
run (local.capture_env). It imports core, measure (only to name the worker module it starts) and
arms (to build an arm's interpreter and checkout, locally or on a node); measure never
imports it back. The `launcher` section's typed settings are core.config.settings' (Launcher),
because the configuration is parsed once, below every room.
"""
