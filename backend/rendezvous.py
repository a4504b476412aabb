"""The bounded startup handshake: every worker says Hello to every peer and both sides compare the facts
that must agree (mirrorlab version, cluster spec, task identity, devices per worker, BLAS threads, and the
entries of ``MIRRORLAB_FINGERPRINT`` such as a library version).

A mismatch fails both workers with one message naming both sides' values; a peer that does not answer
within the window gives ``UnavailableError`` naming the task and its address. Waiting happens in short
slices, so Ctrl-C ends it at once (and SIGTERM's default action still ends the process).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field

import grpc

from mirrorlab import errors

from .grpc_transport import PeerNode

__all__ = ["WorkerFacts", "Rendezvous", "mismatch_text"]

_CALL_SLICE = 1.0
_RETRY_PAUSE = 0.1

# What must agree across workers, with the words a mismatch message uses.
_COMPARED = (("version", "runs mirrorlab {}"), ("cluster", "has the cluster spec {}"),
             ("devices", "has {} devices"), ("blas_threads", "pins {} BLAS threads"))


@dataclass(frozen=True)
class WorkerFacts:
    """What a worker tells its peers about itself."""

    version: str
    cluster: str  # canonical JSON of the cluster spec
    task: str  # e.g. /job:worker/replica:0/task:1
    devices: int
    blas_threads: int
    fingerprint: dict[str, str] = field(default_factory=dict)  # MIRRORLAB_FINGERPRINT's entries

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(data: dict) -> "WorkerFacts":
        prints = data.get("fingerprint", {})
        return WorkerFacts(str(data["version"]), str(data["cluster"]), str(data["task"]), int(data["devices"]),
                           int(data["blas_threads"]),
                           {str(k): str(v) for k, v in prints.items()} if isinstance(prints, dict) else {})


def mismatch_text(a: int, facts_a: WorkerFacts, b: int, facts_b: WorkerFacts) -> str | None:
    """One message naming both sides' values of the first fact worker ``a`` and worker ``b`` disagree on
    (the same text on both sides: the lower rank is named first), or None when they agree."""
    if a > b:
        a, facts_a, b, facts_b = b, facts_b, a, facts_a
    for name, words in _COMPARED:
        mine, theirs = getattr(facts_a, name), getattr(facts_b, name)
        if mine != theirs:
            return (f"Rendezvous failed: worker {b} ({facts_b.task}) {words.format(theirs)}, worker {a} "
                    f"({facts_a.task}) {words.format(mine)}.\nFix: start every worker with the same mirrorlab "
                    "version, TF_CONFIG cluster, devices per worker and MIRRORLAB_BLAS_THREADS.")
    for key in sorted(set(facts_a.fingerprint) | set(facts_b.fingerprint)):
        mine, theirs = facts_a.fingerprint.get(key), facts_b.fingerprint.get(key)
        if mine != theirs:
            return (f"Rendezvous failed: worker {b} ({facts_b.task}) has {key}={theirs!r}, worker {a} "
                    f"({facts_a.task}) has {key}={mine!r} (MIRRORLAB_FINGERPRINT).\nFix: give every host the same "
                    f"{key}: MultiWorkerMirroredStrategy needs every worker to run the same software.")
    return None


class Rendezvous:
    """Serves Hello on ``node`` (register before ``node.start()``) and runs this worker's side with ``wait``."""

    def __init__(self, node: PeerNode, facts: WorkerFacts) -> None:
        self.node = node
        self.facts = facts
        self._failure: errors.OpError | None = None
        self._lock = threading.Lock()
        node.serve("Hello", self._answer)

    def _fail(self, error: errors.OpError) -> errors.OpError:
        with self._lock:
            if self._failure is None:
                self._failure = error
            return self._failure

    def _answer(self, request: bytes, caller: int) -> bytes:
        data = json.loads(request.decode("utf-8"))
        theirs = WorkerFacts.from_json(data["facts"])
        text = self._identity_text(caller, theirs, str(data["expect"])) or mismatch_text(
            self.node.rank, self.facts, caller, theirs)
        if text is not None:
            self._fail(errors.FailedPreconditionError(text))
        return json.dumps({"facts": self.facts.to_json(), "error": text}).encode("utf-8")

    def _identity_text(self, caller: int, theirs: WorkerFacts, expected: str) -> str | None:
        node = self.node
        if expected != self.facts.task or theirs.task != node.names[caller]:
            return (f"Rendezvous failed: worker {caller} ({theirs.task}) called {node.addresses[node.rank]} "
                    f"expecting {expected}, and {self.facts.task} answered there, which expects "
                    f"{node.names[caller]} as worker {caller}.\nFix: every worker's TF_CONFIG must list the same "
                    "cluster and name its own task (type and index) exactly once.")
        return None

    def wait(self, timeout: float) -> None:
        """Return once every peer has answered Hello with matching facts; raise on a mismatch, a wrong
        token, or when ``timeout`` seconds pass first."""
        node = self.node
        pending = [p for p in range(node.size) if p != node.rank]
        end = time.monotonic() + timeout
        while True:
            if self._failure is not None:
                raise errors.clone(self._failure)
            impostor = next((p for p in pending if str(p) in node.refused), None)
            if impostor is not None:
                raise self._fail(errors.UnauthenticatedError(
                    f"Rendezvous failed: {node.label(node.rank)} refused calls from {node.label(impostor)}: its "
                    "cluster token (MIRRORLAB_CLUSTER_TOKEN) is not this cluster's.\nFix: give every worker the same "
                    "MIRRORLAB_CLUSTER_TOKEN (mirrorlab launch makes a fresh one for all of them)."))
            for peer in list(pending):
                if self._hello(peer, max(0.05, min(_CALL_SLICE, end - time.monotonic()))):
                    pending.remove(peer)
            if not pending:
                return
            if time.monotonic() >= end:
                raise self._unavailable(pending, timeout)
            time.sleep(_RETRY_PAUSE)

    def _hello(self, peer: int, slice_s: float) -> bool:
        request = json.dumps({"facts": self.facts.to_json(), "expect": self.node.names[peer]}).encode("utf-8")
        try:
            reply = json.loads(self.node.call(peer, "Hello", request, timeout=slice_s).decode("utf-8"))
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return False
            cls = errors.UnauthenticatedError if code == grpc.StatusCode.UNAUTHENTICATED else errors.UnavailableError
            details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            raise self._fail(cls(f"Rendezvous failed: {details}")) from None
        if reply.get("error"):
            raise self._fail(errors.FailedPreconditionError(str(reply["error"])))
        text = mismatch_text(self.node.rank, self.facts, peer, WorkerFacts.from_json(reply["facts"]))
        if text is not None:
            raise self._fail(errors.FailedPreconditionError(text))
        return True

    def _unavailable(self, pending: list[int], timeout: float) -> errors.UnavailableError:
        node = self.node
        missing = "\n".join(f"  {node.label(p)}" for p in pending)
        refused = (f"\n{len(node.refused)} call(s) to this worker were refused for a wrong cluster token: is a "
                   "worker started with another MIRRORLAB_CLUSTER_TOKEN?" if node.refused else "")
        tls = ("\nTLS is on: a worker without TLS, or whose certificate is not signed by MIRRORLAB_TLS_CA (or does "
               "not name its host), cannot connect." if node.uses_tls else "")
        return errors.UnavailableError(
            f"Rendezvous failed: {node.label(node.rank)} waited {timeout:g} s for these workers, which never "
            f"answered:\n{missing}{refused}{tls}\nFix: start every task of TF_CONFIG's cluster, check the addresses and "
            "firewalls, or raise MIRRORLAB_RENDEZVOUS_TIMEOUT if they start slowly.")
