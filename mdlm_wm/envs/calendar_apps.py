"""Calendar apps: an AppWorld-like account with contacts, a calendar and email.

World. One user's work week (Monday to Friday of a seeded week). The contacts
app holds 6-8 people (name, email `first.last@domain`, team; every team has at
least two). The calendar holds 1-4 events a day (id, title, start, end,
attendees by email). The inbox holds 3-5 messages whose bodies stay hidden
until read; the sent folder starts empty. Actions are tool calls
`name({"arg": value})` parsed and schema-checked by `toolcall`; responses are
JSON with an HTTP-like status: 400 bad arguments, 404 unknown id, 409 time
conflict or policy, 422 unknown tool, attendee or recipient.

Tasks, each needing more than one app:
  schedule    book a 30-minute meeting with a person at the first free slot
              at or after a time and email them the start time (their email
              comes from contacts, the free slot from the day's events);
  cancel      delete the event named in the latest email from a person (the
              inbox must be ordered by time, then the body read) and reply;
  reschedule  move an event that overlaps another to the first free slot
              after the other one ends and email an attendee the new time;
  report      email a person the booked minutes of a day.

Trailing anchor. Lists come first, then their `count` and totals
(`busy_minutes`, `unread`); every response then ends with the account line
`[total_events: 14 | unread: 2 | sent: 1]`, which depends on the whole history.

Hidden and revealed. The first state shows the week, the user's domain and
the account line; everything else is hidden and drawn lazily, when a step
first needs it, from a random stream keyed by (seed, hidden stream, what): the
contact list, each day's events, the inbox, each message body and the events
the cancel task's emails name. Reset fixes only what the task text and the
first account line need (the person, the task's date, the number of events
and unread messages, which event ids exist). `fork_hidden` switches the stream
and re-deals the event ids of the days not drawn yet, so a twin world keeps
everything drawn so far and draws the rest anew. The world also tracks what
the agent has seen (days listed since, events, contacts, messages and bodies
shown) and marks a step's fact `revealed` when that knowledge does not fix
it: the events of a day not listed, the contacts a new query finds, an inbox
not listed, a body read for the first time, and the whole outcome of a call
whose status hangs on hidden state (creating on an unlisted day, deleting an
id never seen, mailing an email never seen). Effects of calls on known state,
the counts after them and argument errors are determined. `check` grades
determined facts, reports revealed ones, and holds invented content to the
rules and the tool schemas (the tool's statuses, a response and an error that
fit the call, well-formed times, dates and ids, `count` equal to the items
listed, `busy_minutes` the sum of their durations, contacts matching the
query, new ids new, the account line following the status).

Steers (the seed picks one for about 35% of episodes): meetings must end by
17:00 (409), lunch 12:00-13:00 is protected (409), the task's person is on
vacation (their invitations are declined: they are dropped from the attendees
and listed under "declined"; the schedule task then falls back to a teammate),
and subjects must be under 20 characters (400). The expert solves all four.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import random
import re
from typing import Any, NamedTuple

from mdlm_wm.checks import generic
from mdlm_wm.checks.result import FORMAT, CheckResult, parse_status_line
from mdlm_wm.data.schema import Checks, Spec, Step
from mdlm_wm.envs import toolcall
from mdlm_wm.envs.base import Env, StepResult

_FIRST = ("Ana", "Ben", "Chen", "Dara", "Eli", "Femi", "Gus", "Hiro", "Ivo", "Jade",
          "Kofi", "Lena", "Milo", "Nia", "Omar", "Pia", "Raj", "Sara", "Tomas", "Uma")
_LAST = ("Lopez", "Park", "Okafor", "Silva", "Novak", "Reyes", "Kim", "Haas",
         "Moreau", "Berg", "Tan", "Costa", "Adler", "Quinn", "Sato", "Ward")
_TEAMS = ("design", "sales", "infra", "legal", "finance", "research")
_DOMAINS = ("acme.io", "globex.com", "initech.org")
_TITLES = ("Standup", "Design review", "Budget sync", "Roadmap planning", "Hiring panel",
           "Customer call", "Team lunch", "Retro", "Demo prep", "Vendor call",
           "Security review", "All hands", "Sprint planning", "Board prep")
_TOPICS = ("Launch", "Pricing", "Onboarding", "Hiring", "Q3 plan", "Migration")
_AFTER = ("10:00", "10:30", "11:00", "11:30", "13:00", "14:00")
_NOTE_SUBJECTS = ("Notes from Friday", "Slides for the demo", "Quick question",
                  "Lunch on Thursday", "Travel plans", "Draft contract")
_NOTE_BODIES = ("Here are my notes; no action needed.", "Let me know what you think.",
                "I will send the rest later.", "Thanks for the help last week.")
_CANCEL_SUBJECTS = ("Please cancel a meeting", "Change of plans this week",
                    "Cannot make it after all")
_RANDOM_SUBJECTS = ("Hello", "Quick question", "Notes", "Follow up on the plan",
                    "Thanks for today", "Agenda for next week")
_RANDOM_BODIES = ("Thanks, noted.", "Sounds good to me.", "Can we talk later?",
                  "See you soon.", "Please send the notes.")
_BAD_TOOLS = ("calendar_share_event", "email_forward", "contacts_delete", "calendar_clear")
KINDS = ("schedule", "cancel", "reschedule", "report")

DAY_START, DAY_END, LATE_END = 9 * 60, 18 * 60, 17 * 60
EARLIEST, LATEST = 8 * 60, 20 * 60
LUNCH = (12 * 60, 13 * 60)
MAX_DAY_EVENTS = 6
MAX_ATTENDEES = 2
SUBJECT_LIMIT = 20
# Original events are ev101, ev102, ...; created ones continue the numbering.
FIRST_EVENT = 101
FIRST_SENT = 301
# Whole-day redraws before a day's events are declared impossible to place.
_DAY_ATTEMPTS = 200

STEER_LATE = "All meetings must end by 17:00."
STEER_LUNCH = "Lunch is protected: nothing may be scheduled from 12:00 to 13:00."
STEER_VACATION = ("The person named in the task is on vacation this week: "
                  "invitations to them are declined.")
STEER_SUBJECT = "The user is impatient: every email must have a subject under 20 characters."
STEERS = (STEER_LATE, STEER_LUNCH, STEER_VACATION, STEER_SUBJECT)

_DATE = {"type": "string", "description": "YYYY-MM-DD"}
_TIME = {"type": "string", "description": "HH:MM on a 15-minute grid"}
_STR = {"type": "string"}
TOOLS = (
    toolcall.tool("contacts_search", "Contacts whose name, email or team contains the query.",
                  {"query": _STR}, ["query"]),
    toolcall.tool("calendar_list_events", "Events on a date, then count and busy_minutes.",
                  {"date": _DATE}, ["date"]),
    toolcall.tool("calendar_create_event", "Create an event and invite contacts by email.",
                  {"title": _STR, "date": _DATE, "start": _TIME, "end": _TIME,
                   "attendees": {"type": "array", "items": _STR}},
                  ["title", "date", "start", "end", "attendees"]),
    toolcall.tool("calendar_delete_event", "Delete an event by id.",
                  {"event_id": _STR}, ["event_id"]),
    toolcall.tool("calendar_move_event", "Move an event to new times on the same date.",
                  {"event_id": _STR, "start": _TIME, "end": _TIME},
                  ["event_id", "start", "end"]),
    toolcall.tool("email_list_inbox", "Inbox messages, newest first, without bodies.", {}),
    toolcall.tool("email_read", "Read one message; it becomes read.",
                  {"message_id": _STR}, ["message_id"]),
    toolcall.tool("email_send", "Send an email to a contact.",
                  {"to": _STR, "subject": _STR, "body": _STR}, ["to", "subject", "body"]),
)
# Per tool: the statuses it can answer (400 for arguments the schema or the
# rules reject; 422 is also an unknown tool's), the success status and the
# keys of a success, and the account-line key a success changes.
_STATUSES = {
    "contacts_search": (200, 400), "calendar_list_events": (200, 400),
    "calendar_create_event": (201, 400, 409, 422), "calendar_delete_event": (200, 400, 404),
    "calendar_move_event": (200, 400, 404, 409), "email_list_inbox": (200, 400),
    "email_read": (200, 400, 404), "email_send": (200, 400, 422),
}
_UNKNOWN_TOOL_STATUSES = (400, 422)
_SUCCESS_KEYS = {
    "contacts_search": ("contacts", "count"),
    "calendar_list_events": ("date", "events", "count", "busy_minutes"),
    "calendar_create_event": ("event", "declined", "accepted", "day_events"),
    "calendar_delete_event": ("deleted", "title", "date", "day_events"),
    "calendar_move_event": ("event", "previous", "day_events"),
    "email_list_inbox": ("messages", "count", "unread"),
    "email_read": ("message",),
    "email_send": ("message",),
}
_ERROR_KEYS = ("status", "error", "conflict")
_ACCOUNT_KEY = {"calendar_create_event": "total_events", "calendar_delete_event": "total_events",
                "email_read": "unread", "email_send": "sent"}
_FOOTER_KEYS = ("total_events", "unread", "sent")

_TIME_RE = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TEXT_RE = re.compile(r"^[A-Za-z0-9 :&',.?!-]+$")
_EMAIL_FORM = re.compile(r"^([a-z]+)\.([a-z]+)@([a-z0-9.-]+)$")
_EVENT_ID = re.compile(r"^ev(\d+)$")
_MESSAGE_ID = re.compile(r"^m\d+$")
_MAIL_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}) ([01]\d|2[0-3]):([0-5]\d)$")
_BODY_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclasses.dataclass(frozen=True)
class Contact:
  name: str
  email: str
  team: str


@dataclasses.dataclass
class Event:
  id: str
  title: str
  date: str
  start: int
  end: int
  attendees: list[str]
  # Events the world started with; the expert only ever deletes the others.
  original: bool = True


@dataclasses.dataclass
class Message:
  id: str
  sender: str
  subject: str
  time: str
  read: bool


@dataclasses.dataclass(frozen=True)
class Sent:
  id: str
  to: str
  subject: str
  body: str


@dataclasses.dataclass(frozen=True)
class Task:
  kind: str
  person: str  # email of the person the task names
  date: str = ""  # cancel: the target's date, known once the task's email is drawn
  after: int = 0
  duration: int = 30
  title: str = ""
  event_id: str = ""  # reschedule / cancel: set when the event is drawn
  message_id: str = ""  # cancel: set when the inbox is drawn
  other: str = ""  # reschedule: title of the event it overlaps


@dataclasses.dataclass
class _Reply:
  """A success: the response, its fields, must_include items (item -> is it
  revealed), must_exclude items and the revealed field keys."""
  obj: dict
  fields: dict[str, Any]
  include: dict[str, bool] = dataclasses.field(default_factory=dict)
  exclude: list[str] = dataclasses.field(default_factory=list)
  revealed: set[str] = dataclasses.field(default_factory=set)


class _Fail(Exception):
  """A failed action: the status, a one-line error and extra JSON facts."""

  def __init__(self, status: int, error: str, **extra: str):
    super().__init__(error)
    self.status = status
    # Quotes and control characters would be escaped in JSON and then no
    # longer match the `error` field verbatim.
    self.error = re.sub(r"[^\x20-\x7e]|[\\\"]", "'", error)[:120]
    self.extra = extra


def hhmm(minutes: int) -> str:
  return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
  return a[0] < b[1] and b[0] < a[1]


def first_free(spans: list[tuple[int, int]], after: int, duration: int,
               lunch: bool, day_end: int) -> int | None:
  """First start on the 15-minute grid at or after `after`, inside working
  hours, whose slot overlaps none of `spans` (nor lunch when protected)."""
  busy = spans + [LUNCH] if lunch else spans
  t = max(after, DAY_START)
  while t + duration <= day_end:
    if not any(_overlaps((t, t + duration), s) for s in busy):
      return t
    t += 15
  return None


def _call(name: str, **args: Any) -> str:
  return toolcall.format_tool_call(name, args)


def _partition(rng: random.Random, total: int, lows: list[int], high: int = 4) -> list[int]:
  """Counts in [low_i, high] that sum to `total` (which must allow them)."""
  counts = []
  for i, low in enumerate(lows):
    rest = lows[i + 1:]
    counts.append(rng.randint(max(low, total - high * len(rest)), min(high, total - sum(rest))))
    total -= counts[-1]
  return counts


def _inbox_shape(rng: random.Random, cancel: bool) -> tuple[list[bool], int, int]:
  """Read flags of 3-5 messages in time order and, for the cancel task, the
  positions of the person's two emails (latest, earlier; else -1, -1)."""
  n = rng.randint(3, 5)
  flags = [rng.random() < 0.4 for _ in range(n)]
  if not cancel:
    return flags, -1, -1
  late = rng.randrange(1, n)
  early = rng.randrange(late)
  flags[late], flags[early] = False, rng.random() < 0.5
  return flags, late, early


