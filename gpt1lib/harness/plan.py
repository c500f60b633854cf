"""A time-budgeted plan of a scale's whole reproduction, run in one process (``plan_run``).

``make record SCALE=small BUDGET=17`` (17 minutes of accelerator time) plans, prints, then runs
the chapters' experiments (``experiments``), their tasks and arms the ``Scale``'s:

* ``pretrain:gpt``: L1 pre-training (§3.1), its updates and log-spaced checkpoints;
* ``finetune``: every task of chapters 05-08, and chapter 04's lambda = 0 (its lambda = 0.5
  run is chapter 05's);
* ``zeroshot``: the §5 heuristics at each log-spaced checkpoint of both models;
* ``transfer``: layer transfer (Figure 2 left) on the scale's tasks, ``n_transfer`` = -1..n_layer;
* ``pretrain:lstm``: the LSTM baseline; ``ablations``: Table 5's four arms over its 8 tasks;
* ``bench``: the speed run (``harness.bench.speed_run``) at the paper preset, compiled and not.

Each part gets predicted seconds from a ``Throughput``: a few timed steps of the model, the
LSTM and fine-tuning on the run's device at the start (``measure``), or, where no such device is
at hand, one ``estimate``d from FLOPs at an assumed MFU, marked as estimated. The scale's own
settings are the most a plan runs; while the total is over the budget, the group whose predicted
minutes over its ``WEIGHTS`` are the largest steps down one level (fewer updates, the next smaller
draw of training examples the bundle holds, fewer transfer points or checkpoints). Epochs stay
the paper's 3. The plan is kept (``results/<scale>/plan.json``) so that a rerun resumes it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..scales import ARMS
from ..tasks import SCORED_BESIDE, get_task
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
#: Pre-training weighs most (everything else starts from it).
WEIGHTS = {
    "pretrain:gpt": 4.0,
    "finetune": 2.0,
    "ablations": 1.5,
    "transfer": 1.0,
    "pretrain:lstm": 1.0,
    "zeroshot": 0.5,
}
CHAPTER = {
    "pretrain:gpt": "03_pretraining",
    "objective": "04_finetuning",
    "zeroshot": "11_zero_shot",
    "pretrain:lstm": "11_zero_shot",  # where chapter 11 pre-trains it first
    "transfer": "10_layer_transfer",
    "ablation": "12_ablations",
    "bench": "appendix_speed",
}
# ---------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Context:
    """What the units' costs are computed from."""

    S: object
    tp: Throughput
    stats: dict
    ladders: dict  # (task, split) -> draws, largest first


def _n(ctx: Context, task: str, split: str, limit) -> int:
    n = ctx.stats[task][split]["n"]
    return n if limit is None else min(limit, n)


def _pick(ctx: Context, task: str, split: str, level: int):
    draws = ctx.ladders[task, split]
    return draws[min(level, len(draws) - 1)]


def _forward_s(ctx: Context, task: str, split: str, n: int) -> float:
    st, tp = ctx.stats[task][split], ctx.tp
    bs = ctx.S.finetune.eval_batch_size
    return (math.ceil(n / bs) * tp.ft_step_s + n * st["tokens"] * tp.ft_token_s) * tp.eval_factor


def finetune_s(ctx: Context, task: str, limit, evals: dict, encoded: set, ratio=1.0) -> float:
    """Predicted seconds of one fine-tuning run: ``limit`` training examples of ``task``, scored
    on ``evals`` (task, split) -> examples each epoch; encodings not yet in ``encoded`` cost."""
    tp, cfg = ctx.tp, ctx.S.finetune
    n = _n(ctx, task, "train", limit)
    st = ctx.stats[task]["train"]
    steps = n // cfg.batch_size * cfg.epochs
    train = steps * tp.ft_step_s + steps * cfg.batch_size * st["tokens"] * 1.1 * tp.ft_token_s
    scored = sum(_forward_s(ctx, t, s, m) for (t, s), m in evals.items()) * cfg.epochs
    encode = 0.0
    for key, m in [((task, "train", limit), n), *((k + (m,), m) for k, m in evals.items())]:
        if key not in encoded:
            encoded.add(key)
            encode += m * ctx.stats[key[0]][key[1]]["encode_s"] * tp.encode_factor
    return (train + scored) * ratio + encode + tp.run_overhead_s


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


