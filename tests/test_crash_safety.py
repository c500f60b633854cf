"""A write that fails midway leaves the previous file or checkpoint whole (issue 47).

The fault is the operating system's, not a name in the code: a child process runs the write
with its file size limit (``RLIMIT_FSIZE``) far below what it writes, so that the write fails
partway through whatever file it is writing (``EFBIG``). An atomic write (a temporary file or
folder, then a rename) leaves the previous one as it was; a write in place leaves it cut short.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from gpt1lib import GPT, preset
from gpt1lib.checkpoint import load_checkpoint, save_checkpoint
from gpt1lib.corpus import load_documents
from gpt1lib.files import load_tensors, write_tensors
from gpt1lib.optim import make_optimizer
from gpt1lib.tokenizer import GPT1Tokenizer

resource = pytest.importorskip("resource")  # POSIX
LIMIT = 64 * 1024  # bytes any file of the child may grow to


def _fails_midway(code: str, limit: int = LIMIT, **values) -> str:
    """Run ``code`` (``values`` bound as JSON) in a child whose files stop at ``limit`` bytes;
    it must end in an ``OSError`` (the write cut short), which the child reports: its text."""
    child = "\n".join(
        [
            "import json, resource, signal, sys",
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: EFBIG",
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))",
            "globals().update(json.loads(sys.argv[1]))",
            "try:",
            textwrap.indent(textwrap.dedent(code).strip(), "    "),
            "except OSError as e:",
            "    print('cut short:', e)",
        ]
    )
    got = subprocess.run(
        [sys.executable, "-c", child, json.dumps(values)], capture_output=True, text=True
    )
    assert got.returncode == 0 and "cut short" in got.stdout, got.stdout + got.stderr[-3000:]
    return got.stdout


def test_a_file_written_atomically_stays_whole(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("the previous file")
    _fails_midway(
        """
        from gpt1lib.files import atomic_path
        with atomic_path(path) as tmp:
            tmp.write_bytes(b"x" * 1_000_000)
        """,
        path=str(path),
    )
    assert path.read_text() == "the previous file"
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]  # nothing half-written left


def test_tensors_written_atomically_stay_whole_and_loadable(tmp_path):
    path = tmp_path / "weights.safetensors"
    before = {"w": torch.arange(100.0)}
    write_tensors(path, before)
    said = _fails_midway(
        """
        import torch
        from gpt1lib.files import write_tensors
        write_tensors(__import__("pathlib").Path(path), {"w": torch.zeros(1_000_000)})
        """,
        path=str(path),
    )
    assert torch.equal(load_tensors(path)["w"], before["w"])
    # safetensors' own error for it, as the OSError a full disk gets: the file, its free space
    assert "weights.safetensors failed (File too large)" in said and "MiB free" in said


def _stepped(tok, seed: int):
    """A tiny model and its AdamW after one update: its moments make the optimiser's file
    (about 900 KB) twice the model's (about 450 KB)."""
    torch.manual_seed(seed)
    model = GPT(preset("tiny", vocab_size=tok.vocab_size, n_ctx=16))
    opt = make_optimizer(model, 1e-3)
    sum(p.square().sum() for p in model.parameters()).backward()
    opt.step()
    return model, opt


def test_a_checkpoint_folder_stays_whole_and_resumable(tmp_path):
    """The write fails at the optimiser's file, after the model's was written: written in
    place, the folder would hold a new model beside the old state."""
    tok = GPT1Tokenizer.train(texts=load_documents("fixture").texts, n_merges=100)
    tok.save(tmp_path / "tok")
    model, opt = _stepped(tok, 0)
    folder = tmp_path / "checkpoints" / "step_00000002"
    save_checkpoint(folder, model, opt, tok, {"step": 2, "epoch": 0, "next_batch": 2})
    _fails_midway(  # another run's checkpoint: every weight different
        """
        import pathlib, sys
        sys.path.insert(0, tests)
        from gpt1lib.checkpoint import save_checkpoint
        from gpt1lib.tokenizer import GPT1Tokenizer
        from test_crash_safety import _stepped
        tok = GPT1Tokenizer.load(tok_dir)
        model, opt = _stepped(tok, 1)
        state = {"step": 3, "epoch": 0, "next_batch": 3}
        save_checkpoint(pathlib.Path(folder), model, opt, tok, state)
        """,
        limit=600 * 1024,
        folder=str(folder),
        tok_dir=str(tmp_path / "tok"),
        tests=str(Path(__file__).parent),
    )
    again, opt = _stepped(tok, 2)
    state = load_checkpoint(folder, again, opt, torch.device("cpu"))
    assert state["step"] == 2
    pairs = zip(again.parameters(), model.parameters(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
