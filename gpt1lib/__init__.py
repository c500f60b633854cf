"""gpt1lib: GPT-1 (Radford et al. 2018, "Improving Language Understanding by Generative
Pre-Training") as a small library; the gpt1-book's chapters import it.

The scales live in ``gpt1lib.scales`` (not imported here, so that ``python -m gpt1lib.pretrain``
starts without importing itself first).
"""

from .fast import FastGPT
from .model import GPT, PRESETS, SPECIAL_TOKENS, GPTConfig, GPTOutput, lm_loss, preset
from .tokenizer import GPT1Tokenizer

__all__ = [
    "GPT",
    "FastGPT",
    "GPT1Tokenizer",
    "GPTConfig",
    "GPTOutput",
    "PRESETS",
    "SPECIAL_TOKENS",
    "lm_loss",
    "preset",
]
__version__ = "0.1.0"
