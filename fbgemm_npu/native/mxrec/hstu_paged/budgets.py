"""Budgets of the paged HSTU family: a setup paid once plus a count per query tile (``per="tile"``:
``t`` query rows of every batch and head at once, ``t`` from ``_attention.tile_rows``), measured
by ``tests/mxrec/hstu_paged/test_hstu_paged_budgets.py`` (the most over float16 / float32, mask
types 0 / 2 / 3, a bias, sizes given or read back).

Setup: the metadata casts, the page lengths and the ONE page gather (``mxrec/hstu/_paged.py``),
the target rows merged in (path ``targets``), q to the padded layout, the key intervals, the
tile program's transposes and the gather back; 3 more without ``max_seq_len`` (the read).  No
count depends on B, N or the page count.  0 syncs with ``max_seq_len`` and ``max_seq_len_k``
given, 1 without (the contract's read of the longest sequences).  Data checks (queued): the
offsets, ``num_target`` in ``[0, L_q]``, pages (counts, ids, ``last_page_len``), lengths within
the sizes, ``seq_offset_k`` / ``seq_offset_t`` against the pages and counts.  No AI-CPU route.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# fmt: off

_NOTE = (
    "per query tile, after a setup paid once (the page gather, the padded q, the key intervals). "
    "Path 'targets': num_target given (the targets' k / v rows merged after the cache, two key "
    "intervals per row)"
)

BUDGETS: dict[str, Budget] = {
    # Triton path (hstu/_triton_attention.py, kernel mode triton, checks off, any dtype / tile
    # count): the setup without the tile layout + the fused kernels (fwd 1, bwd 2);
    # tests/triton/test_triton_hstu_budgets.py
    # float16, bias + alpha, unsized (the read: 3 more), 1 tile: 52 = 43 + 9; each further tile
    # 7-9 (custom mask + bias 9); targets: 78 = 66 + 12, each further tile 7-12 (bias 12)
    "mxrec::hstu_paged": Budget(
        launches=10, setup=43, checks=20, ai_cpu=0, syncs_unsized=1, per="tile",
        paths={"targets": 12}, path_setup={"targets": 66}, path_checks={"targets": 27},
        note=_NOTE,
        triton={"call": 38, "unmasked": 36, "targets": 60, "targets_unmasked": 49},
    ),
}