def _pretrain_s(ctx: Context, settings: dict, step_s: float) -> float:
    s, S = settings, ctx.S
    evals = s["total_steps"] // s["eval_interval"] + 1
    saves = s["total_steps"] // s["ckpt_interval"] + 1 + s["n_log_checkpoints"] / 3
    eval_s = evals * S.pretrain.eval_batches * step_s * ctx.tp.eval_factor
    return s["total_steps"] * step_s + eval_s + saves * ctx.tp.save_s


def transfer_points(n_layer: int, every: int = 1) -> list[int]:
    """Layer-transfer points: -1 (nothing), 0 (embeddings), every ``every``-th block, all."""
    return sorted({-1, 0, n_layer, *range(every, n_layer + 1, every)})


def _levels(ctx: Context, tasks) -> int:
    return max((len(ctx.ladders[t, "train"]) for t in tasks), default=1)


def _steps_levels(full: int) -> list[int]:
    out, floor = [full], max(10, full // 40)
    while round(out[-1] * 0.85) >= floor:
        out.append(round(out[-1] * 0.85))
    return out


def groups(ctx: Context) -> dict[str, int]:
    """Each group and how many levels it has (level 0: the scale's own settings)."""
    S, tasks = ctx.S, _available(ctx, finetuned(ctx.S))
    n_zs = len(_zeroshot_levels(S))
    return {
        "pretrain:gpt": len(_steps_levels(S.pretrain.total_steps)),
        "finetune": _levels(ctx, tasks),
        "zeroshot": n_zs,
        "transfer": _levels(ctx, _available(ctx, S.transfer_tasks)) + 2,
        "pretrain:lstm": len(_steps_levels(S.pretrain.total_steps)),
        "ablations": _levels(ctx, _available(ctx, S.ablation_tasks)) + len(FEWER_ABLATION_TASKS),
    }


def _available(ctx: Context, tasks) -> list[str]:
    return [t for t in tasks if (t, "train") in ctx.ladders]


def _zeroshot_levels(S) -> list[int]:
    full = S.pretrain.n_log_checkpoints
    return list(dict.fromkeys([full, *(n for n in (7, 5, 3) if n < full)]))


def units(ctx: Context, levels: dict[str, int]) -> list[dict]:
    """Every unit of work at ``levels``, in the order they run, with predicted seconds."""
    S, tp, encoded, out = ctx.S, ctx.tp, set(), []
    n_log = _zeroshot_levels(S)[levels["zeroshot"]]

    def add(uid, group, chapter, seconds, **settings):
        out.append({"id": uid, "group": group, "chapter": chapter, "seconds": seconds, **settings})

    def ft(task, limit, ratio=1.0, eval_split=None, eval_limit=None, extra=()):
        split = eval_split or get_task(task).eval_split
        evals = {(task, split): _n(ctx, task, split, eval_limit)}
        evals |= {
            (o, get_task(o).eval_split): _n(ctx, o, get_task(o).eval_split, None) for o in extra
        }
        return finetune_s(ctx, task, limit, evals, encoded, ratio)

    for arch, group in (("gpt", "pretrain:gpt"), ("lstm", "pretrain:lstm")):
        step_s = tp.pretrain_step_s if arch == "gpt" else tp.lstm_step_s
        steps = _steps_levels(S.pretrain.total_steps)[levels[group]]
        p = pretrain_settings(S, steps, n_log, step_s)
        seconds = _pretrain_s(ctx, p, step_s)
        add(f"pretrain:{arch}", group, CHAPTER[group], seconds, kind="pretrain", arch=arch, **p)
        if arch == "gpt":
            _finetune_units(ctx, levels["finetune"], add, ft)
        seconds = n_log * _zeroshot_s(ctx, step_s)
        add(f"zeroshot:{arch}", "zeroshot", CHAPTER["zeroshot"], seconds, kind="zeroshot",
            arch=arch, checkpoints=n_log)  # fmt: skip
        if arch == "gpt":
            _transfer_units(ctx, levels["transfer"], add, ft)
    ratio, level = tp.lstm_step_s / tp.pretrain_step_s, levels["ablations"]
    top = _levels(ctx, _available(ctx, S.ablation_tasks)) - 1
    tasks = ((S.ablation_tasks, *FEWER_ABLATION_TASKS))[max(0, level - top)]
    for arm in ARMS:
        for task in _available(ctx, tasks):
            limit = _pick(ctx, task, "train", min(level, top))
            r = ratio if arm == "lstm" else 1.0
            add(f"ablation:{arm}:{task}", "ablations", CHAPTER["ablation"], ft(task, limit, r),
                kind="ablation", arm=arm, task=task, limit=limit)  # fmt: skip
    cuda = tp.device != "cpu"
    preset, compiled = ("paper", [False, True]) if cuda else (S.model, [False])
    add("bench", "bench", CHAPTER["bench"], tp.bench_s, kind="bench", preset=preset,
        compile=compiled)  # fmt: skip
    return out


def _finetune_units(ctx: Context, level: int, add, ft) -> None:
    """Chapters 05-08's runs, and chapter 04's lambda = 0 on its task: its lambda = 0.5 run is
    chapter 05's on the same examples (run once; chapter 04 points to it)."""
    for family, tasks in ctx.S.family_tasks.items():
        for task in _available(ctx, tasks):
            limit = _pick(ctx, task, "train", level)
            also = [o for o in SCORED_BESIDE.get(task, ()) if o in ctx.stats]
            add(f"finetune:{task}", "finetune", FAMILY_CHAPTER[family],
                ft(task, limit, extra=also), kind="finetune", task=task, limit=limit,
                also=also)  # fmt: skip
    task = ctx.S.objective_task
    if (task, "train") in ctx.ladders:
        limit = _pick(ctx, task, "train", level)
        add(f"objective:{task}:lambda0.0", "finetune", CHAPTER["objective"], ft(task, limit),
            kind="objective", task=task, limit=limit, lm_coef=0.0)  # fmt: skip


def _transfer_units(ctx: Context, level: int, add, ft) -> None:
    n_layer, tasks = ctx.S.model_config().n_layer, _available(ctx, ctx.S.transfer_tasks)
    top = _levels(ctx, tasks) - 1
    every = {top + 1: 2, top + 2: 4}.get(level, 1)
    for task in tasks:
        limit = _pick(ctx, task, "train", min(level, top))
        eval_limit = (
            _pick(ctx, task, "dev", min(level, top)) if (task, "dev") in ctx.ladders else None
        )
        for k in transfer_points(n_layer, every):
            t = ft(task, limit, eval_split="dev", eval_limit=eval_limit)
            t += _forward_s(ctx, task, "train", ctx.S.transfer_train_examples) * 3
            add(f"transfer:{task}:{k}", "transfer", CHAPTER["transfer"], t, kind="transfer",
                task=task, n_transfer=k, limit=limit, eval_limit=eval_limit)  # fmt: skip


def _zeroshot_s(ctx: Context, step_s: float) -> float:
    """One checkpoint's zero-shot scores, predicted from the forward cost of their tokens."""
    ratio, n, total = step_s / ctx.tp.pretrain_step_s, ctx.S.zero_shot_examples, 0.0
    for task, split, mult in (("cola", "dev", 1), ("cola", "train", 1), ("sst2", "dev", 2)):
        if split in ctx.stats.get(task, {}):
            total += mult * _forward_s(ctx, task, split, _n(ctx, task, split, n))
    for task, split in (("race", "dev"), ("dprd", "test")):
        if split in ctx.stats.get(task, {}):
            total += _forward_s(ctx, task, split, _n(ctx, task, split, n))
    return total * ratio + ctx.tp.save_s / 3


def make_plan(S, tp: Throughput, stats: dict, ladders: dict, budget_min: float) -> dict:
    """The plan for ``budget_min`` minutes: every group at its largest level that fits, shrunk
    one level at a time where its minutes per weight are the most (``WEIGHTS``)."""
    ctx = Context(S, tp, stats, ladders)
    n_levels, levels = groups(ctx), dict.fromkeys(groups(ctx), 0)
    room = budget_min * 60 - tp.setup_s

    def cost(plan_units, group):
        return sum(u["seconds"] for u in plan_units if u["group"] == group)

    planned = units(ctx, levels)
    while sum(u["seconds"] for u in planned) > room:
        can = [g for g in levels if levels[g] < n_levels[g] - 1]
        if not can:
            break  # the smallest plan: over the budget, said so when printed
        worst = max(can, key=lambda g: cost(planned, g) / WEIGHTS[g])
        levels[worst] += 1
        planned = units(ctx, levels)
    total = tp.setup_s + sum(u["seconds"] for u in planned)
    return {
        "scale": S.name,
        "budget_min": budget_min,
        "predicted_s": total,
        "fits": total <= budget_min * 60,
        "throughput": asdict(tp),
        "levels": levels,
        "units": planned,
        "done": {},
    }


def format_plan(plan: dict) -> str:
    """The plan as a table: each group, what it runs and its predicted minutes."""
    tp, units_ = plan["throughput"], plan["units"]
    rows = [("setup", "load the data, time the steps (and compile)", tp["setup_s"], "")]
    for group in dict.fromkeys(u["group"] for u in units_):
        mine = [u for u in units_ if u["group"] == group]
        rows.append((group, *_describe(group, mine), sum(u["seconds"] for u in mine)))
        rows[-1] = (rows[-1][0], rows[-1][1], rows[-1][3], rows[-1][2])
    lines = [
        f"plan for scale {plan['scale']}: {plan['budget_min']:g} minutes of {tp['device']}",
        f"throughput {tp['how']}:",
        f"  a pre-training update {tp['pretrain_step_s'] * 1e3:,.1f} ms (GPT), "
        f"{tp['lstm_step_s'] * 1e3:,.1f} ms (LSTM); a fine-tuning update "
        f"{tp['ft_step_s'] * 1e3:,.1f} ms + {tp['ft_token_s'] * 1e6:,.3f} ms per 1,000 tokens",
        f"{'part':14s} {'minutes':>7s}  what",
    ]
    for group, what, seconds, detail in rows:
        lines.append(f"{group:14s} {seconds / 60:7.1f}  {what}")
        lines += [f"{'':24s}{line}" for line in _wrap(detail, 76)]
    verdict = "fits" if plan["fits"] else "OVER THE BUDGET even at the smallest levels"
    lines.append(
        f"{'total':14s} {plan['predicted_s'] / 60:7.1f}  of {plan['budget_min']:g}: {verdict}"
    )
    return "\n".join(lines)


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split(" ") if text else []:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


def _count(limit) -> str:
    return "all" if limit is None else f"{limit:,}"


def _describe(group: str, mine: list[dict]) -> tuple[str, str]:
    """A group's summary line and its details (the examples of each task)."""
    u = mine[0]
    if u["kind"] == "pretrain":
        return (
            f"{u['total_steps']:,} updates (warm-up {u['warmup_steps']:,}), a checkpoint every "
            f"{u['ckpt_interval']:,}, {u['n_log_checkpoints']} log-spaced",
            "",
        )
    if u["kind"] == "zeroshot":
        return f"4 heuristics at {u['checkpoints']} checkpoints of each model", ""
    if u["kind"] == "bench":
        on = "off/on" if len(u["compile"]) > 1 else "off"
        return f"{u['preset']} preset, compile {on}, vs transformers; fine-tuning padding", ""
    tasks = dict.fromkeys((x["task"], _count(x["limit"])) for x in mine)
    detail = "train examples: " + ", ".join(f"{t} {n}" for t, n in tasks)
    if group == "transfer":
        points = sorted({x["n_transfer"] for x in mine})
        evals = dict.fromkeys((x["task"], _count(x["eval_limit"])) for x in mine)
        detail += "; dev: " + ", ".join(f"{t} {n}" for t, n in evals)
        return f"n_transfer {points}, {len(mine)} runs of 3 epochs", detail
    if group == "ablations":
        return f"4 arms x {len(tasks)} tasks, {len(mine)} runs of 3 epochs", detail
    return f"{len(mine)} runs of 3 epochs (and chapter 04's λ = 0 on {mine[-1]['task']})", detail
