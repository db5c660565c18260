"""Keep Numba's on-disk kernel cache true to the source.

Numba re-validates a cached kernel against the modification time and size of the file that defines it,
but not against the files whose functions it inlines or whose tables it bakes in: after a change to
`devices/rng.py` alone, the cached kernels of `devices/pulses.py` would go on running the old generator.
`flush_stale` closes that gap: it fingerprints the sources a package's kernels are built from, and when
the fingerprint differs from the one stored beside the cache, it empties the cache index of each kernel
(Numba then compiles afresh, once) and stores the new fingerprint.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType

from numba.core.caching import FunctionCache
from numba.core.registry import CPUDispatcher

from aimc.common.files import atomic_write_text


def _cached_kernels(module: ModuleType) -> list[CPUDispatcher]:
    """The module's own Numba functions compiled with cache=True."""
    return [
        f
        for f in vars(module).values()
        if isinstance(f, CPUDispatcher)
        and f.__module__ == module.__name__
        and isinstance(getattr(f, "_cache", None), FunctionCache)
    ]


def source_fingerprint(modules: list[ModuleType]) -> str:
    """SHA-256 over the source files of `modules`, in the order given."""
    h = hashlib.sha256()
    for m in modules:
        h.update(Path(m.__file__).read_bytes())
    return h.hexdigest()


def flush_stale(owned: list[ModuleType], depends: list[ModuleType]) -> None:
    """Empty the cache index of every cached kernel in `owned` when the sources of `owned` and `depends`
    changed since the last import that checked them. A cache directory that cannot be written is left to
    Numba (it then does not cache there either)."""
    kernels = [f for m in owned for f in _cached_kernels(m)]
    if not kernels:
        return
    stamp = Path(kernels[0]._cache._cache_path) / f"{owned[0].__name__}.sources"
    fingerprint = source_fingerprint(owned + depends)
    try:
        if stamp.read_text() == fingerprint:
            return
    except OSError:
        pass
    try:
        for f in kernels:
            f._cache.flush()
        atomic_write_text(stamp, fingerprint)
    except OSError:
        pass
