"""The LSTM baseline has the transformer's interface: the same loops train both."""

from dataclasses import replace

import pytest
import torch

from gpt1lib import GPT, FastGPT, preset
from gpt1lib.checkpoint import load_model, load_run, save_model
from gpt1lib.corpus import build_corpus, load_documents
from gpt1lib.finetune import build_task_model
from gpt1lib.loss import task_loss
from gpt1lib.lstm import LSTMLM
from gpt1lib.model import lm_loss
from gpt1lib.pretrain import pretrain
from gpt1lib.scales import SCALES
from gpt1lib.settings import FinetuneConfig, lstm_preset
from gpt1lib.tasks import Example, get_task
from gpt1lib.tokenizer import GPT1Tokenizer
from gpt1lib.transforms import collate, encode_example

V = 60


class Tok:
    vocab_size, start, delimiter, classify = V, V, V + 1, V + 2

    def encode(self, text):
        return [hash(w) % V for w in text.split()]


def test_paper_preset_is_a_single_2048_unit_layer():
    cfg = lstm_preset("paper")
    model = LSTMLM(replace(cfg, vocab_size=100))
    assert cfg.n_hidden == 2048 and len(model.h) == 1 and model.h[0].rnn.num_layers == 1
    widths = {name: lstm_preset(name).n_hidden for name in ("paper", "small", "mini", "tiny")}
    assert widths == {"paper": 2048, "small": 1024, "mini": 683, "tiny": 171}


@pytest.mark.parametrize("kind", ["gpt", "lstm"])
def test_the_same_finetuning_step_runs_on_both(kind):
    torch.manual_seed(0)
    pre = (
        GPT(preset("tiny", vocab_size=V))
        if kind == "gpt"
        else LSTMLM(lstm_preset("tiny", vocab_size=V))
    )
    task = get_task("race")
    model = build_task_model(pre, task, FinetuneConfig(seed=0))
    assert isinstance(model.transformer, FastGPT if kind == "gpt" else LSTMLM)
    assert model.transformer.config.n_special == 3
    assert torch.equal(model.transformer.tokens_embed.weight[:V], pre.tokens_embed.weight)
    ex = Example(("a short doc", "why"), answers=("w", "x y", "z", "q"), label=1)
    batch = collate([encode_example(ex, task.family, Tok(), 64)] * 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scores, l1 = model(batch)
    assert scores.shape == (2, 4) and l1.dim() == 0
    loss, _, _ = task_loss(scores, batch.labels, model.regression, l1, 0.5)
    loss.backward()
    before = model.head.weight.detach().clone()
    opt.step()
    assert not torch.equal(before, model.head.weight)


def test_lstm_output_layer_is_tied_and_extract_ignores_padding():
    torch.manual_seed(0)
    m = LSTMLM(lstm_preset("tiny", vocab_size=V)).eval()
    x = torch.randint(0, V, (2, 7))
    out = m(x)
    assert torch.allclose(out.logits, out.hidden @ m.tokens_embed.weight.t(), atol=1e-6)
    padded = torch.cat([x, torch.zeros(2, 5, dtype=torch.long)], 1)
    assert torch.allclose(m(padded).hidden[:, :7], out.hidden, atol=1e-6)  # causal


def test_save_and_load_either_model(tmp_path):
    models = (GPT(preset("tiny", vocab_size=V)), LSTMLM(lstm_preset("tiny", vocab_size=V)))
    for model in models:
        save_model(model, tmp_path / type(model).__name__)
        again = load_model(tmp_path / type(model).__name__)
        assert type(again) is type(model)
        assert all(
            torch.equal(a, b)
            for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True)
        )
    save_model(FastGPT(models[0].config), tmp_path / "fast")
    assert type(load_model(tmp_path / "fast")) is GPT  # speed paths are no model of their own


def test_lstm_pretrains_with_the_same_loop(tmp_path):
    tok = GPT1Tokenizer.train(texts=load_documents("fixture").texts, n_merges=200)
    data = build_corpus(tok, 32, "fixture")
    torch.manual_seed(0)
    model = LSTMLM(lstm_preset("tiny", vocab_size=tok.vocab_size, n_ctx=32))
    cfg = replace(SCALES["smoke"].pretrain, total_steps=20, eval_interval=10)
    r = pretrain(model, tok, data, cfg, tmp_path, progress=False)
    val = r.history.query("metric == 'val_loss'").sort_values("step")["value"].tolist()
    assert len(val) == 2 and val[1] < val[0]
    again, _ = load_run(r.log_checkpoints[-1])
    assert isinstance(again, LSTMLM)


def test_lstm_loss_from_targets_equals_the_loss_of_its_logits():
    torch.manual_seed(0)
    m = LSTMLM(lstm_preset("tiny")).eval()
    x = torch.randint(0, m.config.n_tokens, (3, 17))
    out = m(x[:, :-1], targets=x[:, 1:])
    assert out.logits is None
    torch.testing.assert_close(out.loss, lm_loss(m(x[:, :-1]).logits, x[:, 1:]))
