"""The exported Hugging Face folder: complete, loadable with Auto classes, and the trained model logit for logit."""

import json

import pytest

from fmlab.serve import export


def test_the_exported_folder_round_trips_with_equal_logits(tiny_run):
    folder = tiny_run["trained"]
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "config.json", "generation_config.json",
                                                          "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    assert export.check_round_trip(tiny_run["model"], folder) == 0.0


def test_a_different_model_does_not_pass_the_round_trip(tiny_run):
    from fmlab.models import build_model

    with pytest.raises(AssertionError, match="differ"):
        export.check_round_trip(build_model("tiny", seed=1), tiny_run["trained"])


def test_the_folder_is_ready_to_serve(tiny_run):
    from transformers import AutoTokenizer, GenerationConfig

    folder = tiny_run["trained"]
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["use_cache"] is True
    assert config["eos_token_id"] == config["pad_token_id"] == 0  # the course tokenizer's <|endoftext|>
    assert GenerationConfig.from_pretrained(folder).eos_token_id == 0
    assert AutoTokenizer.from_pretrained(str(folder)).model_max_length == 128
    assert tiny_run["model"].config.use_cache is False  # the training model is left as it was


def test_the_model_card_states_the_run(tiny_run):
    card = (tiny_run["trained"] / "README.md").read_text()
    assert "Training tokens**: 307,200" in card and "the course corpus" in card and "context 128" in card


def test_a_folder_that_is_not_a_model_is_named(tmp_path):
    with pytest.raises(export.NotAModelFolder, match="is not a folder"):
        export.check_model_folder(tmp_path / "missing")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(export.NotAModelFolder, match="model.safetensors, tokenizer.json"):
        export.check_model_folder(tmp_path)
    for name in export.REQUIRED_FILES[1:]:
        (tmp_path / name).write_text("")
    with pytest.raises(export.NotAModelFolder, match="no architectures"):
        export.check_model_folder(tmp_path)
