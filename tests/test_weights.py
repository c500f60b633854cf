"""Parity with transformers' OpenAIGPT and the three layouts of the released weights."""

import json

import numpy as np
import pytest
import torch

from gpt1lib import GPT, preset
from gpt1lib.weights import (
    WeightsMismatchError,
    WeightsUnavailableError,
    export_hf,
    load_original,
    load_pretrained,
    original_shapes,
)

transformers = pytest.importorskip("transformers")
from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel  # noqa: E402

TOL = 1e-5


@pytest.fixture(scope="module")
def hf_model():
    """A tiny OpenAIGPT trained for a few steps to follow a random permutation of its tokens.

    A random model greedily repeats its last token; a little training makes the greedy path
    long and varied, so that agreeing on it means something.
    """
    torch.manual_seed(0)
    cfg = OpenAIGPTConfig(vocab_size=211, n_positions=48, n_embd=64, n_layer=3, n_head=4)
    hf = OpenAIGPTLMHeadModel(cfg)
    perm = torch.randperm(211)
    opt = torch.optim.Adam(hf.parameters(), lr=3e-3)
    for _ in range(60):
        seq = [torch.randint(0, 211, (16,))]
        for _ in range(31):
            seq.append(perm[seq[-1]])
        x = torch.stack(seq, 1)
        loss = hf(x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return hf.eval()


@pytest.fixture(scope="module")
def hf_folder(hf_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf")
    hf_model.save_pretrained(folder)
    return folder


def _inputs():
    return torch.randint(0, 211, (4, 40), generator=torch.Generator().manual_seed(1))


def _greedy_hf(hf, prompt, n=20):
    return hf.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)


def test_transformers_checkpoint_loads_with_identical_logits_and_greedy_tokens(hf_model, hf_folder):
    model = load_pretrained(hf_folder).eval()
    x = _inputs()
    with torch.no_grad():
        diff = (model(x).logits - hf_model(x).logits).abs().max().item()
    assert diff < TOL
    prompt = x[:1, :8]
    ours, theirs = model.generate(prompt, 20), _greedy_hf(hf_model, prompt)
    assert torch.equal(ours, theirs)
    assert len(set(ours[0, 8:].tolist())) > 1  # a real path, not one repeated token


def test_export_loads_into_transformers_with_identical_logits(hf_folder, tmp_path):
    torch.manual_seed(3)
    model = GPT(preset("tiny", vocab_size=211, n_ctx=48, n_layer=3)).add_special_tokens().eval()
    export_hf(model, tmp_path)
    hf = OpenAIGPTLMHeadModel.from_pretrained(tmp_path).eval()
    x = torch.randint(0, 214, (3, 30))
    with torch.no_grad():
        assert (hf(x).logits - model(x).logits).abs().max().item() < TOL
    prompt = x[:1, :6]
    assert torch.equal(model.generate(prompt, 20), _greedy_hf(hf, prompt))
    again = load_pretrained(tmp_path)  # and back, specials remembered
    assert again.config.n_special == 3 and again.config.vocab_size == 211


def test_keys_with_and_without_the_transformer_prefix(hf_folder, tmp_path):
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(hf_folder / "model.safetensors"))
    save_file(
        {k.removeprefix("transformer."): v for k, v in tensors.items()},
        str(tmp_path / "model.safetensors"),
    )
    (tmp_path / "config.json").write_text((hf_folder / "config.json").read_text())
    a, b = load_pretrained(hf_folder).eval(), load_pretrained(tmp_path).eval()
    x = _inputs()
    assert torch.equal(a(x).logits, b(x).logits)


def test_mismatch_lists_offending_keys_and_shapes(hf_folder, tmp_path):
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(hf_folder / "model.safetensors"))
    del tensors["transformer.h.1.ln_2.weight"]
    tensors["transformer.h.0.extra.weight"] = torch.zeros(3)
    tensors["transformer.positions_embed.weight"] = torch.zeros(10, 64)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((hf_folder / "config.json").read_text())
    with pytest.raises(WeightsMismatchError) as e:
        load_pretrained(tmp_path)
    msg = str(e.value)
    assert "h.1.ln_2.weight" in msg and "h.0.extra.weight" in msg
    assert "positions_embed.weight: checkpoint (10, 64) vs model (48, 64)" in msg


def test_wrong_vocabulary_size_is_a_mismatch(hf_folder, tmp_path):
    cfg = json.loads((hf_folder / "config.json").read_text())
    cfg["vocab_size"] = 300
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").symlink_to(hf_folder / "model.safetensors")
    with pytest.raises(WeightsMismatchError, match="tokens_embed.weight: checkpoint"):
        load_pretrained(tmp_path)


def test_unreachable_hub_says_how_to_use_a_local_copy(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(WeightsUnavailableError, match="pass their folder"):
        load_pretrained("openai-community/openai-gpt")


def test_local_folder_without_the_files_is_a_clear_error(tmp_path):
    with pytest.raises(WeightsUnavailableError, match="model.safetensors"):
        load_pretrained(tmp_path)


def _write_original_release(model: GPT, folder, n_shards=10):
    """Write ``model`` as the original release: flat float32 cut into shards + shapes json."""
    sd = model.state_dict()
    arrays = [sd["positions_embed.weight"], sd["tokens_embed.weight"]]
    for i in range(model.config.n_layer):
        for name in ("attn.c_attn", "attn.c_proj"):
            arrays += [sd[f"h.{i}.{name}.weight"].t()[None], sd[f"h.{i}.{name}.bias"]]
        arrays += [sd[f"h.{i}.ln_1.weight"], sd[f"h.{i}.ln_1.bias"]]
        for name in ("mlp.c_fc", "mlp.c_proj"):
            arrays += [sd[f"h.{i}.{name}.weight"].t()[None], sd[f"h.{i}.{name}.bias"]]
        arrays += [sd[f"h.{i}.ln_2.weight"], sd[f"h.{i}.ln_2.bias"]]
    arrays = [a.numpy().astype(np.float32) for a in arrays]
    (folder / "params_shapes.json").write_text(json.dumps([list(a.shape) for a in arrays]))
    flat = np.concatenate([a.ravel() for a in arrays])
    for j, part in enumerate(np.array_split(flat, n_shards)):
        np.save(folder / f"params_{j}.npy", part)


def test_original_shards_load_and_agree_with_the_transformers_layout(hf_folder, tmp_path):
    reference = load_pretrained(hf_folder).eval()
    _write_original_release(reference, tmp_path)
    model = load_original(tmp_path, n_head=4).eval()
    x = _inputs()
    assert torch.equal(model(x).logits, reference(x).logits)
    short = load_original(tmp_path, n_ctx=16, n_head=4)
    assert short.config.n_ctx == 16
    assert torch.equal(short.positions_embed.weight, reference.positions_embed.weight[:16])


def test_released_shapes_file_describes_the_paper_model(shared_data):
    shapes = json.loads((shared_data / "gpt1_bpe" / "params_shapes.json").read_text())
    assert len(shapes) == 146
    assert [list(s) for _, s in original_shapes(preset("paper"))] == shapes
    assert sum(int(np.prod(s)) for s in shapes) == GPT(preset("paper")).num_parameters()


def test_truncated_shards_are_a_clear_error(hf_folder, tmp_path):
    _write_original_release(load_pretrained(hf_folder), tmp_path)
    (tmp_path / "params_9.npy").unlink()
    with pytest.raises(WeightsMismatchError, match="a shard is missing or truncated"):
        load_original(tmp_path, n_head=4)
