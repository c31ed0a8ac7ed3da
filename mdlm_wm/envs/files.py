"""Files: a small in-memory file system behind a shell.

World. A home directory /home/user with 3-5 top-level directories (docs,
logs, src, archive, tmp, ...), some holding a subdirectory or two (2-4
levels), and 9-16 files with short contents: logs (`ERROR connection lost`),
csv tables, text notes, markdown lists, ini settings, python snippets and
.tmp scratch files. A few notes mention a distinctive keyword (`passport`,
`invoice`, ...), each in exactly one file. Hidden state: every node (path,
kind, content, an identity that survives `mv` but not `cp`), the working
directory, the steer's counters and whether the task's file was shown.

Actions are free-text shell commands: pwd, ls [path], cd [path], cat file,
mkdir [-p] dir, touch file, mv src dst, cp [-r] src dst, rm [-r] path,
grep [-r] pattern [path]. `~` expands to /home/user; there are no wildcards.
Errors copy GNU coreutils and bash (`ls: cannot access 'x': No such file or
directory`, `rm: cannot remove 'd': Is a directory`, `bash: foo: command not
found`) and a failed command changes nothing. Writing outside the home
directory is refused, and a directory holding the working directory is busy.

Tasks. move (move every .EXT file into ~/DIR), find_copy (copy the file that
mentions a keyword into ~/DIR), mkdirs (create a directory structure), clean
(delete every .tmp file), rename (rename one file) and show (cat the file that
mentions a keyword). `goal: k/n` counts the sub-goals reached over the whole
tree (one per file to move or delete, per directory to create, ...).

Observation. A next state is the command's output followed by the trailing
anchor, a status line whose values depend on the whole state after the
command:
  [cwd: /home/user/docs | entries: 5 (files: 3, dirs: 2) | exit: 0 | goal: 1/3]
`entries` counts the visible (not dot-named) contents of the working
directory, whatever directory the command listed. ls prints names sorted,
directories with a trailing `/`.

Hidden state and what the shell reveals. The tree's shape is drawn at reset
(the task and the expert need it); a file's content is drawn lazily, when a
command first reads it, from a stream keyed by (seed, hidden stream, content
key), and copies share their original's key. Every node records what the
outputs so far have shown of it: its existence and kind (`seen`), a
directory's every child (`listed`, as ls shows it) or its counts (`counted`,
as the status line shows the working directory's); contents printed whole
or searched for a pattern are remembered too ("shown" means anywhere in the
episode so far). A command whose every lookup was already known is
determined: its exit code, output and effects follow from what the earlier
states showed. Otherwise its output is revealed, its exit code too unless the
unknown lookups only shape the output (ls of a known directory, cat of a
known file), and so are the status facts it could change (the counts of a
directory it touches, the goal, trash and quota); the first counts of a
directory entered are revealed too. Files the shell created are taken as
known (new and empty). `fork_hidden` (the twin world) switches the content
stream and re-draws every unseen part of the tree (the unseen children of a
directory neither listed nor counted, keeping the task's files), so the twin
agrees with the original on everything shown; partly shown things (a file
searched but not printed, a directory counted but not listed) stay as they
are, which makes the twin a lenient test there, not the marking.

Checks (`FilesEnv.check`). Determined: the status line's form and every
unrevealed field, output line and exclusion. Revealed: the rest, reported
only. Constraints on what a prediction invents: counts that add up, the same
goal total, an exit code of the shell's set that agrees with the output, a
failed or read-only command that changes nothing, quota, trash and counts
that move as a mkdir/touch/rm must, a cd that lands on its target or stays, a
sorted listing of names of the world's form (and none of a file seen
elsewhere: the rules say names start unique), file contents of the world's
form for their extension, grep lines that hold the pattern.

Steers (each adds its own key before `goal`):
  - read-only disk: every write fails with `Read-only file system` (exit 1);
    the task is then always show, which needs no write (`disk: read-only`).
  - trash: rm moves its target into ~/.trash instead of deleting it
    (`trash: N` entries in the trash); tasks stay solvable.
  - quota: only N more files or directories can be created (`quota: N`);
    creating more fails with `Disk quota exceeded`, deleting frees space. N
    covers the task; the expert deletes its own junk when noise used it up.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import re
import shlex
from collections.abc import Callable

from mdlm_wm.checks import generic
from mdlm_wm.checks.result import FORMAT, CheckResult, parse_status_line
from mdlm_wm.data.schema import Checks, Spec, Step
from mdlm_wm.envs.base import Env, StepResult

HOME = "/home/user"
TRASH = HOME + "/.trash"

READONLY = ("The disk is mounted read-only: every command that would change a file or directory "
            "fails.")
TRASH_BIN = "rm does not delete anything: it moves files and directories into ~/.trash."
QUOTA = "The disk quota is nearly used up: only a few more files or directories can be created."

_DIR_NAMES = ("docs", "logs", "src", "archive", "tmp", "notes", "data", "reports",
              "backup", "music", "photos", "config", "build", "old", "drafts", "misc")
_SUB_NAMES = ("2023", "2024", "lib", "work", "personal", "scripts", "daily", "weekly",
              "extra", "images")
_BASES = {
    "log": ("app", "server", "error", "access", "debug", "install", "sync", "cron", "mail", "auth"),
    "csv": ("report", "sales", "users", "scores", "inventory", "expenses", "contacts", "grades"),
    "txt": ("notes", "ideas", "letter", "journal", "shopping", "reading", "quotes", "recipes",
            "plan", "memo"),
    "md": ("todo", "readme", "changelog", "summary", "agenda", "draft", "roadmap", "guide"),
    "ini": ("config", "settings", "db", "network", "display"),
    "py": ("main", "utils", "test", "setup", "parser", "worker"),
    "tmp": ("cache", "scratch", "session", "download", "swap", "buffer"),
}
_EXTS = tuple(sorted(_BASES))
# Preferred home of each kind of file; missing directories fall back to anywhere.
_HOMES = {"log": ("logs",), "csv": ("reports", "data"), "py": ("src", "build"), "tmp": ("tmp",),
          "md": ("docs", "notes", "drafts"), "txt": ("docs", "notes"), "ini": ("config",)}
_LOG_MSGS = ("service started", "disk usage at 81%", "connection lost", "user login ok",
             "backup finished", "retry in 5s", "cache cleared", "port 8080 open", "job queued",
             "timeout after 30s")
_CSV = {"item,qty": ("pen,4", "paper,10", "stamps,3", "tape,2"),
        "name,score": ("ana,91", "bob,78", "eve,85", "tom,66"),
        "day,amount": ("mon,120", "tue,95", "wed,130", "fri,80")}
_TXT_LINES = ("call the dentist on friday", "buy milk and eggs", "water the plants",
              "read two chapters", "fix the bike", "pay the rent", "email the team",
              "clean the garage")
_INI = ("port = 8080", "user = admin", "debug = false", "timeout = 30", "theme = dark")
_PY = ("print('hello')", "import os", "def run(): pass", "x = 42", "for i in range(3): pass")
_TMP = ("scratch 42", "temp data", "partial download", "lock 1", "session 7")
# Never a substring of any other content, so each marks exactly one file.
_KEYWORDS = ("invoice", "passport", "meeting", "deadline", "birthday", "holiday", "warranty",
             "contract", "interview", "vaccine", "concert", "mortgage", "wedding", "lottery")
_KEYWORD_LINES = ("remember the {}", "{} is on monday", "ask about the {}", "the {} is done")
_GREP_WORDS = ("ERROR", "WARN", "port", "milk")
_NEW_DIRS = ("important", "keep", "shared", "inbox")
_PROJECT_PARENTS = ("projects", "work", "site", "course")
_PROJECTS = ("alpha", "beta", "gamma", "web", "api", "blog", "game", "thesis")
_PROJECT_SUBS = ("src", "tests", "docs", "assets", "data", "notes")
_RENAME_SUFFIXES = ("old", "final", "v2", "2024", "backup", "copy")
_BAD_COMMANDS = ("dir", "del", "copy", "move", "list", "show", "open", "type", "edit", "cls")
_KNOWN = ("pwd", "ls", "cd", "cat", "mkdir", "touch", "mv", "cp", "rm", "grep")
_FLAGS = {"mkdir": "p", "cp": "rR", "rm": "rR", "grep": "rR"}
_SILENT = ("cd", "mkdir", "touch", "mv", "cp", "rm")
_WRITES = ("mkdir", "touch", "mv", "cp", "rm")
# Lookups that shape only a command's output or counters, never its exit code: the
# children ls prints, the content cat prints, the space and trash entries rm frees.
_OUTPUT_ONLY = {"ls": ("children",), "cat": ("content",), "rm": ("subtree", "children")}
_COUNTS = ("entries", "files", "dirs")
_TASK_KINDS = ("move", "find_copy", "mkdirs", "clean", "rename", "show")
_TASK_WEIGHTS = (3, 3, 2, 2, 2, 1)


# --------------------------------------------------------------------------
# Paths: plain strings, always absolute and normalized inside the simulator.


def _parent(path: str) -> str:
  return path.rsplit("/", 1)[0] or "/"


def _base(path: str) -> str:
  return path.rsplit("/", 1)[1]


def _join(directory: str, name: str) -> str:
  return directory.rstrip("/") + "/" + name


def _within(path: str, root: str) -> bool:
  return root == "/" or path == root or path.startswith(root + "/")


def _normalize(cwd: str, arg: str) -> str:
  """Lexical resolution of `arg` against `cwd` (`.`, `..`, absolute paths)."""
  parts = [] if arg.startswith("/") else [p for p in cwd.split("/") if p]
  for part in arg.split("/"):
    if part in ("", "."):
      continue
    if part == "..":
      if parts:
        parts.pop()
    else:
      parts.append(part)
  return "/" + "/".join(parts)


def _expand(token: str) -> str:
  """The shell's tilde expansion: `~` and `~/x` name the home directory."""
  if token == "~":
    return HOME
  if token.startswith("~/"):
    return HOME + token[1:]
  return token


