"""``mxrec::multislice_concat``: Rec SDK's column slices of a 2-D tensor, concatenated per
output.

Schema (Rec SDK, ``multislice_concat.cpp``)::

    multislice_concat(Tensor input, int concat_num, int[] concat_size, int[] slice_begin,
        int[] slice_length) -> (Tensor[])

Math: ``input`` ``[B, D]``; slices ``j = 0 .. J - 1`` (``J = sum(concat_size[:concat_num])``)
are ``input[:, b_j : b_j + l_j]`` (``l_j = -1``: to the end of the row, ``l_j = D - b_j``);
output ``i`` concatenates, along dim 1, the ``concat_size[i]`` slices after those of the
outputs before it::

    out_i = cat([input[:, b_j : b_j + l_j] for j in group i], dim=1)       [B, sum of l_j]

Each output is one ``index_select`` of ``input``'s columns by its own slice of one column index
built on the host (the slice arguments are host ints) and uploaded once (pinned, non-blocking:
no stall).  Outputs are fresh tensors (no views of one buffer).

Arguments: ``concat_num >= 1`` (Rec SDK caps it at 256), ``concat_size`` with at least
``concat_num`` entries, each ``>= 1``; ``slice_begin`` / ``slice_length`` at least ``J``
entries (the first ``J`` are used, as the first ``concat_num`` sizes are), ``0 <= b_j < D``,
``1 <= l_j <= D - b_j`` or ``-1``.  Rec SDK's caps (``B, D <= 65535``, 3600 slices, sizes <=
3600) are its kernel's tiling limits; the math has none, so we accept any sizes.  dtypes:
float16 / float32 / bfloat16 (Rec SDK) and int32 / int64 (a gather is exact for any dtype).
No autograd (Rec SDK registers none).  Launches: 1 per output (``index_select``) + 1 per call
(the upload); no data checks (every argument is a host value), no sync.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._checks import allocation_of, check_dtype, check_ndim, check_tensor
from fbgemm_npu.native._upload import upload

__all__ = ["KERNELS", "MULTISLICE_CONCAT", "SCHEMAS"]

MULTISLICE_CONCAT = "mxrec::multislice_concat"
SCHEMAS = {
    MULTISLICE_CONCAT: "multislice_concat(Tensor input, int concat_num, int[] concat_size, "
    "int[] slice_begin, int[] slice_length) -> (Tensor[])",
}
DTYPES = (torch.float16, torch.float32, torch.bfloat16, torch.int32, torch.int64)


def _plan(
    input: object,
    concat_num: int,
    concat_size: Sequence[int],
    slice_begin: Sequence[int],
    slice_length: Sequence[int],
) -> tuple[torch.Tensor, list[int], list[int]]:
    """Host checks and the plan (no launch): ``(input, columns, widths)``, ``columns`` every
    output's column indices one after the other, ``widths`` each output's column count."""
    op = MULTISLICE_CONCAT
    x = check_dtype(
        op, "input", check_ndim(op, "input", check_tensor(op, "input", input), (2,)), DTYPES
    )
    d = x.size(1)
    if concat_num < 1:
        raise ValueError(f"{op}: argument 'concat_num' must be >= 1, got {concat_num}")
    sizes = [int(s) for s in concat_size]
    if len(sizes) < concat_num:
        raise ValueError(
            f"{op}: argument 'concat_size' must have at least concat_num = {concat_num} "
            f"entries, got {len(sizes)}"
        )
    sizes = sizes[:concat_num]
    if min(sizes) < 1:
        raise ValueError(f"{op}: argument 'concat_size' must hold sizes >= 1, got {min(sizes)}")
    total = sum(sizes)
    for name, seq in (("slice_begin", slice_begin), ("slice_length", slice_length)):
        if len(seq) < total:
            raise ValueError(
                f"{op}: argument '{name}' must have one entry per slice (sum of concat_size = "
                f"{total}), got {len(seq)}"
            )
    columns: list[int] = []
    widths: list[int] = []
    j = 0
    for size in sizes:
        width = 0
        for _ in range(size):
            begin, length = int(slice_begin[j]), int(slice_length[j])
            if not 0 <= begin < d:
                raise ValueError(
                    f"{op}: argument 'slice_begin' must hold columns in [0, {d}) (input has "
                    f"{d} columns), got {begin} for slice {j}"
                )
            length = d - begin if length == -1 else length
            if not 1 <= length <= d - begin:
                raise ValueError(
                    f"{op}: argument 'slice_length' must hold lengths in [1, {d - begin}] or -1 "
                    f"for slice {j} (begin {begin}, {d} columns), got {slice_length[j]}"
                )
            columns.extend(range(begin, begin + length))
            width += length
            j += 1
        widths.append(width)
    return x, columns, widths


def multislice_concat(
    input: torch.Tensor,
    concat_num: int,
    concat_size: Sequence[int],
    slice_begin: Sequence[int],
    slice_length: Sequence[int],
) -> list[torch.Tensor]:
    """PrivateUse1 / CPU: ``concat_num`` tensors ``[B, width_i]`` (1 + 1 per output launches)."""
    x, columns, widths = _plan(input, concat_num, concat_size, slice_begin, slice_length)
    index = upload(columns, torch.int64, x.device)
    outs: list[torch.Tensor] = []
    start = 0
    with allocation_of(
        MULTISLICE_CONCAT,
        f"the outputs of 'concat_size' ({sum(widths)} columns of {x.size(0)} rows)",
    ):
        for width in widths:  # a loop over the outputs the schema returns, not over data
            outs.append(x.index_select(1, index[start : start + width]))
            start += width
    return outs


def _multislice_meta(
    input: torch.Tensor,
    concat_num: int,
    concat_size: Sequence[int],
    slice_begin: Sequence[int],
    slice_length: Sequence[int],
) -> list[torch.Tensor]:
    x, _, widths = _plan(input, concat_num, concat_size, slice_begin, slice_length)
    return [x.new_empty((x.size(0), w)) for w in widths]


KERNELS = {
    MULTISLICE_CONCAT: {
        "PrivateUse1": multislice_concat,
        "CPU": multislice_concat,
        "Meta": _multislice_meta,
    },
}
