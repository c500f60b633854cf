"""Every speed path of ``FastGPT`` computes the same function as the paper's ``GPT`` (on the CPU).

The paths: the LM loss from the hidden states (``fused_lm_loss``: chunked, no full logits, only
the masked-in rows), the vocabulary padded for the output matmul (``pad_vocab_to``), the CPU's
dropout masks and written-out attention, and ``torch.compile``.
"""

import contextlib
import os

import pytest
import torch

import gpt1lib.loss as loss_module
from gpt1lib import GPT, FastGPT, lm_loss, preset
from gpt1lib.fast import dropout, head_matrix
from gpt1lib.loss import fused_lm_loss

NO_DROPOUT = {"embd_pdrop": 0.0, "attn_pdrop": 0.0, "resid_pdrop": 0.0}


def _hidden_and_head(n_tokens=1000, rows=None, d=32, B=3, T=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, T, d, generator=g, requires_grad=True)
    W = torch.randn(n_tokens, d, generator=g) * 0.3
    W = W.requires_grad_()
    targets = torch.randint(0, n_tokens, (B, T - 1), generator=g)
    mask = torch.rand(B, T - 1, generator=g) > 0.3
    mask[0] = False  # a sequence with nothing to score
    return h, W, targets, mask


def _grads(loss, *tensors):
    return torch.autograd.grad(loss, tensors)


