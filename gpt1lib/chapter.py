"""A chapter's set-up in one call: its parameters checked, its scale and paths resolved.

Each chapter opens with a cell tagged ``parameters`` (plain assignments, which papermill
overrides) and, right after it, ``ch = setup("05_classification", globals())``. ``setup``
refuses a name papermill was given that the chapter does not have (papermill only warns, and a
misspelt ``-p scal smoke`` would run the default scale), checks every value before anything is
loaded, resolves the scale, paths and the tasks its source holds, says what the chapter will do
in one line, and returns a ``Chapter``.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from . import experiments, paths
from .checkpoint import check_model_folder
from .checks import check_setting, check_source, count, number
from .finetune import FinetuneRun
from .records import read_records
from .runs import pretrained_model, start_message
from .runtime import pick_device, say
from .scales import SCALES, Scale, resolve_scale
from .settings import PARAMETERS, FinetuneConfig
from .tasks import SCORED_BESIDE, get_task, task_names, unavailable

#: The tasks a chapter runs where its ``tasks`` parameter is None: the scale's, by experiment.
DEFAULT_TASKS: dict[str, Callable[[Scale], tuple[str, ...]]] = {
    "05_classification": lambda S: S.family_tasks["classification"],
    "06_entailment": lambda S: S.family_tasks["entailment"],
    "07_similarity": lambda S: S.family_tasks["similarity"],
    "08_multiple_choice": lambda S: S.family_tasks["multiple_choice"],
    "10_layer_transfer": lambda S: S.transfer_tasks,
    "12_ablations": lambda S: S.ablation_tasks,
}


# ---------------------------------------------------------------- each parameter's check


def _path(name: str, value, must_exist: bool = True) -> None:
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name}={value!r}: give a path")
    if must_exist and not Path(value).exists():
        raise ValueError(f"{name}={str(value)!r}: no such file or folder")
    if not must_exist and Path(value).is_file():
        raise ValueError(f"{name}={str(value)!r} is a file: give a folder (it is made if missing)")


def _corpus(name: str, value) -> None:
    """None, "fixture", a local text file or folder, or a hub id ("owner/name")."""
    if value in (None, "fixture"):
        return
    text = str(value)
    looks_local = text.startswith(("/", ".", "~")) or text.count("/") > 1
    if looks_local and not Path(text).expanduser().exists():
        raise ValueError(
            f"{name}={text!r}: no such file or folder (nor a hub id, owner/name). Use "
            "'fixture', a text file or a folder of .txt files, or e.g. 'emozilla/pg19'"
        )


def _tokenizer(name: str, value) -> None:
    """None, "released", "train:N", or a folder written by ``GPT1Tokenizer.save``."""
    text = str(value)
    if value is None or text == "released" or (text[:6] == "train:" and text[6:].isdigit()):
        return
    if not Path(text).exists():
        raise ValueError(
            f"{name}={text!r}: use 'released', 'train:N' (N merges learned on the corpus) or "
            "a folder written by GPT1Tokenizer.save"
        )


def _init(value, S: Scale | None) -> int | None:
    """Check ``init``; returns the depth of the model it gives where known before loading."""
    if value is None and S is not None:
        value = S.init
    if value in (None, "pretrain"):
        return S.model_config().n_layer if S is not None else None
    if value == "released":
        return 12
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"init={value!r}: use 'pretrain', 'released' or a checkpoint folder")
    check_model_folder(Path(paths.local_path(value)), f"init={str(value)!r}: ")
    return None


def _folder(name: str, value, resolve: Callable) -> None:
    """None (the repository's folder), or a folder path, resolved as the chapter will."""
    if value is not None:
        _path(name, resolve(value) if isinstance(value, (str, os.PathLike)) else value, False)


def _boolean(name: str, value) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name}={value!r}: use True or False")


def _rule(kind: str, *args) -> Callable:
    fns = {"count": count, "number": number, "path": _path}
    return lambda name, value: fns[kind](name, value, *args)


