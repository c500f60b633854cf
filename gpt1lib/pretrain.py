"""Unsupervised pre-training (§3.1, §4.1): maximise L1 with the paper's recipe.

    L1(U) = sum_i log P(u_i | u_{i-k}, ..., u_{i-1}; Theta)

The recipe (PAPER.md §2): Adam (beta 0.9/0.999, eps 1e-8, the released code's), decoupled weight
decay 0.01 on every weight of rank >= 2 (embeddings included, biases and LayerNorm gains not: the
released code's scope), one global gradient-norm clip at 1.0, learning rate warmed up linearly
from 0 to 2.5e-4 over 2,000 updates and then annealed to 0 on a cosine, mini-batches of 64
random contiguous sequences of 512 tokens. The paper ran 100 epochs over BooksCorpus.

The loop is one function of a config that returns its history; it runs on a CPU, on one GPU (bf16
autocast, optional ``torch.compile``) and on many with PyTorch's DDP under ``torchrun``.
Checkpoints hold everything a run needs to go on exactly where it stopped (model, optimiser,
RNG states, data position, configs, tokenizer), are written atomically, and are checked against
the run's config before it resumes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from .corpus import Corpus, build_corpus
from .model import GPT, preset
from .records import append_records, make_record, provenance, read_records
from .runtime import MODEL_PRESET, SCALES, pick_device, seed_everything
from .weights import load_model, model_meta, save_model


@dataclass(frozen=True)
class PretrainConfig:
    """The optimisation of §4.1; defaults are the paper's."""

    total_steps: int | None = None  # updates; None: `epochs` over the training blocks
    epochs: float = 100.0  # the paper: 100 epochs over BooksCorpus
    batch_size: int = 64  # sequences per update, over all processes
    micro_batch_size: int | None = None  # sequences per forward pass; accumulate up to batch_size
    max_lr: float = 2.5e-4
    warmup_steps: int = 2000  # linear warm-up from 0, then cosine annealing to 0
    weight_decay: float = 0.01  # decoupled (Loshchilov & Hutter), on weights of rank >= 2
    grad_clip: float = 1.0  # one global norm (released code; the paper does not say)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    seed: int = 0
    log_interval: int = 10  # updates between training-loss records
    eval_interval: int = 500  # updates between validation losses
    eval_batches: int = 20  # validation batches of batch_size sequences
    ckpt_interval: int = 1000  # updates between resumable checkpoints
    n_log_checkpoints: int = 10  # log-spaced model checkpoints kept for the zero-shot chapter
    bf16: bool = True  # bf16 autocast on CUDA (ignored on the CPU)
    compile: bool = False  # torch.compile the model
    experiment: str = "pretrain"

    def steps_for(self, n_blocks: int) -> int:
        """Total updates for a corpus of ``n_blocks`` training blocks."""
        if self.total_steps is not None:
            return self.total_steps
        return max(1, int(self.epochs * n_blocks) // self.batch_size)


#: The optimisation at each scale. Warm-up and length shrink with the scale; smoke uses a larger
#: learning rate so that seconds of training show a falling loss.
PRETRAIN_PRESETS: dict[str, PretrainConfig] = {
    "smoke": PretrainConfig(
        total_steps=80,
        batch_size=8,
        max_lr=2e-3,
        warmup_steps=8,
        log_interval=5,
        eval_interval=20,
        eval_batches=4,
        ckpt_interval=40,
        n_log_checkpoints=5,
    ),
    # 2.9 M tokens: about 15 minutes on two cores (the LSTM 10). Not 1e-3 as for small models
    # elsewhere: at 1e-3 this post-LN model collapses within 40 updates to one output for every
    # input (the unigram distribution), transformers' OpenAIGPT too (results/README.md).
    "cpu": PretrainConfig(
        total_steps=700,
        batch_size=32,
        max_lr=1e-4,
        warmup_steps=100,
        log_interval=10,
        eval_interval=200,
        eval_batches=8,
        ckpt_interval=200,
    ),
    "small": PretrainConfig(
        total_steps=12_000,
        batch_size=64,
        warmup_steps=500,
        log_interval=20,
        eval_interval=500,
        eval_batches=20,
        ckpt_interval=1000,
        compile=True,
    ),
    "paper": PretrainConfig(),
}


def learning_rate(step: int, cfg: PretrainConfig, total_steps: int) -> float:
    """The learning rate of update ``step + 1``: linear warm-up from 0, then cosine to 0."""
    t = step + 1
    if t <= cfg.warmup_steps:
        return cfg.max_lr * t / cfg.warmup_steps
    progress = (t - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps)
    return cfg.max_lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def log_spaced_steps(total_steps: int, n: int) -> list[int]:
    """About ``n`` update counts spread evenly on a log scale from 1 to ``total_steps``."""
    if n <= 0:
        return []
    return sorted({int(round(s)) for s in np.geomspace(1, total_steps, n)})


def fused_adamw_ok(device: torch.device) -> bool:
    """Whether PyTorch has a fused AdamW for ``device``: CUDA, and the CPU since PyTorch 2.4."""
    try:
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1, device=device))], fused=True)
    except (RuntimeError, ValueError):
        return False
    return True


