"""A scale's whole reproduction as a fixed list of units (``units``), each with its seconds
predicted (``predict``) from ``RATES`` measured in the library's own loops and the data's ``sizes``.
"""

from __future__ import annotations

import math
import statistics

from ..choice import RATES as SEARCHED
from ..experiments import ARM_MODEL
from ..scales import FAMILY_TASKS
from ..scoring import encode_all
from ..selection import HELD_OUT
from ..steps import MAX_TOKENS, graphs_asked
from ..tasks import SCORED_BESIDE, get_task, load_examples, open_source, unavailable
from ..transforms import padded_length
from ..zeroshot import ZERO_SHOT_SPLITS
from .bundle import reads

#: Measured rates, one table a scale and device: name -> (value, where it comes from).
RATES = {
    ("small", "H100"): {
        "setup_s": (10.0, "assumed: imports took 7.6 s on this 2-core CPU"),
        "gpt_start_s": (26.6, "predicted: 49225fa's 50.2 s, its 38.6 s compiling x 33/85 (CPU)"),
        "gpt_update_s": (0.0349, "2026-11-26 a5300d5: 940k tokens/s, no wait for the GPU a step"),
        "lstm_start_s": (10.1, "2026-11-24 ee22f51: 1,707 updates in 109.8 s"),
        "lstm_update_s": (0.0584, "2026-11-24 ee22f51: the LSTM loop timed, 64 x 512 tokens"),
        "save_s": (1.32, "2026-11-24 ee22f51: a resumable checkpoint written"),
        "ft_run_s": (0.5, "2026-11-26 49225fa: 34 runs' 17.0 s beyond updates and scoring"),
        "ft_step_s": (0.025, "2026-11-24: a step of 32 short sequences, launch-bound"),
        "ft_graph_step_s": (0.001, "2026-11-26 a27161b bench: a replayed step beyond its GPU time"),
        "ft_graph_token_s": (3.3e-6, "2026-11-26 a27161b bench: GPU 7.0 ms, 32 x 67 padded tokens"),
        "ft_seq_s": (0.00016, "2026-11-26 a5300d5: STS-B's 537 steps of 64 sequences, CoLA's 801"),
        "ft_token_s": (2.26e-6, "2026-11-24: 32 x 512 padded tokens, GPU busy 37 ms a step"),
        "eval_batch_s": (0.008, "2026-11-24 ee22f51: scoring, a batch beyond its tokens"),
        "eval_token_s": (0.4e-6, "2026-11-24 ee22f51: scoring, a padded token"),
        "zs_token_s": (1.07e-6, "2026-11-24 ee22f51: zero-shot, 10 x 3.8 M tokens in 40.8 s"),
        "lstm_ft_ratio": (0.41, "2026-11-26 49225fa: Table 5's 8 LSTM runs in 35.0 s"),
        "lstm_zs_ratio": (0.69, "2026-11-26 49225fa: zero-shot 13.6 s, the transformer's 19.6"),
    },
    # a 2-core CPU: fit to the units of tools/rehearse_gpu.sh at smoke
    ("smoke", "cpu"): {
        "setup_s": (5.0, "fit"), "gpt_start_s": (0.3, "fit"), "gpt_update_s": (0.01, "fit"),
        "lstm_start_s": (0.2, "fit"), "lstm_update_s": (0.01, "fit"), "save_s": (0.02, "fit"),
        "ft_run_s": (0.12, "fit"), "ft_step_s": (0.004, "fit"), "ft_seq_s": (0.0001, "fit"),
        "ft_token_s": (1e-6, "fit"), "eval_batch_s": (0.002, "fit"), "eval_token_s": (1e-6, "fit"),
        "zs_token_s": (3e-6, "fit"), "lstm_ft_ratio": (0.8, "fit"), "lstm_zs_ratio": (1.0, "fit"),
    },
}  # fmt: skip
#: Each kind's part of a run, in the order a report lists the parts.
PART = {
    "pretrain": "pretrain", "select": "selection", "finetune": "finetune", "objective": "finetune",
    "ablation": "ablations", "zeroshot": "zeroshot", "transfer": "transfer",
}  # fmt: skip
#: Chapters 05-08, one a task family.
FAMILY_CHAPTER = {family: f"{i:02d}_{family}" for i, family in enumerate(FAMILY_TASKS, 5)}


def rates_for(scale: str, device: str) -> tuple[dict[str, float], str] | None:
    """The rates ``device`` ("NVIDIA H100 80GB HBM3", "cpu") measured at ``scale``, or None."""
    for (name, key), table in RATES.items():
        if name == scale and key.lower() in device.lower():
            return {k: v for k, (v, _) in table.items()}, f"{key}, measured ({scale} scale)"
    return None


def kind(u: dict) -> str:
    return u["id"].split(":")[0]


