"""A scale's whole reproduction as a fixed list of units, each with its predicted seconds.

``units(S, tasks)`` lists what ``make record`` runs, in order; every setting comes from the
``Scale`` (the ``small`` one is sized to one GPU lease), nothing is chosen at run time but the
fine-tuning protocols, which the selection units choose on examples held out from train:

* ``pretrain``: the transformer and Table 5's LSTM, as many updates each (chapter 03, 11);
* ``selection``: each Table 5 arm's rate, by the same search (``selection``, chapter 12);
* ``finetune``: chapters 05-08's tasks, and chapter 04's lambda = 0 on its task (its lambda =
  0.5 run is chapter 05's);
* ``ablations``: Table 5's other three rows on the full row's tasks and examples (chapter 12);
* ``zeroshot``: the heuristics at each log-spaced checkpoint of both models (chapter 11);
* ``transfer``: layer transfer at the scale's points (chapter 10).

``predict`` gives each unit its seconds on a device from ``RATES`` (what that device measured in
the library's own loops, each rate with its date and source) and the data's sizes (``sizes``:
examples, sequences and padded tokens of each split, read from the source, no timing).
"""

from __future__ import annotations

import math
import statistics

from ..experiments import ARM_MODEL
from ..finetune import encode_all
from ..selection import HELD_OUT
from ..selection import RATES as SEARCHED_RATES
from ..tasks import SCORED_BESIDE, get_task, load_examples, open_source
from ..transforms import padded_length
from ..zeroshot import ZERO_SHOT_SPLITS

#: Measured rates, one table a device and scale: name -> (value, when and where it was
#: measured). The H100's are ../shared/notes/gpu-lease-2026-11-24.md (code ee22f51) and
#: gpu-lease-2026-11-26.md (code a5300d5), in the loops this module's units call.
RATES = {
    ("small", "H100"): {
        "setup_s": (20.0, "assumed: imports, CUDA and the bundle's tokenizer (not timed)"),
        "gpt_start_s": (46.2, "2026-11-26 a5300d5: 3,000 updates in 145.2 s with the data, "
                        "compiling and 6 validations; 4,000 in 178.2 s"),
        "gpt_update_s": (0.0330, "2026-11-26 a5300d5: the 1,000 updates between those runs"),
        "lstm_start_s": (10.1, "2026-11-24 ee22f51: 1,707 updates in 109.8 s"),
        "lstm_update_s": (0.0584, "2026-11-24 ee22f51: the LSTM loop timed, 64 x 512 tokens"),
        "save_s": (1.32, "2026-11-24 ee22f51: a resumable checkpoint written"),
        "ft_run_s": (1.0, "2026-11-24 ee22f51: a run beyond its updates and scoring "
                     "(layer-transfer runs of 27 updates: 1.4-2.6 s)"),
        "ft_step_s": (0.025, "2026-11-24: a step of 32 short sequences, launch-bound"),
        "ft_seq_s": (0.00016, "2026-11-26 a5300d5: whole STS-B (64 sequences a step) 16.5-20.2 "
                     "s for 537 steps, against CoLA's 21.5 s for 801"),
        "ft_token_s": (2.26e-6, "2026-11-24: 32 x 512 padded tokens, GPU busy 37 ms a step"),
        "eval_batch_s": (0.008, "2026-11-24 ee22f51: scoring, a batch beyond its tokens"),
        "eval_token_s": (0.4e-6, "2026-11-24 ee22f51: scoring, a padded token"),
        "zs_token_s": (1.07e-6, "2026-11-24 ee22f51: zero-shot, 10 checkpoints of 2,000 "
                       "examples a set (3.8 M padded tokens each) in 40.8 s"),
        "lstm_ft_ratio": (0.59, "2026-11-24 ee22f51: the LSTM's Table 5 runs 21.1 s, the "
                          "transformer's 35.8 s on the same examples"),
    },
    # this project's 2-core CPU: fit to the units of tools/rehearse_gpu.sh at smoke, 2026-11-26
    ("smoke", "cpu"): {
        "setup_s": (5.0, "imports and the bundle"),
        "gpt_start_s": (0.3, "fit"), "gpt_update_s": (0.01, "fit"),
        "lstm_start_s": (0.2, "fit"), "lstm_update_s": (0.01, "fit"),
        "save_s": (0.02, "fit"), "ft_run_s": (0.12, "fit"),
        "ft_step_s": (0.004, "fit"), "ft_seq_s": (0.0001, "fit"),
        "ft_token_s": (1e-6, "fit"), "eval_batch_s": (0.002, "fit"),
        "eval_token_s": (1e-6, "fit"), "zs_token_s": (3e-6, "fit"),
        "lstm_ft_ratio": (0.8, "fit"),
    },
}  # fmt: skip
#: The parts of a run, in the order a report lists them (a unit's ``part``).
PARTS = ("pretrain", "selection", "finetune", "ablations", "zeroshot", "transfer")
CHAPTER = {
    "pretrain:gpt": "03_pretraining",
    "pretrain:lstm": "11_zero_shot",
    "selection": "12_ablations",
    "objective": "04_finetuning",
    "zeroshot": "11_zero_shot",
    "transfer": "10_layer_transfer",
    "ablation": "12_ablations",
}
FAMILY_CHAPTER = {
    "classification": "05_classification",
    "entailment": "06_entailment",
    "similarity": "07_similarity",
    "multiple_choice": "08_multiple_choice",
}


