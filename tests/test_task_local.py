"""``TaskLocal``: per-greenlet (and per-thread) attributes, as local replicas need now that they are greenlets."""

from __future__ import annotations

import threading
import weakref

import pytest
from greenlet import greenlet

from mirrorlab.task_local import TaskLocal


def test_each_greenlet_and_thread_sees_only_its_own_attributes() -> None:
    local = TaskLocal()
    local.value = "caller"
    seen = {}

    def replica(name: str) -> str:
        seen[name] = getattr(local, "value", None)
        local.value = name
        local.__dict__.setdefault("stack", []).append(name)
        return local.value

    assert [greenlet(replica).switch(n) for n in ("a", "b")] == ["a", "b"]
    thread = threading.Thread(target=replica, args=("t",))
    thread.start()
    thread.join(timeout=10)
    assert seen == {"a": None, "b": None, "t": None}
    assert local.value == "caller" and not hasattr(local, "stack")
    del local.value
    with pytest.raises(AttributeError):
        local.value  # noqa: B018 (the access is the test)


def test_a_finished_greenlets_attributes_are_dropped() -> None:
    class Big:
        pass

    local = TaskLocal()
    refs = []

    def task_main() -> None:
        big = Big()
        refs.append(weakref.ref(big))
        local.big = big

    task = greenlet(task_main)
    task.switch()
    del task
    assert refs[0]() is None
