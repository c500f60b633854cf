"""An offline bundle: everything a run at one scale reads, in one folder, for a machine without
a network (a cluster node, a short GPU lease).

    python -m gpt1lib.harness.bundle --scale small --source ../shared/data --out bundle/

writes

* ``tokenizer/``: the vocabulary the corpus was tokenized with (the released
  ``encoder_bpe_40000.json`` + ``vocab_40000.bpe``, or a learned ``tokenizer.json``);
* ``corpus/train.npy.xz``, ``corpus/valid.npy.xz``: the pre-training corpus as token ids,
  uint16, xz-compressed, split exactly as ``corpus.build_corpus`` splits it;
* ``tasks/<task>/<split>.jsonl.xz``: each task's examples, one a line with its index in the
  original file. A split holds the union of the seeded draws (``tasks.subsample``) a run of the
  scale asks for (its limits, ``harness.recipe``) and the few examples the chapters show
  (``SHOWN``);
* ``manifest.json``: the scale, seed and commit it was built at, the source of every part, the
  counts, and each file's size and sha256.

A bundle is a data source like the others (``tasks.sources.Bundle`` reads it): the same
examples as the original files for the draws it holds, the corpus's ids without tokenizing, its
tokenizer. It may hold licensed data (Story Cloze): the user's copy, never committed
(``/bundle*/`` is git-ignored).
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import lzma
import os
import shutil
from pathlib import Path

import numpy as np

from ..corpus import Documents, load_documents, split_documents, tokenize
from ..experiments import scale_tokenizer
from ..files import atomic_path, file_sha256, write_json
from ..paths import PACKAGE
from ..records import git_commit
from ..scales import SCALES
from ..tasks import (
    SCORED_BESIDE,
    TaskSpec,
    describe_source,
    get_task,
    load_examples,
    subsample,
    unavailable,
)
from ..tasks.bundle import FORMAT, MANIFEST, BundleError
from ..tokenizer import RELEASED_FILES, GPT1Tokenizer
from ..zeroshot import ZERO_SHOT_SPLITS
from . import command_line

SHOWN = (1, 50, 100)  # the draws the chapters show examples from
MIB = 2**20


def reads(S, source) -> dict[tuple[str, str], list]:
    """(task, split) -> the limits of the draws a run of ``S`` makes: each fine-tuned task's train
    and eval split (``Scale.family_tasks``, and those scored beside them, MNLI-mm, RACE-m/h),
    the dev split of the layer-transfer tasks, the zero-shot sets, and the training examples of
    the zero-shot thresholds and of the protocol selection. A fine-tuned task whose data
    ``source`` lacks is left out (it needs both its splits)."""
    want: dict[tuple[str, str], list] = {}

    def add(task: str, split: str, *limits) -> None:
        want.setdefault((task, split), []).extend(limits)

    for name in [t for tasks in S.family_tasks.values() for t in tasks]:
        if unavailable(name, source):
            continue
        train, evals = S.limits_for(name).values()
        add(name, "train", train)
        add(name, get_task(name).eval_split, evals)
        for other in SCORED_BESIDE.get(name, ()):
            add(other, get_task(other).eval_split, evals)
        if name in S.transfer_tasks:  # layer transfer scores on dev
            limits = S.transfer_limits.get(name)
            add(name, "dev", *(limits[1:] if limits else [evals]))
            add(name, "train", *(limits[:1] if limits else []))
    for name, split in ZERO_SHOT_SPLITS.items():
        add(name, split, S.zero_shot_examples)
    for name in ("cola", "sst2"):  # the zero-shot thresholds are chosen on train
        add(name, "train", S.zero_shot_examples)
    for name in S.selection_tasks:
        add(name, "train", S.selection_examples)
    return want


def task_splits(S, source) -> dict[str, dict[str, list[int | None]]]:
    """Task -> split -> the limits of the draws a run at scale ``S`` makes (``reads``),
    for the splits ``source`` holds."""
    out: dict[str, dict[str, list]] = {}
    for (task, split), limits in reads(S, source).items():
        try:
            load_examples(task, split, source, limit=1)
        except (FileNotFoundError, RuntimeError):
            continue
        out.setdefault(task, {})[split] = limits
    return out


def _write_xz(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(lzma.compress(data, preset=6))


def _write_split(out: Path, spec: TaskSpec, split: str, source, limits, seed) -> dict:
    every = load_examples(spec, split, source)
    n = len(every)
    draws = {(None if lim is None or lim >= n else lim, seed) for lim in limits}
    draws |= {(lim, seed) for lim in SHOWN if lim < n}
    keep = sorted({i for lim, s in draws for i in subsample(list(range(n)), lim, s)})
    lines = [
        json.dumps({"i": i, "texts": e.texts, "answers": e.answers, "label": e.label, "uid": e.uid})
        for i, e in ((i, every[i]) for i in keep)
    ]
    name = f"tasks/{spec.name}/{split}.jsonl.xz"
    _write_xz(out / name, "\n".join(lines).encode("utf-8"))
    by_size = sorted(draws, key=lambda d: -(n if d[0] is None else d[0]))
    where = _relative(describe_source(spec, split, source), source)
    return {"file": name, "of": n, "examples": len(keep), "draws": by_size, "from": where}


def _tokenizer_for(S, source, corpus, out: Path, bpe_dir) -> GPT1Tokenizer:
    """The scale's tokenizer (``experiments.scale_tokenizer``: the released files, read from a
    local folder, or the merges learned on the corpus), written into ``out/tokenizer``."""
    folder = out / "tokenizer"
    folder.mkdir(parents=True, exist_ok=True)
    if S.tokenizer != "released":
        tok = scale_tokenizer(S, corpus)
        tok.save(folder)
        return tok
    bpe = Path(bpe_dir or os.environ.get("GPT1_BPE_DIR") or Path(source) / "gpt1_bpe")
    for name in RELEASED_FILES:
        if not (bpe / name).is_file():
            raise FileNotFoundError(
                f"{bpe / name} does not exist: pass --bpe, the folder of the released "
                f"{' and '.join(RELEASED_FILES)} (or set GPT1_BPE_DIR)"
            )
        shutil.copyfile(bpe / name, folder / name)
    return scale_tokenizer(S, corpus, str(folder))


def _cut(text: str, chars: int) -> str:
    """``text`` cut after the paragraph break nearest below ``chars`` characters."""
    if chars >= len(text):
        return text
    at = text.rfind("\n\n", 0, chars)
    return text[: at + 2 if at > 0 else chars]


def _write_corpus(S, corpus, tok, out: Path, budget_bytes: float, seed: int, log, root) -> dict:
    """The corpus split as ``build_corpus`` splits it, tokenized, its training text cut (after a
    paragraph) to what ``budget_bytes`` holds; returns its manifest entry."""
    train = load_documents(corpus, "train", limit=S.corpus_limit)
    try:
        valid = load_documents(corpus, "valid", limit=S.corpus_limit)
    except FileNotFoundError:
        train, valid = split_documents(train, 0.05, seed)
    entry, chars = {}, None
    for part, docs in (("valid", valid), ("train", train)):
        while True:
            if chars is not None:  # one document less or shorter, within the budget
                kept, left = [], chars
                for t in docs.texts:
                    if left <= 0:
                        break
                    kept.append(_cut(t, left))
                    left -= len(kept[-1])
                docs = Documents(kept, f"{docs.source}, cut to its first {chars:,} characters")
            ids = tokenize(docs, tok)
            data = io.BytesIO()
            np.save(data, ids)
            packed = lzma.compress(data.getvalue(), preset=6)
            if part == "valid" or len(packed) <= budget_bytes:
                break
            n_chars = sum(map(len, docs.texts))
            chars = int(n_chars * budget_bytes / len(packed) * 0.98)
            log(f"corpus: {len(packed) / MIB:.1f} MiB is over the budget; cutting to {chars:,}")
        with atomic_path(out / f"corpus/{part}.npy.xz") as tmp:
            tmp.write_bytes(packed)
        budget_bytes -= len(packed)
        entry[part] = {
            "tokens": len(ids),
            "documents": len(docs.texts),
            "bytes": docs.n_bytes,
            "sha256": docs.sha256,
            "source": _relative(docs.source, root),
        }
    return entry


def _relative(desc: str, root) -> str:
    """``desc`` with the machine's path of the source folder ``root`` taken out."""
    if root in ("fixture", "hub", None):
        return desc.replace(str(PACKAGE / "fixtures") + os.sep, "")
    return desc.replace(str(Path(root).resolve()) + os.sep, "").replace(str(root) + os.sep, "")


