"""quantize_float's refusals: each bad input raises ValueError / RuntimeError naming the op and
the argument (upstream raises RuntimeError for the dtypes and ranks it refuses; ours also refuse
the formats whose bytes upstream's bit tricks garble: ``_hfp8.py``)."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native.fbgemm.quantize_float import (
    bfloat16,
    fp8_rowwise,
    hfp8,
    padded,
    padded_dequant,
)

F = torch.ops.fbgemm
NPU = "npu"
X = torch.randn(3, 8)
B = torch.zeros(3, 16, dtype=torch.uint8)

BAD = {
    "bf16 float16": (
        lambda: F.FloatToBfloat16Quantized(X.half().to(NPU)),
        "FloatToBfloat16Quantized",
        "input",
    ),
    "bf16 float64": (
        lambda: F.FloatToBfloat16Quantized(X.double().to(NPU)),
        "FloatToBfloat16Quantized",
        "input",
    ),
    "bf16 back float32": (
        lambda: F.Bfloat16QuantizedToFloat(X.to(NPU)),
        "Bfloat16QuantizedToFloat",
        "input",
    ),
    "bf16 back int16": (
        lambda: F.Bfloat16QuantizedToFloat(X.to(NPU).to(torch.int16)),
        "Bfloat16QuantizedToFloat",
        "input",
    ),
    "hfp8 float16": (
        lambda: F.FloatToHFP8Quantized(X.half().to(NPU), 4, 15, 1.0),
        "FloatToHFP8Quantized",
        "input",
    ),
    "hfp8 1-D": (
        lambda: F.FloatToHFP8Quantized(X[0].to(NPU), 4, 15, 1.0),
        "FloatToHFP8Quantized",
        "input",
    ),
    "hfp8 3-D": (
        lambda: F.FloatToHFP8Quantized(X.view(3, 2, 4).to(NPU), 4, 15, 1.0),
        "FloatToHFP8Quantized",
        "input",
    ),
    "hfp8 ebits 0": (
        lambda: F.FloatToHFP8Quantized(X.to(NPU), 0, 15, 1.0),
        "FloatToHFP8Quantized",
        "ebits",
    ),
    "hfp8 ebits 8": (
        lambda: F.FloatToHFP8Quantized(X.to(NPU), 8, 15, 1.0),
        "FloatToHFP8Quantized",
        "ebits",
    ),
    "hfp8 bias -1": (
        lambda: F.FloatToHFP8Quantized(X.to(NPU), 4, -1, 1.0),
        "FloatToHFP8Quantized",
        "exponent_bias",
    ),
    "hfp8 bias 124": (
        lambda: F.FloatToHFP8Quantized(X.to(NPU), 4, 124, 1.0),
        "FloatToHFP8Quantized",
        "exponent_bias",
    ),
    "hfp8 max_pos -1": (
        lambda: F.FloatToHFP8Quantized(X.to(NPU), 4, 15, -1.0),
        "FloatToHFP8Quantized",
        "max_pos",
    ),
    "hfp8 max_pos inf": (
        lambda: F.FloatToHFP8Quantized(X.to(NPU), 4, 15, float("inf")),
        "FloatToHFP8Quantized",
        "max_pos",
    ),
    "hfp8 max_pos nan": (
        lambda: F.FloatToHFP8Quantized(X.to(NPU), 4, 15, float("nan")),
        "FloatToHFP8Quantized",
        "max_pos",
    ),
    "hfp8 max_pos 1e40": (
        lambda: F.FloatToHFP8Quantized(X.to(NPU), 4, 15, 1e40),
        "FloatToHFP8Quantized",
        "max_pos",
    ),
    "hfp8 max_pos tiny": (
        lambda: F.FloatToHFP8Quantized(X.to(NPU), 4, 15, 1e-40),
        "FloatToHFP8Quantized",
        "max_pos",
    ),
    "hfp8 back int8": (
        lambda: F.HFP8QuantizedToFloat(B.to(torch.int8).to(NPU), 4, 15),
        "HFP8QuantizedToFloat",
        "input",
    ),
    "hfp8 back 1-D": (
        lambda: F.HFP8QuantizedToFloat(B[0].to(NPU), 4, 15),
        "HFP8QuantizedToFloat",
        "input",
    ),
    "hfp8 back ebits": (
        lambda: F.HFP8QuantizedToFloat(B.to(NPU), 9, 15),
        "HFP8QuantizedToFloat",
        "ebits",
    ),
    "hfp8 back bias": (
        lambda: F.HFP8QuantizedToFloat(B.to(NPU), 4, 500),
        "HFP8QuantizedToFloat",
        "exponent_bias",
    ),
    "fp8 float64": (
        lambda: F.FloatToFP8RowwiseQuantized(X.double().to(NPU), True),
        "FloatToFP8RowwiseQuantized",
        "t",
    ),
    "fp8 int32": (
        lambda: F.FloatToFP8RowwiseQuantized(X.int().to(NPU), True),
        "FloatToFP8RowwiseQuantized",
        "t",
    ),
    "fp8 0-D": (
        lambda: F.FloatToFP8RowwiseQuantized(X[0, 0].to(NPU), True),
        "FloatToFP8RowwiseQuantized",
        "t",
    ),
    "fp8 back float32": (
        lambda: F.FP8RowwiseQuantizedToFloat(X.to(NPU), True),
        "FP8RowwiseQuantizedToFloat",
        "input",
    ),
    "fp8 back 0-D": (
        lambda: F.FP8RowwiseQuantizedToFloat(B[0, 0].to(NPU), True),
        "FP8RowwiseQuantizedToFloat",
        "input",
    ),
    "fp8 back 7 cols": (
        lambda: F.FP8RowwiseQuantizedToFloat(B[:, :7].to(NPU), True),
        "FP8RowwiseQuantizedToFloat",
        "input",
    ),
    "fp8 back 13 cols": (
        lambda: F.FP8RowwiseQuantizedToFloat(B[:, :13].to(NPU), True),
        "FP8RowwiseQuantizedToFloat",
        "input",
    ),
    "fp8 back 4 cols": (
        lambda: F.FP8RowwiseQuantizedToFloat(B[:, :4].to(NPU), True),
        "FP8RowwiseQuantizedToFloat",
        "input",
    ),
    "fp8 back dtype 2": (
        lambda: F.FP8RowwiseQuantizedToFloat(B.to(NPU), True, 2),
        "FP8RowwiseQuantizedToFloat",
        "output_dtype",
    ),
    "fp8 back dtype -1": (
        lambda: F.FP8RowwiseQuantizedToFloat(B.to(NPU), True, -1),
        "FP8RowwiseQuantizedToFloat",
        "output_dtype",
    ),
    "padded float64": (
        lambda: F.FloatToPaddedFP8RowwiseQuantized(X.double().to(NPU), True, 4),
        "FloatToPaddedFP8RowwiseQuantized",
        "t",
    ),
    "padded 0-D": (
        lambda: F.FloatToPaddedFP8RowwiseQuantized(X[0, 0].to(NPU), True, 4),
        "FloatToPaddedFP8RowwiseQuantized",
        "t",
    ),
    "padded row_dim 0": (
        lambda: F.FloatToPaddedFP8RowwiseQuantized(X.to(NPU), True, 0),
        "FloatToPaddedFP8RowwiseQuantized",
        "row_dim",
    ),
    "padded row_dim 6": (
        lambda: F.FloatToPaddedFP8RowwiseQuantized(X.to(NPU), True, 6),
        "FloatToPaddedFP8RowwiseQuantized",
        "row_dim",
    ),
    "padded row_dim -4": (
        lambda: F.FloatToPaddedFP8RowwiseQuantized(X.to(NPU), True, -4),
        "FloatToPaddedFP8RowwiseQuantized",
        "row_dim",
    ),
    "padded back 13 cols": (
        lambda: F.PaddedFP8RowwiseQuantizedToFloat(B[:, :13].to(NPU), True, 4),
        "PaddedFP8RowwiseQuantizedToFloat",
        "input",
    ),
    "padded back float32": (
        lambda: F.PaddedFP8RowwiseQuantizedToFloat(X.to(NPU), True, 4),
        "PaddedFP8RowwiseQuantizedToFloat",
        "input",
    ),
    "padded back row_dim 5": (
        lambda: F.PaddedFP8RowwiseQuantizedToFloat(B[:, :13].to(NPU), True, 5),
        "PaddedFP8RowwiseQuantizedToFloat",
        "row_dim",
    ),
    "padded back dtype 3": (
        lambda: F.PaddedFP8RowwiseQuantizedToFloat(B[:, :12].to(NPU), True, 4, -1, 3),
        "PaddedFP8RowwiseQuantizedToFloat",
        "output_dtype",
    ),
}


def _padded_rows(tag: int) -> torch.Tensor:
    q = F.FloatToPaddedFP8RowwiseQuantized(torch.randn(3, 8).to(NPU), True, 4).cpu()
    q.view(3, 2, 12)[1, 1, 8:] = torch.tensor([tag], dtype=torch.int32).view(torch.uint8)
    return q


@pytest.mark.parametrize("tag", [5, 2**30])
def test_padded_dequantize_refuses_tags_past_row_dim(tag: int) -> None:
    """Upstream's kernel writes row_dim - pad < 0 values and shifts the next bucket's output
    onto this one's: ours names the argument (a queued data check, read at the next read)."""
    with pytest.raises(
        (ValueError, RuntimeError), match="PaddedFP8RowwiseQuantizedToFloat.*'input'"
    ):
        F.PaddedFP8RowwiseQuantizedToFloat(_padded_rows(tag).to(NPU), True, 4, 8).cpu()
        fbgemm_npu.check()


