"""GPT-1, the model of Radford et al. (2018), §3.1 and §4.1, as the paper describes it.

    h_0 = U W_e + W_p
    h_l = transformer_block(h_{l-1})      l = 1..n
    P(u) = softmax(h_n W_e^T)

The block is POST-LayerNorm (``n = LN(x + attn(x)); h = LN(n + mlp(n))``) with no final LayerNorm,
the activation is the tanh form of GELU, and the output layer is the token embedding itself.
Module names follow the released checkpoint as transformers stores it (``tokens_embed``,
``h.0.attn.c_attn``, ...), so loading released weights in ``weights.py`` is a short mapping.

This module is the paper and nothing else; the training loops run ``fast.FastGPT``, the same
function with cheaper dropout masks on the CPU and a fused loss, tested equal to this one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

#: The three tokens §3.3 adds after the BPE vocabulary, in the released code's order.
N_SPECIAL = 3  # _start_, _delimiter_, _classify_ (tokenizer.SPECIAL_TOKENS), appended


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
    # h_0 = U W_e + W_p, as transformers' OpenAIGPT does. The paper only says "embedding dropout".
    embd_dropout: Literal["matrix", "sum"] = "matrix"

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} must be divisible by n_head={self.n_head}")
        if self.embd_dropout not in ("matrix", "sum"):
            raise ValueError(f"embd_dropout={self.embd_dropout!r}: use 'matrix' or 'sum'")

    @property
    def n_tokens(self) -> int:
        """Rows of the token embedding: the vocabulary plus the special tokens."""
        return self.vocab_size + self.n_special


#: Named presets. ``small`` keeps 12 blocks so the layer-transfer plot still has 12 points.
PRESETS: dict[str, GPTConfig] = {
    "paper": GPTConfig(),
    "small": GPTConfig(n_layer=12, n_embd=384, n_head=6, n_ctx=512),
    # the cpu scale's; its vocabulary is learned with 8,000 merges (8,319 tokens on the novels)
    "mini": GPTConfig(vocab_size=8319, n_layer=4, n_embd=256, n_head=4, n_ctx=128),
    "tiny": GPTConfig(vocab_size=1000, n_layer=2, n_embd=64, n_head=4, n_ctx=64),
}


def preset(name: str, **overrides) -> GPTConfig:
    """The preset ``name`` (``paper``, ``small``, ``mini``, ``tiny``), ``overrides`` replacing
    fields."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return replace(PRESETS[name], **overrides)


def check_ids(idx: torch.Tensor, cfg) -> None:
    """A clear error for token ids the model cannot embed (call it where data enters a run: it
    waits on the device)."""
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= cfg.n_tokens):
        bad = int(idx.max()) if int(idx.max()) >= cfg.n_tokens else int(idx.min())
        raise ValueError(
            f"token id {bad} is outside the model's {cfg.n_tokens} tokens "
            f"(vocab_size={cfg.vocab_size}, n_special={cfg.n_special}); "
            "encode with the model's own tokenizer, or call add_special_tokens() first"
        )


class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention (Vaswani et al. 2017), as in the released code."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.attn_pdrop = cfg.attn_pdrop
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.resid_dropout = nn.Dropout(cfg.resid_pdrop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        # (B, nh, T, hs); softmax(q k^T / sqrt(hs)) with the causal mask, dropout on it, times v
        y = self.attend(q, k, v, self.attn_pdrop if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))

    def attend(self, q, k, v, p: float) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)


