"""The recorded run's recipe (issue 32): every unit a scale runs, and its time predicted from
measured rates, on the data's sizes alone: no run, no GPU.

``REAL`` holds the sizes ``recipe.sizes`` read from the small bundle of ../shared/data
(2026-11-26): each split's examples, sequences an example and padded tokens an example (lengths
rounded up to 64, as on a GPU).
"""

import pytest

from gpt1lib.choice import RATES, TIE_RULE, choose
from gpt1lib.harness import recipe
from gpt1lib.scales import SCALES
from gpt1lib.selection import HELD_OUT, chosen, with_chosen

REAL = {
    ("cola", "dev"): (1043, 1, 64), ("cola", "train"): (8551, 1, 64),
    ("dprd", "test"): (564, 2, 128), ("mnli_m", "dev"): (9815, 1, 67.84),
    ("mnli_m", "train"): (10000, 1, 68.48), ("mnli_mm", "dev"): (9832, 1, 67.2),
    ("mrpc", "dev"): (408, 2, 151.04), ("mrpc", "train"): (3668, 2, 148.48),
    ("qnli", "dev"): (5463, 1, 74.88), ("qnli", "train"): (8999, 1, 72.32),
    ("qqp", "dev"): (1000, 2, 128), ("qqp", "train"): (8999, 2, 130.56),
    ("race", "dev"): (4887, 4, 1582.08), ("race", "test"): (4934, 4, 1547.52),
    ("race", "train"): (87866, 4, 1534.08), ("race_h", "test"): (3498, 4, 1623.68),
    ("race_m", "test"): (1436, 4, 1237.12), ("rte", "dev"): (277, 1, 90.24),
    ("rte", "train"): (2490, 1, 98.56), ("snli", "test"): (9824, 1, 64),
    ("snli", "train"): (8999, 1, 64), ("sst2", "dev"): (872, 1, 64),
    ("sst2", "train"): (67349, 1, 64), ("story_cloze", "test"): (935, 2, 134.4),
    ("story_cloze", "train"): (936, 2, 132.48), ("stsb", "dev"): (1500, 2, 129.28),
    ("stsb", "train"): (5749, 2, 128),
}  # fmt: skip
SIZES = {k: {"n": n, "seqs": s, "tokens": t} for k, (n, s, t) in REAL.items()}
TASKS = {t for t, _ in REAL} - {"dprd"}
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def small():
    S = SCALES["small"]
    plan = recipe.units(S, TASKS)
    rates, how = recipe.rates_for("small", H100)
    return S, plan, rates, recipe.predict(plan, S, rates, SIZES), how


def _of(plan, kind):
    return [u for u in plan if recipe.kind(u) == kind]


def test_the_small_recipe_fits_one_lease_on_an_h100(small):
    S, plan, rates, total, how = small
    assert how == "H100, measured (small scale)"
    assert total / 60 <= 12.5  # issue 43: of a lease's 15 minutes, start and copies beside
    parts = {recipe.PART[recipe.kind(u)] for u in plan}
    assert parts == set(recipe.PART.values()) and all(u["seconds"] > 0 for u in plan)
    table = recipe.format_units(plan, S, how, rates["setup_s"])
    assert f"{total / 60:.1f}" in table.splitlines()[-1] and "setup" in table
    assert all(source for _, source in recipe.RATES["small", "H100"].values())  # each says where