def _tokens(action: str) -> list[str] | None:
  """Shell words after tilde expansion; None when the quoting is broken."""
  try:
    return [_expand(t) for t in shlex.split(action)]
  except ValueError:
    return None


def _split_args(words: list[str]) -> tuple[str, list[str]]:
  """Option letters (from `-xy` words) and operands, in order."""
  flags = "".join(w[1:] for w in words if w.startswith("-") and len(w) > 1)
  return flags, [w for w in words if not (w.startswith("-") and len(w) > 1)]


# --------------------------------------------------------------------------
# The file system.


@dataclasses.dataclass
class _Node:
  """A file or directory. `ident` survives mv but not cp, so moved originals can be found;
  `key` names a file's content (None: empty), shared by its copies.

  What the outputs so far have shown: `seen` (existence and kind), `listed`
  (a directory's every child) and `counted` (its file and directory counts).
  """
  is_dir: bool
  key: str | None = None
  ident: int = -1
  seen: bool = False
  listed: bool = False
  counted: bool = False


class _FileSystem:
  """Nodes by absolute path; every walk goes through sorted paths for determinism.

  While `blind` is a list (during a command), every lookup whose answer the
  earlier outputs had not shown is appended to it: an empty list afterwards
  means the command's outcome was determined. `changed` collects the
  directories whose children a mutation changed.
  """

  def __init__(self):
    self.nodes: dict[str, _Node] = {}
    self._next_ident = 0
    self.blind: list[str] | None = None
    self.changed: set[str] = set()
    for path in ("/", "/home", HOME):
      self.add(path, True)

  def add(self, path: str, is_dir: bool, key: str | None = None) -> _Node:
    node = self.nodes[path] = _Node(is_dir, key, self._next_ident)
    self._next_ident += 1
    self.changed.add(_parent(path))
    return node

  # Lookups a command makes (recorded while watching).

  def note(self, known: Callable[[], bool], what: str) -> None:
    if self.blind is not None and not known():
      self.blind.append(what)

  def get(self, path: str) -> _Node | None:
    self.note(lambda: self.knows(path), f"status:{path}")
    return self.nodes.get(path)

  def exists(self, path: str) -> bool:
    return self.get(path) is not None

  def is_dir(self, path: str) -> bool:
    node = self.get(path)
    return node is not None and node.is_dir

  def is_file(self, path: str) -> bool:
    node = self.get(path)
    return node is not None and not node.is_dir

  def children(self, path: str) -> list[str]:
    node = self.nodes.get(path)
    self.note(lambda: node.listed if node is not None else self.knows(path), f"children:{path}")
    return self._children(path)

  def subtree(self, path: str) -> list[str]:
    self.note(lambda: self.knows_subtree(path), f"subtree:{path}")
    return self._subtree(path)

  def missing_reason(self, path: str) -> str:
    """Why `path` cannot be reached: a file in the way, or plain absence."""
    probe = _parent(path)
    while probe != "/":
      if self.is_file(probe):
        return "Not a directory"
      probe = _parent(probe)
    return "No such file or directory"

  # What the outputs so far have shown.

  def knows(self, path: str) -> bool:
    """Whether the outputs so far show what `path` is: a node seen, or an absence
    below a listed directory or a seen file."""
    node = self.nodes.get(path)
    if node is not None:
      return node.seen
    probe = _parent(path)
    while probe not in self.nodes:
      probe = _parent(probe)
    above = self.nodes[probe]
    return above.seen and (above.listed or not above.is_dir)

  def knows_subtree(self, path: str) -> bool:
    node = self.nodes.get(path)
    if node is None or not node.is_dir:
      return self.knows(path)
    return node.seen and node.listed and all(self.knows_subtree(c) for c in self._children(path))

  def see(self, path: str) -> None:
    """Marks `path` and every directory above it as shown."""
    while path in self.nodes and not self.nodes[path].seen:
      self.nodes[path].seen = True
      path = _parent(path)

  # Unrecorded access: the simulator's own bookkeeping, policies and mutations.

  def _children(self, path: str) -> list[str]:
    return [p for p in sorted(self.nodes) if p != "/" and _parent(p) == path]

  def _subtree(self, path: str) -> list[str]:
    return [p for p in sorted(self.nodes) if _within(p, path)]

  def node(self, path: str) -> _Node | None:
    return self.nodes.get(path)

  def files(self) -> list[tuple[str, _Node]]:
    return [(p, n) for p, n in sorted(self.nodes.items()) if not n.is_dir]

  def count_under(self, root: str) -> int:
    return sum(1 for p in self.nodes if p != root and _within(p, root))

  def remove(self, path: str) -> None:
    self.changed.add(_parent(path))
    for p in self._subtree(path):
      del self.nodes[p]

  def move(self, src: str, dst: str) -> None:
    if dst in self.nodes:
      self.remove(dst)
    self.changed.update((_parent(src), _parent(dst)))
    for p in self._subtree(src):
      self.nodes[dst + p[len(src):]] = self.nodes.pop(p)

  def copy(self, src: str, dst: str) -> None:
    """Copies share content keys and carry what was shown of their originals."""
    for p in self._subtree(src):
      node = self.nodes[p]
      new = self.add(dst + p[len(src):], node.is_dir, node.key)
      new.seen, new.listed, new.counted = node.seen, node.listed, node.counted


# --------------------------------------------------------------------------
# World and task generation.


def _content(rng: random.Random, ext: str) -> str:
  if ext == "log":
    msgs = rng.sample(_LOG_MSGS, rng.randint(1, 2))
    return "\n".join(f"{lvl} {m}" for lvl, m in zip(rng.sample(("INFO", "WARN", "ERROR"), 2), msgs))
  if ext == "csv":
    header = rng.choice(sorted(_CSV))
    return "\n".join([header] + rng.sample(_CSV[header], rng.randint(1, 2)))
  if ext == "txt":
    return "\n".join(rng.sample(_TXT_LINES, rng.randint(1, 2)))
  if ext == "md":
    return "# Notes\n- " + rng.choice(_TXT_LINES)
  if ext == "ini":
    return "[main]\n" + rng.choice(_INI)
  if ext == "py":
    return rng.choice(_PY)
  return rng.choice(_TMP)


def _build_dirs(rng: random.Random, fs: _FileSystem) -> list[str]:
  """3-5 top-level directories, some nested up to two more levels."""
  dirs = []
  subs = rng.sample(_SUB_NAMES, len(_SUB_NAMES))
  for name in rng.sample(_DIR_NAMES, rng.randint(3, 5)):
    path = _join(HOME, name)
    dirs.append(path)
    depth = 0
    while depth < 2 and rng.random() < (0.45 if depth == 0 else 0.35):
      path = _join(path, subs.pop())
      dirs.append(path)
      depth += 1
  for path in dirs:
    fs.add(path, True)
  return dirs


def _build_files(rng: random.Random, fs: _FileSystem, dirs: list[str]) -> list[str]:
  """9-16 uniquely named files; at least three notes, two logs and two .tmp files.

  Each file's content key is its path at reset; the content itself is drawn
  when a command first reads it (FilesEnv._content)."""
  exts = ["txt", "md", rng.choice(("txt", "md")), "log", "log", "tmp", "tmp"]
  exts += rng.choices(_EXTS, weights=(2, 2, 2, 2, 1, 1, 2), k=rng.randint(2, 9))
  used: dict[str, list[str]] = {ext: [] for ext in _EXTS}
  paths = []
  for ext in exts:
    free = [b for b in _BASES[ext] if b not in used[ext]]
    if not free:
      continue
    base = rng.choice(free)
    used[ext].append(base)
    preferred = [d for d in dirs if _base(d) in _HOMES[ext]]
    where = rng.choice(preferred if preferred and rng.random() < 0.65 else [HOME] + dirs)
    path = _join(where, f"{base}.{ext}")
    fs.add(path, False, path)
    paths.append(path)
  return sorted(paths)


