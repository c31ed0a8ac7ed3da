"""The user guide (docs/guide/*.md) runs as written.

Every fenced block whose info string is `bash runnable` or `python runnable`
is run, in page order, from the repository root: bash blocks with
`bash -euo pipefail`, python blocks with this interpreter. A block marked
`slow` as well (```` ```bash runnable slow ````) runs only with `-m slow`.
`needs=MODULE` skips a block when MODULE is not importable (an optional extra).
A `background` block (a server) is started and left running while the
page's later blocks run; it is stopped when the next page starts or the
session ends, and its output is shown when a later block of its page fails.
A block may use what earlier blocks of its page made: a block selected alone
(`-k "training.md:183"`) first runs the earlier blocks of its page that this
session has not run (a block that is not slow relies on no slow block, as
the default run has none).

The blocks read three variables the guide's index introduces, here pointed at
a tiny setup: `WM`, a quickstart-shaped workdir (`data/` = the session's
`tiny_corpus`; `mdlm/` and `ar/` = the session's `tiny_models`, linked in
for slow blocks and for blocks that name `$WM/mdlm` or `$WM/ar`, so the
default run trains no model it does not use), `OUT`, a scratch directory shared by the blocks
of one page, and `PORT`, a free port (one per page). Blocks must not write
under `$WM` (it holds shared fixtures); a guard below checks the launchers
that write a workdir.

Blocks that are not run (plain ```` ```bash ```` / ```` ```python ````) must be
listed in NOT_RUN with the reason. The other tests check that every
launcher the guide names (`python -m launch.<name>`, `python -m
examples.<name>`, `launch/*.sh`) exists and that every relative link (and #anchor into a Markdown page)
resolves.

Compilations are cached across blocks (and across runs) in pytest's cache
directory (JAX's persistent compilation cache, set up in conftest.py): the
blocks are separate processes, and most of a tiny run is compiling.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUIDE = os.path.join(REPO, "docs", "guide")
PAGES = sorted(f for f in os.listdir(GUIDE) if f.endswith(".md")) if os.path.isdir(GUIDE) else []
EXPECTED_PAGES = ["README.md", "getting_started.md", "your_data.md", "training.md", "sampling.md",
                  "evaluation.md", "grpo.md", "serving.md", "gym.md", "scaling.md"]
CODE_LANGUAGES = ("bash", "sh", "shell", "console", "python")
SNIPPET_TIMEOUT_S = 900

# Blocks the test does not run: (page, a string the block contains) -> why.
NOT_RUN = {
    ("README.md", "export WM=/tmp/mdlm_wm_quickstart"):
        "sets the guide's variables; the test sets them itself (to the tiny setup)",
    ("getting_started.md", "pip install -e . && python -m launch.quickstart"):
        "installs packages and trains two quickstart models (7 min on 2 CPU cores); "
        "the page's runnable block runs the same job with configs/tiny.py",
    ("getting_started.md", "python -m pytest -q"):
        "the whole default test suite, which contains this test",
    ("training.md", "--config=configs/quickstart.py --workdir=$OUT/quickstart_mdlm"):
        "450 quickstart steps (about 6 min on 2 CPU cores); the runnable blocks train "
        "configs/tiny.py for a few steps",
    ("training.md", "timeout --signal=TERM"):
        "timing-dependent (when the signal lands); tests/train/test_trainer.py checks SIGTERM "
        "saving and resuming",
    ("training.md", "launch.import_hf"):
        "needs a downloaded Hugging Face checkpoint (tests/model/test_hf_import.py imports tiny "
        "random ones written with transformers)",
    ("grpo.md", "--init=$WM/mdlm --workdir=$OUT/grpo_full"):
        "100 GRPO steps of the quickstart model (about a minute per step on 2 CPU cores); "
        "the runnable block runs 2 tiny steps",
}


@dataclasses.dataclass(frozen=True)
class Block:
  page: str
  line: int  # 1-based line of the opening fence
  language: str
  flags: tuple[str, ...]  # the info string's words after the language
  text: str

  @property
  def runnable(self) -> bool:
    return "runnable" in self.flags

  @property
  def slow(self) -> bool:
    return "slow" in self.flags

  @property
  def background(self) -> bool:
    return "background" in self.flags

  @property
  def needs(self) -> list[str]:
    return [f.split("=", 1)[1] for f in self.flags if f.startswith("needs=")]

  @property
  def id(self) -> str:
    return f"{self.page}:{self.line}"


_FENCE = re.compile(r"^(`{3,})(.*)$")


def parse_blocks(page: str) -> list[Block]:
  """The fenced code blocks of docs/guide/`page`."""
  with open(os.path.join(GUIDE, page), encoding="utf-8") as f:
    lines = f.read().split("\n")
  blocks, i = [], 0
  while i < len(lines):
    m = _FENCE.match(lines[i])
    if not m:
      i += 1
      continue
    fence, info = m.group(1), m.group(2).split()
    start = i
    i += 1
    body = []
    while i < len(lines) and not lines[i].startswith(fence):
      body.append(lines[i])
      i += 1
    if i == len(lines):
      raise AssertionError(f"{page}:{start + 1}: unclosed code fence")
    i += 1
    blocks.append(Block(page, start + 1, info[0] if info else "", tuple(info[1:]),
                        "\n".join(body) + "\n"))
  return blocks


ALL_BLOCKS = [b for page in PAGES for b in parse_blocks(page)]
RUNNABLE = [b for b in ALL_BLOCKS if b.runnable]


def _param(block: Block):
  marks = [pytest.mark.slow] if block.slow else []
  return pytest.param(block, id=block.id, marks=marks)


# ------------------------------------------------------------------ structure


def test_the_guide_has_its_pages_and_the_index_links_them():
  assert sorted(PAGES) == sorted(EXPECTED_PAGES)
  with open(os.path.join(GUIDE, "README.md"), encoding="utf-8") as f:
    index = f.read()
  for page in EXPECTED_PAGES[1:]:
    assert f"]({page})" in index, f"docs/guide/README.md does not link {page}"


def test_every_code_block_runs_or_says_why_not():
  unjustified, used = [], set()
  for b in ALL_BLOCKS:
    if b.language not in CODE_LANGUAGES:
      continue
    unknown = [f for f in b.flags if f not in ("runnable", "slow", "background")
               and not f.startswith("needs=")]
    assert not unknown, f"{b.id}: unknown info-string words {unknown}"
    if b.runnable:
      assert b.language in ("bash", "python"), f"{b.id}: runnable blocks are bash or python"
      continue
    keys = [k for k in NOT_RUN if k[0] == b.page and k[1] in b.text]
    if keys:
      used.update(keys)
    else:
      unjustified.append(f"{b.id}: {b.text.strip().splitlines()[0]}")
  assert not unjustified, ("code blocks neither runnable nor listed in NOT_RUN:\n"
                           + "\n".join(unjustified))
  assert not set(NOT_RUN) - used, f"NOT_RUN entries matching no block: {set(NOT_RUN) - used}"


def test_runnable_blocks_do_not_write_into_the_shared_workdir():
  writers = r"launch\.(train|grpo|train_agent|agent_grpo|quickstart|import_hf)\b"
  for b in RUNNABLE:
    for command in re.split(r"\n(?!\s)", b.text.replace("\\\n", " ")):
      if re.search(writers, command):
        assert not re.search(r"--(workdir|out)=\$\{?WM\b", command), (
            f"{b.id}: writes into $WM, which holds the session's shared tiny models")


def _guide_text() -> str:
  parts = []
  for page in PAGES:
    with open(os.path.join(GUIDE, page), encoding="utf-8") as f:
      parts.append(f.read())
  return "\n".join(parts)


def test_every_launcher_the_guide_names_exists():
  text = _guide_text()
  modules = set(re.findall(r"python -m ((?:launch|examples)\.\w+)", text))
  scripts = set(re.findall(r"\b(launch/[\w/]+\.(?:sh|sbatch))\b", text))
  assert modules, "the guide names no launcher"
  missing = [m for m in sorted(modules) if not os.path.isfile(
      os.path.join(REPO, *m.split(".")) + ".py")]
  missing += [s for s in sorted(scripts) if not os.path.isfile(os.path.join(REPO, s))]
  assert not missing, f"the guide names launchers that do not exist: {missing}"


def _slug(heading: str) -> str:
  """GitHub's anchor of a Markdown heading."""
  text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
  return re.sub(r" ", "-", re.sub(r"[^\w\- ]", "", text))


