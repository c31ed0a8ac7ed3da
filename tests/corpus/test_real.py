"""The real-environment corpus builder, on a fake engine (fast) and on the real ones."""

import json
import os
import random
import re
import subprocess
import sys

import pytest

from mdlm_wm.corpus import real as real_corpus
from mdlm_wm.data import schema
from mdlm_wm.data.schema import Checks, Spec
from mdlm_wm.envs import adapters, base, registry
from mdlm_wm.envs.adapters.base import RealEnv, render_state, seed_ranges

CRASH_SEED = 3


class CounterEnv(RealEnv):
  """A fake engine: reach the target count with `add`; `crashy` raises on one seed."""

  family = "fake"
  requires = "nothing"
  max_steps = 8

  @classmethod
  def tasks(cls):
    return ["count", "crashy"]

  def split_seeds(self, split):
    return list(seed_ranges(10)[split])

  def reset(self, seed, steer=None):
    self.count, self.target, self.seed = 0, 2 + seed % 3, seed
    first = render_state(f"Counter at 0, target {self.target}.", {"count": "0"})
    return Spec(initial_state=first, task=f"Count to {self.target}.", rules=("add or wait",)), first

  def step(self, action):
    if self.task == "crashy" and self.seed == CRASH_SEED:
      raise RuntimeError("engine died\nwith a traceback")
    valid = action in ("add", "wait")
    self.count += action == "add"
    done = self.count >= self.target
    obs = "Added." if action == "add" else "Waited." if valid else "Error: unknown command."
    return base.StepResult(render_state(obs, {"count": str(self.count)}), float(action == "add"),
                           done, Checks(fields={"count": str(self.count)}), valid,
                           {"success": done})

  def expert_action(self):
    return "add"

  def random_action(self, rng: random.Random):
    return rng.choice(["add", "wait"])

  def invalid_action(self, rng: random.Random):
    return "jump"


@pytest.fixture
def fake_family(monkeypatch):
  # adapters finds the family's RealEnv class in its module: this one.
  monkeypatch.setitem(adapters._MODULES, "fake", __name__)


def _config(**kw):
  # Train plays all 8 train seeds (CRASH_SEED among them); valid and test
  # have one seed each, fewer than asked.
  kw.setdefault("episodes", {"train": 8, "valid": 2, "test": 2})
  return real_corpus.RealCorpusConfig(envs={"fake": ()}, tokenizer_vocab=320, **kw)


def test_builder_writes_schema_files_and_skips_a_crashing_game(fake_family, tmp_path):
  result = real_corpus.build_real_corpus(_config(), str(tmp_path), verbose=False)
  stats = json.loads((tmp_path / "stats.json").read_text())
  crashes = stats["crashes"]
  assert [(c["family"], c["task"], c["split"], c["seed"]) for c in crashes] == [
      ("fake", "crashy", "train", CRASH_SEED)]
  assert crashes[0]["error"] == "RuntimeError: engine died"
  counts = stats["counts"]["fake"]
  assert counts["crashed_games"] == 1 and counts["episodes"] == 2 * 10 - 1
  episodes = {split: schema.load_episodes(str(tmp_path / f"{split}.jsonl"))
              for split in ("train", "valid", "test")}
  assert [len(e) for e in episodes.values()] == [15, 2, 2]
  assert counts["transitions"] == sum(len(ep.steps) for eps in episodes.values() for ep in eps)
  assert counts["successes"] == sum(ep.meta["success"] for eps in episodes.values() for ep in eps)
  assert (tmp_path / "tokenizer.model").exists() and stats["tokenizer"]["vocab_size"] <= 320
  # Seeds: as the adapter splits them, disjoint, each played once per task.
  seeds = stats["splits"]["fake"]["seeds"]
  for task in ("count", "crashy"):
    played = {s: sorted(seeds[task][s]["played"]) for s in ("train", "valid", "test")}
    assert played == {"train": list(range(8)), "valid": [8], "test": [9]}
    assert [seeds[task][s]["available"] for s in ("train", "valid", "test")] == [8, 1, 1]
  ids = [ep.id for eps in episodes.values() for ep in eps]
  assert len(set(ids)) == len(ids) and all(re.fullmatch(r"fake/\w+/seed-\d/\w+", i) for i in ids)
  assert stats["stats"]["train"]["fake/crashy"]["episodes"] == 7
  assert result["timing"]["fake"]["episodes"] == 19


def test_output_is_deterministic(fake_family, tmp_path):
  a, b = tmp_path / "a", tmp_path / "b"
  for out in (a, b):
    real_corpus.build_real_corpus(_config(seed=4), str(out), verbose=False)
  for name in ("train.jsonl", "valid.jsonl", "test.jsonl", "tokenizer.model"):
    assert (a / name).read_bytes() == (b / name).read_bytes(), name
  stats = [json.loads((d / "stats.json").read_text()) for d in (a, b)]
  for s in stats:
    s.pop("timing")
  assert stats[0] == stats[1]
  # Another corpus seed draws other seeds.
  real_corpus.build_real_corpus(_config(seed=5), str(b), verbose=False)
  assert (a / "train.jsonl").read_bytes() != (b / "train.jsonl").read_bytes()


def test_policy_mix_and_task_subset(fake_family, tmp_path):
  cfg = real_corpus.RealCorpusConfig(envs={"fake": ("count",)}, episodes={"train": 5},
                                     policy_mix={"random": 1.0}, tokenizer_vocab=0)
  real_corpus.build_real_corpus(cfg, str(tmp_path), verbose=False)
  eps = schema.load_episodes(str(tmp_path / "train.jsonl"))
  assert {ep.env for ep in eps} == {"fake/count"}
  assert {ep.meta["policy"] for ep in eps} == {"random"}
  assert sorted(os.listdir(tmp_path)) == ["stats.json", "train.jsonl"]


