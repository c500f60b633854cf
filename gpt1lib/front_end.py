"""The released code's front end (ftfy.fix_text, text_standardize, spaCy's English tokenizer,
lower-case) as a ``tokenizers`` normalizer and pre-tokenizer.

The normalizer does what ftfy and ``text_standardize`` do to book text, then spaCy's
case-sensitive splits as spaces (the final period, the contractions), then lower-cases; the
pre-tokenizer splits at whitespace, isolates the punctuation runs and applies spaCy's prefixes,
suffixes, infixes and apostrophe special cases. Rare misses (``released_encoder`` measures them):
"Mr.Smith", fullwidth letters, Greek final sigma, "y'all".
"""

from __future__ import annotations

import functools
import re

from tokenizers import Regex, normalizers
from tokenizers import pre_tokenizers as pre

# ftfy.fix_text's parts that touch book text, as literal replacements (cheaper than regexes).
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

# Character classes of spaCy's English rules.
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


def normalizer() -> normalizers.Normalizer:
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


def pre_tokenizer() -> pre.PreTokenizer:
    return pre.Sequence(
        [
            pre.Split(Regex(r"[^\S\n]+"), behavior="removed"),
            pre.Split(Regex(r"\n|" + PUNCT_RUNS), behavior="isolated"),
            pre.Split(Regex(SPACY_RE), behavior="isolated"),
        ]
    )


@functools.lru_cache(maxsize=1)
def _pipeline() -> tuple[normalizers.Normalizer, pre.PreTokenizer]:
    return normalizer(), pre_tokenizer()


def pretokenize(text: str) -> list[str]:
    """The words the BPE sees in ``text`` (normalizer and pre-tokenizer; no vocabulary needed)."""
    norm, pre_tok = _pipeline()
    return [w for w, _ in pre_tok.pre_tokenize_str(norm.normalize_str(text))]
