"""The files environment: determinism, expert, checks, revealed facts, the twin, steers."""

import copy
import random
import re

import pytest

from mdlm_wm.checks import generic
from mdlm_wm.data import schema
from mdlm_wm.envs.base import run_episode
from mdlm_wm.envs.files import HOME, QUOTA, READONLY, TRASH_BIN, FilesEnv
from mdlm_wm.envs.twin import twin_next_states

STATUS = re.compile(r"\[cwd: \S+ \| entries: \d+ \(files: \d+, dirs: \d+\) \| exit: \d+"
                    r"( \| (disk|trash|quota): \S+)? \| goal: \d+/\d+\]$")


def _episodes(policies=("expert", "noisy", "random"), seeds=range(30)):
  env = FilesEnv()
  for policy in policies:
    for seed in seeds:
      yield run_episode(env, seed, policy)[0]


def _hidden(env):
  """Everything a command may change."""
  nodes = {p: (n.is_dir, n.key, n.ident) for p, n in env._fs.nodes.items()}
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


def test_reference_states_pass_every_check():
  for ep in _episodes():
    # `revealed` names real entries: the episode validates after a round trip.
    schema.episode_from_dict(schema.episode_to_dict(ep))
    for step in ep.steps:
      assert len(step.next_state) <= 1000
      assert STATUS.search(step.next_state), step.next_state
      where = (step.action, step.next_state)
      assert generic.check_score(step.checks, step.next_state) == 1.0, where
      result = FilesEnv.check(ep.spec, step, step.next_state)
      assert result.passed_all and result.score == 1.0, (where, result.failures())
      assert FilesEnv.state_check(ep.spec, step, step.next_state) == 1.0, where


def _steps(pred):
  return [(ep.spec, s) for ep in _episodes(("noisy",), range(12)) for s in ep.steps if pred(s)]


def test_changed_trailing_field_fails_unless_revealed():
  revealed_goals = 0
  for spec, step in _steps(lambda s: True):
    goal = step.checks.fields["goal"]
    done, total = goal.split("/")
    other = (int(done) + 1) % (int(total) + 1)
    wrong = step.next_state.replace(f"goal: {goal}]", f"goal: {other}/{total}]")
    result = FilesEnv.check(spec, step, wrong)
    assert not result.passed_all
    if step.checks.is_revealed_field("goal") and step.checks.fields["exit"] == "0":
      # Another goal is another world's draw; a failed command must keep s_t's goal.
      assert result.passed, (step.action, result.failures())
      revealed_goals += 1
    else:
      assert not result.passed and result.score < 1.0, step.action
    wrong_exit = step.next_state.replace(f"exit: {step.checks.fields['exit']}", "exit: 9")
    assert not FilesEnv.check(spec, step, wrong_exit).passed
    cwd = step.checks.fields["cwd"]
    wrong_cwd = step.next_state.replace(f"cwd: {cwd} ", "cwd: /home/user/zzz ")
    assert not FilesEnv.check(spec, step, wrong_cwd).passed
  assert revealed_goals


def test_removed_listing_entry_fails_unless_revealed():
  listings = _steps(lambda s: s.action.startswith("ls") and s.checks.must_include
                    and s.checks.fields["exit"] == "0")
  kinds = set()
  for spec, step in listings:
    name = step.checks.must_include[0]
    lines = step.next_state.split("\n")
    lines[0] = "  ".join(n for n in lines[0].split("  ") if n != name)
    result = FilesEnv.check(spec, step, "\n".join(lines))
    assert not result.passed_all
    revealed = step.checks.is_revealed_include(name)
    kinds.add(revealed)
    if not revealed:
      assert not result.passed and result.score < 1.0
  assert kinds == {True, False}


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


# ---------------------------------------------------------------------------
# Determined and revealed facts, constraints, the twin world.


def _play(env, actions):
  """Steps of `actions`, each with the state it started from."""
  steps = []
  state = env._start
  for action in actions:
    res = env.step(action)
    steps.append(schema.Step(state, action, res.next_state, checks=res.checks))
    state = res.next_state
  return steps


def _fresh(seed, steer=""):
  env = FilesEnv()
  spec, obs = env.reset(seed, steer=steer)
  env._start = obs
  return env, spec


def _unlisted_dir(env):
  """A top-level directory with something in it (the first state lists only ~)."""
  return next(p for p in env._visible(HOME)
              if env._fs.is_dir(p) and env._visible(p)).rsplit("/", 1)[1]


def test_first_listing_and_first_counts_are_revealed_then_determined():
  env, spec = _fresh(2)
  d = _unlisted_dir(env)
  home, first, again, into, up, back = _play(env, ["ls", f"ls {d}", f"ls {d}", f"cd {d}",
                                                   "cd ..", f"cd {d}"])
  assert home.checks.revealed == ()  # the first state shows the home directory
  # The directory is known to exist (exit 0 follows), its contents are new.
  assert "exit" not in first.checks.revealed
  assert set(first.checks.must_include) <= set(first.checks.revealed)
  assert again.checks.revealed == ()
  assert into.checks.revealed == ()  # listed, so its counts follow
  assert up.checks.revealed == () and back.checks.revealed == ()
  env, _ = _fresh(2)
  into, back = _play(env, [f"cd {d}", f"cd ~/{d}"])
  assert set(into.checks.revealed) == {"entries", "files", "dirs"}
  assert back.checks.revealed == ()  # the status line showed them