class CalendarAppsEnv(Env):
  name = "calendar"
  max_steps = 20
  steers = STEERS

  # ------------------------------------------------------------------ reset

  def reset(self, seed: int, steer: str | None = None) -> tuple[Spec, str]:
    steer = self.resolve_steer(seed, steer)
    # The world does not depend on the steer, so that the same seed with and
    # without a steer differs only in the steer's effect.
    rng = random.Random(f"{self.name}/{seed}")
    self.steer, self._seed, self._stream = steer, seed, "world"
    monday = datetime.date(2024, 1, 1) + datetime.timedelta(weeks=rng.randrange(52))
    self._week = [(monday + datetime.timedelta(days=i)).isoformat() for i in range(5)]
    self._domain = rng.choice(_DOMAINS)
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    self._person = (f"{first} {last}", f"{first}.{last}@{self._domain}".lower())
    self._task = self._make_task(rng, rng.choice(KINDS))
    self._deal_ids(rng)
    self._unread = sum(not r for r in _inbox_shape(rng, self._task.kind == "cancel")[0])
    self._unread_at_start = self._unread
    self._vacation = self._task.person if steer == STEER_VACATION else ""
    # Hidden content, drawn on first use (see the module docstring).
    self._people: list[Contact] | None = None
    self._days: dict[str, list[Event]] = {}
    self._originals: dict[str, list[tuple[str, str]]] = {}  # date -> (id, title) as drawn
    self._messages: list[Message] | None = None
    self._bodies: dict[str, str] = {}
    self._cancel_ids: tuple[str, str] = ("", "")  # the person's latest and earlier email
    self._named: tuple[str, str, str, str] | None = None  # target, date, decoy, date
    # The account.
    self._total = sum(len(ids) for ids in self._plan.values())
    self._event_ids = sorted(i for ids in self._plan.values() for i in ids)
    self._next_event = FIRST_EVENT + self._total
    self._deleted: list[str] = []
    self._sent: list[Sent] = []
    # What the agent has seen: a fact it fixes is determined.
    self._known_days: set[str] = set()  # every event of these dates is known
    self._id_dates: dict[str, str] = {}  # events known to exist, with their dates
    self._full_ids: set[str] = set()  # events whose title and times are known
    self._contact_emails = {self._task.person}  # named in the task; emails are first.last@
    self._contact_records: set[str] = set()  # contacts a search showed whole
    self._queries: set[str] = set()
    self._all_contacts = False
    self._inbox_known = False
    self._known_messages: set[str] = set()  # sender, subject, time and read flag known
    self._bodies_seen: set[str] = set()
    # Dates listed since their last change: the expert looks again after one.
    self._listed: set[str] = set()
    first_state = self._render({"status": 200, "user": f"me@{self._domain}",
                                "today": self._week[0], "week": self._week,
                                "apps": ["contacts", "calendar", "email"]})
    spec = Spec(initial_state=first_state, task=self._describe_task(), tools=TOOLS,
                rules=self._rules(), steer=steer)
    return spec, first_state

  def _make_task(self, rng: random.Random, kind: str) -> Task:
    person = self._person[1]
    if kind == "schedule":
      return Task(kind, person, rng.choice(self._week), _minutes(rng.choice(_AFTER)), 30,
                  f"{rng.choice(_TOPICS)} sync")
    if kind == "reschedule":
      other, moved = rng.sample(_TITLES, 2)
      return Task(kind, person, rng.choice(self._week), title=moved, other=other)
    if kind == "report":
      return Task(kind, person, rng.choice(self._week))
    return Task(kind, person)

  def _lows(self, dates: list[str]) -> list[int]:
    """Fewest original events each date may hold: the reschedule task's two."""
    return [2 if self._task.kind == "reschedule" and d == self._task.date else 1 for d in dates]

  def _deal_ids(self, rng: random.Random) -> None:
    """How many original events each day holds and which ids they get, in
    shuffled order so that id order tells nothing about time."""
    counts = [max(low, rng.randint(1, 4)) for low in self._lows(self._week)]
    ids = [f"ev{FIRST_EVENT + i}" for i in range(sum(counts))]
    rng.shuffle(ids)
    self._plan: dict[str, list[str]] = {}
    for date, n in zip(self._week, counts):
      self._plan[date], ids = ids[:n], ids[n:]

  def fork_hidden(self, stream: str) -> None:
    """Draws everything not yet drawn from `stream`; the days not drawn yet
    share their event ids out anew (same total, same ids)."""
    self._stream = stream
    rng = self._rng("plan")
    dates = sorted(self._plan)
    ids = sorted(i for d in dates for i in self._plan[d])
    rng.shuffle(ids)
    for date, n in zip(dates, _partition(rng, len(ids), self._lows(dates))):
      self._plan[date], ids = ids[:n], ids[n:]

  def _rng(self, what: str) -> random.Random:
    return random.Random(f"{self.name}/{self._seed}/{self._stream}/{what}")

  # ------------------------------------------------------ lazy hidden draws

  @property
  def _contacts(self) -> list[Contact]:
    if self._people is None:
      self._people = self._draw_contacts()
    return self._people

  def _draw_contacts(self) -> list[Contact]:
    rng = self._rng("contacts")
    first, last = self._person[0].split()
    n = rng.randint(6, 8)
    # Distinct first and last names keep every email and name from being a
    # substring of another, so must_include/must_exclude stay unambiguous.
    names = [(first, last)] + list(zip(rng.sample([f for f in _FIRST if f != first], n - 1),
                                       rng.sample([l for l in _LAST if l != last], n - 1)))
    rng.shuffle(names)
    teams = rng.sample(_TEAMS, 3)
    contacts = [Contact(f"{f} {l}", f"{f}.{l}@{self._domain}".lower(), teams[i % 3])
                for i, (f, l) in enumerate(names)]
    return sorted(contacts, key=lambda c: c.name)

  def _day(self, date: str) -> list[Event]:
    """The events of `date` in time order (drawn on first use)."""
    if date not in self._days:
      self._draw_day(date)
    return sorted(self._days[date], key=lambda e: (e.start, e.id))

  def _draw_day(self, date: str) -> None:
    ids = self._plan.pop(date)
    rng = self._rng(f"day/{date}")
    for _ in range(_DAY_ATTEMPTS):
      events, feasible = self._fixed_events(rng, date)
      while len(events) < len(ids) and self._add_random_event(rng, date, events, feasible):
        pass
      if len(events) == len(ids):
        break
    else:
      raise RuntimeError(f"calendar seed {self._seed}: cannot place {len(ids)} events on {date}")
    rng.shuffle(ids)
    for event, event_id in zip(events, ids):
      event.id = event_id
    self._days[date] = events
    self._originals[date] = [(e.id, e.title) for e in events]
    t = self._task
    if t.kind == "reschedule" and date == t.date:
      moved = next(e for e in events if e.title == t.title)
      other = next(e for e in events if e.title == t.other)
      self._task = dataclasses.replace(t, event_id=moved.id, after=other.end,
                                       duration=moved.end - moved.start)

  def _fixed_events(self, rng: random.Random, date: str):
    """The task's own events on `date` and the test every added event keeps:
    the free slot the task asks for exists under every steer at once."""
    t = self._task
    if t.date != date or t.kind not in ("schedule", "reschedule"):
      return [], lambda events: True
    if t.kind == "schedule":
      fixed = []
      if rng.random() < 0.6:  # a meeting covering `after` makes the search matter
        start = t.after - 15 * rng.randint(0, 2)
        fixed.append(Event("", rng.choice(_TITLES), date, start, start + 60,
                           [rng.choice(self._contacts).email]))
      return fixed, lambda events: _strict_slot(events, t.after, 30) is not None
    b_start = rng.randrange(DAY_START, 13 * 60 + 1, 15)
    other = Event("", t.other, date, b_start, b_start + rng.choice((60, 90)),
                  [rng.choice(self._contacts).email])
    a_start = b_start + rng.choice((15, 30))
    moved = Event("", t.title, date, a_start, a_start + rng.choice((30, 45, 60)), [t.person])
    return [other, moved], lambda events: _strict_slot(
        [e for e in events if e is not moved], other.end, moved.end - moved.start) is not None

  def _add_random_event(self, rng: random.Random, date: str, events: list[Event],
                        feasible) -> bool:
    used = {e.title for e in events}
    for _ in range(20):
      duration = rng.choice((30, 45, 60, 90))
      start = rng.randrange(DAY_START, DAY_END - duration + 1, 15)
      if any(_overlaps((start, start + duration), (e.start, e.end)) for e in events):
        continue
      title = rng.choice([t for t in _TITLES if t not in used])
      people = rng.sample(self._contacts, rng.randint(1, MAX_ATTENDEES))
      event = Event("", title, date, start, start + duration, [c.email for c in people])
      if feasible(events + [event]):
        events.append(event)
        return True
    return False

  @property
  def _inbox(self) -> list[Message]:
    if self._messages is None:
      self._messages = self._draw_inbox()
    return self._messages

  def _draw_inbox(self) -> list[Message]:
    """3-5 messages with as many unread as the first account line showed."""
    rng = self._rng("inbox")
    cancel = self._task.kind == "cancel"
    flags, late, early = _inbox_shape(rng, cancel)
    while sum(not r for r in flags) != self._unread_at_start:
      flags, late, early = _inbox_shape(rng, cancel)
    others = [c.email for c in self._contacts if c.email != self._task.person]
    subjects = rng.sample(_CANCEL_SUBJECTS, 2)
    ids = [f"m{n}" for n in rng.sample(range(201, 300), len(flags))]
    messages = []
    for i, (time, read) in enumerate(zip(_mail_times(rng, self._week[0], len(flags)), flags)):
      # Both of the person's emails ask for a cancellation, so only their
      # times tell which one the task means.
      if i in (late, early):
        messages.append(Message(ids[i], self._task.person, subjects[i == early], time, read))
      else:
        sender = rng.choice(others if cancel else [c.email for c in self._contacts])
        messages.append(Message(ids[i], sender, rng.choice(_NOTE_SUBJECTS), time, read))
    if cancel:
      self._cancel_ids = (ids[late], ids[early])
      self._task = dataclasses.replace(self._task, message_id=ids[late])
    return messages

  def _body(self, message: Message) -> str:
    if message.id not in self._bodies:
      self._bodies[message.id] = self._draw_body(message)
    return self._bodies[message.id]

  def _draw_body(self, message: Message) -> str:
    if message.id not in self._cancel_ids:
      return self._rng(f"body/{message.id}").choice(_NOTE_BODIES)
    target, date, decoy, decoy_date = self._named_events()
    if message.id == self._cancel_ids[0]:
      return f"Change of plan: please cancel {target} on {date} instead."
    return f"Please cancel {decoy} on {decoy_date}."

  def _named_events(self) -> tuple[str, str, str, str]:
    """The cancel task's target and decoy (title, date, title, date): two
    events the world started with, drawn when either email is first read."""
    if self._named is None:
      rng = self._rng("cancel")
      dates = rng.sample(self._week, len(self._week))
      target_id, target = rng.choice(self._originals_of(dates[0]))
      for d in [rng.choice(self._week)] + dates:
        decoys = [title for event_id, title in self._originals_of(d) if event_id != target_id]
        if decoys:
          self._named = (target, dates[0], rng.choice(decoys), d)
          break
      self._task = dataclasses.replace(self._task, event_id=target_id, date=dates[0])
    return self._named

  def _originals_of(self, date: str) -> list[tuple[str, str]]:
    """(id, title) of the events `date` started with, moved or deleted since or not."""
    self._day(date)
    return self._originals[date]

  # ---------------------------------------------------------- task and rules

  def _describe_task(self) -> str:
    t = self._task
    name = self._person[0]
    if t.kind == "schedule":
      first = name.split()[0]
      return (f'Schedule a 30-minute meeting titled "{t.title}" with {name} on {t.date} '
              f"at the first free slot at or after {hhmm(t.after)}, then email them the start "
              f"time. If {first} is away, invite and email the first other member of their "
              "team instead.")
    if t.kind == "cancel":
      return f"Cancel the event mentioned in the latest email from {name} and reply to them."
    if t.kind == "reschedule":
      return (f'"{t.title}" on {t.date} overlaps "{t.other}". Move it to the first '
              f'free slot of the same length at or after the end of "{t.other}", '
              f"then email {name} the new start time.")
    return f"Email {name} how many minutes of events you have on {t.date} (busy_minutes)."

  def _rules(self) -> tuple[str, ...]:
    rules = [
        f"The calendar covers {self._week[0]} to {self._week[-1]}; times are HH:MM on a "
        "15-minute grid from 08:00 to 20:00.",
        "A free slot lies inside working hours 09:00-18:00 and overlaps no event.",
        "Events you create or move may not overlap another event (409); a day holds at "
        f"most {MAX_DAY_EVENTS} events and an event at most {MAX_ATTENDEES} attendees.",
        "Attendees and recipients must be contact emails (422); unknown ids give 404.",
        f"Every contact's email is first.last@{self._domain}; searches list contacts by name.",
        "Lists come first, then count; busy_minutes is the sum of the listed durations.",
        "Every response ends with [total_events | unread | sent] for the whole account.",
    ]
    if self.steer == STEER_VACATION:
      name, email = self._person
      rules.append(f"{name} ({email}) is on vacation this week: invitations "
                   "to them are declined and they are dropped from the attendees.")
    elif self.steer:
      rules.append({STEER_LATE: "Creating or moving an event to end after 17:00 fails with 409.",
                    STEER_LUNCH: "Creating or moving an event into 12:00-13:00 fails with 409.",
                    STEER_SUBJECT: "Sending an email whose subject has 20 or more characters "
                                   "fails with 400."}[self.steer])
    return tuple(rules)

  # ------------------------------------------------------------------- step

  def step(self, action: str) -> StepResult:
    # Set when the outcome hangs on something the agent has not seen: the
    # status and everything with it is then revealed.
    self._unsure, self._tool = False, ""
    try:
      reply = self._dispatch(action)
      valid = True
    except _Fail as fail:
      reply = _Reply({"status": fail.status, "error": fail.error, **fail.extra},
                     {"error": fail.error, **fail.extra})
      valid = False
    if valid:
      self._note_contacts(reply.obj)
    success = valid and self._goal_reached()
    return StepResult(self._render(reply.obj), 1.0 if success else 0.0, success,
                      self._checks(reply), valid, {"success": success})

  def _dispatch(self, action: str) -> _Reply:
    try:
      name, args = toolcall.resolve(TOOLS, action)
    except toolcall.ToolCallRejected as e:
      raise _Fail(e.status, str(e)) from None
    self._tool = name
    return getattr(self, f"_do_{name}")(**args)

  def _checks(self, reply: _Reply) -> Checks:
    fields = {"status": str(reply.obj["status"]),
              **{k: str(v) for k, v in reply.fields.items()},
              **{k: str(v) for k, v in self._footer().items()}}
    include, hidden = reply.include, reply.revealed
    if self._unsure:
      include = dict.fromkeys(include, True)
      hidden = {"status", *reply.fields, _ACCOUNT_KEY.get(self._tool, "status")}
    revealed = [k for k in fields if k in hidden] + [item for item, r in include.items() if r]
    return Checks(tuple(include), tuple(reply.exclude), fields, tuple(revealed))

  def _render(self, obj: dict) -> str:
    footer = " | ".join(f"{k}: {v}" for k, v in self._footer().items())
    return f"{json.dumps(obj, ensure_ascii=False)}\n[{footer}]"

  def _footer(self) -> dict[str, int]:
    return {"total_events": self._total, "unread": self._unread, "sent": len(self._sent)}

  def _note_contacts(self, obj: Any) -> None:
    """Remembers contact emails a response showed (none can show before the
    contacts are drawn but the task's person, known from the start)."""
    if isinstance(obj, dict):
      for value in obj.values():
        self._note_contacts(value)
    elif isinstance(obj, list):
      for value in obj:
        self._note_contacts(value)
    elif isinstance(obj, str) and self._people is not None and self._contact(obj):
      self._contact_emails.add(obj)

  # ------------------------------------------------------------ validation

  def _check_date(self, date: str) -> None:
    if not _DATE_RE.match(date):
      raise _Fail(400, "argument 'date' must be YYYY-MM-DD")
    if date not in self._week:
      raise _Fail(400, f"date {date} is outside the calendar week")

  def _check_span(self, start: str, end: str) -> tuple[int, int]:
    span = []
    for key, value in (("start", start), ("end", end)):
      minutes = _grid_minutes(value)
      if minutes is None:
        raise _Fail(400, f"argument '{key}' must be HH:MM on a 15-minute grid, 08:00-20:00")
      span.append(minutes)
    if span[1] <= span[0]:
      raise _Fail(400, "end must be after start")
    return span[0], span[1]

  def _check_text(self, key: str, value: str, limit: int) -> None:
    if not 0 < len(value) <= limit or not _TEXT_RE.match(value):
      raise _Fail(400, f"argument '{key}' must be 1-{limit} letters, digits or punctuation")

  def _check_attendees(self, attendees: list) -> list[str]:
    if not all(isinstance(a, str) for a in attendees):
      raise _Fail(400, "argument 'attendees' must be an array of strings")
    if len(attendees) > MAX_ATTENDEES or len(set(attendees)) < len(attendees):
      raise _Fail(400, f"argument 'attendees' must hold at most {MAX_ATTENDEES} distinct emails")
    for a in attendees:
      if not self._is_contact(a):
        raise _Fail(422, f"attendee {a[:40]} is not a contact")
    return list(attendees)

  def _is_contact(self, email: str) -> bool:
    """Whether `email` is a contact; drawing the contacts, and marking the
    outcome unsure, only when what the agent has seen does not tell."""
    if email in self._contact_emails:
      return True
    form = _EMAIL_FORM.match(email)
    if self._all_contacts or not form or form[3] != self._domain:
      return False
    self._unsure = True
    return self._contact(email) is not None

  def _check_policy(self, start: int, end: int) -> None:
    if self.steer == STEER_LATE and end > LATE_END:
      raise _Fail(409, "meetings must end by 17:00")
    if self.steer == STEER_LUNCH and _overlaps((start, end), LUNCH):
      raise _Fail(409, "12:00-13:00 is protected for lunch")

  def _check_day(self, date: str, start: int, end: int, skip: str = "") -> None:
    """A conflict with another event of `date` (unsure unless the date was
    listed); the conflicting id is seen on that date when the agent knows it."""
    if date not in self._known_days:
      self._unsure = True
    for e in self._day(date):
      if e.id != skip and _overlaps((start, end), (e.start, e.end)):
        if not skip or skip in self._id_dates:
          self._id_dates[e.id] = date
        raise _Fail(409, f"conflicts with {e.id}", conflict=e.id)

  def _existing_event(self, event_id: str) -> Event:
    """The event `event_id`, drawing its day; unsure for an id never seen."""
    if event_id not in self._id_dates and event_id not in self._deleted:
      self._unsure = True
    date = next((d for d, ids in self._plan.items() if event_id in ids), None)
    if date is not None:
      self._day(date)
    for events in self._days.values():
      for e in events:
        if e.id == event_id:
          return e
    raise _Fail(404, f"no event {event_id[:40]}")

  def _see_event(self, event: Event) -> None:
    self._id_dates[event.id] = event.date
    self._full_ids.add(event.id)

  # ----------------------------------------------------------------- tools

  def _do_contacts_search(self, query: str) -> _Reply:
    q = query.strip().lower()
    hits = [c for c in self._contacts if q in c.name.lower() or q in c.email or q in c.team]
    # A contact shown whole before is known to match or not, one whose email
    # is known (hence the name) to match on them; the rest only a repeated
    # query or a query every email contains tells.
    sure = self._all_contacts or q in self._queries
    include = {}
    for c in hits:
      named = c.email in self._contact_emails and (q in c.name.lower() or q in c.email)
      hidden = not (sure or named or c.email in self._contact_records)
      include[c.name] = include[c.email] = hidden
    exclude = [c.email for c in self._contacts
               if c not in hits and c.email in self._contact_records]
    self._queries.add(q)
    self._contact_records.update(c.email for c in hits)
    self._all_contacts = self._all_contacts or q in f"@{self._domain}"
    obj = {"status": 200, "contacts": [dataclasses.asdict(c) for c in hits], "count": len(hits)}
    return _Reply(obj, {"count": len(hits)}, include, exclude, set() if sure else {"count"})

  def _do_calendar_list_events(self, date: str) -> _Reply:
    self._check_date(date)
    known = date in self._known_days
    day = self._day(date)
    busy = sum(e.end - e.start for e in day)
    include: dict[str, bool] = {}
    for e in day:
      _include(include, e.id, not (known or e.id in self._id_dates))
      _include(include, e.title, not (known or e.id in self._full_ids))
    exclude = [i for i, d in self._id_dates.items() if d != date] + self._deleted
    for e in day:
      self._see_event(e)
    self._known_days.add(date)
    self._listed.add(date)
    obj = {"status": 200, "date": date, "events": [_event_obj(e, False) for e in day],
           "count": len(day), "busy_minutes": busy}
    return _Reply(obj, {"date": date, "count": len(day), "busy_minutes": busy}, include,
                  exclude, set() if known else {"count", "busy_minutes"})

  def _do_calendar_create_event(self, title: str, date: str, start: str, end: str,
                                attendees: list) -> _Reply:
    self._check_text("title", title, 40)
    self._check_date(date)
    s, e = self._check_span(start, end)
    invited = self._check_attendees(attendees)
    self._check_policy(s, e)
    if date not in self._known_days:
      self._unsure = True
    if len(self._day(date)) >= MAX_DAY_EVENTS:
      raise _Fail(409, f"day is full ({MAX_DAY_EVENTS} events)")
    self._check_day(date, s, e)
    declined = [a for a in invited if a == self._vacation]
    event = Event(f"ev{self._next_event}", title, date, s, e,
                  [a for a in invited if a not in declined], original=False)
    self._next_event += 1
    self._days[date].append(event)
    self._event_ids.append(event.id)
    self._total += 1
    self._listed.discard(date)
    self._see_event(event)
    day_events = len(self._day(date))
    obj = {"status": 201, "event": _event_obj(event, True), "declined": declined,
           "accepted": len(event.attendees), "day_events": day_events}
    fields = {"id": event.id, "date": date, "start": start, "end": end,
              "accepted": len(event.attendees), "day_events": day_events}
    # The new id continues a numbering the agent never saw whole.
    hidden = {"id"} if date in self._known_days else {"id", "day_events"}
    return _Reply(obj, fields, dict.fromkeys(declined, False), [], hidden)

  def _do_calendar_delete_event(self, event_id: str) -> _Reply:
    dated, full = event_id in self._id_dates, event_id in self._full_ids
    event = self._existing_event(event_id)
    self._days[event.date].remove(event)
    self._deleted.append(event.id)
    self._total -= 1
    self._listed.discard(event.date)
    self._id_dates.pop(event.id, None)
    self._full_ids.discard(event.id)
    day_events = len(self._day(event.date))
    obj = {"status": 200, "deleted": event.id, "title": event.title, "date": event.date,
           "day_events": day_events}
    hidden = set() if dated else {"date"}
    if event.date not in self._known_days:
      hidden.add("day_events")
    return _Reply(obj, {"deleted": event.id, "date": event.date, "day_events": day_events},
                  {event.title: not full}, [], hidden)

  def _do_calendar_move_event(self, event_id: str, start: str, end: str) -> _Reply:
    full = event_id in self._full_ids
    event = self._existing_event(event_id)
    s, e = self._check_span(start, end)
    self._check_policy(s, e)
    self._check_day(event.date, s, e, skip=event.id)
    previous = f"{hhmm(event.start)}-{hhmm(event.end)}"
    event.start, event.end = s, e
    self._listed.discard(event.date)
    self._see_event(event)
    day_events = len(self._day(event.date))
    obj = {"status": 200, "event": _event_obj(event, True), "previous": previous,
           "day_events": day_events}
    fields = {"id": event.id, "start": start, "end": end, "previous": previous,
              "day_events": day_events}
    hidden = set() if full else {"previous"}
    if event.date not in self._known_days:
      hidden.add("day_events")
    return _Reply(obj, fields, {event.title: not full}, [], hidden)

  def _do_email_list_inbox(self) -> _Reply:
    messages = sorted(self._inbox, key=lambda m: m.time, reverse=True)
    include: dict[str, bool] = {}
    for m in messages:
      hidden = not (self._inbox_known or m.id in self._known_messages)
      _include(include, m.id, hidden)
      _include(include, m.subject, hidden)
    hidden_count = set() if self._inbox_known else {"count"}
    self._inbox_known = True
    self._known_messages.update(m.id for m in messages)
    obj = {"status": 200, "messages": [
        {"id": m.id, "from": m.sender, "subject": m.subject, "time": m.time, "read": m.read}
        for m in messages], "count": len(messages), "unread": self._unread}
    # unread is the account line's, which s_t shows.
    return _Reply(obj, {"count": len(messages), "unread": self._unread}, include, [],
                  hidden_count)

  def _do_email_read(self, message_id: str) -> _Reply:
    if not (self._inbox_known or message_id in self._known_messages):
      self._unsure = True
    message = next((m for m in self._inbox if m.id == message_id), None)
    if message is None:
      raise _Fail(404, f"no message {message_id[:40]}")
    body = self._body(message)
    if not message.read:
      self._unread -= 1
      message.read = True
    first_read = message.id not in self._bodies_seen
    self._known_messages.add(message.id)
    self._bodies_seen.add(message.id)
    obj = {"status": 200, "message": {"id": message.id, "from": message.sender,
                                      "subject": message.subject, "time": message.time,
                                      "body": body}}
    return _Reply(obj, {"id": message.id, "from": message.sender}, {body: first_read})

  def _do_email_send(self, to: str, subject: str, body: str) -> _Reply:
    if not self._is_contact(to):
      raise _Fail(422, f"recipient {to[:40]} is not a contact")
    self._check_text("subject", subject, 60)
    if not 0 < len(body) <= 300:
      raise _Fail(400, "argument 'body' must be 1-300 characters")
    if self.steer == STEER_SUBJECT and len(subject) >= SUBJECT_LIMIT:
      raise _Fail(400, f"subject must be under {SUBJECT_LIMIT} characters")
    sent = Sent(f"s{FIRST_SENT + len(self._sent)}", to, subject, body)
    self._sent.append(sent)
    obj = {"status": 200, "message": {"id": sent.id, "to": to, "subject": subject}}
    return _Reply(obj, {"id": sent.id, "to": to, "subject": subject})

  # ------------------------------------------------------------ world facts

  def _contact(self, email: str) -> Contact | None:
    return next((c for c in self._contacts if c.email == email), None)

  def _slot(self, date: str, after: int, duration: int, skip: str = "") -> int | None:
    """First free slot under the active steer, ignoring event `skip`."""
    spans = [(e.start, e.end) for e in self._day(date) if e.id != skip]
    return first_free(spans, after, duration, lunch=self.steer == STEER_LUNCH,
                      day_end=LATE_END if self.steer == STEER_LATE else DAY_END)

  def _placed(self, event: Event) -> bool:
    """True when `event` sits at the first free slot the task asks for."""
    t = self._task
    return (event.date == t.date and event.end - event.start == t.duration
            and self._slot(t.date, t.after, t.duration, skip=event.id) == event.start)

  def _invitee(self) -> str:
    """The task's person, or their first teammate by name when on vacation."""
    person = self._contact(self._task.person)
    if person.email != self._vacation:
      return person.email
    return next(c.email for c in self._contacts if c.team == person.team and c != person)

  def _meeting(self) -> Event | None:
    return next((e for e in self._day(self._task.date) if e.title == self._task.title
                 and self._invitee() in e.attendees and self._placed(e)), None)

  def _emailed(self, to: str, text: str) -> bool:
    return any(s.to == to and re.search(rf"(?<![\d:]){re.escape(text)}(?![\d:])", s.body)
               for s in self._sent)

  def _busy(self, date: str) -> int:
    return sum(e.end - e.start for e in self._day(date))

  def _goal_reached(self) -> bool:
    """Asked after every step, so it draws nothing: a goal about a day or an
    email not drawn yet cannot have been reached."""
    t = self._task
    if t.kind == "cancel":
      return (t.event_id in self._deleted) and any(s.to == t.person for s in self._sent)
    if t.date not in self._days:
      return False
    if t.kind == "schedule":
      meeting = self._meeting()
      return meeting is not None and self._emailed(self._invitee(), hhmm(meeting.start))
    if t.kind == "reschedule":
      event = next((e for e in self._days[t.date] if e.id == t.event_id), None)
      return (event is not None and self._placed(event)
              and self._emailed(t.person, hhmm(event.start)))
    return self._emailed(t.person, str(self._busy(t.date)))

  # ---------------------------------------------------------------- expert

  def change_of_intent(self, rng: random.Random) -> tuple[str, tuple[str, ...]] | None:
    """The user now wants an event (not the task's) deleted, one the states
    showed when there is one (else its day is listed first, so that the
    delete's outcome is one the states fix)."""
    dates = {i: d for d, ids in self._plan.items() for i in ids} | self._id_dates
    live = sorted(set(dates) - set(self._deleted) - {self._task.event_id})
    if not live:
      return None
    shown = [e for e in live if e in self._id_dates]
    eid = rng.choice(shown or live)
    listing = () if shown else (_call("calendar_list_events", date=dates[eid]),)
    return (f"Update: the user changed their mind and now wants event {eid} deleted instead.",
            (*listing, _call("calendar_delete_event", event_id=eid)))

  def expert_action(self) -> str:
    return getattr(self, f"_expert_{self._task.kind}")()

  def _subject(self, long: str, short: str) -> str:
    return short if self.steer == STEER_SUBJECT else long

  def _list_day(self) -> str:
    return _call("calendar_list_events", date=self._task.date)

  def _make_room(self) -> str:
    """Deletes the newest event added by someone else on the task's day."""
    extra = [e for e in self._day(self._task.date) if not e.original]
    if not extra:
      return self._list_day()  # nothing of ours to remove: give up
    newest = max(extra, key=lambda e: int(e.id[2:]))
    return _call("calendar_delete_event", event_id=newest.id)

  def _expert_schedule(self) -> str:
    t = self._task
    who = self._invitee()
    if who not in self._contact_records:
      person = self._contact(t.person)
      query = person.name if who == t.person else person.team
      return _call("contacts_search", query=query)
    meeting = self._meeting()
    if meeting is None:
      if t.date not in self._listed:
        return self._list_day()
      start = self._slot(t.date, t.after, 30)
      if start is None or len(self._day(t.date)) >= MAX_DAY_EVENTS:
        return self._make_room()
      return _call("calendar_create_event", title=t.title, date=t.date, start=hhmm(start),
                   end=hhmm(start + 30), attendees=[who])
    return _call("email_send", to=who, subject=self._subject(f"Meeting invite for {t.date}",
                                                             "Meeting time"),
                 body=f"{t.title} is booked on {t.date} from {hhmm(meeting.start)} "
                      f"to {hhmm(meeting.end)}.")

  def _expert_cancel(self) -> str:
    if not self._inbox_known:
      return _call("email_list_inbox")
    message = next(m for m in self._inbox if m.id == self._task.message_id)
    if message.id not in self._bodies_seen:
      return _call("email_read", message_id=message.id)
    t = self._task  # reading the email drew the event it names
    if t.event_id not in self._deleted:
      if t.date not in self._listed:
        return self._list_day()
      return _call("calendar_delete_event", event_id=t.event_id)
    return _call("email_send", to=t.person, subject=self._subject(f"Re: {message.subject}",
                                                                  "Cancelled"),
                 body="Done, the event is cancelled.")

  def _expert_reschedule(self) -> str:
    self._day(self._task.date)  # drawing the day fixes the task's event and times
    t = self._task
    event = next((e for e in self._days[t.date] if e.id == t.event_id), None)
    if event is None:
      return self._list_day()  # the event is gone: nothing left to do but look
    if not self._placed(event):
      if t.date not in self._listed:
        return self._list_day()
      start = self._slot(t.date, t.after, t.duration, skip=event.id)
      if start is None:
        return self._make_room()
      return _call("calendar_move_event", event_id=event.id, start=hhmm(start),
                   end=hhmm(start + t.duration))
    return _call("email_send", to=t.person, subject=self._subject(
        f"New time for {event.title}", "New time"),
                 body=f"{event.title} now starts at {hhmm(event.start)} on {t.date}.")

  def _expert_report(self) -> str:
    t = self._task
    if t.date not in self._listed:
      return self._list_day()
    if t.person not in self._contact_records:
      return _call("contacts_search", query=self._person[0])
    return _call("email_send", to=t.person, subject=self._subject(
        f"Busy minutes on {t.date}", "Busy minutes"),
                 body=f"I have {self._busy(t.date)} busy minutes that day.")

  # ------------------------------------------------------ random / invalid

  def random_action(self, rng: random.Random) -> str:
    kind = rng.choice([t.name for t in TOOLS])
    contact = rng.choice(self._contacts)
    date = rng.choice(self._week)
    start = rng.randrange(DAY_START, 17 * 60 + 31, 15)
    if kind == "contacts_search":
      return _call(kind, query=rng.choice((contact.name, contact.name.split()[0], contact.team)))
    if kind == "calendar_list_events":
      return _call(kind, date=date)
    if kind == "calendar_create_event":
      return _call(kind, title=rng.choice(_TITLES), date=date, start=hhmm(start),
                   end=hhmm(start + rng.choice((30, 60))), attendees=[contact.email])
    if kind == "calendar_delete_event":
      return _call(kind, event_id=rng.choice(self._event_ids))
    if kind == "calendar_move_event":
      return _call(kind, event_id=rng.choice(self._event_ids), start=hhmm(start),
                   end=hhmm(start + 30))
    if kind == "email_list_inbox":
      return _call(kind)
    if kind == "email_read":
      return _call(kind, message_id=rng.choice(self._inbox).id)
    return _call(kind, to=contact.email, subject=rng.choice(_RANDOM_SUBJECTS),
                 body=rng.choice(_RANDOM_BODIES))

  def invalid_action(self, rng: random.Random) -> str:
    """One of the ways a call certainly fails: each maps to one error status."""
    date = rng.choice(self._week)
    email = rng.choice(self._contacts).email
    before = (datetime.date.fromisoformat(self._week[0]) - datetime.timedelta(days=7)).isoformat()
    return rng.choice((
        _call(rng.choice(_BAD_TOOLS), target=date),
        f'calendar_list_events({{"date": {date.replace("-", "")}}})',
        _call("calendar_list_events", date=before),
        _call("email_send", to=email),
        _call("calendar_delete_event", event_id="ev999"),
        _call("email_read", message_id="m999"),
        _call("calendar_create_event", title="Sync", date=date, start="10:00", end="10:30",
              attendees=["someone@nowhere.net"]),
        _call("calendar_create_event", title="Sync", date=date, start="14:00", end="13:00",
              attendees=[email]),
        _call("calendar_move_event", event_id="ev999", start="25:00", end="26:00"),
        "open the calendar",
    ))

  # ----------------------------------------------------------- state check

  @classmethod
  def check(cls, spec: Spec, step: Step, prediction: str) -> CheckResult:
    return _check(spec, step, prediction if isinstance(prediction, str) else "")


