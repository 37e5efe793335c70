"""The calls :mod:`fbgemm_npu.testing.triton_aot` records: each op's Triton path once, on small
CPU tensors (simulated npu ones where autograd runs), so that every kernel of every
``_triton_*.py`` module is launched at least once, in the dtypes / flags its wrapper specialises
on (pooling modes, index and offset widths, float widths, optional weights, gradients).

The bench's probes (bench/triton_probes.py, their ``quick`` sizes) plus variants: TBE forward
(SUM / MEAN / NONE, fp32 / fp16 / bf16 weights and outputs, int32 / int64 indices, weights) and
training steps of upstream's module (SGD, rowwise AdaGrad, Adam, LAMB; weight decay, clipping,
learnable per-sample weights, VBE), jagged (float / int values, int32 / int64 offsets), permute
(forward, gradients of 1-D / 2-D weights), bucketize (int32 / int64, sequence, positions),
HSTU (dense, jagged with context / targets / bias; fp32 / fp16 / bf16).  A probe calls a
registered kernel function or op directly, under ``kernel_mode("triton")`` (set here).
:data:`SCALE_PROBES`: production sizes, run dry (nothing launched: memory never touched).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator
from typing import Any

from fbgemm_npu.testing.triton_aot import ROOT, kernel_files, module_of

__all__ = [
    "PROBES", "SCALE_PROBES", "describe", "recording", "run_native_probes", "run_probes",
    "run_scale_probes",
]  # fmt: skip


def _constexpr_value(value: Any) -> Any:
    import triton.language as tl

    if isinstance(value, tl.dtype):
        return {"tl.dtype": str(value)}
    if isinstance(value, tl.constexpr):
        return _constexpr_value(value.value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"constexpr value {value!r} cannot be recorded")


def describe(kernel: Any, grid: tuple[int, ...], args: tuple, meta: dict) -> dict[str, Any]:
    """One launch as plain data: kernel id, grid, signature, constexprs and the parameters
    known 16-divisible (``aligned``), by parameter, as Triton's JIT specialises them
    (``native_specialize_impl``: an int 1 or ``None`` becomes a constexpr, a bool ``u1``)."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    fn = kernel.fn  # InterpretedFunction and JITFunction both keep the Python function
    keep = set(getattr(kernel, "kwargs", {}).get("do_not_specialize", None) or ())
    signature, constexprs, aligned = {}, {}, []
    for i, p in enumerate(inspect.signature(fn).parameters.values()):
        value = args[i] if i < len(args) else meta.get(p.name, p.default)
        if value is inspect.Parameter.empty:
            raise TypeError(f"{fn.__name__}: no value for parameter {p.name}")
        if "constexpr" in str(p.annotation):
            signature[p.name] = "constexpr"
            constexprs[p.name] = _constexpr_value(value)
            continue
        special = p.name not in keep and i not in keep and not isinstance(value, (bool, float))
        kind, key = native_specialize_impl(BaseBackend, value, False, special, special)
        signature[p.name] = kind
        if kind == "constexpr":
            constexprs[p.name] = _constexpr_value(value)
        elif key == "D":
            aligned.append(p.name)
    grid = tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))
    return {"kernel": f"{fn.__module__}:{fn.__name__}", "grid": list(grid),
            "signature": signature, "constexprs": constexprs, "aligned": aligned}  # fmt: skip


@contextlib.contextmanager
def recording(run: bool = True) -> Iterator[list[dict[str, Any]]]:
    """Wrap ``launch`` (in ``_triton`` and every kernel module that imported it by name) so
    each launch is described, then run as before (``run=False``: not run, a dry call that only
    shows the grids the host computes at sizes the interpreter could not run)."""
    from fbgemm_npu.native import _triton

    original = _triton.launch
    launches: list[dict[str, Any]] = []

    def recorded(name: str, kernel: Any, grid: tuple[int, ...], *args: Any, **meta: Any) -> None:
        if all(g > 0 for g in grid):
            caller = sys._getframe(1)  # the host wrapper's launch line: where a grid is made
            site = f"{caller.f_code.co_filename}:{caller.f_lineno}"
            launches.append({"name": name, "site": site, **describe(kernel, grid, args, meta)})
        if run:
            original(name, kernel, grid, *args, **meta)

    patched = [m for m in list(sys.modules.values()) if getattr(m, "launch", None) is original]
    for m in patched:
        m.launch = recorded
    try:
        yield launches
    finally:
        for m in patched:
            m.launch = original


def _bench_probe(name: str) -> Callable[[], Any]:
    def run() -> Any:
        import torch

        from bench.triton_probes import PROBES as BENCH

        (probe,) = [p for p in BENCH if p.op == name]
        return probe.build(torch.device("cpu"), True).run()

    return run


