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
  assert table[0].endswith("| env-check score | parses | pass | pass_all |")
  assert table[2].startswith("| mdlm | - | 0.500 | - |")
  assert table[3].startswith("| copy s_t | - | - | - |") and table[3].endswith("| 0.000 | 0.000 |")
  assert table[4].startswith("| twin | - | - | - |") and "| 1.000 |" in table[4]


def test_a_baseline_without_transitions_shows_dashes(monkeypatch):
  fake_env.register(monkeypatch)
  ep = fake_env.episode(0, fake_env.BoxesWithoutTwin)
  rows, _ = quickstart.baseline_scores([(ep, k, tr) for k, tr in enumerate(transitions(ep, 0))])
  assert rows["twin"]["examples"] == 0 and rows["twin"]["pass_rate"] is None
  assert quickstart.format_table({}, rows).splitlines()[-1] == "| twin |" + " - |" * 9


def test_parses_counts_states_after_retries_and_at_the_first_draw():
  row = lambda well_formed, draws: {"scores": {"checks": 1.0, "env": 1.0, "pass": 1.0,
                                               "pass_all": 1.0, "exact": 0.0,
                                               "determined_acc": 1.0, "revealed_valid": 1.0,
                                               "well_formed": well_formed}, "draws": draws}
  summary = quickstart.rows_summary([row(1.0, 1), row(1.0, 3), row(0.0, 4), row(0.0, 1)])
  assert summary["well_formed"] == 0.5 and summary["first_draw_well_formed"] == 0.25
  # Rows of an environment without a checker (no `well_formed`) count as parsing.
  plain = {"scores": {"checks": 0.5, "pass": 0.0, "pass_all": 0.0, "exact": 0.0,
                      "determined_acc": 0.5, "revealed_valid": 1.0}}
  summary = quickstart.rows_summary([plain])
  assert summary["well_formed"] == 1.0 and summary["env_score"] == 0.5
