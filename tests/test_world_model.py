import json
import subprocess
import sys

import pytest

from mdlm_wm import quickstart
from mdlm_wm.data import schema
from mdlm_wm.eval import compare
from mdlm_wm.eval import evaluate as ev
from mdlm_wm.world_model import Anchors, WorldModel
from tests.conftest import tiny_config


@pytest.fixture(scope="module")
def episode(tiny_corpus):
  return next(schema.iter_episodes(f"{tiny_corpus}/test.jsonl"))


@pytest.mark.parametrize("objective", ["mdlm", "ar"])
def test_step_returns_num_samples_strings(tiny_models, episode, objective):
  wm = WorldModel.load(tiny_models[objective])
  assert wm.objective == objective
  s = episode.steps[0]
  out = wm.step(episode.spec, [], s.state, s.action, num_samples=3, seed=1)
  assert len(out) == 3 and all(isinstance(x, str) for x in out)
  again = wm.step(episode.spec, [], s.state, s.action, num_samples=3, seed=1)
  assert again == out


def test_mdlm_keeps_pinned_prefix_and_trailing_anchor(tiny_models, episode):
  wm = WorldModel.load(tiny_models["mdlm"])
  s = episode.steps[0]
  anchors = Anchors(prefix="You open", suffix="[location: kitchen | visible: 2]", length=40)
  for text in wm.step(episode.spec, [], s.state, s.action, fixed=anchors, num_samples=4):
    assert text.startswith("You open") and text.endswith("[location: kitchen | visible: 2]")


def test_anchors_that_do_not_fit_are_rejected(tiny_models, episode):
  wm = WorldModel.load(tiny_models["mdlm"])
  s = episode.steps[0]
  with pytest.raises(ValueError, match="canvas holds"):
    wm.step(episode.spec, [], s.state, s.action, fixed=Anchors(suffix="x", length=10_000))


@pytest.mark.parametrize("objective", ["mdlm", "ar"])
def test_rollout_feeds_on_its_own_predictions(tiny_models, episode, objective):
  wm = WorldModel.load(tiny_models[objective])
  actions = [st.action for st in episode.steps[:3]]
  out = wm.rollout(episode.spec, actions, num_samples=2)
  assert len(out) == 2 and all(len(states) == len(actions) for states in out)


@pytest.mark.parametrize("objective", ["mdlm", "ar"])
def test_redraw_replaces_only_rejected_samples(tiny_models, tiny_corpus, objective):
  wm = WorldModel.load(tiny_models[objective])
  _, examples = ev.load_examples(f"{tiny_corpus}/test.jsonl", 0, max_examples=3)
  trs = [ex.transition for ex in examples]
  first = wm.generate(trs, num_samples=2, seed=[5, 6, 7], temperature=0.0)
  # Transition 0 takes anything; 1 rejects everything; 2 only what differs from greedy.
  accept = [None, lambda text: False, lambda text: text != first[2][0]]
  texts, draws = wm.redraw(trs, first, accept, seed=[5, 6, 7], retries=3, temperature=0.0)
  assert texts[0] == first[0] and draws[0].tolist() == [1, 1]
  assert texts[1] == first[1] and draws[1].tolist() == [4, 4]  # every draw rejected: the first kept
  assert all(t != first[2][0] for t in texts[2]) and (draws[2] >= 2).all()
  # Each redraw hangs on its transition's seed alone, not on the batch around it.
  alone, alone_draws = wm.redraw(trs[2:], first[2:], accept[2:], seed=[7], retries=3,
                                 temperature=0.0)
  assert alone == texts[2:] and (alone_draws == draws[2:]).all()
  assert wm.generate(trs, seed=[5, 6, 7], accept=accept, retries=3, temperature=0.0) == [
      [row[0]] for row in wm.redraw(trs, [[r[0]] for r in first], accept, seed=[5, 6, 7],
                                    retries=3, temperature=0.0)[0]]
  # With one seed for the call, two rejected copies of a transition are redrawn apart.
  twice = wm.redraw(trs[2:] * 2, first[2:] * 2, accept[2:] * 2, seed=3, retries=3,
                    temperature=0.0)[0]
  assert twice[0] != twice[1] and first[2][0] not in (twice[0][0], twice[1][0])
  # No retries: nothing is drawn again.
  assert wm.redraw(trs, first, accept, seed=[5, 6, 7], retries=0)[0] == first
  with pytest.raises(ValueError, match="retries: must be >= 0"):
    wm.redraw(trs, first, accept, retries=-1)


