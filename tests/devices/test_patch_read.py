"""A convolution's read of its patches straight from the image: analog_mvm of the F.unfold rows, bit for bit."""

import numba
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from aimc.devices.patch_read import read_patches
from aimc.devices.periphery import PeripheryConfig, analog_mvm
from aimc.devices.rng import Stream

GEOMETRIES = [  # input (B, C, H, W), kernel, stride, dilation
    ((4, 1, 12, 12), (5, 5), (1, 1), (1, 1)),
    ((3, 5, 11, 13), (3, 2), (2, 1), (2, 3)),
]
PERIPHERIES = [
    PeripheryConfig(),
    PeripheryConfig(noise_management="max", out_bits=None),
    PeripheryConfig(noise_management=False, inp_bits=None, out_noise=0.0),
    PeripheryConfig(out_bound=0.5),  # most rows saturate: bound management re-reads them
]


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("cfg", PERIPHERIES)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_patch_read_equals_the_read_of_the_unfolded_rows(geometry, cfg, channels_last, threads):
    """On one thread in blocks of 128 KiB (here one block), on several in one block."""
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip("Numba was started with fewer threads")
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        _check_patch_read(geometry, cfg, channels_last)
    finally:
        numba.set_num_threads(before)


def _check_patch_read(geometry, cfg, channels_last):
    shape, kernel, stride, dilation = geometry
    torch.manual_seed(0)
    x = torch.randn(shape)
    x = x.contiguous(memory_format=torch.channels_last) if channels_last else x
    rows = F.unfold(x, kernel, dilation, 0, stride).transpose(1, 2).reshape(-1, shape[1] * kernel[0] * kernel[1])
    rows = rows.contiguous().numpy()
    weight = torch.randn(6, rows.shape[1]).numpy() * 0.4
    for cols in (slice(None), slice(2, 9)):
        want_stream, stream = Stream(11), Stream(11)
        want = analog_mvm(np.ascontiguousarray(weight[:, cols]), rows[:, cols], cfg, want_stream)
        y = read_patches(weight[:, cols], x, kernel, stride, dilation, cols, cfg, stream)
        assert np.array_equal(y, want)
        assert stream.counter == want_stream.counter
    if cfg.out_bound < 1:
        assert stream.counter > 1


@pytest.fixture
def one_thread():
    """The kernels on one thread (where the patches are read in blocks), restored afterwards."""
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(before)


def test_patch_read_blocks_join_without_a_seam(monkeypatch, one_thread):
    """Blocks of a few rows (a patch row count that is no multiple of the block) read as the whole batch."""
    import aimc.devices.patch_read as patch_read

    torch.manual_seed(1)
    x = torch.rand(3, 2, 9, 9)
    rows = F.unfold(x, 3).transpose(1, 2).reshape(-1, 18).contiguous().numpy()
    weight = torch.randn(5, 18).numpy()
    want = analog_mvm(weight, rows, PeripheryConfig(), Stream(2))
    monkeypatch.setattr(patch_read, "BLOCK_BYTES", 4 * 18 * 10)  # blocks of 10 rows, 147 rows
    assert np.array_equal(
        read_patches(weight, x, (3, 3), (1, 1), (1, 1), slice(None), PeripheryConfig(), Stream(2)), want
    )


def test_patch_read_refuses_what_it_does_not_read():
    x = torch.rand(1, 1, 4, 4)
    with pytest.raises(ValueError, match="ideal"):
        read_patches(
            np.ones((1, 4), np.float32), x, (2, 2), (1, 1), (1, 1), slice(None), PeripheryConfig.perfect(), Stream(0)
        )
    with pytest.raises(ValueError, match="float32"):
        read_patches(
            np.ones((1, 4), np.float32), x.double(), (2, 2), (1, 1), (1, 1), slice(None), PeripheryConfig(), Stream(0)
        )
