"""gpt1lib: GPT-1 (Radford et al. 2018, "Improving Language Understanding by Generative
Pre-Training") as a small library; the gpt1-book's chapters import it."""

from .fast import FastGPT
from .model import GPT, PRESETS, SPECIAL_TOKENS, GPTConfig, GPTOutput, lm_loss, preset
from .scales import SCALES, Scale, resolve_scale
from .tokenizer import GPT1Tokenizer

__all__ = [
    "GPT",
    "FastGPT",
    "GPT1Tokenizer",
    "GPTConfig",
    "GPTOutput",
    "PRESETS",
    "SCALES",
    "SPECIAL_TOKENS",
    "Scale",
    "lm_loss",
    "preset",
    "resolve_scale",
]
__version__ = "0.1.0"
