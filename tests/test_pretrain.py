"""Pre-training (§3.1, §4.1): schedule, decay scope, exact resume, DDP, and bad input."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from gpt1lib import GPT, FastGPT, preset
from gpt1lib.checkpoint import (
    CheckpointError,
    latest_checkpoint,
    load_checkpoint,
    read_state,
    save_checkpoint,
)
from gpt1lib.corpus import build_corpus, load_documents
from gpt1lib.files import LEFTOVER
from gpt1lib.optim import make_optimizer
from gpt1lib.pretrain import learning_rate, pretrain
from gpt1lib.pretrain.logger import log_spaced_steps
from gpt1lib.runtime import Precision
from gpt1lib.scales import SCALES
from gpt1lib.settings import PretrainConfig
from gpt1lib.tokenizer import GPT1Tokenizer

SMOKE = SCALES["smoke"].pretrain


@pytest.fixture(scope="module")
def tok():
    return GPT1Tokenizer.train(texts=load_documents("fixture").texts, n_merges=300)


@pytest.fixture(scope="module")
def corpus(tok):
    return build_corpus(tok, 32, "fixture")


def _model(tok, **kw):
    torch.manual_seed(0)
    return FastGPT(preset("tiny", vocab_size=tok.vocab_size, n_ctx=32, **kw))


def test_schedule_is_linear_warmup_then_cosine_to_zero():
    cfg = PretrainConfig(max_lr=2.5e-4, warmup_steps=2000)
    total = 10_000
    assert learning_rate(0, cfg, total) == pytest.approx(2.5e-4 / 2000)  # update 1
    assert learning_rate(999, cfg, total) == pytest.approx(2.5e-4 * 1000 / 2000)
    assert learning_rate(1999, cfg, total) == pytest.approx(2.5e-4)  # the peak, at update 2000
    mid = 2000 + (total - 2000) // 2  # halfway through the cosine: half the peak
    assert learning_rate(mid - 1, cfg, total) == pytest.approx(1.25e-4)
    assert learning_rate(total - 1, cfg, total) == pytest.approx(0.0, abs=1e-12)
    t = 5000  # the formula at an arbitrary update
    expected = 2.5e-4 * 0.5 * (1 + math.cos(math.pi * (t - 2000) / (total - 2000)))
    assert learning_rate(t - 1, cfg, total) == pytest.approx(expected)


def test_weight_decay_touches_exactly_the_weights_of_rank_two_or_more():
    model = GPT(preset("tiny"))
    opt = make_optimizer(model, 2.5e-4)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {
        names[id(p)] for g in opt.param_groups if g["weight_decay"] == 0.01 for p in g["params"]
    }
    plain = {
        names[id(p)] for g in opt.param_groups if g["weight_decay"] == 0.0 for p in g["params"]
    }
    assert "tokens_embed.weight" in decayed and "positions_embed.weight" in decayed
    assert "h.0.attn.c_attn.weight" in decayed and "h.1.mlp.c_proj.weight" in decayed
    assert all(n.endswith("bias") or ".ln_" in n for n in plain)
    assert "h.0.ln_1.weight" in plain and "h.0.attn.c_attn.bias" in plain
    assert decayed | plain == set(names.values()) and not decayed & plain
    # decoupled: a zero gradient still shrinks a decayed weight by lr * wd, not a gain
    w, g = model.h[0].mlp.c_fc.weight, model.h[0].ln_1.weight
    before_w, before_g = w.detach().clone(), g.detach().clone()
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    assert torch.allclose(w, before_w * (1 - 2.5e-4 * 0.01))
    assert torch.equal(g, before_g)


def test_log_spaced_steps():
    assert log_spaced_steps(1000, 4) == [1, 10, 100, 1000]


def test_a_short_run_lowers_the_loss_and_writes_records(tok, corpus, tmp_path):
    cfg = replace(SMOKE, total_steps=40, eval_interval=20, ckpt_interval=20)
    r = pretrain(_model(tok), tok, corpus, cfg, tmp_path, progress=False)
    h = r.history
    val = h[h.metric == "val_loss"].sort_values("step")["value"].tolist()
    assert len(val) == 2 and r.step == 40
    first = h[(h.metric == "train_loss")].sort_values("step")["value"].iloc[0]
    assert val[-1] < first  # it learned something
    assert math.log(tok.vocab_size) > val[-1]
    assert set(h.columns) >= {"commit", "device", "date", "scale", "seed", "wall_time"}
    assert [p.name for p in r.log_checkpoints][-1] == "step_00000040"
    assert latest_checkpoint(tmp_path).name == "step_00000040"
    assert {c["loss_path"] for c in h.config} == {"fused"}  # the CPU's L1, said by each record
    # where the time went: each part once, at the last update; the loop's parts add up to it
    t = h[h.split == "time"].set_index("metric")
    parts = ["setup", "update", "first_update", "eval", "save"]
    assert sorted(t.index) == sorted(f"{p}_seconds" for p in parts) and set(t.step) == {40}
    assert (t.value > 0).all() and t.value["update_seconds"] > t.value["first_update_seconds"]
    loop = t.value[["update_seconds", "eval_seconds", "save_seconds"]].sum()
    assert loop == pytest.approx(h[h.split != "time"].wall_time.max(), rel=0.1)


@pytest.mark.skipif(
    not os.environ.get("GPT1_TEST_COMPILE"),
    reason="torch.compile takes about a minute on a 2-core CPU; GPT1_TEST_COMPILE=1",
)
def test_a_compiled_run_learns_as_an_eager_one_and_leaves_the_model_eager(tok, corpus, tmp_path):
    """``compile=True`` compiles the transformer block by block for the loop alone."""
    cfg = replace(SMOKE, total_steps=6, eval_interval=3, ckpt_interval=6, n_log_checkpoints=2)
    losses = []
    for name, compile in (("eager", False), ("compiled", True)):
        model = _model(tok)
        run = replace(cfg, compile=compile)
        h = pretrain(model, tok, corpus, run, tmp_path / name, progress=False).history
        losses.append(h[h.metric.isin(["train_loss", "val_loss"])].value.to_numpy())
    assert all(b._compiled_call_impl is None for b in model.h) and model.compiled_loss is None
    assert len(losses[0]) == 4 and losses[1] == pytest.approx(losses[0], rel=1e-3)


def test_log_spaced_checkpoints_may_start_past_the_first_update():
    assert log_spaced_steps(2000, 4, first=50) == [50, 171, 585, 2000]
    assert log_spaced_steps(30, 3, first=50) == [30]  # a run shorter than the first: its last


def test_a_run_whose_gradients_are_all_zero_stops_at_its_first_update(
    tok, corpus, tmp_path, monkeypatch
):
    """What a compiled loss did on an H100 (10 minutes of pre-training that learned nothing):
    now the first update says so, before any checkpoint is written."""
    import gpt1lib.fast

    real = gpt1lib.fast.fused_lm_loss
    monkeypatch.setattr(gpt1lib.fast, "fused_lm_loss", lambda *a, **k: real(*a, **k) * 0)
    cfg = replace(SMOKE, total_steps=40, eval_interval=20, ckpt_interval=20)
    with pytest.raises(RuntimeError, match="every gradient of the first update is zero"):
        pretrain(_model(tok), tok, corpus, cfg, tmp_path, progress=False)
    assert latest_checkpoint(tmp_path) is None


def _logged(run: Path, metrics=("train_loss", "val_loss", "lr")) -> dict:
    """A run's logged values by (metric, step): what a resumed run must log as one that was
    never interrupted (tokens_per_s is wall time, and differs)."""
    rows = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    return {(r["metric"], r["step"]): r["value"] for r in rows if r["metric"] in metrics}


def test_resume_in_parts_equals_one_run(tok, corpus, tmp_path):
    """Stopped at update 13, between two training-loss records (every 5): the record at 15
    still averages updates 11-15, as the uninterrupted run's does."""
    cfg = replace(SMOKE, total_steps=30, ckpt_interval=10, eval_interval=10)
    a = _model(tok)
    pretrain(a, tok, corpus, cfg, tmp_path / "a", progress=False)
    b = _model(tok)
    pretrain(b, tok, corpus, cfg, tmp_path / "b", progress=False, stop_after=13)
    b = _model(tok)  # a fresh process would start from a fresh model
    pretrain(b, tok, corpus, cfg, tmp_path / "b", progress=False, resume=True)
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k
    a, b = _logged(tmp_path / "a"), _logged(tmp_path / "b")
    assert {k: b[k] for k in a} == a  # b also logged update 13, where its first part stopped


