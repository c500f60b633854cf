"""Bad parameters: the pretrain command line's options and the chapters' papermill
parameters, each refused (BAD_INPUTS.md) before anything is loaded or pre-trained; every
chapter checks every parameter it declares in its set-up cell."""

import ast
import json
import shutil

import pytest
from bad_inputs import Case, Expensive, params, registry, run_case

from gpt1lib.chapter import check_parameters
from gpt1lib.harness.pretrain import main
from gpt1lib.harness.reproduce import ROOT
from gpt1lib.scales import SCALES, resolve_scale

CLI: list[Case] = []
CHAPTER: list[Case] = []
cli, chapter = registry("cli", CLI), registry("chapter", CHAPTER)


# ---------------------------------------------------------------- the pretrain command line


def _cli(c, *args):
    try:
        main(["--out", str(c.tmp / "cli"), "--no-progress", *args])
    except SystemExit as e:
        raise ValueError(c.capsys.readouterr().err) from e


@cli(ValueError, match="argument --steps: '0' is not a whole number >= 1")
def cli_steps_zero(c):
    _cli(c, "--steps", "0")


@cli(ValueError, match="argument --batch-size: '0' is not a whole number >= 1")
def cli_batch_size_zero(c):
    _cli(c, "--batch-size", "0")


@cli(ValueError, match="argument --ckpt-interval: '0' is not a whole number >= 1")
def cli_ckpt_interval_zero(c):
    _cli(c, "--ckpt-interval", "0")


@cli(ValueError, match="argument --corpus-limit: '0' is not a whole number >= 1")
def cli_corpus_limit_zero(c):
    _cli(c, "--corpus-limit", "0")


@cli(ValueError, match=r"argument --dropout: '1.5' is not a number in \[0, 1\)")
def cli_dropout_above_one(c):
    _cli(c, "--dropout", "1.5")


@cli(ValueError, match="--resume: .*cli holds no checkpoint to continue .* drop --resume")
def cli_resume_on_a_mistyped_out(c):
    _cli(c, "--resume")


@cli(ValueError, match="--out .*README.md is a file: give a folder for the run")
def cli_out_is_a_file(c):
    (c.tmp / "README.md").write_text("notes")
    _cli(c, "--out", str(c.tmp / "README.md"))


def _stopped_before_its_first_checkpoint(c, *args):
    """--out c.tmp/cli as a run leaves it when stopped before its first checkpoint: the guard
    that fails a case once pre-training starts stands for the kill (tokenizer and cache made)."""
    try:
        _cli(c, *args)
    except Expensive:
        return c.capsys.readouterr().out


@cli(match=r"--resume: .*cli holds no checkpoint yet.*starting it afresh at update 0")
def cli_resume_a_run_stopped_before_its_first_checkpoint(c):
    _stopped_before_its_first_checkpoint(c, "--steps", "24")
    return _stopped_before_its_first_checkpoint(c, "--steps", "24", "--resume")


@cli(
    ValueError,
    match=r"(?s)--resume: .*cli holds no checkpoint.*other options.*--steps: 24 then, 30 now",
)
def cli_resume_before_the_first_checkpoint_with_other_options(c):
    _stopped_before_its_first_checkpoint(c, "--steps", "24")
    _cli(c, "--steps", "30", "--resume")


@cli(ValueError, match="--resume: .*books holds no checkpoint to continue .* drop --resume")
def cli_resume_on_a_folder_of_other_files(c):
    (c.tmp / "books").mkdir()
    (c.tmp / "books" / "a.txt").write_text("Once upon a time.")
    _cli(c, "--resume", "--out", str(c.tmp / "books"))


@cli(ValueError, match=r"(?s)--resume: .*than the cpu scale .*smoke scale's.*n_embd: .*delete")
def cli_resume_at_another_scale(c):
    _cli(c, "--scale", "cpu", "--resume", "--out", str(c.run))  # c.run: a smoke-sized run


# ---------------------------------------------------------------- chapter parameters


def _params(**p):
    check_parameters(SCALES["smoke"], **p)


@chapter(match="None")
def chapter_tasks_one_name(c):
    return _params(tasks="rte")  # papermill's -p tasks rte: a list of one


@chapter(ValueError, match="bad chapter parameter: unknown task 'sst5'")
def chapter_tasks_unknown(c):
    _params(tasks=["sst2", "sst5"])


@chapter(ValueError, match="bad chapter parameter: unknown task 'sst5'")
def chapter_task_unknown(c):
    _params(task="sst5")


@chapter(ValueError, match="lm_coef='abc': use a number in")
def chapter_lm_coef_abc(c):
    _params(lm_coef="abc")


@chapter(ValueError, match=r"limit=1\.5: use a whole number >= 1 or None")
def chapter_limit_not_whole(c):
    _params(limit=1.5)


@chapter(ValueError, match="eval_limit=0")
def chapter_eval_limit_zero(c):
    _params(eval_limit=0)


@chapter(ValueError, match="n_transfer=99: the model has 2 blocks")
def chapter_n_transfer_deeper_than_the_model(c):
    _params(init="pretrain", n_transfer=99)


@chapter(ValueError, match="source='/nowhere': no such file or folder")
def chapter_source_missing(c):
    _params(source="/nowhere")


@chapter(ValueError, match="init='/nowhere/step_9': .*does not exist")
def chapter_init_missing_folder(c):
    _params(init="/nowhere/step_9")


@chapter(ValueError, match="seed='abc'")
def chapter_seed_abc(c):
    _params(seed="abc")


@chapter(ValueError, match="unknown scale 'huge'")
def chapter_scale_unknown(c):
    resolve_scale("huge")