def _minutes(text: str) -> int:
  return int(text[:2]) * 60 + int(text[3:])


def _grid_minutes(text: Any) -> int | None:
  """Minutes of an HH:MM time on the 15-minute grid within 08:00-20:00."""
  m = _TIME_RE.match(text) if isinstance(text, str) else None
  minutes = int(m[1]) * 60 + int(m[2]) if m else -1
  return minutes if minutes % 15 == 0 and EARLIEST <= minutes <= LATEST else None


def _strict_slot(events: list[Event], after: int, duration: int) -> int | None:
  """The free slot under every steer at once: generation keeps it existing."""
  return first_free([(e.start, e.end) for e in events], after, duration, lunch=True,
                    day_end=LATE_END)


def _mail_times(rng: random.Random, monday: str, n: int) -> list[str]:
  """n distinct times before Monday 09:00 (Thursday, Friday, Monday), ascending."""
  day0 = datetime.date.fromisoformat(monday)
  stamps = set()
  while len(stamps) < n:
    back = rng.choice((4, 3, 0))
    hour = rng.randint(7, 8) if back == 0 else rng.randint(8, 17)
    day = (day0 - datetime.timedelta(days=back)).isoformat()
    stamps.add(f"{day} {hour:02d}:{rng.randrange(0, 60, 5):02d}")
  return sorted(stamps)


