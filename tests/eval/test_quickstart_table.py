"""The quickstart's table: its baseline rows and pass / pass_all columns."""

from mdlm_wm import quickstart
from mdlm_wm.data.serialize import transitions
from tests.envs import fake_env


def test_baseline_rows_on_the_quickstart_transitions(monkeypatch):
  fake_env.register(monkeypatch)
  episodes = [fake_env.episode(seed) for seed in range(4)]
  episodes.append(fake_env.episode(0, fake_env.BoxesWithoutTwin))
  examples = [(ep, k, tr) for ep in episodes for k, tr in enumerate(transitions(ep, 0))]
  rows, notes = quickstart.baseline_scores(examples)
  assert list(rows) == ["copy s_t", "twin"]
  assert rows["copy s_t"]["examples"] == 15 and rows["twin"]["examples"] == 12
  assert rows["copy s_t"]["pass_rate"] == 0.0  # s_t never has the new count
  assert rows["twin"]["pass_rate"] == 1.0 and rows["twin"]["pass_all_rate"] < 1.0
  assert notes == ["twin: scored 12 of 15 transitions; skipped 3 no twin world "
                   "(fork_hidden not implemented)"]
  model = {"loss": 0.5, **rows["twin"]}
  table = quickstart.format_table({"mdlm": model}, rows).splitlines()
  assert table[0].endswith("| env-check score | pass | pass_all |")
  assert table[2].startswith("| mdlm | - | 0.500 | - |")
  assert table[3].startswith("| copy s_t | - | - | - |") and table[3].endswith("| 0.000 | 0.000 |")
  assert table[4].startswith("| twin | - | - | - |") and "| 1.000 |" in table[4]


def test_a_baseline_without_transitions_shows_dashes(monkeypatch):
  fake_env.register(monkeypatch)
  ep = fake_env.episode(0, fake_env.BoxesWithoutTwin)
  rows, _ = quickstart.baseline_scores([(ep, k, tr) for k, tr in enumerate(transitions(ep, 0))])
  assert rows["twin"]["examples"] == 0 and rows["twin"]["pass_rate"] is None
  assert quickstart.format_table({}, rows).splitlines()[-1] == "| twin |" + " - |" * 8
