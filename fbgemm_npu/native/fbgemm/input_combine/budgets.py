"""Budgets of the input_combine family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/input_combine/test_input_combine_budgets.py``
measures each at two table counts (the counts do not grow with the tables: one ``cat`` per
output over the per-table views).  The main path has weights on some table and
``include_last_offsets`` on the device; ``"no weights"`` drops the weights' ``cat``,
``"flags on the host"`` takes ``include_last_offsets`` as a CPU tensor.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # the read of the flags and last offsets (a cat; the 1 sync: the output size depends on the
    # flags' values), the indices' cat, the offsets' cat, the jumps' upload (pinned,
    # non-blocking), index_add, cumsum, add_, the weights' cat; flags on the host and not all
    # set: no read, no sync (all set: the last offsets are read, 1 sync)
    "fbgemm::tbe_input_combine": Budget(
        launches=8, syncs=1, ai_cpu=0, paths={"no weights": 7, "flags on the host": 7}
    ),
    # one cat per output (into int32 / float32 buffers)
    "fbgemm::tbe_input_combine_with_length": Budget(launches=3, ai_cpu=0, paths={"no weights": 2}),
    # the indices' and weights' cats, the first offset's zero_, the slots' cat, the upload of
    # n_i - 1, E_{i-1}, E_i, the flags' add, the broadcast lt, add, where; checks: the aminmax
    # of the slot limits and the queued check (stack, upload, clamp, eq, all); flags on the
    # host: no add, no check
    "fbgemm::padding_fused_tbe_input_combine": Budget(
        launches=9,
        checks=6,
        ai_cpu=0,
        paths={"no weights": 8, "flags on the host": 8},
        path_checks={"flags on the host": 0},
    ),
    # one cat per output, the lengths' with cached zeros after each table
    "fbgemm::padding_fused_tbe_input_combine_with_length": Budget(
        launches=3, ai_cpu=0, paths={"no weights": 2}
    ),
}
