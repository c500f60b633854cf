"""Write (or, with --check, check) every chapter's *Open in Colab* badge, install cell and links to
the library's source from ``_config.yml``'s ``repository`` (url and branch), the one place the
repository is named.

    python tools/colab_links.py           # rewrite book/*.ipynb and book/*.md where they disagree
    python tools/colab_links.py --check   # exit 1 naming each notebook that disagrees

tests/test_colab.py runs the check, so a notebook that names another repository fails CI.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from gpt1lib.paths import colab_url, install_spec, repository

ROOT = Path(__file__).resolve().parents[1]
BADGE = re.compile(r"\(https://colab\.research\.google\.com/github/[^)\s]+\)")
INSTALL = re.compile(r'"gpt1lib(?:\[(\w+)\])? @ git\+[^"]+"')
# a link to the library's source: https://github.com/<owner>/<name>/{blob,tree}/<branch>/gpt1lib
SOURCE = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(blob|tree)/[\w.-]+/(?=gpt1lib)")


def source_url(match: re.Match) -> str:
    """A link to the library's source (a file: blob; a folder: tree) on the repository's branch."""
    url, branch = repository(ROOT)
    return f"{url}/{match.group(1)}/{branch}/"


def linked_text(page: Path) -> str:
    """A Markdown page with its links to the library's source on ``_config.yml``'s repository."""
    return SOURCE.sub(source_url, page.read_text())


def linked(nb: Path) -> dict:
    """The notebook with its badge and install cell naming ``_config.yml``'s repository."""
    data = json.loads(nb.read_text())
    for cell in data["cells"]:
        text = "".join(cell["source"])
        text = BADGE.sub(f"({colab_url(nb.name, ROOT)})", text)
        text = INSTALL.sub(lambda m: f'"{install_spec(m.group(1) or "", ROOT)}"', text)
        text = SOURCE.sub(source_url, text)
        cell["source"] = text.splitlines(keepends=True)
    return data


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="only report notebooks that disagree")
    check = p.parse_args(argv).check
    wrong = []
    for nb in sorted((ROOT / "book").glob("*.ipynb")):
        text = json.dumps(linked(nb), indent=1, ensure_ascii=False) + "\n"
        if text != nb.read_text():
            wrong.append(nb.name)
            if not check:
                nb.write_text(text)
    for page in sorted((ROOT / "book").glob("*.md")):
        text = linked_text(page)
        if text != page.read_text():
            wrong.append(page.name)
            if not check:
                page.write_text(text)
    verb = "disagree with _config.yml" if check else "rewritten"
    print(f"{len(wrong)} pages {verb}" + (f": {', '.join(wrong)}" if wrong else ""))
    return 1 if check and wrong else 0


if __name__ == "__main__":
    sys.exit(main())