def _tbe_forward(pooling: int, wdt: str, odt: str, idt: str, weighted: bool) -> Callable[[], Any]:
    def run() -> Any:
        import torch

        from fbgemm_npu.native.fbgemm.tbe._utils import get_plan
        from fbgemm_npu.native.fbgemm.tbe.forward import tbe_forward

        op = "fbgemm::split_embedding_codegen_lookup_sgd_function_pt2"
        dims, rows, b = ([8, 8], [5, 7], 3) if pooling == 2 else ([8, 16], [5, 7], 3)
        sizes = [d * r for d, r in zip(dims, rows, strict=True)]
        d_off = torch.tensor([0, dims[0], dims[0] + dims[1]])
        plan = get_plan(op, d_off, torch.tensor([0, sizes[0]]), weights_numel=sum(sizes))
        lengths = torch.tensor([2, 0, 3, 1, 4, 2])
        idx = torch.cat([torch.arange(int(n)) % 5 for n in lengths]).to(getattr(torch, idt))
        off = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(idx.dtype)
        w = torch.randn(sum(sizes)).to(getattr(torch, wdt))
        psw = torch.rand(idx.numel()) if weighted else None
        return tbe_forward(op, plan, w, idx, off, pooling, psw, getattr(torch, odt))

    return run


def _jagged(dtype: str, wide: bool) -> Callable[[], Any]:
    def run() -> Any:
        import torch

        from fbgemm_npu.native.fbgemm.jagged import to_dense, to_jagged

        lengths = torch.tensor([3, 0, 5, 2])
        offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])
        offsets = offsets if wide else offsets.int()
        values = (torch.randn(10, 8) * 10).to(getattr(torch, dtype))
        to_dense.jagged_to_padded_dense_forward_npu(values, [offsets], [4], 0.0)
        dense = (torch.randn(4, 4, 8) * 10).to(getattr(torch, dtype))
        return to_jagged.dense_to_jagged_forward_npu(dense, [offsets], 10)

    return run


def _permute_grad(dtype: str, wide: bool) -> Callable[[], Any]:
    def run() -> Any:
        import torch

        import fbgemm_npu  # noqa: F401  (registers the ops and the simulated npu)

        dt = getattr(torch, dtype)
        lengths = torch.tensor([[1, 2, 0], [3, 0, 1], [2, 2, 2], [0, 1, 0]]).to("npu")
        n = int(lengths.sum())
        v = torch.randn(n).to(dt).to("npu").requires_grad_()
        w = torch.randn(n, *((2,) if wide else ())).to(dt).to("npu").requires_grad_()
        perm = torch.tensor([2, 0, 3]).to("npu")
        out = torch.ops.fbgemm.permute_2D_sparse_data(perm, lengths, v, w)
        (out[1].sum() + out[2].sum()).backward()

    return run


def _bucketize(idt: str, sequence: bool, pos: bool, weights: bool) -> Callable[[], Any]:
    def run() -> Any:
        import torch

        from fbgemm_npu.native.fbgemm.bucketize import bucketize

        dt = getattr(torch, idt)
        lengths = torch.tensor([2, 0, 3, 1, 4, 2]).to(dt)
        indices = torch.tensor([1, 7, 0, 12, 19, 3, 5, 18, 2, 9, 11, 4]).to(dt)
        blocks = torch.tensor([10, 10, 10]).to(dt)
        w = torch.rand(12) if weights else None
        return bucketize.block_bucketize_sparse_features_npu(
            lengths, indices, pos, sequence, blocks, 2, w
        )

    return run


def _hstu(dtype: str, mask_type: int) -> Callable[[], Any]:
    def run() -> Any:
        import torch

        from fbgemm_npu.native.mxrec.hstu import hstu_dense as h

        dt = getattr(torch, dtype)
        q, k, v, g = (torch.randn(1, 32, 2, 16).to(dt) for _ in range(4))
        h.hstu_dense(q, k, v, None, None, mask_type)
        return h.hstu_dense_backward(g, q, k, v, None, None, mask_type)

    return run


