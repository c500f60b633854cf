"""The released code's ``TextEncoder`` (openai/finetune-transformer-lm, ``text_utils``), to
measure how closely ``GPT1Tokenizer`` reproduces it: ftfy.fix_text -> text_standardize -> spaCy
-> lower-case -> BPE per token, in Python (slow; ``pip install "gpt1lib[exact]"``).
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from collections.abc import Iterable

from .front_end import PUNCT_RUNS, STANDARDIZE
from .tokenizer import EOW, GPT1Tokenizer, read_released


def text_standardize(text: str) -> str:
    """The released code's punctuation and whitespace standardisation (after ftfy)."""
    for a, b in STANDARDIZE.items():
        text = text.replace(a, b)
    text = re.sub(f"({PUNCT_RUNS})", r" \1 ", text)
    text = re.sub(r"\s*\n\s*", " \n ", text)
    text = re.sub(r"[^\S\n]+", " ", text)
    return text.strip()


@functools.lru_cache(maxsize=1)
def _released_front_end():
    try:
        import ftfy
        import spacy
    except ImportError as e:
        raise ImportError(
            'the released preprocessing needs ftfy and spaCy: pip install "gpt1lib[exact]"'
        ) from e
    # the blank English pipeline: spaCy 'en''s tokenizer rules, no model download
    return ftfy.fix_text, spacy.blank("en").tokenizer


def _bpe(word: str, ranks: dict[tuple[str, str], int]) -> list[str]:
    """Merge the lowest-ranked adjacent pair everywhere, until no ranked pair is left."""
    symbols = [*word[:-1], word[-1] + EOW]
    while len(symbols) > 1:
        pairs = set(zip(symbols, symbols[1:], strict=False))
        best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        merged: list[str] = []
        for s in symbols:  # left to right; a merged symbol is never the pair's first again
            if merged and (merged[-1], s) == best:
                merged[-1] += s
            else:
                merged.append(s)
        symbols = merged
    if symbols == ["\n", " " + EOW]:  # spaCy's newline token is "\n " (released special case)
        symbols = ["\n" + EOW]
    return " ".join(symbols).split(" ")


class ReleasedEncoder:
    """The released ``TextEncoder`` (ftfy + spaCy + BPE), with a per-word cache."""

    def __init__(self, encoder: dict[str, int], merges: list[tuple[str, str]]) -> None:
        self.encoder = encoder
        self.bpe_ranks = {m: i for i, m in enumerate(merges)}
        self._cache: dict[str, list[str]] = {}
        _released_front_end()  # fail early if ftfy or spaCy is missing

    @classmethod
    def from_files(
        cls, encoder_json: str | os.PathLike, vocab_bpe: str | os.PathLike
    ) -> ReleasedEncoder:
        return cls(*read_released(encoder_json, vocab_bpe, specials=False))

    def tokens(self, text: str) -> list[str]:
        """The BPE symbols of ``text``."""
        fix_text, spacy_tokenizer = _released_front_end()
        out: list[str] = []
        for token in spacy_tokenizer(text_standardize(fix_text(text))):
            word = token.text.lower()
            if word not in self._cache:
                self._cache[word] = _bpe(word, self.bpe_ranks)
            out += self._cache[word]
        return out

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; symbols missing from the vocabulary map to 0 (``<unk>``)."""
        return [self.encoder.get(s, 0) for s in self.tokens(text)]


def agreement(tok: GPT1Tokenizer, reference, texts: Iterable[str]) -> dict:
    """How closely ``tok`` reproduces ``reference`` (anything with ``.encode(text)``):
    ``identical``, the fraction of texts with the same ids; ``token_agreement``, difflib's
    2 M / (N_ours + N_reference) over all texts; ``mismatches``, the texts that differ."""
    texts = list(texts)
    if not texts:
        raise ValueError("agreement needs at least one text")
    ours = tok.encode_batch(texts)
    matched = n_ours = n_ref = 0
    mismatches = []
    for i, (a, text) in enumerate(zip(ours, texts, strict=True)):
        b = reference.encode(text)
        n_ours, n_ref = n_ours + len(a), n_ref + len(b)
        if a == b:
            matched += len(a)
            continue
        mismatches.append(i)
        sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
        matched += sum(block.size for block in sm.get_matching_blocks())
    return {
        "texts": len(texts),
        "identical": (len(texts) - len(mismatches)) / len(texts),
        "token_agreement": 2 * matched / max(1, n_ours + n_ref),
        "tokens": n_ours,
        "tokens_reference": n_ref,
        "mismatches": mismatches,
    }
