"""The fbgemm_gpu mirror (``fbgemm_npu/_mirror.py``): ``fbgemm_npu.<path>`` for every public
``fbgemm_gpu.<path>``, with upstream's names as upstream's objects (the three TBE classes as
npu-aware subclasses), imported lazily.

Upstream's tree is enumerated here on its own terms (``pkgutil.walk_packages``, plus the namespace
packages it does not list), not with ``_mirror.py``'s rules, so that a rule gone wrong there
fails here. Public: no ``_``-prefixed part, not under ``bench``, ``tbe.bench``, ``docs`` or a test
folder. :data:`NOT_IMPORTABLE` says why each public module that upstream cannot import itself
fails (fbgemm-gpu-cpu 1.8.0, without triton, click and scipy); its mirror must fail alike.
The npu-aware classes themselves are tested in ``test_mirror_classes.py``.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import fbgemm_gpu
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
EXCLUDED = ("fbgemm_gpu.bench", "fbgemm_gpu.tbe.bench", "fbgemm_gpu.docs")
OWN = ("native", "testing", "split_table", "integrations", "examples", "experimental")
TRAINING = "fbgemm_gpu.split_table_batched_embeddings_ops_training"
INFERENCE = "fbgemm_gpu.split_table_batched_embeddings_ops_inference"
REPLACED = {
    (TRAINING, "SplitTableBatchedEmbeddingBagsCodegen"),
    (TRAINING, "DenseTableBatchedEmbeddingBagsCodegen"),
    (INFERENCE, "IntNBitTableBatchedEmbeddingBagsCodegen"),
}
# Native libraries (``.so``, no ``PyInit_``) that fbgemm_gpu/__init__.py loads with
# torch.ops.load_library: listed as modules by pkgutil, importable by no one.
_NATIVE = (
    "asmjit fbgemm fbgemm_gpu_config fbgemm_gpu_embedding_inplace_ops fbgemm_gpu_py "
    "fbgemm_gpu_sparse_async_cumsum fbgemm_gpu_tbe_cache fbgemm_gpu_tbe_common "
    "fbgemm_gpu_tbe_index_select fbgemm_gpu_tbe_inference fbgemm_gpu_tbe_optimizers "
    "fbgemm_gpu_tbe_training_backward fbgemm_gpu_tbe_training_backward_dense "
    "fbgemm_gpu_tbe_training_backward_gwd fbgemm_gpu_tbe_training_backward_pt2 "
    "fbgemm_gpu_tbe_training_backward_split_host fbgemm_gpu_tbe_training_backward_vbe "
    "fbgemm_gpu_tbe_training_forward fbgemm_gpu_tbe_utils"
).split()
NOT_IMPORTABLE: dict[str, str] = {
    **{f"fbgemm_gpu.{lib}": "a native op library, not a Python module" for lib in _NATIVE},
    "fbgemm_gpu.sll.triton": "needs triton",
    "fbgemm_gpu.triton.quantize": "needs triton",
    "fbgemm_gpu.triton.jagged.triton_jagged_tensor_ops": "needs triton",
    "fbgemm_gpu.tbe.monitoring.bench_params_reporter": "needs click",
    "fbgemm_gpu.tbe.cache.uvm": "asks for fbgemm_gpu_uvm_enum_query, a CUDA-build op",
}


def _public(name: str) -> bool:
    parts = name.split(".")
    if any(p.startswith("_") or p in ("test", "tests") or p.startswith("test_") for p in parts):
        return False
    return not any(name == e or name.startswith(e + ".") for e in EXCLUDED)


def _walk() -> tuple[list[str], dict[str, str]]:
    """(public modules upstream imports, {public module upstream fails on: its error})."""
    failed: dict[str, str] = {}

    def onerror(name: str) -> None:
        failed[name] = repr(sys.exc_info()[1])

    names: set[str] = set()
    root = Path(fbgemm_gpu.__file__).parent
    roots = [([str(root)], "fbgemm_gpu.")]
    for folder, dirs, files in os.walk(root):  # namespace packages: no __init__.py
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(folder).relative_to(root)
        if rel.parts and "__init__.py" not in files and any(f.endswith(".py") for f in files):
            name = ".".join(("fbgemm_gpu", *rel.parts))
            names.add(name)
            roots.append(([folder], name + "."))
    for path, prefix in roots:
        names.update(i.name for i in pkgutil.walk_packages(path, prefix, onerror=onerror))
    ok = []
    for name in sorted(n for n in names | set(failed) if _public(n)):
        try:
            importlib.import_module(name)
            ok.append(name)
        except Exception as error:  # upstream's own failure: recorded, not ours
            failed[name] = f"{type(error).__name__}: {error}"
    return ok, {n: e for n, e in failed.items() if _public(n) and n not in ok}


@pytest.fixture(scope="module")
def upstream_tree() -> tuple[list[str], dict[str, str]]:
    return _walk()


def _mirror_of(name: str) -> str:
    return "fbgemm_npu" + name[len("fbgemm_gpu") :]


def _expected(value: Any) -> tuple[str, Any]:
    """How the mirror must show upstream's ``value``: ("same"|"subclass"|"mirror", target)."""
    if isinstance(value, type) and (value.__module__, value.__qualname__) in REPLACED:
        return "subclass", value
    if isinstance(value, types.ModuleType) and value.__name__.startswith("fbgemm_gpu."):
        if _public(value.__name__) and value.__name__.split(".")[1] not in OWN:
            return "mirror", importlib.import_module(_mirror_of(value.__name__))
    return "same", value