def rates_for(scale: str, device: str) -> tuple[dict[str, float], str] | None:
    """The measured rates of ``device`` (a name such as "NVIDIA H100 80GB HBM3", or "cpu") at
    ``scale``, and where they come from; None where none was measured."""
    for (name, key), table in RATES.items():
        if name == scale and key.lower() in device.lower():
            return {k: v for k, (v, _) in table.items()}, f"{key}, measured ({scale} scale)"
    return None


# ---------------------------------------------------------------- the units


def units(S, tasks: set[str]) -> list[dict]:
    """Every unit of a run of ``S``, in order: its ``id``, ``kind``, ``part``, the ``chapter``
    whose records it writes, and what it runs; ``tasks``: those the source holds."""
    out = []

    def add(uid, kind, part, chapter, **settings):
        out.append({"id": uid, "kind": kind, "part": part, "chapter": chapter, **settings})

    for arch in ("gpt", "lstm"):
        add(f"pretrain:{arch}", "pretrain", "pretrain", CHAPTER[f"pretrain:{arch}"], arch=arch)
    if [t for t in S.selection_tasks if t in tasks]:
        for arm in S.table5_arms:
            add(f"select:{arm}", "selection", "selection", CHAPTER["selection"], arm=arm)
    for family, names in S.family_tasks.items():
        for task in (t for t in names if t in tasks):
            also = [o for o in SCORED_BESIDE.get(task, ()) if o in tasks]
            add(
                f"finetune:{task}",
                "finetune",
                "finetune",
                FAMILY_CHAPTER[family],
                task=task,
                also=also,
            )
    for arm in S.table5_arms[1:]:  # the full row is chapters 05-07's runs
        for task in (t for t in S.ablation_tasks if t in tasks):
            add(
                f"ablation:{arm}:{task}",
                "ablation",
                "ablations",
                CHAPTER["ablation"],
                arm=arm,
                task=task,
            )
    for arch in ("gpt", "lstm"):
        add(f"zeroshot:{arch}", "zeroshot", "zeroshot", CHAPTER["zeroshot"], arch=arch)
    for task in (t for t in S.transfer_tasks if t in tasks):
        for k in S.transfer_at():
            add(
                f"transfer:{task}:{k}",
                "transfer",
                "transfer",
                CHAPTER["transfer"],
                task=task,
                n_transfer=k,
            )
    if S.objective_task in tasks:
        add(
            f"objective:{S.objective_task}:lambda0.0",
            "objective",
            "finetune",
            CHAPTER["objective"],
            task=S.objective_task,
            lm_coef=0.0,
        )
    return out


# ---------------------------------------------------------------- the data's sizes


def sizes(S, source, tok, multiple: int) -> dict[tuple[str, str], dict]:
    """(task, split) -> the examples a run of ``S`` reads from ``source`` (``n``: the split's
    own count), sequences an example, and padded tokens an example (lengths rounded up to
    ``multiple``, the device's; from up to 100 encoded examples)."""
    n_ctx, src, out = S.model_config().n_ctx, open_source(source), {}
    wanted = {(t, s) for t in _finetuned(S) for s in ("train", get_task(t).eval_split)}
    wanted |= {(o, get_task(o).eval_split) for t in _finetuned(S) for o in SCORED_BESIDE.get(t, ())}
    wanted |= {(t, "dev") for t in S.transfer_tasks} | set(ZERO_SHOT_SPLITS.items())
    wanted |= {("cola", "train"), ("sst2", "train")}  # the zero-shot thresholds' examples
    for task, split in sorted(wanted):
        try:
            sample = load_examples(task, split, source, 100, S.finetune.seed)
        except (FileNotFoundError, RuntimeError, ValueError):
            continue
        items = encode_all(sample, get_task(task), tok, n_ctx)
        padded = [sum(padded_length(len(s), multiple, n_ctx) for s in i.seqs) for i in items]
        out[task, split] = {
            "n": src.count(get_task(task), split),
            "seqs": len(items[0].seqs),
            "tokens": statistics.mean(padded),
        }
    return out


