"""One ``Scale`` per scale: every setting a run at that scale uses, in one place.

A chapter's set-up is ``S = SCALES[resolve_scale(scale)]``; its parameters override what they
name. The scales:

* ``smoke``: seconds per chapter on a CPU, on the small data embedded in the package (CI and
  ``make`` run it);
* ``cpu``: real data on two CPU cores, the whole book in about 2 hours: a 4-block model, a
  vocabulary of 8,000 merges learned on the corpus, a recipe chosen by measurement (a sweep of
  pre-training, and a fine-tuning protocol per Table 5 arm selected on train), subsampled tasks;
* ``small``: a real experiment on one GPU: 12 blocks of width 384 (so that layer transfer still
  has 12 points), the released vocabulary, real data from the hub or a local copy;
* ``paper``: the paper's configuration; pre-training needs many GPUs (``torchrun``), fine-tuning
  can start from the released weights.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

import torch

from .facts import ARMS, TABLE5_TASKS
from .model import GPTConfig, preset
from .settings import FinetuneConfig, LSTMConfig, PretrainConfig, lstm_preset, one_of
from .tasks import get_task

#: A long-form book corpus on the hub (PG-19: 28,602 public-domain books, one row a book).
HUB_CORPUS = "emozilla/pg19"


#: The tasks of the fine-tuning chapters 05-08, by family (their ``tasks=None``).
FAMILY_TASKS = {
    "classification": ("sst2", "cola"),
    "entailment": ("mnli_m", "snli", "scitail", "qnli", "rte"),
    "similarity": ("mrpc", "stsb", "qqp"),
    "multiple_choice": ("race", "story_cloze"),
}


@dataclass(frozen=True)
class Scale:
    """The settings of every chapter and command at one scale."""

    name: str
    model: str  # the GPT-1 preset (``model.PRESETS``); the LSTM baseline's has the same name
    # "train:N": N merges learned on the corpus (below small, where the output matmul over 40,478
    # tokens would cost a CPU four times the blocks' work); "released": GPT-1's vocabulary
    tokenizer: str
    pretrain: PretrainConfig = PretrainConfig()  # the paper's
    finetune: FinetuneConfig = FinetuneConfig()
    corpus: str = HUB_CORPUS  # pre-training text: "fixture", a local folder or file, a hub id
    corpus_limit: int | None = None  # documents read from a hub corpus (None: all)
    task_source: str = "hub"  # where the tasks' data comes from: "fixture" or "hub"
    init: str = "pretrain"  # where fine-tuning starts: "pretrain" (this book's run) or "released"
    # examples per task, (train, eval) by task family or "default" (None: all), subsampled with
    # the seed; a multiple-choice example is four sequences, so it may get fewer
    limits: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    transfer_train_examples: int = 500  # layer transfer: training examples scored per epoch
    transfer_points: tuple[int, ...] | None = None  # n_transfer values (None: -1 to n_layer)
    # layer transfer's (train, dev) examples by task, where not the scale's ``limits``
    transfer_limits: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    # the recorded run's protocol selection (``selection``): the tasks it is scored on (none:
    # the scale's settings as they are) and the training examples read from each (15% held out)
    selection_tasks: tuple[str, ...] = ()
    selection_examples: int | None = None
    zero_shot_examples: int | None = None  # evaluation examples per zero-shot task (None: all)
    # the speed run's (batch, seq, steps) by device type
    bench: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    bench_preset: str = "paper"  # the speed run's model on a GPU: the paper's, 64 x 512 tokens
    table5_arms: tuple[str, ...] = ARMS  # the rows of Table 5 the scale runs
    # each arm's fine-tuning settings that differ from ``finetune`` (the "full" arm's)
    arms: dict[str, dict] = field(default_factory=dict)
    # the tasks of each experiment (each chapter's ``tasks=None``)
    family_tasks: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(FAMILY_TASKS))
    objective_task: str = "sst2"
    transfer_tasks: tuple[str, ...] = ("mnli_m", "race")
    ablation_tasks: tuple[str, ...] = TABLE5_TASKS

    def transfer_at(self) -> list[int]:
        """Layer transfer's points: the scale's, else -1 (nothing), 0 (the embeddings) and every
        count of blocks."""
        points = self.transfer_points
        return list(points) if points else list(range(-1, self.model_config().n_layer + 1))

    def model_config(self, **overrides) -> GPTConfig:
        return preset(self.model, **overrides)

    def lstm_config(self, **overrides) -> LSTMConfig:
        return lstm_preset(self.model, **overrides)

    def finetune_for(self, arm: str, **overrides) -> FinetuneConfig:
        """The fine-tuning settings of one of Table 5's arms, ``overrides`` replacing fields."""
        one_of(*ARMS)("arm", arm)
        return replace(self.finetune, **(self.arms.get(arm, {}) | overrides))

    @property
    def n_merges(self) -> int:
        """Merges of the scale's vocabulary (the released one has the paper's 40,000)."""
        return int(self.tokenizer.split(":")[1]) if self.tokenizer.startswith("train:") else 40_000

    def limits_for(self, task: str, limit: int | None = None, eval_limit: int | None = None):
        """A run's ``limit`` and ``eval_limit``: as given, or where None the scale's
        default for ``task`` (its own, else its family's, else the scale's "default")."""
        spec = get_task(task)
        default = self.limits.get(spec.family, self.limits.get("default", (None, None)))
        train, evals = self.limits.get(spec.name, default)
        return {
            "limit": train if limit is None else limit,
            "eval_limit": evals if eval_limit is None else eval_limit,
        }