def test_writes_in_known_places_are_determined_and_unknown_ones_revealed():
  env, spec = _fresh(3)
  d = _unlisted_dir(env)
  known = _play(env, ["mkdir box", "touch box/a.txt", "cp box/a.txt box/b.txt", "mv box/b.txt .",
                      "rm b.txt", "rm -r box"])
  assert all(s.checks.revealed == () for s in known), [(s.action, s.checks.revealed) for s in known]
  unknown = _play(env, [f"touch {d}/new.txt", f"rm {d}/nothing.txt", f"mv {d}/x.log ~"])
  for step in unknown:
    assert {"exit", "goal"} <= set(step.checks.revealed), step.action
  # Only the mv could change the working directory's counts.
  assert "entries" not in unknown[0].checks.revealed
  assert "entries" in unknown[2].checks.revealed


def test_contents_are_drawn_when_read_and_redrawn_by_the_twin():
  differs = 0
  for seed in range(20):
    env, spec = _fresh(seed)
    path = next((p for p, n in env._fs.files() if p.rsplit("/", 1)[0] == HOME), None)
    if path is None:
      continue
    assert env._drawn == {}
    twin = copy.deepcopy(env)
    twin.fork_hidden("twin1")
    step = _play(env, [f"cat {path}"])[0]
    assert set(env._drawn) == {env._fs.nodes[path].key}
    assert set(step.checks.must_include) <= set(step.checks.revealed)
    other = twin.step(f"cat {path}").next_state
    result = FilesEnv.check(spec, step, other)
    assert result.passed, result.failures()
    if other != step.next_state:
      differs += 1
      assert not result.passed_all  # a revealed fact predicted "wrongly"
    # Read once, the content is known: the twin keeps it from then on.
    again = copy.deepcopy(env)
    again.fork_hidden("twin1")
    assert again.step(f"cat {path}").next_state == env.step(f"cat {path}").next_state
  assert differs >= 5


def test_constraint_violations_in_invented_content_fail():
  env, spec = _fresh(4)
  d = _unlisted_dir(env)
  first = _play(env, [f"ls {d}"])[0]
  status = first.next_state.split("\n")[-1]
  for bad in ("zeta.txt  alpha.txt", "My Report.docx", "notes.txt  notes.txt"):
    result = FilesEnv.check(spec, first, f"{bad}\n{status}")
    assert not result.passed and result.constraints["listing_names"] + result.constraints[
        "listing_sorted"] < 2, bad
  fine = FilesEnv.check(spec, first, f"alpha.txt  zeta/\n{status}")
  assert fine.passed and not fine.passed_all
  env, spec = _fresh(4)
  log = next(p for p, _ in env._fs.files() if p.endswith(".log") and p.count("/") > 3)
  cat = _play(env, [f"cat {log}"])[0]
  status = cat.next_state.split("\n")[-1]
  assert "exit" in cat.checks.revealed
  assert FilesEnv.check(spec, cat, f"ERROR disk full\n{status}").passed
  for bad in ("hello world", "", "INFO a\nINFO b\nINFO c"):
    result = FilesEnv.check(spec, cat, f"{bad}\n{status}".lstrip("\n"))
    assert not result.passed and not result.constraints["content_form"], bad


def test_failed_commands_change_nothing_in_invented_outcomes():
  env, spec = _fresh(6, steer=TRASH_BIN)
  d = _unlisted_dir(env)
  step = _play(env, [f"rm {d}/absent.txt"])[0]
  assert step.checks.fields["exit"] == "1" and "exit" in step.checks.revealed
  good = step.next_state
  assert FilesEnv.check(spec, step, good).passed
  more = good.replace("trash: 0", "trash: 1")
  assert not FilesEnv.check(spec, step, more).passed  # failed, yet the trash grew
  succeeded = f"[{good.split('[', 1)[1].replace('exit: 1', 'exit: 0')}"
  assert not FilesEnv.check(spec, step, succeeded).passed  # an rm that worked fills the trash
  filled = succeeded.replace("trash: 0", "trash: 1")
  assert FilesEnv.check(spec, step, filled).passed  # another world: the file was there
  env, spec = _fresh(6, steer=READONLY)
  write = _play(env, [f"rm {d}/absent.txt"])[0]
  ok = f"[{write.next_state.split('[', 1)[1].replace('exit: 1', 'exit: 0')}"
  assert not FilesEnv.check(spec, write, ok).passed  # every write fails on a read-only disk


def test_twin_passes_the_original_checks():
  total = passed = redrawn = 0
  for ep in _episodes(seeds=range(12)):
    for step, twin in zip(ep.steps, twin_next_states(ep)):
      total += 1
      passed += FilesEnv.check(ep.spec, step, twin).passed
      redrawn += bool(step.checks.revealed) and twin != step.next_state
      if not step.checks.revealed and not (step.action.startswith("ls")
                                           and step.next_state.startswith("[")):
        # Nothing new was shown: the twin prints exactly the same (an empty listing
        # of an unlisted directory is new without a fact to mark).
        assert twin == step.next_state, step.action
  assert passed >= 0.99 * total
  assert redrawn >= 0.1 * total