def _setting(field: str) -> Callable:
    """The check ``FinetuneConfig`` declares for ``field`` (``settings``)."""
    return lambda name, value: check_setting(FinetuneConfig, field, value, name)


#: Each chapter parameter's check (``init``, ``n_transfer`` and ``scale`` are checked apart).
CHECKS: dict[str, Callable] = {
    "seed": _setting("seed"),
    "lm_coef": _setting("lm_coef"),
    "limit": _rule("count", 1, True, "examples; None: the scale's"),
    "eval_limit": _rule("count", 1, True, "examples; None: the scale's"),
    "corpus_limit": _rule("count", 1, True, "documents; None: the scale's"),
    "steps": _rule("count", 1, True, "updates; None: the scale's"),
    "n_merges": _rule("count", 0, True, "None: the scale's"),
    "agreement_texts": _rule("count", 0, False, "paragraphs"),
    "batch": _rule("count", 1, True, "None: the scale's"),
    "seq": _rule("count", 2, True, "None: the scale's"),
    "task": lambda name, value: value is None or get_task(value),
    "tasks": lambda name, value: value is None or task_names(value),
    "source": lambda name, value: value is None or check_source(paths.local_path(value), name),
    "corpus": lambda name, value: _corpus(name, paths.local_path(value)),
    "tokenizer": lambda name, value: _tokenizer(name, paths.local_path(value)),
    "out_dir": lambda name, value: _folder(name, value, paths.runs_dir),
    "results_dir": lambda name, value: _folder(name, value, paths.results_dir),
    "released_bpe": lambda name, value: value is None or _path(name, paths.local_path(value)),
    "resume": _boolean,
    "compile": _boolean,
    "regression": _setting("regression"),
}


def check_parameters(S: Scale | None, **params) -> None:
    """A chapter's parameters, each checked before anything is loaded or pre-trained (``S``:
    its resolved ``Scale``, or None for a page without one); an error names the parameter,
    its value and what it takes."""
    try:
        n_layer = _init(params.get("init"), S) if "init" in params else None
        for name, value in params.items():
            if name == "n_transfer":
                high = f" up to {n_layer} (every block)" if n_layer is not None else ""
                count(name, value, -1, True, f"-1: nothing, 0: the embeddings,{high}")
                if None not in (value, n_layer) and value > n_layer:
                    raise ValueError(
                        f"n_transfer={value}: the model has {n_layer} blocks; use -1 (nothing), "
                        f"0 (the embeddings) up to {n_layer} (every block)"
                    )
            elif name in CHECKS:
                CHECKS[name](name, value)
            elif name not in ("init", "scale"):
                raise KeyError(f"no rule for the parameter {name!r}: add one to CHECKS")
    except ValueError as e:
        raise ValueError(f"bad chapter parameter: {e}") from None


# ---------------------------------------------------------------- the set-up


