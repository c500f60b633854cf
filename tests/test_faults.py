"""Faults a long run meets (issue 36), each a row of BAD_INPUTS.md: a training loss that is not
finite, a validation loss that falls back to the corpus's unigram entropy, a records line cut
short, a full disk, a pickle from outside, two runs in one folder. The table counts these cases
with ``test_bad_checkpoints.CHECKPOINT``; they run here. Then what a case cannot show: a
diverged smoke run resumed from its last good checkpoint, a folder's lock while a run holds it
and after it fails, a broken records line that a resume keeps."""

import contextlib
import errno
import io
import json
import os
import pickle
import socket
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from bad_inputs import Case, params, registry, run_case, tiny
from safetensors.torch import save_file

from gpt1lib import experiments as ex
from gpt1lib.checkpoint import latest_checkpoint, load_run
from gpt1lib.corpus import build_corpus
from gpt1lib.fast import FastGPT
from gpt1lib.finetune import FinetuneRun, Updates, finetune
from gpt1lib.harness.runner import run as run_recipe
from gpt1lib.heads import TaskModel, build_task_model
from gpt1lib.loss import task_loss
from gpt1lib.optim import train_step
from gpt1lib.pretrain import learning_rate, pretrain
from gpt1lib.records import append_records, make_record, read_records
from gpt1lib.scales import SCALES
from gpt1lib.scoring import encode_all, predict
from gpt1lib.tasks import get_task, load_examples
from gpt1lib.weights import export_hf, load_original, load_pretrained
from gpt1lib.zeroshot import continuation_logprobs

FAULTS: list[Case] = []
fault = registry("fault", FAULTS)

DEAD = 2**22 + 12345  # above the default pid_max: no process has it
STARTED = "2026-11-30T10:00:00+00:00"


