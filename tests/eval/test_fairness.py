"""launch.fairness: the twin ceiling and copy floor per environment, on a built corpus."""

import json
import subprocess
import sys

from mdlm_wm.eval import fairness


def test_fairness_table_has_the_ceiling_and_the_floor(tiny_corpus):
  table = fairness.fairness(f"{tiny_corpus}/train.jsonl")
  assert set(table) == {"calendar", "files", "household", "lab", "shop", "all"}
  assert table["all"]["transitions"] == sum(m["transitions"] for e, m in table.items()
                                            if e != "all")
  for env, m in table.items():
    assert m["reference_pass_all"] == 1.0, env  # the reference states every fact
    assert m["twin_pass"] >= 0.99, env  # no check asks for hidden information
    assert m["copy_pass"] < 0.5, env  # copying s_t is a floor, not a world model
  # Somewhere the twin invents what it could not know, so it misses revealed facts.
  assert table["all"]["twin_pass_all"] < 1.0 and 0 < table["all"]["revealed_share"] < 1


def test_fairness_cli_writes_json(tiny_corpus, tmp_path):
  out = tmp_path / "fairness.json"
  res = subprocess.run([sys.executable, "-m", "launch.fairness",
                        f"--data={tiny_corpus}/test.jsonl", "--max_episodes=5", f"--out={out}"],
                       capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, res.stderr[-2000:]
  assert "| all |" in res.stdout and json.loads(out.read_text())["all"]["transitions"] > 0
