"""The Colab user's journey, as far as it can be tested without Colab: every chapter's badge
and install cell name _config.yml's repository; a wheel built from the checkout carries the
recorded runs, and an installed gpt1lib outside any checkout finds them; paths resolve against
the checkout from its root, from book/, and ./runs outside one."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from gpt1lib import paths
from gpt1lib.harness.reproduce import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import colab_links  # noqa: E402


def test_every_badge_and_install_cell_names_the_configured_repository():
    url, branch = paths.repository(ROOT)
    github = url.removeprefix("https://github.com/")
    assert colab_links.main(["--check"]) == 0, "run: python tools/colab_links.py"
    for nb in sorted((ROOT / "book").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        first = next(
            i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", [])
        )
        text = "".join("".join(c["source"]) for c in cells[:first])  # what runs before it
        assert f"(https://colab.research.google.com/github/{github}/blob/{branch}/book/" in text
        assert re.search(rf'%pip install -q "gpt1lib(\[\w+\])? @ git\+{url}@{branch}"', text), nb
    # no other file names the repository by hand (_config.yml and the generated cells aside)
    grep = ["git", "grep", "-l", url.removeprefix("https://")]
    hits = subprocess.run(grep, cwd=ROOT, capture_output=True, text=True).stdout.split()
    generated = {f"book/{p.name}" for p in (ROOT / "book").glob("*.ipynb")}
    generated |= {f"book/{p.name}" for p in (ROOT / "book").glob("*.md")}  # source links
    assert set(hits) <= {"_config.yml"} | generated


def test_a_disagreeing_notebook_is_named(tmp_path, monkeypatch):
    book = tmp_path / "book"
    book.mkdir()
    shutil.copy(ROOT / "_config.yml", tmp_path)
    (tmp_path / "_toc.yml").write_text("root: intro\n")
    nb = json.loads((ROOT / "book" / "02_model.ipynb").read_text())
    nb["cells"][1]["source"] = ['%pip install -q "gpt1lib @ git+https://github.com/someone/else"']
    (book / "02_model.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    monkeypatch.setattr(colab_links, "ROOT", tmp_path)
    assert colab_links.main(["--check"]) == 1
    assert colab_links.main([]) == 0 and colab_links.main(["--check"]) == 0  # rewritten


def test_packages_listed_in_pyproject_are_every_package():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "gpt1lib").rglob("__init__.py")
    }
    assert found | {"gpt1lib.recorded"} == set(listed)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """gpt1lib as pip installs it from the repository: a wheel built from a copy of the
    checkout, unpacked into a site folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src)
    for name in ("gpt1lib", "results"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*cmd, "-w", str(tmp / "dist"), str(src)], check=True, capture_output=True)
    site = tmp / "site"
    with zipfile.ZipFile(next((tmp / "dist").glob("gpt1lib-*.whl"))) as whl:
        whl.extractall(site)
    return site


def test_an_installed_package_outside_a_checkout_finds_the_recorded_runs(installed, tmp_path):
    colab = tmp_path / "content"  # Colab's working directory: no checkout above it
    colab.mkdir()
    code = (
        "from gpt1lib import paths; from gpt1lib.records import read_records; "
        "r = paths.results_dir(); print(r); print(paths.runs_dir()); print(paths.repo_root()); "
        "print(len(read_records(r / 'cpu'))); print(paths.shown(r / 'cpu'))"
    )
    env = {**os.environ, "PYTHONPATH": str(installed)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=colab, env=env, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == str(installed / "gpt1lib" / "recorded")
    assert out[1] == str(colab / "runs") and out[2] == "None"
    committed = sum(1 for f in (ROOT / "results" / "cpu").glob("*.jsonl") for _ in open(f))
    assert int(out[3]) == committed > 0  # every recorded record, read from the package
    assert out[4] == "gpt1lib/recorded/cpu"


@pytest.mark.parametrize("where", [".", "book", "gpt1lib/tasks"])
def test_paths_resolve_against_the_checkout_wherever_a_chapter_runs(where, monkeypatch):
    monkeypatch.chdir(ROOT / where)
    assert paths.repo_root() == ROOT
    assert paths.runs_dir() == ROOT / "runs" and paths.results_dir() == ROOT / "results"
    assert paths.runs_dir("runs/sweep") == ROOT / "runs" / "sweep"
    assert paths.local_path("gpt1lib/fixtures/corpus") == str(ROOT / "gpt1lib/fixtures/corpus")
    for keyword in ("fixture", "hub", "released", "emozilla/pg19", None):
        assert paths.local_path(keyword) == keyword
    assert paths.shown(ROOT / "runs" / "smoke") == "runs/smoke"


def test_an_input_path_is_found_from_the_working_directory_first(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    assert paths.local_path("data") == str(tmp_path / "data")
    assert paths.local_path("nowhere/data") == "nowhere/data"  # left for the check to name
