"""How the results pages name a run (``run_label``: two reruns never share a column), and say
where, how and how long it ran, in a reader's words."""

from __future__ import annotations

import json
import os
import re
from dataclasses import fields

import pandas as pd

from . import paths
from .facts import ARMS
from .records import read_records
from .scales import SCALES
from .settings import FinetuneConfig
from .tasks import get_task

#: How a results table names the split compared on, where it is not simply the registry's.
EVAL_SPLIT_NOTES = {
    "qqp": "dev (no dev file: 1,000 held-apart train pairs)",
    "story_cloze": "test, or where there is none (the recorded runs) half of the 2016 val file",
}
#: Fine-tuning settings a run label names where they differ from the scale's recipe, and how.
_SETTINGS = {f.name: f.metadata["label"] for f in fields(FinetuneConfig) if "label" in f.metadata}


def _varied(kind: str) -> tuple[str, ...]:
    """The settings experiment ``kind`` varies itself: its points share one label."""
    return tuple(f.name for f in fields(FinetuneConfig) if kind in f.metadata.get("varied_by", ()))


def device_label(device: str) -> str:
    """ "2 CPU cores" for "cpu (x86_64, 2 threads, 2 cores)" or "cpu (x86_64, 2 threads)"; a
    GPU's name as it is."""
    if not device.startswith("cpu ("):
        return device
    parts = device.rstrip(")").split(", ")
    threads = parts[1].split()[0] if len(parts) > 1 else "?"
    cores = parts[2].split()[0] if len(parts) > 2 else threads
    return f"{cores} CPU cores" if threads == cores else f"{threads} threads of {cores} CPU cores"


def _differences(rec: dict, config: dict) -> list[str]:
    """``rec``'s fine-tuning settings off its scale's recipe (a Table 5 row: off its row's)."""
    scale = SCALES.get(str(rec.get("scale")))
    if scale is None:
        return []
    kind, _, arm = str(rec.get("experiment")).partition(":")
    kind = kind.partition(" ")[0]
    default = scale.finetune_for(arm) if kind == "ablation" and arm in ARMS else scale.finetune
    varied = _varied(kind)
    if "plan_part" in config:  # a recorded run's protocol, chosen on held-out train: the run's
        varied += ("lr", "warmup", "epochs")
    out = []
    for name, fmt in _SETTINGS.items():
        if name in config and name not in varied and config[name] != getattr(default, name):
            if name == "n_transfer" and config[name] is None:
                continue
            out.append(fmt.format(config[name]))
    # a recorded run's own choice of examples (``plan_part``) is its data, never its label
    if rec.get("task") and "limits" in config and "plan_part" not in config:
        limits = scale.limits_for(rec["task"])
        for key, word in (("limit", "train limit"), ("eval_limit", "eval limit")):
            if config["limits"].get(key) != limits[key]:
                out.append(f"{word} {config['limits'].get(key)}")
    model = config.get("model") if isinstance(config.get("model"), dict) else {}
    if "n_layer" in model and not str(rec.get("experiment")).startswith("ablation"):
        ref = scale.model_config()
        if (model["n_layer"], model.get("n_embd")) != (ref.n_layer, ref.n_embd):
            out.append(f"model {model['n_layer']}×{model.get('n_embd')}")
    return out


def run_label(rec) -> str:
    """How a table or figure names the run a number came from, e.g. "cpu run, 2 CPU cores,
    commit 659788c, seed 0", then every fine-tuning setting changed from the scale's recipe
    (not those an experiment varies itself, nor a recorded run's choice of examples)."""
    device = device_label(str(rec.get("device") or "?"))
    sha, _, dirty = str(rec.get("commit") or "?").partition("+")
    commit = sha[:7] + (f"+{dirty}" if dirty else "")
    label = f"{rec.get('scale')} run, {device}, commit {commit}"
    config = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    seed = rec.get("seed")
    if seed is not None and seed == seed:  # not None, not NaN
        label += f", seed {int(seed)}"
    if "lm_coef" in config:  # a fine-tuning run
        label += "".join(f", {d}" for d in _differences(rec, config))
    return label


def short_names(labels) -> dict[str, str]:
    """A short name for each run label: its first part ("cpu run"), and where several share
    that, the parts that tell them apart ("cpu run, seed 1")."""
    labels = list(dict.fromkeys(labels))
    parts = {label: label.split(", ") for label in labels}
    out = {}
    for label in labels:
        group = [parts[x] for x in labels if parts[x][0] == parts[label][0]]
        common = set.intersection(*(set(p) for p in group))
        out[label] = ", ".join([parts[label][0]] + [p for p in parts[label] if p not in common])
    return out


