"""gpt1lib: GPT-1 (Radford et al. 2018, "Improving Language Understanding by Generative
Pre-Training") as a small library; the gpt1-book's chapters import it.

The scales live in ``gpt1lib.scales`` (not imported here: importing the package stays light).

Importing it also makes its data warnings (``DataWarning``) one line each, without the path of
the code that raised them, and imports ``tqdm.auto`` once with its warning about a missing
notebook widget silenced, so that the libraries that use it (the hub's, ``datasets``) do not
print that warning with a path into a notebook; see ``runtime``.
"""

import importlib
import warnings

with warnings.catch_warnings():  # "IProgress not found": only that tqdm.auto has no widget
    warnings.simplefilter("ignore")
    importlib.import_module("tqdm.auto")

from .fast import FastGPT  # noqa: E402
from .model import GPT, PRESETS, GPTConfig, GPTOutput, lm_loss, preset  # noqa: E402
from .runtime import show_data_warnings_in_one_line  # noqa: E402
from .tasks import DataWarning  # noqa: E402
from .tokenizer import SPECIAL_TOKENS, GPT1Tokenizer  # noqa: E402

show_data_warnings_in_one_line(DataWarning)

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
