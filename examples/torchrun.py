#!/usr/bin/python3
"""`python3 -m torch.distributed.run` (torchrun) for Debian 12's torch 1.13 on Python 3.11.

There torchrun fails at start with "AttributeError: 'NoneType' object has no attribute 'get'":
its Std.from_str("0") looks the value up by iterating the Std flag, and Python 3.11 no longer
yields a flag's zero member, so the default --redirects 0 / --tee 0 parse to None. This wrapper
reads None as Std.NONE and runs torchrun unchanged otherwise:

    /usr/bin/python3 examples/torchrun.py --nproc_per_node 4 examples/ddp_fashion_mnist.py --hook sparsgd
"""

import sys

import torch.distributed.elastic.multiprocessing as elastic_multiprocessing
from torch.distributed import run
from torch.distributed.elastic.multiprocessing import api

_to_map = api.to_map


def _to_map_reading_none_as_no_redirect(val_or_map, local_world_size):
    return _to_map(api.Std.NONE if val_or_map is None else val_or_map, local_world_size)


# start_processes looks to_map up in the package, which imported it from api.
elastic_multiprocessing.to_map = _to_map_reading_none_as_no_redirect

if __name__ == "__main__":
    sys.exit(run.main())
