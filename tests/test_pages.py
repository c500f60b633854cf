"""The rendered pages and how runs report: no progress bars, warnings or machine paths on a
built page (``tools/check_pages.py``), one line per run where no one watches a bar, data
warnings in one line, records that name their data relative to its source."""

import importlib.util
import json
import warnings
from pathlib import Path

import pytest

from gpt1lib import paths, runtime
from gpt1lib.corpus import load_documents
from gpt1lib.tasks import DataWarning, data_location

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_pages", ROOT / "tools" / "check_pages.py")
check_pages = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_pages)

NOISY = """<html><body><div class="cell_output docutils container">
<div class="output stderr"><pre>sst2:  50%|#####   | 8/16 [00:00&lt;00:00, 19.99step/s]</pre></div>
<div class="output stderr"><pre>/work/main/gpt1lib/finetune.py:407: DataWarning: rte dev</pre></div>
<div class="output stream"><pre>run=/tmp/rec2/runs</pre></div>
<div class="output stderr"><pre>

</pre></div></div>
<script>var x = "/tmp/ and 50%|";</script></body></html>"""
CLEAN = """<html><body><p>See https://example.com/home/x and the paper, 95% of it.</p>
<div class="cell_output docutils container"><div class="output stream"><pre>
fine-tuning sst2: 16/16 updates in 0.8 s; loss 0.693
data check: rte dev: 14 of 24 examples truncated to fit n_ctx=64 tokens</pre></div>
<div class="output text_png"><img src="x.png"></div></div></body></html>"""


def test_check_pages_finds_every_kind_of_noise_with_its_line():
    found = check_pages.check_page(NOISY)
    kinds = {what for _, what, _ in found}
    assert kinds == {"progress bar", "warning", "machine path", "empty output box"}
    assert (2, "progress bar") in {(n, what) for n, what, _ in found}
    assert all(n != 8 for n, _, _ in found)  # a script is not the page's text


def test_check_pages_passes_a_clean_page_and_fails_a_noisy_site(tmp_path):
    assert check_pages.check_page(CLEAN) == []
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "clean.html").write_text(CLEAN)
    assert check_pages.main([str(tmp_path)]) == 0
    (tmp_path / "book" / "noisy.html").write_text(NOISY)
    problems = check_pages.check_site(tmp_path)
    assert problems and all(p.startswith("book/noisy.html:") for p in problems)
    assert check_pages.main([str(tmp_path)]) == 1


def test_built_book_has_no_noise():
    """The book as built by ``make book`` (skipped where it has not been built)."""
    site = ROOT / "_build" / "html"
    if not site.is_dir():
        pytest.skip("no _build/html: run `make book` to check the rendered pages")
    problems = check_pages.check_site(site)
    assert not problems, "noise on the built pages (rebuild after a fix):\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("env", "allow_stdin", "tty", "bars"),
    [
        ("1", False, False, True),
        ("0", True, True, False),
        ("", False, True, False),  # an executed notebook: nbclient takes no input
        ("", True, False, True),  # a live notebook
        ("", None, True, True),  # a terminal
        ("", None, False, False),  # a log file
    ],
)
def test_progress_bars_only_where_someone_watches(monkeypatch, env, allow_stdin, tty, bars):
    monkeypatch.setenv("GPT1_PROGRESS", env)
    kernel = None if allow_stdin is None else type("K", (), {"_allow_stdin": allow_stdin})()
    monkeypatch.setattr(runtime, "_kernel", lambda: kernel)
    monkeypatch.setattr(runtime.sys, "stderr", type("E", (), {"isatty": lambda self: tty})())
    assert runtime.show_progress_bars() is bars


def test_progress_setting_is_checked(monkeypatch):
    monkeypatch.setenv("GPT1_PROGRESS", "maybe")
    with pytest.raises(ValueError, match="GPT1_PROGRESS='maybe': use 1"):
        runtime.show_progress_bars()


def test_a_run_without_bars_prints_one_line(monkeypatch, capsys):
    monkeypatch.setenv("GPT1_PROGRESS", "0")
    bar = runtime.progress_bar(total=16, desc="fine-tuning sst2", unit="update")
    for _ in range(16):
        bar.update(1)
    bar.set_postfix(loss="0.693")
    bar.close()
    bar.close()
    out = capsys.readouterr()
    assert out.err == ""
    assert out.out.startswith("fine-tuning sst2: 16/16 updates in ") and out.out.count("\n") == 1
    assert out.out.rstrip().endswith("; loss 0.693")
    assert list(runtime.progress_bar(range(3), desc="zero-shot", unit="checkpoint")) == [0, 1, 2]
    assert capsys.readouterr().out.startswith("zero-shot: 3/3 checkpoints in ")
    runtime.progress_bar(total=2, enabled=False).close()
    assert capsys.readouterr().out == ""


def test_data_warnings_are_one_line_without_a_path(capsys):
    with warnings.catch_warnings():  # puts back pytest's own showwarning afterwards
        warnings.simplefilter("always")
        runtime.show_data_warnings_in_one_line(DataWarning)  # as importing gpt1lib does
        warnings.warn("rte dev: 3 of 8 examples truncated", DataWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert err == "data check: rte dev: 3 of 8 examples truncated\n"  # the other: pytest's


def test_records_name_data_relative_to_its_source(tmp_path):
    assert data_location("mrpc", "train") == "fixture:glue/MRPC/train.tsv"
    folder = tmp_path / "data" / "glue" / "MRPC"
    folder.mkdir(parents=True)
    fixture = ROOT / "gpt1lib" / "fixtures" / "tasks" / "glue" / "MRPC" / "train.tsv"
    (folder / "train.tsv").write_text(fixture.read_text())
    assert data_location("mrpc", "train", tmp_path / "data") == "glue/MRPC/train.tsv"
    assert data_location("mrpc", "train", folder / "train.tsv") == "MRPC/train.tsv"
    books = tmp_path / "corpus" / "novels"
    books.mkdir(parents=True)
    (books / "train.txt").write_text("a story. " * 20)
    assert load_documents(books).source == "novels/train.txt"
    assert load_documents("fixture").source.startswith("fixture:train/*.txt (")
    assert paths.shown(ROOT / "runs" / "smoke") == "runs/smoke"
    assert paths.shown(ROOT.parent / "shared" / "data") == "../shared/data"


def test_committed_records_hold_no_machine_path_in_their_data():
    for path in sorted((ROOT / "results").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            data = json.loads(line).get("data") or ""
            assert not data.startswith("/"), f"{path.name}: data {data!r} is a machine's path"


def test_a_data_folder_reached_through_a_symbolic_link_shows_as_given(tmp_path, monkeypatch):
    """``../shared`` may be a link to another disk: a page shows ``../shared/data``, never the
    link's target (a machine's path, which stops the page check)."""
    checkout, target = tmp_path / "checkout", tmp_path / "disk" / "shared"
    (checkout / "book").mkdir(parents=True)
    (target / "data" / "gpt1_bpe").mkdir(parents=True)
    (tmp_path / "shared").symlink_to(target)
    monkeypatch.setattr(paths, "repo_root", lambda: checkout)
    assert paths.shown(tmp_path / "shared" / "data" / "gpt1_bpe") == "../shared/data/gpt1_bpe"
    monkeypatch.chdir(checkout / "book")  # a chapter's relative input path, as given
    assert paths.shown(paths.local_path("../../shared/data")) == "../shared/data"
