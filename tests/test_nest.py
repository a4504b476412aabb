"""``mirrorlab.nest``: tf.nest's flatten order and rebuild, and its flat fast paths agreeing with the general walk."""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mirrorlab import nest

Pair = namedtuple("Pair", "first second")
Triple = namedtuple("Triple", "a b c")

leaves_st = st.one_of(st.integers(), st.text(max_size=3), st.none(), st.floats(allow_nan=False))


def _containers(children: st.SearchStrategy) -> st.SearchStrategy:
    keys = st.text(max_size=3)
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.tuples(children, children).map(lambda t: Pair(*t)),
        st.tuples(children, children, children).map(lambda t: Triple(*t)),
        st.dictionaries(keys, children, max_size=4),
        st.dictionaries(keys, children, max_size=4).map(lambda d: OrderedDict(reversed(list(d.items())))),
    )


# Flat containers (the fast paths) and deeper nests (the walk), down to single leaves.
structures_st = st.recursive(leaves_st, _containers, max_leaves=12)


def typed(value: Any) -> Any:
    """``value`` with every container's exact type and key order spelled out, so that equal means identical nests
    (a namedtuple equals a tuple, and an OrderedDict a dict, under plain ``==``)."""
    if isinstance(value, dict):
        return type(value), [(k, typed(v)) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return type(value), [typed(v) for v in value]
    return value


def pack_error(pack: Any, structure: Any, flat: list) -> str | None:
    try:
        pack(structure, flat)
    except ValueError as exc:
        return str(exc)
    return None


@settings(max_examples=300, deadline=None)
@given(structure=structures_st)
def test_flatten_agrees_with_the_general_walk(structure):
    assert nest.flatten(structure) == nest._flatten_walk(structure)


@settings(max_examples=300, deadline=None)
@given(structure=structures_st)
def test_pack_sequence_as_agrees_with_the_general_walk_and_round_trips(structure):
    flat = [f"leaf {i}" for i in range(len(nest.flatten(structure)))]
    packed = nest.pack_sequence_as(structure, flat)
    assert typed(packed) == typed(nest._pack_walk(structure, flat))
    assert nest.flatten(packed) == flat
    assert typed(nest.pack_sequence_as(structure, nest.flatten(structure))) == typed(structure)



@settings(max_examples=300, deadline=None)
@given(structure=structures_st)
def test_map_structure_agrees_with_packing_the_mapped_leaves(structure):
    """Its flat fast path (a plain tuple or list of leaves) included: the same nest, ``fn`` called leaf by leaf in
    flatten order."""
    calls: list = []

    def fn(leaf):
        calls.append(leaf)
        return ("mapped", leaf)

    mapped = nest.map_structure(fn, structure)
    assert calls == nest.flatten(structure)
    assert typed(mapped) == typed(nest.pack_sequence_as(structure, [("mapped", leaf) for leaf in calls]))

@settings(max_examples=200, deadline=None)
@given(structure=structures_st, extra=st.integers(-3, 3).filter(bool))
def test_wrong_length_packing_fails_alike_on_both_paths(structure, extra):
    count = len(nest.flatten(structure))
    flat = list(range(max(count + extra, 0)))
    assume(len(flat) != count)
    fast, general = pack_error(nest.pack_sequence_as, structure, flat), pack_error(nest._pack_walk, structure, flat)
    assert fast == general == (f"Could not pack sequence. Structure had {count} atoms, but flat_sequence had "
                               f"{len(flat)} items.  Structure: {structure}, flat_sequence: {flat}.")


def test_flatten_follows_tf_nest_order():
    structure = {"b": [1, (2, 3)], "a": Pair(4, {"z": 5, "y": 6})}
    assert nest.flatten(structure) == [4, 6, 5, 1, 2, 3]
    assert nest.flatten({"b": 1, "a": 2}) == [2, 1]
    assert nest.flatten(7) == [7]
    assert nest.flatten([]) == []


def test_pack_sequence_as_keeps_container_types_and_the_templates_key_order():
    packed = nest.pack_sequence_as(OrderedDict([("b", 0), ("a", 0)]), ["A", "B"])
    assert type(packed) is OrderedDict and list(packed.items()) == [("b", "B"), ("a", "A")]
    assert typed(nest.pack_sequence_as(Pair(0, 0), [1, 2])) == typed(Pair(1, 2))
    assert typed(nest.pack_sequence_as([(0,), {"k": 0}], [1, 2])) == typed([(1,), {"k": 2}])
    assert nest.pack_sequence_as(5, ["x"]) == "x"


@pytest.mark.parametrize("structure", [{1: "x", "a": "y"}, [{1: "x", "a": "y"}]])
def test_unsortable_keys_are_refused_on_both_paths(structure):
    for fn in (nest.flatten, nest._flatten_walk):
        with pytest.raises(TypeError, match="nest only supports dicts with sortable keys"):
            fn(structure)
    with pytest.raises(TypeError, match="nest only supports dicts with sortable keys"):
        nest.pack_sequence_as(structure, ["p", "q"])


def test_packing_a_deep_structure_keeps_no_leaf_alive_after_it_returns():
    """No reference cycle (a closure calling itself) holds the leaves until a garbage collection."""
    import gc
    import weakref

    import numpy as np

    leaves = [np.zeros(3) for _ in range(3)]
    refs = [weakref.ref(leaf) for leaf in leaves]
    enabled = gc.isenabled()
    gc.disable()
    try:
        packed = nest.pack_sequence_as({"a": [1, (2, 3)]}, leaves)
        del leaves, packed
        assert [r() for r in refs] == [None] * 3
    finally:
        if enabled:
            gc.enable()
