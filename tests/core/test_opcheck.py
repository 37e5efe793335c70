"""Every op the registrar registers through ``torch.library.opcheck`` on npu: the groundwork of
the gate "every op passes the checks a PyTorch op must pass".

One case per (op, sample of :mod:`fbgemm_npu.testing.op_samples`, check), the checks being
``test_schema`` (SchemaCheckMode: aliasing and mutation as the schema declares),
``test_faketensor`` (the fake / Meta kernel against the real one), ``test_aot_dispatch_static``
and ``test_aot_dispatch_dynamic`` (AOTAutograd tracing, forward and backward, against eager),
and ``test_autograd_registration``, torch's check adapted to npu
(:func:`autograd_registration_check_npu`).
What fails is in :data:`XFAIL`, the stated exceptions (torch's or upstream's limitations, each
with its reason; none is ours), strict: a case that starts passing fails until its entry goes.
Plus: every registered op has samples, and they require grad where we register an autograd
kernel.

Where a sample requires grad, our ``AutogradPrivateUse1`` kernel runs in Python without
redispatching to the op, so ``test_schema`` / ``test_faketensor`` see the ATen ops inside it; the
sample without grad (the last one of such an op) reaches the op and its fake kernel.
The file takes ~15 s on a 2-core host (25 s when loaded): collecting (every sample built once)
~1.6 s, then ``test_schema`` ~1.2 s, ``test_faketensor`` ~0.1 s, ``test_aot_dispatch_static``
~3.5 s, ``test_aot_dispatch_dynamic`` ~7 s in all, so nothing is marked ``slow``.  A failure is
reported in one line (pytest formatting torch's deep tracebacks would cost more than the checks).
"""

from __future__ import annotations

import functools
import re
import traceback

import pytest
import torch
from torch._functorch import config as functorch_config

from fbgemm_npu._registry import REGISTRY
from fbgemm_npu.testing.op_samples import has_autograd, sample_ops, samples
from fbgemm_npu.testing.tbe_inputs import NPU

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

# The stated exceptions: every (op, check) that fails, each a limitation of torch's opcheck or of
# upstream's fake / Meta kernel or schema, which rule 1 forbids us to replace (we may add a Meta
# kernel only where upstream has none).  None is ours.  Keys: an op (all its samples) or "op[i]"
# (its sample i only); values: check -> reason.  The entries are strict xfails: a case that starts
# passing (torch or fbgemm_gpu moved) fails until its entry is trimmed.


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


@functools.cache
def sample_count(op: str) -> int:
    return len(samples(op, NPU))


def cause(op: str, index: int, util: str) -> str | None:
    """The diagnosed cause of a failing case (None: it passes today)."""
    return XFAIL.get(f"{op}[{index}]", {}).get(util) or XFAIL.get(op, {}).get(util)


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _has_float_input(op: str, index: int) -> bool:
    args, kwargs = samples(op, NPU)[index]
    return any(t.is_floating_point() for t in _tensors([list(args), list(kwargs.values())]))


def _cases() -> list[object]:
    cases = []
    for op in sorted(REGISTRY.kernels):
        for index in range(sample_count(op)):
            for util in UTILS:
                if util == AUTOGRAD and not _has_float_input(op, index):
                    continue  # nothing could require grad: the check has nothing to see
                reason = cause(op, index, util)
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                name = f"{op.removeprefix(F)}[{index}]-{util.removeprefix('test_')}"
                cases.append(pytest.param(op, index, util, marks=marks, id=name))
    return cases


def _where(error: BaseException) -> str:
    """The innermost frame of fbgemm_npu or fbgemm_gpu that the error passed through."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "fbgemm" in f.filename]
    if not ours:
        return ""
    f = ours[-1]
    path = re.search(r"fbgemm_(?:npu|gpu)/.*", f.filename)
    return f" (at {path.group(0) if path else f.filename}:{f.lineno} in {f.name})"


def _overload(qualname: str) -> torch._ops.OpOverload:
    """``"fbgemm::op"`` -> ``torch.ops.fbgemm.op.default``; ``"mxrec::op.overload"`` -> that
    overload (the mxrec ops keep Rec SDK's overload names)."""
    ns, name = qualname.split("::", 1)
    packet, _, overload = name.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), packet), overload or "default")