def test_padded_dequantize_refuses_rows_that_do_not_fill_the_output() -> None:
    """A row keeping fewer (a hand-made pad) or more values than output_last_dim: upstream
    leaves output unwritten or writes into the next row."""
    for rows, last in ((_padded_rows(2), 8), (_padded_rows(0), 7)):
        with pytest.raises(RuntimeError, match="PaddedFP8RowwiseQuantizedToFloat.*keep"):
            F.PaddedFP8RowwiseQuantizedToFloat(rows.to(NPU), True, 4, last).cpu()
            fbgemm_npu.check()


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_names_op_and_argument(name: str) -> None:
    call, op, arg = BAD[name]
    with pytest.raises((ValueError, RuntimeError)) as info:
        call()
    assert op in str(info.value) and f"'{arg}'" in str(info.value), str(info.value)


@pytest.mark.parametrize(
    "kernel",
    [
        lambda v: bfloat16.float_to_bfloat16_npu(v),
        lambda v: bfloat16.bfloat16_to_float_npu(v),
        lambda v: hfp8.float_to_hfp8_npu(v, 4, 15, 1.0),
        lambda v: hfp8.hfp8_to_float_npu(v, 4, 15),
        lambda v: fp8_rowwise.float_to_fp8_rowwise_npu(v, True),
        lambda v: fp8_rowwise.fp8_rowwise_to_float_npu(v, True),
        lambda v: padded.float_to_padded_fp8_rowwise_npu(v, True, 4),
        lambda v: padded_dequant.padded_fp8_rowwise_to_float_npu(v, True, 4),
    ],
)
@pytest.mark.parametrize("value", [None, [1.0, 2.0], 3.0])
def test_non_tensor_inputs_are_refused_by_name(kernel: object, value: object) -> None:
    with pytest.raises(ValueError, match="must be a Tensor"):
        kernel(value)  # type: ignore[operator]