def test_float16_resume_goes_on_from_the_saved_loss_scale(tok, corpus, tmp_path, monkeypatch):
    """float16 (a T4's precision) on the CPU: the first updates overflow and halve the loss
    scale, so a resumed run that started again from 2**16 would skip other updates."""
    import gpt1lib.pretrain

    f16 = Precision(torch.float16, "float16 autocast with loss scaling")
    monkeypatch.setattr(gpt1lib.pretrain, "pick_precision", lambda *a: f16)
    test_resume_in_parts_equals_one_run(tok, corpus, tmp_path)
    scale = read_state(latest_checkpoint(tmp_path / "b"))["grad_scaler"]["scale"]
    assert scale < 2.0**16  # the test above saw the scale lowered


@pytest.fixture(scope="module")
def tok_dir(tok, tmp_path_factory):
    """The module's tokenizer saved, so that every process of a test reads the same one."""
    return tok.save(tmp_path_factory.mktemp("tokenizer"))


def _cli(out: Path, tok_dir: Path, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "gpt1lib.harness.pretrain",
        "--scale",
        "smoke",
        "--out",
        str(out),
        "--no-progress",
        "--tokenizer",
        str(tok_dir),
        *args,
    ]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)


def test_sigkill_mid_training_then_resume_is_bit_identical(tmp_path, tok_dir):
    """Checkpoints every 64 updates, the training loss logged every 5 (smoke's): no checkpoint
    before the end falls on a log step (64 x 5 > 300), so the resume always starts mid-way
    through a logged average, and must log the same losses as the uninterrupted run."""
    steps = ["--steps", "300", "--ckpt-interval", "64"]
    full = _cli(tmp_path / "full", tok_dir, *steps)
    killed = _cli(tmp_path / "killed", tok_dir, *steps)
    deadline = time.time() + 120
    pointer = tmp_path / "killed" / "checkpoints" / "latest.json"
    while time.time() < deadline:  # kill it while it trains, after at least one checkpoint
        if pointer.is_file() and json.loads(pointer.read_text())["step"] >= 50:
            break
        assert killed.poll() is None, killed.stdout.read().decode()[-2000:]
        time.sleep(0.01)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    stopped_at = json.loads(pointer.read_text())["step"]
    assert 50 <= stopped_at < 300 and stopped_at % SMOKE.log_interval
    resumed = _cli(tmp_path / "killed", tok_dir, *steps, "--resume")
    assert resumed.wait() == 0, resumed.stdout.read().decode()[-2000:]
    assert full.wait() == 0, full.stdout.read().decode()[-2000:]
    a = load_file(str(tmp_path / "full/checkpoints/step_00000300/model.safetensors"))
    b = load_file(str(tmp_path / "killed/checkpoints/step_00000300/model.safetensors"))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # nothing half-written is left, and each step's records are there once
    assert not [p for p in (tmp_path / "killed").rglob(".*") if LEFTOVER.match(p.name)]
    rows = [json.loads(x) for x in (tmp_path / "killed/records.jsonl").read_text().splitlines()]
    logged = [(r["metric"], r["step"]) for r in rows]
    assert len(logged) == len(set(logged)) and ("train_loss", 300) in logged
    # and the losses logged after the resume are the uninterrupted run's, bit for bit
    after = {k: v for k, v in _logged(tmp_path / "killed").items() if k[1] > stopped_at}
    assert after == {k: v for k, v in _logged(tmp_path / "full").items() if k[1] > stopped_at}
    assert _logged(tmp_path / "killed") == _logged(tmp_path / "full")


