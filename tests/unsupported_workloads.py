"""A workload that cannot run anywhere, its float64 reference included."""
from torchgate.workloads import Unsupported


def nowhere(*, device, dtype, compile, seed):
    raise Unsupported(f"needs hardware nobody has; this is {device.type}")
