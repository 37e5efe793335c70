"""``fbgemm::murmur_hash3`` on npu: upstream's ``murmur_hash3_2x64(x, y, seed)`` of one int64.

Contract, read from upstream's CPU kernel (``faster_hash.cpp``: ``murmur_hash3_cpu``, also its
CompositeImplicitAutograd kernel) and measured on fbgemm-gpu-cpu 1.8.0: ``input`` is a 1-D int64
tensor of exactly one element (``item()``), ``y`` and ``seed`` host ints taken modulo ``2**64``;
the result is a 0-d int64 tensor.  Upstream's is a CPU tensor built from the uint64 hash by
``at::scalar_tensor``, which *raises* ``RuntimeError("value cannot be converted to type int64_t
without overflow")`` for every hash of ``2**63`` or more (about half of all inputs: ``x = 0``
is one).  Ours is on the input's device and holds the hash's 64 bits as int64 (two's
complement): equal to upstream wherever upstream returns, ``hash - 2**64`` where it raises --
the value the zero-collision hash uses internally (``zero_collision_hash.py``).  Not
elementwise: upstream refuses any size but one element, and so does ours (``RuntimeError``
naming ``input``).  Upstream's Meta kernel calls ``item()`` on the meta tensor and fails; it is
upstream's, so we add none (docs/design.md rule 1).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import check_tensor
from fbgemm_npu.native.fbgemm.zch._hash import murmur_hash3_2x64
from fbgemm_npu.native.fbgemm.zch._utils import require, runtime_dtype, runtime_ndim

__all__ = ["KERNELS", "murmur_hash3_npu"]

MURMUR = "fbgemm::murmur_hash3"


def murmur_hash3_npu(input: torch.Tensor, y: int, seed: int) -> torch.Tensor:  # noqa: A002
    """``murmur_hash3_2x64(uint64(input[0]), uint64(y), uint64(seed))`` as a 0-d int64 tensor on
    ``input``'s device (module docstring for the contract).

    Math: MurmurHash3's x64 128-bit mix of the blocks ``(x, y)``, both halves folded by xor
    (``_hash.py``: wrapping int64 multiplies and adds; shifts by ``floor_divide`` and a mask).
    Dtypes: int64 in and out.  Launches: the hash's 44 elementwise int64 ops; 0 syncs (the
    checks read shapes only).  Budget: ``budgets.py``.
    """
    op = MURMUR
    t = check_tensor(op, "input", input)
    runtime_dtype(op, "input", t, (torch.int64,))
    runtime_ndim(op, "input", t, (1,))
    require(
        t.numel() == 1,
        op,
        f"argument 'input' must hold exactly one element (upstream hashes one id), got {t.numel()}",
    )
    return murmur_hash3_2x64(t.detach().reshape(()), int(y), int(seed))


KERNELS = {MURMUR: {"PrivateUse1": murmur_hash3_npu}}
