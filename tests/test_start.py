"""Where fine-tuning starts: the scale's default ``init``, GPT-1's released weights read from a
local folder in the hub's layout (a tiny model and vocabulary standing in for
openai-community/openai-gpt), and the line a chapter prints before it starts."""

import json

import pytest
import torch

from gpt1lib import GPT, SPECIAL_TOKENS, GPT1Tokenizer, preset
from gpt1lib.chapter import check_parameters
from gpt1lib.corpus import load_documents
from gpt1lib.finetune import FinetuneRun, finetune
from gpt1lib.runs import RELEASED_ENV, pretrained_model, start_message
from gpt1lib.scales import SCALES
from gpt1lib.settings import FinetuneConfig
from gpt1lib.weights import export_hf


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A folder laid out as the hub's GPT-1: config.json, model.safetensors, vocab.json (ids
    without the three specials) and merges.txt, of a tiny model and a 60-merge vocabulary."""
    folder = tmp_path_factory.mktemp("openai-gpt")
    tok = GPT1Tokenizer.train(texts=load_documents("fixture", "train").texts, n_merges=60)
    model = json.loads(tok.backend.to_str())["model"]
    vocab = {t: i for t, i in model["vocab"].items() if t not in SPECIAL_TOKENS}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    merges = [m.split(" ") if isinstance(m, str) else m for m in model["merges"]]
    (folder / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    torch.manual_seed(0)
    gpt = GPT(preset("tiny", vocab_size=len(vocab), n_ctx=64))  # no specials, as released
    export_hf(gpt, folder)
    return folder, gpt


@pytest.mark.parametrize(
    "scale, init",
    [("smoke", "pretrain"), ("cpu", "pretrain"), ("small", "released"), ("paper", "released")],
)
def test_the_default_start_follows_the_scale(scale, init):
    assert SCALES[scale].init == init


def test_released_weights_from_a_local_folder_in_the_hub_layout(released, monkeypatch, tmp_path):
    folder, reference = released
    monkeypatch.setenv(RELEASED_ENV, str(folder))
    model, tok, origin = pretrained_model("small", tmp_path, None)  # small: released
    assert origin == f"GPT-1's released weights ({RELEASED_ENV}={folder})"
    assert tok.vocab_size == model.config.vocab_size == reference.config.vocab_size
    x = torch.randint(0, reference.config.vocab_size, (2, 16))
    with torch.no_grad():
        assert torch.equal(model.eval()(x).logits, reference.eval()(x).logits)
    assert not (tmp_path / "small").exists()  # nothing pre-trained
    cfg = FinetuneConfig(lr=1e-3, batch_size=4, epochs=1, bf16=False)
    run = FinetuneRun("sst2", cfg, "fixture", limit=8, eval_limit=8, progress=False)
    r = finetune(model, tok, run)
    assert set(r.final) == {"accuracy"}  # the released vocabulary gains the specials and trains


def test_a_missing_local_copy_names_the_file(monkeypatch, tmp_path):
    monkeypatch.setenv(RELEASED_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="vocab.json does not exist"):
        pretrained_model("paper", tmp_path, "released")


def test_the_start_message_says_what_and_how_long(released, monkeypatch, tmp_path):
    monkeypatch.setenv(RELEASED_ENV, str(released[0]))
    said = start_message("small", tmp_path, SCALES["small"].init)
    assert said.startswith("starting from GPT-1's released weights") and "480 MB" in said
    said = start_message("small", tmp_path, "pretrain")
    assert said.startswith("pre-training the small scale's gpt model first")
    assert "20 minutes or more on a T4" in said and "init='released'" in said
    assert "seconds" in start_message("smoke", tmp_path, "pretrain")


def test_check_parameters_knows_the_released_depth():
    check_parameters(SCALES["small"], init=None, n_transfer=12)  # released: 12 blocks
    with pytest.raises(ValueError, match="n_transfer=3: the model has 2 blocks"):
        check_parameters(SCALES["smoke"], init=None, n_transfer=3)  # smoke: its own, 2 blocks
