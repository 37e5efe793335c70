"""The opcheck gate's stated exceptions (``tests/core/test_opcheck.py``): every (op, check) that
fails, each with its reason -- a limitation of torch's opcheck, of upstream's fake / Meta /
composite kernel or schema (which rule 1 forbids us to replace: we may add a Meta kernel only
where upstream has none), or of an op's contract (named as ours where it is).  Keys: an op (all
its samples) or "op[i]" (its sample i only); values: check -> reason.  The entries are strict
xfails: a case that starts passing (torch or fbgemm_gpu moved) fails until its entry is trimmed.
Kept apart from the test so that the table can grow with the op catalogue.
"""

from __future__ import annotations

__all__ = [
    "AOT",
    "AUTOGRAD",
    "DYNAMIC",
    "FAKE",
    "OPCHECK_UTILS",
    "SCHEMA",
    "STATIC",
    "UTILS",
    "XFAIL",
]

OPCHECK_UTILS = (
    "test_schema",
    "test_faketensor",
    "test_aot_dispatch_static",
    "test_aot_dispatch_dynamic",
)
SCHEMA, FAKE, STATIC, DYNAMIC = OPCHECK_UTILS
AUTOGRAD = "test_autograd_registration"
UTILS = (*OPCHECK_UTILS, AUTOGRAD)
AOT = (STATIC, DYNAMIC)
F = "fbgemm::"


def data_dependent(why: str) -> str:
    return (
        f"opcheck: the output size is data-dependent ({why}): the fake kernel asks "
        "new_dynamic_size(), which static AOT (no ShapeEnv) cannot give"
    )


