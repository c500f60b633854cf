"""What the speed run (``bench``) times, each one training step: GPT-1 as ``FastGPT`` (each of
``VARIANTS``) or transformers' ``OpenAIGPTLMHeadModel``, and fine-tuning batched four ways.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ..fast import FastGPT
from ..finetune import FinetuneRun, Updates
from ..heads import TaskModel
from ..loss import task_loss
from ..model import GPT, PRESETS, preset
from ..optim import make_optimizer, train_step
from ..pretrain import loss_path
from ..runtime import GPU_PAD_MULTIPLE, attention_backends, attention_name, pick_precision
from ..scales import SCALES
from ..settings import FinetuneConfig, PretrainConfig
from ..steps import eager_stand_in, graphs_pay
from ..tasks import get_task
from ..transforms import Encoded, batches, collate
from ..weights import config_to_hf

LR = 2.5e-4  # pre-training's peak rate; a step takes as long at any rate
LM_COEF = 0.5  # lambda of the fine-tuning loss L3

#: FastGPT's loss paths (``FastGPT.loss_path``) and the names the records give them.
PATHS = {"fused": "fused_lm_loss(hidden)", "logits": "lm_loss(logits)"}

#: What each variant changes from "gpt1lib": ``FastGPT`` with the device's loss path, embedding
#: dropout on the sum, the vocabulary padded to ``BenchConfig.pad_vocab_to``.
VARIANTS: dict[str, dict[str, Any]] = {
    "gpt1lib": {},
    "gpt1lib:matrix": {"embd_dropout": "matrix"},  # the released code's embedding dropout
    "gpt1lib:logits": {"loss": "lm_loss(logits)"},  # FastGPT's full logits, then lm_loss
    "gpt1lib:fused": {"loss": "fused_lm_loss(hidden)"},  # FastGPT's chunked loss
    # beside "gpt1lib:matrix": what the device's choice of loss is worth
    "gpt1lib:matrix:fused": {"embd_dropout": "matrix", "loss": "fused_lm_loss(hidden)"},
    "gpt1lib:pad1": {"pad_vocab_to": 1},
    "gpt1lib:pad64": {"pad_vocab_to": 64},
    # model.GPT, every speed path off: full logits and lm_loss, torch's dropout, SDPA
    "gpt1lib:plain": {"model": "GPT", "loss": "lm_loss(logits)", "pad_vocab_to": 1},
}
IMPLEMENTATIONS = (*VARIANTS, "transformers")
MODELS = sorted({*PRESETS, *SCALES})  # a scale stands for its model
MODES = ("pretrain", "finetune", "both")
#: Fine-tuning examples like a task's: (task, sequences an example, median tokens a sequence,
#: the log-normal's sigma).
LENGTHS = {"sst2": ("sst2", 1, 13, 0.6), "race": ("race", 4, 380, 0.3)}


def _setting(value: Any, help: str | None = None, **option: Any) -> Any:
    """A ``BenchConfig`` field; with ``help``, a command-line option."""
    return field(default=value, metadata={"help": help, **option} if help else {})


@dataclass(frozen=True)
class BenchConfig:
    """One benchmark run. ``None``: the scale's batch, seq and steps on the device, else 4
    sequences, the preset's context and 5 steps; the preset tiny; CUDA where available."""

    preset: str | None = _setting(None, "model preset, or a scale for its model", choices=MODELS)
    scale: str | None = _setting(None, "the book's scale to record, and its model", choices=SCALES)
    batch: int | None = _setting(None, "sequences (fine-tuning: examples) a step")
    seq: int | None = _setting(None, "tokens per sequence")
    steps: int | None = _setting(None, "timed steps per implementation")
    warmup: int = _setting(2, "untimed steps per implementation first")
    device: str | None = _setting(None, "cpu, cuda, cuda:1...")
    mode: str = _setting("pretrain", "what to time", choices=MODES)
    lengths: str = _setting("sst2", "fine-tuning examples like", choices=LENGTHS)
    implementations: tuple[str, ...] = _setting(
        ("gpt1lib", "transformers"),
        "implementations to time, interleaved: %(choices)s",
        flags=("--impl",),
        choices=IMPLEMENTATIONS,
        metavar="NAME",
        default=["gpt1lib", "gpt1lib:matrix", "transformers"],  # the command line's
    )
    compile: bool = _setting(False, "torch.compile every model timed")
    bf16: bool = _setting(True, "bf16 autocast on CUDA (the CPU: float32)")
    pad_vocab_to: int | None = _setting(None, "gpt1lib's padding (None: 64 on CUDA, else 1)")
    memory: bool = _setting(True, "measure the peak memory of a step (CPU: a process a model)")
    dropout: float = _setting(0.1)  # every dropout rate, as in the paper
    seed: int = _setting(0)

    def model_config(self):
        p = self.dropout
        return preset(self.preset, embd_pdrop=p, attn_pdrop=p, resid_pdrop=p)


