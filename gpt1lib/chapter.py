"""A chapter's set-up in one call: its parameters checked, its scale and paths resolved.

Each chapter opens with a cell tagged ``parameters`` (which papermill overrides) and, right
after it, ``ch = setup("05_classification", globals())``: it refuses a name papermill was given
that the chapter does not have (papermill only warns), checks every value before anything is
loaded, resolves the scale, paths and tasks, and says what the chapter will do in one line.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from . import experiments, paths
from .checkpoint import check_model_folder
from .checks import check_source
from .finetune import FinetuneRun
from .records import read_records
from .runs import pretrained_model, start_message
from .runtime import pick_device, say
from .scales import SCALES, Scale, resolve_scale
from .settings import BOOLEAN, PARAMETERS, FinetuneConfig, whole
from .tasks import SCORED_BESIDE, get_task, task_names, unavailable

# ---------------------------------------------------------------- each parameter's check


def _path(name: str, value, folder: Callable | None = None) -> None:
    """None, or a path that exists; with ``folder``, a folder path as ``folder`` resolves it
    (the chapter makes it where missing)."""
    if value is None:
        return
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name}={value!r}: give a path")
    if folder is None and not Path(value).exists():
        raise ValueError(f"{name}={str(value)!r}: no such file or folder")
    if folder is not None and Path(value := folder(value)).is_file():
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


#: Each chapter parameter's check (``init``, ``n_transfer`` and ``scale`` are checked apart); a
#: fine-tuning setting's is the one ``FinetuneConfig`` declares.
CHECKS: dict[str, Callable] = {
    **{
        k: FinetuneConfig.__dataclass_fields__[k].metadata["check"]
        for k in ("seed", "lm_coef", "regression")
    },
    "limit": whole(1, none=True, hint="examples; None: the scale's"),
    "eval_limit": whole(1, none=True, hint="examples; None: the scale's"),
    "corpus_limit": whole(1, none=True, hint="documents; None: the scale's"),
    "steps": whole(1, none=True, hint="updates; None: the scale's"),
    "n_merges": whole(0, none=True, hint="None: the scale's"),
    "agreement_texts": whole(0, hint="paragraphs"),
    "batch": whole(1, none=True, hint="None: the scale's"),
    "seq": whole(2, none=True, hint="None: the scale's"),
    "task": lambda name, value: value is None or get_task(value),
    "tasks": lambda name, value: value is None or task_names(value),
    "source": lambda name, value: value is None or check_source(paths.local_path(value), name),
    "corpus": lambda name, value: _corpus(name, paths.local_path(value)),
    "tokenizer": lambda name, value: _tokenizer(name, paths.local_path(value)),
    "out_dir": lambda name, value: _path(name, value, paths.runs_dir),
    "results_dir": lambda name, value: _path(name, value, paths.results_dir),
    "released_bpe": lambda name, value: _path(name, paths.local_path(value)),
    "resume": BOOLEAN,
    "compile": BOOLEAN,
}


def check_parameters(S: Scale | None, **params) -> None:
    """A chapter's parameters checked (``S``: its ``Scale``, or None for a page without one);
    an error names the parameter, its value and what it takes."""
    try:
        n_layer = _init(params.get("init"), S) if "init" in params else None
        for name, value in params.items():
            if name == "n_transfer":
                high = f" up to {n_layer} (every block)" if n_layer is not None else ""
                whole(-1, none=True, hint=f"-1: nothing, 0: the embeddings,{high}")(name, value)
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
    it declares, resolved (``tasks`` the ones its source holds, ``skipped`` the others with the
    reason)."""

    def pretrained(self, arch: str = "gpt", init: str | None = None):
        """``runs.pretrained_model`` from ``init`` (None: the chapter's), saying first what it
        is about to do."""
        init = init or (getattr(self, "init", None) if arch == "gpt" else None) or "pretrain"
        say(start_message(self.scale, self.out_dir, init, arch))
        return pretrained_model(
            self.scale, self.out_dir, init, self.corpus, arch=arch, device=self.device
        )

    def finetune_config(self) -> FinetuneConfig:
        """The scale's fine-tuning settings with this chapter's where it has them."""
        names = ("lm_coef", "n_transfer", "regression")
        mine = {k: getattr(self, k) for k in names if hasattr(self, k)}
        return self.S.finetune_for("full", seed=self.seed, **mine)

    def runs(self, origin: str, progress: bool = True) -> FinetuneRun:
        """What this chapter's fine-tuning runs share; ``origin``: where the model came from."""
        mine = {k: getattr(self, k, None) for k in ("task", "limit", "eval_limit")}
        where = {"out_dir": self.out_dir, "init": origin, "device": self.device}
        cfg, source = self.finetune_config(), self.source
        return FinetuneRun(cfg=cfg, source=source, progress=progress, **mine, **where)

    # Each chapter's experiment (``experiments``) on this chapter's tasks and settings.

    def finetune(self, pretrained, tok, origin: str):
        """Chapters 05-08's."""
        base = self.runs(origin)
        return experiments.finetune_tasks(self.S, pretrained, tok, self.tasks, base)[0]

    def objective(self, pretrained, tok, origin: str):
        """Chapter 04's: lambda = 0.5 and lambda = 0."""
        return experiments.objective(self.S, pretrained, tok, self.runs(origin))

    def layer_transfer(self, pretrained, tok, origin: str):
        """Chapter 10's."""
        base = self.runs(origin, progress=False)
        return experiments.layer_transfer(self.S, pretrained, tok, self.tasks, base)

    def zero_shot(self):
        """Chapter 11's: both models' checkpoints scored."""
        kw = {"eval_limit": self.eval_limit, "seed": self.seed, "device": self.device}
        return experiments.zero_shot_curves(self.S, self.source, self.out_dir, progress=False, **kw)

    def ablations(self, models: dict, tok):
        """Chapter 12's: Table 5's rows."""
        base = self.runs("this book's pre-training run", progress=False)
        return experiments.ablations(self.S, models, tok, self.tasks, base)

    def recorded(self, tasks: list[str] | None = None):
        """The recorded runs' records (the chapter's ``results_dir``, else the book's); with
        ``tasks``, those of these tasks and those scored beside them (MNLI-mm, RACE-m)."""
        records = read_records(getattr(self, "results_dir", None) or paths.results_dir())
        beside = [t for k in tasks or () for t in SCORED_BESIDE.get(k, ())]
        return records if tasks is None else records[records.task.isin([*tasks, *beside])]

    def run_dir(self, *parts: str) -> Path:
        """``out_dir/<scale>/<parts>``: where this chapter's runs write."""
        return Path(self.out_dir, self.scale, *parts)