def test_interrupted_checkpoint_write_leaves_the_previous_one(tok, corpus, tmp_path, monkeypatch):
    cfg = replace(SMOKE, total_steps=20, ckpt_interval=10, eval_interval=10)
    model = _model(tok)
    pretrain(model, tok, corpus, cfg, tmp_path, progress=False, stop_after=10)
    good = latest_checkpoint(tmp_path)

    def dies(*a, **k):
        raise KeyboardInterrupt("killed while writing")

    monkeypatch.setattr(type(tok), "save", dies)
    with pytest.raises(KeyboardInterrupt):
        pretrain(_model(tok), tok, corpus, cfg, tmp_path, progress=False, resume=True)
    monkeypatch.undo()
    assert latest_checkpoint(tmp_path) == good
    state = read_state(good)
    fresh = _model(tok)
    load_checkpoint(good, fresh, make_optimizer(fresh, cfg.max_lr), torch.device("cpu"))
    assert state["step"] == 10
    # and the run goes on from it
    r = pretrain(_model(tok), tok, corpus, cfg, tmp_path, progress=False, resume=True)
    assert r.step == 20


def test_ddp_two_processes_match_one_process(tmp_path, tok_dir):
    args = ["--steps", "6", "--batch-size", "8", "--dropout", "0", "--ckpt-interval", "100"]
    one = _cli(tmp_path / "one", tok_dir, *args)
    assert one.wait() == 0, one.stdout.read().decode()[-2000:]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        "29517",
        "-m",
        "gpt1lib.harness.pretrain",
        "--scale",
        "smoke",
        "--out",
        str(tmp_path / "two"),
        "--no-progress",
        "--tokenizer",
        str(tok_dir),
        *args,
    ]
    two = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, (two.stdout + two.stderr)[-3000:]

    def losses(run):
        rows = [
            json.loads(x) for x in (tmp_path / run / "records.jsonl").read_text().split("\n") if x
        ]
        return [r["value"] for r in rows if r["metric"] in ("train_loss", "val_loss")]

    a, b = losses("one"), losses("two")
    assert len(a) == len(b) > 0
    assert a == pytest.approx(b, rel=1e-5)