def test_rollout_redraws_each_step_with_one_check(tiny_models, episode):
  wm = WorldModel.load(tiny_models["ar"])
  actions = [st.action for st in episode.steps[:2]]
  calls = []
  generate = wm.generate
  wm.generate = lambda trs, **kw: calls.append(kw.get("accept")) or generate(trs, **kw)
  plain = wm.rollout(episode.spec, actions, num_samples=2, temperature=0.0)
  assert calls == [None, None]
  calls.clear()
  rejected = wm.rollout(episode.spec, actions, num_samples=2, temperature=0.0,
                        accept=lambda text: False, retries=2)
  # Per action: the step's call, then two redraws of both samples; the first draws are kept.
  assert len(calls) == 6 and len(calls[0]) == 2 and rejected == plain


def test_missing_checkpoint_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match=r"no checkpoint in .*\(not a training workdir"):
    WorldModel.load(str(tmp_path))
  assert list(tmp_path.iterdir()) == []  # and it leaves nothing behind


def test_decode_config_applies_overrides_and_names_a_bad_setting(tiny_models):
  mdlm, ar = WorldModel.load(tiny_models["mdlm"]), WorldModel.load(tiny_models["ar"])
  # A block-diffusion model: its trained block size unless overridden.
  assert mdlm.decode_config().block_size == mdlm.cfg.diffusion.block_size
  cfg = mdlm.decode_config(steps=16, block_size=4, confidence="margin", threshold=0.9)
  assert (cfg.steps, cfg.block_size, cfg.confidence, cfg.threshold) == (16, 4, "margin", 0.9)
  assert cfg.temperature == mdlm.cfg.sample.temperature  # the rest from the model's config
  with pytest.raises(ValueError, match=r"threshold: must be in \[0, 1\), got 1.5"):
    mdlm.decode_config(threshold=1.5)
  with pytest.raises(ValueError, match=r"unknown sample settings \['temprature'\]"):
    mdlm.decode_config(temprature=0.5)
  # The AR decoder takes temperature and top_p and ignores the MDLM settings.
  cfg = ar.decode_config(temperature=0.5, block_size=48)
  assert (cfg.temperature, cfg.max_len) == (0.5, 128)
  with pytest.raises(ValueError, match="top_p: must be in"):
    ar.decode_config(top_p=0.0)


def _sample_cli(workdir, corpus, out, *flags):
  return subprocess.run([sys.executable, "-m", "launch.sample", f"--workdir={workdir}",
                         f"--data={corpus}/test.jsonl", f"--out={out}", "--num_samples=2",
                         "--max_examples=5", *flags], capture_output=True, text=True)


def test_sample_cli_writes_one_line_per_transition(tiny_models, tiny_corpus, tmp_path):
  out = tmp_path / "samples.jsonl"
  res = _sample_cli(tiny_models["mdlm"], tiny_corpus, out, "--steps=4", "--block_size=32",
                    "--confidence=margin", "--temperature=0.5")
  assert res.returncode == 0, res.stderr[-2000:]
  rows = [json.loads(line) for line in open(out)]
  assert len(rows) == 5 and all(len(r["samples"]) == 2 and r["reference"] for r in rows)
  # A threshold of 1 would never commit by confidence: refused before any sampling.
  bad = _sample_cli(tiny_models["mdlm"], tiny_corpus, tmp_path / "bad.jsonl", "--threshold=1")
  assert bad.returncode == 2 and "threshold: must be in [0, 1), got 1.0" in bad.stderr, \
      bad.stderr[-2000:]
  assert not (tmp_path / "bad.jsonl").exists()


