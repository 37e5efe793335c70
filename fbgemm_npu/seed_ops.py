"""The operators of Rec SDK's two operator lists (the seed documents) and what serves each here.

Rec SDK documents its custom operators in two lists: the Torch plugin's "Custom Operator" table
(``TORCH``: the ops a PyTorch user imports, some bound to fbgemm's own API) and the RecOps list of
every Ascend C operator (``RECOPS``, TensorFlow-only ones included).  Each entry names the ops of
ours that serve it -- qualified names the registrar registers (``mxrec::...`` with Rec SDK's
schemas, or upstream's ``fbgemm::...`` that Rec SDK binds it to) -- or says why it is out of scope.
``python -m fbgemm_npu info`` prints the table; ``tests/core/test_seed_ops.py`` checks that every
named op is registered.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OUT_OF_SCOPE", "SEED_OPS", "SeedOp", "seed_table"]

TORCH, RECOPS = "torch", "recops"


@dataclass(frozen=True)
class SeedOp:
    name: str  # as the seed document spells it
    lists: tuple[str, ...]  # TORCH and / or RECOPS
    served_by: tuple[str, ...] = ()  # qualified op names
    note: str = ""


# Rec SDK entries with no PyTorch operator to build (README, "Not supported, and why").
OUT_OF_SCOPE = {
    "cust_op_by_addr": "TensorFlow only (an embedding lookup by address replacing tf.gather)",
    "lccl": "on PyTorch this is HCCL behind torch.distributed, which torch_npu provides",
    "pcie_through": "a host-device transfer path of the vendor runtime, not an operator",
}

_BOTH = (TORCH, RECOPS)
_HSTU = ("mxrec::hstu_dense", "mxrec::hstu_jagged.equal", "mxrec::hstu_jagged.delta")
_HSTU_BWD = (
    "mxrec::hstu_dense_backward",
    "mxrec::hstu_jagged_backward.equal",
    "mxrec::hstu_jagged_backward.delta",
)

SEED_OPS: tuple[SeedOp, ...] = (
    SeedOp("asynchronous_complete_cumsum", (TORCH,), ("fbgemm::asynchronous_complete_cumsum",)),
    SeedOp("dense_to_jagged", (TORCH,), ("fbgemm::dense_to_jagged",)),
    SeedOp("jagged_to_padded_dense", (TORCH,), ("fbgemm::jagged_to_padded_dense",)),
    SeedOp("permute_1D_sparse_data", (TORCH,), ("fbgemm::permute_1D_sparse_data",)),
    SeedOp("permute2d_sparse_data", (TORCH,), ("fbgemm::permute_2D_sparse_data",)),
    SeedOp(
        "split_embedding_codegen_lookup_adagrad_function",
        (TORCH,),
        ("fbgemm::split_embedding_codegen_lookup_adagrad_function_pt2",),
        "upstream's SplitTableBatchedEmbeddingBagsCodegen calls it (AdaGrad, every pooling)",
    ),
    SeedOp(
        "backward_codegen_adagrad_unweighted_exact",
        (TORCH,),
        ("fbgemm::split_embedding_codegen_lookup_adagrad_function_pt2",),
        "the AdaGrad lookup's backward, fused into its autograd (weighted too)",
    ),
    SeedOp(
        "dense_embedding_codegen_lookup_function",
        (TORCH,),
        ("fbgemm::dense_embedding_codegen_lookup_function",),
        "DenseTableBatchedEmbeddingBagsCodegen's lookup",
    ),
    SeedOp(
        "dense_embedding_codegen_lookup_function_grad",
        (TORCH,),
        ("fbgemm::dense_embedding_codegen_lookup_function",),
        "its autograd backward",
    ),
    SeedOp("gather_for_rank1", _BOTH, ("mxrec::gather_for_rank1",)),
    SeedOp("index_select_for_rank1_backward", _BOTH, ("mxrec::index_select_for_rank1_backward",)),
    SeedOp("hstu_dense_forward", _BOTH, (*_HSTU, "mxrec::hstu_paged")),
    SeedOp("hstu_dense_backward", _BOTH, _HSTU_BWD),
    SeedOp("hstu_dense_forward_fuxi", _BOTH, ("mxrec::hstu_fuxi",)),
    SeedOp("hstu_dense_backward_fuxi", _BOTH, ("mxrec::hstu_dense_backward_fuxi",)),
    SeedOp("hstu_backward_v2", (RECOPS,), ("mxrec::hstu_backward_v2", "mxrec::hstu_forward_v2")),
    SeedOp("relative_attn_bias_pos", _BOTH, ("mxrec::relative_attn_bias_pos",)),
    SeedOp(
        "relative_attn_bias_time",
        _BOTH,
        ("mxrec::relative_attn_bias_time", "mxrec::relative_attn_bias_time_with_index"),
    ),
    SeedOp("relative_attn_bias_backward", _BOTH, ("mxrec::relative_attn_bias_time_backward",)),
    SeedOp(
        "disentangle_attention",
        _BOTH,
        ("mxrec::disentangle_attention", "mxrec::disentangle_attention_backward"),
        "the Torch list spells it disetangle_attention",
    ),
    SeedOp("concat_jagged_tensor", (RECOPS,), ("mxrec::concat_2d_jagged",)),
    SeedOp("concat_jagged_tensor_grad", (RECOPS,), ("mxrec::split_2d_jagged",)),
    SeedOp("fused_sgd", (RECOPS,), ("mxrec::fused_sgd",)),
    SeedOp("fused_lazy_adam", (RECOPS,), ("mxrec::fused_lazy_adam",)),
    SeedOp("in_linear_silu", (RECOPS,), ("mxrec::in_linear_silu",)),
    SeedOp("in_linear_silu_backward", (RECOPS,), ("mxrec::in_linear_silu_backward",)),
    SeedOp("ln_mul", (RECOPS,), ("mxrec::ln_mul",)),
    SeedOp("multislice_concat", (RECOPS,), ("mxrec::multislice_concat",)),
    SeedOp("norm_multiply_dropout", (RECOPS,), ("mxrec::norm_multiply_dropout",)),
    SeedOp("norm_multiply_dropout_backward", (RECOPS,), ("mxrec::norm_multiply_dropout_backward",)),
    SeedOp("reverse_sequence", (RECOPS,), ("mxrec::reverse_sequence",)),
    SeedOp("token_mixing", (RECOPS,), ("mxrec::token_mixing",)),
    *(SeedOp(name, (RECOPS,), (), why) for name, why in OUT_OF_SCOPE.items()),
)


def seed_table(registered: set[str]) -> list[str]:
    """Lines of the ``info`` table: each seed operator, its list(s), its status (``covered``
    when every op serving it is registered, ``out of scope``, else ``not yet``) and what serves
    it."""
    width = max(len(s.name) for s in SEED_OPS)
    out = [f"{'seed operator'.ljust(width)}  {'list':<13} {'status':<13} served by"]
    covered = 0
    for s in SEED_OPS:
        if not s.served_by:
            status = "out of scope"
        elif all(q in registered for q in s.served_by):
            status = "covered"
            covered += 1
        else:
            status = "not yet"
        what = ", ".join(s.served_by) + (f" ({s.note})" if s.note and s.served_by else "")
        what = what or s.note
        out.append(f"{s.name.ljust(width)}  {'+'.join(s.lists):<13} {status:<13} {what}")
    scope = len(SEED_OPS) - len(OUT_OF_SCOPE)
    out.append(f"total: {len(SEED_OPS)} seed operators; {covered} of {scope} in scope covered")
    return out