SCALES: dict[str, Scale] = {
    "smoke": Scale(
        name="smoke", model="tiny", tokenizer="train:600", corpus="fixture", task_source="fixture",
        # a larger learning rate, so that seconds of training show a falling loss
        pretrain=PretrainConfig(
            total_steps=80, batch_size=8, max_lr=2e-3, warmup_steps=8, n_log_checkpoints=5,
            log_interval=5, eval_interval=20, eval_batches=4, ckpt_interval=40,
        ),
        # a larger rate and more epochs, so that a tiny model learns the fixtures in seconds
        finetune=FinetuneConfig(lr=2e-3, epochs=4, batch_size=8),
        transfer_train_examples=32,
        selection_tasks=("cola", "stsb", "sst2"),  # what the rehearsal of the recorded run runs
        bench={"cpu": (4, 64, 3), "cuda": (8, 64, 10)},
    ),
    "cpu": Scale(
        name="cpu", model="mini", tokenizer="train:8000",
        corpus_limit=100,  # about 40 MB of books
        # chosen by measurement (tools/sweep_cpu.py, results/README.md)
        pretrain=PretrainConfig(
            total_steps=800, batch_size=32, max_lr=1e-3, warmup_steps=320,
            eval_interval=200, eval_batches=8, ckpt_interval=200, n_log_checkpoints=6,
        ),
        # every arm's protocol chosen the same way, on examples carved from SST-2's and CoLA's
        # train sets (tools/select_finetune_cpu.py, results/sweeps/cpu_finetune_chosen.json)
        finetune=FinetuneConfig(lr=1e-3, epochs=6, batch_size=16),
        arms={
            "no_pretraining": {"lr": 2.5e-4},
            "no_aux_lm": {"lr": 2.5e-4, "epochs": 3},
            "lstm": {"batch_size": 32},
        },
        # sized so that the whole book takes under 2 hours of two cores: the short-sentence tasks
        # get thousands of examples, the pair tasks (28 to 76 examples a second) hundreds; the
        # dev sets of Table 5's tasks are whole, the large ones subsampled
        limits={
            "default": (1000, 1000), "multiple_choice": (200, 200),
            "cola": (2000, None), "sst2": (2000, None), "mrpc": (400, None),
            "stsb": (600, None), "rte": (500, None),
        },
        transfer_train_examples=200,
        transfer_tasks=("mnli_m",),  # RACE's 6 transfer points would take 30 minutes more
        ablation_tasks=("cola", "sst2", "mrpc", "stsb", "rte"),  # Table 5's tasks at this scale
        zero_shot_examples=500,
        bench={"cpu": (8, 128, 5)},
    ),
    "small": Scale(
        name="small", model="small", tokenizer="released", init="released",
        corpus_limit=300,  # about 120 MB of books, streamed
        # the recipe of one 15-minute H100 lease, predicted by harness.recipe; the rate and the
        # updates chosen by measurement (results/README.md)
        pretrain=PretrainConfig(
            total_steps=4_000, max_lr=6e-4, warmup_steps=1_600, log_interval=20, compile=True,
            log_from=50, n_log_checkpoints=6, ckpt_interval=2_000, eval_batches=10,
        ),
        # the eval splits scored after the last epoch only (the paper reports it, and nothing is
        # chosen on them)
        finetune=FinetuneConfig(eval_batch_size=256, score_every_epoch=False),
        # CoLA, STS-B, MRPC, RTE and Story Cloze's half whole, 2,500 examples of the larger
        # tasks; every dev set whole
        limits={
            "default": (2_500, None), "cola": (None, None), "stsb": (None, None),
            "mrpc": (None, None), "rte": (None, None), "story_cloze": (None, None),
        },
        # Table 5 without its "w/o aux LM" row, the one row none of the paper's four findings
        # rests on: its 8 runs did not fit the lease; chapter 04's lambda = 0 on SST-2 stays
        table5_arms=("full", "no_pretraining", "lstm"),
        transfer_limits={"mnli_m": (2_500, 2_000)}, transfer_tasks=("mnli_m",),
        transfer_points=(-1, 0, 3, 6, 9, 12),
        # each row's rate chosen on 15% of the CoLA and STS-B train sets; zero-shot on CoLA's
        # whole dev set's 1,043 examples a set
        selection_tasks=("cola", "stsb"), zero_shot_examples=1_043,
        bench={"cpu": (4, 128, 5), "cuda": (32, 512, 20)},
    ),
    "paper": Scale(
        name="paper", model="paper", tokenizer="released", init="released",
        zero_shot_examples=2000,
        bench={"cpu": (1, 128, 3), "cuda": (64, 512, 20)},  # the paper's own 64 x 512 tokens
    ),
}  # fmt: skip


def resolve_scale(scale: str | None = None) -> str:
    """The scale to run at: ``scale``, else ``$GPT1_SCALE``, else ``small`` where a GPU is at
    hand (a Colab user gets a real run) and ``smoke`` where not (seconds on a CPU)."""
    value = (
        scale or os.environ.get("GPT1_SCALE") or ("small" if torch.cuda.is_available() else "smoke")
    )
    if value not in SCALES:
        raise ValueError(
            f"unknown scale {value!r} (from the scale parameter or GPT1_SCALE); "
            f"choose one of {tuple(SCALES)}"
        )
    return value
