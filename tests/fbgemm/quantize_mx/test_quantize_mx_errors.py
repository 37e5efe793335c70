"""Bad arguments of the MX4 ops refused naming the op and the argument: other input dtypes
(upstream reads a float16 group max in float16, where its zero replacement 2**-126 is 0),
group sizes not positive and even, dequantize inputs not a whole number of groups."""

from __future__ import annotations

import pytest
import torch

F = torch.ops.fbgemm
NPU = "npu"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int32])
def test_quantize_refuses_other_dtypes(dtype: torch.dtype) -> None:
    x = torch.ones(4, 32, dtype=dtype, device=NPU)
    with pytest.raises((RuntimeError, ValueError), match="quantize_mx.*input"):
        F.quantize_mx(x, 8, 2, 3, 6.0, 32, None)


@pytest.mark.parametrize("g", [0, -32, 7])
def test_group_size_must_be_positive_and_even(g: int) -> None:
    x = torch.ones(4, 32, device=NPU)
    with pytest.raises((RuntimeError, ValueError), match="quantize_mx.*mx_group_size"):
        F.quantize_mx(x, 8, 2, 3, 6.0, g, None)
    q = torch.zeros(34, dtype=torch.uint8, device=NPU)
    with pytest.raises((RuntimeError, ValueError), match="dequantize_mx.*mx_group_size"):
        F.dequantize_mx(q, g)


def test_dequantize_refuses_partial_groups_and_other_dtypes() -> None:
    with pytest.raises((RuntimeError, ValueError), match="dequantize_mx.*input"):
        F.dequantize_mx(torch.zeros(20, dtype=torch.uint8, device=NPU), 32)
    with pytest.raises((RuntimeError, ValueError), match="dequantize_mx.*input"):
        F.dequantize_mx(torch.zeros(17, dtype=torch.float32, device=NPU), 32)


def test_empty_inputs_give_upstreams_empty_outputs() -> None:
    for shape in ((0,), (0, 32), (3, 0)):
        x = torch.empty(shape)
        want = F.quantize_mx(x, 8, 2, 3, 6.0, 32, None)
        got = F.quantize_mx(x.to(NPU), 8, 2, 3, 6.0, 32, None)
        assert got.shape == want.shape and got.dtype == want.dtype
        q = torch.empty(shape, dtype=torch.uint8)
        assert F.dequantize_mx(q.to(NPU), 32).shape == F.dequantize_mx(q, 32).shape


def test_zero_dim_input_is_refused_by_name() -> None:
    """Upstream's Python indexes ``input.shape[-1]`` (an IndexError naming nothing); ours used
    to quantize a 0-D input as one value (the fuzz suite's finding): refused by name now."""
    with pytest.raises(IndexError):
        F.quantize_mx(torch.tensor(1.5), 8, 2, 3, 6.0, 32, None)
    with pytest.raises(ValueError, match="quantize_mx: argument 'input' must have 1 or more"):
        F.quantize_mx(torch.tensor(1.5, device=NPU), 8, 2, 3, 6.0, 32, None)
    with pytest.raises(ValueError, match="quantize_mx: argument 'input' must have 1 or more"):
        F.quantize_mx(torch.tensor(1.5, device="meta"), 8, 2, 3, 6.0, 32, None)


def test_outputs_that_cannot_be_allocated_are_named() -> None:
    """A stride-0 input of 2**38 rows passes every check; the allocator's words named neither
    the op nor the argument (the fuzz suite's finding)."""
    x = torch.ones(1, 64, device=NPU).expand(2**38, 64)
    with pytest.raises(RuntimeError, match="quantize_mx: the output of 'input' cannot be"):
        F.quantize_mx(x, 8, 2, 3, 6.0, 32, None)
    q = torch.zeros(1, 17, dtype=torch.uint8, device=NPU).expand(2**38, 17)
    with pytest.raises(RuntimeError, match="dequantize_mx: the output of 'input' cannot be"):
        F.dequantize_mx(q, 32)