def units(S, tasks: set[str]) -> list[dict]:
    """Each unit of ``S`` on ``tasks`` in order: ``id``, the ``chapter`` it records, settings."""
    out = []

    def add(uid: str, chapter: str, **settings) -> None:
        out.append({"id": uid, "chapter": chapter, **settings})

    add("pretrain:gpt", "03_pretraining", arch="gpt")
    add("pretrain:lstm", "11_zero_shot", arch="lstm")
    for arm in S.table5_arms if set(S.selection_tasks) <= tasks else ():
        add(f"select:{arm}", "12_ablations", arm=arm)
    for family, names in S.family_tasks.items():
        for t in (t for t in names if t in tasks):
            also = [o for o in SCORED_BESIDE.get(t, ()) if o in tasks]
            add(f"finetune:{t}", FAMILY_CHAPTER[family], task=t, also=also)
    for arm in S.table5_arms[1:]:  # the full row is chapters 05-07's runs
        for t in (t for t in S.ablation_tasks if t in tasks):
            add(f"ablation:{arm}:{t}", "12_ablations", arm=arm, task=t)
    for arch in ("gpt", "lstm"):
        add(f"zeroshot:{arch}", "11_zero_shot", arch=arch)
    for t in (t for t in S.transfer_tasks if t in tasks):
        for k in S.transfer_at():
            add(f"transfer:{t}:{k}", "10_layer_transfer", task=t, n_transfer=k)
    if (t := S.objective_task) in tasks:  # its lambda = 0.5 run is chapter 05's
        add(f"objective:{t}:lambda0.0", "04_finetuning", task=t)
    return out


def available(S, source) -> set[str]:
    """The tasks ``source`` holds for ``S``'s units (those scored beside one: their eval split)."""
    tasks = {*(t for ts in S.family_tasks.values() for t in ts), *S.selection_tasks}
    ok = {t for t in tasks | {*S.ablation_tasks, *S.transfer_tasks} if not unavailable(t, source)}
    beside = {o for t in ok for o in SCORED_BESIDE.get(t, ())}
    return ok | {o for o in beside if not unavailable(o, source, train=False)}


def sizes(S, source, tok, multiple: int) -> dict[tuple[str, str], dict]:
    """(task, split) -> its examples ``n``, and sequences and padded tokens an example (the mean
    of up to 100)."""
    n_ctx, src, out = S.model_config().n_ctx, open_source(source), {}
    for task, split in sorted(reads(S, source)):
        try:
            sample = load_examples(task, split, source, 100, S.finetune.seed)
        except (FileNotFoundError, RuntimeError, ValueError):
            continue
        items = encode_all(sample, get_task(task), tok, n_ctx)
        padded = [sum(padded_length(len(s), multiple, n_ctx) for s in i.seqs) for i in items]
        out[task, split] = {"n": src.count(get_task(task), split), "seqs": len(items[0].seqs)}
        out[task, split]["tokens"] = statistics.mean(padded)
    return out


