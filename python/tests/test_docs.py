"""The README's Python examples run as written (tests/it/docs.rs runs the shell examples; the
Python guide's example, which asks for the GPU, runs in test_python.py)."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def examples():
    for name in ["README.md"]:
        text = (ROOT / name).read_text()
        for i, code in enumerate(BLOCK.findall(text)):
            yield pytest.param(code, id=f"{name}-{i}")


def test_there_are_examples():
    assert len(list(examples())) >= 1


@pytest.mark.parametrize("code", list(examples()))
def test_example_runs(code, capsys):
    exec(compile(code, "<doc example>", "exec"), {})
    assert capsys.readouterr().out.strip()