UPSTREAM_FAKE_ALIASES = (
    "upstream: its fake kernel returns the input offsets as the output offsets (an alias the "
    "schema does not declare); ours returns fresh ones, as the schema says, so the outputs' "
    "aliasing differs (AOT, which refuses aliased custom-op outputs, passes)"
)
XFAIL: dict[str, dict[str, str]] = {
    F + "FloatToFused8BitRowwiseQuantizedOut": dict.fromkeys(
        (SCHEMA, *AOT),
        "upstream: the schema '(Tensor output, Tensor input) -> Tensor' declares no alias or "
        "mutation, yet the kernel resizes 'output' and returns it (ours keeps that behaviour)",
    ),
    F + "Fused8BitRowwiseQuantizedToFloatOut": dict.fromkeys(
        (SCHEMA, *AOT),
        "upstream: the schema '(Tensor output, Tensor input) -> Tensor' declares no alias or "
        "mutation, yet the kernel resizes 'output' and returns it (ours keeps that behaviour)",
    ),
    F + "all_to_one_device[0]": {
        FAKE: "upstream: its fake returns fresh tensors on 'meta' (sparse_ops.py all_to_one_device)"
        ", not on target_device"
    },
    F + "batch_index_select_dim0[2]": dict.fromkeys(
        (FAKE, *AOT),
        "upstream: its fake (sparse_ops.py batch_index_select_dim0_abstract) has no default for "
        "permute_output_dim_0_1, which the dispatcher drops when it is the schema's default",
    ),
    F + "batch_index_select_dim0_tensor": dict.fromkeys(
        AOT,
        "ours reads the three size tensors on the host (their values size the output and the "
        "gather index, as the list form's SymInt[] do); under AOT they are fake, so the read is "
        "data-dependent (upstream's CPU kernel traces through its abstract impl instead)",
    ),
    F + "bottom_k_per_row": {STATIC: data_dependent("k / k_offsets[-1]")},
    F + "dense_to_jagged[1]": {STATIC: data_dependent("total_L omitted")},
    F + "embedding_bag_rowwise_prune[0]": {STATIC: data_dependent("the kept row count")},
    F + "embedding_bag_rowwise_prune[1]": {STATIC: data_dependent("the kept row count")},
    F + "dense_to_jagged_forward[1]": {STATIC: data_dependent("total_L omitted")},
    F + "get_infos_metadata": dict.fromkeys(
        AOT, "upstream: its Meta kernel returns (-1, -1), not (info_B_num_bits, info_B_mask)"
    ),
    F + "jagged_dense_dense_elementwise_add_jagged_output": {FAKE: UPSTREAM_FAKE_ALIASES},
    F + "jagged_dense_elementwise_add_jagged_output": {FAKE: UPSTREAM_FAKE_ALIASES},
    F + "jagged_dense_elementwise_mul": {FAKE: UPSTREAM_FAKE_ALIASES},
    F + "jagged_index_select[1]": {STATIC: data_dependent("num_dense_output_rows omitted")},
    F + "jagged_index_select[2]": {
        STATIC: "upstream: the op's fake goes to jagged_index_select_2d_forward_v2's, which "
        "ignores num_dense_output_rows and asks new_dynamic_size(): impossible in static AOT"
    },
    F + "jagged_index_select_2d_forward_v2": {
        STATIC: "upstream: its fake ignores num_dense_output_rows and asks new_dynamic_size() "
        "(sparse_ops.py), which static AOT (no ShapeEnv) cannot give"
    },
    F + "jagged_unique_indices": {STATIC: data_dependent("the unique count")},
    F + "keyed_jagged_index_select_dim1[0]": {
        STATIC: "upstream: without selected_lengths_sum its fake reads the sum with .item() "
        "(sparse_ops.py keyed_jagged_index_select_dim1_abstract)"
    },
    F + "keyed_jagged_index_select_dim1[2]": {
        STATIC: "upstream: without selected_lengths_sum its fake reads the sum with .item() "
        "(sparse_ops.py keyed_jagged_index_select_dim1_abstract)"
    },
    F + "kt_regroup_arguments": {
        FAKE: "upstream: its Meta kernel returns permutes / in_shapes / out_shapes in embs' dtype "
        "(float32); the real ones are int32"
    },
    F + "lengths_range[0]": {STATIC: data_dependent("shape omitted")},
    F + "lengths_range_out": {
        SCHEMA: "upstream: the schema declares 'Tensor output', not 'Tensor(a!) output', yet the "
        "op writes it and returns it",
        STATIC: data_dependent("shape omitted"),
        DYNAMIC: "upstream: the schema returns its 'output' argument without declaring the alias"
        " (Tensor(a!)), which AOTAutograd refuses for a custom op",
    },
    F + "permute_1D_sparse_data[0]": {STATIC: data_dependent("permuted_lengths_sum omitted")},
    F + "permute_2D_sparse_data[0]": dict.fromkeys(
        AOT,
        "opcheck: aot_autograd_check adds the outputs' sums in place into the first (int64 "
        "lengths), and the float weights' sum cannot be added into it",
    ),
    F + "permute_2D_sparse_data[1]": {STATIC: data_dependent("permuted_lengths_sum omitted")},
    F + "permute_2D_sparse_data_input1D[0]": {
        STATIC: data_dependent("permuted_lengths_sum omitted")
    },
    F + "permute_2D_sparse_preallocated_out": dict.fromkeys(
        AOT,
        "upstream: the schema returns the preallocated outputs as aliases (Tensor(a!)), which "
        "AOTAutograd refuses for a custom op",
    ),
    F + "jagged_1d_to_truncated_values": {
        STATIC: data_dependent("the sum of min(lengths, max_truncated_length)")
    },
    F + "jagged_slice": {STATIC: data_dependent("the sum of the sliced lengths")},
    F + "masked_select_jagged_1d[0]": {STATIC: data_dependent("mask.sum()")},
    F + "masked_select_jagged_1d[1]": dict.fromkeys(
        (FAKE, *AOT),
        "upstream: its fake kernel (sparse_ops.py masked_select_jagged_1d) takes no check_length "
        "argument, which the schema has ('takes 3 positional arguments but 4 were given')",
    ),
    F + "murmur_hash3": dict.fromkeys(
        (FAKE, *AOT),
        "upstream: a CompositeImplicitAutograd kernel runs before any fake / Meta kernel and "
        "checks input.is_cpu(), so a fake tensor of an npu input is refused",
    ),
    F + "pack_segments_v2[0]": dict.fromkeys(
        (FAKE, *AOT),
        "upstream: its Meta kernel gives the presence mask on the CPU, not on the input's device, "
        "and its dynamic trace calls numel() on symbolic sizes",
    ),
    F + "pack_segments_v2[2]": dict.fromkeys(
        (FAKE, *AOT),
        "upstream: its Meta kernel gives the presence mask on the CPU, not on the input's device, "
        "and its dynamic trace calls numel() on symbolic sizes",
    ),
    F + "permute_duplicate_pooled_embs": {STATIC: data_dependent("the widths permute_list picks")},
    F + "permute_duplicate_pooled_embs_split": {
        STATIC: data_dependent("the widths permute_list picks")
    },
    F + "permute_duplicate_pooled_embs_auto_grad": {
        STATIC: data_dependent("the widths permute_list picks")
    },
    F + "permute_duplicate_pooled_embs_auto_grad[0]": dict.fromkeys(
        AOT,
        "upstream: the op has no backward with duplicates ('permute_pooled_embs does not support "
        "allow_duplicates in backward!'), and AOT differentiates the sample; ours raises as "
        "upstream's",
    ),
    F + "permute_duplicate_pooled_embs_auto_grad_split": {
        STATIC: data_dependent("the widths permute_list picks")
    },
    F + "permute_sequence_embeddings": {STATIC: data_dependent("the schema takes no size")},
    F + "PaddedFP8RowwiseQuantizedToFloat[2]": {
        STATIC: data_dependent("the first row's tags (output_last_dim omitted)")
    },
    F + "permute_sparse_data[1]": {STATIC: data_dependent("permuted_lengths_sum omitted")},
    F + "permute_sparse_features": {STATIC: data_dependent("the schema takes no size")},
    "mxrec::fused_lazy_adam": dict.fromkeys(
        AOT,
        "issue 12's schema returns the mutated var / m / v as aliases (Tensor(a!)), which "
        "AOTAutograd refuses for a custom op (torch: no functionalization of aliased outputs)",
    ),
    "mxrec::split_2d_jagged[1]": {
        STATIC: data_dependent("offsetA[-1] and offsetB[-1] give the output sizes")
    },
    "mxrec::fused_sgd": dict.fromkeys(
        AOT,
        "issue 12's schema returns the mutated var as an alias (Tensor(a!)), which AOTAutograd "
        "refuses for a custom op (torch: no functionalization of aliased outputs)",
    ),
    F + "repeat_arange": {STATIC: data_dependent("sum(lengths)")},
    F + "reset_weight_momentum": {
        SCHEMA: "upstream: the schema declares no mutable argument ('-> ()', no Tensor(a!)), yet "
        "the op (its CUDA kernel too) zeroes rows of dev_weights / uvm_weights and momentum1 in "
        "place"
    },
    F + "sll_array_jagged_bmm_jagged_out": {STATIC: data_dependent("the jagged output's size")},
    F + "sll_jagged_jagged_bmm_jagged_out": {STATIC: data_dependent("the jagged output's size")},
    F + "sll_jagged_self_substraction_jagged_out": {
        STATIC: "upstream: its Meta kernel (sll/meta/meta_sll.py) asks a dynamic size, which "
        "static AOT (no ShapeEnv) cannot give"
    },
    F + "tbe_input_combine": {
        STATIC: "upstream: its fake (sparse_ops.py tbe_input_combine_abstract) asks a dynamic "
        "size, which static AOT (no ShapeEnv) cannot give"
    },
    F + "tbe_input_combine[0]": {
        FAKE: "upstream: its fake puts the empty per-sample weights on the CPU, not on the "
        "inputs' device",
        STATIC: "upstream: its fake (sparse_ops.py tbe_input_combine_abstract) asks a dynamic "
        "size, which static AOT (no ShapeEnv) cannot give",
    },
    F + "tbe_estimate_indices_distribution": dict.fromkeys(
        (FAKE, *AOT),
        "upstream: a composite kernel that reads the tensor's data on the host, so fake mode "
        "runs it on a fake tensor; and the op returns host scalars (q, s, max_index, "
        "num_indices) computed from the data, which no fake kernel can give",
    ),
    F + "tbe_generate_indices_from_distribution": dict.fromkeys(
        (FAKE, *AOT),
        "upstream: a composite kernel that reads heavy_hitters' data on the host, so fake mode "
        "runs it on a fake tensor (a fake kernel cannot be registered over a "
        "CompositeImplicitAutograd one)",
    ),
    F + "zero_collision_hash": dict.fromkeys(
        (FAKE, DYNAMIC),
        "upstream: its Meta kernel returns the input itself and zeros(0) where its CPU kernel "
        "returns a fresh int64 tensor and None (the schema's optional output), and AOT cannot "
        "trace a None tensor output",
    ),
    F + "sum_reduce_to_one": {
        FAKE: "upstream: its fake returns the sum on 'meta', not on target_device "
        "(sparse_ops.py sum_reduce_to_one)"
    },
}
