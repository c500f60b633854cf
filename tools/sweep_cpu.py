"""The `cpu` scale's pre-training sweep (issue 14): a few configurations, each given the same
budget of CPU time, scored by the validation loss they reach.

    python tools/sweep_cpu.py --source ../shared/data/corpus/gutenberg_novels --minutes 10 \
        --out runs/sweep_cpu

Each configuration runs a whole schedule (linear warm-up, cosine to zero) sized to ``--minutes``
of the quiet machine's time: its cost per update is timed against configuration A's, in turns
(so that other work on the machine slows both alike), and A's on the quiet machine is
``REF_CPU_S``. It is evaluated at the end. The loss is
given per token and in bits per byte of text, the measure that compares vocabularies of
different sizes. One JSON line a configuration goes to ``<out>/sweep.jsonl``; a configuration
already there is skipped, so the sweep resumes.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from pathlib import Path

import torch

from gpt1lib.corpus import build_corpus, load_documents
from gpt1lib.fast import FastGPT
from gpt1lib.model import preset
from gpt1lib.optim import make_optimizer, train_step
from gpt1lib.pretrain import pretrain
from gpt1lib.runtime import seed_everything, timed
from gpt1lib.settings import PretrainConfig
from gpt1lib.tokenizer import GPT1Tokenizer

# name: (n_layer, n_embd, n_head, n_ctx, merges, max_lr, warm-up fraction, batch)
CONFIGS = {
    "A 4x256 ctx128 8k lr6e-4": (4, 256, 4, 128, 8000, 6e-4, 0.25, 32),
    "B 4x256 ctx128 4k lr6e-4": (4, 256, 4, 128, 4000, 6e-4, 0.25, 32),
    "C 6x256 ctx128 8k lr6e-4": (6, 256, 4, 128, 8000, 6e-4, 0.25, 32),
    "D 4x384 ctx128 8k lr4e-4": (4, 384, 6, 128, 8000, 4e-4, 0.25, 32),
    "E 4x256 ctx256 8k lr6e-4": (4, 256, 4, 256, 8000, 6e-4, 0.25, 16),
    "F 4x256 ctx128 8k lr1e-3": (4, 256, 4, 128, 8000, 1e-3, 0.40, 32),
}


#: CPU seconds of one update of A (4x256, 128 positions, 8,319 tokens, batch 32), timed at the
#: start of the sweep on the quiet machine (load 0.7): 3,300 tokens/s, as the cpu probe's note.
REF_CPU_S = 2.47


def relative_cost(cfg_m, batch: int, ref, rounds: int = 6) -> float:
    """Median time of an update of ``cfg_m`` over that of ``ref`` (config, batch), the two timed
    in turns on random tokens after one round to warm up."""
    steps = []
    for cfg, b in ((cfg_m, batch), ref):
        seed_everything(0)
        model = FastGPT(cfg)
        opt = make_optimizer(model, 1e-4, 0.01)
        x = torch.randint(0, cfg.vocab_size, (b, cfg.n_ctx + 1))
        steps.append(
            lambda m=model, o=opt, x=x: train_step(
                m, o, 1e-4, [m(x[:, :-1], targets=x[:, 1:]).loss]
            )
        )
    times = [[], []]
    for _ in range(rounds):
        for i, step in enumerate(steps):
            times[i].append(timed(step)[0])
    mine, ref_t = (sorted(t[1:])[len(t[1:]) // 2] for t in times)
    return mine / ref_t


def cpu_seconds() -> float:
    """CPU time of this process, all its threads (user + system)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, help="the corpus folder")
    ap.add_argument("--out", default="runs/sweep_cpu")
    ap.add_argument("--minutes", type=float, default=10.0, help="machine-minutes per configuration")
    ap.add_argument("--corpus-limit", type=int, default=100, help="books read")
    ap.add_argument("--only", nargs="*", help="configuration letters to run (default: all)")
    args = ap.parse_args()
    cores = torch.get_num_threads()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    done_path = out / "sweep.jsonl"
    done = (
        {json.loads(x)["name"] for x in done_path.read_text().splitlines()}
        if done_path.exists()
        else set()
    )
    texts = None
    for name, (layers, embd, heads, ctx, merges, lr, warm, batch) in CONFIGS.items():
        if name in done or (args.only and name[0] not in args.only):
            continue
        tok_dir = out / f"tokenizer_{merges}"
        if (tok_dir / "tokenizer.json").exists():
            tok = GPT1Tokenizer.load(tok_dir)
        else:
            if texts is None:
                texts = load_documents(args.source, "train", limit=args.corpus_limit).texts
            tok = GPT1Tokenizer.from_spec(f"train:{merges}", texts)
            tok.save(tok_dir)
        data = build_corpus(tok, ctx, args.source, limit=args.corpus_limit, cache_dir=out / "cache")
        cfg_m = preset(
            "mini", vocab_size=tok.vocab_size, n_layer=layers, n_embd=embd, n_head=heads, n_ctx=ctx
        )
        # this shape's cost per update relative to A's, timed in turns so that other work on the
        # machine slows both alike; A's 10 minutes were 486 updates on the quiet machine
        ratio = relative_cost(cfg_m, batch, (preset("mini"), 32))
        per_step = REF_CPU_S * ratio
        steps = int(args.minutes * 60 * cores / per_step)
        cfg = PretrainConfig(
            total_steps=steps,
            batch_size=batch,
            max_lr=lr,
            warmup_steps=int(warm * steps),
            eval_interval=max(steps // 4, 1),
            eval_batches=16,
            ckpt_interval=steps,
            n_log_checkpoints=0,
            experiment=f"sweep:{name}",
        )
        seed_everything(0)
        model = FastGPT(cfg_m)
        c0, w0 = cpu_seconds(), time.perf_counter()
        run_dir = out / name.split()[0]
        res = pretrain(model, tok, data, cfg, run_dir, resume=run_dir.exists(), progress=False)
        cpu = cpu_seconds() - c0
        val = res.val_loss
        bpt = data.stats()["bytes_per_token"]
        row = {
            "name": name,
            "n_layer": layers,
            "n_embd": embd,
            "n_ctx": ctx,
            "merges": merges,
            "vocab": tok.vocab_size,
            "max_lr": lr,
            "warmup_steps": cfg.warmup_steps,
            "batch": batch,
            "steps": steps,
            "tokens": steps * batch * ctx,
            "params_M": sum(p.numel() for p in model.parameters()) / 1e6,
            "cost_vs_A": ratio,
            "cpu_s_per_step": per_step,
            "machine_minutes": cpu / cores / 60,
            "wall_minutes": (time.perf_counter() - w0) / 60,
            "val_loss": val,
            "val_ppl": math.exp(val),
            "bytes_per_token": bpt,
            "val_bits_per_byte": val / math.log(2) / bpt,
            "train_loss_last": float(res.history.query("metric == 'train_loss'")["value"].iloc[-1]),
        }
        with done_path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
