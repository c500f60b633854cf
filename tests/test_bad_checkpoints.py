"""Damaged or foreign checkpoints and run files: each case of BAD_INPUTS.md gets an error that
names the file and the fix; then what a crash leaves: records once per step, leftovers removed,
a moved run that resumes, every checkpoint file's sha256."""

import json
import re
import shutil
from dataclasses import replace

import pytest
import torch
from bad_inputs import Case, Expensive, params, registry, run_case, tiny
from test_faults import FAULTS

from gpt1lib import GPT1Tokenizer
from gpt1lib.checkpoint import CheckpointError, latest_checkpoint, load_run, read_state, save_model
from gpt1lib.corpus import FIXTURE, build_corpus, load_documents
from gpt1lib.files import LEFTOVER, file_sha256
from gpt1lib.optim import train_step
from gpt1lib.pretrain import pretrain
from gpt1lib.records import provenance, read_records
from gpt1lib.runs import pretrained_model
from gpt1lib.weights import export_hf, load_pretrained

CHECKPOINT: list[Case] = []
checkpoint = registry("checkpoint", CHECKPOINT)


def _resume(c, **cfg):
    cfg = replace(c.cfg, **cfg)
    return pretrain(tiny(c.tok), c.tok, c.corpus, cfg, c.run, progress=False, resume=True)


def _trained(c, out, stop_after=None, resume=False, **cfg):
    """A run of the case's own, for the cases whose input is a run stopped and resumed: the
    guard that fails a case once training starts (``bad_inputs.context``) is lifted."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gpt1lib.pretrain.train_step", train_step)
        cfg = replace(c.cfg, **cfg)
        kw = {"progress": False, "stop_after": stop_after, "resume": resume}
        return pretrain(tiny(c.tok), c.tok, c.corpus, cfg, out, **kw)


def _logged(run):
    """A run's logged values by (metric, step), but its throughput and seconds (wall time)."""
    rows = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    timed = [r for r in rows if r["metric"] != "tokens_per_s" and r["split"] != "time"]
    return {(r["metric"], r["step"]): r["value"] for r in timed}


def _flip(path, n=100):
    data = bytearray(path.read_bytes())
    for i in range(n):
        data[len(data) // 2 + i] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _edit_json(path, edit):
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))


@checkpoint(CheckpointError, match="init='.*nowhere': .*nowhere does not exist")
def init_folder_that_does_not_exist(c):
    pretrained_model("smoke", c.tmp, init=str(c.tmp / "nowhere"))


@checkpoint(CheckpointError, match="nowhere does not exist: pass a folder written by save_model")
def load_run_model_missing_folder(c):
    load_run(c.tmp / "nowhere")


@checkpoint(CheckpointError, match="holds no model.json \\+ model.safetensors")
def folder_without_model_files(c):
    load_run(c.tmp)


@checkpoint(CheckpointError, match="a transformers folder.*load_pretrained")
def transformers_folder_as_a_checkpoint(c):
    (c.tmp / "hf").mkdir()
    (c.tmp / "hf" / "config.json").write_text("{}")
    shutil.copy(c.log_ckpt / "model.safetensors", c.tmp / "hf")
    load_run(c.tmp / "hf")


@checkpoint(CheckpointError, match=r"hf/model\.safetensors is damaged .*download it again")
def transformers_weights_truncated(c):
    export_hf(c.model, c.tmp / "hf")  # a transformers folder, as the hub's download is
    _truncate(c.tmp / "hf" / "model.safetensors")
    load_pretrained(c.tmp / "hf")


@checkpoint(CheckpointError, match=r"hf/config\.json is not valid JSON .*download it again")
def transformers_config_json_torn(c):
    export_hf(c.model, c.tmp / "hf")
    (c.tmp / "hf" / "config.json").write_text('{"vocab_size": 10')
    load_pretrained(c.tmp / "hf")


@checkpoint(CheckpointError, match=r"model\.safetensors is damaged \(its sha256 differs")
def model_weights_truncated(c):
    _truncate(c.log_ckpt / "model.safetensors")
    load_run(c.log_ckpt)