# ------------------------------------------------------------------ bad input


def test_tokenizer_that_does_not_fit_the_model(tok, corpus, tmp_path):
    model = GPT(preset("tiny", vocab_size=tok.vocab_size + 5, n_ctx=32))
    with pytest.raises(ValueError, match="vocab_size=tokenizer.vocab_size"):
        pretrain(model, tok, corpus, SMOKE, tmp_path, progress=False)
    assert not any(tmp_path.iterdir())


def test_empty_corpus(tok, tmp_path):
    (tmp_path / "empty.txt").write_text("  \n")
    with pytest.raises(ValueError, match="empty"):
        build_corpus(tok, 32, tmp_path / "empty.txt")


def test_corpus_shorter_than_one_block(tok, tmp_path):
    folder = tmp_path / "c"
    (folder / "train").mkdir(parents=True)
    (folder / "valid").mkdir()
    (folder / "train" / "a.txt").write_text("a short text.")
    (folder / "valid" / "b.txt").write_text("another one.")
    with pytest.raises(ValueError, match="fewer than one block"):
        build_corpus(tok, 32, folder)


def test_resume_with_another_config_is_refused(tok, corpus, tmp_path):
    cfg = replace(SMOKE, total_steps=10, ckpt_interval=5)
    pretrain(_model(tok), tok, corpus, cfg, tmp_path, progress=False, stop_after=5)
    before = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    with pytest.raises(CheckpointError, match="max_lr: checkpoint 0.002 vs now 0.001"):
        pretrain(
            _model(tok),
            tok,
            corpus,
            replace(cfg, max_lr=1e-3),
            tmp_path,
            progress=False,
            resume=True,
        )
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == before


def test_resume_across_speed_settings_is_allowed(tok, corpus, tmp_path):
    cfg = replace(SMOKE, total_steps=10, ckpt_interval=5)
    pretrain(_model(tok), tok, corpus, cfg, tmp_path, progress=False, stop_after=5)
    torch.manual_seed(0)
    plain = GPT(preset("tiny", vocab_size=tok.vocab_size, n_ctx=32))  # no speed paths at all
    r = pretrain(plain, tok, corpus, cfg, tmp_path, progress=False, resume=True)
    assert r.step == 10
    padded = FastGPT(plain.config, pad_vocab_to=64)
    cfg = replace(cfg, total_steps=10)
    assert pretrain(padded, tok, corpus, cfg, tmp_path, progress=False, resume=True).step == 10


def test_existing_run_is_not_overwritten(tok, corpus, tmp_path):
    cfg = replace(SMOKE, total_steps=5, ckpt_interval=5)
    pretrain(_model(tok), tok, corpus, cfg, tmp_path, progress=False)
    with pytest.raises(FileExistsError, match="resume=True"):
        pretrain(_model(tok), tok, corpus, cfg, tmp_path, progress=False)


def test_a_folder_that_is_not_a_checkpoint(tmp_path):
    with pytest.raises(
        CheckpointError, match="lacks .*: pass a checkpoint folder written by pretrain"
    ):
        read_state(tmp_path)


def test_checkpoint_round_trip(tok, tmp_path):
    model = _model(tok)
    opt = make_optimizer(model, SMOKE.max_lr)
    model(torch.randint(0, tok.vocab_size, (2, 8)))[0].sum().backward()
    opt.step()
    save_checkpoint(tmp_path / "c", model, opt, tok, {"step": 1})
    other = _model(tok, n_layer=2)
    with torch.no_grad():
        for p in other.parameters():
            p.zero_()
    opt2 = make_optimizer(other, SMOKE.max_lr)
    load_checkpoint(tmp_path / "c", other, opt2, torch.device("cpu"))
    assert all(
        torch.equal(a, b) for a, b in zip(model.parameters(), other.parameters(), strict=True)
    )
    s1, s2 = opt.state_dict()["state"], opt2.state_dict()["state"]
    assert all(torch.equal(s1[i]["exp_avg_sq"], s2[i]["exp_avg_sq"]) for i in s1)