def _train(c, out, nan_at=None, resume=False, **cfg):
    """A run of the case's own (the guard that fails a case once training starts is lifted);
    ``nan_at``: the losses of that update (counted from this call's first) are NaN, so that its
    gradients and then its weights are, as a diverging run's."""
    n = [0]

    def step(model, opt, lr, losses, *a, **k):
        n[0] += 1
        if n[0] == nan_at:
            losses = (x * float("nan") for x in losses)
        return train_step(model, opt, lr, losses, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gpt1lib.pretrain.train_step", step)
        cfg = replace(c.cfg, **cfg)
        return pretrain(tiny(c.tok), c.tok, c.corpus, cfg, out, progress=False, resume=resume)


def _lock(folder: Path, pid: int) -> Path:
    """A lock in ``folder`` as a run of process ``pid`` leaves it."""
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / ".lock"
    lock.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": STARTED}))
    return lock


class _Writes:
    """A crafted pickle: unpickling it creates the file ``marker`` (any code could run so)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _pickled_npy(path: Path, marker: Path) -> None:
    """An .npy file whose one element is ``_Writes(marker)``: it runs when np.load unpickles."""
    with open(path, "wb") as f:
        np.save(f, np.array([_Writes(marker)], dtype=object), allow_pickle=True)


def _runs_no_code(c, load, *args):
    """``load(*args)``, then check that the crafted pickle did not run (its marker is absent)."""
    try:
        return load(*args)
    finally:
        assert not (c.tmp / "marker").exists(), "the pickle ran: it wrote its marker"


# ---------------------------------------------------------------- a run that diverges


@fault(
    FloatingPointError,
    match=r"(?s)update 3: the training loss is not finite at learning rate "
    r"7\.50e-04: stopped\. Last good checkpoint: \S+step_00000002 .*resume from it",
)
def pretrain_loss_not_finite(c):
    _train(c, c.tmp / "new", nan_at=3)  # 4 updates, a checkpoint every 2, warm-up of 8


@fault(
    match=r"(?s)update 4: a collapse: validation loss 99\.000 nats >= 5\.\d+, the entropy "
    r"of the training tokens' unigram distribution.*\[\('collapse', 4, 5\.\d+\), "
    r"\('collapse', 6, 5\.\d+\)\]$"
)
def pretrain_validation_loss_at_the_unigram_entropy(c):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gpt1lib.pretrain.evaluate", lambda *a, **k: 99.0)  # what a collapse gives
        _train(c, c.tmp / "new", total_steps=6, warmup_steps=2, eval_interval=2)
    rows = [json.loads(x) for x in (c.tmp / "new" / "records.jsonl").read_text().splitlines()]
    seen = [
        (r["metric"], r["step"], round(r["config"].get("unigram_entropy"), 3))
        for r in rows
        if r["metric"] == "collapse"
    ]
    return c.capsys.readouterr().out + str(seen)


# ---------------------------------------------------------------- a records line cut short


@fault(match=r"^\['train_loss', 'after'\]$")
def records_appended_after_a_torn_last_line(c):
    path = c.tmp / "records.jsonl"
    append_records(path, [make_record("train_loss", 1.0, step=1)])
    with open(path, "a") as f:
        f.write('{"metric": "train_loss", "val')  # what a kill mid-write left
    append_records(path, [make_record("after", 2.0, step=2)])
    with pytest.warns(UserWarning, match=r"records\.jsonl, line 2: not a JSON record"):
        return list(read_records(path).metric)


# ---------------------------------------------------------------- a full disk


def _full(real_write):
    """A write that gets half of its bytes onto the disk, then finds it full."""

    def write(data):
        real_write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return write


@fault(
    match=r"(?s)step_00000004-\d+/model\.safetensors.*No space left.*[\d,]+ MiB free.*"
    r"\| latest step_00000002, loads: True, resumed to 4 \| leftovers \[\]$"
)
def disk_full_during_a_checkpoint(c):
    def half(tensors, filename, *a, **k):
        if ".tmp-step_00000004" not in str(filename):
            return save_file(tensors, filename, *a, **k)
        save_file(tensors, filename, *a, **k)
        Path(filename).write_bytes(Path(filename).read_bytes()[:1000])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    run, said = c.tmp / "new", "no error"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gpt1lib.files.save_file", half)
        try:
            _train(c, run)  # 4 updates: the checkpoint at 2 written, the one at 4 not
        except OSError as e:
            said = str(e)
    latest = latest_checkpoint(run)
    loads = load_run(latest)[0] is not None
    resumed = _train(c, run, resume=True).step  # which removes the half-written checkpoint
    left = sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.startswith("."))
    return f"{said} | latest {latest.name}, loads: {loads}, resumed to {resumed} | leftovers {left}"


@fault(match=r"records\.jsonl.*No space left.*[\d,]+ MiB free.* \| unchanged: True$")
def disk_full_during_a_records_write(c):
    path = c.run / "records.jsonl"
    before, real_open, said = path.read_bytes(), open, "no error"

    class Full:  # the file as ``open`` gives it, but its writes meet a full disk
        def __init__(self, f):
            self.f, self.write = f, _full(f.write)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gpt1lib.records.open", lambda *a, **k: Full(real_open(*a, **k)), raising=False)
        try:
            append_records(path, [make_record("train_loss", 1.0, step=9)] * 50)
        except OSError as e:
            said = str(e)
    return f"{said} | unchanged: {path.read_bytes() == before}"


# ---------------------------------------------------------------- a pickle from outside


@fault(
    ValueError,
    match=r"params_0\.npy is damaged \(numpy reads it as pickled objects, "
    r"which gpt1lib never loads",
)
def pickle_as_an_original_weights_shard(c):
    folder = c.tmp / "release"
    folder.mkdir()
    (folder / "params_shapes.json").write_text("[[1]]")
    _pickled_npy(folder / "params_0.npy", c.tmp / "marker")
    _runs_no_code(c, load_original, folder)


@fault(
    warns=UserWarning,
    match=r"tokens-.*\.npy is damaged \(numpy reads it as pickled "
    r"objects, which gpt1lib never loads.*tokenising again",
)
def pickle_as_a_token_cache(c):
    build_corpus(c.tok, 32, "fixture", cache_dir=c.tmp / "cache")
    for f in (c.tmp / "cache").glob("tokens-*.npy"):
        _pickled_npy(f, c.tmp / "marker")
    again = _runs_no_code(c, build_corpus, c.tok, 32, "fixture", 0.05, 0, None, c.tmp / "cache")
    assert (again.train.tokens == c.corpus.train.tokens).all()


@fault(ValueError, match=r"model\.safetensors is damaged")
def pickle_as_checkpoint_weights(c):
    meta = json.loads((c.log_ckpt / "model.json").read_text())
    (c.log_ckpt / "model.json").write_text(json.dumps({k: meta[k] for k in ("arch", "config")}))
    (c.log_ckpt / "model.safetensors").write_bytes(pickle.dumps(_Writes(c.tmp / "marker")))
    _runs_no_code(c, load_run, c.log_ckpt)


@fault(ValueError, match=r"model\.safetensors is damaged .*download it again")
def pickle_as_released_weights(c):
    export_hf(c.model, c.tmp / "hf")
    torch.save({"w": _Writes(c.tmp / "marker")}, c.tmp / "hf" / "model.safetensors")
    _runs_no_code(c, load_pretrained, c.tmp / "hf")


# ---------------------------------------------------------------- two runs, one folder


@fault(
    FileExistsError,
    match=r"(?s)run is in use by another run: process \d+ on \S+, started "
    r"2026-11-30T10:00:00\+00:00 \(\S+\.lock\)\. Wait for it to end",
)
def second_run_in_the_same_pretrain_folder(c):
    _lock(c.run, os.getppid())  # a process that runs: this one's parent
    pretrain(tiny(c.tok), c.tok, c.corpus, c.cfg, c.run, progress=False, resume=True)


@fault(
    match=r"\.lock: process 4206649 \(started 2026-11-30T10:00:00\+00:00\) no longer runs: "
    r"lock taken over\n \| lock left: False$"
)
def stale_lock_in_the_pretrain_folder(c):
    lock = _lock(c.run, DEAD)
    r = pretrain(tiny(c.tok), c.tok, c.corpus, c.cfg, c.run, progress=False, resume=True)
    assert r.step == 4  # a finished run: it starts and ends
    return c.capsys.readouterr().out + f" | lock left: {lock.exists()}"


@fault(FileExistsError, match=r"(?s)smoke is in use by another run: process \d+ .*\.lock")
def second_run_in_the_same_results_folder(c):
    _lock(c.tmp / "results" / "smoke", os.getppid())
    run_recipe("smoke", "fixture", "fixture", c.tmp / "runs", c.tmp / "results")


# ---------------------------------------------------------------- fine-tuning and scoring

UPDATE = Updates.update  # the guard that fails a case once training starts replaces it
NOISELESS = replace(SCALES["smoke"].finetune, clf_pdrop=0.0, epochs=1, batch_size=8)


def _finetune(c, cfg=NOISELESS, **faults):
    """Chapter 05's fine-tuning of SST-2 on the fixture, on the case's tiny model without
    dropout (an update split into micro-batches is then the same update, to rounding)."""
    model = FastGPT(replace(c.model.config, embd_pdrop=0.0, attn_pdrop=0.0, resid_pdrop=0.0))
    model.load_state_dict(c.model.state_dict())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gpt1lib.finetune.Updates.update", UPDATE)
        for target, fn in faults.items():
            mp.setattr(target, fn)
        return finetune(model, c.tok, FinetuneRun("sst2", cfg, progress=False))


def _oom_above(n: int, real, call: int | None = None):
    """``real`` (a forward pass), out of GPU memory for a batch of more than ``n`` examples, and
    at its ``call``-th call whatever the batch."""
    calls = [0]

    def forward(self, batch, *a, **k):
        calls[0] += 1
        if batch.labels.size(0) > n or calls[0] == call:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected)")
        return real(self, batch, *a, **k)

    return forward


@fault(
    FloatingPointError,
    match=r"sst2: the fine-tuning loss is not finite at update 3 \(learning "
    r"rate \d\.\d+e-\d+\).*Lower FinetuneConfig\.lr",
)
def finetune_loss_not_finite(c):
    n = [0]

    def nan_at_3(*a, **k):
        n[0] += 1
        parts = task_loss(*a, **k)
        return [p * float("nan") for p in parts] if n[0] == 3 else parts

    _finetune(c, **{"gpt1lib.finetune.task_loss": nan_at_3})


@fault(match=r"^micro-batches 4, the same losses: True$")
def finetune_out_of_gpu_memory(c):
    plain = _finetune(c)
    # out of memory at batch 8, then in 2 micro-batches of 4 at the second update's second one
    # (calls: 8 | 4, 4 | 4, 4): its first one's losses must not count twice
    oom = _oom_above(4, TaskModel.forward, call=5)
    split = _finetune(c, **{"gpt1lib.heads.TaskModel.forward": oom})
    said = [r["value"] for r in split.records if r["metric"] == "micro_batches"]
    same = [r["value"] for r in plain.records if r["metric"] in ("loss", "accuracy")]
    again = [r["value"] for r in split.records if r["metric"] in ("loss", "accuracy")]
    return f"micro-batches {int(said[0])}, the same losses: {np.allclose(same, again, rtol=1e-5)}"


@fault(
    RuntimeError,
    match=r"sst2: one example of up to \d+ tokens a sequence runs out of GPU "
    r"memory even alone: lower FinetuneConfig\.max_len",
)
def finetune_one_example_too_long_for_the_gpu(c):
    _finetune(c, **{"gpt1lib.heads.TaskModel.forward": _oom_above(0, TaskModel.forward)})


@fault(match=r"^the same scores: True$")
def scoring_out_of_gpu_memory(c):
    model = build_task_model(c.model, get_task("sst2"), NOISELESS)
    items = encode_all(load_examples("sst2", "dev"), get_task("sst2"), c.tok, 32)
    plain = predict(model, items, batch_size=16)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gpt1lib.heads.TaskModel.forward", _oom_above(3, TaskModel.forward))
        halved = predict(model, items, batch_size=16)
    return f"the same scores: {np.allclose(plain, halved, atol=1e-6)}"


@fault(match=r"^the same log-probabilities: True$")
def zero_shot_out_of_gpu_memory(c):
    prefixes, ends = [[5, 6, 7, i % 50] for i in range(12)], [[8, 9]] * 12
    plain = continuation_logprobs(c.model, prefixes, ends, batch_size=8)
    real, sizes = type(c.model).hidden, []

    def hidden(self, x):
        sizes.append(x.size(0))
        if x.size(0) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected)")
        return real(self, x)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(c.model), "hidden", hidden)
        halved = continuation_logprobs(c.model, prefixes, ends, batch_size=8)
    assert sizes[0] == 8 and sizes[-1] == 2, sizes  # the batch was halved
    return f"the same log-probabilities: {np.allclose(plain, halved, atol=1e-5)}"


# ---------------------------------------------------------------- CUDA graphs (issue 33)
# On the CPU: the capture replaced by one that fails, as a real one did on an H100 (a27161b)


def _refused(fn, pool):
    raise RuntimeError("operation failed due to a previous error during capture")


GRAPHED = {  # graphs on, lengths in multiples of 16 (shapes met again), every capture failing
    "gpt1lib.finetune.graphs_pay": lambda *a: True,
    "gpt1lib.finetune.pad_multiple": lambda device, asked=None: 16,
    "gpt1lib.steps.cuda_graph": _refused,
}


@fault(match=r"^failed captures [1-9]\d*, replays 0, the same losses: True, said: True$")
def graph_capture_fails(c):
    plain = _finetune(
        c, **{"gpt1lib.finetune.pad_multiple": GRAPHED["gpt1lib.finetune.pad_multiple"]}
    )
    with contextlib.redirect_stdout(io.StringIO()) as out:
        eager = _finetune(c, **GRAPHED)
    said = {r["metric"]: r["value"] for r in eager.records if r["split"] == "train_loss"}
    same = [r["value"] for r in plain.records if r["metric"] in ("loss", "accuracy")]
    again = [r["value"] for r in eager.records if r["metric"] in ("loss", "accuracy")]
    return (
        f"failed captures {int(said['graph_failures'])}, replays {int(said['graphed_updates'])}, "
        f"the same losses: {np.allclose(same, again, rtol=1e-5)}, "
        f"said: {'CUDA graph capture failed, eager for this shape' in out.getvalue()}"
    )


@fault(RuntimeError, match=r"CUDA graph capture failed .* FinetuneConfig\(graphs=False\)")
def graph_capture_breaks_the_random_generator(c):
    _finetune(c, **GRAPHED, **{"gpt1lib.steps.random_ok": lambda device: False})


@pytest.mark.parametrize("case", params(FAULTS))
def test_fault(case, c):
    run_case(case, c)


# ---------------------------------------------------------------- what the cases cannot show


def test_a_diverged_smoke_run_stops_at_once_and_resumes_from_its_last_good_checkpoint(
    tmp_path, monkeypatch
):
    S = SCALES["smoke"]  # 80 updates, a checkpoint at 40, warm-up 8
    job = ex.pretraining(S, "fixture", tmp_path)
    n = [0]

    def step(model, opt, lr, losses, *a, **k):
        n[0] += 1
        if n[0] == 50:  # update 50's losses NaN, then its gradients and weights
            losses = (x * float("nan") for x in losses)
        return train_step(model, opt, lr, losses, *a, **k)

    monkeypatch.setattr("gpt1lib.pretrain.train_step", step)
    lr = learning_rate(49, S.pretrain, 80)
    with pytest.raises(FloatingPointError, match=rf"update 50: .* {lr:.2e}.*step_00000040"):
        job.run(progress=False)
    monkeypatch.undo()
    assert latest_checkpoint(job.folder).name == "step_00000040"  # none after the NaN
    assert not (job.folder / ".lock").exists()  # let go on the error
    rows = read_records(job.folder / "records.jsonl")
    assert rows.step.max() < 50 and np.isfinite(rows.value).all()  # nothing of update 50 kept
    r = ex.pretraining(S, "fixture", tmp_path).run(progress=False)  # resumes where it can
    assert r.step == 80 and np.isfinite(r.val_loss)
    assert np.isfinite(read_records(job.folder / "records.jsonl").value).all()


def test_a_run_holds_its_folder_locked_and_lets_go_after_an_error(base, tmp_path, monkeypatch):
    held = []

    def dies(model, *a, **k):
        lock = json.loads((tmp_path / "run" / ".lock").read_text())
        held.append(lock["pid"])
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr("gpt1lib.pretrain.train_step", dies)
    with pytest.raises(KeyboardInterrupt):
        pretrain(tiny(base.tok), base.tok, base.corpus, base.cfg, tmp_path / "run", progress=False)
    assert held == [os.getpid()]
    assert not (tmp_path / "run" / ".lock").exists()


def test_a_resume_keeps_a_broken_records_line_inside(c):
    path = c.run / "records.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{mine, half-edited", *lines[1:]]) + "\n")
    append_records(path, [make_record("train_loss", 1.0, step=9)])  # logged after the checkpoint
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _train(c, c.run, resume=True)  # rewrites the records without the one of update 9
    assert any("line 2: not a JSON record" in str(w.message) for w in seen)
    after = path.read_text().splitlines()
    assert "{mine, half-edited" in after  # nothing a user made is lost
    assert len(after) == len(lines) + 1 and '"step": 9' not in after[-1]
