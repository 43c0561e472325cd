"""sparsgd: sparse gradient exchange for data-parallel training on slow networks.

The C++ library's torch layer for Python. ``sparsgd.torch`` holds what a PyTorch user adds to a
training script: a DDP communication hook (``HookState`` + ``hook``) and a Horovod-style
``DistributedOptimizer`` that wraps any ``torch.optim`` optimizer, both over the process group that
``torch.distributed.init_process_group`` created.
"""

import sys as _sys

import torch as _torch  # loads LibTorch before the extension that links it

try:
    from . import _build  # written by the build beside the extension
except ImportError:
    raise ImportError("sparsgd: this is the package's source directory, not a build of it: install it with "
                      "pip install --no-build-isolation <sparsgd source directory>, or use PYTHONPATH=build/python "
                      "after scripts/setup.sh") from None


def _check_torch(built_with, found):
    """The extension links LibTorch's C++ API, which has no stable ABI across torch releases:
    loaded next to another torch it fails with undefined symbols, or worse. Refuse first, in one line."""
    if built_with != found:
        raise ImportError(
            f"sparsgd {_build.VERSION} was built against torch {built_with}, but this environment has torch {found}; "
            f"rebuild it against this torch: {_sys.executable} -m pip install --no-build-isolation --force-reinstall "
            f"--no-deps {_build.SOURCE_DIR}")


_check_torch(_build.TORCH_VERSION, _torch.__version__)

from . import _C  # noqa: E402  (only once torch is known to be the one it was built against)
from ._C import (Error, InvalidArgument, InvalidData, PeerFailed, TransportError, aggregator_properties,  # noqa: E402
                 compressor_properties)

__version__ = _C.version()
__revision__ = _C.source_revision()  # the git commit the C++ library was built from
COMPRESSORS = tuple(_C.compressor_names())
AGGREGATORS = tuple(_C.aggregator_names())
TORCH_VERSION = _build.TORCH_VERSION  # the torch the package was built against (and runs with)
CUDA_KERNELS = _build.CUDA_KERNELS  # whether the extension holds sparsgd's own CUDA kernels



def describe():
    """Every compressor and aggregator with its one-line summary, from the C++ registries:
    {"compressors": {name: summary}, "aggregators": {name: summary}}."""
    return {"compressors": {name: compressor_properties(name)["summary"] for name in COMPRESSORS},
            "aggregators": {name: aggregator_properties(name)["summary"] for name in AGGREGATORS}}


__all__ = ["Error", "InvalidArgument", "InvalidData", "PeerFailed", "TransportError", "COMPRESSORS",
           "AGGREGATORS", "TORCH_VERSION", "CUDA_KERNELS", "aggregator_properties", "compressor_properties",
           "describe"]