@pytest.mark.parametrize("pad", [1, 64])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "mean_of_sequences"])
def test_fused_loss_equals_lm_loss_of_the_logits(pad, masked, reduction):
    h, W, targets, mask = _hidden_and_head()
    mask = mask if masked else None
    logits = h[:, :-1] @ W.t()
    if reduction == "mean":
        expected = lm_loss(logits, targets, mask)
    else:
        expected = lm_loss(logits, targets, mask, reduction="per_sequence").mean()
    W_out = head_matrix(W, -(-W.size(0) // pad) * pad)
    got = fused_lm_loss(h, W_out, targets, mask, reduction, n_tokens=W.size(0))
    assert torch.allclose(got, expected, atol=1e-5, rtol=1e-5)
    for a, b in zip(_grads(got, h, W), _grads(expected, h, W), strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


def test_fused_loss_in_chunks_equals_one_chunk(monkeypatch):
    h, W, targets, mask = _hidden_and_head(B=4, T=33)
    one = fused_lm_loss(h, W, targets, mask)
    g_one = _grads(one, h, W)
    monkeypatch.setattr(loss_module, "LOSS_CHUNK_ELEMENTS", 7 * W.size(0))  # chunks of 7 rows
    many = fused_lm_loss(h, W, targets, mask)
    assert torch.allclose(one, many, atol=1e-6)
    for a, b in zip(g_one, _grads(many, h, W), strict=True):
        assert torch.allclose(a, b, atol=1e-7, rtol=1e-5)


def test_fused_loss_without_gradients_and_under_bf16_autocast():
    h, W, targets, _ = _hidden_and_head()
    expected = lm_loss(h[:, :-1] @ W.t(), targets)
    with torch.no_grad():
        assert torch.allclose(fused_lm_loss(h, W, targets), expected, atol=1e-5)
    with torch.autocast("cpu", torch.bfloat16):
        plain = lm_loss(h[:, :-1] @ W.t(), targets)
        fused = fused_lm_loss(h, W, targets)
    assert fused.dtype == torch.float32  # the log-softmax is float32 whatever the matmul's dtype
    assert torch.allclose(fused, plain, atol=3e-2)
    gh = _grads(fused, h)[0]
    assert gh.dtype == torch.float32 and torch.isfinite(gh).all()


def test_padding_never_enters_the_loss():
    """Real logits far below zero: the zero padding rows would take all the probability if they
    were part of the softmax. They are not."""
    h, W, targets, _ = _hidden_and_head(n_tokens=100)
    W = (-W.detach().abs()).requires_grad_()
    h = h.detach().abs().mul(5).requires_grad_()  # h . W[i] < 0 for every real token i
    padded = head_matrix(W, 128)
    expected = lm_loss(h[:, :-1] @ W.t(), targets)
    got = fused_lm_loss(h, padded, targets, n_tokens=100)
    assert torch.allclose(got, expected, rtol=1e-5)
    g_h, g_W = _grads(got, h, W)
    e_h, e_W = _grads(expected, h, W)
    assert torch.allclose(g_h, e_h, atol=1e-6, rtol=1e-4)
    assert torch.allclose(g_W, e_W, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("pad", [1, 64])
def test_model_loss_path_equals_plain_path(pad):
    torch.manual_seed(0)
    plain = GPT(preset("tiny", **NO_DROPOUT)).train()
    fast = FastGPT(preset("tiny", **NO_DROPOUT), pad_vocab_to=pad).train()
    fast.load_state_dict(plain.state_dict())
    x = torch.randint(0, 1000, (3, 20))
    expected = lm_loss(plain(x[:, :-1]).logits, x[:, 1:])
    expected.backward()
    out = fast(x[:, :-1], targets=x[:, 1:])
    assert out.logits is None  # asked for a loss: no logits made
    assert torch.allclose(out.loss, expected, atol=1e-5)
    out.loss.backward()
    for (name, p), q in zip(fast.named_parameters(), plain.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-6, rtol=1e-4), name


@pytest.mark.parametrize("pad", [1, 64])
def test_the_logits_loss_path_equals_the_fused_one(pad):
    """``loss_path = "logits"`` (pre-training's where compiled on CUDA) is the same L1."""
    torch.manual_seed(0)
    fused = FastGPT(preset("tiny", **NO_DROPOUT), pad_vocab_to=pad).train()
    logits = FastGPT(preset("tiny", **NO_DROPOUT), pad_vocab_to=pad).train()
    logits.load_state_dict(fused.state_dict())
    logits.loss_path = "logits"
    x = torch.randint(0, 1000, (3, 20))
    a, b = (m(x[:, :-1], targets=x[:, 1:]).loss for m in (fused, logits))
    assert torch.allclose(a, b, atol=1e-5)
    a.backward()
    b.backward()
    for (name, p), q in zip(fused.named_parameters(), logits.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-6, rtol=1e-4), name


def test_pretraining_picks_its_loss_path_by_device():
    from gpt1lib.pretrain import loss_path
    from gpt1lib.settings import PretrainConfig

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert loss_path(PretrainConfig(compile=True), cuda) == "logits"
    assert loss_path(PretrainConfig(compile=False), cuda) == "fused"  # eager: the fused loss
    assert loss_path(PretrainConfig(compile=True), cpu) == "fused"
    assert loss_path(PretrainConfig(compile=True, loss="fused"), cuda) == "fused"  # for memory


def test_padded_vocabulary_keeps_shapes_counts_and_logits():
    torch.manual_seed(0)
    plain = GPT(preset("tiny")).eval()
    padded = FastGPT(preset("tiny"), pad_vocab_to=64).eval()  # 1000 tokens -> 1024 rows
    padded.load_state_dict(plain.state_dict())  # the same parameters, the same shapes
    assert padded.tokens_embed.weight.shape == (1000, 64)
    assert padded.num_parameters() == plain.num_parameters()
    with torch.enable_grad():
        assert padded.embed(torch.zeros(1, 1, dtype=torch.long))[1].shape == (1024, 64)
    assert FastGPT(preset("paper"), pad_vocab_to=64).num_parameters() == 116_534_784
    x = torch.randint(0, 1000, (2, 9))
    with torch.enable_grad():  # the padded head is used where gradients are on
        logits = padded(x).logits
    assert logits.shape == (2, 9, 1000)
    assert torch.allclose(logits, plain(x).logits, atol=1e-5)


def test_padded_vocabulary_never_yields_a_padding_token():
    """A model whose every real logit is negative: a zero padding logit would win every argmax
    and most samples, if the padding were ever a token."""
    torch.manual_seed(0)
    model = FastGPT(preset("tiny", **NO_DROPOUT), pad_vocab_to=64).add_special_tokens()
    with torch.no_grad():
        model.h[-1].ln_2.weight.zero_()
        model.h[-1].ln_2.bias.fill_(1.0)  # h_n = 1 everywhere
        model.tokens_embed.weight.copy_(-model.tokens_embed.weight.abs() - 0.05)
    n = model.config.n_tokens
    x = torch.randint(0, n, (4, 5))
    with torch.enable_grad():
        logits = model(x).logits
    assert logits.shape[-1] == n and (logits < 0).all()
    assert int(logits.argmax(-1).max()) < n
    greedy = model.generate(x, 8)
    sampled = model.generate(x, 30, temperature=5.0, generator=torch.Generator().manual_seed(0))
    assert int(greedy.max()) < n and int(sampled.max()) < n
    with torch.enable_grad():
        loss = model(x[:, :-1], targets=x[:, 1:]).loss
    assert torch.allclose(loss, lm_loss(model(x[:, :-1]).logits, x[:, 1:]), atol=1e-5)


def test_cpu_dropout_has_the_rate_the_expectation_and_the_gradient():
    torch.manual_seed(0)
    x = torch.randn(400_000, requires_grad=True)
    y = dropout(x, 0.1, True)
    kept = y != 0
    assert abs(1 - kept.float().mean().item() - 0.1) < 3e-3
    scale = 65536 / (65536 - round(0.1 * 65536))
    assert torch.allclose(y[kept], x[kept] * scale)
    y.sum().backward()
    assert torch.allclose(x.grad, kept.float() * scale)
    ones = torch.ones(400_000)
    assert abs(dropout(ones, 0.1, True).mean().item() - 1) < 5e-3  # E[dropout(x)] = x
    torch.manual_seed(3)
    a = dropout(ones, 0.5, True)
    torch.manual_seed(3)
    assert torch.equal(a, dropout(ones, 0.5, True))  # seeded like any CPU draw
    assert torch.equal(dropout(x, 0.1, False), x)  # evaluation: the identity
    assert not dropout(ones, 1.0, True).any()


def test_cpu_dropout_with_padding_rows():
    W = torch.randn(10, 4, requires_grad=True)
    out = dropout(W, 0.2, True, rows=16)
    assert out.shape == (16, 4) and not out[10:].any()
    out.sum().backward()
    assert W.grad.shape == (10, 4)


def test_written_out_attention_equals_sdpa():
    """p = 1e-9 rounds to dropping nothing, so the CPU's written-out attention runs and must
    give what PyTorch's attention gives without dropout, values and gradients."""
    torch.manual_seed(0)
    tiny = {"embd_pdrop": 1e-9, "attn_pdrop": 1e-9, "resid_pdrop": 1e-9}
    fast = FastGPT(preset("tiny", **tiny)).train()
    plain = GPT(preset("tiny", **NO_DROPOUT)).train()
    plain.load_state_dict(fast.state_dict())
    x = torch.randint(0, 1000, (2, 30))
    a, b = fast(x).logits, plain(x).logits
    assert torch.allclose(a, b, atol=1e-5)
    a.square().mean().backward()
    b.square().mean().backward()
    for (name, p), q in zip(fast.named_parameters(), plain.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-6, rtol=1e-4), name


def test_fast_model_is_the_model_from_the_same_seed():
    torch.manual_seed(0)
    plain = GPT(preset("tiny"))
    torch.manual_seed(0)
    fast = FastGPT(preset("tiny"))
    for a, b in zip(plain.state_dict().values(), fast.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    x = torch.randint(0, 1000, (2, 12))
    assert torch.equal(plain.eval()(x).logits, fast.eval()(x).logits)


def test_fast_dropout_is_dropout_in_training():
    torch.manual_seed(0)
    model = FastGPT(preset("tiny")).train()
    x = torch.randint(0, 1000, (2, 12))
    torch.manual_seed(1)
    a = model(x).logits
    torch.manual_seed(1)
    assert torch.equal(a, model(x).logits)  # reproducible under a seed
    assert not torch.allclose(a, model.eval()(x).logits)  # and not the identity


@pytest.mark.parametrize(
    "device",
    [
        pytest.param(
            "cpu",
            marks=pytest.mark.skipif(
                not os.environ.get("GPT1_TEST_COMPILE"),
                reason="torch.compile takes about a minute on a 2-core CPU; GPT1_TEST_COMPILE=1",
            ),
        ),
        pytest.param(
            "cuda",
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU"),
        ),
    ],
)
@pytest.mark.parametrize("path", ["fused", "logits"])
@pytest.mark.parametrize("how", ["whole", "regions"])
def test_compiled_model_computes_the_same_loss_and_gradients(device, path, how):
    """On CUDA under bf16 autocast, the fused loss compiled into the graph gave all-zero
    gradients (an H100, torch 2.11): pre-training learned nothing. It now runs eagerly; the
    full logits (pre-training's path where it compiles on CUDA) are compiled into the graph.
    Pre-training compiles the transformer block by block (``FastGPT.compiled_regions``), and
    is eager again after it."""
    torch.manual_seed(0)
    pad = 64 if device == "cuda" else 1
    model = FastGPT(preset("tiny", **NO_DROPOUT), pad).to(device).train()
    model.loss_path = path
    x = torch.randint(0, 1000, (2, 16), device=device)
    with torch.autocast(device, torch.bfloat16, enabled=device == "cuda"):
        expected = model(x[:, :-1], targets=x[:, 1:]).loss
    g_expected = _grads(expected, *model.parameters())
    regions = model.compiled_regions() if how == "regions" else contextlib.nullcontext()
    with regions, torch.autocast(device, torch.bfloat16, enabled=device == "cuda"):
        compiled = model if how == "regions" else torch.compile(model)
        got = compiled(x[:, :-1], targets=x[:, 1:]).loss
        assert how == "whole" or all(b._compiled_call_impl for b in model.h)
    assert all(b._compiled_call_impl is None for b in model.h) and model.compiled_loss is None
    tol = {"atol": 1e-6, "rtol": 1e-4} if device == "cpu" else {"atol": 1e-3, "rtol": 2e-2}
    assert torch.allclose(got, expected, atol=1e-5 if device == "cpu" else 1e-3)
    got_grads = _grads(got, *model.parameters())
    assert sum(g.float().norm() for g in got_grads) > 0
    for a, b in zip(got_grads, g_expected, strict=True):
        assert torch.allclose(a.float(), b.float(), **tol)


def test_bad_targets_are_clear_errors():
    model = FastGPT(preset("tiny"))
    x = torch.randint(0, 1000, (2, 8))
    with pytest.raises(ValueError, match="do not fit hidden states"):
        model(x, targets=torch.zeros(2, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="reduction='sum'"):
        model(x, targets=x, reduction="sum")
    with pytest.raises(ValueError, match="pad_vocab_to=0"):
        FastGPT(preset("tiny"), pad_vocab_to=0)