def test_more_episodes_than_seeds_plays_each_seed_once(fake_family, tmp_path):
  cfg = _config(episodes={"train": 20})
  real_corpus.build_real_corpus(cfg, str(tmp_path), verbose=False)
  train = schema.load_episodes(str(tmp_path / "train.jsonl"))
  assert sorted(ep.meta["seed"] for ep in train if ep.env == "fake/count") == list(range(8))


def test_parse_envs_and_bad_configs(fake_family):
  assert real_corpus.parse_envs(["fake"]) == {"fake": ()}
  assert real_corpus.parse_envs(["fake:count+crashy", "fake/count"]) == {
      "fake": ("count", "crashy")}
  assert real_corpus.parse_envs(["fake:count", "fake"]) == {"fake": ()}
  with pytest.raises(ValueError, match="'shop' is not a real environment family"):
    real_corpus.parse_envs(["shop"])
  with pytest.raises(ValueError, match=r"unknown fake tasks \['nope'\]"):
    real_corpus.RealCorpusConfig(envs={"fake": ("nope",)}).validate()
  with pytest.raises(ValueError, match="episodes must map splits"):
    real_corpus.RealCorpusConfig(envs={"fake": ()}, episodes={"dev": 2}).validate()
  with pytest.raises(ValueError, match="tokenizer is trained on the train split"):
    real_corpus.RealCorpusConfig(envs={"fake": ()}, episodes={"test": 2}).validate()
  with pytest.raises(ValueError, match="policy_mix"):
    real_corpus.RealCorpusConfig(envs={"fake": ()}, policy_mix={"greedy": 1.0}).validate()


def _cli(*args):
  return subprocess.run([sys.executable, "-m", "launch.build_corpus", *args],
                        capture_output=True, text=True)


def test_cli_builds_builtin_and_real_parts_and_merges_them(tmp_path):
  pytest.importorskip("textworld_express")
  res = _cli("--envs=shop,textworld_express:coin", "--episodes_per_env=5",
             "--episodes_per_task=2", "--real_splits=train,test:1", "--tokenizer_vocab=512",
             f"--out_dir={tmp_path}")
  assert res.returncode == 0, res.stderr
  assert "merged builtin, real into" in res.stdout
  for part in ("builtin", "real"):
    assert "splits" in json.loads((tmp_path / part / "stats.json").read_text())
  train = schema.load_episodes(str(tmp_path / "train.jsonl"))
  assert {ep.env for ep in train} == {"shop", "textworld_express/coin"}
  assert {ep.env for ep in schema.load_episodes(str(tmp_path / "test.jsonl"))} == {
      "shop", "textworld_express/coin"}
  assert not (tmp_path / "builtin" / "tokenizer.model").exists()
  stats = json.loads((tmp_path / "stats.json").read_text())
  assert stats["parts"] == {"builtin": "builtin", "real": "real"}
  assert set(stats["stats"]["train"]) == {"shop", "textworld_express/coin"}


def test_cli_refuses_a_holdout_for_a_real_corpus(tmp_path):
  res = _cli("--envs=textworld_express:coin", "--holdout_envs=shop", f"--out_dir={tmp_path}")
  assert res.returncode != 0 and "--holdout_envs is for built-in" in res.stderr


def test_cli_builds_a_textworld_express_corpus(tmp_path):
  pytest.importorskip("textworld_express")
  res = _cli("--envs=textworld_express:coin+simonsays", "--episodes_per_task=2",
             "--real_splits=train,valid:1,test:1", "--tokenizer_vocab=400", f"--out_dir={tmp_path}")
  assert res.returncode == 0, res.stderr
  assert re.search(r"textworld_express: 8 episodes, \d+ transitions, 0 crashed games; "
                   r"[\d.]+ episodes/min", res.stdout)
  stats = json.loads((tmp_path / "stats.json").read_text())
  assert stats["splits"]["textworld_express"]["tasks"] == ["coin", "simonsays"]
  test_seeds = stats["splits"]["textworld_express"]["seeds"]["coin"]["test"]["played"]
  assert len(test_seeds) == 1 and 20000 <= test_seeds[0] < 21000
  for split in ("train", "valid", "test"):
    for ep in schema.load_episodes(str(tmp_path / f"{split}.jsonl")):
      for step in ep.steps:
        assert registry.state_check_fn(ep.env)(ep.spec, step, step.next_state) == 1.0


@pytest.mark.slow
def test_builds_textworld_and_textworld_express_together(tmp_path):
  pytest.importorskip("textworld")
  pytest.importorskip("textworld_express")
  cfg = real_corpus.RealCorpusConfig(
      envs=real_corpus.parse_envs(["textworld:treasure_hunter", "textworld_express:twc"]),
      episodes={"train": 2, "valid": 1, "test": 1}, tokenizer_vocab=500)
  result = real_corpus.build_real_corpus(cfg, str(tmp_path), verbose=False)
  assert {f: c["episodes"] for f, c in result["counts"].items()} == {
      "textworld": 4, "textworld_express": 4}
  envs = {ep.env for ep in schema.load_episodes(str(tmp_path / "train.jsonl"))}
  assert envs == {"textworld/treasure_hunter", "textworld_express/twc"}
  assert "textworld: 4 episodes" in real_corpus.format_summary(result)