@dataclass
class Contender:
    """One thing to time: a name, a step and what the records say about it."""

    name: str
    mode: str
    step: Callable[[], None] | None  # None once timed: the model and optimiser are freed
    config: dict[str, Any]
    tokens: float  # real tokens per step (the mean, when fine-tuning)
    seq: float  # tokens per sequence (the mean padded length, when fine-tuning)
    examples: int = 0  # examples per step (fine-tuning)
    times: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)
    peak_mem_mb: float | None = None
    busy_s: float | None = None  # the GPU's busy time in a step (``memory.gpu_busy``)


def _contender(name, mode, model, loss_fn, cfg, device, info, **fields) -> Contender:
    model = model.to(device).train()
    opt = make_optimizer(model, LR)
    net = torch.compile(model) if cfg.compile else model
    bf16 = cfg.bf16 and device.type == "cuda"
    tuning = mode == "finetune"  # on the loops' kernels (a pre-training batch has one shape)

    def losses():  # its backward runs outside autocast
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            with attention_backends(device) if tuning else contextlib.nullcontext():
                loss = loss_fn(net)
        yield loss

    first = iter([True])  # the first step checks that the gradients are not all zero

    def step() -> None:
        train_step(model, opt, LR, losses(), grad_clip=1.0, check=next(first, False))

    impl = "transformers" if name == "transformers" else "gpt1lib"
    info = {"implementation": impl, "variant": name, **info}
    info["fused_adamw"] = bool(opt.defaults.get("fused"))
    return Contender(name, mode, step, info, **fields)


def pretrain_contender(name: str, cfg: BenchConfig, device: torch.device) -> Contender:
    g = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    model_cfg = cfg.model_config()
    x = torch.randint(0, model_cfg.vocab_size, (cfg.batch, cfg.seq + 1), generator=g).to(device)
    inputs, targets = x[:, :-1], x[:, 1:]
    if name == "transformers":
        try:
            from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel
            from transformers.utils import logging as hf_logging
        except ImportError as e:
            raise ImportError("pip install transformers, or leave it out of implementations") from e
        hf_logging.set_verbosity_error()
        hf = config_to_hf(model_cfg)
        hf = {k: v for k, v in hf.items() if k not in ("architectures", "model_type")}
        model = OpenAIGPTLMHeadModel(OpenAIGPTConfig(**hf))
        loss = "OpenAIGPTLMHeadModel(labels=input_ids)"
        info = {"model": "OpenAIGPTLMHeadModel", "loss": loss, "embd_dropout": "sum"}
        kw = {"labels": inputs}
    else:
        loss = PATHS[loss_path(PretrainConfig(compile=cfg.compile), device)]
        info = {"model": "FastGPT", "loss": loss, "embd_dropout": "sum"}
        info = info | {"pad_vocab_to": cfg.pad_vocab_to} | VARIANTS[name]
        model_cfg = replace(model_cfg, embd_dropout=info["embd_dropout"])
        if info["model"] == "FastGPT":
            model = FastGPT(model_cfg, info["pad_vocab_to"])
            model.loss_path = {v: k for k, v in PATHS.items()}[info["loss"]]
        else:
            model = GPT(model_cfg)
        kw = {"targets": targets}

    def loss_fn(net) -> torch.Tensor:
        return net(inputs, **kw).loss

    fields = {"tokens": cfg.batch * cfg.seq, "seq": cfg.seq}
    return _contender(name, "pretrain", model, loss_fn, cfg, device, info, **fields)


def task_like_items(lengths: str, n: int, n_ctx: int, V: int, seed: int = 0) -> list[Encoded]:
    """``n`` examples of random tokens, ``_start_`` (V) ... ``_classify_`` (V + 2), at lengths
    drawn like ``LENGTHS[lengths]`` (3 to ``n_ctx``), each with a random label."""
    task, n_seq, median, sigma = LENGTHS[lengths]
    rng = random.Random(seed)

    def seq() -> tuple[int, ...]:
        k = max(3, min(n_ctx, round(rng.lognormvariate(math.log(median), sigma))))
        return (V, *(rng.randrange(V) for _ in range(k - 2)), V + 2)

    n_labels = n_seq if n_seq > 1 else 2
    return [Encoded(tuple(seq() for _ in range(n_seq)), rng.randrange(n_labels)) for _ in range(n)]


