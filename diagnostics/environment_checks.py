"""Checks of environment fingerprints: one host's traps, and the differences between workers that matter.

Workers that differ in library versions, CUDA stack or device count train with different numerics or hang;
each difference names the odd workers out (the minority; a tie is reported as a tie, blaming nobody).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Mapping, Sequence

from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.fingerprint import PACKAGES, is_fingerprint

__all__ = [
    "HOST_SUMMARY", "PACKAGE_SKEW", "PYTHON_SKEW", "CUDA_SKEW", "DEVICE_COUNT_SKEW", "ENV_VAR_SKEW", "BLAS_SKEW",
    "BAD_FINGERPRINT", "HOSTNAME_IS_LOOPBACK", "CUDA_UNUSABLE", "check_fingerprint", "compare_fingerprints",
]

HOST_SUMMARY = register_code("ML-ENV-001", "the environment of a host")
PACKAGE_SKEW = register_code("ML-ENV-002", "a package version differs between workers")
PYTHON_SKEW = register_code("ML-ENV-003", "the Python version differs between workers")
CUDA_SKEW = register_code("ML-ENV-004", "the CUDA driver, runtime or NCCL version differs between workers")
DEVICE_COUNT_SKEW = register_code("ML-ENV-005", "the number of GPUs differs between workers")
ENV_VAR_SKEW = register_code("ML-ENV-006", "LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES or a thread variable differs")
BLAS_SKEW = register_code("ML-ENV-007", "the BLAS library differs between workers")
BAD_FINGERPRINT = register_code("ML-ENV-008", "a fingerprint is malformed", invalid_config=True)
HOSTNAME_IS_LOOPBACK = register_code("ML-ENV-009", "this host's name resolves only to a loopback address")
CUDA_UNUSABLE = register_code("ML-ENV-010", "CuPy is installed but CUDA is unusable")


def _get(fingerprint: Mapping[str, Any], *keys: str) -> Any:
    value: Any = fingerprint
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _blas_entries(fingerprint: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    entries = fingerprint.get("blas")
    return [b for b in entries if isinstance(b, Mapping)] if isinstance(entries, list) else []


def check_fingerprint(name: str, fingerprint: object) -> list[Finding]:
    """One host on its own: a summary (info), a host name that only reaches loopback, CuPy without usable CUDA."""
    if not is_fingerprint(fingerprint):
        return [Finding(BAD_FINGERPRINT, Severity.ERROR, (name,), f"{name} is not a mirrorlab fingerprint",
                        f"{name}: {str(fingerprint)[:120]}", "Write fingerprints with `mirrorlab diagnose "
                        "--write-fingerprint FILE` on each worker, with the same mirrorlab version.")]
    assert isinstance(fingerprint, dict)
    packages = {k: v for k, v in _mapping(fingerprint.get("packages")).items() if v}
    cuda = _mapping(fingerprint.get("cuda"))
    blas = ", ".join(f"{b.get('internal_api')} {b.get('version')} ({b.get('num_threads')} threads)"
                     for b in _blas_entries(fingerprint))
    lines = [f"host {fingerprint.get('hostname')} {fingerprint.get('addresses')}",
             f"Python {fingerprint.get('python')} on {fingerprint.get('platform')}",
             "packages " + ", ".join(f"{k} {v}" for k, v in packages.items()),
             f"CUDA driver {cuda.get('driver')} runtime {cuda.get('runtime')} NCCL {cuda.get('nccl')}, "
             f"{cuda.get('device_count')} GPU(s)",
             f"BLAS {blas or 'none loaded'}"]
    lines += [f"{k}={v}" for k, v in _mapping(fingerprint.get("env")).items() if v is not None]
    findings = [Finding(HOST_SUMMARY, Severity.INFO, (name,), f"environment of {fingerprint.get('hostname')}",
                        "\n".join(lines), "")]
    addresses = fingerprint.get("addresses") if isinstance(fingerprint.get("addresses"), list) else []
    if addresses and all(str(a).startswith("127.") or a == "::1" for a in addresses):
        findings.append(Finding(
            HOSTNAME_IS_LOOPBACK, Severity.WARNING, (name,),
            f"host name {fingerprint.get('hostname')!r} resolves only to {', '.join(map(str, addresses))}",
            "/etc/hosts or DNS maps the host name to loopback", "Peers cannot reach this host by that name's address: "
            "put the host's real IP in TF_CONFIG, or map its name to that IP in /etc/hosts."))
    if cuda.get("cupy") and cuda.get("error"):
        findings.append(Finding(CUDA_UNUSABLE, Severity.WARNING, (name,), "CuPy is installed but CUDA does not "
                                "answer, so this worker trains on its CPU", str(cuda.get("error")),
                                "Check the NVIDIA driver (nvidia-smi) and that CuPy's CUDA major version matches it."))
    return findings


# (code, severity, what, reader, fix) for every compared property
_COMPARED: list[tuple[str, Severity, str, Callable[[Mapping[str, Any]], Any], str]] = [
    *[(PACKAGE_SKEW, Severity.ERROR, f"{package} version", (lambda fp, p=package: _get(fp, "packages", p)),
       f"Install the same {package} version on every worker (pin it in requirements or the image).")
      for package in PACKAGES],
    (PYTHON_SKEW, Severity.ERROR, "Python version", lambda fp: ".".join(str(fp.get("python")).split(".")[:2]),
     "Run every worker on the same Python minor version (one container image for all)."),
    *[(CUDA_SKEW, Severity.ERROR, f"CUDA {part} version", (lambda fp, k=part: _get(fp, "cuda", k)),
       "Install the same NVIDIA driver, CUDA runtime and NCCL on every worker.")
      for part in ("driver", "runtime", "nccl")],
    (DEVICE_COUNT_SKEW, Severity.ERROR, "GPU count", lambda fp: _get(fp, "cuda", "device_count"),
     "Give every worker the same number of GPUs (TF: otherwise the behaviour is undefined); check "
     "CUDA_VISIBLE_DEVICES."),
    *[(ENV_VAR_SKEW, Severity.WARNING, var, (lambda fp, v=var: _get(fp, "env", v)),
       f"Set {var} the same way on every worker (or on purpose: then ignore this).")
      for var in ("LD_LIBRARY_PATH", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")],
    (BLAS_SKEW, Severity.WARNING, "BLAS library",
     lambda fp: ", ".join(sorted(f"{b.get('internal_api')} {b.get('version')}" for b in _blas_entries(fp)
                                 if b.get("user_api") == "blas")),
     "Use the same NumPy build everywhere: different BLAS libraries round matrix products differently."),
]


def compare_fingerprints(named: Sequence[tuple[str, object]]) -> list[Finding]:
    """Every property that differs between the named fingerprints; malformed ones are reported, not compared."""
    findings: list[Finding] = []
    good: list[tuple[str, Mapping[str, Any]]] = []
    for name, fingerprint in named:
        if is_fingerprint(fingerprint):
            assert isinstance(fingerprint, Mapping)
            good.append((name, fingerprint))
        else:
            findings += check_fingerprint(name, fingerprint)
    if len(good) < 2:
        return findings
    for code, severity, what, read, fix in _COMPARED:
        groups: dict[str, list[str]] = defaultdict(list)
        for name, fingerprint in good:
            groups[repr(read(fingerprint))].append(name)
        if len(groups) > 1:
            findings.append(_skew(code, severity, what, groups, fix))
    return findings


def _skew(code: str, severity: Severity, what: str, groups: dict[str, list[str]], fix: str) -> Finding:
    """One difference: the minority workers are named; with a tie for the majority, all are, blaming none."""
    ranked = sorted(groups.items(), key=lambda item: -len(item[1]))
    tie = len(ranked[0][1]) == len(ranked[1][1])
    odd = [name for _, names in (ranked if tie else ranked[1:]) for name in names]
    evidence = "; ".join(f"{value} on {', '.join(names)}" for value, names in ranked)
    message = (f"the workers split evenly on {what}" if tie
               else f"{', '.join(odd)} differ from the other workers in {what}")
    return Finding(code, severity, tuple(odd), message, evidence, fix)
