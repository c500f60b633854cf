"""Bad input to the library, the pretrain command line and the chapters' parameters: each case
of BAD_INPUTS.md gets its clear error (or warning) before any training or pre-training."""

from dataclasses import replace

import numpy as np
import pytest
from bad_inputs import Case, doc_ids, params, registry, run_case

from gpt1lib.checks import DataWarning
from gpt1lib.corpus import load_documents
from gpt1lib.finetune import FinetuneRun, finetune
from gpt1lib.pretrain import pretrain
from gpt1lib.runs import pretrained_model
from gpt1lib.scales import SCALES
from gpt1lib.tasks import FIXTURES, compute_metrics, get_task, load_examples, unavailable
from gpt1lib.tokenizer import GPT1Tokenizer
from gpt1lib.zeroshot import zero_shot_score

LIBRARY: list[Case] = []
CLI: list[Case] = []
CHAPTER: list[Case] = []
library, cli, chapter = (
    registry("library", LIBRARY),
    registry("cli", CLI),
    registry("chapter", CHAPTER),
)
SST2_DEV = FIXTURES / "glue" / "SST-2" / "dev.tsv"
STORY_TEST = FIXTURES / "story_cloze" / "stories_test.csv"
FT = SCALES["smoke"].finetune


def _run(c, task="sst2", source="fixture", cfg=FT, **kw):
    return finetune(c.model, c.tok, FinetuneRun(task, cfg, source, progress=False, **kw))


def _finetune(c, train, evals, task="sst2", cfg=FT, tok=None):
    run = FinetuneRun(task, cfg, examples=(train, evals), progress=False)
    return finetune(c.model, tok or c.tok, run)


def _pretrain(c, out=None, resume=False, **cfg):
    out = c.tmp / "new" if out is None else out
    return pretrain(
        c.model, c.tok, c.corpus, replace(c.cfg, **cfg), out, progress=False, resume=resume
    )


def _latin1(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("latin-1"))
    return path


# ---------------------------------------------------------------- one file, one split


@library(ValueError, match="one file never serves both")
def run_task_source_is_one_test_file(c):
    _run(c, "story_cloze", STORY_TEST)


@library(ValueError, match="test split by its name, so it cannot serve as its train split")
def load_examples_train_from_a_test_file(c):
    load_examples("story_cloze", "train", STORY_TEST)


@library(ValueError, match="dev split by its name")
def load_examples_train_from_dev_tsv(c):
    load_examples("sst2", "train", SST2_DEV)


@library(match="one file and SST-2 needs two splits")
def unavailable_on_one_file(c):
    return unavailable("sst2", SST2_DEV)


@library(match="holds no SST-2 dev examples")
def dev_tsv_with_a_header_and_no_rows(c):
    (c.tmp / "SST-2").mkdir()
    (c.tmp / "SST-2" / "train.tsv").write_text("sentence\tlabel\na fine film\t1\n")
    (c.tmp / "SST-2" / "dev.tsv").write_text("sentence\tlabel\n")
    return unavailable("sst2", c.tmp)


@library(ValueError, match=r"dev\.tsv is not UTF-8 text.*iconv")
def latin1_tsv(c):
    _latin1(c.tmp / "SST-2" / "dev.tsv", "sentence\tlabel\nun caf\xe9 noir\t1\n")
    load_examples("sst2", "dev", c.tmp)


# ---------------------------------------------------------------- run_task and finetune


@library(ValueError, match="unknown task 'sst5'")
def run_task_unknown_task(c):
    _run(c, "sst5")


@library(ValueError, match=r"limit=1\.5: use a whole number >= 1 or None")
def run_task_limit_not_whole(c):
    _run(c, limit=1.5)


@library(ValueError, match="limit=0: use a whole number >= 1")
def run_task_limit_zero(c):
    _run(c, limit=0)


@library(ValueError, match="eval_limit=-3")
def run_task_eval_limit_negative(c):
    _run(c, eval_limit=-3)


@library(ValueError, match="never on the split it trains on")
def run_task_eval_split_train(c):
    _run(c, eval_split="train")


@library(ValueError, match="eval_split='validation'")
def run_task_eval_split_unknown(c):
    _run(c, eval_split="validation")


@library(ValueError, match="unknown task 'mnli_xx'")
def run_task_also_unknown(c):
    _run(c, "mnli_m", also=["mnli_xx"])