def _task_loss(net, feed, regression: bool) -> torch.Tensor:
    batch = next(feed)
    scores, l1 = net(batch, lm=True)
    return task_loss(scores, batch.labels, regression, l1, LM_COEF)[0]


def _sizes(padded: list, examples: int) -> dict[str, float]:
    tokens = statistics.mean(int(b.mask.sum()) for b in padded)
    return {
        "tokens": tokens,
        "seq": statistics.mean(b.ids.size(1) for b in padded),
        "examples": examples,
    }


def finetune_contenders(cfg: BenchConfig, device: torch.device) -> list[Contender]:
    """Fine-tuning steps over the same ``batch * steps`` examples (``cfg.lengths``): batches
    length-grouped and padded to their longest, or to a multiple of 64, or every batch to the
    context, and the loop's own update (``_graphed``)."""
    model_cfg = cfg.model_config()
    n_ctx, V, task = model_cfg.n_ctx, model_cfg.vocab_size, get_task(LENGTHS[cfg.lengths][0])
    items = task_like_items(cfg.lengths, cfg.batch * cfg.steps, n_ctx, V, cfg.seed)
    out = []
    m = GPU_PAD_MULTIPLE
    for name, pad_to, multiple, how in (
        ("finetune:dynamic", None, 1, "length-grouped, padded to the longest"),
        ("finetune:buckets", None, m, f"length-grouped, padded to a multiple of {m}"),
        ("finetune:context", n_ctx, 1, f"every batch padded to the context ({n_ctx})"),
    ):
        torch.manual_seed(cfg.seed)
        gpt = FastGPT(model_cfg, cfg.pad_vocab_to).add_special_tokens()
        model = TaskModel(gpt, task, cfg.dropout)
        order = batches(items, cfg.batch, random.Random(cfg.seed), length_grouped=not pad_to)
        prepared = [
            collate([items[i] for i in b], pad_to=pad_to, multiple=multiple, cap=n_ctx)
            for b in order
        ]
        info = {
            "model": "TaskModel(FastGPT)",
            "padding": how,
            "lm_coef": LM_COEF,
            "lengths": cfg.lengths,
            "attention": attention_name(device),
            "examples": len(items),
            "embd_dropout": model_cfg.embd_dropout,
            "pad_vocab_to": gpt.pad_vocab_to,
        }
        feed = itertools.cycle([b.to(device) for b in prepared])
        loss_fn = functools.partial(_task_loss, feed=feed, regression=model.regression)
        fields = _sizes(prepared, cfg.batch)
        out.append(_contender(name, "finetune", model, loss_fn, cfg, device, info, **fields))
    out.append(_graphed(out[1], model_cfg, task, items, cfg, device))
    return out


def _graphed(buckets: Contender, model_cfg, task, items, cfg, device) -> Contender:
    """The loop's update (``finetune.Updates``): each shape's first eager, then replayed as a
    CUDA graph (on the CPU, ``eager_stand_in``)."""
    torch.manual_seed(cfg.seed)
    gpt = FastGPT(model_cfg, cfg.pad_vocab_to).add_special_tokens()
    model = TaskModel(gpt, task, cfg.dropout).to(device).train()
    ft = FinetuneConfig(lr=LR, lm_coef=LM_COEF, clf_pdrop=cfg.dropout, bf16=cfg.bf16)
    precision = pick_precision(device, cfg.bf16)
    graphs = graphs_pay(device, model, ft, precision)
    opt = make_optimizer(model, LR, graphs=True)
    run = FinetuneRun(task, ft, device=device, progress=False)
    updates = Updates(run, model, model, opt, precision, graphs=True)
    if not graphs:
        updates.graphs.capture = eager_stand_in
    order = batches(items, cfg.batch, random.Random(cfg.seed))
    feed = itertools.cycle([[items[i] for i in b] for b in order])

    def step() -> None:
        updates.update(next(feed), LR)

    info = buckets.config | {"variant": "finetune:graphed", "updates": "finetune.Updates"}
    info["graphs"] = "CUDA graph per shape" if graphs else "eager stand-in (no CUDA)"
    info["padding"] = "the loop's: length-grouped, a multiple of runtime.pad_multiple"
    padded = [updates.batch([items[i] for i in b]) for b in order]
    return Contender("finetune:graphed", "finetune", step, info, **_sizes(padded, cfg.batch))


def contenders(cfg: BenchConfig, mode: str, device) -> list[Contender]:
    if mode == "pretrain":
        return [pretrain_contender(n, cfg, device) for n in cfg.implementations]
    return finetune_contenders(cfg, device)
