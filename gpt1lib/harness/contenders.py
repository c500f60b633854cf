"""What the speed run times (``bench``): the contenders and the configuration of a run.

Each contender is one training step, ``optim.train_step`` on a model and its loss: GPT-1 as
``FastGPT`` (and each of ``VARIANTS``, one thing changed) or transformers'
``OpenAIGPTLMHeadModel`` of the same configuration for pre-training; a classification model
with the auxiliary LM loss on SST-2-like lengths, batched three ways, for fine-tuning. FastGPT
computes L1 as pre-training does on the device (``pretrain.loss_path``: the full logits where
compiled on CUDA, the fused loss elsewhere) unless a variant names the loss; fine-tuning runs
on the loops' attention kernels (``runtime.attention_backends``).
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
from typing import Any, Literal

import torch

from ..fast import FastGPT
from ..finetune import FinetuneConfig, FinetuneRun, Updates
from ..heads import TaskModel
from ..loss import task_loss
from ..model import GPT, GPTConfig, preset
from ..optim import make_optimizer, train_step
from ..pretrain import PretrainConfig, loss_path
from ..runtime import GPU_PAD_MULTIPLE, attention_backends, attention_name, pick_precision
from ..steps import eager_stand_in, graphs_pay
from ..tasks import get_task
from ..transforms import Encoded, batches, collate
from ..weights import config_to_hf
from .memory import peak_growth

LR = 2.5e-4  # pre-training's peak rate; a step takes as long at any rate
LM_COEF = 0.5  # lambda of the fine-tuning loss L3

#: How each loss is computed from (net, inputs, targets), by the name the records give it:
#: FastGPT's two paths (``FastGPT.loss_path`` "fused" and "logits") are its own forward's.
LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "fused_lm_loss(hidden)": lambda net, x, y: net(x, targets=y).loss,
    "lm_loss(logits)": lambda net, x, y: net(x, targets=y).loss,
    "OpenAIGPTLMHeadModel(labels=input_ids)": lambda net, x, y: net(x, labels=x).loss,
}
PATHS = {"fused_lm_loss(hidden)": "fused", "lm_loss(logits)": "logits"}  # FastGPT.loss_path

#: What each variant changes from "gpt1lib": ``FastGPT`` (the loss from the hidden states, the
#: CPU's int16 dropout masks and written-out attention), embedding dropout on the sum, the
#: vocabulary padded to ``BenchConfig.pad_vocab_to`` (64 on CUDA, none on the CPU).
VARIANTS: dict[str, dict[str, Any]] = {
    "gpt1lib": {},
    "gpt1lib:matrix": {"embd_dropout": "matrix"},  # the released code's embedding dropout
    "gpt1lib:logits": {"loss": "lm_loss(logits)"},  # FastGPT's full logits, then lm_loss
    "gpt1lib:fused": {"loss": "fused_lm_loss(hidden)"},  # FastGPT's chunked loss
    # the library's default embedding dropout with the chunked loss forced (compiled on CUDA,
    # beside "gpt1lib:matrix": what the device's choice of loss is worth)
    "gpt1lib:matrix:fused": {"embd_dropout": "matrix", "loss": "fused_lm_loss(hidden)"},
    "gpt1lib:pad1": {"pad_vocab_to": 1},
    "gpt1lib:pad64": {"pad_vocab_to": 64},
    # model.GPT, every speed path off: full logits and lm_loss, torch's dropout, SDPA
    "gpt1lib:plain": {"model": "GPT", "loss": "lm_loss(logits)", "pad_vocab_to": 1},
}
IMPLEMENTATIONS = (*VARIANTS, "transformers")


@dataclass(frozen=True)
class BenchConfig:
    """One benchmark run; ``None`` fields take the scale's, the preset's or the device's value."""

    preset: str | None = None  # a model preset, or a scale's name for its model; None: tiny
    batch: int | None = None  # sequences (fine-tuning: examples) per step; None: the scale's, or 4
    seq: int | None = None  # tokens per sequence; None: the scale's, or the preset's context
    steps: int | None = None  # timed steps per implementation after warm-up; None: scale's, or 5
    warmup: int = 2  # untimed steps per implementation first
    device: str | None = None  # None: CUDA where available, else the CPU
    mode: Literal["pretrain", "finetune", "both"] = "pretrain"
    implementations: tuple[str, ...] = ("gpt1lib", "transformers")
    bf16: bool = True  # bf16 autocast on CUDA; the CPU always runs float32
    compile: bool = False  # torch.compile every model timed (ours and transformers')
    pad_vocab_to: int | None = None  # for gpt1lib; None: 64 on CUDA, 1 on the CPU
    dropout: float = 0.1  # every dropout rate, as in the paper
    memory: bool = True  # measure peak memory (on the CPU: one fresh process per model)
    seed: int = 0
    scale: str | None = None  # the book's scale this run stands for: its model, if no preset
    lengths: Literal["sst2", "race"] = "sst2"  # fine-tuning: examples like SST-2's or RACE's


