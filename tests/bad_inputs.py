"""The machinery of the bad-input table (``BAD_INPUTS.md``): a case is a function of a context
that feeds one bad input to gpt1lib, with what it must get: an error (type and message), a
warning, or a value. Any training, pre-training or scoring that starts before the error is a
failure (``Expensive``): the point is that bad input is refused first."""

from __future__ import annotations

import re
import shutil
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gpt1lib import FastGPT, GPT1Tokenizer, preset
from gpt1lib.checkpoint import latest_checkpoint
from gpt1lib.corpus import build_corpus, load_documents
from gpt1lib.pretrain import pretrain
from gpt1lib.scales import SCALES

DOC = Path(__file__).with_name("BAD_INPUTS.md")
SMOKE = SCALES["smoke"]


class Expensive(AssertionError):
    """Training, pre-training or scoring started: the bad input was not refused first."""


@dataclass
class Case:
    fn: object
    group: str
    raises: type | None = None
    warns: type | None = None
    match: str = ""

    @property
    def id(self) -> str:
        return self.fn.__name__.replace("_", "-")


def registry(group: str, cases: list):
    """A decorator that adds a case of ``group`` to ``cases``."""

    def case(raises=None, warns=None, match=""):
        def deco(fn):
            cases.append(Case(fn, group, raises, warns, match))
            return fn

        return deco

    return case


def params(cases: list[Case]) -> list:
    return [pytest.param(c, id=c.id) for c in cases]


def run_case(case: Case, ctx) -> None:
    """Feed the case's input; check that it gets what the table says."""
    if case.raises is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a warning on the way is no answer
            with pytest.raises(case.raises, match=case.match):
                case.fn(ctx)
    elif case.warns is not None:
        with pytest.warns(case.warns, match=case.match):
            try:
                case.fn(ctx)
            except Expensive:
                pass  # the warning came first; the work it guards may then start
    else:
        got = str(case.fn(ctx))
        assert re.search(case.match, got), got


def doc_ids() -> list[str]:
    """The case ids of the table in BAD_INPUTS.md, in order."""
    return re.findall(r"^\| `([a-z0-9-]+)` \|", DOC.read_text(), re.M)


def tiny(tok, seed: int = 0):
    torch.manual_seed(seed)
    return FastGPT(preset("tiny", vocab_size=tok.vocab_size, n_ctx=32))


def make_base(folder: Path) -> SimpleNamespace:
    """A tokenizer, a corpus and a finished 4-update run with checkpoints (module-wide)."""
    tok = GPT1Tokenizer.train(texts=load_documents("fixture").texts, n_merges=300)
    corpus = build_corpus(tok, 32, "fixture")
    cfg = replace(
        SMOKE.pretrain,
        total_steps=4,
        ckpt_interval=2,
        log_interval=1,
        eval_interval=2,
        eval_batches=1,
        n_log_checkpoints=2,
    )
    pretrain(tiny(tok), tok, corpus, cfg, folder, progress=False)
    return SimpleNamespace(tok=tok, corpus=corpus, cfg=cfg, run=folder)


def context(base, tmp_path: Path, monkeypatch, capsys) -> SimpleNamespace:
    """A fresh copy of the base run, and guards that fail a case if real work starts."""

    def expensive(*a, **k):
        raise Expensive("work started before the bad input was refused")

    monkeypatch.setattr("gpt1lib.finetune.Updates.update", expensive)
    monkeypatch.setattr("gpt1lib.pretrain.train_step", expensive)
    monkeypatch.setattr("gpt1lib.zeroshot.continuation_logprobs", expensive)
    monkeypatch.setattr("gpt1lib.experiments.pretrain", expensive)
    run = tmp_path / "run"
    shutil.copytree(base.run, run)
    ckpt = latest_checkpoint(run)
    logs = sorted((run / "log_checkpoints").glob("step_*"))
    return SimpleNamespace(
        **{k: v for k, v in vars(base).items() if k != "run"},
        tmp=tmp_path,
        run=run,
        ckpt=ckpt,
        log_ckpt=logs[-1],
        model=tiny(base.tok),
        capsys=capsys,
    )