def _tbe_train(opt: str, pooling: str, **kw: Any) -> Callable[[], Any]:
    """One training step of upstream's TBE module on the simulated npu (the fused backward +
    optimizer); ``kw``: ``weighted``, ``learn_psw`` (per-sample weights requiring grad),
    ``vbe``, ``style``, ``precision`` and the module's own arguments."""

    def run() -> Any:
        import torch
        from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode

        from fbgemm_npu.testing import tbe_inputs as ti

        args = dict(kw)
        weighted, learn, vbe = (args.pop(k, None) for k in ("weighted", "learn_psw", "vbe"))
        style = args.pop("style", "cuda_user")
        if "weight_decay_mode" in args:
            from fbgemm_gpu.tbe.config.optimizer_config import WeightDecayMode

            args["weight_decay_mode"] = WeightDecayMode(args["weight_decay_mode"])
        if "precision" in args:
            args["weights_precision"] = getattr(SparseType, args.pop("precision"))
        specs = ti.ONE_D if pooling == "NONE" else ti.MIXED
        tbe = ti.training_tbe(getattr(EmbOptimType, opt), specs, "npu", style,
                              pooling_mode=getattr(PoolingMode, pooling), **args)  # fmt: skip
        batch = ti.make_batches(specs, 3, 1, seed=0, weighted=bool(weighted), vbe=vbe)[0]
        if not learn:
            return ti.train_step(tbe, batch, "npu", torch.int32 if vbe else torch.int64, 1)
        psw = batch.per_sample_weights.to("npu").requires_grad_()
        frg = torch.tensor([1, 0, 1], dtype=torch.int32).to("npu")
        out = tbe(batch.indices.to("npu"), batch.offsets.to("npu"), per_sample_weights=psw,
                  feature_requires_grad=frg)  # fmt: skip
        out.backward(torch.ones_like(out))

    return run


def _hstu_jagged(dtype: str, **cfg: Any) -> Callable[[], Any]:
    """``mxrec::hstu_jagged`` forward and backward (3 sequences, one empty) with ``cfg``."""

    def run() -> Any:
        import torch

        import fbgemm_npu  # noqa: F401

        dt, off = getattr(torch, dtype), torch.tensor([0, 30, 30, 51])
        q, k, v, g = (torch.randn(51, 2, 16).to(dt).to("npu") for _ in range(4))
        kw: dict[str, Any] = {"max_seq_len": 32, "alpha": 0.5, "seq_offset": off.to("npu")}
        for name, val in cfg.items():
            kw[name] = torch.tensor(val).to("npu") if isinstance(val, list) else val
        if kw.pop("bias", False):
            kw["attn_bias"] = torch.randn(3, 2, 32, 32).to(dt).to("npu")
        torch.ops.mxrec.hstu_jagged(q, k, v, **kw)
        return torch.ops.mxrec.hstu_jagged_backward(g, q, k, v, **kw)

    return run


# (label, call): each op's Triton path on CPU tensors (npu ones for autograd), small sizes.
PROBES: list[tuple[str, Callable[[], Any]]] = [
    *((f"bench {n}", _bench_probe(n)) for n in (
        "tbe forward", "tbe fwd+bwd sgd", "tbe fwd+bwd rowwise_adagrad", "tbe fwd+bwd adam",
        "jagged_to_padded_dense", "dense_to_jagged", "permute_2D_sparse_data",
        "block_bucketize_sparse_features", "hstu_dense forward", "hstu_dense backward")),
    ("tbe MEAN fp16->bf16 i32 weighted", _tbe_forward(1, "float16", "bfloat16", "int32", True)),
    ("tbe NONE bf16->fp16", _tbe_forward(2, "bfloat16", "float16", "int64", False)),
    ("jagged fp16 i32 offsets", _jagged("float16", False)),
    ("jagged int64 values", _jagged("int64", True)),
    ("permute grad bf16", _permute_grad("bfloat16", False)),
    ("permute grad fp32 2-D weights", _permute_grad("float32", True)),
    ("bucketize i32 pos", _bucketize("int32", True, True, True)),
    ("bucketize i64 no sequence", _bucketize("int64", False, False, False)),
    ("hstu bf16 no mask", _hstu("bfloat16", 0)),
    ("tbe adam MEAN weighted", _tbe_train("ADAM", "MEAN", weighted=True, weight_decay=0.01)),
    ("tbe adam NONE", _tbe_train("ADAM", "NONE")),
    ("tbe rwa bf16 L2 clip", _tbe_train("EXACT_ROWWISE_ADAGRAD", "SUM", style="torchrec",
                                        precision="BF16", weight_decay=0.1, weight_decay_mode=1,
                                        gradient_clipping=True, max_gradient=0.5)),
    ("tbe lamb fp16", _tbe_train("LAMB", "SUM", precision="FP16", weight_decay=0.01)),
    ("tbe rwa learnable psw", _tbe_train("EXACT_ROWWISE_ADAGRAD", "SUM", weighted=True,
                                         learn_psw=True)),
    ("tbe sgd vbe", _tbe_train("EXACT_SGD", "SUM", vbe=[[2, 1], [1, 2], [3, 0]])),
    ("hstu_jagged ctx targets bf16", _hstu_jagged("bfloat16", num_context=[3, 0, 2],
                                                  num_target=[5, 0, 6], target_group_size=2)),
    ("hstu_jagged bias fp16", _hstu_jagged("float16", bias=True, silu_scale=0.25)),
    ("hstu_jagged custom mask", _hstu_jagged("float32", mask_type=2)),
]  # fmt: skip


