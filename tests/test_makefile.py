"""The README's `make book` on a Python whose scripts are not where pip would put them (issue 45).

A virtual environment made with ``--system-site-packages`` on a machine whose Python already has
jupyter-book: ``make install`` finds it installed and puts no ``jupyter-book`` script in the
venv's ``bin/``. The Makefile reached the builder through that folder and failed with Error 127;
every tool now runs through ``$(PYTHON)``. The book built is a small one (``BOOK``): one page,
executed on the kernel ``make`` installs, which prints the interpreter it runs on.
"""

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _book(folder: Path) -> None:
    folder.mkdir()
    (folder / "_config.yml").write_text(
        "title: A page\nexecute:\n  execute_notebooks: force\n  raise_on_error: true\n"
        "sphinx:\n  config:\n    nb_execution_raise_on_error: true\n"
    )
    (folder / "_toc.yml").write_text("format: jb-book\nroot: index\n")
    code = (
        "import sys\n\nimport gpt1lib\n\nprint('kernel in the venv:', sys.prefix.endswith('venv'))"
    )
    nb = {
        "cells": [
            {"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["# A page"]},
            {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": None,
             "outputs": [], "source": [code]},
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                    "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }  # fmt: skip
    (folder / "index.ipynb").write_text(json.dumps(nb))


def test_make_book_runs_the_builder_through_the_interpreter_it_installed_into(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    assert not (env_dir / "bin" / "jupyter-book").exists()  # the case: no script beside it
    assert subprocess.run([python, "-c", "import jupyter_book"]).returncode == 0
    _book(tmp_path / "book")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    made = subprocess.run(
        ["make", "book", f"PYTHON={python}", f"BOOK={tmp_path / 'book'}",
         f"KERNEL={tmp_path / 'kernel'}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    page = (tmp_path / "book" / "_build" / "html" / "index.html").read_text()
    assert "kernel in the venv: True" in page  # executed on the venv's interpreter
    assert sys.prefix != str(env_dir)