@checkpoint(CheckpointError, match=r"model\.safetensors is damaged \(its sha256 differs")
def model_weights_with_100_flipped_bytes(c):
    _flip(c.log_ckpt / "model.safetensors")
    load_run(c.log_ckpt)


@checkpoint(CheckpointError, match=r"model\.safetensors is damaged .*resume from another")
def resume_from_flipped_model_weights(c):
    _flip(c.ckpt / "model.safetensors")
    _resume(c)


@checkpoint(CheckpointError, match=r"train_state\.safetensors is damaged")
def resume_from_truncated_optimizer_state(c):
    _truncate(c.ckpt / "train_state.safetensors")
    _resume(c)


@checkpoint(CheckpointError, match=r"model\.safetensors is damaged \(SafetensorError")
def truncated_weights_without_a_recorded_sha256(c):
    _edit_json(c.log_ckpt / "model.json", lambda m: {k: v for k, v in m.items() if k != "sha256"})
    _truncate(c.log_ckpt / "model.safetensors")
    load_run(c.log_ckpt)


@checkpoint(CheckpointError, match=r"state\.json is not valid JSON .*delete this checkpoint")
def state_json_not_json(c):
    (c.ckpt / "state.json").write_text('{"step": 4, "param')
    _resume(c)


@checkpoint(CheckpointError, match=r"state\.json lacks \['step', 'param_groups'\]")
def state_json_of_something_else(c):
    (c.ckpt / "state.json").write_text('{"hello": 1}')
    _resume(c)


@checkpoint(CheckpointError, match=r"latest\.json is not valid JSON .*step_00000004")
def latest_json_empty(c):
    (c.run / "checkpoints" / "latest.json").write_text("")
    _resume(c)


@checkpoint(CheckpointError, match="names 'step_00000099', which is not a folder there")
def latest_json_names_a_missing_folder(c):
    (c.run / "checkpoints" / "latest.json").write_text('{"name": "step_00000099"}')
    latest_checkpoint(c.run)


@checkpoint(CheckpointError, match=r"model\.json is not valid JSON")
def model_json_not_json(c):
    (c.log_ckpt / "model.json").write_text("arch: GPT")
    load_run(c.log_ckpt)


@checkpoint(CheckpointError, match="names model class 'BERT'")
def model_json_of_another_model_class(c):
    _edit_json(c.log_ckpt / "model.json", lambda m: m | {"arch": "BERT"})
    load_run(c.log_ckpt)


@checkpoint(CheckpointError, match="its config does not fit GPTConfig")
def model_json_with_a_foreign_config(c):
    _edit_json(c.log_ckpt / "model.json", lambda m: m | {"config": m["config"] | {"n_expert": 8}})
    load_run(c.log_ckpt)


@checkpoint(CheckpointError, match=r"model\.safetensors does not fit the model its folder")
def weights_of_another_shape(c):
    _edit_json(c.log_ckpt / "model.json", lambda m: m | {"config": m["config"] | {"n_layer": 3}})
    load_run(c.log_ckpt)


@checkpoint(ValueError, match=r"tokenizer\.json is not a tokenizers file")
def tokenizer_json_damaged(c):
    (c.log_ckpt / "tokenizer.json").write_text('{"version": ')
    load_run(c.log_ckpt)


@checkpoint(CheckpointError, match="tokenizer has .* tokens but the model.*not saved together")
def tokenizer_of_another_vocabulary(c):
    GPT1Tokenizer.train(texts=load_documents("fixture").texts, n_merges=50).save(c.log_ckpt)
    load_run(c.log_ckpt)


@checkpoint(CheckpointError, match="max_lr: checkpoint 0.002 vs now 0.001")
def resume_with_another_config(c):
    _resume(c, max_lr=1e-3)


