"""The model is GPT-1: shape, parameter count, post-LN order, tanh GELU, tied head, errors."""

import math

import pytest
import torch
import torch.nn.functional as F

from gpt1lib import GPT, SPECIAL_TOKENS, lm_loss, preset
from gpt1lib.model import MLP, Block, check_ids


def test_paper_preset_has_the_papers_parameter_count():
    model = GPT(preset("paper"))
    assert model.num_parameters() == 116_534_784
    assert model.num_parameters(embeddings=False) == 85_054_464


def test_output_layer_is_the_token_embedding():
    torch.manual_seed(0)
    model = GPT(preset("tiny")).eval()
    x = torch.randint(0, 1000, (2, 10))
    out = model(x)
    assert torch.allclose(out.logits, out.hidden @ model.tokens_embed.weight.t())
    out.logits.sum().backward()  # the head's gradient lands on W_e: there is no separate matrix
    assert model.tokens_embed.weight.grad is not None
    assert not any(p.shape == (1000, 64) for n, p in model.named_parameters() if "tokens" not in n)


def test_block_is_post_layernorm():
    torch.manual_seed(0)
    cfg = preset("tiny")
    block = Block(cfg).eval()
    x = torch.randn(2, 5, cfg.n_embd)
    n = F.layer_norm(x + block.attn(x), (cfg.n_embd,), block.ln_1.weight, block.ln_1.bias, 1e-5)
    expected = F.layer_norm(
        n + block.mlp(n), (cfg.n_embd,), block.ln_2.weight, block.ln_2.bias, 1e-5
    )
    assert torch.allclose(block(x), expected, atol=1e-6)
    # and no final LayerNorm after the last block: h_n is the last block's output
    model = GPT(cfg).eval()
    idx = torch.randint(0, cfg.vocab_size, (1, 7))
    h = model.tokens_embed(idx) + model.positions_embed.weight[:7]
    for b in model.h:
        h = b(h)
    assert torch.allclose(model(idx).hidden, h, atol=1e-6)


def test_mlp_uses_the_tanh_form_of_gelu():
    torch.manual_seed(0)
    cfg = preset("tiny")
    mlp = MLP(cfg).eval()
    x = 3 * torch.randn(4, cfg.n_embd)
    u = mlp.c_fc(x)
    tanh_gelu = 0.5 * u * (1 + torch.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u**3)))
    assert torch.allclose(mlp(x), mlp.c_proj(tanh_gelu), atol=1e-5)
    exact = mlp.c_proj(F.gelu(u))  # the erf form differs measurably: the test can fail
    assert (mlp(x) - exact).abs().max() > 1e-5


def test_init_is_normal_002_with_zero_biases_and_unit_gains():
    torch.manual_seed(0)
    model = GPT(preset("small"))
    w = model.h[0].mlp.c_fc.weight
    assert abs(w.std().item() - 0.02) < 1e-3 and abs(w.mean().item()) < 1e-3
    assert abs(model.tokens_embed.weight.std().item() - 0.02) < 1e-3
    assert torch.all(model.h[0].attn.c_attn.bias == 0)
    assert torch.all(model.h[0].ln_1.weight == 1)


def test_special_tokens_are_appended_after_the_vocabulary():
    torch.manual_seed(0)
    model = GPT(preset("tiny"))
    before = model.tokens_embed.weight.detach().clone()
    model.add_special_tokens()
    assert model.config.n_special == len(SPECIAL_TOKENS) == 3
    w = model.tokens_embed.weight
    assert w.shape == (1003, 64)
    assert torch.equal(w[:1000], before)
    assert 0.005 < w[1000:].std().item() < 0.04  # N(0, 0.02), not zeros
    assert model(torch.tensor([[1002, 5]])).logits.shape == (1, 2, 1003)


def test_too_long_input_is_a_clear_error():
    model = GPT(preset("tiny"))
    with pytest.raises(ValueError, match="longer than the context n_ctx=64"):
        model(torch.zeros(1, 65, dtype=torch.long))


def test_token_outside_the_vocabulary_is_a_clear_error():
    cfg = preset("tiny")
    with pytest.raises(ValueError, match="token id 1000 is outside .*add_special_tokens"):
        check_ids(torch.tensor([[1, 1000]]), cfg)
    with pytest.raises(ValueError, match="token id -1 is outside"):
        check_ids(torch.tensor([[-1, 3]]), cfg)
    check_ids(torch.tensor([[0, 999]]), cfg)


def test_embedding_dropout_variants_differ_only_in_training():
    torch.manual_seed(0)
    m1 = GPT(preset("tiny", embd_dropout="matrix"))
    m2 = GPT(preset("tiny", embd_dropout="sum"))
    m2.load_state_dict(m1.state_dict())
    x = torch.randint(0, 1000, (2, 9))
    m1.eval(), m2.eval()
    assert torch.allclose(m1(x).logits, m2(x).logits, atol=1e-6)
    m1.train()
    torch.manual_seed(1)
    a = m1(x).logits
    torch.manual_seed(1)
    b = m1(x).logits
    assert torch.equal(a, b) and not torch.allclose(a, m1.eval()(x).logits)


def test_loss_from_targets_is_lm_loss_of_the_logits():
    torch.manual_seed(0)
    model = GPT(preset("tiny")).eval()
    x = torch.randint(0, 1000, (3, 12))
    mask = torch.rand(3, 11) > 0.3
    out = model(x[:, :-1], targets=x[:, 1:], loss_mask=mask, reduction="mean_of_sequences")
    logits = model(x[:, :-1]).logits
    assert out.logits is None
    expected = lm_loss(logits, x[:, 1:], mask, reduction="per_sequence").mean()
    torch.testing.assert_close(out.loss, expected)


def test_lm_loss_is_next_token_cross_entropy():
    logits = torch.randn(2, 4, 7)
    idx = torch.randint(0, 7, (2, 5))
    expected = F.cross_entropy(logits.reshape(-1, 7), idx[:, 1:].reshape(-1))
    assert torch.allclose(lm_loss(logits, idx[:, 1:]), expected)
    per_seq = lm_loss(logits, idx[:, 1:], reduction="per_sequence")
    assert per_seq.shape == (2,) and torch.allclose(per_seq.mean(), expected)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    masked = lm_loss(logits, idx[:, 1:], mask)
    nll = F.cross_entropy(logits.reshape(-1, 7), idx[:, 1:].reshape(-1), reduction="none")
    assert torch.allclose(masked, nll[[0, 1, 2, 4, 5, 6, 7]].mean())


def test_generate_is_greedy_at_temperature_zero():
    torch.manual_seed(0)
    model = GPT(preset("tiny")).eval()
    x = torch.randint(0, 1000, (1, 5))
    out = model.generate(x, 3)
    step = model(x).logits[0, -1].argmax()
    assert out.shape == (1, 8) and out[0, 5] == step