def _injected(namespace: dict) -> set[str]:
    """The names papermill set in this kernel: the assignments of the cell it injects (its
    source opens with "# Parameters"), read from IPython's input history (``In``)."""
    names: set[str] = set()
    for source in namespace.get("In") or []:
        if isinstance(source, str) and source.lstrip().startswith("# Parameters"):
            for node in ast.parse(source).body:
                targets = node.targets if isinstance(node, ast.Assign) else []
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _given(name: str, namespace: dict) -> dict:
    """The chapter's parameters from ``namespace``; an error for a value given to the chapter
    that it does not have (papermill sets any name it is passed)."""
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
    if "tasks" in p:  # None: the scale's, by experiment (chapters 05-08: by task family)
        own = {"10_layer_transfer": S.transfer_tasks, "12_ablations": S.ablation_tasks}
        default = own[name] if name in own else S.family_tasks[name[3:]]
        out["tasks"] = task_names(p["tasks"] or default)
    if "task" in p:
        out["task"] = get_task(p["task"] or S.objective_task).name
    return out


def _available(ch: dict) -> tuple[list[str], dict[str, str]]:
    """The chapter's tasks its source holds, and the others with the reason; an error where it
    holds none."""
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
    """The book's plots (seaborn's white grid) and tables (whole cells, every column)."""
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