def _include(include: dict[str, bool], item: str, hidden: bool) -> None:
  """Adds a must_include item: revealed only if every reason to list it is."""
  include[item] = include.get(item, True) and hidden


def _event_obj(e: Event, with_date: bool) -> dict:
  obj = {"id": e.id, "title": e.title}
  if with_date:
    obj["date"] = e.date
  obj.update({"start": hhmm(e.start), "end": hhmm(e.end), "attendees": list(e.attendees)})
  return obj


# --------------------------------------------------------------------------
# State check: the JSON response and the account line, parsed; determined
# facts compared, revealed ones reported, invented content held to the rules
# and tool schemas (nothing here reads hidden state: only spec, step, text).


class _World(NamedTuple):
  """What the spec's first state shows: the user's domain, the week and how
  many events the account started with."""
  domain: str
  week: tuple[str, ...]
  events: int


class _Context(NamedTuple):
  world: _World
  args: dict
  state: str  # s_t
  before: dict[str, str] | None  # s_t's account line


def _check(spec: Spec, step: Step, prediction: str) -> CheckResult:
  checks = step.checks
  obj, footer = _parse(prediction)
  entries = generic.fact_entries(checks, prediction,
                                 lambda k, v: _lookup(obj, footer, k) == v)
  determined = {FORMAT: obj is not None and footer is not None, **entries.determined}
  revealed = dict(entries.revealed)
  world = _world(spec)
  # A spec whose first state is not a calendar account leaves the rules unknown.
  if obj is None or footer is None or world is None:
    return CheckResult(determined, revealed, {})
  return CheckResult(determined, revealed, _constraints(world, step, obj, footer))


