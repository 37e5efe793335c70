"""fbgemm_npu: FBGEMM's ``torch.ops.fbgemm`` operators on Huawei Ascend NPUs.

``import fbgemm_npu`` where you wrote ``import fbgemm_gpu``.  The import loads upstream fbgemm_gpu
(schemas, CPU kernels, Python frontend), registers our npu kernels through the one registrar, and
picks the ``npu`` device: torch_npu when installed; else the simulated device when
``FBGEMM_NPU_SIMULATE=1`` (or after :func:`fbgemm_npu.testing.simulate`); else none.
"""

from __future__ import annotations

import fbgemm_gpu  # noqa: F401  - upstream schemas, CPU kernels and Python frontend

from fbgemm_npu import _device, _mirror
from fbgemm_npu._registry import register_all
from fbgemm_npu.split_table import device as _tbe_device

__version__ = "0.1.0"

register_all()
_tbe_device.apply()  # upstream's TBE Python on npu: fbgemm_npu/split_table/device.py
_device.activate()
_mirror.install()  # fbgemm_npu.<path> mirrors every public fbgemm_gpu.<path>: _mirror.py
from fbgemm_npu import integrations as _integrations  # noqa: E402, F401 - torchrec on npu
from fbgemm_npu.native._pending import check  # noqa: E402 - the deferred data checks' read
from fbgemm_npu.native._triton import kernel_mode  # noqa: E402 - tensor / triton / auto kernels

device_kind = _device.device_kind

__all__ = ["__version__", "check", "device_kind", "kernel_mode"]
