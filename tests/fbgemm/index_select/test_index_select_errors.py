"""Bad input to the index-select family: an error naming the op and the argument, never a crash,
a hang or a wrong result (including inputs upstream's kernels crash or hang on); mixed devices
refused; ``FBGEMM_NPU_VALIDATE=0`` switching the data checks off and nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing.index_select_inputs import (
    HASH_SIZE_CUMSUM,
    HASH_SIZE_OFFSETS,
    INDICES,
    INPUT_OFFSETS,
    KEYED_LENGTHS,
    KEYED_OFFSETS,
    KEYED_VALUES,
    LENGTHS,
    OUTPUT_OFFSETS,
    TABLES,
    UNIQUE_INDICES,
    UNIQUE_OFFSETS,
    VALUES,
    to_npu,
)

F = torch.ops.fbgemm
NPU = "npu"
JIS, V2 = "jagged_index_select", "jagged_index_select_2d_forward_v2"
ADD, KEYED = "jagged_index_add_2d_forward_v2", "keyed_jagged_index_select_dim1"
BIS, GIS = "batch_index_select_dim0", "group_index_select_dim0"
UNIQUE = "jagged_unique_indices"
ROWS_34, COLS_23 = [3, 4], [2, 3]  # the shapes of the two tables in TABLES
BIS_INDICES = torch.tensor([0, 0, 1, 3, 3])
HSC, HSO = HASH_SIZE_CUMSUM, HASH_SIZE_OFFSETS
DISAGREEING_OFFSETS = torch.tensor([0, 1, 3, 5, 6, 10, 11])  # not the cumsum of KEYED_LENGTHS


def _i32(*values: list[int]) -> tuple[torch.Tensor, ...]:
    return tuple(torch.tensor(v, dtype=torch.int32) for v in values)


# id: (op, args (moved to npu), the argument its message must name)
BAD: dict[str, tuple[str, tuple[Any, ...], str]] = {
    "jis_index_out_of_range": (JIS, (VALUES, LENGTHS, torch.tensor([3])), "indices"),
    "jis_negative_index": (JIS, (VALUES, LENGTHS, torch.tensor([-1]), 1), "indices"),
    "jis_lengths_past_values": (JIS, (VALUES, torch.tensor([4, 4]), torch.tensor([0])), "lengths"),
    "jis_negative_lengths": (JIS, (VALUES, torch.tensor([3, -1, 4]), torch.tensor([0])), "lengths"),
    "jis_size_too_large": (JIS, (VALUES, LENGTHS, INDICES, 8), "num_dense_output_rows"),
    "jis_values_1d": (JIS, (VALUES[:, 0], LENGTHS, INDICES), "values"),
    "jis_indices_2d": (JIS, (VALUES, LENGTHS, INDICES.view(3, 1)), "indices"),
    "jis_float_lengths": (JIS, (VALUES, LENGTHS.float(), INDICES), "lengths"),
    "jis_no_size_no_index": (JIS, (VALUES, LENGTHS, INDICES[:0]), "indices"),
    "v2_offsets_decrease": (
        V2,
        (VALUES, INDICES, INPUT_OFFSETS, torch.tensor([3, 1, 4])),
        "output_offsets",
    ),
    "v2_offsets_wrong_length": (
        V2,
        (VALUES, INDICES, INPUT_OFFSETS, OUTPUT_OFFSETS[:2]),
        "output_offsets",
    ),
    "v2_int32_offsets": (
        V2,
        (VALUES, INDICES, INPUT_OFFSETS.int(), OUTPUT_OFFSETS),
        "input_offsets",
    ),
    "v2_float64_values": (V2, (VALUES.double(), INDICES, INPUT_OFFSETS, OUTPUT_OFFSETS), "values"),
    "v2_size_past_offsets": (
        V2,
        (VALUES, INDICES, INPUT_OFFSETS, OUTPUT_OFFSETS, 9),
        "num_dense_output_rows",
    ),
    "v2_reads_past_values": (
        V2,
        (VALUES, INDICES, torch.tensor([1, 3, 9]), torch.tensor([6, 7, 13])),
        "input_offsets",
    ),
    "add_index_out_of_range": (
        ADD,
        (torch.ones(7, 2), torch.tensor([2, 0, 3]), OUTPUT_OFFSETS, INPUT_OFFSETS, 6, 7),
        "indices",
    ),
    "add_offsets_short": (
        ADD,
        (torch.ones(9, 2), INDICES, OUTPUT_OFFSETS, INPUT_OFFSETS, 6, 9),
        "input_offsets",
    ),
    "keyed_offsets_disagree": (
        KEYED,
        (KEYED_VALUES, KEYED_LENGTHS, DISAGREEING_OFFSETS, torch.tensor([0]), 3),
        "offsets",
    ),
    "keyed_index_out_of_range": (
        KEYED,
        (KEYED_VALUES, KEYED_LENGTHS, KEYED_OFFSETS, torch.tensor([3]), 3),
        "indices",
    ),
    "keyed_batch_size": (
        KEYED,
        (KEYED_VALUES, KEYED_LENGTHS, KEYED_OFFSETS, torch.tensor([0]), 4),
        "batch_size",
    ),
    "keyed_offsets_length": (
        KEYED,
        (KEYED_VALUES, KEYED_LENGTHS, KEYED_OFFSETS[:-1], torch.tensor([0]), 3),
        "offsets",
    ),
    "keyed_weights_length": (
        KEYED,
        (KEYED_VALUES, KEYED_LENGTHS, KEYED_OFFSETS, torch.tensor([0]), 3, KEYED_VALUES[:-1]),
        "weights",
    ),
    "keyed_sum_too_large": (
        KEYED,
        (KEYED_VALUES, KEYED_LENGTHS, KEYED_OFFSETS, torch.tensor([0]), 3, None, 9),
        "selected_lengths_sum",
    ),
    # upstream's CUDA kernel truncates the values to a smaller sum: refused, as every size is
    "keyed_sum_too_small": (
        KEYED,
        (KEYED_VALUES, KEYED_LENGTHS, KEYED_OFFSETS, torch.tensor([2, 0]), 3, None, 3),
        "selected_lengths_sum",
    ),
    "keyed_sum_too_small_weighted": (
        KEYED,
        (KEYED_VALUES, KEYED_LENGTHS, KEYED_OFFSETS, torch.tensor([2, 0]), 3, KEYED_VALUES, 0),
        "selected_lengths_sum",
    ),
    "bis_index_out_of_range": (
        BIS,
        (TABLES, torch.tensor([3, 0, 1, 3, 3]), [2, 3], ROWS_34, COLS_23),
        "indices",
    ),
    "bis_negative_index": (
        BIS,
        (TABLES, torch.tensor([0, 0, 1, 3, -1]), [2, 3], ROWS_34, COLS_23),
        "indices",
    ),
    "bis_indices_length": (
        BIS,
        (TABLES, torch.tensor([0, 0, 1]), [2, 3], ROWS_34, COLS_23),
        "indices",
    ),
    "bis_list_length": (BIS, (TABLES, BIS_INDICES, [2, 3], ROWS_34, [2]), "input_columns"),
    "bis_inputs_size": (BIS, (TABLES[:-1], BIS_INDICES, [2, 3], ROWS_34, COLS_23), "inputs"),
    "bis_inputs_2d": (BIS, (TABLES.view(2, 9), BIS_INDICES, [2, 3], ROWS_34, COLS_23), "inputs"),
    "bis_permute_counts": (
        BIS,
        (TABLES, BIS_INDICES, [2, 3], ROWS_34, COLS_23, True),
        "input_num_indices",
    ),
    "gis_index_out_of_range": (
        GIS,
        ([VALUES, VALUES], [torch.tensor([6]), torch.tensor([0])]),
        "indices_group",
    ),
    "gis_single_out_of_range": (GIS, ([VALUES], [torch.tensor([-1])]), "indices_group"),
    "gis_more_indices": (GIS, ([VALUES], [INDICES, INDICES]), "indices_group"),
    "gis_float_indices": (GIS, ([VALUES, VALUES], [INDICES, INDICES.float()]), "indices_group"),
    "or_decreasing": ("offsets_range", (torch.tensor([0, 3, 2]), 5), "offsets"),
    "or_not_from_zero": ("offsets_range", (torch.tensor([1, 3]), 5), "offsets"),
    "or_past_range": ("offsets_range", (torch.tensor([0, 3, 6]), 5), "offsets"),
    "or_2d": ("offsets_range", (torch.tensor([[0, 3]]), 5), "offsets"),
    "lr_negative": ("lengths_range", (torch.tensor([2, -1, 3]),), "t_in"),
    "lr_shape_mismatch": ("lengths_range", (torch.tensor([2, 0, 3]), [6]), "shape"),
    "lr_float": ("lengths_range", (torch.tensor([2.0]),), "t_in"),
    "lro_dtype": (
        "lengths_range_out",
        (torch.empty(5, dtype=torch.int32), torch.tensor([2, 3])),
        "output",
    ),
    "ssc_decreasing": ("segment_sum_csr", (1, torch.tensor([0, 3, 1]), torch.ones(4)), "csr_seg"),
    "ssc_past_values": ("segment_sum_csr", (2, torch.tensor([0, 3]), torch.ones(5)), "csr_seg"),
    "ssc_negative_start": ("segment_sum_csr", (1, torch.tensor([-1, 3]), torch.ones(5)), "csr_seg"),
    "ssc_float64": ("segment_sum_csr", (1, torch.tensor([0, 3]), torch.ones(5).double()), "values"),
    "ssc_empty_csr": (
        "segment_sum_csr",
        (1, torch.zeros(0, dtype=torch.int64), torch.ones(5)),
        "csr_seg",
    ),
    "uniq_offsets_end": (UNIQUE, (HSC, HSO, UNIQUE_OFFSETS, UNIQUE_INDICES[:-1]), "offsets"),
    "uniq_offsets_decrease": (
        UNIQUE,
        (HSC, HSO, torch.tensor([0, 2, 3, 1, 6, 7, 9]), UNIQUE_INDICES),
        "offsets",
    ),
    "uniq_dtypes": (UNIQUE, (HSC.int(), HSO, UNIQUE_OFFSETS, UNIQUE_INDICES), "hash_size_cumsum"),
    "uniq_groups": (
        UNIQUE,
        (HSC, torch.tensor([0, 1, 1, 2]), UNIQUE_OFFSETS, UNIQUE_INDICES),
        "hash_size_offsets",
    ),
    "uniq_batch": (UNIQUE, (HSC, HSO, UNIQUE_OFFSETS[:-1], UNIQUE_INDICES[:-2]), "offsets"),
    # ids below hsc[0] belong to no group (ids past hsc[T] are the last feature's: parity);
    # before the first feature, or wrapped in int32
    "uniq_before_first_feature": (
        UNIQUE,
        (HSC, HSO, UNIQUE_OFFSETS, torch.tensor([-1, 3, 9, 1, 1, 4, 2, 14, 0])),
        "indices",
    ),
    "uniq_int32_wrap": (UNIQUE, _i32([0, 5, 10], [0, 1, 2], [0, 1, 2], [1, 2**31 - 1]), "indices"),
    # sizes no memory holds: the allocator's own error named neither op nor argument (fuzz)
    "add_unallocatable": (
        ADD,
        (torch.ones(7, 2), INDICES, OUTPUT_OFFSETS, INPUT_OFFSETS, 2**40, 7),
        "num_output_rows",
    ),
    "v2_unallocatable": (
        V2,
        (VALUES, INDICES, INPUT_OFFSETS, OUTPUT_OFFSETS, 2**40),
        "num_dense_output_rows",
    ),
    "or_unallocatable": ("offsets_range", (torch.tensor([0, 3]), 2**40), "range_size"),
    "uniq_negative_hash_start": (
        UNIQUE,
        (torch.tensor([-5, 10, 15, 30]), HSO, UNIQUE_OFFSETS, UNIQUE_INDICES + 5),
        "hash_size_cumsum",
    ),
    # the merged keys (id * (T + 2) + T + 1) must stay in int64
    "uniq_keys_past_int64": (
        UNIQUE,
        (torch.tensor([0, 2**62]), torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([5])),
        "hash_size_cumsum",
    ),
    # int64 lengths the int32 scans would narrow to valid-looking ones (2**32 + 1 -> 1)
    "lr_narrowed_length": ("lengths_range", (torch.tensor([2**32 + 1]), [1]), "t_in"),
    "jis_narrowed_length": (JIS, (VALUES, torch.tensor([2**32 + 2, 1, 3]), INDICES), "lengths"),
    # int64 lengths summing to a size no memory holds (the int64 route): named, not the
    # allocator's words
    "lr_unallocatable": ("lengths_range", (torch.tensor([2**40, 3]),), "t_in"),
    "lr_out_unallocatable_shape": (
        "lengths_range_out",
        (torch.tensor([0]), torch.tensor([1, 2]), [2**20, 2**20]),
        "shape",
    ),
    # int32 lengths sum within int32: a shape past it is refused by name (fuzz)
    "lr_int32_shape_past_2_31": (
        "lengths_range",
        (torch.tensor([1, 2], dtype=torch.int32), [2**20, 2**20]),
        "shape",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_names_op_and_argument(case: str) -> None:
    name, args, arg = BAD[case]
    # the argument, or an element of it ('indices_group[1]')
    with pytest.raises((ValueError, RuntimeError), match=rf"fbgemm::{name}: .*'{arg}[\['\]]"):
        getattr(F, name)(*to_npu(*args))
        fbgemm_npu.check()  # where a caller reads the result: a deferred data check raises


# one argument left on the host in each call
MIXED_DEVICES: dict[str, Callable[[], Any]] = {
    JIS: lambda: F.jagged_index_select(VALUES.to(NPU), LENGTHS, INDICES.to(NPU)),
    BIS: lambda: F.batch_index_select_dim0(TABLES.to(NPU), BIS_INDICES, [2, 3], ROWS_34, COLS_23),
    GIS: lambda: F.group_index_select_dim0([VALUES.to(NPU), VALUES], [INDICES.to(NPU)] * 2),
    "segment_sum_csr": lambda: F.segment_sum_csr(
        1, torch.tensor([0, 2]), torch.ones(3, device=NPU)
    ),
    UNIQUE: lambda: F.jagged_unique_indices(
        *to_npu(HSC), HSO, *to_npu(UNIQUE_OFFSETS, UNIQUE_INDICES)
    ),
}


@pytest.mark.parametrize("op", list(MIXED_DEVICES))
def test_mixed_devices_refused(op: str) -> None:
    with pytest.raises(
        RuntimeError, match=rf"fbgemm::{op}: arguments .* must be on the same device"
    ):
        MIXED_DEVICES[op]()


def test_data_checks_can_be_switched_off(no_validation: None) -> None:
    """With FBGEMM_NPU_VALIDATE=0 the data checks do not run (the kernels trust their inputs);
    metadata checks still do."""
    args = to_npu(KEYED_VALUES, KEYED_LENGTHS, DISAGREEING_OFFSETS, torch.tensor([0]))
    F.keyed_jagged_index_select_dim1(*args, 3)  # unchecked: no error
    with pytest.raises(ValueError, match="fbgemm::offsets_range: argument 'offsets' must be 1-D"):
        F.offsets_range(torch.tensor([[0, 3]], device=NPU), 5)


# int32 offsets / lengths whose running sums pass 2**31: a difference or a cumsum of them wraps
# and looked like valid data to the checks (offsets_range then crashed the process, others read
# out of bounds, allocated by a wrapped size or returned a wrong result).  Each call as source
# for a child process, M = 2**31: (call, the argument the error must name).
WRAPPED: dict[str, tuple[str, str]] = {
    "offsets_range": ("F.offsets_range(I([0, M - 1, -M + 5]), 10)", "offsets"),
    "offsets_range_back_in_range": ("F.offsets_range(I([0, M - 1, -M + 5, 4]), 10)", "offsets"),
    "offsets_range_int32_size": ("F.offsets_range(I([0]), M + 5)", "range_size"),
    "lengths_range": ("F.lengths_range(I([M - 1, M - 1, 4]))", "t_in"),
    "lengths_range_shape": ("F.lengths_range(I([M - 1, M - 1, 4]), [2])", "t_in"),
    "lengths_range_out": ("F.lengths_range_out(I([0]), I([M - 1, M - 1, 4]), [2])", "t_in"),
    "segment_sum_csr": ("F.segment_sum_csr(1, I([0, M - 1, -M + 5, 4]), V(10))", "csr_seg"),
    "jagged_index_select": (
        "F.jagged_index_select(V(10, 2), I([M - 1, M - 1, 4]), L([2]))",
        "lengths",
    ),
    "jagged_index_select_size": (
        "F.jagged_index_select(V(10, 2), I([M - 1, M - 1, 4]), L([2]), 4)",
        "lengths",
    ),
    "keyed": (
        "F.keyed_jagged_index_select_dim1(V(10), I([M - 1, M - 1, 4]), I([0, M - 1, -2, 2]), "
        "I([2]), 3)",
        "offsets",
    ),
    "keyed_size": (
        "F.keyed_jagged_index_select_dim1(V(10), I([M - 1, M - 1, 4]), I([0, M - 1, -2, 2]), "
        "I([2]), 3, None, 4)",
        "offsets",
    ),
    "unique_offsets": (
        "F.jagged_unique_indices(I([0, 10]), I([0, 1]), I(WRAP), I([1, 2, 3, 4]))",
        "offsets",
    ),
    "unique_hash_size_cumsum": (
        "F.jagged_unique_indices(I([0, M - 1, -M + 5]), I([0, 1, 2]), I([0, 2, 4]), "
        "I([1, 2, 3, 4]))",
        "hash_size_cumsum",
    ),
    "unique_hash_size_offsets": (
        "F.jagged_unique_indices(I([0, 1, 2, 3]), I([0, M - 1, -M + 5, 3]), I([0, 1, 2, 4]), "
        "I([1, 2, 3, 4]))",
        "hash_size_offsets",
    ),
}
_CHILD = """
import json, sys, torch
import fbgemm_npu
from fbgemm_npu.testing import simulate
simulate()
F, M = torch.ops.fbgemm, 2**31
WRAP = [0, M - 1, -M + 5, 4]
I = lambda v: torch.tensor(v, dtype=torch.int32, device="npu")
L = lambda v: torch.tensor(v, dtype=torch.int64, device="npu")
V = lambda *shape: torch.ones(shape, device="npu")
out = {}
for name, call in json.loads(sys.argv[1]).items():
    try:
        eval(call)
        fbgemm_npu.check()
        out[name] = None
    except Exception as exc:
        out[name] = [type(exc).__name__, str(exc)]
print(json.dumps(out))
"""


def run_child(calls: dict[str, str]) -> dict[str, Any]:
    """Each call's ``[exception type, message]`` (None: no error), run in a child process: a
    kernel that crashes must fail this test, not kill pytest."""
    repo = Path(__file__).resolve().parents[3]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(calls)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"the child died (rc {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_wrapped_int32_offsets_are_refused_without_a_crash() -> None:
    results = run_child({name: call for name, (call, _) in WRAPPED.items()})
    for name, (_, arg) in WRAPPED.items():
        op = WRAPPED[name][0].split("(")[0].removeprefix("F.")
        got = results[name]
        assert got is not None, f"{name}: no error"
        kind, message = got
        assert kind in ("ValueError", "RuntimeError"), f"{name}: {kind}: {message}"
        assert f"fbgemm::{op}: " in message and f"'{arg}'" in message, f"{name}: {message}"
