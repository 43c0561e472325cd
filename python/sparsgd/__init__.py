"""sparsgd: sparse gradient exchange for data-parallel training on slow networks.

The C++ library's torch layer for Python. ``sparsgd.torch`` holds what a PyTorch user adds to a
training script: a DDP communication hook (``HookState`` + ``hook``) and a Horovod-style
``DistributedOptimizer`` that wraps any ``torch.optim`` optimizer, both over the process group that
``torch.distributed.init_process_group`` created.
"""

import torch as _torch  # loads LibTorch before the extension that links it

from . import _C
from ._C import Error, InvalidArgument, InvalidData, PeerFailed, TransportError, aggregator_properties

__version__ = _C.version()
__revision__ = _C.source_revision()  # the git commit the C++ library was built from
COMPRESSORS = tuple(_C.compressor_names())
AGGREGATORS = tuple(_C.aggregator_names())

__all__ = ["Error", "InvalidArgument", "InvalidData", "PeerFailed", "TransportError", "COMPRESSORS",
           "AGGREGATORS", "aggregator_properties"]
