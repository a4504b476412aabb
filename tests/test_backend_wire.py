"""The backend's frame format: exact round trips, and every malformed frame refused with WireError."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from mirrorlab.backend import wire
from mirrorlab.collective.message import AbortNotice, Fingerprint, Header, Message
from mirrorlab import errors

HEADER = Header(seq=3, fingerprint=Fingerprint("all_reduce", "float32", (4, 2), "SUM"), step=1, sender=0,
                site="train.py:12")

arrays = st.sampled_from(wire.ALLOWED_DTYPES).flatmap(
    lambda d: hnp.arrays(np.dtype(d), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)))


@settings(max_examples=150, deadline=None)
@given(array=arrays, group=st.integers(0, 2**31))
def test_message_round_trip_is_bit_exact(array, group):
    frame = wire.decode(wire.encode_message(group, Message(HEADER, array)))
    assert frame.kind == "message" and frame.group == group
    out = frame.message.payload
    assert frame.message.header == HEADER
    assert out.dtype == array.dtype and out.shape == array.shape
    assert out.tobytes() == np.ascontiguousarray(array).tobytes()
    assert not out.flags.writeable


def test_a_packed_all_reduce_fingerprint_round_trips():
    packed = Header(4, Fingerprint("all_reduce", "float32", ((4,), (32, 4), ()), "SUM"), 0, 1, "fit")
    frame = wire.decode(wire.encode_message(0, Message(packed, np.zeros(3, np.float32))))
    assert frame.message.header == packed


def test_abort_and_bye_round_trip():
    notice = AbortNotice.of(2, errors.UnavailableError("worker 1 died"))
    frame = wire.decode(wire.encode_abort(5, notice))
    assert (frame.kind, frame.group, frame.notice) == ("abort", 5, notice)
    assert wire.decode(wire.encode_bye()).kind == "bye"


@settings(max_examples=150, deadline=None)
@given(array=arrays, data=st.data())
def test_every_truncation_is_rejected(array, data):
    encoded = wire.encode_message(0, Message(HEADER, array))
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(wire.WireError, match="truncated|malformed|does not match"):
        wire.decode(encoded[:cut])


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=200) | st.binary(max_size=60).map(lambda b: wire.MAGIC + b))
def test_random_bytes_raise_only_wire_error(blob):
    try:
        wire.decode(blob)
    except wire.WireError:
        pass


def test_oversized_frame_refused_before_parsing():
    encoded = wire.encode_message(0, Message(HEADER, np.zeros(1000, np.float64)))
    with pytest.raises(wire.WireError, match="exceeds the limit of 4096 bytes"):
        wire.decode(encoded, wire.WireLimits(max_bytes=4096))


def test_huge_claimed_shape_is_refused_without_allocating():
    encoded = wire.encode_message(0, Message(HEADER, np.zeros(2, np.float32)))
    head_len = int.from_bytes(encoded[4:8], "big")
    head = encoded[8:8 + head_len].replace(b'"shape":[2]', b'"shape":[99999999999]')
    forged = wire.MAGIC + len(head).to_bytes(4, "big") + head + encoded[8 + head_len:]
    with pytest.raises(wire.WireError, match="does not match float32"):
        wire.decode(forged)


def test_refused_dtype_and_rank():
    encoded = wire.encode_message(0, Message(HEADER, np.zeros(2, np.float32)))
    with pytest.raises(wire.WireError, match="dtype 'float32' is not accepted"):
        wire.decode(encoded, wire.WireLimits(dtypes=("int32",)))
    deep = wire.encode_message(0, Message(HEADER, np.zeros((1,) * 5, np.float32)))
    with pytest.raises(wire.WireError, match="at most 4 dimensions"):
        wire.decode(deep, wire.WireLimits(max_rank=4))


def test_object_arrays_are_never_sent():
    with pytest.raises(wire.WireError, match="cannot send dtype object"):
        wire.encode_message(0, Message(HEADER, np.array([object()])))


@settings(max_examples=200, deadline=None)
@given(frame=st.binary(max_size=300), chunk=st.integers(1, 64))
def test_split_pieces_reassemble_into_the_frame(frame, chunk):
    pieces = list(wire.split(frame, chunk))
    assert all(len(p) <= chunk + wire.PIECE_OVERHEAD for p in pieces)
    joiner = wire.Reassembler()
    assert [joiner.feed(p) for p in pieces] == [None] * (len(pieces) - 1) + [frame]


def test_reassembly_refuses_a_frame_past_the_limit_and_unflagged_items():
    joiner = wire.Reassembler(wire.WireLimits(max_bytes=100))
    pieces = wire.split(bytes(250), 60)
    with pytest.raises(wire.WireError, match="more than 100 bytes exceeds the limit"):
        for piece in pieces:
            joiner.feed(piece)
    with pytest.raises(wire.WireError, match="not a piece flag"):
        wire.Reassembler().feed(b"MLW1")


def test_reassembly_fills_exactly_the_declared_length_of_a_frame():
    pieces = list(wire.split(bytes(range(200)), 60))
    with pytest.raises(wire.WireError, match="first piece is missing"):
        wire.Reassembler().feed(pieces[1])
    with pytest.raises(wire.WireError, match="truncated frame: its pieces carried 80 of the 200 bytes"):
        joiner = wire.Reassembler()
        joiner.feed(pieces[0])
        joiner.feed(pieces[-1])
    with pytest.raises(wire.WireError, match="more than the 200 bytes their frame declared"):
        joiner = wire.Reassembler()
        for piece in pieces[:-1] + [pieces[1], pieces[-1]]:
            joiner.feed(piece)
    with pytest.raises(wire.WireError, match="before the previous one's last piece"):
        joiner = wire.Reassembler()
        joiner.feed(pieces[0])
        joiner.feed(pieces[0])


def test_a_message_cut_from_its_parts_decodes_to_the_same_array():
    array = np.arange(3000, dtype=np.float32).reshape(30, 100)
    joiner = wire.Reassembler()
    frames = [joiner.feed(piece) for piece in wire.split(wire.message_parts(2, Message(HEADER, array)), 1000)]
    assert frames[:-1] == [None] * (len(frames) - 1)
    assert bytes(frames[-1]) == wire.encode_message(2, Message(HEADER, array))
    decoded = wire.decode(frames[-1]).message.payload
    assert decoded.dtype == array.dtype and np.array_equal(decoded, array)