@checkpoint(CheckpointError, match=r"(?s)another model or recipe than the smoke scale .*delete")
def pretrained_model_after_its_scale_changed(c):
    run = c.tmp / "runs" / "smoke" / "pretrain"
    shutil.copytree(c.run, run)  # a run of other smoke settings, stopped at 4 of 80 updates
    state = json.loads((latest_checkpoint(run) / "state.json").read_text())
    state["run_config"]["pretrain"]["total_steps"] = 80
    (latest_checkpoint(run) / "state.json").write_text(json.dumps(state))

    def tokenises(*a, **k):
        raise Expensive("the corpus was loaded before the run was refused")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gpt1lib.experiments.build_corpus", tokenises)
        pretrained_model("smoke", c.tmp / "runs")


@checkpoint(match=r"^\[\]$")
def resume_between_two_loss_records(c):
    cfg = {"total_steps": 10, "log_interval": 5, "ckpt_interval": 3, "eval_interval": 5}
    _trained(c, c.tmp / "whole", **cfg)
    _trained(c, c.tmp / "parts", stop_after=4, **cfg)  # its checkpoint at 4, mid-record
    _trained(c, c.tmp / "parts", resume=True, **cfg)
    whole, parts = _logged(c.tmp / "whole"), _logged(c.tmp / "parts")
    return [k for k, v in whole.items() if parts.get(k) != v]  # logged otherwise than whole's


@checkpoint(warns=UserWarning, match=r"tokens-.*\.npy is damaged .*tokenising again")
def token_cache_truncated(c):
    build_corpus(c.tok, 32, "fixture", cache_dir=c.tmp / "cache")
    for f in (c.tmp / "cache").glob("tokens-*.npy"):
        _truncate(f)
    again = build_corpus(c.tok, 32, "fixture", cache_dir=c.tmp / "cache")
    assert (again.train.tokens == c.corpus.train.tokens).all()


@checkpoint(warns=UserWarning, match=r"records\.jsonl, line \d+: the last line is cut short")
def records_with_a_torn_last_line(c):
    with open(c.run / "records.jsonl", "a") as f:
        f.write('{"metric": "train_loss", "val')
    assert len(read_records(c.run / "records.jsonl")) > 0


@checkpoint(warns=UserWarning, match=r"records\.jsonl, line 2: not a JSON record .*left out")
def records_with_a_bad_line_inside(c):
    lines = (c.run / "records.jsonl").read_text().splitlines()
    (c.run / "records.jsonl").write_text("\n".join([lines[0], "{oops", *lines[1:]]) + "\n")
    assert len(read_records(c.run / "records.jsonl")) == len(lines)  # every other line read


@checkpoint(match=r"^\[\]$")
def leftovers_of_a_crash_mid_write(c):
    dead = 2**22 + 12345  # above the default pid_max: no process has it
    folder = c.run / "checkpoints"
    for name in (f".tmp-step_00000006-{dead}", f".old-step_00000004-{dead}"):
        shutil.copytree(c.ckpt, folder / name)
    (folder / f".latest.json.tmp{dead}").write_text("{")
    (c.log_ckpt / f".model.safetensors.tmp{dead}").write_text("")
    _resume(c)  # a finished run: it only starts, and cleans
    return sorted(p.name for p in c.run.rglob(".*") if LEFTOVER.match(p.name))


@pytest.mark.parametrize("case", params(CHECKPOINT))
def test_bad_checkpoint(case, c):
    run_case(case, c)


#: The table's cases of this section: these, and the faults a long run meets (issue 36), which
#: ``tests/test_faults.py`` runs (``test_bad_inputs.test_every_case_is_in_the_table``).
CHECKPOINT = CHECKPOINT + FAULTS


# ---------------------------------------------------------------- what a crash leaves


def _steps(path):
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    return [(r["metric"], r["step"]) for r in rows]


