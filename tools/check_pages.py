"""Noise on the built pages: ``python tools/check_pages.py [_build/html]`` lists every page and
line of the rendered book that shows a progress bar, a warning, a machine's path or an empty
output box, and exits 1 if there is any (``make book`` runs it after the build;
``tests/test_pages.py`` runs it on an existing build).

A built page is read, not the notebooks: what is checked is what a reader sees. Only the text
of the page is searched (not its scripts and styles); the empty-box check looks at the cells'
output areas.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

#: What must not be on a page, by name: each a regular expression on a line of its text.
NOISE = {
    "progress bar": re.compile(r"\d+%\||\[\d\d:\d\d<|\d(?:it|step|update)s?/s\b|s/it\b"),
    "warning": re.compile(r"\b\w*Warning\b"),
    "machine path": re.compile(r"(?<![\w.~-])/(?:tmp|work|root|home|Users|private)/|site-packages"),
}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "wbr"}


class _Page(HTMLParser):
    """The text of a page line by line, and the lines of its empty output boxes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: dict[int, str] = {}
        self.empty: list[int] = []
        self.stack: list[str] = []
        self.output: list = []  # [depth, line, text, images] of the output box being read

    def handle_starttag(self, tag, attrs) -> None:
        if tag in _VOID:
            if tag == "img" and self.output:
                self.output[3] += 1
            return
        self.stack.append(tag)
        classes = (dict(attrs).get("class") or "").split()
        if not self.output and tag == "div" and classes[:1] == ["output"]:
            self.output = [len(self.stack), self.getpos()[0], "", 0]

    def handle_endtag(self, tag) -> None:
        if tag in _VOID:
            return
        if self.output and len(self.stack) == self.output[0]:
            if not self.output[2].strip() and not self.output[3]:
                self.empty.append(self.output[1])
            self.output = []
        while self.stack and self.stack.pop() != tag:
            pass

    def handle_data(self, data) -> None:
        if self.stack and self.stack[-1] in ("script", "style"):
            return
        if self.output:
            self.output[2] += data
        line = self.getpos()[0]
        for i, part in enumerate(data.split("\n")):
            self.lines[line + i] = self.lines.get(line + i, "") + part


def check_page(html: str) -> list[tuple[int, str, str]]:
    """(line, what, text) for each piece of noise on one page."""
    page = _Page()
    page.feed(html)
    found = [(n, "empty output box", "") for n in page.empty]
    for n, text in sorted(page.lines.items()):
        for what, pattern in NOISE.items():
            if pattern.search(text):
                found.append((n, what, text.strip()[:160]))
    return sorted(found)


def check_site(root: str | Path) -> list[str]:
    """One line per piece of noise on every page under ``root`` (a built ``_build/html``)."""
    root = Path(root)
    problems = []
    for page in sorted(root.rglob("*.html")):
        rel = page.relative_to(root).as_posix()
        if rel.startswith(("_static/", "_sources/")) or rel in ("genindex.html", "search.html"):
            continue
        for n, what, text in check_page(page.read_text(encoding="utf-8")):
            problems.append(f"{rel}:{n}: {what}: {text}")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else "_build/html")
    if not root.is_dir():
        print(f"{root} is not a built book: run `make book` first", file=sys.stderr)
        return 2
    problems = check_site(root)
    print("\n".join(problems) or f"{root}: no progress bars, warnings or machine paths")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
