"""torchrec and fbgemm_gpu's modules on npu: KeyedTensor.regroup, torchrec's
permute_multi_embedding and KTRegroupAsDict (gradients included) against the CPU, fbgemm_gpu's
PermutePooledEmbeddings (its plan derived every call); every op of the family registered on npu.
"""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing.budgets import assert_op_budget
from fbgemm_npu.testing.pooled_inputs import keyed

F = torch.ops.fbgemm
NPU = "npu"
PERMUTE_OPS = (
    "permute_pooled_embs",
    "permute_pooled_embs_split",
    "permute_pooled_embs_auto_grad",
    "permute_pooled_embs_auto_grad_split",
)
CROSS = ("merge_pooled_embeddings", "all_to_one_device", "sum_reduce_to_one")


def test_torchrec_keyed_tensor_regroup_paths() -> None:
    """KeyedTensor.regroup (permute_pooled_embs_auto_grad), torchrec's permute_multi_embedding
    (kt_regroup_arguments + permute_multi_embedding) and KTRegroupAsDict, gradients included."""
    from torchrec.modules.regroup import KTRegroupAsDict
    from torchrec.sparse.jagged_tensor import KeyedTensor, permute_multi_embedding

    d = keyed(6, 4, 3)
    keys, lengths = d["keys"], d["lengths"]
    groups = [keys[0] + keys[1][:1], keys[1][1:]]

    def run(device: str) -> tuple[list[torch.Tensor], ...]:
        vals = [v.to(device).requires_grad_() for v in d["values"]]
        kts = [
            KeyedTensor(keys=k, length_per_key=n, values=x)
            for k, n, x in zip(keys, lengths, vals, strict=True)
        ]
        module = KTRegroupAsDict(groups=groups, keys=["x", "y"])
        outs = [
            KeyedTensor.regroup(kts, groups),
            permute_multi_embedding(kts, groups),
            list(module(kts).values()),
            list(module(kts).values()),
        ]
        flat = [o for group in outs for o in group]
        grads = torch.autograd.grad(sum((o * (k + 1)).sum() for k, o in enumerate(flat)), vals)
        return [o.detach().cpu() for o in flat], [g.cpu() for g in grads]

    ours, expected = run(NPU), run("cpu")
    for a, b in zip([*ours[0], *ours[1]], [*expected[0], *expected[1]], strict=True):
        assert torch.equal(a, b)


def test_fbgemm_permute_pooled_embeddings_module_on_npu(monkeypatch: pytest.MonkeyPatch) -> None:
    from fbgemm_gpu.permute_pooled_embedding_modules import PermutePooledEmbeddings

    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "1")  # the budget's checks are the default's

    module = PermutePooledEmbeddings([4, 4, 8, 2], [2, 0, 3, 1], device=torch.device(NPU))
    x = torch.randn(3, 18)
    expected = PermutePooledEmbeddings([4, 4, 8, 2], [2, 0, 3, 1])(x)
    assert torch.equal(module(x.to(NPU)).cpu(), expected)
    xd = x.to(NPU)
    fbgemm_npu.check()  # the queued checks read: the counted calls do not stack them
    # the module passes the same index tensors each call: the plan is derived again each time
    for _ in range(2):
        assert_op_budget(lambda: module(xd), "fbgemm::permute_pooled_embs_auto_grad", exact=True)


def test_every_op_is_covered_on_npu() -> None:
    from fbgemm_npu._registry import REGISTRY

    keys = dict(REGISTRY.coverage())
    autograd = {
        "permute_pooled_embs_auto_grad",
        "permute_pooled_embs_auto_grad_split",
        "permute_multi_embedding",
        "regroup_keyed_tensor",
    }
    for op in (
        *PERMUTE_OPS,
        "permute_multi_embedding",
        "regroup_keyed_tensor",
        "kt_regroup_arguments",
        *CROSS,
    ):
        want = {"PrivateUse1"} | ({"AutogradPrivateUse1"} if op in autograd else set())
        assert want <= set(keys[f"fbgemm::{op}"]), op
