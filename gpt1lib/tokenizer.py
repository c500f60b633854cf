"""GPT-1's byte-pair encoding (the paper, §4.1 "Model specifications": 40,000 merges, learned on
text cleaned with ftfy, its punctuation and white space standardised, and split by spaCy).

The released vocabulary has 40,478 tokens (``<unk>``, 476 base symbols, the merges,
``\\n</w>``), then the three §3.3 tokens ``_start_ _delimiter_ _classify_`` at 40478..40480.
``GPT1Tokenizer`` runs the same BPE on Hugging Face ``tokenizers`` (Rust, parallel, no spaCy),
with the released code's front end (ftfy, text_standardize, spaCy, lower-case) rewritten:

* the normalizer does what ftfy and ``text_standardize`` do to book text (curly quotes, cp1252
  dashes and quotes, ligatures, line breaks, dashes, ellipses, one ``\\n`` per line break), then
  spaCy's case-sensitive splits, written as spaces: the final period ("Elliot." but "Mr." "A."
  "U.S.") and the contractions ("don't" -> do n't, "cannot" -> can not, but "DON'T" whole);
  then it lower-cases;
* the pre-tokenizer splits at whitespace, isolates text_standardize's punctuation runs, and
  applies spaCy's prefixes, suffixes ("'s", quotes, brackets), infixes ("...") and the special
  cases that keep an apostrophe ("'em", "nothin'").

It gives the released code's ids for all but rare text (spaCy's special-case matcher inside
words, "Mr.Smith"; fullwidth letters; Greek final sigma; "y'all", "I'ma"):
``gpt1lib.released_encoder`` runs the released pipeline and measures the difference.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import huggingface_hub
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, trainers
from tokenizers import pre_tokenizers as pre

from .model import SPECIAL_TOKENS

HUB_ID = "openai-community/openai-gpt"
UNK = "<unk>"
EOW = "</w>"  # end-of-word suffix of the last symbol of every word
TOKENIZER_FILE = "tokenizer.json"


class TokenizerUnavailableError(RuntimeError):
    """The vocabulary could not be fetched (hub unreachable or files missing)."""


# ---------------------------------------------------------------------------------------------
# Normalizer: ftfy.fix_text (the parts that touch book text) + text_standardize + lower-case.

# Literal replacements only: they cost a fraction of a regular expression's scan.
_FTFY = [
    *[("\x85", "..."), ("\x82", "'"), ("\x91", "'"), ("\x92", "'"), ("\x84", '"'), ("\x93", '"')],
    *[("\x94", '"'), ("\x96", "\u2013"), ("\x97", "\u2014")],  # fix_c1_controls (cp1252)
    *[("\r\n", "\n"), ("\r", "\n"), ("\u2028", "\n"), ("\u2029", "\n")],  # fix_line_breaks
    *[(q, "'") for q in "\u02bc\u2018\u2019\u201a\u201b"],  # uncurl_quotes
    *[(q, '"') for q in "\u201c\u201d\u201e\u201f"],
    *[("\ufb00", "ff"), ("\ufb01", "fi"), ("\ufb02", "fl"), ("\ufb03", "ffi")],  # ligatures
    *[("\ufb04", "ffl"), ("\ufb06", "st")],
]
#: text_standardize's replacements.
STANDARDIZE = {"\u2014": "-", "\u2013": "-", "\u2015": "-", "\u2026": "...", "\u00b4": "'"}

# ---------------------------------------------------------------------------------------------
# Character classes shared by the normalizer and the pre-tokenizer (spaCy's English rules).

_QUOTES = "'\"`\u2018\u2019\u201a\u201e\u201c\u201d\u00ab\u00bb\u00b4"
_PUNCT = r"\u2026,:;!?\u00bf\u061f\u00a1()\[\]{}<>_#*&\u00b7"
_PUNCT += r"\u3002\uff1f\uff01\uff0c\u3001\uff1b\uff1a\uff5e\u0964\u060c\u06d4\u061b\u066a"
_AFFIX = rf"[{_PUNCT}{_QUOTES}\p{{So}}]"  # split off either end of a word, one at a time
_PREFIX_ONLY = r"[\u00a7%=$\u00a3\u20ac\u00a5]|\+(?![0-9])"
_SUFFIXES = rf"(?:'[sS]|''|\.\.+|{_AFFIX}|(?<=[0-9])[%$\u00a3\u20ac\u00a5+])*"
#: text_standardize puts spaces around every run of these characters.
PUNCT_RUNS = r"""-+|~+|!+|"+|;+|\?+|\++|,+|\)+|\(+|\\+|/+|\*+|\[+|\]+|\}+|\{+|\|+|_+"""
_RUN_CHARS = r"""\-~!";?+,)(\\/*\[\]}{|_"""
# Before text_standardize's spacing, a word starts after a space, a prefix or a punctuation run,
# and ends where only suffixes are left before a space or a punctuation run.
_WORD_START = rf"(?:^|[\s{_PUNCT}{_QUOTES}{_RUN_CHARS}\u00a7%=$\u00a3\u20ac\u00a5])"
# spaCy splits a final period after a lower-case letter, a digit or punctuation, or after two
# upper-case letters ("Elliot." "1760." "AB."), not after one ("A." "U.S.") ...
_PERIOD_AFTER = rf"[0-9\p{{Ll}}%\u00b2\-+{_PUNCT}{_QUOTES}]|\p{{Lu}}\p{{Lu}}"
_PERIOD = rf"(?<!\.)\.(?!\.)(?<=(?:{_PERIOD_AFTER})\.)"
_WORD_END = rf"(?={_SUFFIXES}(?:[\s{_RUN_CHARS}]|\z))"
# ... unless the word is one of its special cases (tokenizer_exceptions, English).
_ABBREVIATIONS = (
    "Adm Ak Ala Apr Ariz Ark Aug Bros Calif Co Colo Conn Corp D.C Dec Del Dr E.G E.g Feb Fla Ga "
    "Gen Gov I.E I.e Ia Id Ill Inc Ind Jan Jr Jul Jun Kan Kans Ky La Ltd Mar Mass Md Messrs Mich "
    "Minn Miss Mo Mont Mr Mrs Ms Mt N.C N.D N.H N.J N.M N.Y Neb Nebr Nev Nov Oct Okla Ore Pa "
    "Ph.D Prof Rep Rev S.C Sen Sep Sept St Tenn Va Wash Wis a.m co e.g i.e p.m v.s vs "
    "[a-z\u00e4\u00f6\u00fc]"
)