def test_the_small_recipe_holds_what_the_findings_need(small):
    S, plan, *_ = small
    gpt, lstm = _of(plan, "pretrain")
    assert (gpt["arch"], lstm["arch"]) == ("gpt", "lstm") and S.pretrain.total_steps >= 4_000
    assert S.pretrain.n_log_checkpoints >= 6 and S.zero_shot_examples >= 1_000
    assert {u["arch"] for u in _of(plan, "zeroshot")} == {"gpt", "lstm"}
    for task in ("cola", "stsb", "mrpc", "rte", "story_cloze"):  # whole
        assert S.limits_for(task) == {"limit": None, "eval_limit": None}
    for task in ("sst2", "mnli_m", "snli", "qnli", "qqp", "race"):
        assert S.limits_for(task)["limit"] >= 2_500
    transfer = _of(plan, "transfer")
    assert len(transfer) >= 6 and {0, 12} <= {u["n_transfer"] for u in transfer}
    assert S.transfer_limits["mnli_m"] == (2_500, 2_000)
    # Table 5: the full row is chapters 05-07's runs; the others on its tasks and examples
    ablations = _of(plan, "ablation")
    assert {u["arm"] for u in ablations} == set(S.table5_arms) - {"full"}
    assert {"no_pretraining", "lstm"} <= set(S.table5_arms)
    assert {u["task"] for u in ablations} == set(S.ablation_tasks)
    ids = [u["id"] for u in plan]
    picks = [u["id"] for u in _of(plan, "select")]
    assert picks == [f"select:{a}" for a in S.table5_arms]
    assert ids.index("pretrain:lstm") < ids.index(picks[0])  # the LSTM arm needs its model
    assert ids.index(picks[-1]) < ids.index("finetune:sst2")  # the rest run with the choice


def test_the_selection_holds_out_enough_examples_to_tell_rates_apart(small):
    """Issue 43: 15% of the whole CoLA and STS-B train sets, not 112 examples a task."""
    S, plan, *_ = small
    assert S.selection_tasks == ("cola", "stsb") and S.selection_examples is None
    held = {t: int(SIZES[t, "train"]["n"] * HELD_OUT) for t in S.selection_tasks}
    assert held == {"cola": 1282, "stsb": 862}
    assert sum(u["seconds"] for u in _of(plan, "select")) <= 150  # predicted: about 2 minutes


def test_a_prediction_follows_the_work(small):
    S, plan, rates, total, _ = small
    more = recipe.Predictor(S, rates, SIZES)
    cola = next(u for u in plan if u["id"] == "finetune:cola")
    assert more.unit(cola) == pytest.approx(cola["seconds"], abs=0.1)
    # twice the examples: about twice the steps; a step of long sequences is GPU-bound
    half = more.finetune("cola", 4_000, [], S.finetune)
    assert more.finetune("cola", 8_000, [], S.finetune) - rates["ft_run_s"] == pytest.approx(
        2 * (half - rates["ft_run_s"]), rel=0.01
    )
    race = more.finetune("race", 320, [], S.finetune) - rates["ft_run_s"]
    assert race == pytest.approx(10 * 3 * 32 * 1534.08 * rates["ft_token_s"], rel=0.01)


def test_no_rates_no_prediction_and_an_outcome_beside_each_prediction(small):
    S, plan, *_ = small
    assert recipe.rates_for("small", "NVIDIA A100") is None
    bare = recipe.units(S, TASKS)
    assert recipe.format_units(bare, S, "nothing", None).splitlines()[-1].split()[-1] == "-"
    took = {u["id"]: u["seconds"] * 1.5 for u in _of(plan, "pretrain")}
    lines = recipe.format_units(plan, S, "H100", None, took).splitlines()[1:]
    assert [line.split()[0] for line in lines] == ["part", "pretrain", "total"]
    assert lines[1].split()[1] == "2" and lines[1].split()[4] == "1.50"


def test_each_row_takes_the_rate_that_scored_best_on_held_out_train():
    def row(value, lr, arm="full"):
        config = {"arm": arm, "lr": lr, "warmup": 0.002, "epochs": 3}
        return {"value": value, "metric": "selection_score", "config": config}

    rows = [row(30, RATES[0]), row(40, RATES[1]), row(35, RATES[2]), row(12, RATES[2], "lstm")]
    assert choose(rows[:3])["settings"] == {"lr": 2.5e-4, "warmup": 0.002, "epochs": 3}
    assert choose([row(1, 1e-3), row(1, 2.5e-4)])["settings"]["lr"] == 1e-3  # the first on a tie
    picked = chosen(rows)
    assert picked == {
        "full": {"lr": 2.5e-4, "warmup": 0.002, "epochs": 3},
        "lstm": {"lr": 1e-3, "warmup": 0.002, "epochs": 3},
    }
    S = with_chosen(SCALES["small"], picked)
    assert S.finetune.lr == 2.5e-4 and S.finetune_for("lstm").lr == 1e-3
    assert S.finetune_for("no_pretraining").lr == 2.5e-4  # not searched: the full row's
    with pytest.raises(ValueError, match="run the search first"):
        choose([])