class Chapter(SimpleNamespace):
    """What a chapter needs: ``name``, ``S`` (its ``Scale``), ``device``, and every parameter
    it declares, resolved (``scale`` a name, ``out_dir`` and ``results_dir`` folders,
    ``source`` and ``corpus`` what the scale reads where None, ``tasks`` the ones its source
    holds, ``skipped`` the others with the reason, ``init`` where fine-tuning starts)."""

    def pretrained(self, arch: str = "gpt", init: str | None = None):
        """``runs.pretrained_model`` from ``init`` (None: the chapter's), saying first what it
        is about to do and how long that takes."""
        init = init or (getattr(self, "init", None) if arch == "gpt" else None) or "pretrain"
        say(start_message(self.scale, self.out_dir, init, arch))
        return pretrained_model(
            self.scale, self.out_dir, init, self.corpus, arch=arch, device=self.device
        )

    def finetune_config(self) -> FinetuneConfig:
        """The scale's fine-tuning settings with this chapter's seed, lambda, blocks transferred
        and STS-B head where it has them."""
        names = ("lm_coef", "n_transfer", "regression")
        mine = {k: getattr(self, k) for k in names if hasattr(self, k)}
        return self.S.finetune_for("full", seed=self.seed, **mine)

    def runs(self, origin: str, progress: bool = True) -> FinetuneRun:
        """What this chapter's fine-tuning runs share (``finetune.FinetuneRun``); ``origin``
        says where the model came from."""
        mine = {k: getattr(self, k, None) for k in ("task", "limit", "eval_limit")}
        where = {"out_dir": self.out_dir, "init": origin, "device": self.device}
        cfg, source = self.finetune_config(), self.source
        return FinetuneRun(cfg=cfg, source=source, progress=progress, **mine, **where)

    # Each chapter's experiment (``experiments``) on this chapter's tasks and settings.

    def finetune(self, pretrained, tok, origin: str):
        """Chapters 05-08's, ``experiments.finetune_tasks``."""
        base = self.runs(origin)
        return experiments.finetune_tasks(self.S, pretrained, tok, self.tasks, base)[0]

    def objective(self, pretrained, tok, origin: str):
        """Chapter 04's, ``experiments.objective``: lambda = 0.5 and lambda = 0."""
        return experiments.objective(self.S, pretrained, tok, self.runs(origin))

    def layer_transfer(self, pretrained, tok, origin: str):
        """Chapter 10's, ``experiments.layer_transfer``: every count of blocks transferred."""
        base = self.runs(origin, progress=False)
        return experiments.layer_transfer(self.S, pretrained, tok, self.tasks, base)

    def zero_shot(self):
        """Chapter 11's, ``experiments.zero_shot_curves``: both models' checkpoints scored."""
        kw = {"eval_limit": self.eval_limit, "seed": self.seed, "device": self.device}
        return experiments.zero_shot_curves(self.S, self.source, self.out_dir, progress=False, **kw)

    def ablations(self, models: dict, tok):
        """Chapter 12's, ``experiments.ablations``: Table 5's rows."""
        base = self.runs("this book's pre-training run", progress=False)
        return experiments.ablations(self.S, models, tok, self.tasks, base)

    def recorded(self, tasks: list[str] | None = None):
        """The records of the recorded runs (the chapter's ``results_dir``, else the book's);
        with ``tasks``, those of these tasks and those scored beside them (MNLI-mm, RACE-m)."""
        records = read_records(getattr(self, "results_dir", None) or paths.results_dir())
        beside = [t for k in tasks or () for t in SCORED_BESIDE.get(k, ())]
        return records if tasks is None else records[records.task.isin([*tasks, *beside])]

    def run_dir(self, *parts: str) -> Path:
        """``out_dir/<scale>/<parts>``: where this chapter's runs write."""
        return Path(self.out_dir, self.scale, *parts)


def _injected(namespace: dict) -> set[str]:
    """The names papermill set in this kernel: the assignments of the cell it injects after the
    parameters cell (its source opens with "# Parameters"), read from IPython's input history
    (``In``). None outside papermill: nothing was injected."""
    names: set[str] = set()
    for source in namespace.get("In") or []:
        if isinstance(source, str) and source.lstrip().startswith("# Parameters"):
            for node in ast.parse(source).body:
                targets = node.targets if isinstance(node, ast.Assign) else []
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _given(name: str, namespace: dict) -> dict:
    """The chapter's parameters from ``namespace``; an error for a value given to the chapter
    that it does not have (papermill sets any name it is passed, and says only "Passed unknown
    parameter")."""
    declared = PARAMETERS[name]
    unknown = sorted(_injected(namespace) - set(declared))
    if unknown:
        raise ValueError(
            f"{name} has no parameter {', '.join(map(repr, unknown))}: it has "
            f"{', '.join(declared)} (a misspelt name is ignored by papermill, and the chapter "
            "would run with its defaults)"
        )
    missing = [k for k in declared if k not in namespace]
    if missing:
        raise KeyError(f"{name}: its parameters cell lacks {missing}; run the cells in order")
    return {k: namespace[k] for k in declared}


