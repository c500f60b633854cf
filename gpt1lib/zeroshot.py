"""Zero-shot behaviours (§5, Figure 2 right): the pre-trained LM scored on tasks it never saw.

The paper's four heuristics, as it states them:

* CoLA: each sentence's average token log-probability under the LM; predict "acceptable" above a
  threshold, chosen where the Matthews correlation on the training split is highest (the paper
  does not say how: our choice).
* SST-2: append the token ``very`` to the sentence and compare the LM's probability of the next
  word being ``positive`` or ``negative`` (a word of several BPE tokens counts with all of them).
  Beside it, NOT the paper's: ``sst2_calibrated`` thresholds log P(positive) - log P(negative)
  where accuracy on training examples is best (a model whose margin leans one way for every
  sentence gives the paper's heuristic one answer for all).
* RACE: the answer with the highest average token log-probability given the document and the
  question (the document loses tokens from its start if the whole does not fit).
* DPRD: replace the definite pronoun with each candidate; the one under which the LM gives the
  REST of the sentence the higher average token log-probability wins. The pronoun is its first
  occurrence after both candidates (else the last); one that ends the sentence scores the whole
  substituted sentence.

The first token of a text has no context and is never scored. Each score is normalised between
a random-guess baseline (0) and the state of the art (1), as Figure 2 does.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from .checkpoint import load_run
from .checks import check_labelled, check_tokenizer
from .facts import HEURISTICS, ZERO_SHOT_TASKS, normalise
from .model import check_ids
from .records import make_record, per_example_record, provenance
from .runtime import attention_backends, fitting, pad_multiple, pick_device, progress_bar
from .stats import METRICS
from .tasks import Example, compute_metrics, get_task, load_examples
from .tokenizer import Remembered
from .transforms import padded_length

#: The split each heuristic scores: the task's evaluation split, but RACE's dev (its test split
#: is Table 3's, which fine-tuning reports).
ZERO_SHOT_SPLITS = {"cola": "dev", "sst2": "dev", "race": "dev", "dprd": "test"}
#: Heuristics whose threshold is chosen on training examples (and the metric it maximises).
THRESHOLDED = {"cola": "matthews", "sst2_calibrated": "accuracy"}
#: Padded tokens a scoring batch holds on a GPU.
GPU_BATCH_TOKENS = 32_768


@dataclass(frozen=True)
class ZeroShotSet:
    """``examples`` of ``split``, and the ``train`` examples a threshold is chosen on."""

    split: str
    examples: Sequence[Example]
    train: Sequence[Example] | None = None


def load_zero_shot(source, limit: int | None = None, seed: int = 0):
    """Each zero-shot task's ``ZeroShotSet`` from ``source`` (``limit`` examples a split), and
    the tasks ``source`` lacks, with the reason."""
    sets, skipped = {}, {}
    for task, split in ZERO_SHOT_SPLITS.items():
        try:
            examples = load_examples(task, split, source, limit, seed)
            thresholded = any(HEURISTICS[h] == task for h in THRESHOLDED)
            train = load_examples(task, "train", source, limit, seed) if thresholded else None
        except (FileNotFoundError, RuntimeError) as e:  # e.g. no local copy of DPRD
            skipped[task] = str(e)
            continue
        sets[task] = ZeroShotSet(split, examples, train)
    return sets, skipped


@torch.no_grad()
def continuation_logprobs(
    model,
    prefixes: Sequence[Sequence[int]],
    continuations: Sequence[Sequence[int]],
    batch_size: int = 64,
) -> list[tuple[float, int]]:
    """For each pair: the summed log-probability of ``continuation`` given ``prefix``, and the
    number of tokens scored. Too long: the prefix loses tokens from its start."""
    n_ctx = model.config.n_ctx
    device = next(model.parameters()).device
    was = model.training
    model.eval()
    seqs, starts = [], []
    for p, c in zip(prefixes, continuations, strict=True):
        c = list(c)[:n_ctx]
        p = list(p)[max(0, len(p) + len(c) - n_ctx) :]
        seqs.append(p + c)
        starts.append(max(1, len(p)))  # the first token of a sequence has no context
    check_ids(torch.tensor([max((max(q) for q in seqs if q), default=0)]), model.config)
    out, multiple = [(0.0, 0)] * len(seqs), pad_multiple(device)  # (log-probability, tokens)

    def score(idx: list[int]) -> None:
        x = pad_sequence([torch.tensor(seqs[i], dtype=torch.long) for i in idx], batch_first=True)
        x = torch.nn.functional.pad(x, (0, padded_length(x.size(1), multiple, n_ctx) - x.size(1)))
        # right-padded with 0; h[r, t] predicts x[r, t + 1]: only the scored ones' logits computed
        spans = [(starts[i] - 1, max(starts[i] - 1, len(seqs[i]) - 1)) for i in idx]
        r = torch.cat([torch.full((hi - lo,), k) for k, (lo, hi) in enumerate(spans)]).long()
        t = torch.cat([torch.arange(lo, hi) for lo, hi in spans]).long()
        with attention_backends(device):
            h, W = model.hidden(x.to(device))
            logp = model.logits(h[r.to(device), t.to(device)], W).float().log_softmax(-1)
        tok_lp = logp.gather(-1, x[r, t + 1].to(device)[:, None]).squeeze(-1).cpu()
        for i, part in zip(idx, tok_lp.split([hi - lo for lo, hi in spans]), strict=True):
            out[i] = (float(part.sum()), part.numel())

    def alone(idx: list[int]) -> str:
        return (
            f"zero-shot scoring of one sequence of {max(len(seqs[i]) for i in idx)} tokens runs "
            "out of GPU memory even alone: score with a model of a shorter context"
        )

    for idx in _batches(seqs, batch_size, multiple, n_ctx):  # cut where memory asks
        fitting(idx, lambda parts: [score(p) for p in parts], alone)
    model.train(was)
    return out


def _batches(seqs, batch_size: int, multiple: int, n_ctx: int) -> list[list[int]]:
    """Indices of ``seqs`` by length in batches of ``batch_size``; where lengths are rounded
    up to a ``multiple`` (a GPU), as many as fit ``GPU_BATCH_TOKENS`` padded tokens instead."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    if multiple == 1:
        return [order[b : b + batch_size] for b in range(0, len(order), batch_size)]
    out: list[list[int]] = [[]]
    for i in order:  # the longest so far is this one: the batch's width if it joins
        width = padded_length(max(len(seqs[i]), 1), multiple, n_ctx)
        if out[-1] and (len(out[-1]) + 1) * width > GPU_BATCH_TOKENS:
            out.append([])
        out[-1].append(i)
    return [b for b in out if b]


