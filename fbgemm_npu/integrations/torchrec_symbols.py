"""Every torchrec symbol that :mod:`fbgemm_npu.integrations.torchrec` touches, in one place.

torchrec 1.9.2 knows the devices ``cpu``, ``cuda``, ``mtia`` and ``tpu``.  To make it treat
``npu`` as the accelerator it is, without editing a torchrec file, two kinds of adaptation are
used, always the narrowest that works:

``devices``
    The function decides "is this device an accelerator?" with a literal set or tuple of device
    names (``compute_device in {"cuda", "mtia", "tpu"}``).  CPython keeps such a literal as one
    constant of the function's code object; the adaptation replaces that constant by the same
    set plus ``"npu"`` (nested code objects - comprehensions - included).  For any other device
    the function behaves exactly as before: membership of ``"cpu"``, ``"cuda"``... is unchanged.
    ``literals`` lists the exact sets extended; ``count`` is how many constants must match, so a
    torchrec whose code moved fails loudly at :func:`~fbgemm_npu.integrations.torchrec.apply`.
``wrap``
    The function makes a device-specific choice that a set cannot express (which
    ``ComputeDevice`` a TBE gets, the HBM capacity, which device ``get_device_type()`` reports).
    It is replaced by a wrapper (``wrapper`` names it, ``module:function`` under
    ``fbgemm_npu.integrations``) that changes nothing unless an npu device is involved.

``when`` restricts an entry: ``"streams"`` entries are applied where
:func:`~fbgemm_npu.integrations.torchrec.streams_enabled` says the npu device has streams, which
both npu devices now do (torch_npu's real streams, and the simulator's ``torch.Stream`` objects
with ``record_stream``), so the train pipelines take their accelerator (stream) path on npu.

``tests/integrations/test_torchrec_adaptation.py`` fails when the installed torchrec is not
:data:`TORCHREC_VERSION`, and checks that every entry below still applies.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SYMBOLS", "TORCHREC_VERSION", "Symbol"]

# The torchrec version every entry below was written and checked against.
TORCHREC_VERSION = "1.9.2"

_ACCEL3 = frozenset({"cuda", "mtia", "tpu"})
_ACCEL2 = frozenset({"cuda", "mtia"})
_ALL4 = frozenset({"cpu", "cuda", "mtia", "tpu"})


@dataclass(frozen=True)
class Symbol:
    """One adapted torchrec symbol: where it is, how it is adapted and why."""

    module: str  # "torchrec.distributed.planner.types"
    name: str  # attribute path inside the module: "Topology.__init__"
    how: str  # "devices" or "wrap"
    why: str
    literals: tuple[frozenset[str], ...] = ()  # for "devices": the sets that get "npu"
    count: int = 0  # for "devices": how many code constants must match
    wrapper: str = ""  # for "wrap": "torchrec_planner:topology_init"
    when: str = "always"  # or "streams"

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"


_P = "torchrec.distributed.planner"
_D = "torchrec.distributed"
_TP = "torchrec.distributed.train_pipeline"

SYMBOLS: tuple[Symbol, ...] = (
    # --- planner: topology, storage, estimates, placements ----------------------------------
    Symbol(f"{_P}.types", "Topology.__init__", "devices",
           "asserts the compute device is cpu/cuda/mtia/tpu; gives HBM only to cuda/mtia/tpu",
           (_ALL4, _ACCEL3), 2),
    Symbol(f"{_P}.types", "Topology.__init__", "wrap",
           "npu HBM capacity from the device (mem_get_info), else FBGEMM_NPU_HBM_BYTES / default",
           wrapper="torchrec_planner:topology_init"),
    Symbol(f"{_P}.types", "KernelConfig.validate", "devices",
           "valid_devices of TopologyFactory's kernel config", (_ALL4,), 1),
    Symbol(f"{_P}.types", "HardwareConfig.get_validation_issues", "devices",
           "HBM sanity check runs for HBM-bearing accelerators only", (_ACCEL2,), 1),
    Symbol(f"{_P}.enumerators", "EmbeddingEnumerator.__init__", "devices",
           "custom per-device memory comes from hbm_cap on accelerators", (_ACCEL3,), 1),
    Symbol(f"{_P}.utils", "placement", "devices",
           "shard placement 'rank:r/npu:i' (with the local device index)", (_ACCEL3,), 1),
    Symbol(f"{_D}.sharding_plan", "placement", "devices",
           "the placement the planner's to_sharding_plan uses", (_ACCEL3,), 1),
    Symbol(f"{_P}.storage_reservations", "_reserve_dense_storage", "devices",
           "dense parameters are reserved in HBM on accelerators", (_ACCEL2,), 1),
    Symbol(f"{_P}.storage_reservations", "_get_kjt_storage", "devices",
           "input KJTs are reserved in HBM on accelerators", (_ACCEL2,), 1),
    Symbol(f"{_P}.shard_estimators", "calculate_shard_storages", "devices",
           "pipeline I/O of a shard counts against HBM on accelerators", (_ACCEL2,), 1),
    Symbol(f"{_P}.constants", "kernel_bw_lookup", "wrap",
           "no bandwidth entry for npu: npu's dense/fused/quant kernels are HBM kernels as on cuda",
           wrapper="torchrec_planner:kernel_bw_lookup"),
    Symbol(f"{_P}.estimator.types", "kernel_bw_lookup", "wrap",
           "the binding the perf estimator calls (imported by name)",
           wrapper="torchrec_planner:kernel_bw_lookup"),
    # --- which device torchrec thinks it runs on -----------------------------------------------
    Symbol(f"{_D}.utils", "get_device_type", "wrap",
           "can never answer npu: answers npu when no cuda/mtia/tpu and an npu device is present",
           wrapper="torchrec_planner:get_device_type"),
    Symbol(f"{_P}.planners", "get_device_type", "wrap",
           "binding used by EmbeddingShardingPlanner(topology=None)",
           wrapper="torchrec_planner:get_device_type"),
    Symbol(f"{_D}.sharding_plan", "get_device_type", "wrap",
           "binding used by construct_module_sharding_plan(device_type=None)",
           wrapper="torchrec_planner:get_device_type"),
    Symbol(f"{_D}.shard", "_shard", "wrap",
           "shard(device=None) picks cuda or cpu: picks the current npu device instead of cpu",
           wrapper="torchrec_kernels:default_device_shard"),
    Symbol(f"{_D}.shard", "_shard_modules", "wrap",
           "shard_modules(device=None) likewise", wrapper="torchrec_kernels:default_device_shard"),
    # --- sharders and kernels ----------------------------------------------------------------
    Symbol(f"{_D}.embedding_types", "BaseEmbeddingSharder.sharding_types", "devices",
           "row-wise, table-row-wise and grid sharding only for cuda/tpu",
           (frozenset({"cuda", "tpu"}),), 1),
    Symbol(f"{_D}.embeddingbag", "ShardedEmbeddingBagCollection.init_data_parallel", "devices",
           "DDP of data-parallel tables gets device_ids on accelerators", (_ACCEL3,), 1),
    Symbol(f"{_D}.batched_embedding_kernel", "BatchedFusedEmbeddingBag.__init__", "wrap",
           "non-cuda devices get ComputeDevice.CPU + EmbeddingLocation.HOST: npu gets "
           "ComputeDevice.CUDA + the kernel's location (DEVICE), so dev_weights live on npu",
           wrapper="torchrec_kernels:fused_init"),
    Symbol(f"{_D}.batched_embedding_kernel", "BatchedFusedEmbedding.__init__", "wrap",
           "the same for EmbeddingCollection's fused kernel",
           wrapper="torchrec_kernels:fused_init"),
    Symbol(f"{_D}.batched_embedding_kernel", "BatchedDenseEmbeddingBag.__init__", "wrap",
           "use_cpu=True when CUDA is absent: npu builds the dense TBE on its own device",
           wrapper="torchrec_kernels:dense_init"),
    Symbol(f"{_D}.batched_embedding_kernel", "BatchedDenseEmbedding.__init__", "wrap",
           "the same for EmbeddingCollection's dense kernel",
           wrapper="torchrec_kernels:dense_init"),
    # --- train pipelines: streams where the device has them ---------------------------------
    Symbol(f"{_TP}.train_pipelines", "TrainPipelineBase.__init__", "devices",
           "memcpy stream and stream context on accelerators", (_ACCEL2,), 1, when="streams"),
    Symbol(f"{_TP}.train_pipelines", "TrainPipelineSparseDist.__init__", "devices",
           "memcpy and data-dist streams on accelerators", (_ACCEL2,), 1, when="streams"),
    Symbol(f"{_TP}.train_pipelines", "PrefetchTrainPipelineSparseDist.__init__", "devices",
           "prefetch and default streams on accelerators", (_ACCEL2,), 1, when="streams"),
    Symbol(f"{_TP}.train_pipelines", "TrainPipelineFusedSparseDist.__init__", "devices",
           "embedding-lookup stream on accelerators", (_ACCEL2,), 1, when="streams"),
    Symbol(f"{_TP}.train_pipelines", "StagedTrainPipeline.__init__", "devices",
           "stream context on accelerators", (_ACCEL2,), 1, when="streams"),
    Symbol(f"{_TP}.utils", "DataLoadingThread.__init__", "devices",
           "memcpy stream on accelerators", (_ACCEL2,), 1, when="streams"),
    Symbol(f"{_TP}.utils", "DataLoadingThread.run", "wrap",
           "the loading thread makes the main thread's device current for cuda/mtia only",
           wrapper="torchrec_kernels:thread_device_run", when="streams"),
    Symbol(f"{_TP}.utils", "_init_inplace_copy_worker", "wrap",
           "the in-place copy worker likewise", wrapper="torchrec_kernels:thread_device_init",
           when="streams"),
    Symbol(f"{_TP}.utils", "AsyncInplaceCopyMixin._setup_async_inplace_copy", "devices",
           "asynchronous in-place batch copy only on accelerators", (_ACCEL2,), 1,
           when="streams"),
    Symbol(f"{_TP}.pipeline_stage", "SparseDataDistUtil.__init__", "devices",
           "stream context on accelerators", (_ACCEL2,), 1, when="streams"),
    Symbol(f"{_TP}.postproc", "PipelinedPostproc.__init__", "devices",
           "stream context on accelerators", (_ACCEL2,), 1, when="streams"),
    Symbol(f"{_TP}.postproc", "PipelinedPostproc.recursive_record_stream", "devices",
           "record_stream of postproc outputs on accelerators", (_ACCEL2,), 1, when="streams"),
    Symbol(f"{_D}.comm_ops", "Request._wait_impl", "wrap",
           "records a collective's output on the current stream for cuda only",
           wrapper="torchrec_kernels:wait_impl", when="streams"),
)  # fmt: skip
