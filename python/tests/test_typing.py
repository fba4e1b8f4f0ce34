"""mypy --strict on the installed package (its annotations, the compiled module's stub,
py.typed) and on the Python examples of the README and the Python guide, as written."""

import os
import pathlib
import subprocess
import sys

import pytest

import rosenblatt
from test_docs import BLOCK, ROOT

PACKAGE = pathlib.Path(rosenblatt.__file__).parent


def mypy():
    try:
        import mypy  # noqa: F401
    except ImportError:
        if os.environ.get("ROSENBLATT_REQUIRE_MYPY") == "1":
            pytest.fail("ROSENBLATT_REQUIRE_MYPY=1 but mypy is not installed")
        pytest.skip("mypy is not installed")
    config = ROOT / "python" / "pyproject.toml"
    return [sys.executable, "-m", "mypy", "--strict", "--config-file", str(config)]


def test_the_installed_package_is_tested_not_the_source_tree():
    assert "site-packages" in str(PACKAGE), PACKAGE


def test_the_package_ships_its_types():
    assert (PACKAGE / "py.typed").exists()
    assert (PACKAGE / "_rosenblatt.pyi").exists()


def test_mypy_strict_on_the_installed_package():
    r = subprocess.run(
        mypy() + ["-p", "rosenblatt"], capture_output=True, text=True, cwd=PACKAGE.parent.parent
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_on_the_documented_examples(tmp_path):
    files = []
    for name in ("README.md", "docs/python.md"):
        for i, code in enumerate(BLOCK.findall((ROOT / name).read_text())):
            f = tmp_path / f"{name.replace('/', '_').replace('.', '_')}_{i}.py"
            f.write_text(code)
            files.append(str(f))
    assert len(files) >= 2
    r = subprocess.run(mypy() + files, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
