"""A user module that cannot be imported (a broken dependency)."""
raise ImportError("simulated: libfoo.so.3: cannot open shared object file")


def build(**kwargs):  # never reached
    return None
