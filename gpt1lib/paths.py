"""Where a chapter's files are (the checkout, its runs, the recorded runs, the repository),
resolved against the checkout, whether it runs from ``book/``, the root, or outside any
checkout (Colab, a pip-installed gpt1lib).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

PACKAGE = Path(__file__).resolve().parent
#: The recorded runs as a wheel installs them (``results/`` of the checkout, package data).
INSTALLED_RESULTS = PACKAGE / "recorded"


def _checkout(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / "_config.yml").is_file() and (folder / "_toc.yml").is_file():
            return folder
    return None


def repo_root() -> Path | None:
    """The book's checkout: above the working directory, else above the package; or None."""
    return _checkout(Path.cwd().resolve()) or _checkout(PACKAGE)


def runs_dir(out_dir: str | os.PathLike | None = None) -> Path:
    """Where a chapter writes its runs: ``out_dir`` (relative: from the repository's root), or
    ``<repo>/runs`` (``./runs`` outside a checkout)."""
    base = repo_root() or Path.cwd()
    return base / "runs" if out_dir is None else base / Path(out_dir).expanduser()


def results_dir(results_dir: str | os.PathLike | None = None) -> Path:
    """The recorded runs: ``results_dir`` (relative: from the repository's root), else the
    checkout's ``results/``, else the copy installed with the package."""
    root = repo_root()
    if results_dir is not None:
        return (root or Path.cwd()) / Path(results_dir).expanduser()
    if root is not None and (root / "results").is_dir():
        return root / "results"
    return INSTALLED_RESULTS


def local_path(value):
    """A relative path that exists, found from the working directory, then from the
    repository's root; other values ("fixture", "hub", a hub id, None) come back unchanged."""
    if not isinstance(value, (str, os.PathLike)) or Path(value).expanduser().is_absolute():
        return value
    here, root = Path(value).expanduser(), repo_root()
    if here.exists():  # made absolute, its symbolic links kept: a page shows the path given
        return os.path.abspath(here)
    if root is not None and (root / here).exists():
        return str(root / here)
    return value


def shown(path: str | os.PathLike) -> str:
    """``path`` as a page shows it, without this machine's folders: from the repository's root
    (``runs/smoke/pretrain``), beside it (``../shared/...``) or in the package (``gpt1lib/...``);
    anything else as it is. A path through a symbolic link is shown as given."""
    if not Path(path).is_absolute():
        return str(path)
    root = repo_root()
    bases = ((root, ""), (root and root.parent, ".."), (PACKAGE, "gpt1lib"))
    for p in (Path(os.path.normpath(path)), Path(path).resolve()):  # as given, then resolved
        for base, name in bases:
            if base is not None and p.is_relative_to(base):
                return str(Path(name) / p.relative_to(base)) if name or p != base else "."
    return str(path)


def repository(root: Path | None = None) -> tuple[str, str]:
    """The repository's URL and branch, from ``_config.yml`` (``repository.url``, ``.branch``)."""
    root = root or repo_root()
    if root is None:
        raise FileNotFoundError("no checkout here: _config.yml holds the repository's URL")
    repo = yaml.safe_load((root / "_config.yml").read_text())["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def colab_url(notebook: str, root: Path | None = None) -> str:
    """The *Open in Colab* link of ``book/<notebook>`` on the repository's branch."""
    url, branch = repository(root)
    path = url.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{path}/blob/{branch}/book/{notebook}"


def install_spec(extras: str = "", root: Path | None = None) -> str:
    """The pip requirement that installs gpt1lib from the repository (Colab's first cell)."""
    url, branch = repository(root)
    return f"gpt1lib{f'[{extras}]' if extras else ''} @ git+{url}@{branch}"