def make_optimizer(model: torch.nn.Module, cfg: PretrainConfig):
    """AdamW with decay on every parameter of rank >= 2 and none on biases and gains, fused
    (one kernel for all parameters) where PyTorch has it for the model's device."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups,
        lr=cfg.max_lr,
        betas=cfg.betas,
        eps=cfg.eps,
        fused=fused_adamw_ok(next(model.parameters()).device) or None,
    )


# ---------------------------------------------------------------- checkpoints


class CheckpointError(ValueError):
    """A checkpoint folder is not a checkpoint, or does not belong to this run."""


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


def _write_json_atomic(path: Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _optimizer_tensors(opt: torch.optim.Optimizer, names: dict[int, str]):
    """Adam's moments as named tensors, plus the param groups (without tensors) as JSON."""
    sd = opt.state_dict()
    tensors = {f"{names[i]}.{k}": v for i, st in sd["state"].items() for k, v in st.items()}
    return tensors, sd["param_groups"]


def save_checkpoint(folder: Path, model: GPT, opt, tokenizer, state: dict) -> Path:
    """Write a resumable checkpoint to ``folder`` atomically: a temporary folder, then rename."""
    folder = Path(folder)
    tmp = folder.with_name(f".tmp-{folder.name}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, tmp)
    names = {i: f"p{i}" for i in range(sum(len(g["params"]) for g in opt.param_groups))}
    opt_tensors, groups = _optimizer_tensors(opt, names)
    rng = {"rng.torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng |= {f"rng.cuda{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())}
    save_file(
        {k: v.contiguous().cpu() for k, v in (opt_tensors | rng).items()},
        str(tmp / "train_state.safetensors"),
    )
    tokenizer.save(tmp)
    _write_json_atomic(tmp / "state.json", {**state, "param_groups": groups})
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    old = folder.with_name(f".old-{folder.name}-{os.getpid()}")
    if folder.exists():
        os.rename(folder, old)
    os.rename(tmp, folder)
    _fsync_dir(folder.parent)
    shutil.rmtree(old, ignore_errors=True)
    return folder


def read_state(folder: str | os.PathLike) -> dict:
    """The ``state.json`` of a checkpoint folder, or a clear error if it is not one."""
    folder = Path(folder)
    need = (
        "state.json",
        "model.json",
        "model.safetensors",
        "train_state.safetensors",
        "tokenizer.json",
    )
    missing = [n for n in need if not (folder / n).is_file()]
    if missing:
        raise CheckpointError(
            f"{folder} is not a gpt1lib checkpoint (missing {missing}); pass "
            "a folder written by pretrain(), e.g. <out_dir>/checkpoints/step_*"
        )
    return json.loads((folder / "state.json").read_text())


def latest_checkpoint(out_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint of a run, or None."""
    pointer = Path(out_dir) / "checkpoints" / "latest.json"
    if not pointer.is_file():
        return None
    return Path(out_dir) / "checkpoints" / json.loads(pointer.read_text())["name"]


def load_checkpoint(folder: Path, model: GPT, opt, device: torch.device) -> dict:
    """Restore model, optimiser and RNG states from ``folder``; returns its state.json."""
    state = read_state(folder)
    model.load_state_dict(load_file(str(folder / "model.safetensors"), device=str(device)))
    tensors = load_file(str(folder / "train_state.safetensors"))
    groups = state["param_groups"]
    opt_state: dict[int, dict] = {}
    for key, t in tensors.items():
        if key.startswith("p"):
            name, k = key.split(".", 1)
            opt_state.setdefault(int(name[1:]), {})[k] = t
    opt.load_state_dict({"state": opt_state, "param_groups": groups})
    torch.set_rng_state(tensors["rng.torch"])
    if torch.cuda.is_available():
        cuda = [tensors[k] for k in sorted(tensors) if k.startswith("rng.cuda")]
        if cuda:
            torch.cuda.set_rng_state_all(cuda)
    return state


# ---------------------------------------------------------------- distributed


@dataclass(frozen=True)
class Dist:
    """This process's place in a ``torchrun`` job (rank 0 of 1 without one)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(device: torch.device | None = None) -> Dist:
    """Join the process group ``torchrun`` set up (NCCL on GPUs, gloo on CPUs), if any."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return Dist()
    d = Dist(
        int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0))
    )
    if not dist.is_initialized():
        cuda = torch.cuda.is_available() and (device is None or device.type == "cuda")
        if cuda:
            torch.cuda.set_device(d.local_rank)
        dist.init_process_group("nccl" if cuda else "gloo")
    return d


# ---------------------------------------------------------------- the loop


@dataclass
class PretrainResult:
    """What a run leaves: where, how far, its history and its log-spaced checkpoints."""

    out_dir: Path
    step: int
    total_steps: int
    val_loss: float | None
    wall_time: float
    history: object = field(repr=False)  # a DataFrame of this run's records
    log_checkpoints: list[Path] = field(default_factory=list)


def _run_config(model, cfg: PretrainConfig, tokenizer, corpus: Corpus) -> dict:
    """What must not change between a run and its resumption."""
    keep = {k: v for k, v in asdict(cfg).items() if k not in ("compile", "experiment")}
    return {
        "model": model_meta(model),
        "pretrain": keep,
        "tokenizer": tokenizer.fingerprint(),
        "corpus": corpus.train_source,
    }


#: Model settings that change how a step is computed, never what: a run resumes across them.
SPEED_ONLY = ("pad_vocab_to", "fast_cpu_dropout")


def _config_diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    out = []
    for k in sorted(set(old) | set(new)):
        if prefix == "model.config." and k in SPEED_ONLY:
            continue
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _config_diff(a, b, f"{prefix}{k}.")
        elif (list(a) if isinstance(a, tuple | list) else a) != (
            list(b) if isinstance(b, tuple | list) else b
        ):
            out.append(f"{prefix}{k}: checkpoint {a!r} vs now {b!r}")
    return out


@torch.no_grad()
def evaluate(
    model: GPT,
    corpus: Corpus,
    batch_size: int,
    max_batches: int | None,
    device: torch.device,
    bf16: bool = False,
) -> float:
    """Mean next-token loss (nats) on the validation blocks."""
    was_training = model.training
    model.eval()
    total, count = torch.zeros((), device=device), 0
    for x in corpus.valid.eval_batches(batch_size, max_batches):
        x = x.to(device)
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            total += model(x[:, :-1], targets=x[:, 1:], validate=False).loss * x.size(0)
        count += x.size(0)
    model.train(was_training)
    return (total / count).item()


def pretrain(
    model: GPT,
    tokenizer,
    corpus: Corpus,
    cfg: PretrainConfig,
    out_dir: str | os.PathLike,
    *,
    resume: bool = False,
    scale: str | None = None,
    device: str | torch.device | None = None,
    progress: bool = True,
    stop_after: int | None = None,
) -> PretrainResult:
    """Pre-train ``model`` on ``corpus`` (L1) into ``out_dir``; returns the run's history.

    ``resume=True`` continues the newest checkpoint in ``out_dir`` (and starts afresh if there
    is none); without it, an ``out_dir`` that already holds a run is an error, so nothing is
    overwritten. ``stop_after`` ends this call after that many updates (the schedule still
    runs to ``total_steps``), for a run done in parts.
    """
    device = pick_device(str(device) if device else None)
    d = init_distributed(device)
    if d.world > 1 and device.type == "cuda":
        device = torch.device("cuda", d.local_rank)
    out_dir = Path(out_dir)
    mcfg = model.config
    # --- everything that can be wrong is checked before any work
    if tokenizer.vocab_size != mcfg.vocab_size:
        raise ValueError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the model's "
            f"vocab_size is {mcfg.vocab_size}: build the model with "
            "vocab_size=tokenizer.vocab_size (or load the model's own tokenizer)"
        )
    if corpus.train.block != mcfg.n_ctx + 1:
        raise ValueError(
            f"the corpus was cut into blocks of {corpus.train.block} tokens but the "
            f"model's context is {mcfg.n_ctx}: build_corpus(n_ctx={mcfg.n_ctx})"
        )
    if int(corpus.train.tokens.max()) >= mcfg.vocab_size:
        raise ValueError(
            "the corpus holds token ids outside the model's vocabulary: tokenise "
            "it with the tokenizer the model was built for"
        )
    micro = cfg.micro_batch_size or cfg.batch_size // d.world
    if cfg.batch_size % (micro * d.world):
        raise ValueError(
            f"batch_size={cfg.batch_size} is not a multiple of micro_batch_size="
            f"{micro} x {d.world} processes"
        )
    accum = cfg.batch_size // (micro * d.world)
    total_steps = cfg.steps_for(len(corpus.train))
    run_cfg = _run_config(model, replace(cfg, total_steps=total_steps), tokenizer, corpus)
    ckpt = latest_checkpoint(out_dir)
    if ckpt is not None and not resume:
        raise FileExistsError(
            f"{out_dir} already holds a run (newest checkpoint {ckpt.name}): "
            "pass resume=True to continue it, or choose a new out_dir"
        )
    if ckpt is not None:
        diff = _config_diff(read_state(ckpt)["run_config"], run_cfg)
        if diff:
            raise CheckpointError(
                f"{ckpt} was made with another config; differences:\n  "
                + "\n  ".join(diff)
                + "\nresume with the same config, or "
                "start a new run in another out_dir"
            )

    seed_everything(cfg.seed)
    model.to(device).train()
    opt = make_optimizer(model, cfg)
    step, epoch, batch_index = 0, 0, 0
    if ckpt is not None:
        state = load_checkpoint(ckpt, model, opt, device)
        step, epoch, batch_index = state["step"], state["epoch"], state["next_batch"]
    net: torch.nn.Module = model
    if d.world > 1:
        net = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    if cfg.compile:
        net = torch.compile(net)
    bf16 = cfg.bf16 and device.type == "cuda"
    log_steps = set(log_spaced_steps(total_steps, cfg.n_log_checkpoints))
    records_path = out_dir / "records.jsonl"
    base = {
        "experiment": cfg.experiment,
        "scale": scale,
        "seed": cfg.seed,
        "task": "lm",
        "data": corpus.train_source,
        "config": run_cfg | {"total_steps": total_steps},
        **provenance(device),
    }
    t0, last_t, last_step = time.perf_counter(), time.perf_counter(), step
    data = corpus.train.batches(cfg.batch_size, cfg.seed, epoch, batch_index)
    end = total_steps if stop_after is None else min(total_steps, step + stop_after)
    bar = tqdm(
        total=total_steps,
        initial=step,
        disable=not (progress and d.main),
        desc=cfg.experiment,
        unit="step",
    )
    loss_sum = torch.zeros((), device=device)
    val_loss = None
    while step < end:
        epoch, batch_index, x = next(data)
        rows = x[d.rank * (cfg.batch_size // d.world) : (d.rank + 1) * (cfg.batch_size // d.world)]
        lr = learning_rate(step, cfg, total_steps)
        for g in opt.param_groups:
            g["lr"] = lr
        for i in range(accum):
            xb = rows[i * micro : (i + 1) * micro]
            xb = xb.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else xb
            sync = i == accum - 1 or d.world == 1
            ctx = contextlib.nullcontext() if sync else net.no_sync()
            with ctx, torch.autocast(device.type, torch.bfloat16, enabled=bf16):
                loss = net(xb[:, :-1], targets=xb[:, 1:], validate=False).loss / accum
            loss.backward()
            loss_sum += loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        bar.update(1)
        recs = []
        if step % cfg.log_interval == 0 or step == end:
            n = step - last_step
            if d.world > 1:  # the loss of the whole batch, not of this process's share
                dist.all_reduce(loss_sum)
                loss_sum /= d.world
            now = time.perf_counter()
            train_loss = loss_sum.item() / n
            tok_s = n * cfg.batch_size * mcfg.n_ctx / (now - last_t)
            loss_sum.zero_()
            last_t, last_step = now, step
            bar.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{tok_s:,.0f}", lr=f"{lr:.2e}")
            wall = now - t0
            recs += [
                make_record(
                    "train_loss", train_loss, step=step, split="train", wall_time=wall, **base
                ),
                make_record("tokens_per_s", tok_s, step=step, wall_time=wall, **base),
                make_record("lr", lr, step=step, wall_time=wall, **base),
            ]
        if step % cfg.eval_interval == 0 or step == total_steps:
            val_loss = evaluate(model, corpus, cfg.batch_size, cfg.eval_batches, device, bf16)
            wall = time.perf_counter() - t0
            recs += [
                make_record("val_loss", val_loss, step=step, split="valid", wall_time=wall, **base),
                make_record(
                    "val_ppl", math.exp(val_loss), step=step, split="valid", wall_time=wall, **base
                ),
            ]
        if d.main and recs:
            append_records(records_path, recs)
        if d.main and step in log_steps:
            save_model(model, out_dir / "log_checkpoints" / f"step_{step:08d}")
            tokenizer.save(out_dir / "log_checkpoints" / f"step_{step:08d}")
        if step % cfg.ckpt_interval == 0 or step == end:
            if d.main:
                _save_and_prune(
                    out_dir, model, opt, tokenizer, step, epoch, batch_index + 1, run_cfg
                )
            if d.world > 1:
                dist.barrier()
    bar.close()
    history = read_records(records_path) if records_path.is_file() else read_records()
    logs = sorted((out_dir / "log_checkpoints").glob("step_*"))
    return PretrainResult(
        out_dir, step, total_steps, val_loss, time.perf_counter() - t0, history, logs
    )


def _save_and_prune(
    out_dir: Path, model, opt, tokenizer, step: int, epoch: int, next_batch: int, run_cfg: dict
) -> None:
    """Write checkpoint ``step``, point ``latest.json`` at it, then drop the older ones."""
    ckpts = out_dir / "checkpoints"
    name = f"step_{step:08d}"
    state = {"step": step, "epoch": epoch, "next_batch": next_batch, "run_config": run_cfg}
    save_checkpoint(ckpts / name, model, opt, tokenizer, state)
    _write_json_atomic(ckpts / "latest.json", {"name": name, "step": step})
    for old in ckpts.glob("step_*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------- a pre-trained model


def load_run_model(folder: str | os.PathLike, device: str | torch.device = "cpu"):
    """The model and tokenizer of a checkpoint folder written by ``pretrain`` (a resumable
    checkpoint, or one of the log-spaced ones)."""
    from .tokenizer import GPT1Tokenizer

    return load_model(folder, device), GPT1Tokenizer.load(folder)


def pretrained_model(
    scale: str,
    out_dir: str | os.PathLike = "runs",
    init: str = "pretrain",
    corpus: str | None = None,
    arch: str = "gpt",
    device: str | None = None,
    progress: bool = True,
):
    """The model fine-tuning starts from, its tokenizer, and a line saying what it is.

    ``init``: "pretrain", this project's pre-training run ``out_dir/<scale>/pretrain`` (or
    ``pretrain_lstm`` for ``arch="lstm"``), run or finished first if needed (seconds at the smoke
    scale); "released", GPT-1's released weights and vocabulary from the hub; or a checkpoint
    folder written by ``pretrain``. The LSTM reads the transformer run's tokenizer, so the two
    see the same tokens.
    """
    from .corpus import DEFAULT_CORPUS, load_documents
    from .lstm import LSTMLM, lstm_preset
    from .tokenizer import GPT1Tokenizer
    from .weights import load_pretrained

    if arch not in ("gpt", "lstm"):
        raise ValueError(f"arch={arch!r}: use 'gpt' (GPT-1) or 'lstm' (the Table 5 baseline)")
    if init == "released":
        if arch != "gpt":
            raise ValueError("only GPT-1's transformer was released; pre-train the LSTM here")
        return load_pretrained(), GPT1Tokenizer.from_hub(), "GPT-1's released weights"
    if init != "pretrain":
        model, tok = load_run_model(init)
        return model, tok, f"checkpoint {init}"
    run_dir = Path(out_dir) / scale / ("pretrain" if arch == "gpt" else f"pretrain_{arch}")
    ckpt = latest_checkpoint(run_dir)
    cfg = PRETRAIN_PRESETS[scale]
    default_corpus, limit = DEFAULT_CORPUS[scale]
    corpus = corpus or default_corpus
    unfinished = (
        ckpt is not None
        and read_state(ckpt)["step"] < read_state(ckpt)["run_config"]["pretrain"]["total_steps"]
    )
    if ckpt is None or unfinished:
        if ckpt is not None:
            tok = load_tokenizer(str(ckpt))
        elif arch == "lstm":
            tok = pretrained_model(scale, out_dir, "pretrain", corpus, "gpt", device, progress)[1]
        else:
            spec = DEFAULT_TOKENIZER[scale]
            texts = (
                load_documents(corpus, "train", limit=limit).texts
                if spec.startswith("train:")
                else None
            )
            tok = load_tokenizer(spec, texts)
        mcfg = preset(MODEL_PRESET[scale], vocab_size=tok.vocab_size)
        data = build_corpus(
            tok, mcfg.n_ctx, corpus, seed=cfg.seed, limit=limit, cache_dir=Path(out_dir) / "cache"
        )
        seed_everything(cfg.seed)
        model = (
            GPT(mcfg)
            if arch == "gpt"
            else LSTMLM(
                lstm_preset(MODEL_PRESET[scale], vocab_size=tok.vocab_size, n_ctx=mcfg.n_ctx)
            )
        )
        pretrain(
            model,
            tok,
            data,
            replace(cfg, experiment=f"pretrain:{arch}"),
            run_dir,
            resume=True,
            scale=scale,
            device=device,
            progress=progress,
        )
        ckpt = latest_checkpoint(run_dir)
    model, tok = load_run_model(ckpt)
    return model, tok, f"pre-trained here ({arch}, {scale}, {ckpt})"


# ---------------------------------------------------------------- command line


def load_tokenizer(spec: str, train_texts=None):
    """A tokenizer from ``spec``: "released" (the hub's GPT-1 vocabulary), "train:N" (N merges
    learned on ``train_texts``), or a folder/file written by ``GPT1Tokenizer.save``. A folder
    holding ``encoder_bpe_40000.json`` and ``vocab_40000.bpe`` gives the released vocabulary."""
    from .tokenizer import GPT1Tokenizer

    if spec == "released":
        return GPT1Tokenizer.from_hub()
    if spec.startswith("train:"):
        if train_texts is None:
            raise ValueError(f"tokenizer={spec!r} needs the texts to learn the merges from")
        return GPT1Tokenizer.train(texts=train_texts, n_merges=int(spec.split(":", 1)[1]))
    path = Path(spec)
    if (path / "encoder_bpe_40000.json").is_file():
        return GPT1Tokenizer.from_released(
            path / "encoder_bpe_40000.json", path / "vocab_40000.bpe"
        )
    return GPT1Tokenizer.load(path)


#: The vocabulary each scale reads with: the released 40,000 merges from ``small`` up; fewer merges
#: learned on the corpus below it, where the output matmul over 40,478 tokens would cost a CPU
#: four times the blocks' work.
DEFAULT_TOKENIZER = {
    "smoke": "train:600",
    "cpu": "train:8000",
    "small": "released",
    "paper": "released",
}


def main(argv: list[str] | None = None) -> PretrainResult:
    """``python -m gpt1lib.pretrain`` (or ``torchrun ... -m gpt1lib.pretrain``)."""
    from .corpus import load_documents

    p = argparse.ArgumentParser(
        prog="python -m gpt1lib.pretrain", description=__doc__.split("\n")[0]
    )
    p.add_argument("--scale", choices=SCALES, default="smoke")
    p.add_argument("--out", required=True, help="run folder: checkpoints, records, samples")
    p.add_argument("--corpus", default="fixture", help="'fixture', a text file/folder, or a hub id")
    p.add_argument("--tokenizer", default=None, help="'released', 'train:N', or a saved folder")
    p.add_argument("--steps", type=int, default=None, help="total updates (default: the scale's)")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--micro-batch-size", type=int, default=None)
    p.add_argument("--ckpt-interval", type=int, default=None)
    p.add_argument("--stop-after", type=int, default=None, help="end this call after N updates")
    p.add_argument("--dropout", type=float, default=None, help="all dropout rates (default 0.1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--device", default=None)
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    cfg = PRETRAIN_PRESETS[a.scale]
    overrides = {
        "total_steps": a.steps,
        "batch_size": a.batch_size,
        "seed": a.seed,
        "micro_batch_size": a.micro_batch_size,
        "ckpt_interval": a.ckpt_interval,
    }
    cfg = replace(cfg, **{k: v for k, v in overrides.items() if v is not None})
    d = init_distributed(pick_device(a.device))
    ckpt = latest_checkpoint(a.out) if a.resume else None
    spec = str(ckpt) if ckpt is not None else a.tokenizer or DEFAULT_TOKENIZER[a.scale]
    if spec.startswith("train:"):
        # BPE training breaks ties in an order that can change between runs: learn the merges
        # once, in the main process, and have every process read that tokenizer.
        saved = Path(a.out) / "tokenizer"
        if d.main and not (saved / "tokenizer.json").is_file():
            load_tokenizer(spec, load_documents(a.corpus, "train").texts).save(saved)
        if d.world > 1:
            dist.barrier()
        spec = str(saved)
    tok = load_tokenizer(spec)
    drop = (
        {}
        if a.dropout is None
        else dict.fromkeys(("embd_pdrop", "attn_pdrop", "resid_pdrop"), a.dropout)
    )
    mcfg = preset(MODEL_PRESET[a.scale], vocab_size=tok.vocab_size, **drop)
    corpus = build_corpus(tok, mcfg.n_ctx, a.corpus, seed=a.seed, cache_dir=Path(a.out) / "cache")
    seed_everything(a.seed)
    model = GPT(mcfg)
    return pretrain(
        model,
        tok,
        corpus,
        cfg,
        a.out,
        resume=a.resume,
        scale=a.scale,
        device=a.device,
        progress=not a.no_progress,
        stop_after=a.stop_after,
    )


if __name__ == "__main__":
    main()