def _alt(words: str, title: bool = False) -> str:
    """A regex alternation of ``words``; ``title`` adds the capitalised forms (spaCy has both)."""
    if title:
        return "(?:" + "|".join(f"[{w[0].upper()}{w[0]}]{w[1:]}" for w in words.split()) + ")"
    return "(?:" + "|".join(w.replace(".", r"\.") for w in words.split()) + ")"


# spaCy's contractions, lower-case or capitalised only ("DON'T" stays one token).
_NT = "ai are ca could dare did does do had has have is may might must need ought sha should "
_NT += "was were wo would"
_PRON = "he how i it she that there these they this those we what when where who why you"
_ARE = "how there these they those we what when where who why you"
_HAVE = "could how i might must not should there these they those we what when where who why "
_HAVE += "would you"
_IS = "he how she that there this what when where who why"  # "hes" but not "its" or "lets"


def _drop(words: str, *drop: str) -> str:
    return " ".join(w for w in words.split() if w not in drop)


#: (part, the words it is split from, what may follow it): a space goes before ``part``.
_CONTRACTIONS = [
    ("n't", _alt(_NT, True), "(?:'ve)?"),  # don't -> do n't, can't've -> ca n't 've
    ("nt", _alt(_NT, True), "(?:ve)?"),  # dont -> do nt
    ("'d", _alt(_PRON, True), "(?:'ve)?"),
    ("d", _alt(_drop(_PRON, "she", "i"), True), "(?:ve)?"),  # hed wed, but shed
    ("d", "i", "(?:ve)?"),
    ("d", "I", r"(?:ve)?(?!\.)"),  # Id -> I d, but "Id." is an abbreviation (Idaho)
    ("'ll", _alt(_PRON, True), "(?:'ve)?"),
    ("ll", _alt(_drop(_PRON, "he", "i", "she", "we"), True), "(?:ve)?"),  # not hell ill well
    ("ll", "(?:[Hh]e|[Ii]|[Ss]he|[Ww]e)", "ve"),  # but hellve, illve ...
    ("d", "[Ss]he", "ve"),
    ("'ve", "(?:n't|'d|'ll)", ""),  # the second split of "can't've", "I'd've"
    ("ve", "(?:nt|d|ll)", ""),
    ("'re", _alt(_ARE, True), ""),
    ("re", _alt(_drop(_ARE, "we", "who"), True), ""),  # not were whore
    ("'ve", _alt(_HAVE, True), ""),
    ("ve", _alt(_HAVE, True), ""),
    ("'m", "[Ii]", ""),
    ("m", "[Ii]", ""),
    ("s", _alt(_IS, True), ""),
    ("not", "[Cc]an", ""),  # cannot -> can not
    ("na", "[Gg]on", ""),
    ("ta", "[Gg]ot", ""),
    ("all", "y", ""),
    ("on", "[Cc]'m", ""),
]