def build(
    scale: str,
    source,
    out,
    corpus=None,
    bpe=None,
    seed: int = 0,
    max_mib: float = 48.0,
    log=print,
) -> dict:
    """Write the bundle of ``scale`` from the task data in ``source`` and the corpus ``corpus``
    (None: the fixture at smoke scale, else ``<source>/corpus/gutenberg_novels``) into ``out``;
    the corpus is cut to keep the whole within ``max_mib``. Returns the manifest."""
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r}: choose one of {tuple(SCALES)}")
    S, out = SCALES[scale], Path(out)
    if out.exists() and any(out.iterdir()):
        if not (out / MANIFEST).is_file():
            raise FileExistsError(f"{out} holds files and is no bundle: choose an empty folder")
        shutil.rmtree(out)  # an older bundle: rebuilt whole
    if corpus is None:
        corpus = "fixture" if S.corpus == "fixture" else Path(source) / "corpus/gutenberg_novels"
    tok = _tokenizer_for(S, source, corpus, out, bpe)
    tasks: dict[str, dict] = {}
    for task, splits in task_splits(S, source).items():
        for split, limits in splits.items():
            tasks.setdefault(task, {})[split] = _write_split(
                out, get_task(task), split, source, limits, seed
            )
    used = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    left = max_mib * MIB - used - 256 * 1024  # the manifest's room
    root = source if str(corpus) == "fixture" else Path(corpus).resolve().parent.parent
    corpus_entry = _write_corpus(S, corpus, tok, out, left, seed, log, root)
    files = {
        f.relative_to(out).as_posix(): {"bytes": f.stat().st_size, "sha256": file_sha256(f)}
        for f in sorted(out.rglob("*"))
        if f.is_file()
    }
    man = {
        "format": FORMAT,
        "scale": scale,
        "seed": seed,
        "commit": git_commit(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "tokenizer": {
            "spec": S.tokenizer,
            "fingerprint": tok.fingerprint(),
            "tokens": tok.n_tokens,
        },
        "corpus": corpus_entry,
        "tasks": tasks,
        "files": files,
        "bytes": sum(f["bytes"] for f in files.values()),
        "max_mib": max_mib,
    }
    write_json(out / MANIFEST, man)
    man["bytes"] += (out / MANIFEST).stat().st_size
    if man["bytes"] > max_mib * MIB:
        raise BundleError(f"{out}: {man['bytes'] / MIB:.1f} MiB is over --max-mib {max_mib}")
    return man


def summary(man: dict) -> str:
    """A few lines on what a bundle holds and its size."""
    c = man["corpus"]

    def size(prefix: str) -> float:
        return sum(f["bytes"] for k, f in man["files"].items() if k.startswith(prefix))

    lines = [
        f"bundle for scale {man['scale']} (seed {man['seed']}, commit {man['commit']}): "
        f"{man['bytes'] / MIB:.2f} MiB of at most {man['max_mib']:g}",
        f"  tokenizer  {size('tokenizer/') / MIB:6.2f} MiB  {man['tokenizer']['spec']}, "
        f"{man['tokenizer']['tokens']:,} tokens",
        f"  corpus     {size('corpus/') / MIB:6.2f} MiB  train {c['train']['tokens']:,} tokens "
        f"({c['train']['source']}), valid {c['valid']['tokens']:,}",
        f"  tasks      {size('tasks/') / MIB:6.2f} MiB",
    ]
    for task, splits in man["tasks"].items():
        held = ", ".join(f"{s} {e['examples']:,}/{e['of']:,}" for s, e in splits.items())
        lines.append(f"    {task:12s} {held}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    """``python -m gpt1lib.harness.bundle``: build a bundle and print what it holds."""
    p = command_line("gpt1lib.harness.bundle", __doc__)
    p.add_argument("--scale", default="small", help="the scale whose run the bundle serves")
    p.add_argument(
        "--source", required=True, help="task data in the official layouts, or 'fixture'"
    )
    p.add_argument(
        "--out", required=True, help="the bundle folder (made; an old bundle is replaced)"
    )
    p.add_argument(
        "--corpus",
        help="corpus folder (None: the fixture at smoke, else <source>/corpus/gutenberg_novels)",
    )
    p.add_argument(
        "--bpe",
        help="folder of the released BPE files (None: $GPT1_BPE_DIR, else <source>/gpt1_bpe)",
    )
    p.add_argument("--seed", type=int, default=0, help="the seed of every draw of examples")
    p.add_argument("--max-mib", type=float, default=48.0, help="the bundle's largest size")
    a = p.parse_args(argv)
    man = build(a.scale, a.source, a.out, a.corpus, a.bpe, a.seed, a.max_mib)
    print(summary(man))
    return man


if __name__ == "__main__":
    main()
