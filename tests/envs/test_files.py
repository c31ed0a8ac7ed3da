"""The files environment: determinism, expert, checks, state_check, steers."""

import random
import re

import pytest

from mdlm_wm.checks import generic
from mdlm_wm.data import schema
from mdlm_wm.envs.base import run_episode
from mdlm_wm.envs.files import HOME, QUOTA, READONLY, TRASH_BIN, FilesEnv

STATUS = re.compile(r"\[cwd: \S+ \| entries: \d+ \(files: \d+, dirs: \d+\) \| exit: \d+"
                    r"( \| (disk|trash|quota): \S+)? \| goal: \d+/\d+\]$")


def _episodes(policies=("expert", "noisy", "random"), seeds=range(30)):
  env = FilesEnv()
  for policy in policies:
    for seed in seeds:
      yield run_episode(env, seed, policy)[0]


def _hidden(env):
  """Everything a command may change."""
  nodes = {p: (n.is_dir, n.content, n.ident) for p, n in env._fs.nodes.items()}
  return nodes, env._cwd, env._searched, env._shown


def test_deterministic():
  env = FilesEnv()
  for seed in (0, 7, 19):
    for policy in ("expert", "noisy", "random"):
      a = schema.episode_to_dict(run_episode(env, seed, policy)[0])
      b = schema.episode_to_dict(run_episode(FilesEnv(), seed, policy)[0])
      assert a == b


def test_seeds_differ_and_steer_mix():
  env = FilesEnv()
  firsts = {env.reset(seed)[1] for seed in range(40)}
  assert len(firsts) == 40
  steered = sum(bool(FilesEnv().reset(seed)[0].steer) for seed in range(200))
  assert 40 <= steered <= 100
  assert env.reset(3, steer="")[0].steer == ""
  with pytest.raises(ValueError):
    env.reset(3, steer="the moon is full")


def test_spec_shape():
  spec, obs = FilesEnv().reset(4)
  assert spec.initial_state == obs and STATUS.search(obs)
  assert spec.tools == () and 3 <= len(spec.rules) <= 8 and spec.task


def test_expert_solves_at_least_95_percent():
  env = FilesEnv()
  wins = sum(run_episode(env, seed, "expert")[1].success for seed in range(50))
  assert wins >= 48
  noisy = sum(run_episode(env, seed, "noisy")[1].success for seed in range(50))
  assert noisy >= 42


@pytest.mark.parametrize("steer", [READONLY, TRASH_BIN, QUOTA])
def test_expert_solves_under_every_steer(steer):
  env = FilesEnv()
  wins = sum(run_episode(env, seed, "noisy", steer=steer)[1].success for seed in range(30))
  assert wins >= 27


def test_task_kinds_vary():
  env = FilesEnv()
  kinds = set()
  for seed in range(60):
    env.reset(seed)
    kinds.add(env._task.kind)
  assert kinds == {"move", "find_copy", "mkdirs", "clean", "rename", "show"}


def test_reference_states_score_one():
  for ep in _episodes():
    for step in ep.steps:
      assert len(step.next_state) <= 1000
      assert STATUS.search(step.next_state), step.next_state
      where = (step.action, step.next_state)
      assert generic.check_score(step.checks, step.next_state) == 1.0, where
      assert FilesEnv.state_check(ep.spec, step, step.next_state) == 1.0, where


def _steps(pred):
  return [(ep.spec, s) for ep in _episodes(("noisy",), range(12)) for s in ep.steps if pred(s)]


def test_changed_trailing_field_scores_lower():
  for spec, step in _steps(lambda s: True):
    goal = step.checks.fields["goal"]
    done, total = goal.split("/")
    other = (int(done) + 1) % (int(total) + 1)
    wrong = step.next_state.replace(f"goal: {goal}]", f"goal: {other}/{total}]")
    assert FilesEnv.state_check(spec, step, wrong) < 1.0
    wrong_exit = step.next_state.replace(f"exit: {step.checks.fields['exit']}", "exit: 9")
    assert FilesEnv.state_check(spec, step, wrong_exit) < 1.0
    cwd = step.checks.fields["cwd"]
    wrong_cwd = step.next_state.replace(f"cwd: {cwd} ", "cwd: /home/user/zzz ")
    assert FilesEnv.state_check(spec, step, wrong_cwd) < 1.0