def _anchors(path: str) -> set[str]:
  with open(path, encoding="utf-8") as f:
    text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
  return {_slug(m) for m in re.findall(r"^#+\s+(.*)$", text, flags=re.M)}


def test_every_relative_link_resolves():
  bad = []
  for page in PAGES:
    path = os.path.join(GUIDE, page)
    with open(path, encoding="utf-8") as f:
      text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
      if re.match(r"[a-z]+:", target):
        continue  # http(s), mailto
      file_part, _, anchor = target.partition("#")
      resolved = os.path.normpath(os.path.join(GUIDE, file_part)) if file_part else path
      if not os.path.exists(resolved):
        bad.append(f"{page}: {target} (no {os.path.relpath(resolved, REPO)})")
      elif anchor and resolved.endswith(".md") and anchor not in _anchors(resolved):
        bad.append(f"{page}: {target} (no heading #{anchor})")
  assert not bad, "broken links:\n" + "\n".join(bad)


# ------------------------------------------------------------------ running the blocks


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.fixture(scope="session")
def guide_wm(tiny_corpus, tmp_path_factory) -> str:
  """$WM: a quickstart-shaped directory; data/ is the tiny corpus."""
  wm = tmp_path_factory.mktemp("guide_wm")
  os.symlink(tiny_corpus, wm / "data")
  return str(wm)


