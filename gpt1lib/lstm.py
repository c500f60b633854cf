"""The LSTM baseline of the ablations (§5, Table 5) and of the zero-shot curves (Figure 2 right).

"LSTM w/ aux LM": a single-layer LSTM with 2048 units in place of the transformer, pre-trained
and fine-tuned the same way. The paper gives only the layer count and the width (2048 units
beside the transformer's 768); at every scale the LSTM keeps that ratio, ``n_hidden =
round(n_embd * 2048 / 768)``: 2048 at ``paper``, 1024 at ``small``, 683 at ``cpu``'s ``mini``,
171 at ``smoke``'s ``tiny`` (``settings``). Everything else is the library's own choice, made
to mirror GPT-1 so that the two differ only where the paper says they do:

* token embeddings of width ``n_embd``, tied with the output layer, with the same special
  tokens; no position embeddings (the recurrence knows the order);
* a linear projection from the ``n_hidden`` LSTM units back to ``n_embd`` (2048 -> 768 at the
  paper's size), so that the tied output layer and the task heads read a vector of the
  transformer's width; the paper says nothing of it;
* initialisation: embeddings and the projection's weight N(0, 0.02) and its bias 0, as GPT-1's;
  the LSTM's weights and biases PyTorch's default for ``nn.LSTM``, uniform in
  +-1/sqrt(n_hidden) (the paper says nothing of it either);
* dropout 0.1 on the embeddings and on the LSTM's output.

``LSTMLM`` has the transformer's interface (``forward``, ``hidden``, ``add_special_tokens``,
its layers in ``h``, ``config``), so the loops, the heads, layer transfer and the zero-shot
scores all take it.
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

    # The same as the transformer's: the forward pass (hidden states, then the logits or L1 from
    # them), new rows of W_e at N(0, 0.02), greedy or sampled continuation (recomputing the
    # prefix each step: fine for the short texts it is used on).
    forward = GPT.forward
    add_special_tokens = GPT.add_special_tokens
    generate = GPT.generate
