"""The checks the chapters write out on the page (issue 46) can fail: each passes against the
library as it is, and stops its chapter against a library with a planted mistake.

A chapter's code cells run in order at the smoke scale, in a fresh namespace, up to the cell
that holds its check (chapter 02: ``FastGPT`` against ``GPT``; chapter 03: two pre-training
updates written out against ``pretrain``; chapter 04: two updates of L3 against ``finetune``);
then that cell runs once as it is and once for each mistake, patched into the library module
the loop calls it from.
"""

import json
from pathlib import Path

import matplotlib
import pytest

import gpt1lib.fast
import gpt1lib.finetune
import gpt1lib.pretrain
from gpt1lib.runtime import seed_everything

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: Each chapter, and a line only the cell with its check holds.
CHECKS = {
    "02_model": "fast.load_state_dict(model.state_dict())",
    "03_pretraining": "stop_after=2",
    "04_finetuning": "library = finetune(pretrained, tok, check_run)",
}


def _before_and_check(name: str, out_dir: Path) -> tuple[dict, str]:
    """The namespace after the chapter's cells before its check (at the smoke scale, runs in
    ``out_dir``), and the check cell's source."""
    nb = json.loads((ROOT / "book" / f"{name}.ipynb").read_text())
    namespace = {"display": lambda *args, **kw: None, "__name__": "__main__"}
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or "google.colab" in source:
            continue
        if CHECKS[name] in source:
            plt.close("all")
            return namespace, source
        exec(compile(source, f"{name}.ipynb", "exec"), namespace)
        if "parameters" in cell["metadata"].get("tags", []):
            namespace["scale"] = "smoke"
            if "out_dir" in namespace:
                namespace["out_dir"] = str(out_dir)
    raise AssertionError(f"{name}: no cell holds {CHECKS[name]!r}")


@pytest.fixture(scope="module")
def chapters(tmp_path_factory):
    """Each chapter's namespace before its check, made once (chapter 04 pre-trains first)."""
    made = {}

    def get(name: str):
        if name not in made:
            made[name] = _before_and_check(name, tmp_path_factory.mktemp(name))
        return made[name]

    return get


def _check(chapters, name: str) -> None:
    namespace, source = chapters(name)
    exec(compile(source, f"{name}.ipynb", "exec"), dict(namespace))


def _padding_as_tokens(h, W, targets, mask=None, reduction="mean", n_tokens=None):
    """``fused_lm_loss`` with the zero rows of a padded W_e in the softmax, as if tokens."""
    return FUSED(h, W, targets, mask, reduction, None)


def _later_rate(step, cfg, total):
    """The pre-training schedule one update late (the rate of update ``step + 2``)."""
    return LEARNING_RATE(step + 1, cfg, total)


def _other_masks(seed):
    """The run seeded with another seed: other dropout masks than the page's."""
    return SEED(seed + 1)


def _l1_logged_not_trained(scores, labels, regression, l1, lm_coef):
    """L3 recorded as it is, but only L2 back-propagated (issue 47's mistake)."""
    total, l2, lm = TASK_LOSS(scores, labels, regression, l1, lm_coef)
    return total - lm_coef * lm + lm_coef * lm.detach(), l2, lm


FUSED = gpt1lib.fast.fused_lm_loss
LEARNING_RATE = gpt1lib.pretrain.learning_rate
SEED = seed_everything
TASK_LOSS = gpt1lib.finetune.task_loss
#: Each chapter's planted mistakes: (module, name, stand-in).
MISTAKES = {
    "02_model": [
        (gpt1lib.fast, "fused_lm_loss", _padding_as_tokens),
        (gpt1lib.fast.FastGPT, "logits", lambda self, h, W_out: h @ W_out.t()),  # padding too
    ],
    "03_pretraining": [
        (gpt1lib.pretrain, "learning_rate", _later_rate),
        (gpt1lib.pretrain, "seed_everything", _other_masks),
    ],
    "04_finetuning": [
        (gpt1lib.finetune, "task_loss", _l1_logged_not_trained),
        (gpt1lib.finetune, "warmup_linear", lambda x, warmup: 1.0 - x),  # no zero first rate
    ],
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_each_check_on_the_page_passes_against_the_library(chapters, name):
    _check(chapters, name)


@pytest.mark.parametrize(
    "name, mistake",
    [(name, i) for name, planted in MISTAKES.items() for i in range(len(planted))],
)
def test_each_check_on_the_page_fails_against_a_planted_mistake(
    chapters, monkeypatch, name, mistake
):
    chapters(name)  # the cells before the check, with the library as it is
    where, attr, stand_in = MISTAKES[name][mistake]
    monkeypatch.setattr(where, attr, stand_in)
    with pytest.raises(AssertionError):
        _check(chapters, name)