def test_records_hold_each_step_once_after_a_crash_and_resume(base, tmp_path, monkeypatch):
    """Logs every 4 updates, checkpoints every 6: killed at update 10, the run had logged 8
    (updates 5-8) after its last checkpoint (6); resumed, it logs 8 again (updates 7-8)."""
    cfg = replace(base.cfg, total_steps=12, log_interval=4, ckpt_interval=6, eval_interval=4)
    import gpt1lib.pretrain as pt

    real, calls = pt.train_step, []

    def dies_at_10(*a, **k):
        calls.append(1)
        if len(calls) == 10:
            raise KeyboardInterrupt("killed")
        return real(*a, **k)

    monkeypatch.setattr(pt, "train_step", dies_at_10)
    with pytest.raises(KeyboardInterrupt):
        pretrain(tiny(base.tok), base.tok, base.corpus, cfg, tmp_path, progress=False)
    monkeypatch.undo()
    assert ("train_loss", 8) in _steps(tmp_path / "records.jsonl")
    with open(tmp_path / "records.jsonl", "a") as f:
        f.write('{"metric": "train_loss", "st')  # and a torn last line
    r = pretrain(tiny(base.tok), base.tok, base.corpus, cfg, tmp_path, progress=False, resume=True)
    steps = _steps(tmp_path / "records.jsonl")
    assert len(steps) == len(set(steps))
    assert [s for m, s in steps if m == "train_loss"] == [4, 8, 12]
    assert [s for m, s in steps if m == "val_loss"] == [4, 8, 12]
    assert len(r.history) == len(steps)


def test_a_moved_run_resumes_and_a_changed_corpus_does_not(base, tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "a" / "corpus")
    cfg = replace(base.cfg, total_steps=4)
    corpus = build_corpus(base.tok, 32, tmp_path / "a" / "corpus")
    pretrain(
        tiny(base.tok), base.tok, corpus, cfg, tmp_path / "a" / "run", progress=False, stop_after=2
    )
    shutil.move(tmp_path / "a", tmp_path / "b")
    state = read_state(latest_checkpoint(tmp_path / "b" / "run"))
    assert state["run_config"]["corpus"]["source"] == "../corpus"  # beside the run, wherever
    moved = build_corpus(base.tok, 32, tmp_path / "b" / "corpus")
    r = pretrain(
        tiny(base.tok), base.tok, moved, cfg, tmp_path / "b" / "run", progress=False, resume=True
    )
    assert r.step == 4
    story = next((tmp_path / "b" / "corpus" / "train").glob("*.txt"))
    story.write_text("another story altogether. " * 400)
    with pytest.raises(CheckpointError, match="corpus.sha256"):
        changed = build_corpus(base.tok, 32, tmp_path / "b" / "corpus")
        pretrain(
            tiny(base.tok),
            base.tok,
            changed,
            cfg,
            tmp_path / "b" / "run",
            progress=False,
            resume=True,
        )


def test_every_checkpoint_file_has_its_sha256(base):
    ckpt = latest_checkpoint(base.run)
    files = read_state(ckpt)["files"]
    assert sorted(files) == [
        "model.json",
        "model.safetensors",
        "tokenizer.json",
        "train_state.safetensors",
    ]
    assert all(file_sha256(ckpt / n) == d for n, d in files.items())
    meta = json.loads((ckpt / "model.json").read_text())
    assert meta["sha256"] == file_sha256(ckpt / "model.safetensors")


def test_a_saved_model_round_trips_with_its_sha256(base, tmp_path):
    model = tiny(base.tok)
    save_model(model, tmp_path)
    base.tok.save(tmp_path)
    again, _ = load_run(tmp_path)
    assert all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True)
    )


def test_records_name_the_device_and_its_thread_count(base):
    device = read_records(base.run / "records.jsonl")["device"].iloc[0]
    if device.startswith("cpu"):
        assert re.fullmatch(r"cpu \(.+, \d+ threads, \d+ cores\)", device), device
    assert re.fullmatch(r"cpu \(.+, \d+ threads, \d+ cores\)", provenance("cpu")["device"])


def test_a_checkpoint_from_before_the_sha256s_still_resumes(c):
    state = c.ckpt / "state.json"
    _edit_json(state, lambda s: {k: v for k, v in s.items() if k != "files"})
    _edit_json(state, lambda s: s | {"run_config": s["run_config"] | {"corpus": "/old/path"}})
    _edit_json(c.ckpt / "model.json", lambda m: {k: v for k, v in m.items() if k != "sha256"})
    assert _resume(c).step == 4