def _parse(text: str) -> tuple[dict | None, dict[str, str] | None]:
  """(JSON object, account line facts); either is None when it does not parse."""
  footer = parse_status_line(text)
  if footer is not None and (tuple(footer) != _FOOTER_KEYS or not all(
      v.isascii() and v.isdigit() for v in footer.values())):
    footer = None
  body = text[:text.rstrip().rfind("[")] if footer is not None else text
  try:
    obj = json.loads(body)
  except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
    obj = None
  return (obj if isinstance(obj, dict) else None), footer


def _world(spec: Spec) -> _World | None:
  obj, footer = _parse(spec.initial_state)
  try:
    return _World(obj["user"].split("@", 1)[1], tuple(obj["week"]), int(footer["total_events"]))
  except (TypeError, KeyError, IndexError, AttributeError, ValueError):
    return None


def _as_text(value: Any) -> str | None:
  if isinstance(value, bool):
    return "true" if value else "false"
  if isinstance(value, (int, str)):
    return str(value)
  return None


def _lookup(obj: dict | None, footer: dict | None, key: str) -> str | None:
  """A fact by key: the account line, the top level, then nested objects."""
  if key in _FOOTER_KEYS:
    return footer.get(key) if footer else None
  if obj is None:
    return None
  if key in obj:
    return _as_text(obj[key])
  for value in obj.values():
    if isinstance(value, dict) and key in value:
      return _as_text(value[key])
  return None