def mean_logprobs(model, prefixes, continuations) -> np.ndarray:
    """Each continuation's average token log-probability given its prefix (-inf: no token)."""
    pairs = continuation_logprobs(model, prefixes, continuations)
    return np.array([s / n if n else float("-inf") for s, n in pairs])


def cola_scores(model, tok, texts: Sequence[str]) -> np.ndarray:
    """Average token log-probability of each text (its first token has no context)."""
    ids = [tok.encode(t) for t in texts]
    return mean_logprobs(model, [i[:1] for i in ids], [i[1:] for i in ids])


def best_threshold(scores: np.ndarray, labels: np.ndarray, metric: str = "matthews") -> float:
    """The threshold on ``scores`` (predict 1 above it) with the highest ``metric`` against
    ``labels``; the lowest such threshold on a tie. Every candidate is scored at once."""
    s = np.sort(np.unique(scores))
    candidates = np.concatenate([[s[0] - 1], (s[:-1] + s[1:]) / 2, [s[-1] + 1]])
    pred = (scores[None, :] > candidates[:, None]).astype(int)
    y = np.broadcast_to(np.asarray(labels).astype(int), pred.shape)
    return float(candidates[int(np.argmax(METRICS[metric](pred, y)))])


def sst2_margins(model, tok, texts: Sequence[str]) -> np.ndarray:
    """log P("positive") - log P("negative") as the next word after ``text + " very"``."""
    pos, neg = tok.encode("positive"), tok.encode("negative")
    prefixes = [tok.encode(t + " very") for t in texts]
    lp = continuation_logprobs(model, prefixes * 2, [pos] * len(texts) + [neg] * len(texts))
    return np.array([p[0] - n[0] for p, n in zip(lp[: len(texts)], lp[len(texts) :], strict=True)])