def test_valid_edge_arguments_are_accepted() -> None:
    """The ends of the accepted ranges run and equal upstream."""
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    for args in ((1, 0, 0.0), (7, 126, 2.0**100), (4, 123, 2.0**-126)):
        got = F.FloatToHFP8Quantized(x.to(NPU), *args).cpu()
        assert torch.equal(got, F.FloatToHFP8Quantized(x, *args))


HUGE = [  # a stride-0 input of 2**40 rows: every check passes, the output cannot be allocated
    ("FloatToBfloat16Quantized", "'input'", lambda x, q: F.FloatToBfloat16Quantized(x)),
    ("Bfloat16QuantizedToFloat", "'input'", lambda x, q: F.Bfloat16QuantizedToFloat(x[:, 8:])),
    ("FloatToHFP8Quantized", "'input'", lambda x, q: F.FloatToHFP8Quantized(x, 4, 15, 1.875)),
    ("HFP8QuantizedToFloat", "'input'", lambda x, q: F.HFP8QuantizedToFloat(q, 4, 15)),
    ("FloatToFP8RowwiseQuantized", "'t'", lambda x, q: F.FloatToFP8RowwiseQuantized(x, True)),
    ("FP8RowwiseQuantizedToFloat", "'input'", lambda x, q: F.FP8RowwiseQuantizedToFloat(q, True)),
    (
        "FloatToPaddedFP8RowwiseQuantized",
        "'t'",
        lambda x, q: F.FloatToPaddedFP8RowwiseQuantized(x, True, 4),
    ),
]