def _finetuned(S) -> list[str]:
    return [t for names in S.family_tasks.values() for t in names]


def available(S, source) -> set[str]:
    """The tasks of ``S``'s units that ``source`` holds (their train and eval splits)."""
    from ..tasks import unavailable

    names = {*_finetuned(S), *S.selection_tasks, *S.ablation_tasks, *S.transfer_tasks}
    names |= {o for t in _finetuned(S) for o in SCORED_BESIDE.get(t, ())}
    return {t for t in names if not unavailable(t, source)}


# ---------------------------------------------------------------- predictions


class Predictor:
    """Seconds of each kind of work from ``rates`` and ``sizes``, as the loops do it."""

    def __init__(self, S, rates: dict[str, float], sizes_: dict) -> None:
        self.S, self.r, self.sizes = S, rates, sizes_

    def n(self, task: str, split: str, limit) -> int:
        n = self.sizes[task, split]["n"]
        return n if limit is None else min(limit, n)

    def scoring(self, task: str, split: str, n: int) -> float:
        r, bs = self.r, self.S.finetune.eval_batch_size
        tokens = n * self.sizes[task, split]["tokens"]
        return math.ceil(n / bs) * r["eval_batch_s"] + tokens * r["eval_token_s"]

    def finetune(self, task: str, n: int, evals: list, cfg, arch="gpt", beside=(), train=0):
        """A run on ``n`` training examples of ``task`` with ``cfg``, scoring ``evals`` ((task,
        split, examples)) each epoch, ``beside`` after the last, ``train`` examples each epoch."""
        r, st = self.r, self.sizes[task, "train"]
        seqs, tokens = cfg.batch_size * st["seqs"], cfg.batch_size * st["tokens"]
        step = max(r["ft_step_s"] + r["ft_seq_s"] * max(0, seqs - 32), r["ft_token_s"] * tokens)
        seconds = n // cfg.batch_size * cfg.epochs * step
        scored = [*evals, *([(task, "train", train)] if train else [])]
        times = cfg.epochs if cfg.score_every_epoch else 1
        seconds += times * sum(self.scoring(*e) for e in scored)
        seconds += sum(self.scoring(*e) for e in beside)
        return seconds * (r["lstm_ft_ratio"] if arch == "lstm" else 1.0) + r["ft_run_s"]

    def task_run(self, task: str, cfg, arch="gpt", also=()) -> float:
        limits = self.S.limits_for(task)
        split = get_task(task).eval_split
        evals = [(task, split, self.n(task, split, limits["eval_limit"]))]
        beside = [
            (o, get_task(o).eval_split, self.n(o, get_task(o).eval_split, limits["eval_limit"]))
            for o in also
        ]
        n = self.n(task, "train", limits["limit"])
        return self.finetune(task, n, evals, cfg, arch, beside)

    def pretrain(self, arch: str) -> float:
        p, r = self.S.pretrain, self.r
        saves = p.total_steps // p.ckpt_interval + 1 + p.n_log_checkpoints / 3
        return r[f"{arch}_start_s"] + p.total_steps * r[f"{arch}_update_s"] + saves * r["save_s"]

    def selection(self, arm: str) -> float:
        cfg, seconds = self.S.finetune_for(arm), 0.0
        for task in self.S.selection_tasks:
            read = self.n(task, "train", self.S.selection_examples)
            held = int(read * HELD_OUT)
            run = self.finetune(task, read - held, [(task, "train", held)], cfg, ARM_MODEL[arm])
            seconds += len(SEARCHED_RATES) * run
        return seconds

    def zeroshot(self) -> float:
        """The heuristics at every log-spaced checkpoint: a forward pass to the full logits of
        each example's sequences (the thresholds' training examples too)."""
        total, limit = 0.0, self.S.zero_shot_examples
        sets = [*ZERO_SHOT_SPLITS.items(), ("cola", "train"), ("sst2", "train")]
        for task, split in (s for s in sets if s in self.sizes):
            n = self.n(task, split, limit)
            total += n * self.sizes[task, split]["tokens"] * self.r["zs_token_s"]
            total += math.ceil(n / 64) * self.r["eval_batch_s"]
        return self.S.pretrain.n_log_checkpoints * (total + self.r["save_s"] / 3)

    def unit(self, u: dict) -> float:
        kind, S = u["kind"], self.S
        if kind == "pretrain":
            return self.pretrain(u["arch"])
        if kind == "selection":
            return self.selection(u["arm"])
        if kind == "zeroshot":
            return self.zeroshot()
        if kind == "finetune":
            return self.task_run(u["task"], S.finetune, also=u["also"])
        if kind == "objective":
            return self.task_run(u["task"], S.finetune)
        if kind == "ablation":
            return self.task_run(u["task"], S.finetune_for(u["arm"]), ARM_MODEL[u["arm"]])
        train, evals = S.transfer_limits.get(u["task"], (None, None))
        dev = [(u["task"], "dev", self.n(u["task"], "dev", evals))]
        n = self.n(u["task"], "train", train)
        return self.finetune(u["task"], n, dev, S.finetune, train=S.transfer_train_examples)