def _normalizer() -> normalizers.Normalizer:
    """ftfy + text_standardize + spaCy's case-sensitive splits (as spaces) + lower-case."""
    steps: list[normalizers.Normalizer] = [normalizers.NFC()]
    steps += [normalizers.Replace(p, r) for p, r in [*_FTFY, *STANDARDIZE.items()]]
    # Line breaks with only whitespace between them count once (text_standardize); the
    # pre-tokenizer drops the other whitespace and isolates each "\n".
    steps += [normalizers.Replace(Regex(r"\n\s*\n"), "\n"), normalizers.Strip()]
    # The final period first, while "he'd." is one word: spaCy splits it to he 'd . but
    # keeps the "d." of a word "'d." (a prefix ' and the special case "d.").
    # A prefix character starts the word only if no letter or digit precedes it.
    start = rf"(?:^|[\s{_RUN_CHARS}]|(?<![\p{{L}}\p{{N}}.]){_WORD_START})"
    # "hed." "im." are he d. / i m. (contractions ending in a special case "d." "m.")
    kept = rf"{_ABBREVIATIONS} {_alt(_drop(_PRON, 'she'), True)}d [Ii]m {_alt(_IS, True)}s"
    abbreviation = rf"(?<!{start}{_alt(kept)}\.)"
    steps += [
        normalizers.Replace(Regex(rf"{_PERIOD}{_WORD_END}{abbreviation}"), " ."),
        normalizers.Replace(Regex(r"(?<=\p{Ll})\.(?=\p{Lu})(?<!Ph\.)"), " . "),  # "end.The"
    ]
    # A word "'ve" or "'m" of the text is "'" + "ve" for spaCy; a space after the apostrophe
    # keeps the pre-tokenizer from taking it for one split off "I've" below.
    standalone = rf"'(?=(?:[Vv][Ee]|[Mm]){_WORD_END})(?<={_WORD_START}')"
    steps.append(normalizers.Replace(Regex(standalone), "' "))
    for part, after, tail in _CONTRACTIONS:
        # the literal first, then the cheap test (most occurrences are inside a longer word)
        p = re.escape(part)
        pattern = rf"{p}(?={tail}\.?{_WORD_END})(?<={_WORD_START}{after}{p})"
        steps.append(normalizers.Replace(Regex(pattern), " " + part))
    steps.append(normalizers.Lowercase())  # the released code lower-cases each spaCy token
    return normalizers.Sequence(steps)


# ---------------------------------------------------------------------------------------------
# Pre-tokenizer: split at spaces, isolate the punctuation runs, then spaCy's prefixes, suffixes
# and infixes as one regular expression over each word. Every character belongs to a match, so
# each match starts where the previous one ended; alternatives are tried in order. The core of a
# word runs until only suffixes are left (spaCy strips them one by one from the right).

_INFIX = r"\.\.+|\u2026|\p{So}|(?<=[\p{L}0-9])[:<>=](?=\p{L})|(?<=[0-9])\^(?=[0-9\-])"
# Units split off a number ("2ft" -> 2 ft), lower-cased from spaCy's list.
_UNITS = _alt(
    "km m dm cm mm ha \u00b5m nm yd in ft kg g mg \u00b5g t lb oz kmh mph hpa pa mbar mb kb gb tb k"
)
_END = rf"(?={_SUFFIXES}\z)"
# Letters and digits never start a suffix or an infix: only other characters need the look-ahead.
_CORE = rf"(?:[\p{{L}}\p{{N}}]+|(?!{_INFIX}|{_SUFFIXES}\z)[^\s])+"
_KEEP = [  # special cases that keep an apostrophe (the normalizer made the first group words)
    rf"'(?:s|d|ll|re|ve|m|em|bout|cause|cos|coz|cuz|nuff)(?={_END})",
    rf"(?:doin|goin|havin|lovin|nothin|nuthin|somethin|ol)'(?={_END})",
    "''",
]
_NUMBER = rf"[0-9]+(?={_UNITS}[\u00b2\u00b3]?{_END})"
# A word of letters only (or digits only) is one token: tried first, as most words are.
SPACY_RE = "|".join(
    [r"\p{L}+\z|[0-9]+\z|\s+", *_KEEP, _INFIX, _AFFIX, _PREFIX_ONLY, _NUMBER, _CORE]
)