def test_quickstart_runs_end_to_end_and_reuses_stages(tmp_path, capsys):
  cfg = tiny_config("unused", **{"train.steps": 3, "eval.examples_per_env": 1,
                                 "corpus.episodes_per_env": 5, "sample.format_retries": 2})
  summary = quickstart.run(cfg, str(tmp_path))
  assert set(summary) == {"mdlm", "ar"}
  for m in summary.values():
    assert m["examples"] == 5 and 0 <= m["pass_rate"] <= 1 and m["valid_loss"] > 0
    assert 0 <= m["first_draw_well_formed"] <= m["well_formed"] <= 1
  printed = capsys.readouterr().out
  assert "| mdlm |" in printed and "| ar |" in printed and "reference:" in printed
  assert "after up to 2 format retries" in printed
  # A 3-step model writes states that do not parse: each is drawn again, twice.
  drawn = [json.loads(line) for line in (tmp_path / "predictions_mdlm.jsonl").open()]
  assert {r["draws"] for r in drawn if not r["scores"]["well_formed"]} <= {3}
  assert {r["draws"] for r in drawn if r["draws"] > 1} and all(
      r["made_with"]["sample"]["format_retries"] == 2 for r in drawn)
  metrics = (tmp_path / "mdlm" / "metrics.jsonl").read_text()
  # An older predictions file (no step, flat scores) is written again, not misread.
  ar_path = tmp_path / "predictions_ar.jsonl"
  rows = [json.loads(line) for line in ar_path.read_text().splitlines()]
  ar_path.write_text("".join(json.dumps({**{k: v for k, v in r.items() if k not in ("step", "scores")},
                                         **r["scores"]}) + "\n" for r in rows))
  quickstart.run(cfg, str(tmp_path))
  printed = capsys.readouterr().out
  assert "[data] reusing" in printed and "predictions_ar.jsonl" in printed
  assert "predictions_mdlm.jsonl" not in printed  # its file was reused
  assert (tmp_path / "mdlm" / "metrics.jsonl").read_text() == metrics
  # launch.compare pairs the two models' files transition by transition.
  _, examples = ev.load_examples(str(tmp_path / "data" / "test.jsonl"), 0)
  before = ev.read_prediction_map(str(ar_path))
  examples = [ex for ex in examples if ex.key in before]
  assert len(examples) == 5
  by_key = {f"{r['id']}#{r['step']}": r for r in rows}
  assert all(by_key[ex.key]["reference"] == ex.step.next_state for ex in examples)
  after = ev.read_predictions(str(tmp_path / "predictions_mdlm.jsonl"), examples)
  result = compare.paired_comparison(examples, [before[ex.key] for ex in examples], after)
  assert result["pass"]["n"] == 5
  # A file made by another checkpoint or other sampler settings is sampled again.
  made_with = json.loads(ar_path.read_text().splitlines()[0])["made_with"]
  assert made_with["checkpoint"] == 3 and made_with["sample"]["temperature"] == 0.0
  for key, value in (("checkpoint", 2), ("sample", {**made_with["sample"], "top_p": 0.5})):
    rows = [json.loads(line) for line in ar_path.read_text().splitlines()]
    ar_path.write_text("".join(json.dumps({**r, "made_with": {**made_with, key: value}}) + "\n"
                               for r in rows))
    quickstart.run(cfg, str(tmp_path))
    printed = capsys.readouterr().out
    assert "predictions_ar.jsonl" in printed and "predictions_mdlm.jsonl" not in printed
    assert json.loads(ar_path.read_text().splitlines()[0])["made_with"] == made_with
