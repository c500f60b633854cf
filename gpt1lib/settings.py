"""The settings of a run, as data: pre-training (§4.1), fine-tuning (§4.1) and the LSTM baseline.

Each field is declared once, with in its metadata its ``check`` (a ``Rule``: ``whole``, ``real``
or ``one_of``, which the chapters' parameters and the command line use too;
``checks.check_config`` applies it before a run), its ``help`` (in the error and on
the command line), the pre-training command line's ``option``, the ``label`` a results page gives
a run whose value differs from its scale's, and ``varied_by``, the experiments that vary it
themselves. Nothing here imports torch.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from numbers import Integral, Real


@dataclass(frozen=True)
class Rule:
    """What a value may be: ``ok`` tests it, ``allowed`` says it, ``hint`` ends the error."""

    allowed: str
    ok: Callable[[object], bool]
    hint: str = ""

    def __call__(self, name: str, value) -> None:
        """A ``ValueError`` naming ``name``, its ``value`` and what to use, where it is not."""
        if not self.ok(value):
            hint = f" ({self.hint})" if self.hint else ""
            raise ValueError(f"{name}={value!r}: use {self.allowed}{hint}")

    def argument(self, cast: type = int) -> Callable[[str], object]:
        """An argparse type: the text as a ``cast`` that the rule allows."""

        def parse(text: str):
            try:
                value = cast(text)
            except ValueError:
                value = None
            if value is None or not self.ok(value):
                allowed = self.allowed.removesuffix(" or None")
                raise argparse.ArgumentTypeError(f"{text!r} is not {allowed}")
            return value

        return parse


def whole(minimum: int | None = 1, none: bool = False, hint: str = "") -> Rule:
    """A whole number >= ``minimum`` (any, where None), or None where ``none``."""
    low = -math.inf if minimum is None else minimum
    allowed = "a whole number" + (f" >= {minimum}" if minimum is not None else "")
    return Rule(
        allowed + (" or None" if none else ""),
        lambda v: (
            (none and v is None)
            or (isinstance(v, Integral) and not isinstance(v, bool) and v >= low)
        ),
        hint,
    )


def real(low: float = 0.0, high: float = math.inf, low_open=False, high_open=False) -> Rule:
    """A real number in [low, high]; ``low_open`` / ``high_open`` exclude the bound."""

    def ok(v) -> bool:
        if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v):
            return False
        return (v > low if low_open else v >= low) and (v < high if high_open else v <= high)

    left, right = "(" if low_open else "[", ")" if high_open or high == math.inf else "]"
    return Rule(f"a number in {left}{low:g}, {high:g}{right}", ok)


def one_of(*choices) -> Rule:
    return Rule(f"one of {list(choices)}", lambda v: v in choices)


#: True or False, nothing else (a chapter's switches).
BOOLEAN = Rule("True or False", lambda v: isinstance(v, bool))


def setting(default, check: Rule | None = None, help: str = "", **more):
    """A config field: its ``default``, and the rest in its metadata (``help`` ends the
    ``check``'s error)."""
    check = replace(check, hint=help) if check else None
    return field(default=default, metadata={"check": check, "help": help, **more})


#: The heads of a task scored on a scale (STS-B): the released code's soft labels, or MSE.
REGRESSIONS = ("soft_labels", "mse")
#: Where the fine-tuning experiments vary a setting themselves.
_TRANSFER, _ABLATION, _OBJECTIVE = "layer_transfer", "ablation", "objective"


@dataclass(frozen=True)
class PretrainConfig:
    """The optimisation of §4.1; the defaults are the paper's."""

    total_steps: int | None = setting(
        None, whole(none=True), "updates (None: `epochs` over the corpus)", option="--steps"
    )
    epochs: float = setting(100.0, real(low_open=True), "passes over the corpus; the paper: 100")
    batch_size: int = setting(
        64,
        whole(),
        "sequences per update, over all processes; the paper: 64",
        option="--batch-size",
    )
    micro_batch_size: int | None = setting(
        None,
        whole(none=True),
        "sequences per forward pass (None: the batch)",
        option="--micro-batch-size",
    )
    max_lr: float = setting(2.5e-4, real(low_open=True), "the peak rate; the paper: 2.5e-4")
    warmup_steps: int = setting(
        2000, whole(0), "linear warm-up from 0, then cosine annealing to 0; the paper: 2000"
    )
    weight_decay: float = setting(
        0.01, real(), "decoupled, on weights of rank >= 2; the paper: 0.01"
    )
    grad_clip: float = setting(
        1.0, real(low_open=True), "one global norm (the released code's; the paper: none said)"
    )
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    seed: int = setting(
        0, whole(None), "seeds the model, the batches and the tokenizer", option="--seed"
    )
    log_interval: int = setting(10, whole(), "updates between training-loss records")
    eval_interval: int = setting(500, whole(), "updates between validation losses")
    eval_batches: int = setting(20, whole(), "validation batches of batch_size sequences")
    ckpt_interval: int = setting(
        1000, whole(), "updates between resumable checkpoints", option="--ckpt-interval"
    )
    n_log_checkpoints: int = setting(
        10, whole(0), "log-spaced model checkpoints kept for the zero-shot curves"
    )
    log_from: int = setting(1, whole(), "the update of the first log-spaced checkpoint")
    bf16: bool = True  # mixed precision on CUDA: bf16, or fp16 without it (runtime.pick_precision)
    compile: bool = False  # torch.compile the model
    # how L1 is computed (``pretrain.loss_path``): "fused" (chunked), "logits", or "auto"
    loss: str = setting("auto", one_of("auto", "fused", "logits"), "auto: the device's faster")
    experiment: str = "pretrain"

    def steps_for(self, n_blocks: int) -> int:
        """Total updates for a corpus of ``n_blocks`` training blocks."""
        if self.total_steps is not None:
            return self.total_steps
        return max(1, int(self.epochs * n_blocks) // self.batch_size)


@dataclass(frozen=True)
class FinetuneConfig:
    """Fine-tuning settings of §4.1; the defaults are the paper's."""

    lr: float = setting(6.25e-5, real(low_open=True), "the paper: 6.25e-5", label="lr {:g}")
    batch_size: int = setting(32, whole(), "the paper: 32", label="batch {}")
    epochs: int = setting(3, whole(), "the paper: 3", label="{} epochs")
    warmup: float = setting(
        0.002,
        real(0, 1),
        "a fraction of training, then linear decay; the paper: 0.002",
        label="warm-up {:g}",
    )
    weight_decay: float = setting(
        0.01, real(), "on weights of rank >= 2; the paper: 0.01", label="weight decay {:g}"
    )
    grad_clip: float = setting(
        1.0, real(low_open=True), "a global norm, e.g. 1.0", label="clip {:g}"
    )
    lm_coef: float = setting(
        0.5,
        real(),
        "lambda of L3: the paper's 0.5, 0 turns L1 off",
        label="λ {:g}",
        varied_by=(_ABLATION, _OBJECTIVE),
    )
    clf_pdrop: float = setting(
        0.1, real(0, 1, high_open=True), "the paper: 0.1", label="classifier dropout {:g}"
    )
    regression: str = setting(
        "soft_labels",
        one_of(*REGRESSIONS),
        "STS-B's head: the released code's, or mse",
        label="STS-B {}",
    )
    n_transfer: int | None = setting(
        None,
        whole(-1, none=True),
        "blocks transferred; None: every block, 0: the embeddings, -1: nothing",
        label="n_transfer {}",
        varied_by=(_TRANSFER, _ABLATION),
    )
    max_len: int | None = setting(
        None, whole(4, none=True), "None: the model's context", label="max_len {}"
    )
    eval_batch_size: int = setting(64, whole())
    eval_train_examples: int = setting(0, whole(0), "training examples also scored each epoch")
    score_every_epoch: bool = True  # False: the eval splits scored after the last epoch only
    bf16: bool = True  # mixed precision on CUDA: bf16, or fp16 without it (runtime.pick_precision)
    compile: bool = False
    graphs: bool = True  # on CUDA, each batch shape's update replayed as a graph (``steps``)
    seed: int = setting(0, whole(None), "e.g. 1")
    experiment: str = "finetune"


def lstm_width(n_embd: int) -> int:
    """The LSTM's units beside a transformer of width ``n_embd``: the paper's 2048 beside 768."""
    return round(n_embd * (2048 / 768))


@dataclass(frozen=True)
class LSTMConfig:
    """Shape of the LSTM baseline; the defaults are the paper's 2048 units at GPT-1's width."""

    vocab_size: int = 40478
    n_special: int = 0
    n_ctx: int = 512  # the longest input (for the same data pipeline; an LSTM has no limit)
    n_embd: int = 768
    n_hidden: int = 2048  # "a single layer 2048 unit LSTM"
    dropout: float = 0.1

    @property
    def n_tokens(self) -> int:
        return self.vocab_size + self.n_special

    @property
    def n_layer(self) -> int:
        return 1


#: Presets beside the transformer's: its vocabulary and width, the units in the paper's ratio.
LSTM_PRESETS: dict[str, LSTMConfig] = {
    "paper": LSTMConfig(),
    "small": LSTMConfig(n_embd=384, n_hidden=lstm_width(384)),  # 1024
    "mini": LSTMConfig(vocab_size=8319, n_ctx=128, n_embd=256, n_hidden=lstm_width(256)),  # 683
    "tiny": LSTMConfig(vocab_size=1000, n_ctx=64, n_embd=64, n_hidden=lstm_width(64)),  # 171
}


def lstm_preset(name: str, **overrides) -> LSTMConfig:
    """The LSTM preset ``name`` (``paper``, ``small``, ``mini``, ``tiny``), ``overrides``
    replacing fields."""
    one_of(*LSTM_PRESETS)("preset", name)
    return replace(LSTM_PRESETS[name], **overrides)


#: Each chapter's parameters, as its ``parameters`` cell declares them (a test checks).
PARAMETERS: dict[str, tuple[str, ...]] = {
    "intro": ("results_dir",),
    "results_at_a_glance": ("results_dir",),
    "01_tokenizer_corpus": (
        "scale", "seed", "corpus", "corpus_limit", "n_merges", "released_bpe", "agreement_texts",
    ),
    "02_model": ("scale", "seed"),
    "03_pretraining": (
        "scale", "seed", "corpus", "corpus_limit", "tokenizer", "steps", "out_dir", "resume",
    ),
    "04_finetuning": ("scale", "seed", "task", "source", "init", "limit", "out_dir", "corpus"),
    **{
        name: ("scale", "seed", "tasks", "source", "init", "lm_coef", *head, "n_transfer",
               "limit", "eval_limit", "out_dir", "corpus")
        for name, head in (("05_classification", ()), ("06_entailment", ()),
                           ("07_similarity", ("regression",)), ("08_multiple_choice", ()))
    },
    "09_results": ("scale", "results_dir", "out_dir"),
    "10_layer_transfer": (
        "scale", "seed", "tasks", "source", "init", "limit", "eval_limit", "out_dir", "corpus",
        "results_dir",
    ),
    "11_zero_shot": (
        "scale", "seed", "source", "eval_limit", "out_dir", "corpus", "results_dir",
    ),
    "12_ablations": (
        "scale", "seed", "tasks", "source", "limit", "eval_limit", "out_dir", "corpus",
        "results_dir",
    ),
    "appendix_speed": ("scale", "batch", "seq", "steps", "compile", "out_dir", "results_dir"),
}  # fmt: skip
