"""NumPy's SIMD dispatch targets enabled on this CPU: listed in ``NPY_DISABLE_CPU_FEATURES`` they limit NumPy to its
baseline kernels, so a run covers the other code path. ``python tests/conformance/dispatch.py`` prints them (for
.ci/run)."""

from __future__ import annotations

__all__ = ["enabled_dispatch_targets"]


def enabled_dispatch_targets() -> list[str]:
    """The dispatch targets beyond NumPy's build baseline that this CPU has (``X86_V3``, ``AVX512_ICL``...)."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # NumPy 1.x
        from numpy.core import _multiarray_umath as umath  # type: ignore[no-redef]
    return [target for target in umath.__cpu_dispatch__ if umath.__cpu_features__.get(target)]


if __name__ == "__main__":
    print(" ".join(enabled_dispatch_targets()), end="")
