"""One Scale per scale holds every setting; the two models of a scale read the same tokens."""

import pytest

from gpt1lib.scales import SCALES, resolve_scale


@pytest.mark.parametrize("scale", SCALES)
def test_each_scale_is_consistent(scale):
    S = SCALES[scale]
    assert S.name == scale
    assert S.tokenizer == "released" or S.tokenizer.startswith("train:")
    gpt, lstm = S.model_config(), S.lstm_config()
    assert (gpt.vocab_size, gpt.n_embd) == (lstm.vocab_size, lstm.n_embd)
    # the LSTM keeps the paper's 2048 units to 768 of width at every scale
    assert lstm.n_hidden == round(gpt.n_embd * 2048 / 768)
    if S.tokenizer == "released":
        assert gpt.vocab_size == 40478 and S.n_merges == 40_000
    assert S.task_source in ("fixture", "hub")
    assert S.pretrain.batch_size >= 1 and S.finetune.epochs >= 1


def test_unknown_scale_names_the_choices(monkeypatch):
    with pytest.raises(ValueError, match="cpu"):
        resolve_scale("medium")
    monkeypatch.setenv("GPT1_SCALE", "cpu")
    assert resolve_scale(None) == "cpu" and resolve_scale("small") == "small"


def test_default_limits_fill_only_what_is_not_given():
    assert SCALES["smoke"].limits_for("sst2") == {"limit": None, "eval_limit": None}
    assert SCALES["small"].limits_for("sst2") == {"limit": 2_500, "eval_limit": None}
    # a task's own limits, else its family's, else the scale's default
    assert SCALES["cpu"].limits_for("sst2") == {"limit": 2000, "eval_limit": None}
    assert SCALES["cpu"].limits_for("race") == {"limit": 200, "eval_limit": 200}  # 4 sequences
    assert SCALES["cpu"].limits_for("qqp") == {"limit": 1000, "eval_limit": 1000}
    assert SCALES["cpu"].limits_for("sst2", 10, 0) == {"limit": 10, "eval_limit": 0}
    assert SCALES["cpu"].n_merges == 8000


def test_each_ablation_arm_has_its_own_settings_over_the_scales():
    S = SCALES["cpu"]
    for arm in ("full", "no_pretraining", "no_aux_lm", "lstm"):
        cfg = S.finetune_for(arm, seed=7)
        assert cfg.seed == 7
        for field, value in S.arms.get(arm, {}).items():
            assert getattr(cfg, field) == value
    assert SCALES["smoke"].finetune_for("lstm") == SCALES["smoke"].finetune
    with pytest.raises(ValueError, match="arm='bert'"):
        S.finetune_for("bert")


def test_the_cpu_scales_protocols_are_its_selections_choices():
    """Each Table 5 row at cpu runs the protocol its selection chose on held-out training
    examples (results/sweeps, tools/select_finetune_cpu.py): a changed Scale must say so."""
    from pathlib import Path

    from gpt1lib.evaluations import protocol_selection

    sweep = Path(__file__).parents[1] / "results" / "sweeps" / "cpu_finetune_select.jsonl"
    _, picked = protocol_selection([], sweep)
    assert len(picked) == 4
    for arm, chosen in zip(picked.arm, picked.chosen, strict=True):
        cfg = SCALES["cpu"].finetune_for(arm)
        assert chosen == f"lr {cfg.lr:g}, warm-up 0.2%, {cfg.epochs} epochs, batch {cfg.batch_size}"
