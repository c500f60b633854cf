"""A time-budgeted plan of a scale's whole reproduction, run in one process (``plan_run``).

``make record SCALE=small BUDGET=22`` (22 minutes of accelerator time) plans, prints, then runs
the chapters' experiments (``experiments``), their tasks and arms the ``Scale``'s:

* ``pretrain``: L1 pre-training (§3.1) of the transformer and of Table 5's LSTM, for as many
  updates each, with their log-spaced checkpoints;
* ``selection``: where the scale asks for it (``Scale.selection_tasks``), every arm's
  fine-tuning protocol chosen on examples held out from train (``selection``): the rate, then
  the warm-up and epochs; what follows runs with the chosen protocols;
* ``finetune``: every task of chapters 05-08 (``Scale.whole_tasks`` on all their training
  examples), and chapter 04's lambda = 0 (its lambda = 0.5 run is chapter 05's);
* ``zeroshot``: the §5 heuristics at each log-spaced checkpoint of both models;
* ``transfer``: layer transfer (Figure 2 left), ``n_transfer`` = -1..n_layer, on
  ``Scale.transfer_limits`` examples;
* ``ablations``: Table 5's other three arms on the examples chapters 05-07 fine-tuned on (its
  full row IS chapters 05-07's runs, not run again);
* ``bench``: the speed run (``harness.bench.speed_run``) at the paper preset, compiled and not.

Each unit gets predicted seconds from a ``Throughput`` (measured on the run's device at the
start, first-seen batch shapes included, or estimated and marked so) and the data's sizes. The
scale's own settings are the most a plan runs; while the total is over the budget, the group
whose predicted minutes over its ``WEIGHTS`` are the largest steps down one level (fewer
updates, a smaller draw of examples, fewer transfer points, tasks or checkpoints). The parts
after the selection are predicted with the scale's protocol and planned again once the protocol
is chosen (``make_plan``'s ``fixed`` and ``actual``). The plan is kept
(``results/<scale>/plan.json``) so that a rerun resumes it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field, replace

from ..experiments import ARM_MODEL
from ..scales import ARMS
from ..selection import HELD_OUT, STAGE_EPOCHS
from ..tasks import SCORED_BESIDE, get_task
from ..transforms import padded_length
from .throughput import Throughput, finetuned

#: The chapter of each family's tasks (their records' file).
FAMILY_CHAPTER = {
    "classification": "05_classification",
    "entailment": "06_entailment",
    "similarity": "07_similarity",
    "multiple_choice": "08_multiple_choice",
}
#: Table 5's columns a plan keeps when even the smallest draws do not fit: the cpu run's four,
#: then two (each of §5's findings still has a task on each side of it).
FEWER_ABLATION_TASKS = (("cola", "sst2", "mrpc", "rte"), ("sst2", "rte"))
#: What a short budget shrinks first: the group with the most predicted minutes per weight.
#: Pre-training weighs most (everything else starts from it), then Table 5's eight tasks (its
#: average is the first finding's number).
WEIGHTS = {
    "pretrain": 4.0,
    "ablations": 3.0,
    "finetune": 2.0,
    "selection": 1.0,
    "transfer": 1.0,
    "zeroshot": 1.0,
}
#: The fewest examples a plan trains a task on (where the task has them), and the fewest a
#: selection task is read with (15% of them held out: a mean over 150 examples a task).
FINETUNE_FLOOR, SELECTION_FLOOR = 1_250, 1_000
CHAPTER = {
    "pretrain:gpt": "03_pretraining",
    "pretrain:lstm": "11_zero_shot",  # where chapter 11 pre-trains it first
    "selection": "12_ablations",
    "objective": "04_finetuning",
    "zeroshot": "11_zero_shot",
    "transfer": "10_layer_transfer",
    "ablation": "12_ablations",
    "bench": "appendix_speed",
}
#: Table 5's arms a plan runs: the full row is chapters 05-07's fine-tuning.
PLAN_ARMS = tuple(a for a in ARMS if a != "full")
#: The zero-shot sets scored at each checkpoint: (task, split, sequences an example).
ZERO_SHOT_SETS = (("cola", "dev", 1), ("cola", "train", 1), ("sst2", "dev", 2),
                  ("sst2", "train", 2), ("race", "dev", 4), ("dprd", "test", 2))  # fmt: skip


# ---------------------------------------------------------------- costs


@dataclass
class Costs:
    """A plan's predicted seconds, unit by unit in the order they run: an encoding or a batch
    shape costs where it is met first (``encoded``, ``seen``)."""

    S: object
    tp: Throughput
    stats: dict
    ladders: dict  # (task, split) -> draws, largest first
    encoded: set = field(default_factory=set)
    seen: set = field(default_factory=set)

    def n(self, task: str, split: str, limit) -> int:
        n = self.stats[task][split]["n"]
        return n if limit is None else min(limit, n)

    def padded(self, task: str, split: str) -> float:
        """Tokens an example of the split takes in a batch: its sequences, padded (to a multiple
        on a GPU; on a CPU to the batch's longest, about 10% over the mean)."""
        st, m = self.stats[task][split], self.tp.pad_multiple
        if m == 1 or "lengths" not in st:
            return st["tokens"] * 1.1
        n_ctx = self.S.model_config().n_ctx
        return st["n_seq"] * statistics.mean(padded_length(n, m, n_ctx) for n in st["lengths"])

    def shapes(self, arch: str, task: str, split: str, rows: int) -> float:
        """The set-up of the batch shapes a pass over the split meets for the first time."""
        st, m, n_ctx = self.stats[task][split], self.tp.pad_multiple, self.S.model_config().n_ctx
        lengths = {padded_length(n, m, n_ctx) for n in st.get("lengths", [])} if m > 1 else set()
        new = {(arch, rows * st.get("n_seq", 1), n) for n in lengths} - self.seen
        self.seen |= new
        return len(new) * self.tp.new_shape_s

    def encode(self, task: str, split: str, limit) -> float:
        key = (task, split, limit)
        if key in self.encoded:
            return 0.0
        self.encoded.add(key)
        m = self.n(task, split, limit)
        return m * self.stats[task][split]["encode_s"] * self.tp.encode_factor

    def scoring(self, task: str, split: str, n: int) -> float:
        """Seconds to score ``n`` examples once (no set-up)."""
        tp, bs = self.tp, self.S.finetune.eval_batch_size
        return math.ceil(n / bs) * tp.eval_step_s + n * self.padded(task, split) * tp.eval_token_s

    def finetune(self, task, limit, evals: dict, cfg=None, arch: str = "gpt", ratio=1.0,
                 scored_train: int = 0) -> float:  # fmt: skip
        """One fine-tuning run: ``limit`` training examples of ``task`` with ``cfg`` (None: the
        scale's), scored each epoch on ``evals`` ((task, split) -> (limit, examples)) and on
        ``scored_train`` training examples; ``ratio``: the model's cost over the GPT's."""
        tp, cfg = self.tp, cfg or self.S.finetune
        n, bs = self.n(task, "train", limit), cfg.batch_size
        steps = n // bs * cfg.epochs
        run = steps * (tp.ft_step_s + bs * self.padded(task, "train") * tp.ft_token_s)
        run += self.shapes(arch, task, "train", bs) + self.encode(task, "train", limit)
        run += self.scoring(task, "train", scored_train) * cfg.epochs
        for (t, s), (lim, m) in evals.items():
            run += self.scoring(t, s, m) * cfg.epochs + self.encode(t, s, lim)
            run += self.shapes(arch, t, s, self.S.finetune.eval_batch_size)
        return run * ratio + tp.run_overhead_s


def _pick(ctx: Costs, task: str, split: str, level: int):
    draws = ctx.ladders[task, split]
    return draws[min(level, len(draws) - 1)]


def pretrain_settings(S, steps: int, n_log: int, tp_step_s: float) -> dict:
    """The scale's pre-training at ``steps`` updates: warm-up scaled with it, a resumable
    checkpoint about every 2 minutes, about 8 validations, ``n_log`` log-spaced checkpoints."""
    full = S.pretrain
    return {
        "total_steps": steps,
        "warmup_steps": max(1, round(full.warmup_steps * steps / (full.total_steps or steps))),
        "ckpt_interval": max(1, min(steps, int(120 / max(tp_step_s, 1e-6)))),
        "eval_interval": max(1, min(full.eval_interval, steps // 8)),
        "n_log_checkpoints": n_log,
    }


def _pretrain_s(ctx: Costs, s: dict, step_s: float, start_s: float) -> float:
    """The loop's start (compiling), its updates, validations (a forward pass: a third of an
    update a batch) and checkpoints (a log-spaced one holds no optimiser: a third)."""
    evals = s["total_steps"] // s["eval_interval"] + 1
    saves = s["total_steps"] // s["ckpt_interval"] + 1 + s["n_log_checkpoints"] / 3
    eval_s = evals * ctx.S.pretrain.eval_batches * step_s / 3
    return start_s + s["total_steps"] * step_s + eval_s + saves * ctx.tp.save_s


def transfer_points(n_layer: int, every: int = 1) -> list[int]:
    """Layer-transfer points: -1 (nothing), 0 (embeddings), every ``every``-th block, all."""
    return sorted({-1, 0, n_layer, *range(every, n_layer + 1, every)})


def _steps_levels(full: int) -> list[int]:
    out, floor = [full], max(10, full // 40)
    while round(out[-1] * 0.85) >= floor:
        out.append(round(out[-1] * 0.85))
    return out


def _available(ctx: Costs, tasks) -> list[str]:
    return [t for t in tasks if (t, "train") in ctx.ladders]


def _floored(draws: list, n: int, floor: int, top: int | None = None) -> list:
    """``draws`` (largest first, None: all ``n``) of at most ``top`` and at least ``floor``
    examples, or the largest of them where none is that large."""
    fit = [d for d in draws if top is None or (d or n) <= top]
    return [d for d in fit if (d or n) >= floor] or fit[:1] or [top]


def _draws(ctx: Costs, task: str) -> list:
    """A fine-tuned task's training draws, largest first: all of them for a whole task."""
    if task in ctx.S.whole_tasks:
        return [None]
    return _floored(ctx.ladders[task, "train"], ctx.stats[task]["train"]["n"], FINETUNE_FLOOR)


def _selection_draws(ctx: Costs, task: str) -> list:
    """The selection's draws of a task: at most ``Scale.selection_examples``."""
    n, top = ctx.stats[task]["train"]["n"], ctx.S.selection_examples
    return _floored(ctx.ladders[task, "train"], n, SELECTION_FLOOR, top)


def _transfer_levels(S) -> list[tuple[tuple[str, ...], int]]:
    """(tasks, every k-th block) from the most to the least: every block of every task first."""
    tasks = tuple(S.transfer_tasks)
    return [(tasks, 1), (tasks, 2), *((tasks[:1], k) for k in (1, 2, 4) if len(tasks) > 1)]


def _zeroshot_levels(S) -> list[int]:
    """Log-spaced checkpoints: the scale's, then fewer, down to 6 (a curve's points)."""
    full = S.pretrain.n_log_checkpoints
    return list(dict.fromkeys([full, *(n for n in (8, 6) if n < full)]))


def groups(ctx: Costs) -> dict[str, int]:
    """Each group and how many levels it has (level 0: the scale's own settings)."""
    S, tasks = ctx.S, _available(ctx, finetuned(ctx.S))
    out = {"pretrain": len(_steps_levels(S.pretrain.total_steps))}
    if sel := _available(ctx, S.selection_tasks):
        out["selection"] = max(len(_selection_draws(ctx, t)) for t in sel)
    out["finetune"] = max((len(_draws(ctx, t)) for t in tasks), default=1)
    out["zeroshot"] = len(_zeroshot_levels(S))
    out["transfer"] = len(_transfer_levels(S))
    out["ablations"] = 1 + len(FEWER_ABLATION_TASKS)
    return out


# ---------------------------------------------------------------- the units


def units(ctx: Costs, levels: dict[str, int]) -> list[dict]:
    """Every unit of work at ``levels``, in the order they run, with predicted seconds."""
    S, tp, out = ctx.S, ctx.tp, []
    ctx.encoded.clear()
    ctx.seen.clear()
    n_log = _zeroshot_levels(S)[levels["zeroshot"]]
    steps = _steps_levels(S.pretrain.total_steps)[levels["pretrain"]]
    ratio = tp.lstm_ft_ratio  # an LSTM fine-tuning's time over the transformer's

    def add(uid, group, chapter, seconds, **settings):
        out.append({"id": uid, "group": group, "chapter": chapter, "seconds": seconds, **settings})

    for arch in ("gpt", "lstm"):  # as many updates each (Table 5's LSTM row)
        step_s, start_s = (tp.pretrain_step_s, tp.pretrain_start_s) if arch == "gpt" else (
            tp.lstm_step_s, tp.lstm_start_s)  # fmt: skip
        p = pretrain_settings(S, steps, n_log, step_s)
        add(f"pretrain:{arch}", "pretrain", CHAPTER[f"pretrain:{arch}"],
            _pretrain_s(ctx, p, step_s, start_s), kind="pretrain", arch=arch, **p)  # fmt: skip
    if "selection" in levels:
        _selection_units(ctx, levels["selection"], ratio, add)
    limits = _finetune_units(ctx, levels["finetune"], add)
    for arch in ("gpt", "lstm"):  # the LSTM's forward to the full logits: as its LM update
        seconds = n_log * _zeroshot_s(ctx, arch, 1.0 if arch == "gpt" else
                                      tp.lstm_step_s / tp.pretrain_step_s)  # fmt: skip
        add(f"zeroshot:{arch}", "zeroshot", CHAPTER["zeroshot"], seconds, kind="zeroshot",
            arch=arch, checkpoints=n_log)  # fmt: skip
    _transfer_units(ctx, levels["transfer"], add)
    tasks = (S.ablation_tasks, *FEWER_ABLATION_TASKS)[levels["ablations"]]
    for arm in PLAN_ARMS:
        cfg = S.finetune_for(arm)
        for task in _available(ctx, tasks):
            split = get_task(task).eval_split
            evals = {(task, split): (None, ctx.n(task, split, None))}
            lstm = arm == "lstm"
            seconds = ctx.finetune(task, limits[task], evals, cfg, "lstm" if lstm else "gpt",
                                   ratio if lstm else 1.0)  # fmt: skip
            add(f"ablation:{arm}:{task}", "ablations", CHAPTER["ablation"], seconds,
                kind="ablation", arm=arm, task=task, limit=limits[task])  # fmt: skip
    cuda = tp.device != "cpu"
    preset, compiled = ("paper", [False, True]) if cuda else (S.model, [False])
    add("bench", "bench", CHAPTER["bench"], tp.bench_s, kind="bench", preset=preset,
        compile=compiled)  # fmt: skip
    return out


def _selection_units(ctx: Costs, level: int, ratio: float, add) -> None:
    """Each arm's two stages (``selection.STAGE_EPOCHS``: the rates, then the warm-up and the
    epochs), on the selection tasks' draws at ``level``."""
    S = ctx.S
    tasks = _available(ctx, S.selection_tasks)
    limits = {t: _selection_draws(ctx, t)[min(level, len(_selection_draws(ctx, t)) - 1)]
              for t in tasks}  # fmt: skip
    for arm in ARMS:
        arch = ARM_MODEL[arm]
        r = ratio if arch == "lstm" else 1.0
        for stage, runs in STAGE_EPOCHS.items():
            seconds = 0.0
            for task in tasks:
                n = ctx.n(task, "train", limits[task])
                fit, held = n - int(n * HELD_OUT), int(n * HELD_OUT)
                for e in runs:
                    cfg = replace(S.finetune_for(arm), epochs=e)
                    seconds += ctx.finetune(task, fit, {(task, "train"): (limits[task], held)},
                                            cfg, arch, r)  # fmt: skip
            add(f"select:{arm}:{stage}", "selection", CHAPTER["selection"], seconds,
                kind="selection", arm=arm, stage=stage, limits=limits)  # fmt: skip


def _finetune_units(ctx: Costs, level: int, add) -> dict:
    """Chapters 05-08's runs, and chapter 04's lambda = 0 on its task: its lambda = 0.5 run is
    chapter 05's on the same examples (run once; chapter 04 points to it). Returns each task's
    training draw (Table 5's other rows train on the same)."""
    limits = {}
    for family, tasks in ctx.S.family_tasks.items():
        for task in _available(ctx, tasks):
            limits[task] = limit = _draws(ctx, task)[min(level, len(_draws(ctx, task)) - 1)]
            also = [o for o in SCORED_BESIDE.get(task, ()) if o in ctx.stats]
            evals = {(t, get_task(t).eval_split): (None, ctx.n(t, get_task(t).eval_split, None))
                     for t in (task, *also)}  # fmt: skip
            add(f"finetune:{task}", "finetune", FAMILY_CHAPTER[family],
                ctx.finetune(task, limit, evals), kind="finetune", task=task, limit=limit,
                also=also)  # fmt: skip
    task = ctx.S.objective_task
    if task in limits:
        split = get_task(task).eval_split
        evals = {(task, split): (None, ctx.n(task, split, None))}
        add(f"objective:{task}:lambda0.0", "finetune", CHAPTER["objective"],
            ctx.finetune(task, limits[task], evals), kind="objective", task=task,
            limit=limits[task], lm_coef=0.0)  # fmt: skip
    return limits


def _transfer_units(ctx: Costs, level: int, add) -> None:
    S = ctx.S
    tasks, every = _transfer_levels(S)[level]
    for task in _available(ctx, tasks):
        limit, eval_limit = S.transfer_limits.get(task, (_pick(ctx, task, "train", 0), None))
        evals = {(task, "dev"): (eval_limit, ctx.n(task, "dev", eval_limit))}
        for k in transfer_points(S.model_config().n_layer, every):
            seconds = ctx.finetune(task, limit, evals, scored_train=S.transfer_train_examples)
            add(f"transfer:{task}:{k}", "transfer", CHAPTER["transfer"], seconds, kind="transfer",
                task=task, n_transfer=k, limit=limit, eval_limit=eval_limit)  # fmt: skip


def _zeroshot_s(ctx: Costs, arch: str, ratio: float) -> float:
    """One checkpoint's zero-shot scores: the forward passes of their padded tokens, in
    batches of a scoring batch's tokens, and the shapes first met."""
    tp, S, total = ctx.tp, ctx.S, 0.0
    n_ctx = S.model_config().n_ctx
    for task, split, seqs in ZERO_SHOT_SETS:
        if split not in ctx.stats.get(task, {}):
            continue
        n = ctx.n(task, split, S.zero_shot_examples) * seqs
        tokens = n * ctx.padded(task, split) / ctx.stats[task][split].get("n_seq", 1)
        batches = math.ceil(tokens / (32_768 if tp.pad_multiple > 1 else 64 * n_ctx))
        total += batches * tp.eval_step_s + tokens * tp.zs_token_s
        total += ctx.shapes(f"zs:{arch}", task, split, 1)
    return total * ratio + tp.save_s / 3


# ---------------------------------------------------------------- the plan


def make_plan(S, tp: Throughput, stats: dict, ladders: dict, budget_min: float, *,
              fixed: dict[str, int] | None = None, actual: dict[str, float] | None = None,
              ) -> dict:  # fmt: skip
    """The plan for ``budget_min`` minutes: every group at its largest level that fits, shrunk
    one level at a time where its minutes per weight are the most (``WEIGHTS``). ``fixed``:
    groups whose level is settled (already run); ``actual``: the seconds units took, counted
    instead of their predictions (a plan made again part-way)."""
    ctx, actual = Costs(S, tp, stats, ladders), actual or {}
    n_levels = groups(ctx)
    levels = {g: (fixed or {}).get(g, 0) for g in n_levels}

    def total(planned) -> float:
        return tp.setup_s + sum(actual.get(u["id"], u["seconds"]) for u in planned)

    def cost(planned, group) -> float:
        return sum(u["seconds"] for u in planned if u["group"] == group and u["id"] not in actual)

    planned = units(ctx, levels)
    while total(planned) > budget_min * 60:
        can = [g for g in levels if levels[g] < n_levels[g] - 1 and g not in (fixed or {})]
        if not can:
            break  # the smallest plan: over the budget, said so when printed
        worst = max(can, key=lambda g: cost(planned, g) / WEIGHTS[g])
        levels[worst] += 1
        planned = units(ctx, levels)
    return {
        "scale": S.name,
        "budget_min": budget_min,
        "predicted_s": total(planned),
        "fits": total(planned) <= budget_min * 60,
        "throughput": asdict(tp),
        "levels": levels,
        "units": planned,
        "done": {},
    }