def _resolve(name: str, S: Scale | None, p: dict) -> dict:
    """Each given parameter as the chapter uses it (the README's "Paths" and "Scales")."""
    out = dict(p)
    for key, fn in (("out_dir", paths.runs_dir), ("results_dir", paths.results_dir)):
        if key in p:
            out[key] = fn(p[key])
    if S is None:
        return out
    out["scale"] = S.name
    defaults = {"corpus": S.corpus, "source": S.task_source, "tokenizer": S.tokenizer}
    for key in ("corpus", "source", "tokenizer", "released_bpe"):
        if key in p:
            out[key] = paths.local_path(p[key]) or defaults.get(key)
    if "corpus" not in p and "init" in p:
        out["corpus"] = S.corpus  # a pre-trained model made first reads the scale's corpus
    if "corpus_limit" in p:
        out["corpus_limit"] = p["corpus_limit"] or S.corpus_limit
    if "init" in p:
        out["init"] = paths.local_path(p["init"] if p["init"] is not None else S.init)
    if "tasks" in p:
        out["tasks"] = task_names(p["tasks"] or DEFAULT_TASKS[name](S))
    if "task" in p:
        out["task"] = get_task(p["task"] or S.objective_task).name
    return out


def _available(ch: dict) -> tuple[list[str], dict[str, str]]:
    """The chapter's tasks its source holds, and the others with the reason; an error where it
    holds none, before anything is pre-trained."""
    wanted = ch.get("tasks") or ([ch["task"]] if "task" in ch else [])
    skipped = {t: why for t in wanted if (why := unavailable(t, ch["source"]))}
    tasks = [t for t in wanted if t not in skipped]
    if wanted and not tasks:
        reasons = "; ".join(f"{get_task(t).title}: {why}" for t, why in skipped.items())
        raise ValueError(
            f"source={paths.shown(ch['source'])!r} holds none of this chapter's tasks "
            f"({reasons}): pass a source that holds them (-p source), or other tasks"
        )
    return tasks, skipped


def setup(name: str, namespace: dict) -> Chapter:
    """The chapter ``name``'s set-up from ``namespace``, the notebook's ``globals()``."""
    if name not in PARAMETERS:
        raise ValueError(f"unknown chapter {name!r}: the chapters are {list(PARAMETERS)}")
    given = _given(name, namespace)
    S = SCALES[resolve_scale(given["scale"])] if "scale" in given else None
    check_parameters(S, **given)
    ch = _resolve(name, S, given)
    if "source" in ch:
        ch["tasks"], ch["skipped"] = _available(ch)
        if "task" in ch:
            ch["task"] = ch["tasks"][0]
    device = pick_device() if S is not None else None
    chapter = Chapter(name=name, S=S, device=device, **ch)
    _style()
    if S is not None:  # a page that only reads the records has nothing to say first
        say(_summary(chapter))
    return chapter


def _style() -> None:
    """The book's plots (seaborn's white grid) and tables: whole cells, every column, never
    cut with "..." (pandas' defaults for a terminal)."""
    import pandas as pd
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    for option, value in (("max_colwidth", None), ("max_columns", None), ("width", 200)):
        pd.set_option(f"display.{option}", value)


def _summary(ch: Chapter) -> str:
    """The chapter's opening line: its scale and device, its data, what it skips and why."""
    parts = [f"scale {ch.scale} on {ch.device}"]
    for key in ("source", "corpus"):
        if isinstance(getattr(ch, key, None), str | os.PathLike):
            parts.append(f"{key} {paths.shown(getattr(ch, key))}")
    if getattr(ch, "tasks", None):
        parts.append("tasks " + ", ".join(get_task(t).title for t in ch.tasks))
    line = f"{ch.name}: " + "; ".join(parts)
    for task, why in getattr(ch, "skipped", {}).items():
        line += f"\n{get_task(task).title}: skipped, {why}"
    return line