def _holds(claim) -> bool:
  """Evaluates one claim about a prediction; a malformed prediction fails it."""
  try:
    return bool(claim())
  except (TypeError, KeyError, ValueError, AttributeError, IndexError):
    return False


def _constraints(world: _World, step: Step, obj: dict, footer: dict) -> dict[str, bool]:
  """Rules the predicted response must keep whatever the hidden state: the
  tool's statuses and response keys, the account line's arithmetic, and the
  success's own rules (its content well-formed, its totals its items')."""
  try:
    tool, args = toolcall.parse_tool_call(step.action)
  except toolcall.ToolCallError:
    tool, args = "", {}
  status = obj.get("status")
  success = tool in _SUCCESS_KEYS and status == (201 if tool == "calendar_create_event" else 200)
  before = _parse(step.state)[1]
  out = {"status_allowed": type(status) is int
                           and status in _STATUSES.get(tool, _UNKNOWN_TOOL_STATUSES)}
  if success:
    out["response_shape"] = set(obj) == {"status", *_SUCCESS_KEYS[tool]}
  else:
    out["response_shape"] = _holds(lambda: set(obj) <= set(_ERROR_KEYS)
                                   and isinstance(obj["error"], str) and obj["error"] != ""
                                   and ("conflict" not in obj or _event_id_ok(obj["conflict"])))
    out["error_fits_call"] = _holds(lambda: _error_fits(tool, args, obj))
  if before is not None:
    out["account_line_follows"] = _account_follows(tool, success, before, footer)
  if success:
    ctx = _Context(world, args, step.state, before)
    out.update({name: _holds(lambda rule=rule: rule(obj, footer, ctx))
                for name, rule in _SUCCESS_RULES[tool].items()})
  return out


