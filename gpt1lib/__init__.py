"""gpt1lib: GPT-1 (Radford et al. 2018, "Improving Language Understanding by Generative
Pre-Training") as a small library; the gpt1-book's chapters import it."""

from .model import GPT, PRESETS, SPECIAL_TOKENS, GPTConfig, GPTOutput, lm_loss, preset
from .tokenizer import GPT1Tokenizer

__all__ = [
    "GPT",
    "GPT1Tokenizer",
    "GPTConfig",
    "GPTOutput",
    "PRESETS",
    "SPECIAL_TOKENS",
    "lm_loss",
    "preset",
]
__version__ = "0.1.0"
