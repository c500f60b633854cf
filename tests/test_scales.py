"""Every scale has a setting in every per-scale table, and the cpu scale's data limits."""

import pytest

from gpt1lib.corpus import DEFAULT_CORPUS
from gpt1lib.finetune import FINETUNE_PRESETS, default_limits
from gpt1lib.lstm import lstm_preset
from gpt1lib.model import preset
from gpt1lib.pretrain import DEFAULT_TOKENIZER, PRETRAIN_PRESETS
from gpt1lib.runtime import MODEL_PRESET, SCALES, resolve_scale


@pytest.mark.parametrize("scale", SCALES)
def test_every_table_knows_the_scale(scale):
    for table in (MODEL_PRESET, PRETRAIN_PRESETS, FINETUNE_PRESETS, DEFAULT_CORPUS):
        assert scale in table
    assert DEFAULT_TOKENIZER[scale] == "released" or DEFAULT_TOKENIZER[scale].startswith("train:")
    gpt, lstm = preset(MODEL_PRESET[scale]), lstm_preset(MODEL_PRESET[scale])
    assert (gpt.vocab_size, gpt.n_embd) == (lstm.vocab_size, lstm.n_embd)
    if DEFAULT_TOKENIZER[scale] == "released":
        assert gpt.vocab_size == 40478


def test_unknown_scale_names_the_choices():
    with pytest.raises(ValueError, match="cpu"):
        resolve_scale("medium")


def test_default_limits_fill_only_what_is_not_given():
    assert default_limits("smoke", "sst2") == {"limit": None, "eval_limit": None}
    assert default_limits("small", "sst2") == {"limit": 20_000, "eval_limit": None}
    assert default_limits("cpu", "sst2") == {"limit": 800, "eval_limit": 400}
    assert default_limits("cpu", "race") == {"limit": 200, "eval_limit": 200}  # 4 sequences each
    assert default_limits("cpu", "sst2", 10, 0) == {"limit": 10, "eval_limit": 0}