@dataclass
class Contender:
    """One thing to time: a name, a step function and what the records say about it."""

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


# ---------------------------------------------------------------- the contenders


def _gpt_config(cfg: BenchConfig) -> GPTConfig:
    p = cfg.dropout
    return preset(cfg.preset, embd_pdrop=p, attn_pdrop=p, resid_pdrop=p)


def _transformers_model(cfg: GPTConfig):
    try:
        from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel
        from transformers.utils import logging as hf_logging
    except ImportError as e:
        raise ImportError("pip install transformers, or leave it out of implementations") from e
    hf_logging.set_verbosity_error()
    hf = {k: v for k, v in config_to_hf(cfg).items() if k not in ("architectures", "model_type")}
    return OpenAIGPTLMHeadModel(OpenAIGPTConfig(**hf))


def _contender(name, mode, model, loss_fn, cfg, device, info, **fields) -> Contender:
    """``model`` on ``device``, its optimiser, and a step: ``optim.train_step`` of
    ``loss_fn(net)``, ``net`` the model (compiled if asked)."""
    model = model.to(device).train()
    opt = make_optimizer(model, LR)
    net = torch.compile(model) if cfg.compile else model
    bf16 = cfg.bf16 and device.type == "cuda"

    # fine-tuning on the loops' attention kernels (a pre-training batch has one shape)
    kernels = attention_backends if mode == "finetune" else lambda _: contextlib.nullcontext()

    def losses():  # the step's one loss; its backward runs outside autocast
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16), kernels(device):
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
    """A model, its optimiser and a pre-training step on a fixed random batch."""
    g = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    model_cfg = _gpt_config(cfg)
    x = torch.randint(0, model_cfg.vocab_size, (cfg.batch, cfg.seq + 1), generator=g).to(device)
    if name == "transformers":
        model = _transformers_model(model_cfg)
        info = {"model": "OpenAIGPTLMHeadModel", "loss": "OpenAIGPTLMHeadModel(labels=input_ids)"}
        info["embd_dropout"] = "sum"
    else:
        path = loss_path(PretrainConfig(compile=cfg.compile), device)  # pre-training's
        loss = {v: k for k, v in PATHS.items()}[path]
        info = {"model": "FastGPT", "loss": loss, "embd_dropout": "sum"}
        info |= {"pad_vocab_to": cfg.pad_vocab_to} | VARIANTS[name]
        model_cfg = replace(model_cfg, embd_dropout=info["embd_dropout"])
        fast = info["model"] == "FastGPT"
        model = FastGPT(model_cfg, info["pad_vocab_to"]) if fast else GPT(model_cfg)
        if fast:
            model.loss_path = PATHS[info["loss"]]
    loss_fn = functools.partial(LOSSES[info["loss"]], x=x[:, :-1], y=x[:, 1:])
    fields = {"tokens": cfg.batch * cfg.seq, "seq": cfg.seq}
    return _contender(name, "pretrain", model, loss_fn, cfg, device, info, **fields)


