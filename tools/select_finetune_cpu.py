"""The `cpu` scale's fine-tuning protocol (issue 14), chosen on a validation split carved from
each task's *train* set, never from dev, the same way for every arm.

    python tools/select_finetune_cpu.py --sweep runs/sweep_cpu --config A --source ../shared/data

The arms are Table 5's: the pre-trained transformer (lambda = 0.5), the same model without the
auxiliary LM (lambda = 0), the transformer from scratch, and the pre-trained LSTM. The
pre-trained models are the sweep's configuration ``--config`` (its 10-minute model), and an LSTM
pre-trained here on the same tokens for the same CPU time: the recorded run's models are trained
longer, and the rate that suits them may be somewhat lower.

Each arm gets the same coordinate search, scored by the mean of the selection tasks' metric on
the carved split: the learning rate at 3 epochs and batch 32, then 6 epochs at that rate, then
batch 16 at the better of those. One JSON line a run goes to ``<out>/select.jsonl`` (resumable),
and the chosen setting of each arm is printed.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time
from pathlib import Path

import torch

from gpt1lib.checkpoint import latest_checkpoint, load_run
from gpt1lib.corpus import build_corpus
from gpt1lib.fast import FastGPT
from gpt1lib.finetune import FinetuneRun, finetune
from gpt1lib.lstm import LSTMLM
from gpt1lib.pretrain import pretrain
from gpt1lib.runtime import seed_everything
from gpt1lib.settings import FinetuneConfig, PretrainConfig, lstm_preset
from gpt1lib.tasks import get_task, load_examples

TASKS = {"sst2": 3000, "cola": 3000}  # training examples read, then carved; short sentences, cheap
# (not MRPC: its majority class already scores F1 81, so a model that learns nothing ranks well)
CARVE = 0.15  # of those held out as the selection split
LRS = (6.25e-5, 2.5e-4, 1e-3)


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def carved(task: str, source: str, limit, seed: int = 0):
    """The task's train examples (``limit`` of them, seeded) split into fit and selection parts."""
    examples = load_examples(task, "train", source, limit, seed)
    order = list(range(len(examples)))
    random.Random(seed + 1).shuffle(order)
    n = int(len(examples) * CARVE)
    return [examples[i] for i in order[n:]], [examples[i] for i in order[:n]]


def lstm_model(sweep: Path, winner, tok, minutes: float, source_corpus: str, limit: int):
    """An LSTM pre-trained on the winner's tokens for about ``minutes`` of machine time."""
    out = sweep / "lstm"
    if (out / "done.json").exists():
        return load_run(latest_checkpoint(out))[0]
    cfg_m = lstm_preset("mini", vocab_size=tok.vocab_size, n_ctx=winner.config.n_ctx)
    data = build_corpus(tok, cfg_m.n_ctx, source_corpus, limit=limit, cache_dir=sweep / "cache")
    seed_everything(0)
    probe = LSTMLM(cfg_m)
    x = next(data.train.batches(32, 0))[2]
    t0 = cpu_seconds()
    for _ in range(3):
        probe(x[:, :-1], targets=x[:, 1:]).loss.backward()
    per_step = (cpu_seconds() - t0) / 3 * 1.1  # and the optimiser's step
    steps = max(int(minutes * 60 * torch.get_num_threads() / per_step), 2)
    cfg = PretrainConfig(
        total_steps=steps,
        batch_size=32,
        max_lr=6e-4,
        warmup_steps=steps // 4,
        eval_interval=steps,
        ckpt_interval=steps,
        n_log_checkpoints=0,
        experiment="select:lstm",
    )
    seed_everything(0)
    res = pretrain(LSTMLM(cfg_m), tok, data, cfg, out, resume=out.exists(), progress=False)
    (out / "done.json").write_text(json.dumps({"steps": steps, "val_loss": res.val_loss}))
    return load_run(latest_checkpoint(out))[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweep", default="runs/sweep_cpu")
    ap.add_argument("--config", required=True, help="the sweep's winning configuration letter")
    ap.add_argument("--source", required=True, help="the tasks' data folder")
    ap.add_argument("--corpus", default=None, help="corpus folder (for the LSTM)")
    ap.add_argument("--lstm-minutes", type=float, default=10.0)
    ap.add_argument("--task-limit", type=int, help="training examples read a task (a rehearsal)")
    ap.add_argument("--corpus-limit", type=int, default=100, help="books read (for the LSTM)")
    args = ap.parse_args()
    sweep = Path(args.sweep)
    gpt, tok = load_run(latest_checkpoint(sweep / args.config))
    corpus = args.corpus or str(Path(args.source) / "corpus" / "gutenberg_novels")
    seed_everything(0)
    scratch = FastGPT(gpt.config)
    arms = {
        "pre-trained": (gpt, 0.5),
        "no aux LM": (gpt, 0.0),
        "from scratch": (scratch, 0.5),
        "LSTM": (None, 0.5),  # pre-trained when first needed
    }
    data = {t: carved(t, args.source, args.task_limit or n) for t, n in TASKS.items()}
    path = sweep / "select.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def score(arm, lr, epochs, batch):
        for r in rows:
            key = (r.get("config", "A"), r["arm"], r["lr"], r["epochs"], r["batch"])
            if key == (args.config, arm, lr, epochs, batch):  # the first rows were all A's
                return r["score"]
        model, lm_coef = arms[arm]
        if model is None:
            model = lstm_model(sweep, gpt, tok, args.lstm_minutes, corpus, args.corpus_limit)
            arms[arm] = (model, lm_coef)
        cfg = FinetuneConfig(lr=lr, epochs=epochs, batch_size=batch, lm_coef=lm_coef)
        metrics, t0 = {}, time.perf_counter()
        for task, (fit, held) in data.items():
            run = FinetuneRun(task, cfg, examples=(fit, {"select": held}), progress=False)
            res = finetune(model, tok, run)
            metrics[task] = res.final[get_task(task).metrics[0]]
        row = {
            "config": args.config,
            "arm": arm,
            "lr": lr,
            "epochs": epochs,
            "batch": batch,
            "metrics": metrics,
            "score": sum(metrics.values()) / len(metrics),
            "minutes": (time.perf_counter() - t0) / 60,
        }
        rows.append(row)
        with path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
        return row["score"]

    chosen = {}
    for arm in arms:
        lr = max(LRS, key=lambda v: score(arm, v, 3, 32))
        epochs = max((3, 6), key=lambda e: score(arm, lr, e, 32))
        batch = max((32, 16), key=lambda b: score(arm, lr, epochs, b))
        chosen[arm] = {
            "lr": lr,
            "epochs": epochs,
            "batch": batch,
            "score": score(arm, lr, epochs, batch),
        }
        print(arm, chosen[arm], flush=True)
    (sweep / "chosen.json").write_text(json.dumps(chosen, indent=1) + "\n")


if __name__ == "__main__":
    main()