def _pre_tokenizer() -> pre.PreTokenizer:
    return pre.Sequence(
        [
            pre.Split(Regex(r"[^\S\n]+"), behavior="removed"),
            pre.Split(Regex(r"\n|" + PUNCT_RUNS), behavior="isolated"),
            pre.Split(Regex(SPACY_RE), behavior="isolated"),
        ]
    )


@functools.lru_cache(maxsize=1)
def _pipeline() -> tuple[normalizers.Normalizer, pre.PreTokenizer]:
    return _normalizer(), _pre_tokenizer()


def pretokenize(text: str) -> list[str]:
    """The words the BPE sees in ``text`` (normalizer and pre-tokenizer; no vocabulary needed)."""
    normalizer, pre_tokenizer = _pipeline()
    return [w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))]


def _build(vocab: dict[str, int], merges: list[tuple[str, str]]) -> Tokenizer:
    """A GPT-1 tokenizer over the BPE ``vocab`` (specials included) and ``merges``."""
    tk = Tokenizer(models.BPE(vocab, merges, unk_token=UNK, end_of_word_suffix=EOW))
    tk.normalizer = _normalizer()
    tk.pre_tokenizer = _pre_tokenizer()
    tk.decoder = decoders.BPEDecoder(suffix=EOW)
    return tk


def _with_specials(vocab: dict[str, int]) -> dict[str, int]:
    """``vocab`` with ids 0..n-1 checked, and the three §3.3 tokens appended at n, n+1, n+2."""
    n = len(vocab)
    if sorted(vocab.values()) != list(range(n)):
        raise ValueError(f"vocabulary ids must be 0..{n - 1} without gaps or repeats")
    clash = [t for t in SPECIAL_TOKENS if t in vocab]
    if clash:
        raise ValueError(f"the vocabulary already holds {clash}; they are appended after it")
    return {**vocab, **{t: n + i for i, t in enumerate(SPECIAL_TOKENS)}}


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


#: Texts longer than this are encoded (and learned from) in pieces of about a quarter of it.
LONG_TEXT = 1 << 16