@dataclasses.dataclass
class Page:
  """What the blocks of one page share: $OUT, $PORT and background processes."""
  out: str
  port: int
  background: list[tuple[str, subprocess.Popen, str]] = dataclasses.field(default_factory=list)
  ran: set[str] = dataclasses.field(default_factory=set)  # ids of the blocks run (or tried)

  def stop(self) -> None:
    for _, proc, _ in self.background:
      if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
          proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
          os.killpg(proc.pid, signal.SIGKILL)
          proc.wait()
    self.background.clear()

  def background_logs(self) -> str:
    parts = []
    for block_id, proc, log in self.background:
      with open(log, encoding="utf-8", errors="replace") as f:
        parts.append(f"--- background block {block_id} (exit status {proc.poll()}):\n"
                     f"{_tail(f.read(), 3000)}")
    return "\n".join(parts)


@pytest.fixture(scope="session")
def pages(tmp_path_factory):
  """page name -> its Page; a page's background processes stop when another
  page's block runs, and all of them at the end of the session."""
  state: dict[str, Page] = {}
  current = [None]

  def get(page: str) -> Page:
    if current[0] not in (None, page):
      state[current[0]].stop()
    current[0] = page
    if page not in state:
      state[page] = Page(str(tmp_path_factory.mktemp("guide_" + page.removesuffix(".md"))),
                         _free_port())
    return state[page]

  yield get
  for p in state.values():
    p.stop()


_MODELS = re.compile(r"\bWM\}?/(mdlm|ar)\b")


def snippet_env(request, block: Block, wm: str, page: Page) -> dict[str, str]:
  if block.slow or _MODELS.search(block.text):
    models = request.getfixturevalue("tiny_models")
    for name, workdir in models.items():
      if not os.path.exists(os.path.join(wm, name)):
        os.symlink(workdir, os.path.join(wm, name))
  env = dict(os.environ)  # with conftest's JAX_COMPILATION_CACHE_DIR
  env.update({
      "WM": wm, "OUT": page.out, "PORT": str(page.port),
      # `python` in a block is this interpreter.
      "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
      "PYTHONPATH": REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
      "PYTHONUNBUFFERED": "1",
  })
  env.pop("MDLM_WM_API_KEY", None)
  return env


