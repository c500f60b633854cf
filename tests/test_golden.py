"""Seeded golden regression at the smoke scale: exact numbers pinned before a refactoring.

20 pre-training updates of the tiny model on the fixture corpus (600 merges learned on it), its
greedy continuation, and one fine-tuning run on the SST-2 fixture. A change that is meant to
leave behaviour alone must leave these numbers alone (at two threads, as on CI's machine); a
change that is meant to alter them updates them in the same commit and says why.
"""

from dataclasses import replace

import pytest
import torch

from gpt1lib import FastGPT, GPT1Tokenizer
from gpt1lib.corpus import build_corpus, load_documents
from gpt1lib.finetune import FinetuneRun, finetune
from gpt1lib.pretrain import pretrain
from gpt1lib.runtime import seed_everything
from gpt1lib.scales import SCALES

SMOKE = SCALES["smoke"]

TRAIN_LOSS = [
    6.555703639984131,
    6.555084705352783,
    6.543179512023926,
    6.525641441345215,
    6.527491092681885,
    6.472938537597656,
    6.445300579071045,
    6.378136157989502,
    6.268582344055176,
    6.1862874031066895,
    6.180988311767578,
    6.1224212646484375,
    6.057287216186523,
    5.978404521942139,
    5.975019454956055,
    5.918201446533203,
    5.904318809509277,
    5.947573661804199,
    6.016005516052246,
    5.895634651184082,
]
VAL_LOSS = [6.165398597717285, 5.95562744140625]
GREEDY = [92, 223, 220, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55]
FINETUNE = [
    (1, "train_loss", "loss", 3.772336959838867),
    (1, "dev", "accuracy", 50.0),
    (2, "train_loss", "loss", 3.499114751815796),
    (2, "dev", "accuracy", 50.0),
    (3, "train_loss", "loss", 3.339529514312744),
    (3, "dev", "accuracy", 50.0),
    (4, "train_loss", "loss", 3.227710485458374),
    (4, "dev", "accuracy", 50.0),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        tok = GPT1Tokenizer.train(texts=load_documents("fixture").texts, n_merges=600)
        mcfg = SMOKE.model_config(vocab_size=tok.vocab_size)
        corpus = build_corpus(tok, mcfg.n_ctx, "fixture", seed=0)
        seed_everything(0)
        model = FastGPT(mcfg)  # as the training loops run it
        cfg = replace(
            SMOKE.pretrain,
            total_steps=20,
            log_interval=1,
            eval_interval=10,
            ckpt_interval=20,
            n_log_checkpoints=0,
        )
        res = pretrain(model, tok, corpus, cfg, tmp_path_factory.mktemp("golden"), progress=False)
        model.eval()
        greedy = model.generate(torch.tensor([tok.encode("the old man")]), 12)[0].tolist()
        ft = finetune(model, tok, FinetuneRun("sst2", SMOKE.finetune, "fixture", progress=False))
        yield res.history, greedy, ft.metrics
    finally:
        torch.set_num_threads(threads)


def _series(history, metric):
    return history[history.metric == metric].sort_values("step").value.tolist()


def test_pretraining_losses_are_the_pinned_ones(run):
    history, _, _ = run
    assert _series(history, "train_loss") == pytest.approx(TRAIN_LOSS, rel=1e-6)
    assert _series(history, "val_loss") == pytest.approx(VAL_LOSS, rel=1e-6)


def test_greedy_ids_are_the_pinned_ones(run):
    assert run[1] == GREEDY


def test_finetuning_metrics_are_the_pinned_ones(run):
    got = [tuple(r) for r in run[2][["epoch", "split", "metric", "value"]].itertuples(index=False)]
    assert [g[:3] for g in got] == [f[:3] for f in FINETUNE]
    assert [g[3] for g in got] == pytest.approx([f[3] for f in FINETUNE], rel=1e-6)