@library(ValueError, match="also='rte': its labels or family differ")
def run_task_also_of_another_family(c):
    _run(c, also=["rte"])


@library(ValueError, match="source='/nowhere/data': no such file or folder")
def run_task_source_missing(c):
    _run(c, source="/nowhere/data")


@library(ValueError, match="FinetuneConfig.lm_coef='abc': use a number")
def finetune_lm_coef_not_a_number(c):
    _run(c, cfg=replace(FT, lm_coef="abc"))


@library(ValueError, match=r"FinetuneConfig.lm_coef=-0.5: use a number in \[0, inf\)")
def finetune_lm_coef_negative(c):
    _run(c, cfg=replace(FT, lm_coef=-0.5))


@library(ValueError, match="FinetuneConfig.epochs=0")
def finetune_epochs_zero(c):
    _run(c, cfg=replace(FT, epochs=0))


@library(ValueError, match="FinetuneConfig.batch_size=0")
def finetune_batch_size_zero(c):
    _run(c, cfg=replace(FT, batch_size=0))


@library(ValueError, match="FinetuneConfig.lr=0")
def finetune_lr_zero(c):
    _finetune(
        c,
        load_examples("sst2", "train"),
        {"dev": load_examples("sst2", "dev")},
        cfg=replace(FT, lr=0),
    )


@library(ValueError, match="FinetuneConfig.warmup=1.5")
def finetune_warmup_above_one(c):
    _run(c, cfg=replace(FT, warmup=1.5))


@library(ValueError, match="FinetuneConfig.clf_pdrop=1")
def finetune_clf_pdrop_one(c):
    _run(c, cfg=replace(FT, clf_pdrop=1))


@library(ValueError, match="n_transfer=5: use -1")
def finetune_n_transfer_deeper_than_the_model(c):
    _run(c, cfg=replace(FT, n_transfer=5))


@library(ValueError, match="fine-tune with the model's own tokenizer")
def finetune_tokenizer_of_another_model(c):
    c.model = type(c.model)(replace(c.model.config, vocab_size=c.tok.vocab_size + 7))
    _run(c)


@library(ValueError, match="no training examples for sst2")
def finetune_no_training_examples(c):
    _finetune(c, [], {"dev": load_examples("sst2", "dev")})


@library(ValueError, match="sst2 dev: 16 examples unlabelled")
def finetune_unlabelled_evaluation_split(c):
    _finetune(c, load_examples("sst2", "train"), {"dev": load_examples("sst2", "test")})


# ---------------------------------------------------------------- pretrain and the corpus


@library(ValueError, match="PretrainConfig.total_steps=0")
def pretrain_total_steps_zero(c):
    _pretrain(c, total_steps=0)


@library(ValueError, match="PretrainConfig.batch_size=0")
def pretrain_batch_size_zero(c):
    _pretrain(c, batch_size=0)


@library(ValueError, match="PretrainConfig.ckpt_interval=0")
def pretrain_ckpt_interval_zero(c):
    _pretrain(c, ckpt_interval=0)


@library(ValueError, match="PretrainConfig.log_interval=0")
def pretrain_log_interval_zero(c):
    _pretrain(c, log_interval=0)


@library(ValueError, match="PretrainConfig.loss='plain'")
def pretrain_unknown_loss_path(c):
    _pretrain(c, loss="plain")


@library(ValueError, match="PretrainConfig.log_from=0")
def pretrain_log_from_zero(c):
    _pretrain(c, log_from=0)


@library(ValueError, match="not a multiple of micro_batch_size=3")
def pretrain_micro_batch_that_does_not_divide(c):
    _pretrain(c, micro_batch_size=3)


@library(ValueError, match="is a file: give a folder")
def pretrain_out_dir_is_a_file(c):
    (c.tmp / "f").write_text("")
    _pretrain(c, c.tmp / "f")


@library(warns=UserWarning, match="holds no checkpoint to resume")
def pretrain_resume_without_a_run(c):
    _pretrain(c, c.tmp / "mistyped", resume=True)


@library(ValueError, match=r"a\.txt is not UTF-8 text.*iconv")
def corpus_in_latin1(c):
    _latin1(c.tmp / "books" / "a.txt", "Il \xe9tait une fois.\n\nUne autre histoire.")
    load_documents(c.tmp / "books")