def race_predictions(model, tok, examples: Sequence[Example]) -> np.ndarray:
    """The answer with the highest average log-probability given document and question."""
    prefixes, conts = [], []
    for ex in examples:
        context = tok.encode(f"{ex.texts[0]} {ex.texts[1]}")
        prefixes += [context] * len(ex.answers)
        conts += [tok.encode(a) for a in ex.answers]
    scores = mean_logprobs(model, prefixes, conts)
    per_example = np.split(scores, np.cumsum([len(ex.answers) for ex in examples]))[:-1]
    # the first of the best answers; -1 where no answer has a token to score
    return np.array([s.argmax() if (s > -np.inf).any() else -1 for s in per_example], dtype=int)


def pronoun_span(sentence: str, pronoun: str, candidates: Sequence[str]) -> tuple[int, int]:
    """Where the definite pronoun is: the first occurrence after both candidates, else the last."""
    spans = [m.span() for m in re.finditer(rf"\b{re.escape(pronoun)}\b", sentence, re.I)]
    if not spans:
        raise ValueError(f"pronoun {pronoun!r} does not occur in {sentence!r}")
    firsts = [
        m.end() for c in candidates if (m := re.search(rf"\b{re.escape(c)}\b", sentence, re.I))
    ]
    after = max(firsts) if len(firsts) == len(candidates) else 0
    return next((s for s in spans if s[0] >= after), spans[-1])


def dprd_predictions(model, tok, examples: Sequence[Example]) -> np.ndarray:
    """The candidate under which the rest of the sentence is likelier (average log-prob)."""
    prefixes, conts = [], []
    for ex in examples:
        sentence, pronoun = ex.texts
        lo, hi = pronoun_span(sentence, pronoun, ex.answers)
        rest = tok.encode(sentence[hi:])
        for cand in ex.answers:
            substituted = tok.encode(sentence[:lo] + cand)
            cut = len(substituted) if rest else 1  # nothing after the pronoun: score it all
            prefixes.append(substituted[:cut])
            conts.append(substituted[cut:] + rest)
    scores = mean_logprobs(model, prefixes, conts).reshape(len(examples), -1)
    return scores.argmax(1)


def zero_shot_score(
    model, tok, task: str, examples: Sequence[Example], train: Sequence[Example] | None = None
) -> float:
    """The task's metric (percent) of heuristic ``task`` (a task of ``ZERO_SHOT_TASKS`` or
    ``sst2_calibrated``) on ``examples``."""
    name = task if task in THRESHOLDED else get_task(task).name
    train = train if name in THRESHOLDED else None
    preds = task_predictions(model, tok, name, examples, train)["race" if "race" in name else name]
    spec = get_task(HEURISTICS.get(task, task))
    return compute_metrics(spec, preds, np.array([e.label for e in examples]))[spec.metrics[0]]


