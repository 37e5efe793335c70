"""torchrec's ``HashZchManagedCollisionModule`` in eval mode (its ``remap`` calls
``fbgemm::zero_collision_hash`` read-only, with per-bucket ``local_sizes`` / ``offsets``) on npu:
the remapped ids equal the module's on CPU (upstream's kernel), the identities untouched."""

from __future__ import annotations

import pytest
import torch

NPU = "npu"


def _remap(device: str, buckets: int) -> tuple[torch.Tensor, torch.Tensor]:
    from torchrec.modules.hash_mc_modules import HashZchManagedCollisionModule
    from torchrec.sparse.jagged_tensor import JaggedTensor

    g = torch.Generator().manual_seed(buckets)
    module = HashZchManagedCollisionModule(
        zch_size=32, device=torch.device(device), total_num_buckets=buckets, max_probe=8
    )
    ids = torch.randint(0, 1000, (32,), generator=g)
    stored = torch.where(torch.rand(32, generator=g) < 0.6, ids, -1)  # a trained table's state
    with torch.no_grad():
        module._hash_zch_identities.copy_(stored.view(32, 1))
    module.eval()
    values = torch.cat([ids[:12], torch.randint(0, 1000, (12,), generator=g)]).to(device)
    lengths = torch.tensor([5, 19]).to(device)
    out = module.remap({"f": JaggedTensor(values=values, lengths=lengths)})
    return out["f"].values().cpu(), module._hash_zch_identities.detach().cpu()


@pytest.mark.parametrize("buckets", [1, 4])
def test_eval_remap_on_npu_equals_cpu(buckets: int) -> None:
    want_ids, want_table = _remap("cpu", buckets)
    got_ids, got_table = _remap(NPU, buckets)
    assert torch.equal(got_ids, want_ids)
    assert torch.equal(got_table, want_table)