def predict(plan: list[dict], S, rates: dict[str, float], sizes_: dict) -> float:
    """Each unit's ``seconds`` set; returns the run's, with its set-up."""
    p = Predictor(S, rates, sizes_)
    for u in plan:
        u["seconds"] = round(p.unit(u), 1)
    return rates["setup_s"] + sum(u["seconds"] for u in plan)


# ---------------------------------------------------------------- as people read it


def format_units(plan: list[dict], S, how: str, setup_s: float | None) -> str:
    """The run as a table: each part, its units and predicted minutes, and the total."""
    lines = [
        f"the {S.name} recipe, {len(plan)} units; predicted from {how}:",
        f"{'part':10s} {'units':>5s} {'minutes':>7s}  what",
    ]
    total = setup_s
    if setup_s is not None:
        lines.append(f"{'setup':10s} {'':>5s} {setup_s / 60:7.1f}  imports, CUDA, the data")
    for part in PARTS:
        mine = [u for u in plan if u["part"] == part]
        seconds = sum(u.get("seconds") or 0 for u in mine) if setup_s is not None else None
        total = None if seconds is None else total + seconds
        shown = "-" if seconds is None else f"{seconds / 60:.1f}"
        if mine:
            lines.append(f"{part:10s} {len(mine):5d} {shown:>7s}  {_what(part, mine, S)}")
    shown = "-" if total is None else f"{total / 60:.1f}"
    return "\n".join([*lines, f"{'total':10s} {len(plan):5d} {shown:>7s}"])


def _what(part: str, mine: list[dict], S) -> str:
    p = S.pretrain
    if part == "pretrain":
        return (
            f"GPT and LSTM, {p.total_steps:,} updates each of {p.batch_size} x "
            f"{S.model_config().n_ctx}, {p.n_log_checkpoints} log-spaced checkpoints"
        )
    if part == "selection":
        tasks = ", ".join(f"{t} {S.selection_examples or 'all'}" for t in S.selection_tasks)
        return f"{len(SEARCHED_RATES)} rates an arm, {HELD_OUT:.0%} of {tasks} held out"
    if part == "zeroshot":
        n = S.zero_shot_examples or "all"
        return f"{p.n_log_checkpoints} checkpoints a model, {n} examples a set"
    if part == "transfer":
        return f"n_transfer {S.transfer_at()} on {', '.join(S.transfer_tasks)}"
    tasks = list(dict.fromkeys(u["task"] for u in mine))
    if part == "finetune":
        return ", ".join(tasks)
    arms = list(dict.fromkeys(u["arm"] for u in mine))
    return f"{', '.join(arms)} x {len(tasks)} tasks (the full row: chapters 05-07's runs)"


def format_outcome(plan: list[dict], took: dict[str, float]) -> str:
    """Each part's predicted and actual minutes over the units done, and their ratio."""
    lines = [f"{'part':10s} {'units':>5s} {'predicted':>9s} {'took':>7s} {'took/pred.':>10s}"]
    rows = []
    for part in PARTS:
        mine = [u for u in plan if u["part"] == part and u["id"] in took]
        if mine:
            pred = sum(u.get("seconds") or 0 for u in mine)
            rows.append((part, len(mine), pred, sum(took[u["id"]] for u in mine)))
    rows.append(("all", *(sum(r[i] for r in rows) for i in (1, 2, 3))))
    for part, n, pred, real in rows:
        ratio = f"{real / pred:10.2f}" if pred else f"{'-':>10s}"
        lines.append(f"{part:10s} {n:5d} {pred / 60:9.1f} {real / 60:7.1f} {ratio}")
    return "\n".join(lines)