class MLP(nn.Module):
    """Position-wise feed-forward network, 4x wide, tanh-form GELU (the released code's)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.dropout = nn.Dropout(cfg.resid_pdrop)

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
    """``logits`` (B, T, n_tokens) when no targets were given, else None; ``hidden`` is h_n
    (B, T, n_embd); ``loss`` the LM loss when ``targets`` were given, else None."""

    logits: torch.Tensor | None
    hidden: torch.Tensor
    loss: torch.Tensor | None = None


Reduction = Literal["mean", "mean_of_sequences"]


class GPT(nn.Module):
    """The GPT-1 language model: embeddings, ``n_layer`` post-LN blocks, tied output layer."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.config = cfg
        self.tokens_embed = nn.Embedding(cfg.n_tokens, cfg.n_embd)  # W_e, also the output layer
        self.positions_embed = nn.Embedding(cfg.n_ctx, cfg.n_embd)  # W_p
        self.drop = nn.Dropout(cfg.embd_pdrop)
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
        targets: torch.Tensor | None = None,
        loss_mask: torch.Tensor | None = None,
        reduction: Reduction = "mean",
    ) -> GPTOutput:
        """Run the model on token ids ``idx`` (B, T), T at most ``n_ctx``.

        Without ``targets``: the logits. With ``targets`` (B, T') for T' <= T, where the logits
        at position t predict ``targets[:, t]``: L1 as a loss instead, over the targets that
        ``loss_mask`` keeps, "mean" over them or the "mean_of_sequences" (each sequence's mean,
        averaged: the fine-tuning loss of §3.2).
        """
        h, W_out = self.hidden(idx)
        if targets is None:  # softmax(h_n W_e^T): W_e is the output layer (tied)
            return GPTOutput(self.logits(h, W_out), h)
        return GPTOutput(None, h, self.lm_loss(h, W_out, targets, loss_mask, reduction))

    def hidden(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h_n (B, T, n_embd), and the output layer as embedding dropout left it."""
        if idx.dim() != 2:
            raise ValueError(f"idx must be (batch, time) token ids, got shape {tuple(idx.shape)}")
        if idx.size(1) > self.config.n_ctx:
            raise ValueError(
                f"input of {idx.size(1)} tokens is longer than the context "
                f"n_ctx={self.config.n_ctx}: truncate it (or use a config with a larger n_ctx)"
            )
        h, W_out = self.embed(idx)
        for block in self.h:
            h = block(h)
        return h, W_out

    def embed(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h_0, and the output layer W_e as dropout left it (``GPTConfig.embd_dropout``)."""
        W_e, W_p = self.tokens_embed.weight, self.positions_embed.weight
        T = idx.size(1)
        if self.config.embd_dropout == "matrix":
            W_e, W_p = self.drop(W_e), self.drop(W_p)
            return F.embedding(idx, W_e) + W_p[:T], W_e
        return self.drop(F.embedding(idx, W_e) + W_p[:T]), W_e

    def logits(self, h: torch.Tensor, W_out: torch.Tensor) -> torch.Tensor:
        return h @ W_out.t()

    def lm_loss(self, h, W_out, targets, loss_mask, reduction: Reduction) -> torch.Tensor:
        """L1 of ``targets`` from the final hidden states (the logits, then cross-entropy)."""
        logits = self.logits(h[:, : targets.size(1)], W_out)
        per_sequence = reduction == "mean_of_sequences"
        loss = lm_loss(logits, targets, loss_mask, "per_sequence" if per_sequence else "mean")
        return loss.mean() if per_sequence else loss

    def add_special_tokens(self, n: int = N_SPECIAL) -> GPT:
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
    """L1 as a loss: cross-entropy of ``logits`` (B, T, V) against ``targets`` (B, T), where
    ``logits[:, t]`` predicts ``targets[:, t]`` (a sequence ``idx`` on itself: ``logits[:, :-1]``
    and ``idx[:, 1:]``); ``mask`` (B, T) marks the targets that count; ``per_sequence``: each
    sequence's mean (what the fine-tuning loss of §3.2 averages)."""
    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none")
    nll = nll.view_as(targets)
    m = torch.ones_like(nll) if mask is None else mask.to(nll.dtype)
    if reduction == "per_sequence":
        return (nll * m).sum(1) / m.sum(1).clamp_min(1)
    if mask is None:
        return nll.mean()
    return (nll * m).sum() / m.sum().clamp_min(1)
