"""An offline bundle: everything a run at one scale reads, in one folder, for a machine without
a network.

    python -m gpt1lib.harness.bundle --scale small --source ../shared/data --out bundle/

writes ``tokenizer/`` (the released BPE files, or a learned ``tokenizer.json``), the corpus as
token ids (``corpus/{train,valid}.npy.xz``, split as ``corpus.build_corpus`` splits it), each
task split's examples a run of the scale draws (``tasks/<task>/<split>.jsonl.xz``, the union of
its seeded draws and the few the chapters show, each with its index in the original file), and
``manifest.json`` (scale, seed, commit, sources, counts, each file's size and sha256).
``tasks.sources.Bundle`` reads it. It may hold licensed data (Story Cloze): never committed.
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

from ..corpus import Documents, tokenize, train_and_valid
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
    """(task, split) -> the limits of the draws a run of ``S`` makes: the fine-tuned tasks'
    train and eval splits (and those scored beside them), the layer-transfer tasks' dev split,
    the zero-shot sets, and the training examples of the zero-shot thresholds and of the
    protocol selection. A fine-tuned task whose data ``source`` lacks is left out."""
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


def _write_split(out: Path, spec: TaskSpec, split: str, source, limits, seed) -> dict | None:
    """The examples the draws ``limits`` take; None where ``source`` lacks ``split``."""
    try:
        every = load_examples(spec, split, source)
    except (FileNotFoundError, RuntimeError):
        return None
    n = len(every)
    draws = {(None if lim is None or lim >= n else lim, seed) for lim in limits}
    draws |= {(lim, seed) for lim in SHOWN if lim < n}
    keep = sorted({i for lim, s in draws for i in subsample(list(range(n)), lim, s)})
    lines = [
        json.dumps({"i": i, "texts": e.texts, "answers": e.answers, "label": e.label, "uid": e.uid})
        for i, e in ((i, every[i]) for i in keep)
    ]
    name = f"tasks/{spec.name}/{split}.jsonl.xz"
    with atomic_path(out / name) as tmp:
        tmp.write_bytes(lzma.compress("\n".join(lines).encode("utf-8"), preset=6))
    by_size = sorted(draws, key=lambda d: -(n if d[0] is None else d[0]))
    where = _relative(describe_source(spec, split, source), source)
    return {"file": name, "of": n, "examples": len(keep), "draws": by_size, "from": where}


def _tokenizer_for(S, source, corpus, out: Path, bpe_dir) -> GPT1Tokenizer:
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


def _packed(docs: Documents, tok) -> tuple[np.ndarray, bytes]:
    """The token ids of ``docs`` and their ``.npy`` file, xz-compressed."""
    ids, data = tokenize(docs, tok), io.BytesIO()
    np.save(data, ids)
    return ids, lzma.compress(data.getvalue(), preset=6)


def _write_corpus(S, corpus, tok, out: Path, budget_bytes: float, seed: int, log, root) -> dict:
    """The corpus, split and tokenized, its training text cut (after a paragraph) to what
    ``budget_bytes`` holds; returns its manifest entry."""
    entry = {}
    train, valid = train_and_valid(corpus, 0.05, seed, limit=S.corpus_limit)
    for part, docs in (("valid", valid), ("train", train)):
        ids, packed = _packed(docs, tok)
        while part == "train" and len(packed) > budget_bytes:
            chars = int(sum(map(len, docs.texts)) * budget_bytes / len(packed) * 0.98)
            log(f"corpus: {len(packed) / MIB:.1f} MiB is over the budget; cutting to {chars:,}")
            kept, left = [], chars  # one document less or shorter, each cut after a paragraph
            for t in docs.texts:
                if left <= 0:
                    break
                at = t.rfind("\n\n", 0, left)
                kept.append(t if left >= len(t) else t[: at + 2 if at > 0 else left])
                left -= len(kept[-1])
            docs = Documents(kept, f"{docs.source}, cut to its first {chars:,} characters")
            ids, packed = _packed(docs, tok)
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
    for (task, split), limits in reads(S, source).items():
        if entry := _write_split(out, get_task(task), split, source, limits, seed):
            tasks.setdefault(task, {})[split] = entry
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
    p = command_line("gpt1lib.harness.bundle", __doc__)
    p.add_argument("--scale", default="small", help="the scale whose run the bundle serves")
    p.add_argument("--source", required=True, help="task data, or 'fixture'")
    p.add_argument("--out", required=True, help="the bundle folder (an old bundle is replaced)")
    p.add_argument("--corpus", help="None: the fixture at smoke, else <source>/corpus/...")
    p.add_argument("--bpe", help="released BPE files (None: $GPT1_BPE_DIR, <source>/gpt1_bpe)")
    p.add_argument("--seed", type=int, default=0, help="the seed of every draw of examples")
    p.add_argument("--max-mib", type=float, default=48.0, help="the bundle's largest size")
    a = p.parse_args(argv)
    man = build(a.scale, a.source, a.out, a.corpus, a.bpe, a.seed, a.max_mib)
    print(summary(man))
    return man


if __name__ == "__main__":
    main()