#: Fine-tuning examples like a task's: (task, sequences an example, median tokens a sequence
#: with ``_start_`` and ``_classify_``, the log-normal's sigma). SST-2: mostly 5-40 tokens;
#: RACE: an article, a question and one of 4 answers, most cut to the context.
LENGTHS = {"sst2": ("sst2", 1, 13, 0.6), "race": ("race", 4, 380, 0.3)}


def task_like_items(lengths: str, n: int, n_ctx: int, V: int, seed: int = 0) -> list[Encoded]:
    """``n`` examples of random tokens at lengths drawn like ``LENGTHS[lengths]``' (at least 3
    and at most ``n_ctx``), each ``_start_`` (V) ... ``_classify_`` (V + 2), a random label."""
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


def finetune_contenders(cfg: BenchConfig, device: torch.device) -> list[Contender]:
    """Fine-tuning steps over the same ``batch * steps`` synthetic examples of SST-2's or
    RACE's lengths (``cfg.lengths``): length-grouped batches padded to their longest, the same
    rounded up to a multiple of 64 (the loops' default on CUDA: few shapes), every batch padded
    to the context, and the fine-tuning loop's own update on the multiples of 64, replayed as a
    graph per shape (``finetune.Updates``; on the CPU the eager stand-in). Warm-up steps take
    the first batches; the timed steps then see every batch once."""
    model_cfg = _gpt_config(cfg)
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
        info = {"model": "TaskModel(FastGPT)", "padding": how, "lm_coef": LM_COEF}
        info["lengths"] = cfg.lengths
        info["attention"] = attention_name(device)
        info |= {"examples": len(items), "embd_dropout": model_cfg.embd_dropout}
        info["pad_vocab_to"] = gpt.pad_vocab_to
        feed = itertools.cycle([b.to(device) for b in prepared])
        loss_fn = functools.partial(_task_loss, feed=feed, regression=model.regression)
        fields = {"tokens": statistics.mean(int(b.mask.sum()) for b in prepared)}
        fields |= {"seq": statistics.mean(b.ids.size(1) for b in prepared), "examples": cfg.batch}
        out.append(_contender(name, "finetune", model, loss_fn, cfg, device, info, **fields))
    out.append(_graphed(out[1], model_cfg, task, items, cfg, device))
    return out


def _graphed(buckets: Contender, model_cfg, task, items, cfg, device) -> Contender:
    """The loop's update (``finetune.Updates``) on the batches of ``buckets``: each shape's
    first update eager, then replayed as a CUDA graph (on the CPU, ``eager_stand_in``)."""
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
    step = lambda: updates.update(next(feed), LR)  # noqa: E731
    info = buckets.config | {"variant": "finetune:graphed", "updates": "finetune.Updates"}
    info["graphs"] = "CUDA graph per shape" if graphs else "eager stand-in (no CUDA)"
    info["padding"] = "the loop's: length-grouped, a multiple of runtime.pad_multiple"
    padded = [updates.batch([items[i] for i in b]) for b in order]
    fields = {"tokens": statistics.mean(int(b.mask.sum()) for b in padded)}
    fields |= {"seq": statistics.mean(b.ids.size(1) for b in padded), "examples": cfg.batch}
    return Contender("finetune:graphed", "finetune", step, info, **fields)


def contenders(cfg: BenchConfig, mode: str, device) -> list[Contender]:
    if mode == "pretrain":
        return [pretrain_contender(n, cfg, device) for n in cfg.implementations]
    return finetune_contenders(cfg, device)


def probe(cfg: BenchConfig, mode: str, name: str) -> float:
    """Run in a fresh process: ``name``'s first step's peak memory growth on the CPU, in MB,
    after a step of a tiny model of its kind has paid for the runtime's own buffers."""
    cfg, cpu = replace(cfg, implementations=(name,)), torch.device("cpu")
    warm = replace(cfg, preset="tiny", batch=1, seq=8, steps=1)
    next(c for c in contenders(warm, mode, cpu) if c.name == name).step()
    return peak_growth(next(c for c in contenders(cfg, mode, cpu) if c.name == name).step, cpu)


# ---------------------------------------------------------------- running
