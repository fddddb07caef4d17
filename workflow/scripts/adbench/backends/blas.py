"""The BLAS and OpenMP thread pools of a backend's process: limited and recorded one way.

It runs in every framework's environment, so it imports only the standard library and
threadpoolctl where that environment has it.

Key format: '<internal_api>:<owner>', threadpoolctl's internal_api (openblas, mkl, blis,
flexiblas, openmp) and the Python package that ships the library (its site-packages entry
without auditwheel's '.libs': numpy, scipy, mxnet) or, for a library outside site-packages,
its name without version (libgomp); e.g. 'openblas:numpy', 'openmp:libgomp'.
"""

from __future__ import annotations

import os
import re

try:  # every environment whose backend limits BLAS through it pins it (envs/*.yaml)
    import threadpoolctl
except ImportError:  # pragma: no cover - a user's environment without it
    threadpoolctl = None

# The record when threadpoolctl is missing: the pools are unknown, not absent.
NOT_READ = {"blas": None}
PACKAGE_FOLDERS = ("site-packages", "dist-packages")


def library_name(filepath: str) -> str:
    """A shared library's file name up to its first '.' or '-': no version, no build hash."""
    return re.split(r"[.-]", os.path.basename(filepath), maxsplit=1)[0]


def owner(filepath: str) -> str:
    """The package that ships a library (numpy for site-packages/numpy.libs/...), or the
    library's own name outside site-packages (the same on every machine, unlike its folder)."""
    parts = os.path.normpath(filepath).split(os.sep)
    for i, part in enumerate(parts[:-2]):
        if part in PACKAGE_FOLDERS:
            return parts[i + 1].removesuffix(".libs")
    return library_name(filepath)


def pool_key(internal_api: str, filepath: str) -> str:
    """The one key of a BLAS/OpenMP pool in a cell's thread record (see the module docstring)."""
    return f"{internal_api}:{owner(filepath)}"


def pool_threads(libraries: list[dict]) -> dict[str, int | None]:
    """{pool_key: threads} of threadpoolctl.threadpool_info() entries.  Two pools with one
    key (two OpenMP runtimes in one conda lib folder) both stay, the second named further
    by its library, so no pool's count is lost."""
    pools = {}
    for lib in libraries:
        key = pool_key(lib["internal_api"], lib["filepath"])
        if key in pools:
            key = f"{key}/{library_name(lib['filepath'])}"
        pools[key] = lib.get("num_threads")
    return pools


def limit_threads(threads: int) -> dict[str, int | None]:
    """Limit every BLAS/OpenMP pool loaded so far to `threads` and return what each reports
    now (the harness set OPENBLAS_NUM_THREADS and friends before the import; threadpoolctl
    enforces it on the libraries themselves and reads it back)."""
    if threadpoolctl is None:
        return dict(NOT_READ)
    threadpoolctl.threadpool_limits(limits=threads)
    return pool_threads(threadpoolctl.threadpool_info()) or dict(NOT_READ)


def versions() -> dict[str, str]:
    """threadpoolctl's version for a backend's provenance, where it is installed."""
    return {"threadpoolctl": threadpoolctl.__version__} if threadpoolctl is not None else {}
