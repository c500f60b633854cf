"""A bundle built from the fixtures gives the run exactly what the fixtures give it."""

import json
from dataclasses import replace

import numpy as np
import pytest

from gpt1lib.corpus import build_corpus
from gpt1lib.harness import bundle
from gpt1lib.runs import pretrained_model
from gpt1lib.scales import SCALES
from gpt1lib.tasks import describe_source, get_task, load_examples, unavailable


@pytest.fixture(scope="module")
def smoke_bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("b") / "bundle"
    man = bundle.build("smoke", "fixture", out, log=lambda *_: None)
    return out, man


def test_tasks_from_the_bundle_equal_the_direct_load(smoke_bundle):
    out, man = smoke_bundle
    assert man["tasks"] and man["bytes"] < 48 * 2**20
    for task, splits in man["tasks"].items():
        for split, entry in splits.items():
            for limit in (None, 1, 7):
                direct = load_examples(task, split, "fixture", limit, 0)
                if limit is None or (limit, 0) in map(tuple, entry["draws"]):
                    assert load_examples(task, split, out, limit, 0) == direct
            assert describe_source(task, split, out).endswith(", via bundle")
            assert "/" not in entry["from"].split("tasks")[0]  # no machine path
    assert unavailable("sst2", out) is None


def test_a_draw_the_bundle_lacks_is_an_error_naming_the_ones_it_holds(
    smoke_bundle, tmp_path, monkeypatch
):
    out, man = smoke_bundle
    with pytest.raises(FileNotFoundError, match="holds no QNLI test"):
        load_examples("qnli", "test", out)
    smaller = replace(SCALES["smoke"], limits={"default": (16, None)})
    monkeypatch.setitem(SCALES, "smoke", smaller)
    man = bundle.build("smoke", "fixture", tmp_path / "b", log=lambda *_: None)
    assert man["tasks"]["race"]["train"]["examples"] == 16  # the draw of 16 (and of 1 in it)
    assert load_examples("race", "train", tmp_path / "b", 16) == load_examples(
        "race", "train", "fixture", 16
    )
    with pytest.raises(bundle.BundleError, match="use one of those limits"):
        load_examples("race", "train", tmp_path / "b", 7, seed=3)


def test_the_corpus_from_the_bundle_equals_the_direct_build(smoke_bundle):
    out, _ = smoke_bundle
    tok = bundle.GPT1Tokenizer.load(out / "tokenizer")
    direct, packed = build_corpus(tok, 64, "fixture"), build_corpus(tok, 64, out)
    assert np.array_equal(direct.train.tokens, packed.train.tokens)
    assert np.array_equal(direct.valid.tokens, packed.valid.tokens)
    assert (direct.sha256, direct.n_bytes) == (packed.sha256, packed.n_bytes)
    assert packed.train.tokens.dtype == np.uint16
    other = bundle.GPT1Tokenizer.train(texts=["the cat sat on the mat, the end"] * 4, n_merges=3)
    with pytest.raises(bundle.BundleError, match="tokenized with the tokenizer"):
        build_corpus(other, 64, out)


def test_the_manifest_checks_every_file(smoke_bundle, tmp_path):
    out, man = smoke_bundle
    for name, f in man["files"].items():
        assert (out / name).stat().st_size == f["bytes"]
    copy = tmp_path / "copy"
    bundle.shutil.copytree(out, copy)
    target = copy / "tasks/rte/train.jsonl.xz"
    target.write_bytes(target.read_bytes()[:-1] + b"\0")
    with pytest.raises(bundle.BundleError, match="damaged"):
        load_examples("rte", "train", copy)


def test_pretraining_from_a_bundle_takes_its_tokenizer(smoke_bundle, tmp_path):
    out, _ = smoke_bundle
    model, tok, origin = pretrained_model("smoke", tmp_path, corpus=str(out), progress=False)
    assert tok.fingerprint() == bundle.GPT1Tokenizer.load(out / "tokenizer").fingerprint()
    rec = [json.loads(x) for x in (tmp_path / "smoke/pretrain/records.jsonl").open()]
    assert "via bundle" in rec[0]["data"] and get_task("sst2")