def _check_module(name: str) -> tuple[int, list[str]]:
    """(names checked, problems) for the mirror of upstream module ``name``."""
    up = importlib.import_module(name)
    mirror = importlib.import_module(_mirror_of(name))
    problems = []
    if getattr(mirror, "__mirror_of__", None) != name:
        problems.append(f"{mirror.__name__}: not a mirror of {name} ({mirror!r})")
    if hasattr(up, "__path__") != hasattr(mirror, "__path__"):
        problems.append(f"{mirror.__name__}: package-ness differs from {name}")
    if hasattr(up, "__all__") and list(mirror.__all__) != list(up.__all__):
        problems.append(f"{mirror.__name__}.__all__ != {name}.__all__")
    names = [n for n in vars(up) if not n.startswith("_")]
    missing = sorted(set(names) - set(dir(mirror)))
    if missing:
        problems.append(f"dir({mirror.__name__}) lacks {missing[:5]}")
    for attr in names:
        kind, target = _expected(getattr(up, attr))
        got = getattr(mirror, attr, None)
        if kind == "subclass":
            ok = isinstance(got, type) and issubclass(got, target) and got is not target
            ok = ok and (got.__name__, got.__qualname__) == (target.__name__, target.__qualname__)
        else:
            ok = got is target
        if not ok:
            problems.append(f"{mirror.__name__}.{attr}: {got!r}, expected {kind} {target!r}")
    return len(names) + hasattr(up, "__all__"), problems


def test_upstream_tree(upstream_tree: tuple[list[str], dict[str, str]]) -> None:
    """Upstream's public modules import, except the known ones, for the recorded reasons."""
    ok, failed = upstream_tree
    version = fbgemm_gpu.__version__
    print(f"fbgemm_gpu {version}: {len(ok)} public modules import, {len(failed)} do not")
    assert len(ok) > 70, ok
    unknown = {n: e for n, e in failed.items() if n not in NOT_IMPORTABLE}
    assert not unknown, f"public fbgemm_gpu modules failing for unrecorded reasons: {unknown}"
    assert not {n.split(".")[1] for n in [*ok, *failed]} & set(OWN), "a mirror name collides"


def test_own_subpackages_are_real(upstream_tree: tuple[list[str], dict[str, str]]) -> None:
    """fbgemm_npu's own subpackages are its files, never mirrors, and upstream has none of them."""
    for own in OWN:
        assert importlib.util.find_spec(f"fbgemm_gpu.{own}") is None, own
        spec = importlib.util.find_spec(f"fbgemm_npu.{own}")
        if spec is not None:  # experimental may not exist yet
            assert spec.origin and Path(spec.origin).is_relative_to(REPO / "fbgemm_npu"), spec
    assert sys.meta_path[-1].__class__.__name__ == "_MirrorFinder"


def test_every_public_module_and_name(
    upstream_tree: tuple[list[str], dict[str, str]], record_property: Any
) -> None:
    """Each public module imports under fbgemm_npu; each public name is upstream's object."""
    ok, _ = upstream_tree
    checked, problems = 0, []
    for name in ok:
        n, found = _check_module(name)
        checked, problems = checked + n, problems + found
    record_property("modules", len(ok))
    record_property("names", checked)
    print(f"mirrored {len(ok)} modules, {checked} public names checked")
    assert not problems, "\n".join(problems)


def test_star_import(upstream_tree: tuple[list[str], dict[str, str]]) -> None:
    """``from fbgemm_npu.<path> import *`` binds the names upstream's star import binds."""
    for name in upstream_tree[0]:
        up: dict[str, Any] = {}
        ours: dict[str, Any] = {}
        exec(f"from {name} import *", up)
        exec(f"from {_mirror_of(name)} import *", ours)
        assert set(ours) == set(up), name


def test_not_importable_upstream_fails_alike(
    upstream_tree: tuple[list[str], dict[str, str]],
) -> None:
    """The mirror of a module upstream cannot import raises the same exception type."""
    for name in upstream_tree[1]:
        with pytest.raises(Exception) as up:
            importlib.import_module(name)
        with pytest.raises(type(up.value)):
            importlib.import_module(_mirror_of(name))
        assert _mirror_of(name) not in sys.modules


