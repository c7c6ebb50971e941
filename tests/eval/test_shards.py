"""`ppoga eval --shard I/N` slices and `ppoga report`'s merge of the shard files."""

from __future__ import annotations

import json
import random

import pytest

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.errors import ConfigError
from ppoga_dspy.evaluation.evaluate import EvaluationError, example_id
from ppoga_dspy.evaluation.shards import Shard, are_shards_of_one_run, merge_runs

TIMINGS = {"seconds_mean", "seconds_median"}


def test_shard_parse_rejects_what_is_not_i_of_n():
    assert Shard.parse("2/4") == Shard(2, 4) and str(Shard(2, 4)) == "2/4"
    for bad in ("0/3", "4/3", "1/0", "a/b", "3", "1/2/3"):
        with pytest.raises(ConfigError, match="--shard"):
            Shard.parse(bad)


def test_shards_partition_the_questions_whatever_their_order_or_limit():
    examples = load_dataset("demo")
    slices = [Shard(i, 3).select(examples) for i in (1, 2, 3)]
    ids = [[example_id(ex) for ex in part] for part in slices]
    assert sorted(sum(ids, [])) == sorted(example_id(ex) for ex in examples)
    assert all(ids) and not set(ids[0]) & set(ids[1]) and not set(ids[1]) & set(ids[2])
    shuffled = list(examples)
    random.Random(7).shuffle(shuffled)
    assert {example_id(ex) for ex in Shard(2, 3).select(shuffled)} == set(ids[1])
    assert {example_id(ex) for ex in Shard(2, 3).select(examples[:10])} == set(ids[1]) & {
        example_id(ex) for ex in examples[:10]}
    assert Shard(1, 1).select(examples) == examples


def test_merge_refuses_overlapping_files():
    rows = [{"id": "a"}, {"id": "b"}]
    with pytest.raises(EvaluationError, match="not disjoint"):
        merge_runs({"x.jsonl": rows, "y.jsonl": rows[1:]})
    assert not are_shards_of_one_run({"x.jsonl": rows})


def test_three_shards_merged_equal_one_unsharded_run(tmp_path, capsys):
    from ppoga_dspy.cli import main

    total = len(load_dataset("demo", split="train"))
    common = ["--dataset", "demo", "--split", "train", "--lm", "oracle/gold-path", "--no-progress", "--json"]
    shards = [tmp_path / f"shard-{i}.jsonl" for i in (1, 2, 3)]
    for index, path in enumerate(shards, 1):
        assert main(["eval", *common, "--shard", f"{index}/3", "--out", str(path)]) == 0
    full = tmp_path / "full.jsonl"
    assert main(["eval", *common, "--out", str(full)]) == 0
    capsys.readouterr()

    sizes = [len(path.read_text().splitlines()) for path in shards]
    assert sum(sizes) == len(full.read_text().splitlines()) == total and min(sizes) > 0
    first = json.loads(shards[0].read_text().splitlines()[0])
    assert first["shard"] == {"index": 1, "count": 3, "of": total}

    assert main(["report", *map(str, shards), "--json"]) == 0  # recognised as shards: merged without --merge
    merged = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["report", str(full), "--json"]) == 0
    unsharded = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert merged["n"] == total and merged["hits@1"] == 1.0 and merged["lm_calls_mean"] > 0
    assert {k: v for k, v in merged.items() if k not in TIMINGS} == {
        k: v for k, v in unsharded.items() if k not in TIMINGS}

    assert main(["report", str(shards[0]), str(shards[2]), "--json"]) == 0  # a shard missing: merged, warned
    captured = capsys.readouterr()
    assert "missing shards: 2" in captured.err
    assert json.loads(captured.out.strip().splitlines()[-1])["n"] == sizes[0] + sizes[2]
    assert main(["report", str(shards[0]), str(full), "--json"]) == 0  # not shards of one run: side by side
    side = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(side) == {str(shards[0]), str(full)}