def test_removed_listing_entry_scores_lower():
  listings = _steps(lambda s: s.action.startswith("ls") and s.checks.must_include
                    and s.checks.fields["exit"] == "0")
  assert listings
  for spec, step in listings:
    name = step.checks.must_include[0]
    lines = step.next_state.split("\n")
    lines[0] = "  ".join(n for n in lines[0].split("  ") if n != name)
    assert FilesEnv.state_check(spec, step, "\n".join(lines)) < 1.0


def test_inconsistent_counts_score_lower():
  for spec, step in _steps(lambda s: True):
    f = step.checks.fields
    total = int(f["entries"])
    wrong = step.next_state.replace(f"entries: {total} (", f"entries: {total + 1} (")
    assert FilesEnv.state_check(spec, step, wrong) < 1.0
    # Counts that agree with the listing's field but not with each other.
    split = step.next_state.replace(f"(files: {f['files']},", f"(files: {int(f['files']) + 1},")
    assert FilesEnv.state_check(spec, step, split) < 1.0


def test_ls_of_cwd_must_match_entries():
  env = FilesEnv()
  spec, _ = env.reset(2, steer="")
  res = env.step("ls")
  step = schema.Step("", "ls", res.next_state, checks=res.checks)
  listing, status = res.next_state.split("\n")
  names = listing.split("  ")
  assert len(names) == int(res.checks.fields["entries"])
  # Drop a name and fix the generic facts: only the listing/count consistency catches it.
  short = "  ".join(names[1:]) + "\n" + status
  assert FilesEnv.state_check(spec, step, short) < 1.0


def test_garbage_predictions_do_not_raise():
  env = FilesEnv()
  spec, _ = env.reset(1)
  res = env.step("ls")
  step = schema.Step("", "ls", res.next_state, checks=res.checks)
  rng = random.Random(0)
  noise = bytes(rng.randrange(256) for _ in range(300)).decode("latin-1")
  junk = ["", "hello", "[", "[cwd: | entries: x]", noise]
  for text in junk:
    score = FilesEnv.state_check(spec, step, text)
    assert isinstance(score, float) and 0.0 <= score < 0.5
  odd = schema.Step("", "grep '", res.next_state, checks=res.checks)
  assert 0.0 <= FilesEnv.state_check(spec, odd, "garbage") <= 1.0


def test_invalid_actions_fail_and_change_nothing():
  env = FilesEnv()
  rng = random.Random(5)
  for seed in range(40):
    env.reset(seed)
    for k in range(6):
      if k % 2:
        env.step(env.random_action(rng))
      before = _hidden(env)
      action = env.invalid_action(rng)
      res = env.step(action)
      assert not res.valid, action
      assert res.checks.fields["exit"] != "0"
      assert res.next_state.count("\n") >= 1 and res.checks.must_include, res.next_state
      assert _hidden(env) == before, action


def test_shell_errors_mimic_bash():
  env = FilesEnv()
  env.reset(0, steer="")
  assert env.step("ls nowhere").next_state.startswith(
      "ls: cannot access 'nowhere': No such file or directory")
  assert env.step("foo").next_state.startswith("bash: foo: command not found")
  assert "exit: 127" in env.step("foo bar").next_state
  d = next(p for p in env._visible(HOME) if env._fs.is_dir(p)).rsplit("/", 1)[1]
  assert env.step(f"rm {d}").next_state.startswith(f"rm: cannot remove '{d}': Is a directory")
  assert env.step(f"mkdir {d}").next_state.startswith(
      f"mkdir: cannot create directory '{d}': File exists")
  assert env.step("mkdir a/b").next_state.startswith(
      "mkdir: cannot create directory 'a/b': No such file or directory")
  res = env.step("mkdir -p a/b")
  assert res.valid and env._fs.is_dir(HOME + "/a/b")
  assert env.step("rm ..").next_state.startswith("rm: refusing to remove")
  res = env.step("cd a/b")
  assert res.checks.fields["cwd"] == HOME + "/a/b"
  assert env.step("rm -r ~/a").next_state.startswith(
      "rm: cannot remove '/home/user/a': Device or resource busy")
  assert env.step("touch x.txt").valid and env.step("cd x.txt").next_state.startswith(
      "bash: cd: x.txt: Not a directory")


