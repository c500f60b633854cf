"""A plan as people read it: what each part runs and its predicted minutes (``format_plan``),
and, as a run goes, what each part took beside what it was predicted to take
(``format_outcome``), so that a plan's predictions are checked by every run that follows one."""

from __future__ import annotations

from .plan import PLAN_ARMS


def format_plan(plan: dict) -> str:
    """The plan as a table: each group, what it runs and its predicted minutes."""
    tp, units_ = plan["throughput"], plan["units"]
    rows = [("setup", "load the data, time the loops (and compile)", "", tp["setup_s"])]
    for group in dict.fromkeys(u["group"] for u in units_):
        mine = [u for u in units_ if u["group"] == group]
        rows.append((group, *_describe(group, mine), sum(u["seconds"] for u in mine)))
    lines = [
        f"plan for scale {plan['scale']}: {plan['budget_min']:g} minutes of {tp['device']}",
        f"throughput {tp['how']}:",
        f"  a pre-training update {tp['pretrain_step_s'] * 1e3:,.1f} ms (GPT, L1 "
        f"{tp.get('loss_path', 'fused')}), {tp['lstm_step_s'] * 1e3:,.1f} ms (LSTM); a "
        f"fine-tuning update {tp['ft_step_s'] * 1e3:,.1f} ms + {tp['ft_token_s'] * 1e6:,.3f} ms "
        f"per 1,000 padded tokens, a new length +{tp.get('new_shape_s', 0) * 1e3:,.1f} ms",
        f"  lengths padded to a multiple of {tp.get('pad_multiple', 1)}, attention "
        f"{tp.get('attention', 'sdpa')}",
        f"{'part':14s} {'minutes':>7s}  what",
    ]
    for group, what, detail, seconds in rows:
        lines.append(f"{group:14s} {seconds / 60:7.1f}  {what}")
        lines += [f"{'':24s}{line}" for line in _wrap(detail, 76)]
    verdict = "fits" if plan["fits"] else "OVER THE BUDGET even at the smallest levels"
    lines.append(
        f"{'total':14s} {plan['predicted_s'] / 60:7.1f}  of {plan['budget_min']:g}: {verdict}"
    )
    if plan.get("chosen"):
        lines.append("protocols chosen on held-out training examples: " + "; ".join(
            f"{arm} lr {c['lr']:g}, warm-up {c['warmup']:g}, {c['epochs']} epochs"
            for arm, c in plan["chosen"].items()))  # fmt: skip
    return "\n".join(lines)


def format_outcome(plan: dict) -> str:
    """Each part's predicted and actual minutes so far, and their ratio: how far the plan's
    predictions were from what the run took."""
    rows, done = [], plan["done"]
    lines = [f"{'part':14s} {'units':>5s} {'predicted':>9s} {'took':>7s} {'took/pred.':>10s}"]
    for group in dict.fromkeys(u["group"] for u in plan["units"]):
        mine = [u for u in plan["units"] if u["group"] == group and u["id"] in done]
        if mine:
            pred, took = sum(u["seconds"] for u in mine), sum(done[u["id"]]["wall_s"] for u in mine)
            rows.append((group, len(mine), pred, took))
    rows.append(("all", sum(r[1] for r in rows), sum(r[2] for r in rows), sum(r[3] for r in rows)))
    for group, n, pred, took in rows:
        ratio = f"{took / pred:10.2f}" if pred else f"{'-':>10s}"
        lines.append(f"{group:14s} {n:5d} {pred / 60:9.1f} {took / 60:7.1f} {ratio}")
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
        archs = " and ".join("the LSTM" if x["arch"] == "lstm" else "GPT" for x in mine)
        return (
            f"{archs}, {u['total_steps']:,} updates each (warm-up {u['warmup_steps']:,}), a "
            f"checkpoint every {u['ckpt_interval']:,}, {u['n_log_checkpoints']} log-spaced",
            "",
        )
    if u["kind"] == "zeroshot":
        return f"5 heuristics at {u['checkpoints']} checkpoints of each model", ""
    if u["kind"] == "bench":
        on = "off/on" if len(u["compile"]) > 1 else "off"
        return f"{u['preset']} preset, compile {on}, vs transformers; fine-tuning padding", ""
    if u["kind"] == "selection":
        examples = ", ".join(f"{t} {_count(n)}" for t, n in u["limits"].items())
        return (
            f"{len(mine) // 2} arms x 5 trials (3 rates, then warm-up, then epochs), 15% of the "
            "examples read held out",
            f"train examples read: {examples}; what follows is re-planned with the protocols "
            "chosen",
        )
    tasks = dict.fromkeys((x["task"], _count(x["limit"])) for x in mine)
    detail = "train examples: " + ", ".join(f"{t} {n}" for t, n in tasks)
    if group == "transfer":
        points = sorted({x["n_transfer"] for x in mine})
        evals = dict.fromkeys((x["task"], _count(x["eval_limit"])) for x in mine)
        detail += "; dev: " + ", ".join(f"{t} {n}" for t, n in evals)
        return f"n_transfer {points}, {len(mine)} runs", detail
    if group == "ablations":
        arms = ", ".join(a for a in PLAN_ARMS if any(x["arm"] == a for x in mine))
        return (
            f"{arms} x {len(tasks)} tasks, {len(mine)} runs (the full row: chapters 05-07's)",
            detail,
        )
    return f"{len(mine)} runs (and chapter 04's λ = 0 on {mine[-1]['task']})", detail