def _jagged_at_scale() -> Any:
    """B = 40000 bags of max_len 64, D = 128 (memory never touched: the launches are dry)."""
    import torch

    from fbgemm_npu.native.fbgemm.jagged import to_dense, to_jagged

    b, length, d = 40_000, 64, 128
    offsets = torch.arange(b + 1) * 32
    values = torch.empty(b * 32, d)
    to_dense.jagged_to_padded_dense_forward_npu(values, [offsets], [length], 0.0)
    dense = torch.empty(b, length, d)
    return to_jagged.dense_to_jagged_forward_npu(dense, [offsets], b * 32)


def _tbe_at_scale() -> Any:
    """T = 32 tables of E = 1e5 rows, D = 128, B = 4096, L = 20 (131072 bags), SUM, fp32."""
    import torch

    from fbgemm_npu.native.fbgemm.tbe._utils import get_plan
    from fbgemm_npu.native.fbgemm.tbe.forward import tbe_forward

    op = "fbgemm::split_embedding_codegen_lookup_sgd_function_pt2"
    t, e, d, b, pooling = 32, 100_000, 128, 4096, 20
    d_off, w_off = torch.arange(t + 1) * d, torch.arange(t) * e * d
    plan = get_plan(op, d_off, w_off, weights_numel=t * e * d)
    idx = torch.zeros(t * b * pooling, dtype=torch.int64)
    off = torch.arange(t * b + 1) * pooling
    w = torch.empty(t * e * d)
    return tbe_forward(op, plan, w, idx, off, 0, None, torch.float32, for_backward=False)


# Host-side grids at production sizes (dry launches: nothing runs, only the grids are read).
SCALE_PROBES: list[tuple[str, Callable[[], Any]]] = [
    ("jagged_to_padded_dense B=40000 L=64 D=128", _jagged_at_scale),
    ("tbe forward T=32 E=1e5 D=128 B=4096 L=20", _tbe_at_scale),
]


def run_probes() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every probe under ``kernel_mode("triton")``: the launches, and the probes that failed."""
    from fbgemm_npu.native import _triton

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    for path in kernel_files():  # imported first, so recording() finds their `launch`
        importlib.import_module(module_of(path))
    failed: dict[str, str] = {}
    with recording() as launches:
        for label, call in PROBES:
            try:
                with _triton.kernel_mode("triton"):
                    call()
            except Exception as e:  # reported by the test (a probe that no longer runs)
                failed[label] = f"{type(e).__name__}: {e}"[:300]
    return launches, failed


def run_scale_probes() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """:data:`SCALE_PROBES` with dry launches and the data checks off: the grids."""
    return _dry(SCALE_PROBES, report=True)


def run_native_probes() -> list[dict[str, Any]]:
    """:data:`PROBES` again, dry, with ``interpreting()`` false in the kernel modules: the
    specialisations a device compiles where a wrapper picks them for the interpreter (HSTU's
    bfloat16 ``tl.dot`` without the float32 upcast).  Later launches of a call may see garbage
    (nothing ran), so a probe that fails here is not reported: the launches up to it count."""
    from fbgemm_npu.native import _triton

    mods = [sys.modules[module_of(p)] for p in kernel_files()]
    mods = [m for m in mods if getattr(m, "interpreting", None) is _triton.interpreting]
    for m in mods:
        m.interpreting = lambda: False
    try:
        return _dry(PROBES, report=False)[0]
    finally:
        for m in mods:
            m.interpreting = _triton.interpreting


def _dry(
    probes: list[tuple[str, Callable[[], Any]]], report: bool
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    import os

    from fbgemm_npu.native import _triton

    failed: dict[str, str] = {}
    before = os.environ.get("FBGEMM_NPU_VALIDATE")
    os.environ["FBGEMM_NPU_VALIDATE"] = "0"
    try:
        with recording(run=False) as launches:
            for label, call in probes:
                try:
                    with _triton.kernel_mode("triton"):
                        call()
                except Exception as e:
                    if report:
                        failed[label] = f"{type(e).__name__}: {e}"[:300]
    finally:
        if before is None:
            os.environ.pop("FBGEMM_NPU_VALIDATE")
        else:
            os.environ["FBGEMM_NPU_VALIDATE"] = before
    return launches, failed
