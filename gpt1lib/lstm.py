"""The LSTM baseline of the ablations (§5, Table 5) and of the zero-shot curves (Figure 2 right).

"LSTM w/ aux LM": a single-layer LSTM with 2048 units in place of the transformer, pre-trained
and fine-tuned the same way. The paper gives only the layer count and the width; every scale
keeps its ratio to the transformer's width (``settings.lstm_width``). The rest is this library's
choice, mirroring GPT-1 so that the two differ only where the paper says they do: tied token
embeddings of width ``n_embd`` with the same special tokens, no position embeddings; a linear
projection from the LSTM's units back to ``n_embd``, so that the output layer and the heads read
the transformer's width; GPT-1's N(0, 0.02) initialisation for the embeddings and projection,
PyTorch's default for the LSTM; dropout 0.1 on the embeddings and the LSTM's output.

``LSTMLM`` has the transformer's interface (``forward``, ``hidden``, ``add_special_tokens``,
``h``, ``config``), so the loops, the heads, layer transfer and the zero-shot scores take it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .loss import fused_lm_loss
from .model import GPT, Reduction
from .settings import LSTMConfig


class LSTMBlock(nn.Module):
    """The recurrent layer and its projection to the embedding width."""

    def __init__(self, cfg: LSTMConfig) -> None:
        super().__init__()
        self.rnn = nn.LSTM(cfg.n_embd, cfg.n_hidden, batch_first=True)
        self.proj = nn.Linear(cfg.n_hidden, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.drop(self.rnn(x)[0]))


class LSTMLM(nn.Module):
    """A one-layer LSTM language model with a tied output layer."""

    def __init__(self, cfg: LSTMConfig) -> None:
        super().__init__()
        self.config = cfg
        self.tokens_embed = nn.Embedding(cfg.n_tokens, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList([LSTMBlock(cfg)])
        nn.init.normal_(self.tokens_embed.weight, std=0.02)
        nn.init.normal_(self.h[0].proj.weight, std=0.02)
        nn.init.zeros_(self.h[0].proj.bias)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def hidden(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The projected LSTM states (B, T, n_embd), and the (tied) output layer."""
        return self.h[0](self.drop(self.tokens_embed(idx))), self.tokens_embed.weight

    def logits(self, h: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        return F.linear(h, W)

    def lm_loss(self, h, W_out, targets, loss_mask, reduction: Reduction) -> torch.Tensor:
        """L1 from the hidden states, chunk by chunk, never the full logits (``loss``)."""
        return fused_lm_loss(h, W_out, targets, loss_mask, reduction, self.config.n_tokens)

    # the transformer's: the forward pass, new rows of W_e, greedy or sampled continuation
    forward = GPT.forward
    add_special_tokens = GPT.add_special_tokens
    generate = GPT.generate
