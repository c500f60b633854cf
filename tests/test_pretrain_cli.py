"""The README's pre-training command, end to end at smoke scale on a local folder of text:
its defaults follow the scale, a run stopped part-way prints the command that resumes it,
and that command finishes it."""

import shlex
import shutil

import pytest

from gpt1lib.corpus import FIXTURE
from gpt1lib.harness.pretrain import _parser, main


@pytest.fixture
def books(tmp_path):
    """A flat folder of .txt files (the fixture's stories), as a user's own corpus is."""
    folder = tmp_path / "books"
    folder.mkdir()
    for f in sorted((FIXTURE / "train").glob("*.txt")):
        shutil.copy(f, folder / f.name)
    return folder


def test_the_readme_command_runs_on_a_local_corpus_and_says_how_to_resume(books, tmp_path, capsys):
    out = tmp_path / "runs" / "smoke" / "pretrain"
    argv = ["--scale", "smoke", "--corpus", str(books), "--out", str(out), "--no-progress"]
    first = main([*argv, "--steps", "24", "--stop-after", "12"])
    said = capsys.readouterr().out
    assert first.step == 12 and first.total_steps == 24
    assert "pre-training stopped: update 12 of 24" in said
    assert "validation perplexity: not yet measured" in said  # smoke measures every 20
    assert f"checkpoint: {out}" in said
    resume = said.split("resume: ")[1].strip()
    assert resume.startswith("python -m gpt1lib.harness.pretrain ") and resume.endswith(" --resume")
    again = main(shlex.split(resume)[3:])  # the printed command, as a shell would run it
    said = capsys.readouterr().out
    assert again.step == 24 and "pre-training done: update 24 of 24" in said
    ppl = float(said.split("validation perplexity: ")[1].split()[0].replace(",", ""))
    assert 1 < ppl < 700  # the 600-merge vocabulary's 700 tokens: a model that learned
    assert "nothing left to run" in said


@pytest.mark.parametrize("scale", ["smoke", "cpu", "small", "paper"])
def test_defaults_follow_the_scale_and_every_flag_has_help(scale):
    from gpt1lib.scales import SCALES

    p = _parser(scale)
    d = vars(p.parse_args(["--scale", scale, "--out", "x"]))
    S = SCALES[scale]
    assert (d["corpus"], d["corpus_limit"], d["tokenizer"]) == (
        S.corpus,
        S.corpus_limit,
        S.tokenizer,
    )
    assert d["steps"] == S.pretrain.total_steps and d["batch_size"] == S.pretrain.batch_size
    for action in p._actions:
        assert action.help, action.dest
    assert "(default: " in p.format_help()


def test_a_run_killed_before_its_first_checkpoint_resumes_afresh(
    books, tmp_path, capsys, monkeypatch
):
    """A retry loop passes --resume every time: a run killed at update 10, before its first
    checkpoint (at the end, 24), starts again from update 0 and finishes; its records hold
    each step once."""
    import gpt1lib.pretrain as pt

    out = tmp_path / "run"
    argv = ["--corpus", str(books), "--out", str(out), "--no-progress", "--steps", "24"]
    real, calls = pt.train_step, []

    def killed_at_10(*a, **k):
        calls.append(1)
        if len(calls) == 10:
            raise KeyboardInterrupt("killed")
        return real(*a, **k)

    monkeypatch.setattr(pt, "train_step", killed_at_10)
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    monkeypatch.undo()
    assert not (out / "checkpoints").exists() and (out / "records.jsonl").is_file()
    capsys.readouterr()
    again = main([*argv, "--resume"])
    said = capsys.readouterr().out
    assert f"--resume: {out} holds no checkpoint yet" in said and "afresh at update 0" in said
    assert again.step == 24
    steps = list(zip(again.history.metric, again.history.step, strict=True))
    assert len(steps) == len(set(steps)) and ("train_loss", 5) in steps
