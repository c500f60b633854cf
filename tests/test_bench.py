"""The benchmark runs at a tiny size and produces its table and records (not how fast)."""

import json

import pytest

from gpt1lib import GPT, optim, preset
from gpt1lib.flops import matmul_params, mfu, model_flops_per_token, table_peak
from gpt1lib.harness import bench, contenders
from gpt1lib.harness.bench import format_table, main, run_benchmark, to_records
from gpt1lib.harness.contenders import IMPLEMENTATIONS, BenchConfig, task_like_items
from gpt1lib.records import read_records

pytest.importorskip("transformers")

TINY = BenchConfig(preset="tiny", batch=2, seq=16, steps=2, warmup=1, memory=False)


@pytest.fixture(scope="module")
def results():
    return run_benchmark(TINY, mode="both", device="cpu")


def test_benchmark_times_both_implementations_and_both_paddings(results):
    assert [r["variant"] for r in results] == [
        "gpt1lib",
        "transformers",
        "finetune:dynamic",
        "finetune:buckets",
        "finetune:context",
        "finetune:graphed",
    ]
    pre, hf, dyn, buckets, ctx, graphed = results
    for r in results:
        assert r["step_time_s"] > 0 and r["cpu_time_s"] > 0 and len(r["step_times_s"]) == 2
        assert r["preset"] == "tiny" and r["batch"] == 2 and r["dtype"] == "float32"
    assert pre["seq"] == 16 and pre["tokens_per_s"] == pytest.approx(32 / pre["step_time_s"])
    assert 0 < pre["mfu"] and pre["flops_per_token"] == model_flops_per_token(preset("tiny"), 16)
    assert pre["mfu"] == pytest.approx(
        mfu(pre["flops_per_token"], 32 / pre["step_time_s"], pre["peak_tflops"])
    )
    assert hf["vs_reference"] == 1.0 and pre["reference"] == "transformers"
    assert pre["vs_reference"] == pytest.approx(hf["step_time_s"] / pre["step_time_s"])
    assert ctx["seq"] == 64 and dyn["seq"] < 64  # padded to the context vs to the longest
    assert buckets["seq"] == 64  # every length rounded up to 64, tiny's context
    # on the CPU: pre-training's fused loss, attention as PyTorch picks
    assert pre["config"]["loss"] == "fused_lm_loss(hidden)"
    assert buckets["config"]["attention"] == "sdpa: default (CPU)"
    assert dyn["examples_per_s"] > 0 and dyn["reference"] == "padding to the context"
    assert pre["config"]["embd_dropout"] == hf["config"]["embd_dropout"] == "sum"
    # the loop's own update; on the CPU no graph, lengths padded to their longest, no GPU time
    assert graphed["config"]["graphs"] == "eager stand-in (no CUDA)"
    assert graphed["seq"] == dyn["seq"] and graphed["gpu_busy_s"] is None


def test_table_and_records_carry_the_provenance(results):
    text = format_table(results)
    for word in ("gpt1lib", "transformers", "finetune:dynamic", "tokens_per_s", "MFU peak"):
        assert word in text
    recs = to_records(results)
    metrics = {r["metric"] for r in recs}
    assert {"tokens_per_s", "mfu", "step_time_s", "examples_per_s"} <= metrics
    assert {"speedup_vs_transformers", "speedup_vs_padding_to_context"} <= metrics
    for r in recs:
        assert r["experiment"] == "bench" and r["commit"] and r["device"]
        c = r["config"]
        assert c["implementation"] in ("gpt1lib", "transformers")
        assert c["preset"] == "tiny" and c["batch"] == 2 and c["seq"]


def test_command_line_prints_and_appends_records(tmp_path, capsys):
    out = tmp_path / "bench.jsonl"
    main(
        [
            "--preset=tiny",
            "--batch=1",
            "--seq=8",
            "--steps=1",
            "--warmup=1",
            "--device=cpu",
            "--no-memory",
            "--impl",
            "gpt1lib",
            "gpt1lib:plain",
            f"--out={out}",
        ]
    )
    printed = capsys.readouterr().out
    assert "gpt1lib:plain" in printed and "appended" in printed
    df = read_records(out)
    assert set(df.experiment) == {"bench"} and "tokens_per_s" in set(df.metric)
    json.dumps(df.config.iloc[0])  # plain JSON
    assert {c["model"] for c in df.config} == {"FastGPT", "GPT"}


