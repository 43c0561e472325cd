"""The package as a user meets it: it names the torch it was built against, refuses another torch
in one clear line before it loads the extension (never a symbol error or a crash), and, where it
was built with nvcc, holds sparsgd's CUDA kernels, which agree with the CPU on a device."""

import os
import struct
import subprocess
import sys

import pytest
import torch

import sparsgd
from sparsgd import _C


def test_names_the_torch_it_runs_with():
    assert sparsgd.TORCH_VERSION == torch.__version__
    assert torch.__version__.split(".")[0] == "2"
    assert isinstance(sparsgd.CUDA_KERNELS, bool) and sparsgd.CUDA_KERNELS == _C.cuda_kernels_built()


@pytest.mark.parametrize("other", ["2.99.0", "2.11.0+cpu", "1.13.1"])
def test_another_torch_is_refused_in_one_line(tmp_path, other):
    # A torch of another version first on the path: only its version matters, the package must
    # refuse before it loads the extension that links the real LibTorch.
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text(f"__version__ = {other!r}\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", "import sparsgd"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: sparsgd "), done.stderr
    assert f"was built against torch {torch.__version__}, but this environment has torch {other}" in last
    assert "-m pip install --no-build-isolation --force-reinstall --no-deps" in last
    assert "undefined symbol" not in done.stderr and "Segmentation" not in done.stderr


def _key(x):
    return struct.unpack("<I", struct.pack("<f", x))[0] & 0x7FFFFFFF


@pytest.mark.skipif(not sparsgd.CUDA_KERNELS, reason="the package was built without nvcc (SPARSGD_CUDA)")
def test_cuda_magnitude_counts_match_the_cpu():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device: torch.cuda.is_available() is False")
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(1_000_003, generator=generator)
    x[::97] = 1.0  # ties at the pivot
    x[5] = -0.0
    pivot = _key(1.0)
    got = _C.magnitude_counts(x.cuda(), pivot)
    keys = x.view(torch.int32) & 0x7FFFFFFF
    assert got["greater"] == int((keys > pivot).sum())
    assert got["equal"] == int((keys == pivot).sum())
    assert got["max_key"] == int(keys.max())


@pytest.mark.skipif(not sparsgd.CUDA_KERNELS, reason="the package was built without nvcc (SPARSGD_CUDA)")
def test_cuda_magnitude_counts_refuse_a_cpu_tensor():
    with pytest.raises(sparsgd.InvalidArgument, match="takes a CUDA tensor, got one on cpu"):
        _C.magnitude_counts(torch.ones(4), 0)
