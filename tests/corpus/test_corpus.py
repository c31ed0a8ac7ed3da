import filecmp
import os
import re
import subprocess
import sys

import pytest

from launch.check_data import check_files
from mdlm_wm import corpus
from mdlm_wm.checks.generic import check_score
from mdlm_wm.data import schema
from mdlm_wm.envs import registry

CFG = corpus.CorpusConfig(envs=registry.env_names(), episodes_per_env=10, seed=5,
                          holdout_envs=["calendar"], tokenizer_vocab=1024)
FILES = ["train.jsonl", "valid.jsonl", "test.jsonl", "heldout_env.jsonl", "stats.json",
         "tokenizer.model"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("corpus"))
  return out, corpus.build_corpus(CFG, out, verbose=False)


def test_writes_every_file_and_is_byte_identical(built, tmp_path):
  out, _ = built
  again = str(tmp_path / "again")
  corpus.build_corpus(CFG, again, verbose=False)
  for name in FILES:
    assert filecmp.cmp(os.path.join(out, name), os.path.join(again, name), shallow=False), name


def test_splits_are_disjoint_and_holdout_is_separate(built):
  out, result = built
  seeds = {}
  for split in ("train", "valid", "test", "heldout_env"):
    eps = schema.load_episodes(os.path.join(out, f"{split}.jsonl"))
    envs = {e.env for e in eps}
    if split == "heldout_env":
      assert envs == {"calendar"} and len(eps) == 10
    else:
      assert "calendar" not in envs and len(envs) == len(CFG.envs) - 1
    seeds[split] = {(e.env, e.meta["seed"]) for e in eps}
  for a in ("train", "valid", "test"):
    for b in ("train", "valid", "test"):
      if a < b:
        assert not seeds[a] & seeds[b]
  assert result["splits"]["train"]["world_seeds"] == [5_000_000, 5_000_008]
  assert result["stats"]["train"]["shop"]["episodes"] == 8


def test_every_reference_passes_its_checks(built):
  out, _ = built
  for split in ("train", "valid", "test", "heldout_env"):
    for ep in schema.iter_episodes(os.path.join(out, f"{split}.jsonl")):
      check = registry.state_check_fn(ep.env)
      for step in ep.steps:
        assert check_score(step.checks, step.next_state) == 1.0, (ep.id, step.action)
        assert check(ep.spec, step, step.next_state) == 1.0, (ep.id, step.action)


def test_check_data_accepts_what_build_corpus_writes(built):
  out, _ = built
  paths = [os.path.join(out, f) for f in FILES if f.endswith(".jsonl")]
  totals, errors = check_files(paths)
  assert errors == [] and len(totals) == len(CFG.envs)


def test_policy_mix_is_respected(built):
  out, _ = built
  eps = schema.load_episodes(os.path.join(out, "train.jsonl"))
  policies = {e.meta["policy"] for e in eps}
  assert policies == {"expert", "noisy", "random"}
  only_expert = corpus.CorpusConfig(envs=["shop"], episodes_per_env=4,
                                    policy_mix={"expert": 1.0, "noisy": 0.0, "random": 0.0})
  assert {corpus._policy(only_expert, "shop", i) for i in range(20)} == {"expert"}


def test_rebuild_removes_files_of_an_earlier_config(tmp_path):
  out = str(tmp_path)
  first = corpus.CorpusConfig(envs=["shop", "files"], episodes_per_env=5, holdout_envs=["files"],
                              tokenizer_vocab=512)
  corpus.build_corpus(first, out, verbose=False)
  assert os.path.exists(os.path.join(out, "heldout_env.jsonl"))
  second = corpus.CorpusConfig(envs=["shop"], episodes_per_env=5, tokenizer_vocab=0)
  corpus.build_corpus(second, out, verbose=False)
  assert not os.path.exists(os.path.join(out, "heldout_env.jsonl"))
  assert not os.path.exists(os.path.join(out, "tokenizer.model"))


def test_bad_configs_are_rejected():
  with pytest.raises(ValueError, match="unknown environment 'nope'"):
    corpus.CorpusConfig(envs=["nope"], episodes_per_env=1).validate()
  with pytest.raises(ValueError, match="so no split is empty"):
    corpus.CorpusConfig(envs=["shop"], episodes_per_env=2).validate()
  with pytest.raises(ValueError, match="every environment is held out"):
    corpus.CorpusConfig(envs=["shop"], episodes_per_env=5, holdout_envs=["shop"]).validate()
  with pytest.raises(ValueError, match="policy_mix"):
    corpus.CorpusConfig(envs=["shop"], episodes_per_env=5, policy_mix={"greedy": 1}).validate()


def test_cli_prints_stats_and_speed(tmp_path):
  out = tmp_path / "cli"
  res = subprocess.run(
      [sys.executable, "-m", "launch.build_corpus", "--envs=shop,files", "--episodes_per_env=5",
       f"--out_dir={out}", "--tokenizer_vocab=512"], capture_output=True, text=True)
  assert res.returncode == 0, res.stderr
  assert re.search(r"generation speed: [\d.]+ episodes/s", res.stdout)
  assert "== train ==" in res.stdout and "TOTAL" in res.stdout and "mean_tok" in res.stdout
  assert (out / "tokenizer.model").exists() and not (out / "heldout_env.jsonl").exists()