@pytest.mark.parametrize(("op", "arg", "call"), HUGE, ids=[h[0] for h in HUGE])
def test_outputs_that_cannot_be_allocated_are_named(op: str, arg: str, call) -> None:  # noqa: ANN001
    """The allocator's words named neither the op nor the argument (the fuzz suite's finding)."""
    if op == "Bfloat16QuantizedToFloat":  # a bfloat16 one: columns 8: of [1, 16]
        x = torch.ones(1, 16, dtype=torch.bfloat16, device=NPU).expand(2**40, 16)
    else:
        x = torch.ones(1, 8, device=NPU).expand(2**40, 8)
    q = torch.ones(1, 16, dtype=torch.uint8, device=NPU).expand(2**40, 16)
    with pytest.raises(RuntimeError, match=f"{op}: the output of {arg}.* cannot be allocated"):
        call(x, q)


def test_padded_output_last_dim_past_the_codes_is_refused_before_allocating() -> None:
    """``output_last_dim`` of 2**40: refused on the host (no row keeps more than its codes),
    where the queued check used to fire only after the buffer's allocation failed."""
    q = padded.float_to_padded_fp8_rowwise_npu(torch.randn(3, 9, device=NPU), True, 4)
    for cols in (13, 2**40):
        with pytest.raises(ValueError, match="PaddedFP8RowwiseQuantizedToFloat.*output_last_dim"):
            F.PaddedFP8RowwiseQuantizedToFloat(q, True, 4, cols, 0)
    rows = torch.ones(1, 0, dtype=torch.uint8, device=NPU).expand(2**40, 0)
    with pytest.raises(RuntimeError, match="'output_last_dim' cannot be allocated"):
        F.PaddedFP8RowwiseQuantizedToFloat(rows, True, 4, 2**20, 0)


def test_dequantize_one_row_at_any_offset_and_transposed_rows() -> None:
    """One row of one bucket is a contiguous slice at any storage offset (the scale's float32
    view refused it); transposed rows reached a ``view(-1)`` of the values (refused): both were
    fuzz findings, both equal the references now."""
    from conformance.specs.fbgemm.quantize_float.reference import (
        fp8_rowwise_dequantize,
        fp8_rowwise_quantize,
        padded_fp8_rowwise_dequantize,
        padded_fp8_rowwise_quantize,
    )

    x = torch.randn(3)
    for q, dq, ref in (
        (fp8_rowwise_quantize(x, True), F.FP8RowwiseQuantizedToFloat, fp8_rowwise_dequantize),
        (
            padded_fp8_rowwise_quantize(x, True, 4),
            lambda t, f: F.PaddedFP8RowwiseQuantizedToFloat(t, f, 4),
            lambda t, f: padded_fp8_rowwise_dequantize(t, f, 4),
        ),
    ):
        buf = torch.zeros(q.numel() + 3, dtype=torch.uint8)
        buf[3:] = q
        got = dq(buf.to(NPU)[3:], True)  # storage offset 3 on the device
        assert torch.equal(got.cpu(), ref(q, True))
    q = padded_fp8_rowwise_quantize(torch.randn(3, 9), True, 4)
    qt = q.t().contiguous().t()
    got = F.PaddedFP8RowwiseQuantizedToFloat(qt.to(NPU), True, 4)
    assert torch.equal(got.cpu(), padded_fp8_rowwise_dequantize(q, True, 4))