def _trial(lr: float, right: int, start: int = 0, arm: str = "full") -> dict:
    """A selection record of 1,000 held-out CoLA and STS-B examples, ``right`` of them from
    ``start`` on answered right (CoLA) or scored within 0.5 (STS-B; the rest 2.5 off)."""
    y, ok = [i % 2 for i in range(1000)], lambda i: start <= i < start + right
    cola = [v if ok(i) else 1 - v for i, v in enumerate(y)]
    s = [float(i % 6) for i in range(1000)]
    stsb = [v + (0.5 if ok(i) else 2.5) * (-1) ** i for i, v in enumerate(s)]
    outcomes = {
        "cola": {"predictions": cola, "labels": y},
        "stsb": {"predictions": stsb, "labels": s},
    }
    score = 100 * right / 1000
    config = {
        "arm": arm,
        "lr": lr,
        "warmup": 0.002,
        "epochs": 3,
        "metrics": {"cola": score, "stsb": score},
    }
    return {"value": score, "metric": "selection_score", "config": config | {"outcomes": outcomes}}


def test_a_tie_in_the_selection_is_broken_by_the_stated_rule():
    """Issue 43: where the best rate's paired interval against another includes 0 they tie,
    and the one nearest the paper's 6.25e-5 is chosen; a clear lead keeps the best."""
    clear = [_trial(6.25e-5, 500), _trial(2.5e-4, 800), _trial(1e-3, 550)]
    got = choose(clear)
    assert got["settings"]["lr"] == 2.5e-4 and got["tied"] == [] and got["lead"][0] > 0
    assert got["runner_up"]["config"]["lr"] == 1e-3
    # 5 of 1,000 apart, 35 examples answered otherwise: the paired interval includes 0
    close = [_trial(6.25e-5, 795, start=20), _trial(2.5e-4, 800), _trial(1e-3, 500)]
    got = choose(close)
    assert got["best"]["config"]["lr"] == 2.5e-4 and got["tied"] == [6.25e-5]
    assert got["lead"][0] <= 0 <= got["lead"][1] and got["settings"]["lr"] == 6.25e-5
    far = [_trial(6.25e-5, 500), _trial(2.5e-4, 795, start=20), _trial(1e-3, 800)]
    assert choose(far)["settings"]["lr"] == 2.5e-4  # of the tied 1e-3 and 2.5e-4, the nearer
    lstm = [_trial(lr, r, arm="lstm") for lr, r in ((6.25e-5, 300), (2.5e-4, 500), (1e-3, 900))]
    assert chosen(close + lstm) == {
        "full": {"lr": 6.25e-5, "warmup": 0.002, "epochs": 3},
        "lstm": {"lr": 1e-3, "warmup": 0.002, "epochs": 3},
    }
    assert "nearest the paper's 6.25e-5" in TIE_RULE


def test_the_tasks_scored_beside_another_are_scored():
    """MNLI-mm and RACE-m/h have no training split: a unit scores them beside MNLI-m and RACE
    (the recipe's run at ab661a0 left them out: its check asked every task for a train split)."""
    S = SCALES["smoke"]
    tasks = recipe.available(S, "fixture")
    assert {"mnli_mm", "race_m", "race_h"} <= tasks
    also = {u["task"]: u["also"] for u in recipe.units(S, tasks) if recipe.kind(u) == "finetune"}
    assert also["mnli_m"] == ["mnli_mm"] and also["race"] == ["race_m", "race_h"]