@pytest.mark.parametrize(("op", "index", "util"), _cases())
def test_opcheck(op: str, index: int, util: str) -> None:
    args, kwargs = samples(op, NPU)[index]
    overload = _overload(op)
    if util == AUTOGRAD:
        autograd_registration_check_npu(overload, args, kwargs)
        return
    # torch makes an output aliasing an input an AOT error only where CI is set (a warning
    # elsewhere): the error, always, so that a run here fails where CI fails.
    with functorch_config.patch(error_on_custom_op_aliasing=True):
        result = torch.library.opcheck(
            overload, args, kwargs, test_utils=(util,), raise_exception=False
        )[util]
    if result != "SUCCESS":
        # one line, with the innermost fbgemm frame: see the module docstring
        message = f"{type(result).__name__}: {result}".splitlines()[0]
        pytest.fail(f"{op} sample {index}, {util}: {message}{_where(result)}", pytrace=False)


def autograd_registration_check_npu(op: torch._ops.OpOverload, args: tuple, kwargs: dict) -> None:
    """torch's ``autograd_registration_check`` (torch/testing/_internal/optests), for npu.

    torch's own refuses devices other than CPU / CUDA / XPU; the contract is the same on npu with
    ``AutogradPrivateUse1`` for ``AutogradCUDA``: with the sample's floating-point inputs
    requiring grad, either an autograd kernel is registered for the call (``AutogradPrivateUse1``,
    ``Autograd`` or ``CompositeImplicitAutograd``) and then, ours, it records a graph (a float
    output carries a ``grad_fn``), or none is and no output that is not an input requires grad
    with autograd's fallback doing nothing (a kernel below autograd that records one would give
    silently wrong gradients)."""
    args, kwargs = _with_grad_inputs(args), _with_grad_inputs(kwargs)
    name = op.name()
    keys = ("AutogradPrivateUse1", "Autograd", "CompositeImplicitAutograd")
    registered = [k for k in keys if torch._C._dispatch_has_kernel_for_dispatch_key(name, k)]
    inputs = {id(t) for t in _tensors([list(args), list(kwargs.values())])}
    if registered:
        outs = [t for t in _tensors(_as_list(op(*args, **kwargs))) if t.is_floating_point()]
        if "AutogradPrivateUse1" in registered and outs:
            assert any(t.grad_fn is not None for t in outs), f"{name}: no output has a grad_fn"
        return
    prev = torch._C._get_autograd_fallback_mode()
    torch._C._set_autograd_fallback_mode("nothing")
    try:
        outs = _tensors(_as_list(op(*args, **kwargs)))
    finally:
        torch._C._set_autograd_fallback_mode(prev)
    leaked = [t for t in outs if t.requires_grad and id(t) not in inputs]
    assert not leaked, f"{name}: an output requires grad, but no autograd kernel is registered"


def _as_list(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _with_grad_inputs(value: object) -> object:
    """Fresh leaves: every floating-point tensor requiring grad."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            return value.detach().clone().requires_grad_(True)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_with_grad_inputs(v) for v in value)
    if isinstance(value, dict):
        return {k: _with_grad_inputs(v) for k, v in value.items()}
    return value


def test_every_registered_op_has_samples() -> None:
    registered = set(REGISTRY.kernels)
    assert registered <= set(sample_ops()), sorted(registered - set(sample_ops()))
    assert set(sample_ops()) <= registered, sorted(set(sample_ops()) - registered)
    assert not [op for op in registered if sample_count(op) == 0]


def test_samples_require_grad_where_we_register_autograd() -> None:
    """Every op with our autograd kernel has a sample with an input that requires grad."""
    for op in sorted(REGISTRY.kernels):
        if not has_autograd(op):
            continue
        found = [
            any(t.requires_grad for t in _tensors([list(args), list(kw.values())]))
            for args, kw in samples(op, NPU)
        ]
        assert any(found), f"{op}: no sample requires grad"


def test_xfail_table_names_real_cases() -> None:
    """Each entry names a registered op, a sample it has and one of the four checks."""
    for key, by_util in XFAIL.items():
        op, _, index = key.partition("[")
        assert op in REGISTRY.kernels, key
        if index:
            assert int(index.rstrip("]")) < sample_count(op), key
        assert by_util and set(by_util) <= set(UTILS), key