def test_mv_cp_rm_update_state():
  env = FilesEnv()
  env.reset(3, steer="")
  env.step("mkdir box")
  env.step("touch a.txt")
  assert env.step("cp a.txt box").valid
  assert env._fs.is_file(HOME + "/a.txt") and env._fs.is_file(HOME + "/box/a.txt")
  assert env.step("mv a.txt box/b.txt").valid and not env._fs.get(HOME + "/a.txt")
  res = env.step("ls box")
  assert res.next_state.startswith("a.txt  b.txt\n")
  assert env.step("cp box nest").next_state.startswith(
      "cp: -r not specified; omitting directory 'box'")
  assert env.step("cp -r box nest").valid and env._fs.is_file(HOME + "/nest/b.txt")
  assert env.step("rm -r nest").valid and HOME + "/nest" not in env._fs.nodes


def test_grep_finds_the_planted_keyword():
  env = FilesEnv()
  for seed in range(20):
    env.reset(seed, steer=READONLY)
    word, path = env._task.keyword, env._task.items[0].path
    res = env.step(f"grep -r {word} ~")
    assert res.valid and res.next_state.split("\n")[0].startswith(path + ":")
    assert res.next_state.count(word) == 1


def test_readonly_steer_blocks_writes():
  ro, ok = FilesEnv(), FilesEnv()
  for seed in range(10):
    ro.reset(seed, steer=READONLY)
    ok.reset(seed, steer="")
    before = _hidden(ro)
    bad = ro.step("mkdir fresh")
    good = ok.step("mkdir fresh")
    assert not bad.valid and "Read-only file system" in bad.next_state
    assert bad.checks.fields["disk"] == "read-only" and "disk: read-only" in bad.next_state
    assert bad.checks.fields["entries"] == str(int(good.checks.fields["entries"]) - 1)
    assert good.valid and "disk" not in good.checks.fields
    assert _hidden(ro) == before
    assert ro._task.kind == "show"


def test_trash_steer_keeps_removed_files():
  tr, ok = FilesEnv(), FilesEnv()
  for seed in range(10):
    tr.reset(seed, steer=TRASH_BIN)
    ok.reset(seed, steer="")
    path = tr._fs.files()[0][0]
    name = path.rsplit("/", 1)[1]
    a, b = tr.step(f"rm {path}"), ok.step(f"rm {path}")
    assert a.valid and b.valid
    assert a.checks.fields["trash"] == "1" and "trash: 1" in a.next_state
    assert "trash" not in b.checks.fields
    assert tr.step("ls ~/.trash").next_state.startswith(name + "\n")
    assert not ok.step("ls ~/.trash").valid
    assert ".trash" not in tr.step("ls ~").next_state


def test_quota_steer_limits_new_files():
  qa, ok = FilesEnv(), FilesEnv()
  for seed in range(10):
    qa.reset(seed, steer=QUOTA)
    ok.reset(seed, steer="")
    left = int(qa._fields(0)["quota"])
    results = [qa.step(f"touch new{k}.txt") for k in range(left + 1)]
    assert all(r.valid for r in results[:-1])
    assert "Disk quota exceeded" in results[-1].next_state and not results[-1].valid
    assert results[-1].checks.fields["quota"] == "0"
    assert all(ok.step(f"touch new{k}.txt").valid for k in range(left + 1))
    freed = qa.step(f"rm {qa._fs.files()[0][0]}")
    assert freed.valid and freed.checks.fields["quota"] == "1"