def _error_fits(tool: str, args: dict, obj: dict) -> bool:
  """For the failures hidden state decides (no such id, a conflict, not a
  contact), the error is the one this call gets; `conflict` comes with a
  conflict only. Other errors follow from the call and are determined."""
  status, error = obj["status"], obj["error"]
  if status == 404 and tool in ("calendar_delete_event", "calendar_move_event"):
    allowed = [f"no event {str(args['event_id'])[:40]}"]
  elif status == 404 and tool == "email_read":
    allowed = [f"no message {str(args['message_id'])[:40]}"]
  elif status == 409:
    allowed = [f"conflicts with {obj.get('conflict')}", f"day is full ({MAX_DAY_EVENTS} events)",
               "meetings must end by 17:00", "12:00-13:00 is protected for lunch"]
  elif status == 422 and tool == "calendar_create_event":
    allowed = [f"attendee {str(a)[:40]} is not a contact" for a in args["attendees"]]
  elif status == 422 and tool == "email_send":
    allowed = [f"recipient {str(args['to'])[:40]} is not a contact"]
  else:
    return "conflict" not in obj
  return error in [_Fail(status, a).error for a in allowed] and (
      ("conflict" in obj) == error.startswith("conflicts with "))


def _account_follows(tool: str, success: bool, before: dict, footer: dict) -> bool:
  """Only a created or deleted event moves total_events, a read unread, a send sent."""
  total, unread, sent = (int(before[k]) for k in _FOOTER_KEYS)
  now_total, now_unread, now_sent = (int(footer[k]) for k in _FOOTER_KEYS)
  change = {"calendar_create_event": 1, "calendar_delete_event": -1}.get(tool, 0) * success
  read = success and tool == "email_read"
  return (now_total == total + change and now_sent == sent + (success and tool == "email_send")
          and unread - read <= now_unread <= unread)


def _items(value: Any) -> list:
  if not isinstance(value, list):
    raise TypeError("not a list")
  return value