def _plant_keywords(rng: random.Random, files: list[str]) -> dict[str, str]:
  """Picks 2-4 notes to mention a distinct keyword each; returns keyword -> path
  (the path is also the note's content key)."""
  notes = [p for p in files if p.endswith((".txt", ".md"))]
  chosen = rng.sample(notes, min(len(notes), rng.randint(2, 4)))
  return dict(zip(rng.sample(_KEYWORDS, len(chosen)), chosen))


def _draw_content(rng: random.Random, ext: str, keyword: str | None) -> str:
  """A file's content; a keyword note's last line mentions its keyword."""
  text = _content(rng, ext)
  if keyword is None:
    return text
  lines = text.split("\n")
  lines[-1] = rng.choice(_KEYWORD_LINES).format(keyword)
  return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class _Item:
  """A file the task is about, as it was at reset (its content by key: copies count)."""
  path: str
  ident: int
  key: str

  @property
  def name(self) -> str:
    return _base(self.path)


@dataclasses.dataclass
class _Task:
  kind: str
  text: str
  items: tuple[_Item, ...] = ()
  dest: str = ""
  targets: tuple[str, ...] = ()
  keyword: str = ""
  new_path: str = ""
  use_p: bool = False


def _display(path: str) -> str:
  return "~" + path[len(HOME):] if _within(path, HOME) else path


def _item(fs: _FileSystem, path: str) -> _Item:
  node = fs.nodes[path]
  return _Item(path, node.ident, node.key)


def _task_move(rng, fs, dirs, files, planted) -> _Task | None:
  dest_names = {"log": ("archive",), "csv": ("reports", "archive", "backup"),
                "md": ("archive", "old", "backup"), "txt": ("archive", "old", "backup")}
  options = []
  for ext in sorted(dest_names):
    for name in dest_names[ext]:
      dest = _join(HOME, name)
      found = [p for p in files if p.endswith("." + ext) and not _within(p, dest)]
      if len(found) >= 2 and not fs.is_file(dest):
        options.append((ext, dest, found))
  if not options:
    return None
  ext, dest, found = rng.choice(options)
  return _Task("move", f"Move every .{ext} file into {_display(dest)}.",
               items=tuple(_item(fs, p) for p in found), dest=dest)


def _task_find_copy(rng, fs, dirs, files, planted) -> _Task:
  word = rng.choice(sorted(planted))
  src = planted[word]
  options = [d for d in dirs if d != _parent(src)]
  if rng.random() < 0.3 or not options:
    options = [_join(HOME, n) for n in _NEW_DIRS]
  dest = rng.choice(options)
  text = f"Find the file that mentions '{word}' and copy it into {_display(dest)}."
  return _Task("find_copy", text,
               items=(_item(fs, src),), dest=dest, keyword=word)


def _task_mkdirs(rng, fs, dirs, files, planted) -> _Task:
  tops = [d for d in dirs if _parent(d) == HOME]
  free = [_join(HOME, n) for n in _PROJECT_PARENTS if _join(HOME, n) not in fs.nodes]
  parent = rng.choice(tops if rng.random() < 0.4 else free)
  if rng.random() < 0.6:
    parent = _join(parent, rng.choice(_PROJECTS))
  subs = sorted(rng.sample(_PROJECT_SUBS, rng.randint(2, 3)))
  targets = tuple(_join(parent, s) for s in subs)
  names = ", ".join(_display(t) for t in targets[:-1]) + " and " + _display(targets[-1])
  return _Task("mkdirs", f"Create the directories {names}.", targets=targets,
               use_p=rng.random() < 0.5)


def _task_clean(rng, fs, dirs, files, planted) -> _Task:
  found = [p for p in files if p.endswith(".tmp")]
  return _Task("clean", "Delete every .tmp file under ~.", items=tuple(_item(fs, p) for p in found))


def _task_rename(rng, fs, dirs, files, planted) -> _Task:
  src = rng.choice([p for p in files if not p.endswith(".tmp")])
  base, ext = _base(src).rsplit(".", 1)
  new = _join(_parent(src), f"{base}-{rng.choice(_RENAME_SUFFIXES)}.{ext}")
  return _Task("rename", f"Rename {_display(src)} to {_display(new)}.",
               items=(_item(fs, src),), new_path=new)


def _task_show(rng, fs, dirs, files, planted) -> _Task:
  word = rng.choice(sorted(planted))
  return _Task("show", f"Print the contents of the file that mentions '{word}'.",
               items=(_item(fs, planted[word]),), keyword=word)


_TASK_BUILDERS = {"move": _task_move, "find_copy": _task_find_copy, "mkdirs": _task_mkdirs,
                  "clean": _task_clean, "rename": _task_rename, "show": _task_show}


# --------------------------------------------------------------------------
# Command results.


@dataclasses.dataclass
class _Out:
  """A command's printed lines, exit code and the entities its text must show, with
  what the output reveals: paths shown to exist, the directory listed, content keys
  printed whole or searched for `pattern`, and whether the goal's change is known."""
  lines: list[str]
  code: int = 0
  include: tuple[str, ...] = ()
  seen: tuple[str, ...] = ()
  listed: str = ""
  read: tuple[str, ...] = ()
  scanned: tuple[str, ...] = ()
  pattern: str = ""
  goal_known: bool = True


def _err(code: int, *lines: str) -> _Out:
  return _Out(list(lines), code, include=(lines[0],))


def _usage(cmd: str, message: str) -> _Out:
  hint = f"Try '{cmd} --help' for more information."
  return _err(2 if cmd in ("ls", "grep") else 1, message, hint)


