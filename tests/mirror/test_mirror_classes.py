"""The npu-aware TBE classes of the mirror (``fbgemm_npu/split_table/modules.py``).

With an npu device (this process: the simulator, switched on by ``tests/conftest.py``) and no
device given, Split and Dense build on the current npu device; asked for the CPU, they build on
it; IntNBit waits for its npu lookup kernels. Without an npu device (a child interpreter with the
simulator off) all three behave exactly like upstream's classes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fbgemm_gpu import split_table_batched_embeddings_ops_inference as up_inference
from fbgemm_gpu import split_table_batched_embeddings_ops_training as up_training
from fbgemm_gpu.split_embedding_configs import SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
from fbgemm_gpu.tbe.config.embedding_config import ComputeDevice

from fbgemm_npu.split_table import modules

REPO = Path(__file__).resolve().parents[2]
NPU = torch.device("npu", 0)
HOST_SPECS = [(10, 4, EmbeddingLocation.HOST, ComputeDevice.CPU)]  # a CPU user's specs
CUDA_SPECS = [(10, 4, EmbeddingLocation.DEVICE, ComputeDevice.CUDA)]  # a CUDA user's specs
INT8_SPECS = [("t0", 10, 8, SparseType.INT8, EmbeddingLocation.DEVICE)]
PAIRS = [
    (
        modules.SplitTableBatchedEmbeddingBagsCodegen,
        up_training.SplitTableBatchedEmbeddingBagsCodegen,
    ),
    (
        modules.DenseTableBatchedEmbeddingBagsCodegen,
        up_training.DenseTableBatchedEmbeddingBagsCodegen,
    ),
    (
        modules.IntNBitTableBatchedEmbeddingBagsCodegen,
        up_inference.IntNBitTableBatchedEmbeddingBagsCodegen,
    ),
]


@pytest.mark.parametrize(("ours", "upstream"), PAIRS, ids=lambda c: c.__name__)
def test_thin_subclasses(ours: type, upstream: type) -> None:
    """Same names, a subclass of upstream's, a docstring of its own, upstream's signature."""
    import inspect

    assert issubclass(ours, upstream) and ours is not upstream
    assert (ours.__name__, ours.__qualname__) == (upstream.__name__, upstream.__qualname__)
    assert ours.__doc__ and "npu" in ours.__doc__
    assert inspect.signature(ours) == inspect.signature(upstream)


def test_split_builds_on_npu_without_a_device() -> None:
    """No device: the current npu device, for a CPU user's and a CUDA user's specs alike."""
    for specs in (HOST_SPECS, CUDA_SPECS):
        tbe = modules.SplitTableBatchedEmbeddingBagsCodegen(specs)
        assert tbe.current_device == NPU
        assert all(w.device == NPU for w in tbe.split_embedding_weights())
        assert isinstance(tbe, up_training.SplitTableBatchedEmbeddingBagsCodegen)
    # positional arguments bind as upstream's: device is not among them here
    tbe = modules.SplitTableBatchedEmbeddingBagsCodegen(HOST_SPECS, None)
    assert tbe.current_device == NPU


def test_split_builds_where_asked() -> None:
    for device in ("cpu", torch.device("cpu")):
        tbe = modules.SplitTableBatchedEmbeddingBagsCodegen(HOST_SPECS, device=device)
        assert tbe.current_device == torch.device("cpu")
    tbe = modules.SplitTableBatchedEmbeddingBagsCodegen(HOST_SPECS, device="npu:0")
    assert tbe.current_device == NPU


def test_dense_builds_on_npu_by_default_and_on_cpu_when_asked() -> None:
    tbe = modules.DenseTableBatchedEmbeddingBagsCodegen([(10, 4), (6, 8)])
    assert tbe.current_device == NPU and tbe.weights.device == NPU
    tbe = modules.DenseTableBatchedEmbeddingBagsCodegen([(10, 4)], use_cpu=True)
    assert tbe.current_device == torch.device("cpu") and tbe.weights.device.type == "cpu"


@pytest.fixture
def npu_int_nbit_kernel() -> Iterator[None]:
    """A stand-in PrivateUse1 kernel for the IntNBit lookup op, removed afterwards."""
    if modules.int_nbit_lookup_on_npu():  # the real kernels have landed
        yield
        return
    lib = torch.library.Library("fbgemm", "IMPL")
    op = modules.INT_NBIT_LOOKUP_OP.split("::")[1]

    def stand_in(*args: Any, **kwargs: Any) -> torch.Tensor:
        raise NotImplementedError("test stand-in")

    lib.impl(op, stand_in, "PrivateUse1")
    try:
        yield
    finally:
        lib._destroy()
    assert not modules.int_nbit_lookup_on_npu()


def test_int_nbit_is_upstream_until_its_npu_kernels_exist() -> None:
    """No npu lookup kernel: ``device=None`` fails as upstream's does; ``"cpu"`` works."""
    if modules.int_nbit_lookup_on_npu():
        pytest.skip("the npu kernels of the IntNBit lookup exist: see the test below")
    with pytest.raises(Exception) as upstream_error:
        up_inference.IntNBitTableBatchedEmbeddingBagsCodegen(INT8_SPECS)
    with pytest.raises(type(upstream_error.value), match=str(upstream_error.value)):
        modules.IntNBitTableBatchedEmbeddingBagsCodegen(INT8_SPECS)
    host = [(*INT8_SPECS[0][:4], EmbeddingLocation.HOST)]
    tbe = modules.IntNBitTableBatchedEmbeddingBagsCodegen(host, device="cpu")
    assert tbe.current_device == torch.device("cpu")