@chapter(ValueError, match="corpus='/nowhere/books': no such file or folder")
def chapter_corpus_missing(c):
    _params(corpus="/nowhere/books")


@chapter(ValueError, match="tokenizer='train:abc'")
def chapter_tokenizer_spec(c):
    _params(tokenizer="train:abc")


@chapter(ValueError, match="steps=0")
def chapter_steps_zero(c):
    _params(steps=0)


@chapter(ValueError, match="resume='yes': use True or False")
def chapter_resume_not_a_bool(c):
    _params(resume="yes")


@chapter(ValueError, match=r"out_dir='/.*/README\.md' is a file: give a folder")
def chapter_out_dir_is_a_file(c):
    _params(out_dir="README.md")  # from the repository's root, wherever the chapter runs


def _setup(name: str, c, injected: dict | None = None, **given):
    """``chapter.setup`` of ``name`` on its parameters' defaults and ``given``, papermill's
    ``injected`` names in the kernel's input history as its injected cell has them."""
    from gpt1lib.chapter import setup
    from gpt1lib.settings import PARAMETERS

    ns = dict.fromkeys(PARAMETERS[name]) | {"seed": 0, "lm_coef": 0.5, "out_dir": str(c.tmp)}
    ns |= given
    ns = {k: v for k, v in ns.items() if k in PARAMETERS[name]} | (injected or {})
    if injected:
        ns["In"] = ["", "# Parameters\n" + "".join(f"{k} = {v!r}\n" for k, v in injected.items())]
    return setup(name, ns)


def _holding(c, *tasks) -> str:
    """A data folder holding the fixtures of ``tasks`` only."""
    from gpt1lib.tasks import FIXTURES

    folder = c.tmp / "data"
    for task in tasks:
        shutil.copytree(FIXTURES / task, folder / task)
    return str(folder)


@chapter(ValueError, match="06_entailment has no parameter 'scal': it has scale, seed")
def chapter_misspelt_parameter(c):
    _setup("06_entailment", c, injected={"scal": "smoke"})  # papermill's -p scal smoke


@chapter(match=r"^\['story_cloze'\] .*no RACE train file")
def chapter_source_lacks_one_of_its_tasks(c):
    ch = _setup("08_multiple_choice", c, source=_holding(c, "story_cloze"))
    assert not (c.tmp / "smoke").exists()  # nothing pre-trained by the set-up
    return f"{ch.tasks} {ch.skipped['race']}"


@chapter(ValueError, match="holds none of this chapter's tasks .*RACE: .*Story Cloze: ")
def chapter_source_holds_none_of_its_tasks(c):
    _setup("08_multiple_choice", c, source=_holding(c, "glue"))


@chapter(ValueError, match="05_classification has no parameter 'scal': it has scale, seed")
def reproduce_misspelt_parameter(c):
    from gpt1lib.harness.reproduce import main

    main(["--scale", "smoke", "--only", "05_classification", "-p", "scal", "smoke"])


@chapter(ValueError, match="05_classification has no parameter 'lm_coeff'")
def sweep_misspelt_parameter(c):
    from gpt1lib.harness.reproduce import main

    main(["--scale", "smoke", "--only", "05_classification", "--sweep", "lm_coeff", "0"])


@pytest.mark.parametrize("case", params(CLI + CHAPTER))
def test_bad_parameter(case, c):
    run_case(case, c)


@pytest.mark.parametrize("nb", sorted((ROOT / "book").glob("*.ipynb")), ids=lambda p: p.stem)
def test_each_chapter_sets_itself_up_in_one_call_first(nb):
    """The parameters cell declares exactly the chapter's parameters (``settings.PARAMETERS``),
    and the next code cell calls ``setup`` on them before anything else runs."""
    from gpt1lib.settings import PARAMETERS

    cells = [c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]
    at = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
    declared = [t.targets[0].id for t in ast.parse("".join(cells[at]["source"])).body]
    assert tuple(declared) == PARAMETERS[nb.stem]
    body = ast.parse("".join(cells[at + 1]["source"])).body
    first = next(n for n in body if not isinstance(n, (ast.Import, ast.ImportFrom)))
    assert ast.unparse(first) == f"ch = setup('{nb.stem}', globals())"


def test_a_chapter_refuses_a_bad_parameter_before_pre_training(tmp_path):
    pm = pytest.importorskip("papermill")
    with pytest.raises(pm.PapermillExecutionError, match="lm_coef='abc'"):
        pm.execute_notebook(
            str(ROOT / "book" / "05_classification.ipynb"),
            str(tmp_path / "out.ipynb"),
            parameters={"scale": "smoke", "lm_coef": "abc", "out_dir": str(tmp_path)},
            cwd=str(ROOT / "book"),
            progress_bar=False,
        )
    assert not (tmp_path / "smoke").exists()  # nothing pre-trained, nothing written


def test_the_readme_lists_every_chapter_parameter_and_no_other():
    """README's parameter table names exactly the parameters the chapters declare."""
    import re

    declared = set()
    for nb in (ROOT / "book").glob("*.ipynb"):
        cells = json.loads(nb.read_text())["cells"]
        tagged = next(c for c in cells if "parameters" in c["metadata"].get("tags", []))
        declared |= {t.targets[0].id for t in ast.parse("".join(tagged["source"])).body}
    readme = (ROOT / "README.md").read_text()
    table = readme.split("| parameter | chapters |")[1].split("\n\n")[0]
    listed = {
        n for row in table.splitlines()[2:] for n in re.findall(r"`(\w+)`", row.split("|")[1])
    }
    assert listed == declared - {"scale"}
