"""Small valid sample calls of every op the registrar registers, for ``torch.library.opcheck``.

:func:`samples` gives ``(args, kwargs)`` pairs per op, built from scratch on ``device`` with fixed
seeds; each call builds fresh tensors (opcheck may write to them).  Where we register an autograd
kernel (``AutogradPrivateUse1``), the samples' floating-point inputs require grad, so that the
AOT checks trace the backward, and the first sample comes once more without, for the path that
goes below autograd to the op itself.  The TBE family's samples (the pt2 lookups, captured from
upstream's modules, and the metadata ops) are in :mod:`.op_samples_tbe`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

import torch

import fbgemm_npu.testing as _testing
from fbgemm_npu.testing import op_samples_tbe

__all__ = ["Sample", "has_autograd", "sample_ops", "samples"]

Sample = tuple[tuple[Any, ...], dict[str, Any]]
Builder = Callable[[str], list[Sample]]
I32, I64 = torch.int32, torch.int64

_BUILDERS: dict[str, Builder] = {}


def _for(*names: str) -> Callable[[Builder], Builder]:
    def put(fn: Builder) -> Builder:
        _BUILDERS.update({f"fbgemm::{n}": fn for n in names})
        return fn

    return put


def _t(values: Any, device: str, dtype: torch.dtype = I64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


def _randn(device: str, *shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(device)


def _one(*args: Any, **kwargs: Any) -> list[Sample]:
    return [(args, kwargs)]


# --- cumsum ---------------------------------------------------------------------------------


@_for("asynchronous_complete_cumsum", "asynchronous_exclusive_cumsum")
@_for("asynchronous_inclusive_cumsum")
def _cumsum(d: str) -> list[Sample]:
    return [((_t([3, 0, 2, 1], d),), {}), ((_t([1, 4, 2], d, I32),), {})]


# --- jagged: three bags of lengths 2, 0, 3 (5 rows of width 3), padded to 4 rows -------------
_OFF = [0, 2, 2, 5]


def _off(d: str) -> list[torch.Tensor]:
    return [_t(_OFF, d)]


@_for("batched_dense_vec_jagged_2d_mul", "batched_dense_vec_jagged_2d_mul_forward")
def _bdvj(d: str) -> list[Sample]:
    # B = 3, H = 2, max_L = 4, D = 3: v [B*H, max_L], a_values [total_L, H*D]
    return _one(_randn(d, 6, 4), _randn(d, 5, 6, seed=1), _t(_OFF, d))


@_for("batched_dense_vec_jagged_2d_mul_backward")
def _bdvj_backward(d: str) -> list[Sample]:
    v, a = _randn(d, 6, 4), _randn(d, 5, 6, seed=1)
    return _one(_randn(d, 6, 3, seed=2), v, a, _t(_OFF, d))


@_for("dense_to_jagged", "dense_to_jagged_forward")
def _dense_to_jagged(d: str) -> list[Sample]:
    dense = _randn(d, 3, 4, 3)
    return [((dense, _off(d)), {"total_L": 5}), ((dense, _off(d)), {})]


@_for("jagged_to_padded_dense", "jagged_to_padded_dense_forward")
def _to_padded(d: str) -> list[Sample]:
    x = _randn(d, 5, 3)
    return [((x, _off(d), [4]), {"padding_value": -1.0}), ((x, _off(d), [2]), {})]


@_for("jagged_dense_elementwise_add", "jagged_dense_elementwise_add_jagged_output")
@_for("jagged_dense_elementwise_mul", "jagged_dense_elementwise_mul_forward")
def _jagged_dense(d: str) -> list[Sample]:
    return _one(_randn(d, 5, 3), _off(d), _randn(d, 3, 4, 3, seed=1))


@_for("jagged_dense_dense_elementwise_add_jagged_output")
@_for("jagged_dense_dense_elementwise_add_jagged_output_forward")
def _jagged_dense_dense(d: str) -> list[Sample]:
    return _one(_randn(d, 5, 3), _off(d), _randn(d, 3, 4, 3, seed=1), _randn(d, 3, 4, 3, seed=2))


@_for("jagged_dense_elementwise_mul_backward")
def _mul_backward(d: str) -> list[Sample]:
    g, y, x = _randn(d, 5, 3), _randn(d, 3, 4, 3, seed=1), _randn(d, 5, 3, seed=2)
    return _one(g, _off(d), y, x)


# two keys of batch 2: lengths [[1, 2], [0, 3]], key slices [0, 3) and [3, 6)
_STACKED = ([[1, 2], [0, 3]], [0, 3, 6], [2, 3])
_for("jagged_1d_to_dense")(
    lambda d: [
        ((_randn(d, 5), _t(_OFF, d), 4, -1), {}),
        ((_t([1, 2, 3, 4, 5], d), _t(_OFF, d), 4, 0), {}),
    ]
)
_for("jagged_2d_to_dense")(lambda d: _one(_randn(d, 5, 3), _t(_OFF, d), 4))
_for("jagged_to_padded_dense_backward")(lambda d: _one(_randn(d, 3, 4, 3), _off(d), 5))
_for("stacked_jagged_1d_to_dense")(
    lambda d: _one(_t(list(range(6)), d), _t(_STACKED[0], d), *_STACKED[1:], 0)
)
_for("stacked_jagged_2d_to_dense")(
    lambda d: _one(_randn(d, 6, 3), _t(_STACKED[0], d), *_STACKED[1:], padding_value=0)
)


# --- index_select ---------------------------------------------------------------------------


@_for("batch_index_select_dim0")
def _batch_select(d: str) -> list[Sample]:
    tables = torch.arange(18.0, device=d)  # (3, 2) and (4, 3) tables back to back
    plain = ((tables, _t([2, 0, 1, 3, 3], d), [2, 3], [3, 4], [2, 3]), {})
    permuted = ((tables, _t([2, 0, 1, 3], d), [2, 2], [3, 4], [2, 3]), {})
    permuted[1]["permute_output_dim_0_1"] = True
    return [plain, permuted]


@_for("group_index_select_dim0")
def _group_select(d: str) -> list[Sample]:
    return _one([_randn(d, 4, 2), _randn(d, 5, 3, seed=1)], [_t([3, 0, 3], d), _t([1, 4], d)])


@_for("jagged_index_select")
def _jagged_select(d: str) -> list[Sample]:
    v, lengths, idx = _randn(d, 6, 2), _t([1, 2, 3], d), _t([2, 0, 2], d)
    return [((v, lengths, idx), {"num_dense_output_rows": 7}), ((v, lengths, idx), {})]


@_for("jagged_index_select_2d_forward_v2")
def _jagged_select_v2(d: str) -> list[Sample]:
    # the select above, with inclusive offsets
    v, idx, off_in, off_out = _randn(d, 6, 2), _t([2, 0, 2], d), _t([1, 3, 6], d), _t([3, 4, 7], d)
    return _one(v, idx, off_in, off_out, num_dense_output_rows=7)


@_for("jagged_index_add_2d_forward_v2")
def _jagged_add_v2(d: str) -> list[Sample]:
    # the select above's backward: 7 gradient rows added back into 6
    return _one(_randn(d, 7, 2), _t([2, 0, 2], d), _t([3, 4, 7], d), _t([1, 3, 6], d), 6, 7)


@_for("keyed_jagged_index_select_dim1")
def _keyed_select(d: str) -> list[Sample]:
    # two keys of batch 3, samples [2, 0] selected: 5 values
    lengths, offsets = _t([1, 2, 3, 0, 4, 1], d), _t([0, 1, 3, 6, 6, 10, 11], d)
    values, weights, idx = _randn(d, 11), _randn(d, 11, seed=1), _t([2, 0], d)
    return [
        ((values, lengths, offsets, idx, 3), {"weights": weights}),
        ((_t(list(range(11)), d), lengths, offsets, idx, 3), {"selected_lengths_sum": 5}),
    ]


@_for("lengths_range")
def _lengths_range(d: str) -> list[Sample]:
    return [((_t([2, 0, 3, 1], d),), {}), ((_t([2, 0, 3, 1], d, I32),), {"shape": [6]})]


@_for("jagged_unique_indices")
def _unique(d: str) -> list[Sample]:
    hsc, hso = _t([0, 10, 15, 30], d), _t([0, 1, 2, 3], d)
    return _one(hsc, hso, _t([0, 2, 3, 3, 6, 7, 9], d), _t([3, 3, 9, 1, 1, 4, 2, 14, 0], d))


_for("lengths_range_out")(lambda d: _one(torch.zeros(6, dtype=I64, device=d), _t([2, 0, 3, 1], d)))
_for("offsets_range")(lambda d: _one(_t([0, 2, 2, 5], d), 7))
_for("segment_sum_csr")(lambda d: _one(2, _t([0, 1, 3, 6], d), torch.arange(1.0, 13.0, device=d)))


# --- permute: three features of batch 2, nine values, permute [2, 0, 1] ----------------------


def _sparse(d: str) -> tuple[torch.Tensor, ...]:
    lengths, values = _t([[1, 2], [0, 3], [2, 1]], d), _t(list(range(9)), d)
    return _t([2, 0, 1], d, I32), lengths, values, torch.arange(9.0, device=d)


@_for("permute_2D_sparse_data", "permute_sparse_data")
def _permute_2d(d: str) -> list[Sample]:
    p, lengths, values, w = _sparse(d)
    return [((p, lengths, values, w), {"permuted_lengths_sum": 9}), ((p, lengths, values), {})]


@_for("permute_1D_sparse_data")
def _permute_1d(d: str) -> list[Sample]:
    _, _, values, w = _sparse(d)
    call = (_t([3, 0, 0, 2], d, I32), _t([3, 0, 2, 1], d), values[:6], w[:6])
    return [(call, {}), (call, {"permuted_lengths_sum": 9})]


@_for("permute_2D_sparse_data_input1D")
def _permute_input1d(d: str) -> list[Sample]:
    p, lengths, values, w = _sparse(d)
    call = (p, lengths.reshape(-1), values, 2, w)
    return [(call, {}), (call, {"permuted_lengths_sum": 9})]


@_for("permute_2D_sparse_preallocated_out")
def _permute_prealloc(d: str) -> list[Sample]:
    outs = {
        "permuted_lengths_out": torch.zeros(3, 2, dtype=I64, device=d),
        "permuted_indices_out": torch.zeros(9, dtype=I64, device=d),
        "permuted_weights_out": torch.zeros(9, device=d),
    }
    return [(_sparse(d), {"permuted_lengths_sum": 9, **outs})]


_for("permute_sparse_features")(lambda d: [(_sparse(d), {})])
_for("invert_permute")(lambda d: _one(_t([2, 0, 3, 1], d)))
# features of lengths 3, 2, 4 permuted [2, 0, 1]
_for("expand_into_jagged_permute")(
    lambda d: _one(_t([2, 0, 1], d), _t([0, 3, 5, 9], d), _t([0, 4, 7, 9], d), 9)
)


# --- bucketize: upstream's docs example, 4 features x batch 2, my_size 2 ---------------------


def _kjt(d: str) -> dict[str, Any]:
    return {
        "lengths": _t([0, 2, 1, 3, 2, 3, 3, 1], d, I32),
        "indices": _t([3, 4, 15, 11, 28, 29, 1, 10, 11, 12, 13, 11, 22, 20, 20], d, I32),
        "bucketize_pos": True,
        "sequence": True,
        "block_sizes": _t([5, 15, 10, 20], d, I32),
        "my_size": 2,
    }


@_for("block_bucketize_sparse_features", "block_bucketize_sparse_features_inference")
def _block(d: str) -> list[Sample]:
    weighted = {**_kjt(d), "weights": _randn(d, 15).abs(), "sequence": False}
    return [((), _kjt(d)), ((), weighted)]


@_for("bucketize_sparse_features")
def _cyclic(d: str) -> list[Sample]:
    lengths, indices = _t([2, 0, 3, 1], d), _t([5, 2, 7, 1, 0, 4], d)
    return [((lengths, indices, True, 3, _randn(d, 6)), {}), ((lengths, indices, False, 4), {})]


_for("block_bucketize_sparse_features_2d_weights")(
    lambda d: [((), {**_kjt(d), "weights": _randn(d, 15, 3).abs(), "weights_dim": 3})]
)


# --- pooled ---------------------------------------------------------------------------------


def _devices(d: str) -> list[str]:
    """``d`` and, where the backend has two devices, its second one."""
    kind = torch.device(d).type
    mod = getattr(torch, kind, None)
    count = mod.device_count() if hasattr(mod, "device_count") else 1
    return [d] if count < 2 else [f"{kind}:0", f"{kind}:1"]


def _spread(d: str, widths: list[int]) -> list[torch.Tensor]:
    devs = _devices(d)
    return [_randn(devs[k % len(devs)], 2, w, seed=k) for k, w in enumerate(widths)]


@_for("merge_pooled_embeddings")
def _merge(d: str) -> list[Sample]:
    xs, target = _spread(d, [2, 3, 4]), torch.device(_devices(d)[0])
    return [((xs, 2, target), {}), ((xs[:1], 2, target, 1), {})]


_for("all_to_one_device", "sum_reduce_to_one")(
    lambda d: _one(_spread(d, [3, 3, 3]), torch.device(_devices(d)[0]))
)

_KEYS, _LENGTHS, _GROUPS = [["a", "b"], ["c"]], [[2, 3], [1]], [["c", "a"], ["b", "a"]]


def _keyed_embs(d: str) -> list[torch.Tensor]:
    return [_randn(d, 3, 5), _randn(d, 3, 1, seed=1)]


def _permute_args(d: str) -> list[Any]:
    cpu = torch.ops.fbgemm.kt_regroup_arguments(torch.zeros(1), _KEYS, _LENGTHS, _GROUPS)
    return [t.to(d) for t in cpu[:3]] + [list(cpu[3])]


@_for("permute_multi_embedding_function")
def _permute_multi_fn(d: str) -> list[Sample]:
    forward = ((_keyed_embs(d), *_permute_args(d)), {})
    # the backward's call: the outputs' gradients (widths 3 and 5) back to the inputs' shapes
    grads = [_randn(d, 3, 3, seed=2), _randn(d, 3, 5, seed=3)]
    permutes, in_shapes, out_shapes, _ = _permute_args(d)
    return [forward, ((grads, permutes, out_shapes, in_shapes, [5, 1]), {"reverse": True})]


@_for("permute_pooled_embs", "permute_pooled_embs_auto_grad")
@_for("permute_pooled_embs_split", "permute_pooled_embs_auto_grad_split")
def _permute_pooled(d: str) -> list[Sample]:
    # features of widths 4, 2, 4 permuted [2, 0, 1]: offsets [0, 4, 6, 10], permuted [0, 4, 8, 10]
    offsets, perm = _t([0, 4, 6, 10], d), _t([2, 0, 1], d)
    return _one(_randn(d, 3, 10), offsets, perm, _t([0, 4, 8, 10], d), _t([1, 2, 0], d))


_for("kt_regroup_arguments")(lambda d: _one(_keyed_embs(d)[0], _KEYS, _LENGTHS, _GROUPS))
_for("regroup_keyed_tensor")(lambda d: _one(_keyed_embs(d), _KEYS, _LENGTHS, _GROUPS))
_for("permute_multi_embedding")(lambda d: _one(_keyed_embs(d), *_permute_args(d)))

_BUILDERS.update({q: op_samples_tbe.builder(q) for q in op_samples_tbe.OPS})

# every other ``op_samples_<family>`` module of this package exports ``BUILDERS`` (qualified name
# -> builder): found by name, so a new family adds its module and touches nothing here
for _info in pkgutil.iter_modules(_testing.__path__):
    if _info.name.startswith("op_samples_") and _info.name != "op_samples_tbe":
        _extra = importlib.import_module(f"fbgemm_npu.testing.{_info.name}").BUILDERS
        if set(_extra) & set(_BUILDERS):
            raise ValueError(
                f"op_samples: {_info.name} repeats {sorted(set(_extra) & set(_BUILDERS))}"
            )
        _BUILDERS.update(_extra)


def has_autograd(qualname: str) -> bool:
    """Whether we register an autograd kernel for ``qualname``."""
    from fbgemm_npu._registry import REGISTRY

    return "AutogradPrivateUse1" in REGISTRY.kernels.get(qualname, {})


def _with_grad(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.requires_grad_(True) if value.is_floating_point() else value
    if isinstance(value, list):
        return [_with_grad(v) for v in value]
    return value


def sample_ops() -> list[str]:
    """Every op that has samples here."""
    return sorted(_BUILDERS)


def samples(qualname: str, device: str | torch.device = "npu") -> list[Sample]:
    """Fresh sample calls ``(args, kwargs)`` of ``qualname`` on ``device`` (``KeyError``: none).

    For an op with an autograd kernel of ours (the tbe family's aside, whose samples are
    upstream's calls): every sample with its floating-point inputs requiring grad, then the
    first one again as built, without."""
    built = _BUILDERS[qualname](str(device))
    if qualname in op_samples_tbe.OPS or not has_autograd(qualname):
        return built
    graded = [
        (tuple(_with_grad(a) for a in args), {k: _with_grad(v) for k, v in kw.items()})
        for args, kw in built
    ]
    return [*graded, _BUILDERS[qualname](str(device))[0]]
