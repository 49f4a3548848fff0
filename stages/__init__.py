"""torchgate: a declarative regression pipeline for PyTorch workloads.

Each DVC stage is a thin module (`python -m torchgate.<name>`) over small, pure modules: core
(records, configuration), measure (clocks, workers), launch (processes), judge (statistics),
render (pages).
Its folder in a checkout is stages/ (core.names).
"""
import os as _os
import sys as _sys

if _os.path.islink(_os.path.dirname(__file__)):
    # Imported through core.names.importable()'s link: the modules are this folder's files,
    # by their own paths (tracebacks; the project's files a worker imports, env stage).
    __file__ = _os.path.realpath(__file__)
    __path__[:] = [_os.path.dirname(__file__)]

if __name__ == "stages":
    # `python -m stages.<tool>` in a checkout, the old spelling: the package loads once, as
    # torchgate, and `stages` names that same module.
    if "torchgate" not in _sys.modules:
        import importlib.util as _util
        _spec = _util.spec_from_file_location("torchgate", __file__,
                                              submodule_search_locations=list(__path__))
        _sys.modules["torchgate"] = _util.module_from_spec(_spec)
        _spec.loader.exec_module(_sys.modules["torchgate"])
    _sys.modules["stages"] = _sys.modules["torchgate"]
    from torchgate.core.cli import old_spelling
    old_spelling(_sys.orig_argv)
