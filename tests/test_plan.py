"""The budgeted plan's shape (issue 27), on the data's sizes alone: no run, no GPU.

The sizes are the real training and evaluation sets' counts with the fixtures' lengths; the
throughput is what ``throughput.estimate`` gives for an H100 at the small scale (``RECORDED``).
"""

from dataclasses import replace

import pytest

from gpt1lib.harness import plan, throughput
from gpt1lib.harness.plan_report import format_outcome, format_plan
from gpt1lib.scales import SCALES
from gpt1lib.selection import ARMS, best, chosen, next_trial, with_chosen
from gpt1lib.tokenizer import GPT1Tokenizer

#: (train, eval split's) examples of the real sets (GLUE dev; RACE's test, SNLI's test).
SIZES = {
    "sst2": (67_349, 872), "cola": (8_551, 1_043), "mnli_m": (392_702, 9_815),
    "mnli_mm": (None, 9_832), "snli": (549_367, 9_824), "qnli": (104_743, 5_463),
    "rte": (2_490, 277), "mrpc": (3_668, 408), "stsb": (5_749, 1_500), "qqp": (363_846, 40_430),
    "race": (87_866, 4_934), "race_m": (None, 1_436), "race_h": (None, 3_498),
    "story_cloze": (936, 935), "dprd": (None, 564),
}  # fmt: skip


@pytest.fixture(scope="module")
def sizes():
    from gpt1lib.corpus import load_documents

    S = SCALES["small"]
    tok = GPT1Tokenizer.train(texts=load_documents("fixture").texts, n_merges=300)
    stats = throughput.task_stats(S, "fixture", tok)
    for task, splits in stats.items():
        train, evals = SIZES.get(task, (1_000, 1_000))
        for split, st in splits.items():
            st["n"] = train if split == "train" and train else evals
            st["lengths"] = [min(512, 8 * n) for n in st["lengths"]]  # real lengths: longer
            st["tokens"] *= 8
    ladders = throughput.ladders(S, "fixture", stats)
    return stats, ladders


def _plan(sizes, budget=22.0, S=None, **kw):
    S = S or SCALES["small"]
    tp = throughput.estimate(S, 40_478, "NVIDIA H100 80GB HBM3")
    return plan.make_plan(S, tp, *sizes, budget, **kw)


def _units(made, kind):
    return [u for u in made["units"] if u["kind"] == kind]


@pytest.mark.parametrize("budget", [5.0, 22.0, 120.0])
def test_the_lstm_pretrains_as_long_as_the_transformer(sizes, budget):
    gpt, lstm = _units(_plan(sizes, budget), "pretrain")
    assert (gpt["arch"], lstm["arch"]) == ("gpt", "lstm")
    assert gpt["total_steps"] == lstm["total_steps"] and gpt["warmup_steps"] == lstm["warmup_steps"]


def test_the_full_row_is_chapters_05_07s_run_and_the_others_train_on_its_examples(sizes):
    made = _plan(sizes)
    finetuned = {u["task"]: u["limit"] for u in _units(made, "finetune")}
    ablations = _units(made, "ablation")
    assert ablations and not [u for u in ablations if u["arm"] == "full"]
    assert {u["arm"] for u in ablations} == {"no_pretraining", "no_aux_lm", "lstm"}
    assert all(u["limit"] == finetuned[u["task"]] for u in ablations)  # paired with the full row


def test_whole_sets_stay_whole_and_transfer_and_zero_shot_keep_their_sizes(sizes):
    for budget in (8.0, 22.0):
        made = _plan(sizes, budget)
        finetuned = {u["task"]: u["limit"] for u in _units(made, "finetune")}
        assert all(finetuned[t] is None for t in ("cola", "stsb", "mrpc", "rte"))
        mnli = [u for u in _units(made, "transfer") if u["task"] == "mnli_m"]
        assert mnli and all((u["limit"], u["eval_limit"]) == (2_500, 2_000) for u in mnli)
        assert {0, 12} <= {u["n_transfer"] for u in mnli}  # embeddings only, every block
        assert all(u["checkpoints"] >= 3 for u in _units(made, "zeroshot"))
    assert SCALES["small"].zero_shot_examples >= 2_000
    assert SCALES["small"].pretrain.log_from == 50