def paragraph_pieces(text: str | Iterable[str], size: int) -> Iterator[str]:
    """``text`` (or its lines, each with its ``\\n``) in pieces of at least ``size`` characters
    (the last may be shorter), each cut after the line break that ends one or more blank lines.

    The pieces join to the text. The normalizer and pre-tokenizer take a line break for the
    start or end of a text, so the pieces' ids, joined, are the text's less the ``\\n</w>`` at
    each cut (none where only white space follows): ``encode_batch`` puts it back; the corpus
    and the trainer leave it out (a word of one symbol has no pair to merge).
    """
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

    # --- construction -----------------------------------------------------------------------

    @classmethod
    def train(
        cls,
        files: Iterable[str | os.PathLike] | None = None,
        *,
        texts: Iterable[str] | None = None,
        n_merges: int = 40_000,
        show_progress: bool = False,
    ) -> GPT1Tokenizer:
        """Learn exactly ``n_merges`` merges from text ``files`` and/or ``texts``.

        The vocabulary is ``<unk>``, the base symbols seen (characters, then characters +
        ``</w>``, each in code point order), one token per merge (a merge whose result already
        exists adds none), then the specials. Files, and texts over ``LONG_TEXT`` characters, are
        fed in pieces of a few pages cut between paragraphs (``paragraph_pieces``): line breaks
        inside a piece are learned as ``\\n</w>``; the one at a cut is left out, which changes no
        merge (a word of one symbol has no pair).

        Two passes: the first finds the base symbols, the second learns the merges with those
        symbols numbered in a fixed order. tokenizers' trainer breaks ties between equally
        frequent pairs by symbol id and numbers the ``x</w>`` symbols in hash-map order, so one
        pass gives late merges that change from run to run; two give the same tokenizer.
        """
        if files is None and texts is None:
            raise ValueError("give the training corpus as files=[...] or texts=[...]")
        if not isinstance(n_merges, int) or n_merges < 0:
            raise ValueError(f"n_merges={n_merges!r} must be an integer >= 0 (the paper: 40000)")
        paths = [Path(f) for f in files or ()]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"training files not found: {missing}")
        texts = list(texts or ())  # both passes read it

        def corpus() -> Iterator[str]:  # pieces of a few pages, for speed
            for p in paths:
                with p.open(encoding="utf-8") as f:
                    yield from paragraph_pieces(f, LONG_TEXT // 4)
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
        """The released vocabulary: ``encoder_bpe_40000.json`` + ``vocab_40000.bpe`` (or the
        hub's ``vocab.json`` + ``merges.txt``); ids are the json's, specials 40478..40480."""
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
        return cls(_build(_with_specials(vocab), merges))

    @classmethod
    def from_hub(cls, repo_id: str = HUB_ID, revision: str | None = None) -> GPT1Tokenizer:
        """The released vocabulary from the hub repository's ``vocab.json`` + ``merges.txt``."""
        paths = []
        for name in ("vocab.json", "merges.txt"):
            try:
                paths.append(huggingface_hub.hf_hub_download(repo_id, name, revision=revision))
            except Exception as e:  # offline, unreachable, gated, or missing file
                raise TokenizerUnavailableError(
                    f"could not get {name!r} of {repo_id!r} from the Hugging Face hub "
                    f"({type(e).__name__}; HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '0')})"
                    ". Point at a local copy instead: GPT1Tokenizer.from_released("
                    "'encoder_bpe_40000.json', 'vocab_40000.bpe') (the hub's vocab.json and "
                    "merges.txt work the same)"
                ) from e
        return cls.from_released(*paths)

    @classmethod
    def load(cls, path: str | os.PathLike) -> GPT1Tokenizer:
        """A tokenizer written by ``save``: its folder, or the ``tokenizer.json`` itself."""
        p = Path(path)
        if p.is_dir():
            p = p / TOKENIZER_FILE
        if not p.is_file():
            raise FileNotFoundError(
                f"{p} does not exist: pass a folder written by GPT1Tokenizer.save or its "
                f"{TOKENIZER_FILE}"
            )
        return cls(Tokenizer.from_file(str(p)))

    def save(self, folder: str | os.PathLike) -> Path:
        """Write ``folder/tokenizer.json`` (atomically) and return its path."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{TOKENIZER_FILE}.{os.getpid()}.tmp"
        tmp.write_text(self.backend.to_str(), encoding="utf-8")
        os.replace(tmp, folder / TOKENIZER_FILE)
        return folder / TOKENIZER_FILE

    # --- vocabulary ---------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """BPE tokens without the three specials (40478 for the released vocabulary)."""
        return self.backend.get_vocab_size(with_added_tokens=True) - len(SPECIAL_TOKENS)

    @property
    def n_tokens(self) -> int:
        """All tokens: the vocabulary plus ``_start_ _delimiter_ _classify_``."""
        return self.vocab_size + len(SPECIAL_TOKENS)

    @property
    def start(self) -> int:
        return self.vocab_size

    @property
    def delimiter(self) -> int:
        return self.vocab_size + 1

    @property
    def classify(self) -> int:
        return self.vocab_size + 2

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
        return hashlib.sha256(self.backend.to_str().encode("utf-8")).hexdigest()[:16]

    # --- text <-> ids -------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; no special tokens are added."""
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """``encode`` of many texts at once, in parallel in Rust.

        Texts over ``LONG_TEXT`` characters are cut between paragraphs (``paragraph_pieces``)
        and their pieces encoded in parallel (tokenizers' normalizer also slows down on very long
        strings), then joined by the newline token: the same ids, as a line break is one token.
        """
        pieces, owners = [], []
        for i, text in enumerate(texts):
            cut = _long_text_pieces(text)
            pieces += cut
            owners += [i] * len(cut)
        encode = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)  # >= 0.20
        out: list[list[int]] = [[] for _ in texts]
        newline = self.backend.token_to_id("\n" + EOW)
        newline = self.backend.token_to_id(UNK) if newline is None else newline
        for i, enc in zip(owners, encode(pieces, add_special_tokens=False), strict=True):
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
