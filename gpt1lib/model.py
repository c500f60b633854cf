"""GPT-1, the model of Radford et al. (2018), §3.1 and §4.1.

    h_0 = U W_e + W_p
    h_l = transformer_block(h_{l-1})      l = 1..n
    P(u) = softmax(h_n W_e^T)

The block is POST-LayerNorm (``n = LN(x + attn(x)); h = LN(n + mlp(n))``) with no final LayerNorm,
the activation is the tanh form of GELU, and the output layer is the token embedding itself.
Module names follow the released checkpoint as transformers stores it (``tokens_embed``,
``h.0.attn.c_attn``, ...), so loading released weights in ``weights.py`` is a short mapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

#: The three tokens §3.3 adds after the BPE vocabulary, in the released code's order.
SPECIAL_TOKENS = ("_start_", "_delimiter_", "_classify_")


@dataclass(frozen=True)
class GPTConfig:
    """Shape and regularisation of a GPT-1 model; the defaults are the paper's (§4.1)."""

    vocab_size: int = 40478  # BPE vocabulary: <unk>, 476 base symbols, 40,000 merges, \n</w>
    n_special: int = 0  # tokens appended after the vocabulary (3 once fine-tuning adds them)
    n_ctx: int = 512  # context window k of L1, learned positions
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768  # FFN inner size is 4 * n_embd = 3072
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    resid_pdrop: float = 0.1
    layer_norm_eps: float = 1e-5
    # Where embedding dropout acts. "matrix": on the embedding matrices before the lookup, as the
    # released code does (so the tied output layer sees the same dropped matrix). "sum": on
    # h_0 = U W_e + W_p, as transformers' OpenAIGPT does. The paper only says "embedding dropout";
    # we follow the released code by default and keep "sum" for parity with transformers.
    embd_dropout: Literal["matrix", "sum"] = "matrix"
    # Speed only, never the function: the output matmul runs on W_e padded with zero rows to a
    # multiple of this (64 suits GPU tensor cores: 40,481 -> 40,512). The padding is not a
    # parameter, is not saved, and its logits are cut off before any caller, loss or sample sees
    # them. 1: no padding (the default; it does not pay on a CPU, see the speed appendix).
    pad_vocab_to: int = 1
    # Speed only: on the CPU (eager), draw dropout masks from 16-bit integers (about half the time
    # of torch's Bernoulli draws; rate round(65536 p) / 65536, see ``dropout``) and write the
    # attention out so that its dropout can use them. False: F.dropout and SDPA's own everywhere.
    fast_cpu_dropout: bool = True

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} must be divisible by n_head={self.n_head}")
        if self.embd_dropout not in ("matrix", "sum"):
            raise ValueError(f"embd_dropout={self.embd_dropout!r}: use 'matrix' or 'sum'")
        if self.pad_vocab_to < 1:
            raise ValueError(f"pad_vocab_to={self.pad_vocab_to}: use 1 (no padding) or e.g. 64")

    @property
    def n_tokens(self) -> int:
        """Rows of the token embedding: the vocabulary plus the special tokens."""
        return self.vocab_size + self.n_special

    @property
    def n_tokens_padded(self) -> int:
        """Rows of the output matmul: ``n_tokens`` rounded up to a multiple of ``pad_vocab_to``."""
        m = self.pad_vocab_to
        return -(-self.n_tokens // m) * m


#: Named presets. ``small`` keeps 12 blocks so the layer-transfer plot still has 12 points.
PRESETS: dict[str, GPTConfig] = {
    "paper": GPTConfig(),
    "small": GPTConfig(n_layer=12, n_embd=384, n_head=6, n_ctx=512),
    # the cpu scale's; its vocabulary is learned with 8,000 merges (8,319 tokens on the novels)
    "mini": GPTConfig(vocab_size=8319, n_layer=4, n_embd=256, n_head=4, n_ctx=128),
    "tiny": GPTConfig(vocab_size=1000, n_layer=2, n_embd=64, n_head=4, n_ctx=64),
}


def preset(name: str, **overrides) -> GPTConfig:
    """The preset ``name`` (``paper``, ``small``, ``tiny``), ``overrides`` replacing fields."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return replace(PRESETS[name], **overrides)


class Dropout(nn.Dropout):
    """``nn.Dropout``, with ``dropout``'s cheaper mask on the CPU unless ``fast`` is False."""

    def __init__(self, p: float, fast: bool = True) -> None:
        super().__init__(p)
        self.fast = fast

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training, fast=self.fast)