def test_the_selection_runs_first_for_every_arm_and_what_follows_is_planned_again(sizes):
    made = _plan(sizes, 40.0)
    ids = [u["id"] for u in made["units"]]
    select = [i for i in ids if i.startswith("select:")]
    assert select == [f"select:{a}:{s}" for a in ARMS for s in ("rate", "schedule")]
    assert ids.index(select[-1]) < ids.index("finetune:sst2")
    assert ids.index("pretrain:lstm") < ids.index(select[0])  # the LSTM arm needs its model
    # part-way: what ran counts as it took, settled groups keep their levels
    actual = {
        u["id"]: u["seconds"] for u in made["units"] if u["group"] in ("pretrain", "selection")
    }
    actual["pretrain:gpt"] -= 30.0  # it ran faster than predicted
    fixed = {g: made["levels"][g] for g in ("pretrain", "selection")}
    slower = with_chosen(SCALES["small"], dict.fromkeys(ARMS, {"lr": 1e-3, "warmup": 0.1,
                                                             "epochs": 6}))  # fmt: skip
    again = _plan(sizes, 40.0, S=slower, fixed=fixed, actual=actual)
    assert {g: again["levels"][g] for g in fixed} == fixed
    assert again["predicted_s"] == pytest.approx(
        again["throughput"]["setup_s"]
        + sum(actual.get(u["id"], u["seconds"]) for u in again["units"])
    )
    assert again["fits"] and again["levels"] != made["levels"]  # 6 epochs: planned anew
    assert "GPT and the LSTM" in format_plan(again)
    done = {k: {"wall_s": v} for k, v in actual.items()}
    outcome = format_outcome({**again, "done": done}).splitlines()
    assert [line.split()[0] for line in outcome] == ["part", "pretrain", "selection", "all"]
    assert outcome[2].split()[1:] == ["8", *outcome[2].split()[2:3] * 2, "1.00"]


def test_a_batch_shape_costs_its_set_up_once_and_lengths_are_padded(sizes):
    S = SCALES["small"]
    tp = replace(throughput.estimate(S, 40_478, "NVIDIA H100 80GB HBM3"), new_shape_s=1.0)
    costs = plan.Costs(S, tp, *sizes)
    evals = {("sst2", "dev"): (None, 872)}
    first = costs.finetune("sst2", 1_000, evals)
    second = costs.finetune("sst2", 1_000, evals)
    assert first - second >= 1.0 and costs.seen  # the shapes met the first time only
    lengths = sizes[0]["sst2"]["train"]["lengths"]  # each example's, rounded up to 64
    padded = sum(-(-n // 64) * 64 for n in lengths) / len(lengths)
    assert costs.padded("sst2", "train") == pytest.approx(padded)
    cpu = plan.Costs(S, replace(tp, pad_multiple=1), *sizes)  # the batch's longest
    assert cpu.padded("sst2", "train") == pytest.approx(1.1 * sizes[0]["sst2"]["train"]["tokens"])


def test_the_selection_searches_the_rate_then_the_warm_up_then_the_epochs():
    def row(value, **settings):
        return {"value": value, "config": settings}

    first = {"warmup": 0.002, "epochs": 3}
    rows = []
    for value in (30, 40, 35):
        rows.append(row(value, **next_trial("rate", rows)))
    assert [r["config"]["lr"] for r in rows] == [6.25e-5, 2.5e-4, 1e-3]
    assert next_trial("rate", rows) is None and best(rows) == {"lr": 2.5e-4, **first}
    trial = next_trial("schedule", rows)
    assert trial == {"lr": 2.5e-4, "warmup": 0.1, "epochs": 3}
    rows.append(row(45, **trial))  # the longer warm-up wins: the epochs are tried with it
    assert next_trial("schedule", rows) == {"lr": 2.5e-4, "warmup": 0.1, "epochs": 6}
    rows.append(row(44, **next_trial("schedule", rows)))
    assert next_trial("schedule", rows) is None and len(rows) == 5
    records = [{**r, "metric": "selection_score", "config": {**r["config"], "arm": "full"}}
               for r in rows]  # fmt: skip
    assert chosen(records) == {"full": {"lr": 2.5e-4, "warmup": 0.1, "epochs": 3}}
    picked = {"full": {"lr": 2.5e-4, "warmup": 0.1, "epochs": 6}}
    S = with_chosen(SCALES["small"], picked | {"lstm": {"lr": 1e-3, "warmup": 0.002, "epochs": 3}})
    assert (S.finetune.lr, S.finetune.epochs) == (2.5e-4, 6)
    assert S.finetune_for("lstm").lr == 1e-3 and S.finetune_for("no_aux_lm").lr == 2.5e-4
    with pytest.raises(ValueError, match="rate stage first"):
        best([])
