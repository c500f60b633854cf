"""One function per chapter experiment, each taking a ``Scale`` and a data source.

A chapter calls its experiment, and so does the recorded run (``harness.runner``), so the two
cannot disagree: tasks, arms and protocols come from the ``Scale`` alone, and the runs land in
``out_dir/<scale>/<experiment>/...`` with the same records.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from .checkpoint import latest_checkpoint, load_run, read_state
from .corpus import build_corpus, load_documents
from .fast import FastGPT
from .finetune import FinetuneRun, finetune
from .lstm import LSTMLM
from .paths import shown
from .pretrain import PretrainResult, check_resume, pretrain, run_config
from .records import append_records, make_record, provenance
from .runtime import gathered_warnings, pick_device, seed_everything
from .scales import SCALES, Scale
from .settings import PretrainConfig
from .tasks import SCORED_BESIDE, DataWarning, open_source, unavailable
from .tokenizer import GPT1Tokenizer
from .zeroshot import evaluate_checkpoints, load_zero_shot

# ---------------------------------------------------------------- pre-training


def pretrain_dir(out_dir: str | os.PathLike, scale: str, arch: str = "gpt") -> Path:
    """``out_dir/<scale>/pretrain`` (the LSTM's: ``pretrain_lstm``)."""
    return Path(out_dir, scale, "pretrain" if arch == "gpt" else f"pretrain_{arch}")


def checkpoint_tokenizer(folder: str | os.PathLike) -> GPT1Tokenizer | None:
    """The tokenizer of the newest checkpoint in ``folder``, or None."""
    ckpt = latest_checkpoint(folder)
    return GPT1Tokenizer.load(ckpt) if ckpt is not None else None


def scale_tokenizer(S: Scale, corpus, spec: str | None = None, limit: int | None = None):
    """The tokenizer a run of ``S`` on ``corpus`` starts with: the one the corpus's ids were
    made with where it stores ids (a bundle), else ``spec`` (None: the scale's): "released",
    "train:N" (learned on ``limit`` of the corpus's documents), or a folder."""
    if (folder := open_source(corpus).tokenizer_folder()) is not None:
        return GPT1Tokenizer.load(folder)
    spec = spec or S.tokenizer
    texts = None
    if spec.startswith("train:"):
        texts = load_documents(corpus, "train", limit=limit or S.corpus_limit).texts
    return GPT1Tokenizer.from_spec(spec, texts)


def new_model(S: Scale, vocab_size: int, arch: str = "gpt", **overrides):
    """A fresh model of the scale's shape."""
    if arch == "lstm":
        n_ctx = S.model_config().n_ctx
        return LSTMLM(S.lstm_config(vocab_size=vocab_size, n_ctx=n_ctx, **overrides))
    return FastGPT(S.model_config(vocab_size=vocab_size, **overrides))


def _scale_of(meta: dict) -> str | None:
    """The scale whose model has the blocks, heads and width (an LSTM's units) of ``meta``."""
    for name, S in SCALES.items():
        own = asdict(S.lstm_config() if meta.get("arch") == "LSTMLM" else S.model_config())
        shape = [k for k in ("n_layer", "n_head", "n_embd", "n_hidden") if k in own]
        if all(own[k] == meta.get("config", {}).get(k) for k in shape):
            return name
    return None


@dataclass
class Pretraining:
    """A pre-training run about to start (``pretraining``)."""

    S: Scale
    arch: str
    tok: GPT1Tokenizer
    data: object  # a corpus.Corpus
    cfg: PretrainConfig
    folder: Path
    model_overrides: dict

    def model(self):
        """A fresh model of the scale's shape, seeded with the run's seed."""
        seed_everything(self.cfg.seed)
        return new_model(self.S, self.tok.vocab_size, self.arch, **self.model_overrides)

    def run(self, model=None, *, resume: bool = True, **kw) -> PretrainResult:
        """Pre-train ``model`` (None: a fresh one) into ``folder``, from its last checkpoint
        where ``resume`` and there is one; ``kw``: ``pretrain``'s."""
        model = model if model is not None else self.model()
        go_on = resume and latest_checkpoint(self.folder) is not None
        return pretrain(
            model, self.tok, self.data, self.cfg, self.folder, resume=go_on, scale=self.S.name, **kw
        )


def pretraining(
    S: Scale,
    corpus=None,
    out_dir: str | os.PathLike = "runs",
    *,
    arch: str = "gpt",
    folder: str | os.PathLike | None = None,
    tokenizer: str | None = None,
    corpus_limit: int | None = None,
    model_overrides: dict | None = None,
    **settings,
) -> Pretraining:
    """Chapter 03's run of ``S`` (``arch`` "gpt", or "lstm" for Table 5's baseline) on
    ``corpus`` (None: the scale's) in ``folder`` (None: ``pretrain_dir``). The tokenizer is the
    run's own, else the transformer's for the LSTM, else ``scale_tokenizer``'s; ``settings``:
    ``PretrainConfig``'s fields."""
    corpus, limit = corpus or S.corpus, corpus_limit or S.corpus_limit
    folder = Path(folder) if folder is not None else pretrain_dir(out_dir, S.name, arch)
    cfg = replace(S.pretrain, experiment=f"pretrain:{arch}", **settings)
    overrides = model_overrides or {}
    gpt = pretrain_dir(out_dir, S.name, "gpt")
    if (tok := checkpoint_tokenizer(folder)) is not None:  # a resume: checked before the corpus
        ckpt = latest_checkpoint(folder)
        with torch.device("meta"):  # the model's config, without memory for its weights
            model = new_model(S, tok.vocab_size, arch, **overrides)
        its = _scale_of(read_state(ckpt).get("run_config", {}).get("model", {}))
        shape = f"the {its} scale's shape" if its else "the shape of no scale"
        fix = (
            f"its settings are not the {S.name} scale's now: delete {shown(folder)} (or pass "
            f"another out_dir) to pre-train the {S.name} scale's model afresh"
        )
        what = f"model or recipe than the {S.name} scale (its model has {shape})"
        check_resume(ckpt, run_config(model, cfg), what, fix)
    elif arch != "lstm":
        tok = scale_tokenizer(S, corpus, tokenizer, limit)
    elif (tok := checkpoint_tokenizer(gpt)) is None:
        raise FileNotFoundError(
            f"{shown(gpt)} holds no transformer run, whose tokenizer the LSTM reads: "
            "pre-train the transformer first"
        )
    n_ctx = S.model_config().n_ctx
    data = build_corpus(
        tok, n_ctx, corpus, seed=cfg.seed, limit=limit, cache_dir=Path(out_dir) / "cache"
    )
    return Pretraining(S, arch, tok, data, cfg, folder, overrides)


# ---------------------------------------------------------------- fine-tuning
# Each experiment takes ``base``, a ``FinetuneRun`` holding what its runs share.


def _one(S: Scale, base: FinetuneRun, task: str, folder: str, cfg=None, **settings):
    """``base`` for ``task`` with protocol ``cfg`` (None: base's) and the scale's example
    limits where ``base`` gives none, into ``base.out_dir/<scale>/<folder>/<task>``."""
    limits = S.limits_for(task, base.limit, base.eval_limit)
    out = Path(base.out_dir, S.name, folder, task) if base.out_dir is not None else None
    cfg = cfg or base.cfg
    return replace(base, task=task, scale=S.name, out_dir=out, cfg=cfg, **limits, **settings)


def _finetune_all(tok, runs: Iterable) -> dict:
    """Key -> ``finetune``'s result for each (key, pre-trained model, run) of ``runs``."""
    with gathered_warnings(DataWarning):
        return {key: finetune(model, tok, run) for key, model, run in runs}


def finetune_tasks(S: Scale, pretrained, tok, tasks: Iterable[str], base: FinetuneRun):
    """Chapters 05-08: each of ``tasks`` fine-tuned and scored, the tasks sharing its data
    (MNLI-mm, RACE-m/h) beside it. Returns the results by task, and the tasks ``base.source``
    lacks with the reason."""
    skipped = {}

    def runs():
        for task in tasks:
            if why := unavailable(task, base.source):
                skipped[task] = why
                continue
            beside = SCORED_BESIDE.get(task, ())
            also = tuple(o for o in beside if not unavailable(o, base.source, train=False))
            yield task, pretrained, _one(S, base, task, "finetune", also=also)

    return _finetune_all(tok, runs()), skipped


def objective(S: Scale, pretrained, tok, base: FinetuneRun, coefs=(0.5, 0.0)):
    """Chapter 04: ``base.task`` fine-tuned with each lambda of ``coefs``."""

    def run(coef: float) -> FinetuneRun:
        cfg = replace(base.cfg, lm_coef=coef, experiment=f"objective lambda={coef}")
        return _one(S, base, base.task, f"objective/lambda{coef}", cfg)

    return _finetune_all(tok, ((c, pretrained, run(c)) for c in coefs))


def layer_transfer(S: Scale, pretrained, tok, tasks, base: FinetuneRun, points=None):
    """Chapter 10 (Figure 2, left): each of ``tasks`` fine-tuned once per ``n_transfer`` in
    ``points`` (None: ``Scale.transfer_at``), on ``Scale.transfer_limits`` examples where
    ``base`` gives none, scored on dev and on ``S.transfer_train_examples`` training examples."""
    more = {"eval_train_examples": S.transfer_train_examples}
    cfg = replace(base.cfg, experiment="layer_transfer", **more)

    def run(task: str, k: int) -> FinetuneRun:
        train, evals = S.transfer_limits.get(task, (None, None))
        limits = {"limit": base.limit or train, "eval_limit": base.eval_limit or evals}
        own = replace(base, eval_split="dev", **limits)
        return _one(S, own, task, f"layer_transfer/n_transfer_{k}", replace(cfg, n_transfer=k))

    pairs = ((t, k) for t in tasks for k in points or S.transfer_at())
    return _finetune_all(tok, ((pair, pretrained, run(*pair)) for pair in pairs))


#: Each arm of Table 5: what it changes, and the pre-trained model it fine-tunes.
ARM_SETTINGS = {"no_pretraining": {"n_transfer": -1}, "no_aux_lm": {"lm_coef": 0.0}}
ARM_MODEL = {"full": "gpt", "no_pretraining": "gpt", "no_aux_lm": "gpt", "lstm": "lstm"}


def arm_protocol(S: Scale, arm: str, seed: int, experiment: str):
    """The fine-tuning protocol of Table 5's ``arm`` at scale ``S``."""
    return S.finetune_for(arm, seed=seed, experiment=experiment, **ARM_SETTINGS.get(arm, {}))


def ablations(S: Scale, models: dict, tok, tasks, base: FinetuneRun, arms=None):
    """Chapter 12 (Table 5): each of ``arms`` (None: ``Scale.table5_arms``) on each of
    ``tasks`` the source holds, from ``models[ARM_MODEL[arm]]``."""

    def run(arm: str, task: str) -> FinetuneRun:
        cfg = arm_protocol(S, arm, base.cfg.seed, f"ablation:{arm}")
        return _one(S, base, task, f"ablations/{arm}", cfg)

    pairs = ((a, t) for a in arms or S.table5_arms for t in tasks)
    runs = ((a, t) for a, t in pairs if not unavailable(t, base.source))
    return _finetune_all(tok, (((a, t), models[ARM_MODEL[a]], run(a, t)) for a, t in runs))


# ---------------------------------------------------------------- zero-shot


def zero_shot_curves(
    S: Scale,
    source,
    out_dir: str | os.PathLike = "runs",
    *,
    archs: Iterable[str] = ("gpt", "lstm"),
    eval_limit: int | None = None,
    seed: int = 0,
    device=None,
    progress: bool = True,
) -> tuple[list[dict], dict[str, str]]:
    """Chapter 11 (Figure 2, right): every zero-shot heuristic at every log-spaced checkpoint
    of each pre-training run of ``archs``, on ``eval_limit`` examples a task (None: the
    scale's), its records also in ``out_dir/<scale>/zero_shot`` (replacing the last). Returns
    them, and the tasks skipped with why."""
    data, skipped = load_zero_shot(source, eval_limit or S.zero_shot_examples, seed)
    folder = Path(out_dir, S.name) / "zero_shot"
    records = []
    for arch in archs:
        checkpoints = sorted(
            (pretrain_dir(out_dir, S.name, arch) / "log_checkpoints").glob("step_*")
        )
        new = evaluate_checkpoints(
            checkpoints, data, device=device, scale=S.name, seed=seed, progress=progress
        )
        if arch == "gpt":  # what the model says at each checkpoint (chapter 3)
            new += checkpoint_samples(checkpoints, device=device, scale=S.name)
        (folder / f"{arch}.jsonl").unlink(missing_ok=True)
        append_records(folder / f"{arch}.jsonl", new)
        records += new
    return records, skipped


#: The prompts continued at each of the GPT's checkpoints, as a reader would start a novel.
PROMPTS = ("It was a dark and stormy night", "She opened the door and saw", "The old man said")


def checkpoint_samples(checkpoints, *, tokens: int = 24, device=None, scale=None) -> list[dict]:
    """Records of each of ``PROMPTS`` continued greedily by ``tokens`` tokens at each
    checkpoint folder (``step_<updates>``): metric "sample_tokens", the text in ``config``."""
    dev, out = pick_device(device), []
    for folder in map(Path, checkpoints):
        model, tok = load_run(folder, dev)
        model.to(dev).eval()
        step = int(folder.name.split("_")[-1])
        fields = {"experiment": "samples", "task": "lm", "split": "generated", "step": step}
        for prompt in PROMPTS:
            ids = torch.tensor([tok.encode(prompt)], device=dev)
            new = model.generate(ids, tokens)[0, ids.size(1) :].tolist()
            config = {"prompt": prompt, "text": tok.decode(new), "decoding": "greedy"}
            where = {"scale": scale, "config": config, **provenance(dev)}
            out.append(make_record("sample_tokens", len(new), **fields, **where))
    return out