def test_a_scale_name_stands_for_its_model(capsys):
    (r,) = run_benchmark(TINY, preset="smoke", implementations=("gpt1lib",), device="cpu")
    assert r["preset"] == "tiny" and r["scale"] == "smoke"
    main(
        ["--scale=smoke", "--batch=1", "--seq=8", "--steps=1", "--warmup=1", "--device=cpu"]
        + ["--no-memory", "--impl", "gpt1lib"]
    )
    assert " tiny " in capsys.readouterr().out


def test_every_contender_steps_through_the_shared_train_step(monkeypatch):
    calls = []

    def counted(model, *args, **kwargs):
        calls.append(type(model).__name__)
        return optim.train_step(model, *args, **kwargs)

    monkeypatch.setattr(contenders, "train_step", counted)
    results = run_benchmark(TINY, mode="both", implementations=IMPLEMENTATIONS, device="cpu")
    assert [r["variant"] for r in results][: len(IMPLEMENTATIONS)] == list(IMPLEMENTATIONS)
    steps = TINY.warmup + TINY.steps  # memory is off: warm-up and timed steps only
    assert len(calls) == steps * (len(IMPLEMENTATIONS) + 3)  # and 3 fine-tuning loops
    assert set(calls) == {"FastGPT", "GPT", "OpenAIGPTLMHeadModel", "TaskModel"}
    configs = {r["variant"]: r["config"] for r in results}
    assert configs["gpt1lib:plain"]["model"] == "GPT" and configs["gpt1lib"]["model"] == "FastGPT"
    assert configs["gpt1lib:matrix"]["embd_dropout"] == "matrix"


def test_memory_is_measured_in_a_fresh_process():
    (r,) = run_benchmark(TINY, implementations=("gpt1lib",), memory=True, device="cpu")
    assert r["peak_mem_mb"] >= 0 and "fresh process" in r["mem_method"]


def test_flops_count_the_blocks_and_the_output_matmul():
    cfg = preset("paper")
    assert matmul_params(cfg) == GPT(cfg).num_parameters(embeddings=False) + 40478 * 768
    assert matmul_params(cfg) == 116_141_568
    assert model_flops_per_token(cfg, 512) == 6 * 116_141_568 + 12 * 12 * 512 * 768


def test_peak_table_and_sst2_lengths():
    assert table_peak("NVIDIA H100 80GB HBM3")[0] == 989
    assert table_peak("NVIDIA H100 PCIe")[0] == 756
    assert table_peak("NVIDIA A100-SXM4-40GB")[0] == 312
    assert "fp16" in table_peak("Tesla T4")[1]
    assert table_peak("Some Future GPU") is None
    lengths = [len(e.seqs[0]) for e in task_like_items("sst2", 2000, 512, 1000)]
    share = sum(5 <= n <= 40 for n in lengths) / len(lengths)
    assert share > 0.85 and min(lengths) >= 3 and max(lengths) <= 512
    race = task_like_items("race", 200, 512, 1000)
    assert {len(e.seqs) for e in race} == {4} and {e.label for e in race} <= {0, 1, 2, 3}
    assert 300 < sum(len(q) for e in race for q in e.seqs) / 800 <= 512


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="unknown implementations"):
        run_benchmark(TINY, implementations=("pytorch",))
    with pytest.raises(ValueError, match="seq=65 must be between 1 and the tiny context 64"):
        run_benchmark(TINY, seq=65)
    with pytest.raises(ValueError, match="preset='huge'"):
        run_benchmark(TINY, preset="huge")
    with pytest.raises(SystemExit):  # argparse names the choices
        main(["--scale=huge"])


def test_repeats_give_a_spread_and_a_headline_on_the_default_config(capsys):
    runs = bench.run_repeats(TINY, 2, implementations=bench.IMPLEMENTATIONS[:2] + ("transformers",))
    assert [r["repeat"] for run in runs for r in run][::3] == [0, 1]
    stats = {s["variant"]: s for s in bench.spread(runs)}
    head = stats[bench.HEADLINE]
    assert head["repeats"] == 2 and head["vs_reference_min"] <= head["vs_reference_median"]
    assert head["vs_reference_median"] <= head["vs_reference_max"]
    assert stats["transformers"]["vs_reference_median"] == 1.0
    text = bench.format_spread(bench.spread(runs))
    assert "headline: gpt1lib:matrix" in text and "default config" in text
    assert {r["config"]["repeat"] for r in to_records(runs[1])} == {1}


def test_a_scale_gives_the_batch_seq_and_steps_of_its_device():
    (r,) = run_benchmark(
        BenchConfig(scale="smoke", warmup=1, memory=False),
        device="cpu",
        implementations=("gpt1lib",),
    )
    assert (r["batch"], r["seq"], len(r["step_times_s"])) == (4, 64, 3)  # smoke's cpu bench
