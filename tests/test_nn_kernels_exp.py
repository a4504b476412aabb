"""``nn_kernels``' exp and log as TF 2.21's CPU kernels give them: Eigen's AVX packet exp/log on full packets of 8,
glibc's ``expf`` on the rest. The expected bits were recorded from TensorFlow 2.21 (``tf.exp``,
``tf.nn.log_softmax``); no TensorFlow needed here."""

import numpy as np
import pytest

from mirrorlab.tf._kernels import nn_kernels


def _f32(bits):
    return np.array(bits, np.uint32).view(np.float32)


def _bits(values):
    return np.asarray(values, np.float32).view(np.uint32)


# tf.exp of 11 values: the first 8 fill a packet (Eigen's pexp_float), the last 3 are scalar (glibc's expf); every
# one differs from the correctly rounded exp.
EXP_IN = [0xc11d818f, 0xc1468d4e, 0xbf15c4f3, 0xc1d71307, 0xc1caca9c, 0x40ad9bf4, 0xc12c61b9, 0xc1f4d25c, 0x40d60888,
    0x40eccca6, 0x40f30ef8]
EXP_OUT = [0x385e8a47, 0x3688e3f8, 0x3f0e9d28, 0x2c147bfe, 0x2d2c5a69, 0x43631399, 0x37afa7eb, 0x2966a89d, 0x4448c999,
    0x44cc7e89, 0x44f8ac18]

# tf.nn.log_softmax of a 9 x 10 matrix (seeded): each row's exp packed from its start (8 in a packet, 2 scalar),
# the log of the first 8 rows' sums in a packet (Eigen's plog_float), the 9th scalar; 21 values differ from the
# correctly rounded log-softmax.
LS_IN = (np.random.default_rng(9010).standard_normal((9, 10)) * 2).astype(np.float32)
LS_OUT = np.array([int(word, 16) for word in """
bfd3fd2f c0a23d5a c08e913a bf6e0450 bfa843f0 c069f1fe c0782dbf c09f2102 c06546f1 c04414d4 c0293e03 c00e473b
c02d3b01 c022d7e8 c09c8877 c0b5ffd6 c048b43a bfd09b0d bff52f25 bfa3f2a8 c0a23a57 c0a2c46c bf8f1fb0 c01065c1
c00d7dea c02843e7 c0b522fa c0a6c821 c0231739 bf9fc695 c0907db0 bfb8bdb7 bfcced0f c095af74 c064cce0 c0783f0e
c06e72fe bf8534bd c07d2a8c c0157846 c0854e0e bfc933f6 c067b077 c07a31cf c05211ac bfda5394 c040bba9 c00ec0ac
bfa860d8 c01d320a c0725cd1 c00e3c13 c07e8162 c07b4196 c039254a c0844394 c09bb341 c0afb318 c085c1b3 be9fc697
c027f40c c07faf5a c0894cde bfae1e86 c015b8da c061493e c0f9f284 bf418f63 c0a0d904 c054152d c0b39a9c c0956ca5
c06ed5c5 c0166187 c0efad62 c007f9fb c0018126 bfee2e38 bf4f622f c0865378 c10a0559 bf999b75 c0931dc3 c0814675
bed8104b c104bd2b c09fcc05 c0dbded5 c0b4a75f c0b3cc48
""".split()], np.uint32).reshape(9, 10)


def test_exp_matches_tensorflow_bits():
    x = _f32(EXP_IN)
    assert np.array_equal(_bits(nn_kernels.exp(x)), np.array(EXP_OUT, np.uint32))
    correctly_rounded = np.exp(x.astype(np.float64)).astype(np.float32)
    assert not np.any(_bits(correctly_rounded) == np.array(EXP_OUT, np.uint32))


def test_exp_packets_count_from_the_first_value_in_c_order():
    x = _f32(EXP_IN)
    grid = np.concatenate([x, x[:5]]).reshape(4, 4)  # 16 values: two full packets, no scalar tail
    flat = nn_kernels.exp(grid).reshape(-1)
    assert np.array_equal(_bits(flat[:8]), np.array(EXP_OUT[:8], np.uint32))
    assert np.array_equal(_bits(flat[8:11]), _bits(nn_kernels._packet_exp(x[8:11])))
    assert np.array_equal(_bits(nn_kernels.exp(grid.T)), _bits(nn_kernels.exp(np.ascontiguousarray(grid.T))))


def test_log_softmax_matches_tensorflow_bits():
    x = LS_IN
    assert np.array_equal(_bits(nn_kernels.log_softmax(x)), np.array(LS_OUT, np.uint32))
    swapped = nn_kernels.log_softmax(np.ascontiguousarray(x.T), axis=0)  # TF swaps the axis with the last
    assert np.array_equal(_bits(swapped.T), np.array(LS_OUT, np.uint32))


def _ulps(a, b):
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


@pytest.mark.parametrize("low, high", [(-87.0, 88.0), (-1.0, 1.0), (-1e-3, 1e-3)])
def test_packet_and_glibc_exp_are_within_two_ulps(low, high):
    x = np.random.default_rng(0).uniform(low, high, 100_000).astype(np.float32)
    exact = np.exp(x.astype(np.float64)).astype(np.float32)
    normal = exact >= np.finfo(np.float32).tiny
    assert _ulps(nn_kernels._packet_exp(x), exact)[normal].max() <= 2
    assert _ulps(nn_kernels._glibc_expf(x), exact)[normal].max() <= 1


def test_packet_log_is_within_two_ulps():
    x = np.random.default_rng(1).uniform(1.0, 1e6, 100_000).astype(np.float32)
    exact = np.log(x.astype(np.float64)).astype(np.float32)
    assert _ulps(nn_kernels._packet_log(x), exact).max() <= 2


def test_special_values():
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 89.0, 88.72, -87.5, -104.5, -200.0, 1e-40], np.float32)
    for fn in (nn_kernels._packet_exp, nn_kernels._glibc_expf):
        got = fn(special)
        assert np.isnan(got[0]) and got[1] == np.inf and got[2] == 0
        assert got[3] == 1 and got[4] == 1 and got[5] == np.inf and np.isfinite(got[6])
        assert np.all(got[7:10] == 0) and got[10] == 1  # below the smallest normal: flushed
    logs = nn_kernels._packet_log(np.array([0.0, 1.0, np.inf, -1.0, np.nan, 2.0], np.float32))
    assert logs[0] == -np.inf and logs[1] == 0 and logs[2] == np.inf and np.isnan(logs[3]) and np.isnan(logs[4])
    assert logs[5] == np.float32(np.log(2.0))


def test_other_dtypes_keep_the_correctly_rounded_exp():
    x = np.linspace(-5, 5, 20)
    assert np.array_equal(nn_kernels.exp(x), np.exp(x))
    half = x.astype(np.float16)
    assert np.array_equal(nn_kernels.exp(half), np.exp(x.astype(np.float16).astype(np.float64)).astype(np.float16))