def _tail(text: str, n: int = 6000) -> str:
  return text if len(text) <= n else "...\n" + text[-n:]


def earlier_blocks(block: Block, blocks: list[Block]) -> list[Block]:
  """What `block` may rely on: the runnable blocks before it on its page,
  in order; for a block that is not slow, only those that are not slow."""
  return [b for b in blocks if b.page == block.page and b.line < block.line and b.runnable
          and (block.slow or not b.slow)]


def run_in_page_order(block: Block, blocks: list[Block], page: Page, env_of, tmp_path) -> None:
  """Runs `block` after the earlier blocks of its page this session has not
  run yet (skipping those whose `needs` are not installed)."""
  for b in earlier_blocks(block, blocks):
    if b.id not in page.ran and all(importlib.util.find_spec(m) for m in b.needs):
      page.ran.add(b.id)
      run_block(b, env_of(b), page, tmp_path)
  page.ran.add(block.id)
  run_block(block, env_of(block), page, tmp_path)


def run_block(block: Block, env: dict[str, str], page: Page, tmp_path) -> None:
  """Runs one block from the repository root; fails the test with its output
  (and the page's background logs) if it exits non-zero."""
  name = f"{block.page.removesuffix('.md')}_{block.line}"
  if block.language == "bash":
    argv = ["bash", "-euo", "pipefail", "-c", block.text]
  else:
    script = tmp_path / f"{name}.py"
    script.write_text(block.text, encoding="utf-8")
    argv = [sys.executable, str(script)]
  if block.background:
    log = str(tmp_path / f"{name}.background.log")
    with open(log, "w", encoding="utf-8") as f:
      proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    page.background.append((block.id, proc, log))
    time.sleep(1)
    assert proc.poll() is None, f"{block.id} exited at once:\n{page.background_logs()}"
    return
  t0 = time.perf_counter()
  try:
    # errors="replace": `cut -c` in a block may split a multi-byte character.
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,
                          errors="replace", stdin=subprocess.DEVNULL,
                          timeout=SNIPPET_TIMEOUT_S, check=False)
  except subprocess.TimeoutExpired as e:
    stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr
    pytest.fail(f"docs/guide/{block.id} ran past {SNIPPET_TIMEOUT_S}s:\n{block.text}"
                f"--- stderr:\n{_tail(stderr or '')}\n{page.background_logs()}")
  seconds = time.perf_counter() - t0
  assert proc.returncode == 0, (
      f"docs/guide/{block.id} exited {proc.returncode} after {seconds:.0f}s\n"
      f"--- the block ({block.language}):\n{block.text}"
      f"--- stdout:\n{_tail(proc.stdout, 3000)}\n--- stderr:\n{_tail(proc.stderr)}\n"
      f"{page.background_logs()}")


@pytest.mark.parametrize("block", [_param(b) for b in RUNNABLE])
def test_guide_block_runs(block: Block, request, guide_wm, pages, tmp_path):
  for module in block.needs:
    pytest.importorskip(module)
  page = pages(block.page)
  run_in_page_order(block, RUNNABLE, page, lambda b: snippet_env(request, b, guide_wm, page),
                    tmp_path)


def test_a_block_alone_runs_the_earlier_blocks_of_its_page_first(tmp_path):
  writes = Block("p.md", 1, "bash", ("runnable",), 'echo made > "$OUT/made"\n')
  slow = Block("p.md", 5, "bash", ("runnable", "slow"), "exit 1\n")
  shown = Block("p.md", 9, "bash", ("runnable",), "exit 1\n")  # ran already: not again
  reads = Block("p.md", 13, "bash", ("runnable",), 'grep -q made "$OUT/made"\n')
  page = Page(str(tmp_path), 0, ran={shown.id})
  run_in_page_order(reads, [writes, slow, shown, reads], page,
                    lambda b: {**os.environ, "OUT": page.out}, tmp_path)
  assert page.ran == {writes.id, shown.id, reads.id}
  assert earlier_blocks(Block("p.md", 20, "bash", ("runnable", "slow"), ""),
                        [writes, slow, reads]) == [writes, slow, reads]