def _int(value: Any) -> int:
  if type(value) is not int:
    raise TypeError("not an integer")
  return value


def _in_order(values: list) -> bool:
  return values == sorted(values)


def _distinct(values: list) -> bool:
  return len(set(values)) == len(values)


def _text_ok(value: Any, limit: int) -> bool:
  return isinstance(value, str) and 0 < len(value) <= limit and bool(_TEXT_RE.match(value))


def _event_id_ok(value: Any) -> bool:
  return isinstance(value, str) and bool(_EVENT_ID.match(value))


def _email_ok(value: Any, world: _World) -> bool:
  """A contact's form: first.last@ the user's domain, with the world's names."""
  m = _EMAIL_FORM.match(value) if isinstance(value, str) else None
  return bool(m) and m[1].capitalize() in _FIRST and m[2].capitalize() in _LAST and (
      m[3] == world.domain)


def _span(event: dict) -> int:
  return _grid_minutes(event["end"]) - _grid_minutes(event["start"])


def _event_ok(event: dict, world: _World, dated: bool) -> bool:
  keys = {"id", "title", "start", "end", "attendees"} | ({"date"} if dated else set())
  people = _items(event["attendees"])
  return (set(event) == keys and _event_id_ok(event["id"]) and _text_ok(event["title"], 40)
          and _span(event) > 0 and len(people) <= MAX_ATTENDEES and _distinct(people)
          and all(_email_ok(a, world) for a in people)
          and (not dated or event["date"] in world.week))


def _contact_ok(contact: dict, world: _World) -> bool:
  first, last = contact["name"].split(" ")
  return (set(contact) == {"name", "email", "team"} and first in _FIRST and last in _LAST
          and contact["email"] == f"{first}.{last}@{world.domain}".lower()
          and contact["team"] in _TEAMS)


def _mail_time_ok(value: Any, world: _World) -> bool:
  """YYYY-MM-DD HH:MM of a real day, received no later than today."""
  m = _MAIL_TIME.match(value) if isinstance(value, str) else None
  return bool(m) and bool(datetime.date.fromisoformat(m[1])) and m[1] <= world.week[0]


def _message_ok(message: dict, world: _World, keys: set[str]) -> bool:
  return (set(message) == keys and isinstance(message["id"], str)
          and bool(_MESSAGE_ID.match(message["id"])) and _email_ok(message["from"], world)
          and _text_ok(message["subject"], 60) and _mail_time_ok(message["time"], world))


def _query_matches(contact: dict, query: Any) -> bool:
  q = query.strip().lower()
  return q in contact["name"].lower() or q in contact["email"] or q in contact["team"]


def _new_id(event_id: str, ctx: _Context) -> bool:
  """Above every id the account started with and nowhere in s_t."""
  return (int(_EVENT_ID.match(event_id)[1]) >= FIRST_EVENT + ctx.world.events
          and not re.search(rf"\b{re.escape(event_id)}\b", ctx.state))


def _previous_ok(value: str) -> bool:
  start, end = value.split("-")
  return _grid_minutes(end) - _grid_minutes(start) > 0


def _body_dates_in_week(body: str, world: _World) -> bool:
  return all(d in world.week for d in _BODY_DATE.findall(body))


# Per tool, the rules of a successful response: name -> claim(obj, footer, ctx).
_SUCCESS_RULES = {
    "contacts_search": {
        "contacts_well_formed": lambda o, f, c: all(
            _contact_ok(p, c.world) for p in _items(o["contacts"])),
        "contacts_match_query": lambda o, f, c: all(
            _query_matches(p, c.args["query"]) for p in o["contacts"]),
        "contacts_in_order": lambda o, f, c: _in_order([p["name"] for p in o["contacts"]])
        and _distinct([p["email"] for p in o["contacts"]]),
        "count_matches_items": lambda o, f, c: _int(o["count"]) == len(_items(o["contacts"])),
    },
    "calendar_list_events": {
        "events_well_formed": lambda o, f, c: all(
            _event_ok(e, c.world, dated=False) for e in _items(o["events"])),
        "events_in_order": lambda o, f, c: _in_order([(e["start"], e["id"]) for e in o["events"]])
        and _distinct([e["id"] for e in o["events"]]),
        "count_matches_items": lambda o, f, c: _int(o["count"]) == len(_items(o["events"]))
        <= MAX_DAY_EVENTS,
        "busy_minutes_is_sum": lambda o, f, c: _int(o["busy_minutes"]) == sum(
            _span(e) for e in _items(o["events"])),
        "count_within_total": lambda o, f, c: _int(o["count"]) <= int(f["total_events"]),
        "response_fits_call": lambda o, f, c: o["date"] == c.args["date"],
    },
    "calendar_create_event": {
        "event_well_formed": lambda o, f, c: _event_ok(o["event"], c.world, dated=True),
        "attendance_consistent": lambda o, f, c: _int(o["accepted"]) == len(
            o["event"]["attendees"]) and all(_email_ok(a, c.world) for a in _items(o["declined"]))
        and not set(o["declined"]) & set(o["event"]["attendees"]),
        "day_events_in_range": lambda o, f, c: 1 <= _int(o["day_events"]) <= MAX_DAY_EVENTS,
        "new_id_is_new": lambda o, f, c: _new_id(o["event"]["id"], c),
        "response_fits_call": lambda o, f, c: all(
            o["event"][k] == c.args[k] for k in ("title", "date", "start", "end"))
        and sorted(o["event"]["attendees"] + o["declined"]) == sorted(c.args["attendees"]),
    },
    "calendar_delete_event": {
        "deleted_event_well_formed": lambda o, f, c: _event_id_ok(o["deleted"])
        and _text_ok(o["title"], 40) and o["date"] in c.world.week,
        "day_events_in_range": lambda o, f, c: 0 <= _int(o["day_events"]) < MAX_DAY_EVENTS,
        "response_fits_call": lambda o, f, c: o["deleted"] == c.args["event_id"],
    },
    "calendar_move_event": {
        "event_well_formed": lambda o, f, c: _event_ok(o["event"], c.world, dated=True),
        "previous_well_formed": lambda o, f, c: _previous_ok(o["previous"]),
        "day_events_in_range": lambda o, f, c: 1 <= _int(o["day_events"]) <= MAX_DAY_EVENTS,
        "response_fits_call": lambda o, f, c: all(
            o["event"][k] == c.args[k] for k in ("start", "end"))
        and o["event"]["id"] == c.args["event_id"],
    },
    "email_list_inbox": {
        "messages_well_formed": lambda o, f, c: all(
            _message_ok(m, c.world, {"id", "from", "subject", "time", "read"})
            and type(m["read"]) is bool for m in _items(o["messages"])),
        "messages_in_order": lambda o, f, c: _in_order([m["time"] for m in o["messages"]][::-1])
        and _distinct([m["id"] for m in o["messages"]]),
        "count_matches_items": lambda o, f, c: _int(o["count"]) == len(_items(o["messages"])),
        "unread_matches_flags": lambda o, f, c: _int(o["unread"]) == sum(
            m["read"] is False for m in o["messages"]),
        "unread_matches_account": lambda o, f, c: _int(o["unread"]) == int(f["unread"]),
    },
    "email_read": {
        "message_well_formed": lambda o, f, c: _message_ok(
            o["message"], c.world, {"id", "from", "subject", "time", "body"})
        and isinstance(o["message"]["body"], str) and 0 < len(o["message"]["body"]) <= 300,
        "body_dates_in_week": lambda o, f, c: _body_dates_in_week(o["message"]["body"], c.world),
        "response_fits_call": lambda o, f, c: o["message"]["id"] == c.args["message_id"],
    },
    "email_send": {
        "sent_message_well_formed": lambda o, f, c: set(o["message"]) == {"id", "to", "subject"}
        and _email_ok(o["message"]["to"], c.world) and _text_ok(o["message"]["subject"], 60),
        "sent_id_follows": lambda o, f, c: o["message"]["id"]
        == f"s{FIRST_SENT + int(c.before['sent'])}",
        "response_fits_call": lambda o, f, c: o["message"]["to"] == c.args["to"]
        and o["message"]["subject"] == c.args["subject"],
    },
}