class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention (Vaswani et al. 2017), as in the released code."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.attn_pdrop = cfg.attn_pdrop
        self.fast = cfg.fast_cpu_dropout
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.resid_dropout = Dropout(cfg.resid_pdrop, cfg.fast_cpu_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        # (B, nh, T, hs); dropout on the attention probabilities, scale 1/sqrt(hs)
        p = self.attn_pdrop if self.training else 0.0
        if p > 0 and self.fast and _cpu_eager(x):
            # PyTorch's CPU flash kernel has no dropout, and its fallback builds the causal mask
            # on every call: written out, with the CPU's cheaper dropout mask.
            att = (q @ k.transpose(-2, -1)).mul_(1.0 / math.sqrt(C // self.n_head))
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).triu_(1)
            att = att.masked_fill_(causal, float("-inf")).softmax(dim=-1)
            y = dropout(att, p, True, fast=True) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """Position-wise feed-forward network, 4x wide, tanh-form GELU (the released code's)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.dropout = Dropout(cfg.resid_pdrop, cfg.fast_cpu_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(nn.Module):
    """One transformer block, POST-LayerNorm: the normalisation follows each residual sum."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.attn = CausalSelfAttention(cfg)
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.mlp = MLP(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.ln_1(x + self.attn(x))
        return self.ln_2(n + self.mlp(n))


class GPTOutput(NamedTuple):
    """``logits`` over all tokens (B, T, n_tokens), or None; ``hidden`` is h_n (B, T, n_embd);
    ``loss`` the LM loss when ``targets`` were given, else None."""

    logits: torch.Tensor | None
    hidden: torch.Tensor
    loss: torch.Tensor | None = None


class GPT(nn.Module):
    """The GPT-1 language model: embeddings, ``n_layer`` post-LN blocks, tied output layer."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.config = cfg
        self.tokens_embed = nn.Embedding(cfg.n_tokens, cfg.n_embd)  # W_e, also the output layer
        self.positions_embed = nn.Embedding(cfg.n_ctx, cfg.n_embd)  # W_p
        self.drop = Dropout(cfg.embd_pdrop, cfg.fast_cpu_dropout)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.apply(init_weights)

    def num_parameters(self, embeddings: bool = True) -> int:
        """Parameter count; the output layer is W_e and is not counted twice."""
        n = sum(p.numel() for p in self.parameters())
        if not embeddings:
            n -= self.tokens_embed.weight.numel() + self.positions_embed.weight.numel()
        return n

    def forward(
        self,
        idx: torch.Tensor,
        return_logits: bool | None = None,
        validate: bool = True,
        targets: torch.Tensor | None = None,
        loss_mask: torch.Tensor | None = None,
        reduction: Literal["mean", "mean_of_sequences"] = "mean",
    ) -> GPTOutput:
        """Run the model on token ids ``idx`` (B, T); T may be at most ``n_ctx``.

        With ``targets`` (B, T') for T' <= T, the logits at position t predict ``targets[:, t]``
        and ``loss`` is L1 as a loss, computed by ``fused_lm_loss`` without materialising the
        logits (only the rows ``loss_mask`` keeps are scored). ``reduction``: "mean" over the
        counted targets, or "mean_of_sequences", the mean of each sequence's mean (the
        fine-tuning loss of §3.2). ``return_logits`` defaults to True without targets and False
        with them. ``validate=False`` skips the check of the ids' range, which waits on the
        device: for training loops whose data was checked once up front.
        """
        cfg = self.config
        if idx.dim() != 2:
            raise ValueError(f"idx must be (batch, time) token ids, got shape {tuple(idx.shape)}")
        T = idx.size(1)
        if T > cfg.n_ctx:
            raise ValueError(
                f"input of {T} tokens is longer than the context n_ctx={cfg.n_ctx}: "
                "truncate it (or use a config with a larger n_ctx)"
            )
        if validate and idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= cfg.n_tokens):
            bad = int(idx.max()) if int(idx.max()) >= cfg.n_tokens else int(idx.min())
            raise ValueError(
                f"token id {bad} is outside the model's {cfg.n_tokens} tokens "
                f"(vocab_size={cfg.vocab_size}, n_special={cfg.n_special}); "
                "encode with the model's own tokenizer, or call add_special_tokens() first"
            )
        W_e, W_p = self.tokens_embed.weight, self.positions_embed.weight
        # the output matmul's rows: padded (zero rows) where that pays, see GPTConfig.pad_vocab_to;
        # on the CPU only for training, where the copy is paid back by the backward pass
        rows = cfg.n_tokens
        if cfg.pad_vocab_to > 1 and (torch.is_grad_enabled() or not _cpu_eager(idx)):
            rows = cfg.n_tokens_padded
        if cfg.embd_dropout == "matrix":  # released code: drop the matrices, the head sees W_e too
            W_out = dropout(W_e, self.drop.p, self.training, rows, cfg.fast_cpu_dropout)
            W_e, W_p = W_out[: cfg.n_tokens], self.drop(W_p)
            h = F.embedding(idx, W_e) + W_p[:T]
        else:  # transformers: drop the summed embedding
            h = self.drop(F.embedding(idx, W_e) + W_p[:T])
            W_out = head_matrix(W_e, rows)
        for block in self.h:
            h = block(h)
        # W_out is W_e (perhaps dropped, perhaps padded): softmax(h_n W_e^T), tied
        logits = loss = None
        if return_logits or (return_logits is None and targets is None):
            logits = (h @ W_out.t())[..., : cfg.n_tokens]  # the padding is never a token
        if targets is not None:
            loss = fused_lm_loss(h, W_out, targets, loss_mask, reduction, n_tokens=cfg.n_tokens)
        return GPTOutput(logits, h, loss)

    def add_special_tokens(self, n: int = len(SPECIAL_TOKENS)) -> GPT:
        """Append ``n`` rows to W_e for the §3.3 tokens, initialised N(0, 0.02) (in place)."""
        cfg = self.config
        old = self.tokens_embed.weight
        new = torch.empty(cfg.n_tokens + n, cfg.n_embd, device=old.device, dtype=old.dtype)
        nn.init.normal_(new, mean=0.0, std=0.02)
        with torch.no_grad():
            new[: cfg.n_tokens] = old
        self.tokens_embed.weight = nn.Parameter(new)
        self.tokens_embed.num_embeddings = new.size(0)
        self.config = replace(cfg, n_special=cfg.n_special + n)
        return self

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Continue ``idx`` (B, T) by ``max_new_tokens``: greedy at temperature 0, else sampled."""
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.config.n_ctx :]).logits[:, -1, :]
            if temperature == 0.0:
                nxt = logits.argmax(dim=-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                nxt = torch.multinomial(logits.softmax(-1), 1, generator=generator)
            idx = torch.cat([idx, nxt], dim=1)
        return idx


def init_weights(module: nn.Module) -> None:
    """N(0, 0.02) for embeddings and weight matrices, zero biases, unit LayerNorm gains (§4.1)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def lm_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    mask: torch.Tensor | None = None,
    reduction: Literal["mean", "per_sequence"] = "mean",
) -> torch.Tensor:
    """L1 as a loss: cross-entropy of ``logits`` (B, T, V) against the next tokens ``targets``
    (B, T), aligned so that ``logits[:, t]`` predicts ``targets[:, t]``.

    For a sequence ``idx`` scored on itself, pass ``logits[:, :-1]`` and ``idx[:, 1:]``.
    ``mask`` (B, T) marks the targets that count. ``per_sequence`` gives each sequence's mean
    (what the fine-tuning loss of §3.2 averages).
    """
    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none")
    nll = nll.view_as(targets)
    m = torch.ones_like(nll) if mask is None else mask.to(nll.dtype)
    if reduction == "per_sequence":
        return (nll * m).sum(1) / m.sum(1).clamp_min(1)
    if mask is None:
        return nll.mean()
    return (nll * m).sum() / m.sum().clamp_min(1)


# ---------------------------------------------------------------- the fast path of the loss


def head_matrix(W_e: torch.Tensor, rows: int) -> torch.Tensor:
    """The output layer W_e with zero rows appended up to ``rows`` (``pad_vocab_to``): the same
    function, a matmul whose width suits the hardware. Without padding, W_e itself."""
    pad = rows - W_e.size(0)
    return F.pad(W_e, (0, 0, 0, pad)) if pad > 0 else W_e


#: Elements of one chunk of logits in ``fused_lm_loss`` (128 MB in float32): the loss never
#: holds more than two such chunks at once, whatever the batch.
LOSS_CHUNK_ELEMENTS = 2**25


class _LinearCrossEntropy(torch.autograd.Function):
    """sum_i w_i * CE(h_i W^T, t_i) over rows i, the logits made and dropped one chunk at a time.

    The gradients are computed in the forward pass, chunk by chunk (softmax minus one-hot, times
    W and times h), so the backward pass only scales them: the (rows, vocabulary) logits, their
    log-softmax and their gradient never exist at full size. Log-softmax is float32 whatever the
    matmul's dtype. Rows of W past ``n_valid`` are padding: their logits are set to -inf, so
    they have probability 0 and get no gradient.
    """

    @staticmethod
    def forward(ctx, h, W, targets, weights, n_valid: int, chunk: int, grads: bool):
        loss = torch.zeros((), device=h.device, dtype=torch.float32)
        grad_h = torch.empty_like(h) if grads else None
        grad_W = torch.empty(W.shape, device=W.device, dtype=torch.float32) if grads else None
        if grads and h.size(0) == 0:
            grad_W.zero_()
        with torch.autocast(h.device.type, enabled=False):
            for s in range(0, h.size(0), chunk):
                h_c, t_c, w_c = h[s : s + chunk], targets[s : s + chunk], weights[s : s + chunk]
                logits = h_c @ W.t()  # (rows, padded vocabulary)
                logits[:, n_valid:] = float("-inf")  # the padding: probability 0, gradient 0
                logp = torch.log_softmax(logits.float(), dim=1)
                del logits
                loss += -(logp.gather(1, t_c[:, None]).squeeze(1) * w_c).sum()
                if not grads:
                    continue
                g = logp.exp_().mul_(w_c[:, None])  # d loss / d logits = w * (softmax - one_hot)
                g[torch.arange(g.size(0), device=g.device), t_c] -= w_c
                g = g.to(W.dtype)
                torch.mm(g, W, out=grad_h[s : s + chunk])
                if W.dtype != torch.float32:
                    part = (g.t() @ h_c).float()
                    grad_W.copy_(part) if s == 0 else grad_W.add_(part)
                elif s == 0:
                    torch.mm(g.t(), h_c, out=grad_W)
                else:
                    grad_W.addmm_(g.t(), h_c)
        ctx.grads = (grad_h, grad_W)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        grad_h, grad_W = ctx.grads
        ctx.grads = None
        if grad_h is None:
            raise RuntimeError("fused_lm_loss was computed without gradients (under no_grad)")
        grad_W = grad_W.mul_(grad_loss).to(grad_h.dtype)
        return grad_h.mul_(grad_loss.to(grad_h.dtype)), grad_W, None, None, None, None, None


def fused_lm_loss(
    hidden: torch.Tensor,
    W: torch.Tensor,
    targets: torch.Tensor,
    mask: torch.Tensor | None = None,
    reduction: Literal["mean", "mean_of_sequences"] = "mean",
    n_tokens: int | None = None,
) -> torch.Tensor:
    """L1 as a loss from the final hidden states, equal to
    ``lm_loss(hidden @ W.T, targets, mask)`` but without the full (B, T, V) logits.

    ``hidden`` (B, T, d); ``W`` (V', d) the output layer, perhaps padded (``head_matrix``), of
    which only the first ``n_tokens`` rows are tokens; ``targets`` (B, T') with T' <= T: the
    logits at position t predict ``targets[:, t]``; ``mask`` (B, T') marks the targets that
    count, and only their rows are scored. ``reduction``: "mean" over the counted targets, or
    "mean_of_sequences", each sequence's mean averaged over the sequences (the fine-tuning L1 of
    §3.2, ``lm_loss(..., reduction="per_sequence").mean()``). Under autocast the matmuls run in
    the autocast dtype and the log-softmax in float32.
    """
    B, Tt = targets.shape
    if hidden.dim() != 3 or hidden.size(0) != B or hidden.size(1) < Tt:
        raise ValueError(
            f"targets {tuple(targets.shape)} do not fit hidden states {tuple(hidden.shape)}: "
            "pass (B, T') targets with T' <= T, e.g. idx[:, 1:] for hidden states of idx[:, :-1]"
        )
    if mask is not None and mask.shape != targets.shape:
        raise ValueError(f"mask {tuple(mask.shape)} must have the targets' shape {(B, Tt)}")
    if reduction not in ("mean", "mean_of_sequences"):
        raise ValueError(f"reduction={reduction!r}: use 'mean' or 'mean_of_sequences'")
    n_tokens = W.size(0) if n_tokens is None else n_tokens
    h = hidden[:, :Tt].reshape(B * Tt, -1)
    t = targets.reshape(-1)
    m = torch.ones_like(targets, dtype=torch.float32) if mask is None else mask.float()
    if reduction == "mean":
        w = m / m.sum().clamp_min(1)
    else:
        w = m / m.sum(1, keepdim=True).clamp_min(1) / B
    w = w.reshape(-1)
    if mask is not None and not torch.compiler.is_compiling():
        keep = mask.reshape(-1).nonzero().squeeze(1)  # logits only where a loss is needed
        h, t, w = h[keep], t[keep], w[keep]
    device_type = hidden.device.type
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        h, W = h.to(dtype), W.to(dtype)
    chunk = max(1, LOSS_CHUNK_ELEMENTS // W.size(0))
    grads = torch.is_grad_enabled() and (h.requires_grad or W.requires_grad)
    return _LinearCrossEntropy.apply(h, W, t, w, n_tokens, chunk, grads)


# ---------------------------------------------------------------- the CPU's dropout


def _cpu_eager(x: torch.Tensor) -> bool:
    """Whether ``x`` is on the CPU outside ``torch.compile`` (which fuses dropout itself)."""
    return x.device.type == "cpu" and not torch.compiler.is_compiling()


def dropout(
    x: torch.Tensor, p: float, training: bool, rows: int | None = None, fast: bool = True
) -> torch.Tensor:
    """``F.dropout(x, p, training)``, then zero rows appended up to ``rows`` (for a padded W_e).

    With ``fast``, on the CPU (eager) the mask comes from 16-bit uniform integers instead of a
    float Bernoulli draw per element, in about half of ``F.dropout``'s time: an element is
    dropped with probability round(65536 p) / 65536 (0.1000061 for p = 0.1) and the kept ones
    are scaled by exactly 1 / (1 - that), so the expectation is still x. Seeded by
    ``torch.manual_seed`` like any CPU draw. Elsewhere (CUDA, ``torch.compile``) it is
    ``F.dropout``.
    """
    rows = x.size(0) if rows is None else rows
    if not training or p == 0:
        return head_matrix(x, rows)
    if p >= 1:
        return head_matrix(torch.zeros_like(x), rows)
    if fast and _cpu_eager(x):
        return _CPUDropout.apply(x, p, rows)
    return head_matrix(F.dropout(x, p, True), rows)


class _CPUDropout(torch.autograd.Function):
    """Dropout with a mask of 16-bit uniform integers; the output may have extra zero rows."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float, rows: int):
        k = round(p * 65536)  # dropped values of the 65536 an int16 takes
        n = x.numel()
        bits = torch.randint(-(2**31), 2**31, ((n + 1) // 2,), dtype=torch.int32)
        keep = (bits.view(torch.int16)[:n] >= k - 32768).view(x.shape)
        scale = 65536 / (65536 - k)
        if rows == x.size(0):
            out = torch.where(keep, x, 0.0).mul_(scale)
        else:
            out = x.new_empty((rows, *x.shape[1:]))
            torch.where(keep, x, x.new_zeros(()), out=out[: x.size(0)]).mul_(scale)
            out[x.size(0) :].zero_()
        ctx.save_for_backward(keep)
        ctx.scale, ctx.n = scale, x.size(0)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return torch.where(keep, grad[: ctx.n], 0.0).mul_(ctx.scale), None, None