class Predictor:
    """Seconds of each unit from ``rates`` and ``sizes``, as the loops do the work."""

    def __init__(self, S, rates: dict[str, float], sizes_: dict) -> None:
        self.S, self.r, self.sizes = S, rates, sizes_

    def n(self, task: str, split: str, limit) -> int:
        return min(limit or math.inf, self.sizes[task, split]["n"])

    def scoring(self, task: str, split: str, n: int) -> float:
        tokens = n * self.sizes[task, split]["tokens"] * self.r["eval_token_s"]
        return math.ceil(n / self.S.finetune.eval_batch_size) * self.r["eval_batch_s"] + tokens

    def finetune(self, task, n, evals, cfg, arch="gpt", beside=(), train=0) -> float:
        """A run on ``n`` examples of ``task``; ``evals`` ((task, split, examples)) and ``train``
        examples scored each epoch (or the last), ``beside`` after the last."""
        r, st = self.r, self.sizes[task, "train"]
        seqs, tokens = cfg.batch_size * st["seqs"], cfg.batch_size * st["tokens"]
        launch = r["ft_step_s"] + r["ft_seq_s"] * max(0, seqs - 32)
        if arch == "gpt" and graphs_asked(cfg) and tokens <= MAX_TOKENS and "ft_graph_step_s" in r:
            launch = r["ft_graph_step_s"] + r["ft_graph_token_s"] * tokens  # a CUDA graph
        step = max(launch, r["ft_token_s"] * tokens)
        scored = [*evals, *([(task, "train", train)] if train else [])]
        times = cfg.epochs if cfg.score_every_epoch else 1
        s = n // cfg.batch_size * cfg.epochs * step + times * sum(self.scoring(*e) for e in scored)
        s += sum(self.scoring(*e) for e in beside)
        return s * (r["lstm_ft_ratio"] if arch == "lstm" else 1.0) + r["ft_run_s"]

    def zeroshot(self) -> float:
        sets = [*ZERO_SHOT_SPLITS.items(), ("cola", "train"), ("sst2", "train")]
        one = self.r["save_s"] / 3  # loading the checkpoint
        for task, split in (s for s in sets if s in self.sizes):
            n = self.n(task, split, self.S.zero_shot_examples)
            one += n * self.sizes[task, split]["tokens"] * self.r["zs_token_s"]
            one += math.ceil(n / 64) * self.r["eval_batch_s"]
        return self.S.pretrain.n_log_checkpoints * one

    def unit(self, u: dict) -> float:
        S, r, k = self.S, self.r, kind(u)
        if k == "pretrain":  # its start (data, compiling), its updates, its checkpoints
            p, a = S.pretrain, u["arch"]
            saves = -(-p.total_steps // p.ckpt_interval) + p.n_log_checkpoints / 3  # the last
            return r[f"{a}_start_s"] + p.total_steps * r[f"{a}_update_s"] + saves * r["save_s"]
        if k == "select":
            seconds, cfg = 0.0, S.finetune_for(u["arm"])
            for t in S.selection_tasks:
                held = int((read := self.n(t, "train", S.selection_examples)) * HELD_OUT)
                one = self.finetune(t, read - held, [(t, "train", held)], cfg, ARM_MODEL[u["arm"]])
                seconds += len(SEARCHED) * one
            return seconds
        if k == "zeroshot":  # the LSTM's in a share of the transformer's time
            return self.zeroshot() * (r["lstm_zs_ratio"] if u["arch"] == "lstm" else 1.0)
        if k == "transfer":
            train, evals = S.transfer_limits.get(u["task"], (None, None))
            dev = [(u["task"], "dev", self.n(u["task"], "dev", evals))]
            n = self.n(u["task"], "train", train)
            return self.finetune(u["task"], n, dev, S.finetune, train=S.transfer_train_examples)
        arm, limits = u.get("arm", "full"), S.limits_for(u["task"])
        ev = [(t, get_task(t).eval_split) for t in (u["task"], *u.get("also", ()))]
        ev = [(t, s, self.n(t, s, limits["eval_limit"])) for t, s in ev]
        n, cfg = self.n(u["task"], "train", limits["limit"]), S.finetune_for(arm)
        return self.finetune(u["task"], n, ev[:1], cfg, ARM_MODEL[arm], ev[1:])


def predict(plan: list[dict], S, rates: dict[str, float], sizes_: dict) -> float:
    """Sets each unit's ``seconds``; returns the run's, set-up included."""
    p = Predictor(S, rates, sizes_)
    for u in plan:
        u["seconds"] = round(p.unit(u), 1)
    return rates["setup_s"] + sum(u["seconds"] for u in plan)


def _minutes(seconds: float | None) -> str:
    return f"{seconds / 60:.1f}" if seconds else "-"


def format_units(plan: list[dict], S, how: str, setup_s: float | None, took=None) -> str:
    """A row a part of ``plan``: its units, minutes predicted (``setup_s`` None: none) and what
    it runs; with ``took`` (a unit's seconds) only the units done, their minutes and the ratio."""
    setup = ("setup", "", setup_s, None, "imports, CUDA, the data")
    rows = [setup] if setup_s is not None and took is None else []
    for part in dict.fromkeys(PART.values()):
        if mine := [u for u in plan if PART[kind(u)] == part and (took is None or u["id"] in took)]:
            real = None if took is None else sum(took[u["id"]] for u in mine)
            pred = sum(u.get("seconds") or 0 for u in mine)
            rows.append((part, len(mine), pred, real, _what(part, mine, S)))
    n, pred, real = (sum(r[i] or 0 for r in rows) for i in (1, 2, 3))
    rows.append(("total", n, pred, None if took is None else real, ""))
    lines = [f"the {S.name} recipe, {len(plan)} units; predicted from {how}:"]
    lines.append(
        f"{'part':10s} {'units':>5s} {'predicted':>9s} {'took':>7s} {'took/pred.':>10s}  what"
    )
    for part, n, pred, real, what in rows:
        ratio = f"{real / pred:.2f}" if pred and real is not None else "-"
        row = f"{part:10s} {n:>5} {_minutes(pred):>9s} {_minutes(real):>7s} {ratio:>10s}  {what}"
        lines.append(row.rstrip())
    return "\n".join(lines)


def _what(part: str, mine: list[dict], S) -> str:
    p, tasks = S.pretrain, ", ".join(dict.fromkeys(u.get("task", "") for u in mine))
    return {
        "pretrain": f"GPT and LSTM, {p.total_steps:,} updates each of {p.batch_size} x "
        f"{S.model_config().n_ctx}, {p.n_log_checkpoints} log-spaced checkpoints",
        "selection": f"{len(SEARCHED)} rates a Table 5 row, {HELD_OUT:.0%} held out of "
        f"{S.selection_examples or 'all'} training examples of {', '.join(S.selection_tasks)}",
        "finetune": tasks,
        "ablations": f"{', '.join(S.table5_arms[1:])} x {tasks} (the full row: 05-07's runs)",
        "zeroshot": f"{p.n_log_checkpoints} checkpoints a model, "
        f"{S.zero_shot_examples or 'all'} examples a set",
        "transfer": f"n_transfer {S.transfer_at()} on {tasks}",
    }[part]