def test_int_nbit_switches_to_npu_with_its_kernels(npu_int_nbit_kernel: None) -> None:
    tbe = modules.IntNBitTableBatchedEmbeddingBagsCodegen(INT8_SPECS)
    assert tbe.current_device == NPU and tbe.D_offsets.device == NPU
    host = [(*INT8_SPECS[0][:4], EmbeddingLocation.HOST)]
    tbe = modules.IntNBitTableBatchedEmbeddingBagsCodegen(host, device="cpu")
    assert tbe.current_device == torch.device("cpu")


_NO_NPU_SCRIPT = textwrap.dedent(
    """
    import json
    import fbgemm_npu
    from fbgemm_gpu import split_table_batched_embeddings_ops_inference as up_inference
    from fbgemm_gpu import split_table_batched_embeddings_ops_training as up_training
    from fbgemm_gpu.split_embedding_configs import SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation as L
    from fbgemm_gpu.tbe.config.embedding_config import ComputeDevice
    from fbgemm_npu.split_table import modules

    def outcome(cls, *args, **kwargs):
        try:
            return str(cls(*args, **kwargs).current_device)
        except Exception as error:
            return f"{type(error).__name__}: {error}"

    cases = {
        "split": ([(10, 4, L.HOST, ComputeDevice.CPU)],),
        "split_cuda": ([(10, 4, L.DEVICE, ComputeDevice.CUDA)],),
        "dense": ([(10, 4)],),
        "int_nbit": ([("t0", 10, 8, SparseType.INT8, L.DEVICE)],),
    }
    classes = {"split": "SplitTableBatchedEmbeddingBagsCodegen",
               "dense": "DenseTableBatchedEmbeddingBagsCodegen",
               "int_nbit": "IntNBitTableBatchedEmbeddingBagsCodegen"}
    report = {"kind": fbgemm_npu.device_kind()}
    for case, args in cases.items():
        name = classes[case.split("_cuda")[0]]
        up = getattr(up_inference if case == "int_nbit" else up_training, name)
        report[case] = [outcome(getattr(modules, name), *args), outcome(up, *args)]
    print(json.dumps(report))
    """
)


def test_without_npu_they_are_upstream() -> None:
    """Simulator off (no npu device): each class does exactly what upstream's does."""
    env = {k: v for k, v in os.environ.items() if k != "FBGEMM_NPU_SIMULATE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", _NO_NPU_SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    if report.pop("kind") != "none":
        pytest.skip("an npu device is present without the simulator (torch_npu installed)")
    for case, (ours, upstream) in report.items():
        assert ours == upstream, case
    assert report["split"][0] == "cpu"