class FilesEnv(Env):
  """A home directory behind a shell; tasks reshape the tree."""

  name = "files"
  max_steps = 30
  steers = (READONLY, TRASH_BIN, QUOTA)

  def reset(self, seed: int, steer: str | None = None) -> tuple[Spec, str]:
    steer = self.resolve_steer(seed, steer)
    self._steer = steer
    self._seed = seed
    self._stream = "world"
    rng = random.Random(f"{self.name}/{seed}")
    self._fs = _FileSystem()
    dirs = _build_dirs(rng, self._fs)
    files = _build_files(rng, self._fs, dirs)
    planted = _plant_keywords(rng, files)
    self._keywords = {path: word for word, path in planted.items()}
    self._drawn: dict[str, str] = {}
    self._full: set[str] = set()
    self._checked: dict[str, set[str]] = {}
    self._initial_idents = self._fs._next_ident
    self._task = self._make_task(random.Random(f"{self.name}/{seed}/task"), dirs, files, planted)
    self._cwd = HOME
    self._searched = False
    self._shown = False
    if steer == TRASH_BIN:
      self._fs.add(TRASH, True)
    self._quota_limit = self._fs.count_under(HOME) + self._quota_need() + rng.randint(0, 2)
    self._show_start()
    listing = self._ls_names(HOME)
    obs = f"Shell started in {HOME}.\n" + ("  ".join(listing) + "\n" if listing else "")
    obs += self._status(self._fields(0))
    spec = Spec(initial_state=obs, task=self._task.text, tools=(), rules=self._rules(), steer=steer)
    return spec, obs

  def _show_start(self) -> None:
    """What the first state and the spec show: the home listing, the trash the rules
    name, and the file a rename task names."""
    fs = self._fs
    for path in ("/home", HOME, TRASH):
      if path in fs.nodes:
        fs.see(path)
    for path in (HOME, TRASH):
      if path in fs.nodes:
        fs.nodes[path].listed = fs.nodes[path].counted = True
    for path in fs._children(HOME):
      fs.see(path)
    if self._task.kind == "rename":
      fs.see(self._task.items[0].path)

  def _content(self, key: str | None) -> str:
    """A file's content, drawn when first read from the current hidden stream."""
    if key is None:
      return ""
    if key not in self._drawn:
      rng = random.Random(f"{self.name}/{self._seed}/{self._stream}/content/{key}")
      self._drawn[key] = _draw_content(rng, key.rsplit(".", 1)[1], self._keywords.get(key))
    return self._drawn[key]

  def _make_task(self, rng: random.Random, dirs, files, planted) -> _Task:
    """Draws a task kind; a read-only disk only allows show, which writes nothing.

    A move needs two files of one kind outside its directory; a world without
    them gets a clean task instead (every world has two .tmp files).
    """
    kind = "show" if self._steer == READONLY else rng.choices(_TASK_KINDS, _TASK_WEIGHTS)[0]
    task = _TASK_BUILDERS[kind](rng, self._fs, dirs, files, planted)
    return task or _task_clean(rng, self._fs, dirs, files, planted)

  def _quota_need(self) -> int:
    """How many nodes the task must create: the quota steer always leaves room for them."""
    task = self._task
    need = set()
    if task.kind in ("move", "find_copy"):
      need.update(self._missing_chain(task.dest))
    if task.kind == "find_copy":
      need.add(_join(task.dest, task.items[0].name))
    for target in task.targets:
      need.update(self._missing_chain(target))
    return len(need)

  def _missing_chain(self, path: str) -> list[str]:
    chain = []
    while not self._fs.exists(path):
      chain.append(path)
      path = _parent(path)
    return chain[::-1]

  def _rules(self) -> tuple[str, ...]:
    rules = [
        "Commands: pwd, ls [path], cd [path], cat file, mkdir [-p] dir, touch file, mv src dst, "
        "cp [-r] src dst, rm [-r] path, grep [-r] pattern [path]. ~ is /home/user; no wildcards.",
        "ls prints names sorted, directories with a trailing /, and hides names starting with a "
        "dot. At the start no two files in ~ share a name.",
        "Errors follow bash and GNU coreutils; a failed command changes nothing. Writing outside "
        "/home/user is not permitted and a directory holding the working directory is busy.",
        "Every output ends with [cwd: DIR | entries: N (files: F, dirs: D) | exit: CODE | "
        "goal: K/T]: "
        "entries counts the visible contents of the working directory after the command, goal "
        "the parts of the task done.",
    ]
    if self._task.kind == "show":
      rules.append("Only cat counts as printing a file.")
    rules.append({
        "": "The disk is healthy: every command behaves normally.",
        READONLY: "Every write fails with 'Read-only file system' (exit 1); the status shows "
                  "disk: read-only.",
        TRASH_BIN: "rm moves its target into ~/.trash (replacing an entry of the same name); the "
                   "status shows trash: N, the entries in ~/.trash.",
        QUOTA: "The status shows quota: N, how many more files or directories may be created; "
               "creating more fails with 'Disk quota exceeded', deleting frees space.",
    }[self._steer])
    return tuple(rules)

  # ------------------------------------------------------------------------
  # Observation: the trailing status line and the checks derived from state.

  def _visible(self, path: str) -> list[str]:
    return [p for p in self._fs.children(path) if not _base(p).startswith(".")]

  def _ls_names(self, path: str) -> list[str]:
    # The children lookup in _visible already records whether the listing was known.
    return [_base(p) + ("/" if self._fs.node(p).is_dir else "") for p in self._visible(path)]

  def _quota_left(self) -> int:
    return max(0, self._quota_limit - self._fs.count_under(HOME))

  def _fields(self, code: int) -> dict[str, str]:
    kids = self._visible(self._cwd)
    dirs = sum(1 for p in kids if self._fs.is_dir(p))
    done, total = self._progress()
    fields = {"cwd": self._cwd, "entries": str(len(kids)), "files": str(len(kids) - dirs),
              "dirs": str(dirs), "exit": str(code)}
    if self._steer == READONLY:
      fields["disk"] = "read-only"
    elif self._steer == TRASH_BIN:
      fields["trash"] = str(len(self._fs.children(TRASH)))
    elif self._steer == QUOTA:
      fields["quota"] = str(self._quota_left())
    fields["goal"] = f"{done}/{total}"
    return fields

  @staticmethod
  def _status(f: dict[str, str]) -> str:
    extra = "".join(f" | {k}: {f[k]}" for k in ("disk", "trash", "quota") if k in f)
    return (f"[cwd: {f['cwd']} | entries: {f['entries']} (files: {f['files']}, dirs: {f['dirs']})"
            f" | exit: {f['exit']}{extra} | goal: {f['goal']}]")

  # ------------------------------------------------------------------------
  # Goal.

  def _outside_trash(self, path: str) -> bool:
    return not _within(path, TRASH)

  def _named(self, name: str) -> list[str]:
    return [p for p, _ in self._fs.files() if _base(p) == name and self._outside_trash(p)]

  def _holds(self, path: str, key: str) -> bool:
    node = self._fs.node(path)
    return node is not None and not node.is_dir and node.key == key

  def _conditions(self) -> list[bool]:
    task = self._task
    if task.kind == "move":
      return [self._holds(_join(task.dest, it.name), it.key)
              and not self._strays(it) for it in task.items]
    if task.kind == "find_copy":
      it = task.items[0]
      return [self._holds(_join(task.dest, it.name), it.key), self._holds(it.path, it.key)]
    if task.kind == "mkdirs":
      return [self._fs.is_dir(t) for t in task.targets]
    if task.kind == "clean":
      return [not self._named(it.name) for it in task.items]
    if task.kind == "rename":
      it = task.items[0]
      return [self._holds(task.new_path, it.key), it.path not in self._fs.nodes]
    return [self._shown]

  def _strays(self, it: _Item) -> list[str]:
    """Files of a move task's name still outside the destination tree."""
    return [p for p in self._named(it.name) if not _within(p, self._task.dest)]

  def _progress(self) -> tuple[int, int]:
    conds = self._conditions()
    return sum(conds), len(conds)

  # ------------------------------------------------------------------------
  # Stepping.

  def step(self, action: str) -> StepResult:
    fs = self._fs
    words = _tokens(action) or [""]
    touched = self._touched(words) if words[0] in _WRITES else set()
    fs.changed, fs.blind = set(), []
    out = self._run(action)
    blind, fs.blind = fs.blind, None
    determined = not blind
    exit_known = all(b.split(":", 1)[0] in _OUTPUT_ONLY.get(words[0], ()) for b in blind)
    self._note_goal_events(action, out)
    done_n, total = self._progress()
    success = done_n == total
    fields = self._fields(out.code)
    revealed = self._revealed_fields(words[0], out, determined, exit_known, touched, fields)
    if not determined:
      revealed += [s for s in dict.fromkeys(out.include) if s not in fields]
    exclude = self._exclusions(out.listed, determined) if out.listed else ()
    self._learn(out, determined)
    text = "\n".join(out.lines + [self._status(fields)])
    checks = Checks(must_include=out.include, must_exclude=exclude, fields=fields,
                    revealed=tuple(revealed))
    return StepResult(text, 1.0 if success else 0.0, success, checks, out.code == 0,
                      {"success": success, "exit": out.code})

  def _revealed_fields(self, cmd: str, out: _Out, determined: bool, exit_known: bool,
                       touched: set[str], fields: dict[str, str]) -> list[str]:
    """Status facts the earlier outputs did not imply (module docstring). Called
    before `_learn`, so the nodes' flags still say what s_t and before showed;
    `exit_known`: every lookup the exit code depends on was known; `touched`: the
    directories a write could change (`_touched`)."""
    keys = [] if exit_known else ["exit"]
    if cmd == "cd":
      if not determined:
        keys += ["cwd", *_COUNTS]
      elif not self._counts_known(self._cwd):
        keys += _COUNTS
    if cmd in _WRITES and not determined:
      if self._cwd in touched:
        keys += _COUNTS
      keys += [k for k in ("trash", "quota") if k in fields]
    if self._goal_revealed(cmd, out, determined):
      keys.append("goal")
    return keys

  def _counts_known(self, path: str) -> bool:
    node = self._fs.node(path)
    return node.listed or node.counted

  def _touched(self, words: list[str]) -> set[str]:
    """Directories whose children a write with these operands could change: each
    operand's parent; a mv/cp destination known to be a directory (or written
    with a trailing /) instead of its parent; every level of a mkdir -p."""
    cmd, (flags, ops) = words[0], _split_args(words[1:])
    out = {TRASH}
    for i, arg in enumerate(ops):
      path = self._resolve(arg)
      node = self._fs.node(path)
      into = cmd in ("mv", "cp") and i == 1 and (
          arg.endswith("/") or (node is not None and node.seen and node.is_dir))
      out.add(path if into else _parent(path))
      while cmd == "mkdir" and "p" in flags and path != "/":
        path = _parent(path)
        out.add(path)
    return out

  def _goal_revealed(self, cmd: str, out: _Out, determined: bool) -> bool:
    """A write whose outcome was unknown may change the goal (show's goal only moves
    on cat); a known write or a cat may still touch files whose part in the task
    the outputs have not shown (`_Out.goal_known`)."""
    if self._task.kind == "show":
      return cmd == "cat" and not determined and not (out.code == 0 and out.goal_known)
    return cmd in _WRITES and not (determined and out.goal_known)

  def _identity_known(self, key: str | None) -> bool:
    """Whether the outputs show if content `key` is the file that mentions the task's
    keyword: it was printed or searched for the keyword, or that file was found
    (the task speaks of one file). Other tasks name their files by name."""
    word = self._task.keyword
    if not word or key is None:
      return True

    def shown(k):
      return k in self._full or word in self._checked.get(k, ())
    return shown(key) or shown(self._task.items[0].key)

  def _goal_known(self, paths: list[str]) -> bool:
    """Whether moving, copying or removing these paths changes the goal in a way the
    outputs imply: their whole subtrees shown, and each file's part in the task."""
    fs = self._fs
    return all(fs.knows_subtree(p) and all(self._identity_known(fs.nodes[q].key)
                                           for q in fs._subtree(p)) for p in paths)

  def _exclusions(self, path: str, determined: bool) -> tuple[str, ...]:
    """Up to three names this listing lacks that earlier outputs and the rules imply:
    hidden names here (ls hides them) and files seen elsewhere, any when the listing
    itself is known, else those no other file shares (names start unique and the
    outputs showed every copy since)."""
    shown = [n.rstrip("/") for n in self._ls_names(path)] + [self._cwd]
    fs = self._fs
    counts = collections.Counter(_base(p) for p, _ in fs.files())
    pool = {_base(p) for p in fs._children(path) if _base(p).startswith(".")}
    pool |= {_base(p) for p, n in fs.files()
             if n.seen and _parent(p) != path and (determined or counts[_base(p)] == 1)}
    pool = [n for n in sorted(pool) if not any(n in s for s in shown)]
    return tuple(pool[::max(1, len(pool) // 3)][:3])

  def _learn(self, out: _Out, determined: bool) -> None:
    """Records what this step's output showed (after its facts were marked)."""
    fs = self._fs
    for path in out.seen:
      fs.see(path)
    if out.listed:
      node = fs.nodes[out.listed]
      node.listed = node.counted = True
      for child in self._visible(out.listed):
        fs.see(child)
    self._full.update(out.read)
    for key in out.scanned:
      self._checked.setdefault(key, set()).add(out.pattern)
    for path in fs.changed:
      node = fs.node(path)
      if node is None or not node.is_dir:
        continue
      node.counted = node.counted and determined
      node.listed = node.listed and all(fs.nodes[c].seen for c in fs._children(path))
    # A path that is shown to exist shows its directories too (e.g. after mv into one).
    for path in [p for p, n in fs.nodes.items() if n.seen]:
      fs.see(_parent(path))
    fs.see(self._cwd)
    fs.nodes[self._cwd].counted = True

  def _note_goal_events(self, action: str, out: _Out) -> None:
    """Records a successful search for, or cat of, the task's keyword file."""
    words = _tokens(action) or [""]
    word = self._task.keyword
    if out.code != 0 or not word:
      return
    if words[0] == "grep" and word in _split_args(words[1:])[1][:1]:
      self._searched = True
    if words[0] == "cat" and any(word in line for line in out.lines):
      self._shown = True

  def _run(self, action: str) -> _Out:
    words = _tokens(action)
    if words is None:
      return _err(2, "bash: syntax error: unterminated quoted string")
    if not words:
      return _Out([])
    cmd, rest = words[0], words[1:]
    if cmd not in _KNOWN:
      return _err(127, f"bash: {cmd}: command not found")
    flags, ops = _split_args(rest)
    bad = [c for c in flags if c not in _FLAGS.get(cmd, "")]
    if bad:
      if cmd in ("cd", "pwd"):
        return _err(2, f"bash: {cmd}: -{bad[0]}: invalid option")
      return _usage(cmd, f"{cmd}: invalid option -- '{bad[0]}'")
    return getattr(self, f"_cmd_{cmd}")(flags, ops)

  def _resolve(self, arg: str) -> str:
    return _normalize(self._cwd, arg)

  def _arity(self, cmd: str, ops: list[str], low: int, high: int, missing: str) -> _Out | None:
    if len(ops) < low:
      if cmd in ("mv", "cp") and ops:
        return _usage(cmd, f"{cmd}: missing destination file operand after '{ops[0]}'")
      return _usage(cmd, missing)
    if len(ops) > high:
      if cmd == "cd":
        return _err(1, "bash: cd: too many arguments")
      return _usage(cmd, f"{cmd}: extra operand '{ops[high]}'")
    return None

  def _denied(self, *paths: str) -> bool:
    return any(not _within(p, HOME) or p == HOME for p in paths)

  def _busy(self, path: str) -> bool:
    return _within(self._cwd, path) or _within(HOME, path)

  def _over_quota(self, new_nodes: int) -> bool:
    return self._steer == QUOTA and new_nodes > self._quota_left()

  def _refuse(self, fail: str, paths: tuple[str, ...], new_nodes: int = 0) -> _Out | None:
    """The write's last hurdles, after its own checks: the disk, permissions, the quota."""
    if self._steer == READONLY:
      return _err(1, f"{fail}: Read-only file system")
    if self._denied(*paths):
      return _err(1, f"{fail}: Permission denied")
    if self._over_quota(new_nodes):
      return _err(1, f"{fail}: Disk quota exceeded")
    return None

  def _cmd_pwd(self, flags: str, ops: list[str]) -> _Out:
    return _Out([self._cwd], include=(self._cwd,))

  def _cmd_ls(self, flags: str, ops: list[str]) -> _Out:
    if bad := self._arity("ls", ops, 0, 1, ""):
      return bad
    path = self._resolve(ops[0]) if ops else self._cwd
    node = self._fs.get(path)
    if node is None:
      return _err(2, f"ls: cannot access '{ops[0]}': No such file or directory")
    if not node.is_dir:
      return _Out([ops[0]], include=(ops[0],), seen=(path,))
    names = self._ls_names(path)
    return _Out(["  ".join(names)] if names else [], include=tuple(names), seen=(path,),
                listed=path)

  def _cmd_cd(self, flags: str, ops: list[str]) -> _Out:
    if bad := self._arity("cd", ops, 0, 1, ""):
      return bad
    path = self._resolve(ops[0]) if ops else HOME
    node = self._fs.get(path)
    if node is None:
      return _err(1, f"bash: cd: {ops[0]}: {self._fs.missing_reason(path)}")
    if not node.is_dir:
      return _err(1, f"bash: cd: {ops[0]}: Not a directory")
    self._cwd = path
    return _Out([])

  def _read(self, key: str | None, pattern: str = "") -> str:
    """A file's content as a command reads it; known when printed whole before (or,
    for a search, searched for the same pattern)."""
    self._fs.note(lambda: key is None or key in self._full
                  or (pattern and pattern in self._checked.get(key, ())), f"content:{key}")
    return self._content(key)

  def _cmd_cat(self, flags: str, ops: list[str]) -> _Out:
    if bad := self._arity("cat", ops, 1, 1, "cat: missing file operand"):
      return bad
    path = self._resolve(ops[0])
    node = self._fs.get(path)
    if node is None:
      return _err(1, f"cat: {ops[0]}: {self._fs.missing_reason(path)}")
    if node.is_dir:
      return _err(1, f"cat: {ops[0]}: Is a directory")
    found = not self._fs.blind and self._identity_known(node.key)
    text = self._read(node.key)
    lines = text.split("\n") if text else []
    return _Out(lines, include=tuple(lines), seen=(path,), read=(node.key,) if node.key else (),
                goal_known=found)

  def _cmd_grep(self, flags: str, ops: list[str]) -> _Out:
    recursive = bool(flags)
    if len(ops) < (1 if recursive else 2):
      return _err(2, "Usage: grep [OPTION]... PATTERNS [FILE]...",
                  "Try 'grep --help' for more information.")
    if bad := self._arity("grep", ops, 1, 2, ""):
      return bad
    pattern = ops[0]
    root = self._resolve(ops[1]) if len(ops) > 1 else self._cwd
    node = self._fs.get(root)
    if node is None:
      return _err(2, f"grep: {ops[1]}: {self._fs.missing_reason(root)}")
    if node.is_dir and not recursive:
      return _err(2, f"grep: {ops[1]}: Is a directory")
    if not node.is_dir:
      files, prefix = [root], None
    else:
      files = [p for p in self._fs.subtree(root) if not self._fs.nodes[p].is_dir]
      prefix = ops[1].rstrip("/") + "/" if len(ops) > 1 else ""
    lines, seen = [], [root]
    for p in files:
      found = [line for line in self._read(self._fs.nodes[p].key, pattern).split("\n")
               if pattern in line]
      lines += found if prefix is None else [f"{prefix}{p[len(root):].lstrip('/')}:{line}"
                                             for line in found]
      seen += [p] if found else []
    keys = tuple(k for k in (self._fs.nodes[p].key for p in files) if k)
    return _Out(lines, 0 if lines else 1, include=tuple(lines), seen=tuple(seen), scanned=keys,
                pattern=pattern)

  def _cmd_mkdir(self, flags: str, ops: list[str]) -> _Out:
    if bad := self._arity("mkdir", ops, 1, 1, "mkdir: missing operand"):
      return bad
    path = self._resolve(ops[0])
    fail = f"mkdir: cannot create directory '{ops[0]}'"
    if self._fs.exists(path):
      if "p" in flags and self._fs.is_dir(path):
        return _Out([], seen=(path,))
      return _err(1, f"{fail}: File exists")
    chain = self._missing_chain(path)
    if len(chain) > 1 and "p" not in flags:
      return _err(1, f"{fail}: No such file or directory")
    if not self._fs.is_dir(_parent(chain[0])):
      return _err(1, f"{fail}: Not a directory")
    if refused := self._refuse(fail, (path,), len(chain)):
      return refused
    # Without -p success means the directory is new, hence empty; with -p only
    # levels known to be missing are.
    empty = [self._fs.knows(p) or "p" not in flags for p in chain]
    for p, known in zip(chain, empty):
      node = self._fs.add(p, True)
      node.listed = node.counted = known
    return _Out([], seen=(path,))

  def _cmd_touch(self, flags: str, ops: list[str]) -> _Out:
    if bad := self._arity("touch", ops, 1, 1, "touch: missing file operand"):
      return bad
    path = self._resolve(ops[0])
    fail = f"touch: cannot touch '{ops[0]}'"
    exists = self._fs.exists(path)
    if not exists and not self._fs.is_dir(_parent(path)):
      return _err(1, f"{fail}: {self._fs.missing_reason(path)}")
    if refused := self._refuse(fail, (path,), int(not exists)):
      return refused
    if not exists:
      # Success shows that a file is there now; taken as new and empty (the name
      # could have been an unseen file, but a shell user who touches a name
      # expects a new one).
      self._fs.add(path, False).seen = True
    return _Out([])

  def _cmd_rm(self, flags: str, ops: list[str]) -> _Out:
    if bad := self._arity("rm", ops, 1, 1, "rm: missing operand"):
      return bad
    arg = ops[0]
    if _base("/" + arg.rstrip("/")) in (".", ".."):
      return _err(1, f"rm: refusing to remove '.' or '..' directory: skipping '{arg}'")
    path = self._resolve(arg)
    node = self._fs.get(path)
    fail = f"rm: cannot remove '{arg}'"
    if node is None:
      return _err(1, f"{fail}: {self._fs.missing_reason(path)}")
    if node.is_dir and not flags:
      return _err(1, f"{fail}: Is a directory")
    if self._busy(path):
      return _err(1, f"{fail}: Device or resource busy")
    if refused := self._refuse(fail, (path,)):
      return refused
    goal_known = self._goal_known([path])
    if self._steer == QUOTA:
      self._fs.subtree(path)  # the space freed
    if self._steer == TRASH_BIN and self._outside_trash(path):
      if not self._fs.is_dir(TRASH):
        self._fs.add(TRASH, True)
      self._fs.children(TRASH)  # an entry of the same name is replaced
      self._fs.move(path, _join(TRASH, _base(path)))
    else:
      self._fs.remove(path)
    return _Out([], goal_known=goal_known)

  def _target(self, cmd: str, src_arg: str, dst_arg: str) -> tuple[str, str] | _Out:
    """(source, destination) paths of mv/cp, or the error that stops them."""
    src, dst = self._resolve(src_arg), self._resolve(dst_arg)
    if not self._fs.exists(src):
      return _err(1, f"{cmd}: cannot stat '{src_arg}': {self._fs.missing_reason(src)}")
    if self._fs.is_dir(dst):
      dst = _join(dst, _base(src))
    elif dst_arg.endswith("/") or not self._fs.is_dir(_parent(dst)):
      verb = "move" if cmd == "mv" else "copy"
      reason = "Not a directory" if dst_arg.endswith("/") else self._fs.missing_reason(dst)
      return _err(1, f"{cmd}: cannot {verb} '{src_arg}' to '{dst_arg}': {reason}")
    if dst == src:
      return _err(1, f"{cmd}: '{src_arg}' and '{dst_arg}' are the same file")
    if _within(dst, src):
      verb = "move" if cmd == "mv" else "copy a directory,"
      return _err(1, f"{cmd}: cannot {verb} '{src_arg}' to a subdirectory of itself, '{dst_arg}'")
    existing = self._fs.get(dst)
    if existing is not None and existing.is_dir != self._fs.is_dir(src):
      if existing.is_dir:
        return _err(1, f"{cmd}: cannot overwrite directory '{dst_arg}' with non-directory")
      return _err(1, f"{cmd}: cannot overwrite non-directory '{dst_arg}' with directory "
                     f"'{src_arg}'")
    if existing is not None and existing.is_dir and self._fs.children(dst):
      return _err(1, f"{cmd}: cannot move '{src_arg}' to '{dst_arg}': Directory not empty")
    return src, dst

  def _shown_target(self, dst_arg: str, src: str, dst: str) -> str:
    """The destination as coreutils prints it: `dir/name` when the operand was a directory."""
    return dst_arg if self._resolve(dst_arg) == dst else _join(dst_arg, _base(src))

  def _cmd_mv(self, flags: str, ops: list[str]) -> _Out:
    if bad := self._arity("mv", ops, 2, 2, "mv: missing file operand"):
      return bad
    found = self._target("mv", ops[0], ops[1])
    if isinstance(found, _Out):
      return found
    src, dst = found
    fail = f"mv: cannot move '{ops[0]}' to '{self._shown_target(ops[1], src, dst)}'"
    if self._busy(src):
      return _err(1, f"{fail}: Device or resource busy")
    if refused := self._refuse(fail, (src, dst)):
      return refused
    goal_known = self._goal_known([src, dst])
    self._fs.move(src, dst)
    return _Out([], goal_known=goal_known)

  def _cmd_cp(self, flags: str, ops: list[str]) -> _Out:
    if bad := self._arity("cp", ops, 2, 2, "cp: missing file operand"):
      return bad
    if self._fs.is_dir(self._resolve(ops[0])) and not flags:
      return _err(1, f"cp: -r not specified; omitting directory '{ops[0]}'")
    found = self._target("cp", ops[0], ops[1])
    if isinstance(found, _Out):
      return found
    src, dst = found
    kind = "directory" if self._fs.is_dir(src) else "regular file"
    fail = f"cp: cannot create {kind} '{self._shown_target(ops[1], src, dst)}'"
    new = len(self._fs.subtree(src)) - self._fs.exists(dst) if self._steer == QUOTA else 0
    if refused := self._refuse(fail, (dst,), new):
      return refused
    goal_known = self._goal_known([src, dst])
    if dst in self._fs.nodes:
      self._fs.remove(dst)
    self._fs.copy(src, dst)
    return _Out([], goal_known=goal_known)

  # ------------------------------------------------------------------------
  # Policies.

  def _arg(self, path: str) -> str:
    """How a user at the current directory would type `path`."""
    if path == self._cwd:
      return "."
    if _within(path, self._cwd) and self._cwd != "/":
      return path[len(self._cwd) + 1:]
    return _display(path)

  def expert_action(self) -> str:
    action = getattr(self, f"_expert_{self._task.kind}")()
    if action.startswith(("mkdir", "cp")) and self._over_quota(1):
      return self._drop_junk() or "ls"
    return action

  def _drop_junk(self) -> str | None:
    """Removes a node made after reset that the task does not need, to free quota.

    A node is junk when it and everything under it were created after reset
    (so no original file is lost) and it holds no path the task asks for.
    """
    task = self._task
    keep = [p for p in (*task.targets, task.dest, task.new_path) if p]
    keep += [_join(task.dest, it.name) for it in task.items if task.dest]
    for path in sorted(self._fs.nodes):
      if (self._busy(path) or any(_within(k, path) for k in keep)
          or any(self._fs.nodes[p].ident < self._initial_idents for p in self._fs.subtree(path))):
        continue
      return f"rm -r {self._arg(path)}" if self._fs.is_dir(path) else f"rm {self._arg(path)}"
    return None

  def _make_dir(self, path: str) -> str:
    """The next step toward directory `path`: clear a file in the way, or create a level.

    `mkdir -p` (when the task draws it) makes several levels at once, so the
    expert avoids it under a quota, where each level must fit on its own.
    """
    first = path
    while _parent(first) != HOME and not self._fs.is_dir(_parent(first)):
      first = _parent(first)
    if self._fs.is_file(first):
      return f"rm {self._arg(first)}"
    if self._task.use_p and self._steer != QUOTA:
      return f"mkdir -p {self._arg(path)}"
    return f"mkdir {self._arg(first)}"

  def _locate(self, it: _Item, avoid: str = "") -> str | None:
    """Where the item's content now lives: the same node first, then any copy."""
    files = [(p, n) for p, n in self._fs.files() if p != avoid]
    for p, n in files:
      if n.ident == it.ident and n.key == it.key:
        return p
    for p, n in files:
      if n.key == it.key:
        return p
    return None

  def _search(self) -> str:
    return f"grep -r {self._task.keyword} {self._arg(HOME)}"

  def _expert_move(self) -> str:
    task = self._task
    for it in task.items:
      target = _join(task.dest, it.name)
      if not self._holds(target, it.key):
        if not self._fs.is_dir(task.dest):
          return self._make_dir(task.dest)
        src = self._locate(it, avoid=target)
        if src is None:
          continue
        return f"mv {self._arg(src)} {self._arg(task.dest)}/"
      if strays := self._strays(it):
        return f"rm {self._arg(strays[0])}"
    return "ls"

  def _expert_find_copy(self) -> str:
    task, it = self._task, self._task.items[0]
    if not self._searched:
      return self._search()
    target = _join(task.dest, it.name)
    if not self._holds(target, it.key):
      if not self._fs.is_dir(task.dest):
        return self._make_dir(task.dest)
      src = self._locate(it, avoid=target)
      return f"cp {self._arg(src)} {self._arg(task.dest)}/" if src else "ls"
    if not self._holds(it.path, it.key):
      if not self._fs.is_dir(_parent(it.path)):
        return self._make_dir(_parent(it.path))
      return f"cp {self._arg(target)} {self._arg(it.path)}"
    return "ls"

  def _expert_mkdirs(self) -> str:
    for target in self._task.targets:
      if not self._fs.is_dir(target):
        return self._make_dir(target)
    return "ls"

  def _expert_clean(self) -> str:
    for it in self._task.items:
      if found := self._named(it.name):
        return f"rm {self._arg(found[0])}"
    return "ls"

  def _expert_rename(self) -> str:
    it, new = self._task.items[0], self._task.new_path
    if not self._holds(new, it.key):
      if not self._fs.is_dir(_parent(new)):
        return self._make_dir(_parent(new))
      src = self._locate(it, avoid=new)
      if self._fs.is_dir(new):
        return f"rm -r {self._arg(new)}"
      return f"mv {self._arg(src)} {self._arg(new)}" if src else "ls"
    if it.path in self._fs.nodes:
      flag = "-r " if self._fs.is_dir(it.path) else ""
      return f"rm {flag}{self._arg(it.path)}"
    return "ls"

  def _expert_show(self) -> str:
    if not self._searched:
      return self._search()
    src = self._locate(self._task.items[0])
    return f"cat {self._arg(src)}" if src else "ls"

  def _home_paths(self, want_dir: bool | None = None) -> list[str]:
    return [p for p in sorted(self._fs.nodes)
            if _within(p, HOME) and p != HOME and self._outside_trash(p)
            and (want_dir is None or self._fs.is_dir(p) == want_dir)]

  def _new_name(self, rng: random.Random, is_dir: bool) -> str:
    """A name absent from the working directory."""
    pool = _DIR_NAMES + _SUB_NAMES if is_dir else tuple(
        f"{b}.{e}" for e in _EXTS for b in _BASES[e][:3])
    base, dot, ext = rng.choice(pool).partition(".")
    while _join(self._cwd, base + dot + ext) in self._fs.nodes:
      base += "2"
    return base + dot + ext

  def random_action(self, rng: random.Random) -> str:
    kind = rng.choices(("ls", "cd", "cat", "pwd", "grep", "touch", "mkdir", "mv", "cp", "rm"),
                       weights=(4, 3, 3, 1, 2, 1, 1, 1, 1, 1))[0]
    files = self._home_paths(False) or [HOME]
    dirs = self._home_paths(True) or [HOME]

    def pick(paths: list[str]) -> str:
      return self._arg(rng.choice(paths))

    if kind == "ls":
      if self._steer == TRASH_BIN and rng.random() < 0.2:
        return "ls ~/.trash"
      return "ls" if rng.random() < 0.5 else f"ls {pick(dirs)}"
    if kind == "cd":
      return rng.choice(("cd ..", "cd ~", f"cd {pick(dirs)}", f"cd {pick(dirs)}"))
    if kind == "grep":
      word = rng.choice(_KEYWORDS[:6] + _GREP_WORDS)
      return f"grep -r {word} {pick(dirs)}" if rng.random() < 0.5 else f"grep {word} {pick(files)}"
    if kind in ("touch", "mkdir"):
      return f"{kind} {self._new_name(rng, kind == 'mkdir')}"
    if kind in ("mv", "cp"):
      return f"{kind} {pick(files)} {pick(dirs)}"
    if kind == "rm":
      return f"rm -r {pick(dirs)}" if rng.random() < 0.1 else f"rm {pick(files)}"
    return "pwd" if kind == "pwd" else f"cat {pick(files)}"

  def invalid_action(self, rng: random.Random) -> str:
    here = self._visible(self._cwd)
    here_files = [_base(p) for p in here if self._fs.is_file(p)]
    here_dirs = [_base(p) for p in here if self._fs.is_dir(p)]
    missing = self._new_name(rng, False)
    options = [
        f"{rng.choice(_BAD_COMMANDS)} {missing}",
        f"cat {missing}",
        f"ls {self._new_name(rng, True)}",
        f"mv {missing} {rng.choice(here_dirs or ['..'])}",
        f"grep {rng.choice(_KEYWORDS)} {missing}",
        f"mkdir {rng.choice(here_dirs + here_files or ['.'])}",
        "cat .",
        rng.choice(("rm", "mkdir", "touch", "cp", f"mv {missing}")),
        rng.choice(("ls -z", f"rm -x {missing}", f"cp -q {missing} .")),
    ]
    if here_files:
      options.append(f"cd {rng.choice(here_files)}")
    if here_dirs:
      options.append(f"rm {rng.choice(here_dirs)}")
    return rng.choice(options)

  # ------------------------------------------------------------------------
  # The twin world.

  def fork_hidden(self, stream: str) -> None:
    """Switches the hidden stream: contents not read yet are drawn from it, and every
    unseen child of a directory neither listed nor counted is drawn anew (keeping
    the task's files and paths, so the task and its goal stay as they were)."""
    self._stream = stream
    fs = self._fs
    before = fs.count_under(HOME)
    keep = self._task_paths()
    open_dirs = [p for p, n in sorted(fs.nodes.items())
                 if n.is_dir and _within(p, HOME) and not _within(p, TRASH)
                 and not (n.listed or n.counted)]
    for d in open_dirs:
      for child in fs._children(d) if d in fs.nodes else []:
        node = fs.nodes[child]
        if not node.seen and node.ident < self._initial_idents and child not in keep:
          fs.remove(child)
    used = {_base(p) for p, _ in fs.files()} | {it.name for it in self._task.items}
    for d in open_dirs:
      if d in fs.nodes:
        self._fill(d, used)
    # The quota counts what the command creates, not the re-drawn filler.
    self._quota_limit += fs.count_under(HOME) - before

  def _task_paths(self) -> set[str]:
    """The task's files where they are now, the paths its text names, and their parents."""
    task = self._task
    idents = {it.ident for it in task.items}
    paths = [p for p, n in self._fs.nodes.items() if n.ident in idents]
    paths += [p for p in (task.dest, task.new_path, *task.targets) if p in self._fs.nodes]
    keep = set()
    for path in paths:
      while path not in keep and path != "/":
        keep.add(path)
        path = _parent(path)
    return keep

  def _fill(self, directory: str, used: set[str]) -> None:
    """Fresh unseen files (and maybe a subdirectory) in `directory`, named apart from
    every file in the tree and of no kind the task counts."""
    rng = random.Random(f"{self.name}/{self._seed}/{self._stream}/dir/{directory}")
    banned = {"move": self._task.items[0].name.rsplit(".", 1)[1] if self._task.items else "",
              "clean": "tmp"}.get(self._task.kind, "")
    exts = [e for e in _EXTS if e != banned]
    for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):
      ext = rng.choice(exts)
      free = [b for b in _BASES[ext] if f"{b}.{ext}" not in used]
      if free:
        name = f"{rng.choice(free)}.{ext}"
        used.add(name)
        path = _join(directory, name)
        self._fs.add(path, False, f"{self._stream}:{path}")
    depth = directory.count("/") - HOME.count("/")
    if depth < 3 and rng.random() < 0.3:
      names = [n for n in _SUB_NAMES if _join(directory, n) not in self._fs.nodes]
      if names:
        sub = _join(directory, rng.choice(names))
        self._fs.add(sub, True)
        self._fill(sub, used)

  # ------------------------------------------------------------------------
  # The structured state check.

  @classmethod
  def check(cls, spec: Spec, step: Step, prediction: str) -> CheckResult:
    """Determined facts (the status line's and the output's, as `step.checks` marks
    them), revealed facts (reported only) and the rules invented output must keep."""
    text = prediction if isinstance(prediction, str) else ""
    body, status = _read_status(text)
    checks = step.checks
    facts = status or {}
    entries = generic.fact_entries(checks, text, lambda k, v: facts.get(k) == v)
    constraints = _constraints(step, body, facts)
    if status is None:
      constraints = {name: False for name in constraints}
    return CheckResult({FORMAT: status is not None, **entries.determined}, entries.revealed,
                       constraints)

  @classmethod
  def state_check(cls, spec: Spec, step: Step, prediction: str) -> float:
    try:
      return cls.check(spec, step, prediction).score
    except Exception:  # noqa: BLE001 -- a garbage prediction must score, never raise
      return 0.0


_ENTRIES = re.compile(r"(\d+) \(files: (\d+), dirs: (\d+)\)")
_STATUS_KEYS = ("cwd", "entries", "exit", "goal")
_EXIT_CODES = ("0", "1", "2", "127")
_GOAL = re.compile(r"(\d+)/(\d+)")
# A listed name of the world's form: a file with a known extension or a directory.
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*(\.(" + "|".join(_EXTS) + r")|/)")
_WORDS = r"[a-z0-9' ]+"
_LOG_LINE = r"(INFO|WARN|ERROR) [a-z0-9% ]+"
_PY_LINE = r"print\(.*\)|import \w+|def \w+\(.*\):.*|\w+ = .+|for \w+ in .+:.*"
# Per extension, the form of a file the world writes: at most so many lines, the
# first line's form and the others'.
_CONTENT_FORMS = {"log": (2, _LOG_LINE, _LOG_LINE), "csv": (3, r"[a-z]+,[a-z]+", r"[a-z]+,\d+"),
                  "txt": (2, _WORDS, _WORDS), "md": (2, r"# [A-Za-z ]+", r"(- )?" + _WORDS),
                  "ini": (2, r"\[[a-z]+\]", r"[a-z]+ = [a-z0-9]+"), "py": (1, _PY_LINE, _PY_LINE),
                  "tmp": (1, _WORDS, _WORDS)}


def _read_status(text: str) -> tuple[list[str], dict[str, str] | None]:
  """Output lines and the status facts of the last line, `entries` split into
  entries/files/dirs (None when the last line is not a status line of this form)."""
  lines = [line for line in text.split("\n") if line.strip()]
  status = parse_status_line(lines[-1]) if lines else None
  if status is None or not all(k in status for k in _STATUS_KEYS):
    return lines, None
  m = _ENTRIES.fullmatch(status["entries"])
  if not m:
    return lines, None
  return lines[:-1], {**status, "entries": m[1], "files": m[2], "dirs": m[3]}


def _constraints(step: Step, body: list[str], facts: dict[str, str]) -> dict[str, bool]:
  """Rules every next state keeps, whatever the hidden draws: counts that add up, a
  goal over the same total, an exit code that agrees with the output, a cd that
  lands where it must, and outputs of the world's form."""
  words = _tokens(step.action) or [""]
  cmd, (flags, ops) = words[0], _split_args(words[1:])
  prior = _read_status(step.state)[1] or {}
  code = facts.get("exit")
  out = {"exit_code": code in _EXIT_CODES}
  counts = [facts.get(k, "") for k in _COUNTS]
  out["counts_add_up"] = (all(c.isdecimal() for c in counts)
                          and int(counts[0]) == int(counts[1]) + int(counts[2]))
  out["steer_counts"] = all(facts.get(k, "").isdecimal() for k in ("trash", "quota")
                            if k in step.checks.fields)
  out["goal_form"] = _goal_ok(facts.get("goal", ""), prior.get("goal", ""))
  has_error = any(line.startswith((f"{cmd}: ", "bash: ", "Usage: ")) for line in body)
  quiet = cmd == "grep" and code == "1"
  out["exit_matches_output"] = code is not None and has_error == (code != "0" and not quiet)
  if cmd in _SILENT and code == "0" or quiet:
    out["silent"] = not body
  if cmd == "cd" and "cwd" in prior:
    target = _normalize(prior["cwd"], ops[0]) if ops else HOME
    out["cd_target"] = facts.get("cwd") == (target if code == "0" else prior["cwd"])
  if prior and code is not None:
    out.update(_effects(cmd, flags, ops, code, facts, prior))
  if prior.get("disk") == "read-only" and cmd in _WRITES and not (cmd == "mkdir" and "p" in flags):
    out["read_only_fails"] = code != "0"
  if code != "0":
    return out
  if cmd == "pwd":
    out["pwd_prints_cwd"] = body == [facts.get("cwd")]
  if cmd == "ls":
    out.update(_listing_constraints(step, ops, body, facts))
  if cmd == "cat" and ops:
    # Only touched files are empty, and the earlier outputs show every one of them.
    unknown = "exit" in step.checks.revealed or any(
        step.checks.is_revealed_include(s) for s in step.checks.must_include)
    out["content_form"] = (_content_ok(ops[0].rsplit(".", 1)[-1], body)
                           and (bool(body) or not unknown))
  if cmd == "grep" and ops:
    out["grep_lines_match"] = bool(body) and all(ops[0] in line for line in body)
  return out


# Status facts a successful command may change; any other stays as s_t shows it.
_MAY_CHANGE = {"cd": ("cwd", *_COUNTS), "cat": ("goal",),
               **{cmd: (*_COUNTS, "trash", "quota", "goal") for cmd in _WRITES}}


def _effects(cmd: str, flags: str, ops: list[str], code: str, facts: dict[str, str],
             prior: dict[str, str]) -> dict[str, bool]:
  """The status line after the command against s_t's: a failed command changes
  nothing, nor does a read-only one; a mkdir, touch or rm in the working directory
  moves its counts by one, and quota and trash move as the rules say."""
  may = _MAY_CHANGE.get(cmd, ()) if code == "0" else ()
  out = {"unchanged": all(facts.get(k) == v for k, v in prior.items()
                          if k != "exit" and k not in may)}
  if code != "0" or cmd not in ("mkdir", "touch", "rm") or len(ops) != 1:
    return out
  path = _normalize(prior.get("cwd", HOME), ops[0])
  delta = {"mkdir": -1, "touch": -1, "rm": 1}[cmd]
  if "quota" in prior and prior["quota"].isdecimal() and facts.get("quota", "").isdecimal():
    change = int(facts["quota"]) - int(prior["quota"])
    out["quota_moves"] = (change == delta if cmd == "mkdir" and "p" not in flags
                          else change in (0, delta) if cmd != "rm" else change >= 1)
  if cmd == "rm" and "trash" in prior and prior["trash"].isdecimal() and not _within(path, TRASH):
    grown = facts.get("trash", "") == str(int(prior["trash"]) + 1)
    out["trash_moves"] = grown or (prior["trash"] != "0" and facts.get("trash") == prior["trash"])
  if _parent(path) == prior.get("cwd") and not _base(path).startswith(".") and (
      cmd != "mkdir" or "p" not in flags):
    out["counts_move"] = _counts_move(cmd, prior, facts)
  return out


def _counts_move(cmd: str, prior: dict[str, str], facts: dict[str, str]) -> bool:
  """A new directory adds one entry and one dir; touch adds a file or nothing (the
  name existed); rm takes one entry, a file or a dir."""
  try:
    before = [int(prior[k]) for k in _COUNTS]
    after = [int(facts[k]) for k in _COUNTS]
  except (KeyError, ValueError):
    return False
  moves = {"mkdir": [(1, 0, 1)], "touch": [(0, 0, 0), (1, 1, 0)],
           "rm": [(-1, -1, 0), (-1, 0, -1)]}[cmd]
  return any(after == [b + m for b, m in zip(before, move)] for move in moves)


def _goal_ok(goal: str, prior: str) -> bool:
  m = _GOAL.fullmatch(goal)
  if not m or int(m[1]) > int(m[2]):
    return False
  before = _GOAL.fullmatch(prior)
  return before is None or before[2] == m[2]


def _listing_constraints(step: Step, ops: list[str], body: list[str],
                         facts: dict[str, str]) -> dict[str, bool]:
  """An ls listing is sorted, of names of the world's form (or typed in the action),
  and a listing of the working directory matches its counts."""
  names = " ".join(body).split()
  # ls sorts by name: the trailing / of a directory takes no part.
  out = {"listing_sorted": names == sorted(set(names), key=lambda n: n.rstrip("/")),
         "listing_names": all(_NAME.fullmatch(n) or n.rstrip("/") in step.action for n in names)}
  cwd = step.checks.fields.get("cwd", "")
  if cwd and (_normalize(cwd, ops[0]) if ops else cwd) == cwd:
    out["listing_counts"] = (str(len(names)) == facts.get("entries")
                             and str(sum(n.endswith("/") for n in names)) == facts.get("dirs"))
  return out


def _content_ok(ext: str, lines: list[str]) -> bool:
  """A printed file of the world's form for its extension (an empty file prints nothing)."""
  most, first, rest = _CONTENT_FORMS.get(ext, (len(lines), r".+", r".+"))
  return len(lines) <= most and all(re.fullmatch(first if i == 0 else rest, line)
                                    for i, line in enumerate(lines))