#: A run label at the start of a column head, row name or ``run`` cell (before ": " or " · ").
_RUN = re.compile(rf"^((?:{'|'.join(SCALES)}) run, [^:·]*?)(?=$|: | · )")


def short_runs(table: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """``table`` with each run label cut to its ``short_names`` name, and the line that says
    which run each short name is."""
    texts = [*map(str, table.columns), *map(str, table.index.to_flat_index())]
    texts += list(table["run"].astype(str)) if "run" in table.columns else []
    names = short_names([m.group(1) for t in texts if (m := _RUN.match(t))])
    if not names:
        return table, ""

    def cut(text):
        m = _RUN.match(str(text))
        return names[m.group(1)] + str(text)[m.end(1) :] if m else text

    table = table.rename(columns=cut, index=cut)
    if "run" in table.columns:
        table["run"] = table["run"].map(cut)
    return table, "; ".join(f"{short}: {full}" for full, short in names.items())


#: Where each scale runs, for a chapter's opening table.
HARDWARE = {
    "smoke": "any CPU",
    "cpu": "a CPU (2 cores for the recorded run)",
    "small": "one GPU",
    "paper": "one GPU to fine-tune from the released weights; many to pre-train",
}
#: What a chapter's table says of a scale with no record of it.
NOT_RECORDED = {"smoke": "seconds to a minute (the book build)"}
#: Parameters every recorded chapter gets.
_ROUTINE = {"scale", "out_dir", "results_dir", "source", "corpus"}


def _how(entry: dict) -> str:
    """How a recorded chapter was run: "recorded run, commit abc1234", and how."""
    params = entry.get("parameters", {})
    how = f"recorded run, commit {str(entry.get('commit'))[:7]}"
    offline = str(params.get("source", "")).startswith("bundle")  # harness.bundle's copy
    data = "on an offline copy of the data" if offline else "on the data"
    if "recipe" in params:  # harness.runner: the chapter's experiments, not its notebook
        return f"{how}: every chapter's experiments in one process, {data}"
    if "budget" in params:
        within = f"within {params['budget']:g} minutes"
        return f"{how}: the chapters' experiments in one process {within}, {data}"
    extra = {k: v for k, v in params.items() if k not in _ROUTINE}
    said = " ".join(f"-p {k} {json.dumps(v)}" for k, v in extra.items())
    return how + (f", with {said}" if said else "")


def chapter_times(chapter: str, results_dir: str | os.PathLike | None = None):
    """The table a chapter (e.g. "10_layer_transfer") opens with: how long it took at each scale
    and on what, from each recorded run's ``results/<scale>/manifest.json``."""
    root = paths.results_dir(results_dir)
    rows = {}
    for scale in SCALES:
        path = root / scale / "manifest.json"
        manifest = json.loads(path.read_text()) if path.is_file() else {}
        if (entry := manifest.get(chapter)) is None:
            # a recorded run of the scale by harness.runner runs the chapters' training alone
            if any({"budget", "recipe"} & set(e.get("parameters", {})) for e in manifest.values()):
                when = "not part of the recorded run"
            else:
                when = NOT_RECORDED.get(scale, "not recorded yet")
            rows[scale] = (HARDWARE[scale], when, "")
            continue
        devices = read_records(root / scale).get("device", pd.Series(dtype=object)).dropna()
        hardware = device_label(str(devices.iloc[0])) if len(devices) else HARDWARE[scale]
        minutes = entry.get("wall_time_s", 0) / 60
        when = f"{minutes:.0f} min" if minutes >= 1 else "under a minute"
        rows[scale] = (hardware, when, _how(entry))
    table = pd.DataFrame.from_dict(rows, orient="index", columns=["hardware", "time", "from"])
    return table.rename_axis(None).style  # a styled table: every cell whole, never cut


def recorded_runs(results_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per recorded run (``results/<scale>/``): its label, chapters, minutes, how it was
    made, its pre-training and where its fine-tuning started."""
    rows = []
    for manifest in sorted(paths.results_dir(results_dir).glob("*/manifest.json")):
        entries = json.loads(manifest.read_text())
        recs = read_records(manifest.parent)
        if recs.empty:
            continue
        tuned = recs[recs.experiment == "finetune"]
        first = (tuned if len(tuned) else recs).iloc[0].to_dict()
        rows.append(
            {
                "label": run_label({**first, "config": {}}),
                "chapters": len(entries),
                "minutes": round(sum(e.get("wall_time_s", 0) for e in entries.values()) / 60),
                "how it was made": _how(next(iter(entries.values()))).split(", with ")[0],
                "pre-training": pretraining(recs),
                "fine-tuning started from": _start(first)[0] if len(tuned) else "none",
            }
        )
    return pd.DataFrame(rows)


#: Each model's pre-training experiment.
PRETRAIN_EXPERIMENTS = {"gpt": "pretrain:gpt", "lstm": "pretrain:lstm"}


def pretrained(records: pd.DataFrame) -> dict[str, dict[str, tuple[int, int]]]:
    """run -> "gpt" or "lstm" -> (updates, tokens) of its last training-loss record."""
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for arch, name in PRETRAIN_EXPERIMENTS.items():
        loss = records[(records.experiment == name) & (records.metric == "train_loss")]
        for r in loss.to_dict("records"):
            c = r["config"] if isinstance(r.get("config"), dict) else {}
            block = c.get("pretrain", {}).get("batch_size", 0)
            block *= c.get("model", {}).get("config", {}).get("n_ctx", 0)
            mine, step = out.setdefault(run_label(r), {}), int(r["step"])
            if step >= mine.get(arch, (0, 0))[0]:
                mine[arch] = (step, step * block)
    return out


def pretraining(records: pd.DataFrame) -> str:
    """How far each model of a recorded run was pre-trained, e.g. "GPT 2,500 updates (82 M
    tokens, perplexity 60.3)"."""
    parts, runs = [], pretrained(records).values()
    for arch, name in PRETRAIN_EXPERIMENTS.items():
        if not (got := [v[arch] for v in runs if arch in v]):
            continue
        updates, tokens = max(got)
        ppl = records[(records.experiment == name) & (records.metric == "val_ppl")]
        said = [f"{tokens / 1e6:,.0f} M tokens"] * bool(tokens)
        said += [f"perplexity {ppl.loc[ppl.step.idxmax()].value:,.1f}"] * (not ppl.empty)
        parts.append(f"{arch.upper()} {updates:,} updates ({', '.join(said)})")
    return "; ".join(parts) or "none recorded"


#: Where fine-tuning starts, by ``init`` (``Scale.init``), as a page says it.
STARTS = {"released": "GPT-1's released weights", "pretrain": "this book's pre-training run"}


def _start(rec, updates: int | None = None) -> tuple[str, str | None]:
    """Where a record's fine-tuning started, in a reader's words (with the ``updates`` of a
    pre-training start, and a note where it is assumed), and its ``init`` where that is one of
    ``STARTS`` (else None)."""
    config = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    scale = SCALES.get(str(rec.get("scale")))
    note = ""
    if "plan_part" in config:  # harness.runner's records: its own words in ``init``
        where, init = "the GPT this run pre-trained first", "pretrain"
    elif config.get("init"):
        init = str(config["init"])
        where, init = STARTS.get(init, init), init if init in STARTS else None
    elif scale is None:
        return "not recorded", None
    else:
        where, init = STARTS[scale.init], scale.init
        note = " (the scale's default, which its records do not name)"
    if init == "pretrain" and updates is not None:
        where += f", {updates:,} updates"
    return where + note, init


def fine_tuning_starts(records: pd.DataFrame) -> str:
    """One line: where each run's fine-tuning started, beside where a chapter at its scale
    starts, e.g. "small run: the GPT this run pre-trained first, 2,500 updates, where this
    chapter at small starts from GPT-1's released weights"."""
    tuned = records[records.experiment == "finetune"].to_dict("records")
    firsts = {run_label({**r, "config": {}}): r for r in reversed(tuned)}
    names, done = short_names(firsts), pretrained(records)
    parts = []
    for label, rec in reversed(firsts.items()):
        where, init = _start(rec, done.get(label, {}).get("gpt", (None,))[0])
        scale = SCALES.get(str(rec.get("scale")))
        if scale is not None and init == scale.init:
            where += f", as this chapter at {scale.name} does"
        elif scale is not None:
            where += f", where this chapter at {scale.name} starts from {STARTS[scale.init]}"
        parts.append(f"{names[label]}: {where}")
    return "; ".join(parts)


def scores_caption(records: pd.DataFrame, tasks=(), mark: str = "") -> str:
    """The caption of a fine-tuning chapter's ``paper.summary_table`` of the recorded runs
    (``records``, pre-training too) on its ``tasks``: what a cell is (``mark``: what its marks
    mean), which tasks no recorded run fine-tuned, and where each run's fine-tuning started."""
    tuned = records[records.experiment == "finetune"]
    if tuned.empty:
        return "no recorded run has fine-tuned these tasks"
    cell = "the recorded runs on this chapter's tasks: the paper's metric after the last epoch, "
    cell += "on each task's evaluation split (chapter 9), value [95% bootstrap interval]"
    said = [f"{cell}; {mark}" if mark else cell]
    if missing := [get_task(t).title for t in tasks if t not in set(tuned.task)]:
        said.append(f"No recorded run fine-tuned {', '.join(missing)}")
    return ". ".join([*said, f"Fine-tuning started from: {fine_tuning_starts(records)}"])
