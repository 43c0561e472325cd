"""Every launch line that README.md, docs/ and the examples give for the Python side runs as written: the
torchrun commands (torch's own launcher from the .venv), the examples, short. Each line is taken
from the document itself, so a line that goes stale fails here. Only three things are changed: the
PYTHONPATH a line sets points at the package this test suite runs against, an --out goes to a
temporary directory, and a training run stops after a few iterations."""

import ast
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _shell_blocks_of_documents():
    documents = [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, "docs", name) for name in os.listdir(os.path.join(ROOT, "docs")) if name.endswith(".md"))
    return [block for path in documents for block in re.findall(r"```sh\n(.*?)```", open(path).read(), flags=re.S)]


def _docstring_blocks_of_examples():
    blocks = []
    for name in sorted(os.listdir(os.path.join(ROOT, "examples"))):
        if name.endswith(".py"):
            doc = ast.get_docstring(ast.parse(open(os.path.join(ROOT, "examples", name)).read())) or ""
            # The indented command lines of the module docstring.
            blocks.append("\n".join(line[4:] for line in doc.splitlines() if line.startswith("    ")))
    return blocks


def _commands(block):
    """Logical lines (continuations joined), comments dropped, that launch Python."""
    joined = re.sub(r"\\\n\s*", " ", block)
    for line in joined.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # not a shell line (a fragment of another language in the block)
            assert "torchrun" not in line and "examples/" not in line, f"a launch line that does not parse: {line}"
            continue
        program = next((w for w in words if "=" not in w), "")
        if program.endswith("torchrun") or (program.endswith("python") and any(w.startswith("examples/") for w in words)):
            yield shlex.join(words)


LINES = sorted({c for b in _shell_blocks_of_documents() + _docstring_blocks_of_examples() for c in _commands(b)})


def test_the_documents_have_launch_lines():
    assert any("torchrun" in line for line in LINES), LINES
    assert any("export_torchscript.py" in line for line in LINES), LINES


@pytest.mark.parametrize("line", LINES)
def test_launch_line_runs(line, tmp_path):
    words = shlex.split(line)
    env = dict(os.environ)
    while "=" in words[0] and not words[0].startswith("-"):
        key, value = words.pop(0).split("=", 1)
        env[key] = os.environ.get("PYTHONPATH", value) if key == "PYTHONPATH" else value
    for i, word in enumerate(words[:-1]):
        if word == "--out":
            words[i + 1] = str(tmp_path / os.path.basename(words[i + 1]))
    training = any(w.endswith("ddp_fashion_mnist.py") for w in words)
    if training:
        words += ["--max-iters", "4", "--out", str(tmp_path / "summary.json")]
    program = words[0] if os.path.isabs(words[0]) else os.path.join(ROOT, words[0])
    assert os.path.exists(program), f"{words[0]} (from README.md, docs/ or examples/) does not exist: run scripts/setup.sh"
    done = subprocess.run(words, cwd=ROOT, env=env, capture_output=True, text=True, timeout=420)
    assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if training:
        summary = json.load(open(tmp_path / "summary.json"))
        assert summary["iterations"] == 4 and summary["torch"].startswith("2."), summary
