"""Custom operators: a user's `torch.ops.<lib>` extensions, as failures see them.

Op coverage logs every operator by its overload name, `<namespace>.<op>.<overload>`, a user's
extensions under their own namespace (judge.portability tells them from PyTorch's). An
extension that has no kernel for the device fails with a dispatcher message of some 5,000
characters; `missing_kernel` says the same in one line.
"""
from __future__ import annotations

import re

_COULD_NOT_RUN = re.compile(r"Could not run '([\w:.]+)' with arguments from the '(\w+)' backend")
_KERNEL = re.compile(r"^(\w+): registered at .*\[kernel\]", re.M)


def missing_kernel(exc: BaseException) -> str | None:
    """One line for an operator with no kernel for the device it was called on, naming the
    devices it has kernels for; None for any other exception."""
    text = str(exc)
    found = _COULD_NOT_RUN.search(text)
    if not isinstance(exc, NotImplementedError) or found is None:
        return None
    op, backend = found.groups()
    kernels = [k for k in dict.fromkeys(_KERNEL.findall(text)) if k != "Meta"]
    has = (f"it has kernels for {', '.join(kernels)} only" if kernels
           else "it has no device kernel at all")
    return (f"operator {op} has no kernel for the {backend} backend ({has}): the extension "
            f"does not support this device, or its {backend} kernel was not registered")
