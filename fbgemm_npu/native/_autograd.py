"""The two questions every ``AutogradPrivateUse1`` kernel in ``fbgemm_npu/native/`` asks.

An autograd kernel either records the call (wraps it in its ``torch.autograd.Function``) or, when
nothing needs a gradient, goes straight to the op's ``PrivateUse1`` kernel below autograd, so an
inference call costs no extra launch and the counters see the op the user called:

    if not needs_grad(values, weights):
        return below_autograd(torch.ops.fbgemm.permute_2D_sparse_data, permute, lengths, ...)
    return _Permute2DFunction.apply(...)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

__all__ = ["below_autograd", "needs_grad"]

T = TypeVar("T")


def needs_grad(*tensors: object) -> bool:
    """Whether autograd must record this call: grad mode is on and one of ``tensors`` requires a
    gradient.  Anything that is not a tensor (``None`` for an omitted optional input) is skipped,
    so a tensor list can be passed unpacked (``needs_grad(*input_group)``)."""
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in tensors
    )


def below_autograd(fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """``fn(*args, **kwargs)`` with the autograd dispatch keys excluded: a ``torch.ops`` call
    reaches the op's ``PrivateUse1`` kernel directly (no launch of its own)."""
    with torch._C._AutoDispatchBelowAutograd():
        return fn(*args, **kwargs)
