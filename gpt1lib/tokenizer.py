"""GPT-1's byte-pair encoding (§4.1: 40,000 merges) on Hugging Face ``tokenizers``.

The released vocabulary has 40,478 tokens (``<unk>``, 476 base symbols, the merges, ``\\n</w>``),
then the three §3.3 tokens ``_start_ _delimiter_ _classify_`` at 40478..40480. The released
front end (ftfy, text_standardize, spaCy) is rewritten as a normalizer and pre-tokenizer
(``front_end``); ``released_encoder`` measures how closely the ids match the released code's.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, trainers

from .files import atomic_path, not_utf8
from .front_end import normalizer, pre_tokenizer
from .hub import HUB_ID, hub_files

UNK = "<unk>"
EOW = "</w>"  # end-of-word suffix of the last symbol of every word
TOKENIZER_FILE = "tokenizer.json"
#: The tokens fine-tuning adds after the vocabulary (§3.3): 40478, 40479, 40480 at GPT-1's.
SPECIAL_TOKENS = ("_start_", "_delimiter_", "_classify_")
#: The released vocabulary's two files (MIT licence), in one folder.
RELEASED_FILES = ("encoder_bpe_40000.json", "vocab_40000.bpe")


class TokenizerUnavailableError(RuntimeError):
    """The vocabulary could not be fetched (hub unreachable or files missing)."""


def _build(vocab: dict[str, int], merges: list[tuple[str, str]]) -> Tokenizer:
    """A GPT-1 tokenizer over the BPE ``vocab`` (specials included) and ``merges``."""
    tk = Tokenizer(models.BPE(vocab, merges, unk_token=UNK, end_of_word_suffix=EOW))
    tk.normalizer = normalizer()
    tk.pre_tokenizer = pre_tokenizer()
    tk.decoder = decoders.BPEDecoder(suffix=EOW)
    return tk


def _with_specials(vocab: dict[str, int]) -> dict[str, int]:
    """``vocab`` (ids 0..n-1) with the three §3.3 tokens appended at n, n+1, n+2."""
    n = len(vocab)
    out = {**vocab, **{t: n + i for i, t in enumerate(SPECIAL_TOKENS)}}
    if sorted(out.values()) != list(range(n + len(SPECIAL_TOKENS))):
        raise ValueError(
            f"vocabulary ids must be 0..{n - 1} without gaps or repeats, and without "
            f"{SPECIAL_TOKENS} (they are appended after it)"
        )
    return out


def read_merges(path: str | os.PathLike) -> list[tuple[str, str]]:
    """The merges of a ``vocab_40000.bpe`` / ``merges.txt`` file (``#version`` line skipped)."""
    merges = []
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").split("\n"), 1):
        if not line or line.startswith("#version"):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise ValueError(f"{path}:{i}: a merge line holds two symbols, got {line!r}")
        merges.append((parts[0], parts[1]))
    return merges


def read_released(
    encoder_json: str | os.PathLike, vocab_bpe: str | os.PathLike, specials: bool = True
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The vocabulary (with the §3.3 tokens if ``specials``) and merges of the released
    files, checked to be one release's."""
    for p in (encoder_json, vocab_bpe):
        if not Path(p).is_file():
            raise FileNotFoundError(
                f"{p} does not exist: pass the released encoder_bpe_40000.json and "
                f"vocab_40000.bpe (or vocab.json and merges.txt of {HUB_ID})"
            )
    vocab = json.loads(Path(encoder_json).read_text(encoding="utf-8"))
    if UNK not in vocab:
        raise ValueError(f"{encoder_json} has no {UNK!r} token: is it a GPT-1 encoder file?")
    merges = read_merges(vocab_bpe)
    unknown = sorted({t for a, b in merges for t in (a, b, a + b)} - vocab.keys())
    if unknown:
        raise ValueError(
            f"{len(unknown)} symbols of the merges in {vocab_bpe} are missing from "
            f"{encoder_json}, e.g. {unknown[:5]}: the two files must come from one release"
        )
    return (_with_specials(vocab) if specials else vocab), merges


#: Texts longer than this are encoded (and learned from) in pieces of about a quarter of it.
LONG_TEXT = 1 << 16


def paragraph_pieces(text: str | Iterable[str], size: int) -> Iterator[str]:
    """``text`` (or its lines) in pieces of at least ``size`` characters (the last may be
    shorter), each cut after a run of blank lines; the pieces join to the text."""
    piece: list[str] = []
    n, after_blank = 0, False  # after a blank line that follows a line
    for line in io.StringIO(text) if isinstance(text, str) else text:
        blank = not line.strip()
        # a line with text follows the blank lines, or white space that ends the text
        if after_blank and n >= size and not (blank and line.endswith("\n")):
            yield "".join(piece)
            piece, n = [], 0
        after_blank = blank and bool(piece)
        piece.append(line)
        n += len(line)
    if piece:
        yield "".join(piece)


def _long_text_pieces(text: str) -> list[str]:
    return list(paragraph_pieces(text, LONG_TEXT // 4)) if len(text) > LONG_TEXT else [text]


class GPT1Tokenizer:
    """GPT-1 style BPE built on a ``tokenizers.Tokenizer``."""

    def __init__(self, backend: Tokenizer) -> None:
        n = backend.get_vocab_size(with_added_tokens=True)
        found = tuple(backend.id_to_token(i) for i in range(max(0, n - 3), n))
        if found != SPECIAL_TOKENS:
            raise ValueError(
                f"the last three tokens are {found}, not {SPECIAL_TOKENS}: build the tokenizer "
                "with GPT1Tokenizer.train, from_released or load"
            )
        self.backend = backend
        self._fingerprint = hashlib.sha256(backend.to_str().encode()).hexdigest()[:16]
        #: All tokens; the BPE vocabulary (40478 released) and the §3.3 tokens' ids after it.
        self.n_tokens = n
        self.vocab_size = self.start = n - 3
        self.delimiter, self.classify = n - 2, n - 1

    @classmethod
    def train(
        cls,
        files: Iterable[str | os.PathLike] | None = None,
        *,
        texts: Iterable[str] | None = None,
        n_merges: int = 40_000,
        show_progress: bool = False,
    ) -> GPT1Tokenizer:
        """Learn exactly ``n_merges`` merges from text ``files`` and/or ``texts``. Two passes:
        tokenizers' trainer breaks ties by symbol id and numbers symbols in hash-map order, so
        the second fixes the base symbols' order (characters, then with ``</w>``)."""
        if files is None and texts is None:
            raise ValueError("give the training corpus as files=[...] or texts=[...]")
        if not isinstance(n_merges, int) or n_merges < 0:
            raise ValueError(f"n_merges={n_merges!r} must be an integer >= 0 (the paper: 40000)")
        paths = [Path(f) for f in files or ()]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"training files not found: {missing}")
        texts = list(texts or ())  # both passes read it

        def corpus() -> Iterator[str]:
            for p in paths:
                with p.open(encoding="utf-8") as f:
                    try:
                        yield from paragraph_pieces(f, LONG_TEXT // 4)
                    except UnicodeDecodeError as e:
                        raise not_utf8(p, e) from e
            for text in texts:
                yield from _long_text_pieces(text)

        vocab, _ = cls._train_once(corpus(), [UNK], 0, show_progress)
        base = sorted(set(vocab) - {UNK}, key=lambda t: (t.endswith(EOW), t))
        if not base:
            raise ValueError("the training corpus is empty (no characters after normalizing)")
        first = [UNK, *base]
        _, merges = cls._train_once(corpus(), first, len(first) + n_merges, show_progress)
        if len(merges) < n_merges:
            raise ValueError(
                f"the corpus supplies only {len(merges)} merges (then every word is one token); "
                f"ask for n_merges <= {len(merges)} or train on more text"
            )
        vocab = {t: i for i, t in enumerate(first)}
        for a, b in merges[:n_merges]:
            vocab.setdefault(a + b, len(vocab))
        return cls(_build(_with_specials(vocab), merges[:n_merges]))

    @staticmethod
    def _train_once(
        corpus: Iterator[str], first: list[str], vocab_size: int, show_progress: bool
    ) -> tuple[dict[str, int], list[tuple[str, str]]]:
        """tokenizers' BPE trainer; ``first`` get the first ids (as its "special tokens")."""
        tk = _build({UNK: 0}, [])
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=first,
            end_of_word_suffix=EOW,
            show_progress=show_progress,
        )
        tk.train_from_iterator(corpus, trainer=trainer)
        model = json.loads(tk.to_str())["model"]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        return model["vocab"], merges

    @classmethod
    def from_released(
        cls, encoder_json: str | os.PathLike, vocab_bpe: str | os.PathLike
    ) -> GPT1Tokenizer:
        """The released vocabulary (``read_released``); specials at 40478..40480."""
        return cls(_build(*read_released(encoder_json, vocab_bpe)))

    @classmethod
    def from_hub(cls, repo_id: str = HUB_ID, revision: str | None = None) -> GPT1Tokenizer:
        """The released vocabulary from the hub repository's ``vocab.json`` + ``merges.txt``."""
        fix = (
            "Point at a local copy instead: GPT1Tokenizer.from_released('encoder_bpe_40000.json', "
            "'vocab_40000.bpe') (the hub's vocab.json and merges.txt work the same)"
        )
        files = ("vocab.json", "merges.txt")
        return cls.from_released(
            *hub_files(repo_id, files, revision, TokenizerUnavailableError, fix)
        )

    @classmethod
    def from_spec(cls, spec: str, train_texts: Iterable[str] | None = None) -> GPT1Tokenizer:
        """A tokenizer from ``spec``: "released" (the hub's), "train:N" (N merges learned on
        ``train_texts``), or what ``load`` reads."""
        if spec == "released":
            return cls.from_hub()
        if spec.startswith("train:"):
            n = spec.split(":", 1)[1]
            if not n.isdigit():
                raise ValueError(
                    f"tokenizer={spec!r}: use 'train:N' with N merges, e.g. 'train:600'"
                )
            if train_texts is None:
                raise ValueError(f"tokenizer={spec!r} needs the texts to learn the merges from")
            return cls.train(texts=train_texts, n_merges=int(n))
        return cls.load(spec)

    @classmethod
    def load(cls, path: str | os.PathLike) -> GPT1Tokenizer:
        """A tokenizer written by ``save`` (its folder or ``tokenizer.json``), or a folder of the
        released files (``RELEASED_FILES``)."""
        p = Path(path)
        if (p / RELEASED_FILES[0]).is_file():
            return cls.from_released(p / RELEASED_FILES[0], p / RELEASED_FILES[1])
        if p.is_dir():
            p = p / TOKENIZER_FILE
        if not p.is_file():
            raise FileNotFoundError(
                f"{p} does not exist: pass a folder written by GPT1Tokenizer.save (a "
                f"checkpoint folder of pretrain holds one) or its {TOKENIZER_FILE}"
            )
        try:
            backend = Tokenizer.from_file(str(p))
        except Exception as e:  # tokenizers raises a bare Exception on a bad file
            raise ValueError(
                f"{p} is not a tokenizers file ({str(e)[:200]}): it is damaged or foreign; "
                "save the tokenizer again with GPT1Tokenizer.save"
            ) from e
        return cls(backend)

    def save(self, folder: str | os.PathLike) -> Path:
        """Write ``folder/tokenizer.json`` (atomically) and return its path."""
        path = Path(folder) / TOKENIZER_FILE
        with atomic_path(path) as tmp:
            tmp.write_text(self.backend.to_str(), encoding="utf-8")
        return path

    def id_to_token(self, i: int) -> str:
        token = self.backend.id_to_token(i) if 0 <= i < self.n_tokens else None
        if token is None:
            raise IndexError(f"token id {i} is outside 0..{self.n_tokens - 1}")
        return token

    def token_to_id(self, token: str) -> int | None:
        """The id of a BPE symbol such as ``"the</w>"``, or None."""
        return self.backend.token_to_id(token)

    def fingerprint(self) -> str:
        """16 hex digits of the SHA-256 of the tokenizer.json content."""
        return self._fingerprint

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; no special tokens are added."""
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """``encode`` of many texts at once, in parallel; texts over ``LONG_TEXT`` characters in
        pieces (``paragraph_pieces``), rejoined with the newline token the cut lost."""
        pieces, owners = [], []
        for i, text in enumerate(texts):
            cut = _long_text_pieces(text)
            pieces += cut
            owners += [i] * len(cut)
        out: list[list[int]] = [[] for _ in texts]
        newline = self.backend.token_to_id("\n" + EOW)
        newline = self.backend.token_to_id(UNK) if newline is None else newline
        encodings = self.backend.encode_batch_fast(pieces, add_special_tokens=False)
        for i, enc in zip(owners, encodings, strict=True):
            if enc.ids:  # white space that ends a text is a piece without tokens
                out[i] += [newline, *enc.ids] if out[i] else enc.ids
        return out

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``: symbols joined, ``</w>`` read as a space (lower-cased, spaCy-split)."""
        return self.backend.decode(list(ids), skip_special_tokens=False)

    def tokens(self, text: str) -> list[str]:
        """The BPE symbols of ``text``, e.g. ``['do</w>', "n't</w>"]``."""
        return self.backend.encode(text, add_special_tokens=False).tokens

    def __repr__(self) -> str:
        return f"GPT1Tokenizer(vocab_size={self.vocab_size}, fingerprint={self.fingerprint()})"


class Remembered:
    """``tok`` whose ``encode`` keeps each text's ids, for texts encoded again and again (a
    zero-shot curve scores the same texts at every checkpoint)."""

    def __init__(self, tok) -> None:
        self.tok, self.ids = tok, {}

    def encode(self, text: str) -> list[int]:
        if text not in self.ids:
            self.ids[text] = self.tok.encode(text)
        return list(self.ids[text])

    def __getattr__(self, name: str):
        return getattr(self.tok, name)