@library(ValueError, match=r"b\.txt is not UTF-8 text")
def tokenizer_trained_on_a_latin1_file(c):
    type(c.tok).train([_latin1(c.tmp / "b.txt", "caf\xe9 " * 50)], n_merges=5)


@library(FileNotFoundError, match="neither a local path nor a data set the hub gave")
def corpus_that_does_not_exist(c):
    load_documents(c.tmp / "no_such_corpus")


@library(ValueError, match="scale='huge': choose one of")
def pretrained_model_unknown_scale(c):
    pretrained_model("huge", c.tmp)


@library(ValueError, match="use 'train:N' with N merges")
def tokenizer_spec_train_without_a_number(c):
    GPT1Tokenizer.from_spec("train:abc", ["some text"])


# ---------------------------------------------------------------- zero-shot


@library(ValueError, match="no zero-shot heuristic for 'rte'")
def zero_shot_task_without_a_heuristic(c):
    zero_shot_score(c.model, c.tok, "rte", load_examples("rte", "dev"))


@library(ValueError, match="no examples to score sst2 on")
def zero_shot_no_examples(c):
    zero_shot_score(c.model, c.tok, "sst2", [])


@library(ValueError, match="sst2 evaluation: 16 examples unlabelled")
def zero_shot_unlabelled_examples(c):
    zero_shot_score(c.model, c.tok, "sst2", load_examples("sst2", "test"))


@library(ValueError, match="not SST-2's")
def zero_shot_examples_of_another_task(c):
    zero_shot_score(c.model, c.tok, "sst2", load_examples("race", "dev"))


@library(ValueError, match="score with the tokenizer the model was trained with")
def zero_shot_tokenizer_of_another_model(c):
    c.model = type(c.model)(replace(c.model.config, vocab_size=c.tok.vocab_size + 7))
    zero_shot_score(c.model, c.tok, "sst2", load_examples("sst2", "dev"))


@library(ValueError, match="CoLA's threshold is chosen on training examples")
def zero_shot_cola_without_train(c):
    zero_shot_score(c.model, c.tok, "cola", load_examples("cola", "dev"))


# ---------------------------------------------------------------- warnings


def _one_class(split):
    return [e for e in load_examples("sst2", split) if e.label == 1]


@library(warns=DataWarning, match="sst2 train: all 16 examples are 'positive', one class")
def train_split_of_one_class(c):
    _finetune(c, _one_class("train"), {"dev": load_examples("sst2", "dev")})


@library(warns=DataWarning, match="sst2 dev: all 12 examples are 'positive'")
def evaluation_split_of_one_class(c):
    _finetune(c, load_examples("sst2", "train"), {"dev": _one_class("dev")})


@library(warns=DataWarning, match="stsb dev: every score is 2.5, so Pearson and Spearman")
def stsb_split_with_constant_scores(c):
    dev = [replace(e, label=2.5) for e in load_examples("stsb", "dev")]
    _finetune(c, load_examples("stsb", "train"), {"dev": dev}, "stsb")


@library(warns=DataWarning, match="Pearson correlation is undefined .* predictions are constant")
def stsb_constant_predictions(c):
    m = compute_metrics(get_task("stsb"), np.full(4, 3.0), np.array([1.0, 2, 3, 4]))
    assert np.isnan(m["pearson"])


@library(warns=DataWarning, match=r"race train: \d+ of 48 examples truncated to fit n_ctx=32")
def truncated_inputs(c):
    _run(c, "race")


@pytest.mark.parametrize("case", params(LIBRARY))
def test_bad_input(case, c):
    run_case(case, c)


def test_every_case_is_in_the_table():
    from test_bad_checkpoints import CHECKPOINT
    from test_bad_parameters import CHAPTER, CLI

    ids = [case.id for case in LIBRARY + CLI + CHAPTER + CHECKPOINT]
    assert len(set(ids)) == len(ids)
    assert sorted(doc_ids()) == sorted(ids)


def test_one_file_serves_the_split_its_name_says_or_any_if_it_says_none(tmp_path):
    assert load_examples("sst2", "dev", SST2_DEV) == load_examples("sst2", "dev")
    (tmp_path / "mine.tsv").write_text(SST2_DEV.read_text())
    assert load_examples("sst2", "train", tmp_path / "mine.tsv") == load_examples("sst2", "dev")