def test_sample_names() -> None:
    """The names a migrating user types first."""
    import fbgemm_gpu.split_embedding_configs as up_configs
    import fbgemm_gpu.split_table_batched_embeddings_ops as up_ops
    import fbgemm_gpu.split_table_batched_embeddings_ops_training as up_training
    import fbgemm_gpu.tbe.utils as up_utils

    import fbgemm_npu.sparse_ops
    import fbgemm_npu.split_table_batched_embeddings_ops as ops
    import fbgemm_npu.split_table_batched_embeddings_ops_training as training
    from fbgemm_npu.split_embedding_configs import EmbOptimType, SparseType
    from fbgemm_npu.split_table import modules
    from fbgemm_npu.tbe.utils import get_table_batched_offsets_from_dense, round_up

    assert EmbOptimType is up_configs.EmbOptimType and SparseType is up_configs.SparseType
    assert round_up is up_utils.round_up
    assert get_table_batched_offsets_from_dense is up_utils.get_table_batched_offsets_from_dense
    assert training.ComputeDevice is up_training.ComputeDevice
    split = training.SplitTableBatchedEmbeddingBagsCodegen
    assert split is modules.SplitTableBatchedEmbeddingBagsCodegen
    assert issubclass(split, up_training.SplitTableBatchedEmbeddingBagsCodegen)
    assert ops.SplitTableBatchedEmbeddingBagsCodegen is split  # a re-export, replaced too
    assert ops.OptimType is EmbOptimType
    int_nbit = ops.IntNBitTableBatchedEmbeddingBagsCodegen
    assert int_nbit is modules.IntNBitTableBatchedEmbeddingBagsCodegen
    assert issubclass(int_nbit, up_ops.IntNBitTableBatchedEmbeddingBagsCodegen)
    assert fbgemm_npu.sparse_ops.torch is torch  # upstream's imports are names too
    assert fbgemm_npu.tbe.utils is sys.modules["fbgemm_npu.tbe.utils"]
    assert repr(fbgemm_npu.sparse_ops) == (
        "<module 'fbgemm_npu.sparse_ops' (mirror of 'fbgemm_gpu.sparse_ops')>"
    )
    assert fbgemm_npu.tbe.__path__ == [] and not hasattr(fbgemm_npu.sparse_ops, "__path__")


def test_attribute_errors_name_both_packages() -> None:
    import fbgemm_npu.sparse_ops

    expected = (
        "module 'fbgemm_npu.sparse_ops' (mirror of 'fbgemm_gpu.sparse_ops') has no attribute 'x'"
    )
    with pytest.raises(AttributeError, match=f"^{re.escape(expected)}$"):
        fbgemm_npu.sparse_ops.x  # noqa: B018
    with pytest.raises(AttributeError, match="module 'fbgemm_npu' has no attribute 'x'"):
        fbgemm_npu.x  # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        import fbgemm_npu.no_such_module  # noqa: F401


def test_live_forwarding() -> None:
    """A name set on upstream's module later is visible through the mirror at once."""
    import fbgemm_gpu.enums as up

    import fbgemm_npu.enums as mirror

    up.fbgemm_npu_probe = probe = object()
    try:
        assert mirror.fbgemm_npu_probe is probe and "fbgemm_npu_probe" in dir(mirror)
    finally:
        del up.fbgemm_npu_probe
    assert not hasattr(mirror, "fbgemm_npu_probe")


_LAZY_SCRIPT = textwrap.dedent(
    """
    import json, sys, types
    import fbgemm_gpu
    before = {m for m in sys.modules if m.split(".")[0] == "fbgemm_gpu"}
    if sys.argv[1] == "stub":  # fbgemm_npu with an inert mirror: what the rest imports
        stub = types.ModuleType("fbgemm_npu._mirror")
        stub.install = lambda: None
        sys.modules[stub.__name__] = stub
    import fbgemm_npu
    after = {m for m in sys.modules if m.split(".")[0] == "fbgemm_gpu"}
    mirrors = [m for m, mod in sys.modules.items() if m.startswith("fbgemm_npu.")
               and "mirror of" in str(getattr(getattr(mod, "__spec__", None), "origin", ""))]
    print(json.dumps({"extra": sorted(after - before), "mirrors": mirrors}))
    """
)


def _lazy_child(mode: str) -> dict[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "FBGEMM_NPU_SIMULATE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", _LAZY_SCRIPT, mode],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def lazy_report() -> dict[str, dict[str, list[str]]]:
    return {mode: _lazy_child(mode) for mode in ("real", "stub")}


def test_mirror_imports_nothing(lazy_report: dict[str, dict[str, list[str]]]) -> None:
    """``import fbgemm_npu`` loads no mirror, and the mirror adds no fbgemm_gpu module."""
    assert lazy_report["real"]["mirrors"] == []
    assert lazy_report["real"]["extra"] == lazy_report["stub"]["extra"]