def task_predictions(
    model, tok, task: str, examples: Sequence[Example], train: Sequence[Example] | None = None
) -> dict[str, np.ndarray]:
    """Every heuristic of ``task`` on ``examples``, by name: SST-2's paper heuristic and, with
    ``train``, its calibrated threshold, from one scoring of the sentences; every argument
    checked first."""
    name = task if task in THRESHOLDED else get_task(task).name
    if name not in (*HEURISTICS, "race_m", "race_h"):
        raise ValueError(f"no zero-shot heuristic for {name!r}; the paper's: {ZERO_SHOT_TASKS}")
    spec = get_task(HEURISTICS.get(name, name))
    check_tokenizer(tok, model, "score with the tokenizer the model was trained with")
    if name in THRESHOLDED and not train:
        title = spec.title + ("" if name == spec.name else " calibrated")
        raise ValueError(f"{title}'s threshold is chosen on training examples: pass train=")
    if not examples:
        raise ValueError(f"no examples to score {spec.name} on: pass load_examples(...)")
    check_labelled(spec, {"evaluation": examples, "train": train or []})
    if spec.name in ("race", "race_m", "race_h"):
        return {"race": race_predictions(model, tok, examples)}
    if spec.name == "dprd":
        return {"dprd": dprd_predictions(model, tok, examples)}
    scorer = cola_scores if spec.name == "cola" else sst2_margins  # what a threshold is put on
    scores = scorer(model, tok, [e.texts[0] for e in examples])
    out = {"sst2": (scores > 0).astype(int)} if spec.name == "sst2" else {}
    for heuristic, metric in THRESHOLDED.items():
        if HEURISTICS[heuristic] == spec.name and train:
            labels = np.array([e.label for e in train])
            th = best_threshold(scorer(model, tok, [e.texts[0] for e in train]), labels, metric)
            out[heuristic] = (scores > th).astype(int)
    return out


def evaluate_checkpoints(
    folders,
    data: dict[str, ZeroShotSet],
    *,
    device: str | None = None,
    scale: str | None = None,
    experiment: str = "zero_shot",
    progress: bool = True,
    seed: int | None = None,
) -> list[dict]:
    """Records of every heuristic at every checkpoint folder (``step_<updates>``) on ``data``
    (``load_zero_shot``, its examples drawn with ``seed``): ``config`` the model class, the
    heuristic and the normalised score; beside each score, its ``per_example`` record."""
    dev = pick_device(device)
    out, folders = [], list(map(Path, folders))
    if unnamed := [str(f) for f in folders if not re.fullmatch(r"step_\d+", f.name)]:
        raise ValueError(f"{unnamed}: checkpoint folders are named step_<updates>")
    bar = progress_bar(folders, desc="zero-shot", unit="checkpoint", enabled=progress)
    remembered: dict[str, Remembered] = {}  # each text encoded once, not at every checkpoint
    for folder in bar:
        model, tok = load_run(folder, dev)
        tok = remembered.setdefault(tok.fingerprint(), Remembered(tok))
        model.to(dev)
        step = int(folder.name.split("_")[-1])
        for task, zs in data.items():
            spec, examples = get_task(task), zs.examples
            t0 = time.perf_counter()
            by_heuristic = task_predictions(model, tok, task, examples, zs.train)
            wall = time.perf_counter() - t0
            labels, uids = np.array([e.label for e in examples]), [e.uid for e in examples]
            where = {"experiment": experiment, "task": task, "split": zs.split, "step": step}
            fields = {**where, "scale": scale, "seed": seed, "wall_time": wall, **provenance(dev)}
            scored = {
                "checkpoint": folder.name,
                "examples": len(examples),
                "examples_split": zs.split,
            }
            for heuristic, preds in by_heuristic.items():
                value = compute_metrics(spec, preds, labels)[spec.metrics[0]]
                arch, normalised = type(model).__name__, normalise(heuristic, value)
                config = {"arch": arch, "normalised": normalised, "heuristic": heuristic, **scored}
                out.append(make_record(spec.metrics[0], value, config=config, **fields))
                out.append(per_example_record(preds, labels, uids, config=config, **fields))
    return out
