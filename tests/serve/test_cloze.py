"""The repo's lm-eval task: items from held-out text only, run by lm-evaluation-harness on the exported models."""

from fmlab.serve import cloze


def test_the_committed_items_are_what_the_held_out_split_gives(tiny_run):
    items = cloze.read_items()
    assert len(items) == 400
    assert items == cloze.build_items(tiny_run["data"], count=len(items))
    assert all(len(i["choices"]) == cloze.CHOICES and 0 <= i["label"] < cloze.CHOICES for i in items)


def test_the_candidates_of_an_item_have_the_same_token_count(tiny_run):
    from fmlab.data import PackedDataset

    tok = PackedDataset(tiny_run["data"], split="validation").tokenizer()
    for item in cloze.read_items()[:100]:
        assert len({len(tok.encode(c)) for c in item["choices"]}) == 1


def test_contamination_counts_items_found_in_the_training_split(tiny_run):
    items = cloze.read_items()[:50]
    assert cloze.contamination(items, tiny_run["data"])["contaminated"] <= 2
    train_text = " ".join(cloze.split_text(tiny_run["data"], "train").split())
    words = train_text.split()[1000:1008]
    planted = {"context": " ".join(words[:-1]), "choices": [" " + words[-1], " x", " y", " z"], "label": 0}
    assert cloze.contamination([planted], tiny_run["data"])["contaminated"] == 1


def test_lm_eval_scores_the_untrained_model_at_chance_and_the_trained_one_above(tiny_run):
    untrained = cloze.run_lm_eval(tiny_run["untrained"])
    trained = cloze.run_lm_eval(tiny_run["trained"])
    assert untrained.items == trained.items == 400
    assert abs(untrained.accuracy - 0.25) < 3 * untrained.stderr  # chance: 4 candidates
    assert trained.accuracy > untrained.accuracy + 3 * trained.stderr
