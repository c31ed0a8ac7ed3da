"""Calendar apps: an AppWorld-like account with contacts, a calendar and email.

World. One user's work week (Monday to Friday of a seeded week). The contacts
app holds 6-8 people (name, email, team; every team has at least two). The
calendar holds 1-4 events a day (id, title, start, end, attendees by email).
The inbox holds 3-5 messages whose bodies stay hidden until read; the sent
folder starts empty. Actions are tool calls `name({"arg": value})` parsed and
schema-checked by `toolcall`; responses are JSON with an HTTP-like status:
400 bad arguments, 404 unknown id, 409 time conflict or policy, 422 unknown
tool, attendee or recipient.

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
from typing import Any

from mdlm_wm.data.schema import Checks, Spec, Step
from mdlm_wm.envs import toolcall
from mdlm_wm.envs.base import Env, StepResult, register

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

DAY_START, DAY_END, LATE_END = 9 * 60, 18 * 60, 17 * 60
LUNCH = (12 * 60, 13 * 60)
MAX_DAY_EVENTS = 6
MAX_ATTENDEES = 2
SUBJECT_LIMIT = 20

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

_FOOTER = re.compile(r"\[total_events: (\d+) \| unread: (\d+) \| sent: (\d+)\]\s*$")
_FOOTER_KEYS = ("total_events", "unread", "sent")
_TIME_RE = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TEXT_RE = re.compile(r"^[A-Za-z0-9 :&',.?!-]+$")


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
  body: str
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
  date: str
  after: int = 0
  duration: int = 30
  title: str = ""
  event_id: str = ""
  message_id: str = ""
  other: str = ""  # reschedule: title of the event it overlaps


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


@register
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
    self.steer = steer
    self._week = self._make_week(rng)
    self._contacts = self._make_contacts(rng)
    self._events: list[Event] = []
    self._deleted: list[str] = []
    self._inbox: list[Message] = []
    self._sent: list[Sent] = []
    kind = rng.choice(("schedule", "cancel", "reschedule", "report"))
    task, ref = getattr(self, f"_build_{kind}")(rng)
    if not self._inbox:
      self._random_inbox(rng)
    self._assign_ids(rng)
    self._task = dataclasses.replace(task, event_id=ref.id) if ref else task
    self._next_event = 101 + len(self._events)
    self._vacation = self._task.person if steer == STEER_VACATION else ""
    # What the agent has observed so far: the expert plans from these so that
    # its trajectories look up what they use.
    self._known: set[str] = set()
    self._listed: set[str] = set()
    self._inbox_listed = False
    first = self._render({"status": 200, "user": f"me@{self._domain}", "today": self._week[0],
                          "week": self._week, "apps": ["contacts", "calendar", "email"]})
    spec = Spec(initial_state=first, task=self._describe_task(), tools=TOOLS,
                rules=self._rules(), steer=steer)
    return spec, first

  def _make_week(self, rng: random.Random) -> list[str]:
    monday = datetime.date(2024, 1, 1) + datetime.timedelta(weeks=rng.randrange(52))
    return [(monday + datetime.timedelta(days=i)).isoformat() for i in range(5)]

  def _make_contacts(self, rng: random.Random) -> list[Contact]:
    n = rng.randint(6, 8)
    self._domain = rng.choice(_DOMAINS)
    teams = rng.sample(_TEAMS, 3)
    # Distinct first and last names keep every email and name from being a
    # substring of another, so must_include/must_exclude stay unambiguous.
    people = zip(rng.sample(_FIRST, n), rng.sample(_LAST, n))
    contacts = [Contact(f"{f} {l}", f"{f}.{l}@{self._domain}".lower(), teams[i % 3])
                for i, (f, l) in enumerate(people)]
    return sorted(contacts, key=lambda c: c.name)

  def _fill_calendar(self, rng: random.Random, fixed: list[Event], feasible) -> None:
    """Adds 1-4 random events a day around `fixed`, keeping `feasible(events)`."""
    self._events = list(fixed)
    for date in self._week:
      for _ in range(rng.randint(1, 4) - sum(e.date == date for e in fixed)):
        self._add_random_event(rng, date, feasible)

  def _add_random_event(self, rng: random.Random, date: str, feasible) -> None:
    day = self._day(date)
    used = {e.title for e in day}
    for _ in range(20):
      duration = rng.choice((30, 45, 60, 90))
      start = rng.randrange(DAY_START, DAY_END - duration + 1, 15)
      if any(_overlaps((start, start + duration), (e.start, e.end)) for e in day):
        continue
      title = rng.choice([t for t in _TITLES if t not in used])
      people = rng.sample(self._contacts, rng.randint(1, MAX_ATTENDEES))
      event = Event("", title, date, start, start + duration, [c.email for c in people])
      if feasible(self._events + [event]):
        self._events.append(event)
        return

  def _assign_ids(self, rng: random.Random) -> None:
    """Ids in shuffled order, so that id order tells nothing about time."""
    order = list(range(len(self._events)))
    rng.shuffle(order)
    for number, i in enumerate(order, start=101):
      self._events[i].id = f"ev{number}"

  def _strict_slot(self, events: list[Event], date: str, after: int, duration: int,
                   skip: Event | None = None) -> int | None:
    """The free slot under every steer at once: generation keeps it existing."""
    spans = [(e.start, e.end) for e in events if e.date == date and e is not skip]
    return first_free(spans, after, duration, lunch=True, day_end=LATE_END)

  # Each builder fills the calendar (and the inbox when the task needs one)
  # and returns the task with the event it is about, whose id is not known
  # until ids are shuffled in.

  def _build_schedule(self, rng: random.Random) -> tuple[Task, Event | None]:
    person = rng.choice(self._contacts)
    date, after = rng.choice(self._week), _minutes(rng.choice(_AFTER))
    fixed = []
    if rng.random() < 0.6:  # a meeting covering `after` makes the search matter
      start = after - 15 * rng.randint(0, 2)
      fixed.append(Event("", rng.choice(_TITLES), date, start, start + 60,
                         [rng.choice(self._contacts).email]))
    self._fill_calendar(rng, fixed, lambda evs: self._strict_slot(evs, date, after, 30) is not None)
    title = f"{rng.choice(_TOPICS)} sync"
    return Task("schedule", person.email, date, after, 30, title), None

  def _build_reschedule(self, rng: random.Random) -> tuple[Task, Event | None]:
    person = rng.choice(self._contacts)
    date = rng.choice(self._week)
    b_start = rng.randrange(DAY_START, 13 * 60 + 1, 15)
    other = Event("", rng.choice(_TITLES), date, b_start, b_start + rng.choice((60, 90)),
                  [rng.choice(self._contacts).email])
    a_start = b_start + rng.choice((15, 30))
    title = rng.choice([t for t in _TITLES if t != other.title])
    moved = Event("", title, date, a_start, a_start + rng.choice((30, 45, 60)), [person.email])
    duration = moved.end - moved.start
    self._fill_calendar(rng, [other, moved], lambda evs: self._strict_slot(
        evs, date, other.end, duration, skip=moved) is not None)
    return Task("reschedule", person.email, date, other.end, duration, title,
                other=other.title), moved

  def _build_cancel(self, rng: random.Random) -> tuple[Task, Event | None]:
    person = rng.choice(self._contacts)
    self._fill_calendar(rng, [], lambda evs: True)
    target, decoy = rng.sample(self._events, 2)
    others = [c for c in self._contacts if c != person]
    times = self._mail_times(rng, rng.randint(3, 5))
    late = rng.randrange(1, len(times))
    early = rng.randrange(late)
    # Both messages ask for a cancellation, so only their times tell which
    # one the task means.
    late_subject, early_subject = rng.sample(_CANCEL_SUBJECTS, 2)
    for i, time in enumerate(times):
      if i == late:
        self._mail(person.email, late_subject, time, False,
                   f"Change of plan: please cancel {target.title} on {target.date} instead.")
      elif i == early:
        self._mail(person.email, early_subject, time, rng.random() < 0.5,
                   f"Please cancel {decoy.title} on {decoy.date}.")
      else:
        self._random_mail(rng, rng.choice(others).email, time)
    self._assign_message_ids(rng)
    return Task("cancel", person.email, target.date, message_id=self._inbox[late].id), target

  def _build_report(self, rng: random.Random) -> tuple[Task, Event | None]:
    person = rng.choice(self._contacts)
    self._fill_calendar(rng, [], lambda evs: True)
    return Task("report", person.email, rng.choice(self._week)), None

  def _random_inbox(self, rng: random.Random) -> None:
    for time in self._mail_times(rng, rng.randint(3, 5)):
      self._random_mail(rng, rng.choice(self._contacts).email, time)
    self._assign_message_ids(rng)

  def _mail_times(self, rng: random.Random, n: int) -> list[str]:
    """n distinct times before Monday 09:00 (Thursday, Friday, Monday), ascending."""
    monday = datetime.date.fromisoformat(self._week[0])
    stamps = set()
    while len(stamps) < n:
      back = rng.choice((4, 3, 0))
      hour = rng.randint(7, 8) if back == 0 else rng.randint(8, 17)
      day = (monday - datetime.timedelta(days=back)).isoformat()
      stamps.add(f"{day} {hour:02d}:{rng.randrange(0, 60, 5):02d}")
    return sorted(stamps)

  def _mail(self, sender: str, subject: str, time: str, read: bool, body: str) -> None:
    self._inbox.append(Message("", sender, subject, time, body, read))

  def _random_mail(self, rng: random.Random, sender: str, time: str) -> None:
    self._mail(sender, rng.choice(_NOTE_SUBJECTS), time, rng.random() < 0.4,
               rng.choice(_NOTE_BODIES))

  def _assign_message_ids(self, rng: random.Random) -> None:
    for message, number in zip(self._inbox, rng.sample(range(201, 300), len(self._inbox))):
      message.id = f"m{number}"

  def _describe_task(self) -> str:
    t = self._task
    person = self._contact(t.person)
    if t.kind == "schedule":
      first = person.name.split()[0]
      return (f'Schedule a 30-minute meeting titled "{t.title}" with {person.name} on {t.date} '
              f"at the first free slot at or after {hhmm(t.after)}, then email them the start "
              f"time. If {first} is away, invite and email the first other member of their "
              "team instead.")
    if t.kind == "cancel":
      return f"Cancel the event mentioned in the latest email from {person.name} and reply to them."
    if t.kind == "reschedule":
      return (f'"{t.title}" on {t.date} overlaps "{t.other}". Move it to the first '
              f'free slot of the same length at or after the end of "{t.other}", '
              f"then email {person.name} the new start time.")
    return f"Email {person.name} how many minutes of events you have on {t.date} (busy_minutes)."

  def _rules(self) -> tuple[str, ...]:
    rules = [
        f"The calendar covers {self._week[0]} to {self._week[-1]}; times are HH:MM on a "
        "15-minute grid from 08:00 to 20:00.",
        "A free slot lies inside working hours 09:00-18:00 and overlaps no event.",
        "Events you create or move may not overlap another event (409); a day holds at "
        f"most {MAX_DAY_EVENTS} events and an event at most {MAX_ATTENDEES} attendees.",
        "Attendees and recipients must be contact emails (422); unknown ids give 404.",
        "Lists come first, then count; busy_minutes is the sum of the listed durations.",
        "Every response ends with [total_events | unread | sent] for the whole account.",
    ]
    if self.steer == STEER_VACATION:
      person = self._contact(self._task.person)
      rules.append(f"{person.name} ({person.email}) is on vacation this week: invitations "
                   "to them are declined and they are dropped from the attendees.")
    elif self.steer:
      rules.append({STEER_LATE: "Creating or moving an event to end after 17:00 fails with 409.",
                    STEER_LUNCH: "Creating or moving an event into 12:00-13:00 fails with 409.",
                    STEER_SUBJECT: "Sending an email whose subject has 20 or more characters "
                                   "fails with 400."}[self.steer])
    return tuple(rules)

  # ------------------------------------------------------------------- step

  def step(self, action: str) -> StepResult:
    try:
      obj, fields, include, exclude = self._dispatch(action)
      valid = True
    except _Fail as fail:
      obj = {"status": fail.status, "error": fail.error, **fail.extra}
      fields, include, exclude = {"error": fail.error, **fail.extra}, [], []
      valid = False
    if valid:
      self._note_seen(obj)
    success = valid and self._goal_reached()
    text = self._render(obj)
    checks = Checks(tuple(include), tuple(exclude), self._fields(obj["status"], fields))
    return StepResult(text, 1.0 if success else 0.0, success, checks, valid,
                      {"success": success})

  def _dispatch(self, action: str):
    try:
      name, args = toolcall.parse_tool_call(action)
    except toolcall.ToolCallError as e:
      raise _Fail(400, str(e)) from None
    spec = toolcall.find_tool(TOOLS, name)
    if spec is None:
      raise _Fail(422, f"unknown tool {name}")
    errors = toolcall.validate_args(spec, args)
    if errors:
      raise _Fail(400, "; ".join(errors))
    return getattr(self, f"_do_{name}")(**args)

  def _render(self, obj: dict) -> str:
    footer = " | ".join(f"{k}: {v}" for k, v in self._footer().items())
    return f"{json.dumps(obj, ensure_ascii=False)}\n[{footer}]"

  def _footer(self) -> dict[str, int]:
    return {"total_events": len(self._events),
            "unread": sum(not m.read for m in self._inbox),
            "sent": len(self._sent)}

  def _fields(self, status: int, fields: dict[str, Any]) -> dict[str, str]:
    out = {"status": str(status), **{k: str(v) for k, v in fields.items()}}
    out.update({k: str(v) for k, v in self._footer().items()})
    return out

  def _note_seen(self, obj: Any) -> None:
    """Remembers contact emails a response revealed to the agent."""
    if isinstance(obj, dict):
      for value in obj.values():
        self._note_seen(value)
    elif isinstance(obj, list):
      for value in obj:
        self._note_seen(value)
    elif isinstance(obj, str) and any(c.email == obj for c in self._contacts):
      self._known.add(obj)

  # ------------------------------------------------------------ validation

  def _check_date(self, date: str) -> None:
    if not _DATE_RE.match(date):
      raise _Fail(400, "argument 'date' must be YYYY-MM-DD")
    if date not in self._week:
      raise _Fail(400, f"date {date} is outside the calendar week")

  def _check_span(self, start: str, end: str) -> tuple[int, int]:
    span = []
    for key, value in (("start", start), ("end", end)):
      m = _TIME_RE.match(value)
      minutes = int(m.group(1)) * 60 + int(m.group(2)) if m else -1
      if minutes % 15 or not 8 * 60 <= minutes <= 20 * 60:
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
      if self._contact(a) is None:
        raise _Fail(422, f"attendee {a[:40]} is not a contact")
    return list(attendees)

  def _check_policy(self, start: int, end: int) -> None:
    if self.steer == STEER_LATE and end > LATE_END:
      raise _Fail(409, "meetings must end by 17:00")
    if self.steer == STEER_LUNCH and _overlaps((start, end), LUNCH):
      raise _Fail(409, "12:00-13:00 is protected for lunch")

  def _check_conflict(self, date: str, start: int, end: int, skip: str = "") -> None:
    for e in self._day(date):
      if e.id != skip and _overlaps((start, end), (e.start, e.end)):
        raise _Fail(409, f"conflicts with {e.id}", conflict=e.id)

  def _find_event(self, event_id: str) -> Event:
    for e in self._events:
      if e.id == event_id:
        return e
    raise _Fail(404, f"no event {event_id[:40]}")

  # ----------------------------------------------------------------- tools

  def _do_contacts_search(self, query: str):
    q = query.strip().lower()
    hits = [c for c in self._contacts if q in c.name.lower() or q in c.email or q in c.team]
    obj = {"status": 200, "contacts": [dataclasses.asdict(c) for c in hits], "count": len(hits)}
    include = [c.name for c in hits] + [c.email for c in hits]
    exclude = [c.email for c in self._contacts if c not in hits]
    return obj, {"count": len(hits)}, include, exclude

  def _do_calendar_list_events(self, date: str):
    self._check_date(date)
    day = self._day(date)
    busy = sum(e.end - e.start for e in day)
    obj = {"status": 200, "date": date, "events": [_event_obj(e, False) for e in day],
           "count": len(day), "busy_minutes": busy}
    self._listed.add(date)
    include = [e.id for e in day] + [e.title for e in day]
    exclude = [e.id for e in self._events if e.date != date] + self._deleted
    return obj, {"date": date, "count": len(day), "busy_minutes": busy}, include, exclude

  def _do_calendar_create_event(self, title: str, date: str, start: str, end: str,
                                attendees: list):
    self._check_text("title", title, 40)
    self._check_date(date)
    s, e = self._check_span(start, end)
    invited = self._check_attendees(attendees)
    self._check_policy(s, e)
    if len(self._day(date)) >= MAX_DAY_EVENTS:
      raise _Fail(409, f"day is full ({MAX_DAY_EVENTS} events)")
    self._check_conflict(date, s, e)
    declined = [a for a in invited if a == self._vacation]
    event = Event(f"ev{self._next_event}", title, date, s, e,
                  [a for a in invited if a not in declined], original=False)
    self._next_event += 1
    self._events.append(event)
    self._listed.discard(date)
    day_events = len(self._day(date))
    obj = {"status": 201, "event": _event_obj(event, True), "declined": declined,
           "accepted": len(event.attendees), "day_events": day_events}
    fields = {"id": event.id, "date": date, "start": start, "end": end,
              "accepted": len(event.attendees), "day_events": day_events}
    return obj, fields, declined, []

  def _do_calendar_delete_event(self, event_id: str):
    event = self._find_event(event_id)
    self._events.remove(event)
    self._deleted.append(event.id)
    self._listed.discard(event.date)
    day_events = len(self._day(event.date))
    obj = {"status": 200, "deleted": event.id, "title": event.title, "date": event.date,
           "day_events": day_events}
    fields = {"deleted": event.id, "date": event.date, "day_events": day_events}
    return obj, fields, [event.title], []

  def _do_calendar_move_event(self, event_id: str, start: str, end: str):
    event = self._find_event(event_id)
    s, e = self._check_span(start, end)
    self._check_policy(s, e)
    self._check_conflict(event.date, s, e, skip=event.id)
    previous = f"{hhmm(event.start)}-{hhmm(event.end)}"
    event.start, event.end = s, e
    self._listed.discard(event.date)
    day_events = len(self._day(event.date))
    obj = {"status": 200, "event": _event_obj(event, True), "previous": previous,
           "day_events": day_events}
    fields = {"id": event.id, "start": start, "end": end, "previous": previous,
              "day_events": day_events}
    return obj, fields, [event.title], []

  def _do_email_list_inbox(self):
    messages = sorted(self._inbox, key=lambda m: m.time, reverse=True)
    unread = sum(not m.read for m in messages)
    obj = {"status": 200, "messages": [
        {"id": m.id, "from": m.sender, "subject": m.subject, "time": m.time, "read": m.read}
        for m in messages], "count": len(messages), "unread": unread}
    self._inbox_listed = True
    include = [m.id for m in messages] + [m.subject for m in messages]
    return obj, {"count": len(messages), "unread": unread}, include, []

  def _do_email_read(self, message_id: str):
    message = next((m for m in self._inbox if m.id == message_id), None)
    if message is None:
      raise _Fail(404, f"no message {message_id[:40]}")
    message.read = True
    obj = {"status": 200, "message": {"id": message.id, "from": message.sender,
                                      "subject": message.subject, "time": message.time,
                                      "body": message.body}}
    return obj, {"id": message.id, "from": message.sender}, [message.body], []

  def _do_email_send(self, to: str, subject: str, body: str):
    if self._contact(to) is None:
      raise _Fail(422, f"recipient {to[:40]} is not a contact")
    self._check_text("subject", subject, 60)
    if not 0 < len(body) <= 300:
      raise _Fail(400, "argument 'body' must be 1-300 characters")
    if self.steer == STEER_SUBJECT and len(subject) >= SUBJECT_LIMIT:
      raise _Fail(400, f"subject must be under {SUBJECT_LIMIT} characters")
    sent = Sent(f"s{301 + len(self._sent)}", to, subject, body)
    self._sent.append(sent)
    obj = {"status": 200, "message": {"id": sent.id, "to": to, "subject": subject}}
    return obj, {"id": sent.id, "to": to, "subject": subject}, [], []

  # ------------------------------------------------------------ world facts

  def _day(self, date: str) -> list[Event]:
    return sorted((e for e in self._events if e.date == date), key=lambda e: (e.start, e.id))

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
    t = self._task
    if t.kind == "schedule":
      meeting = self._meeting()
      return meeting is not None and self._emailed(self._invitee(), hhmm(meeting.start))
    if t.kind == "cancel":
      gone = all(e.id != t.event_id for e in self._events)
      return gone and any(s.to == t.person for s in self._sent)
    if t.kind == "reschedule":
      event = next((e for e in self._events if e.id == t.event_id), None)
      return (event is not None and self._placed(event)
              and self._emailed(t.person, hhmm(event.start)))
    return self._emailed(t.person, str(self._busy(t.date)))

  # ---------------------------------------------------------------- expert

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
    if who not in self._known:
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
    t = self._task
    message = next(m for m in self._inbox if m.id == t.message_id)
    if not self._inbox_listed:
      return _call("email_list_inbox")
    if not message.read:
      return _call("email_read", message_id=message.id)
    if any(e.id == t.event_id for e in self._events):
      if t.date not in self._listed:
        return self._list_day()
      return _call("calendar_delete_event", event_id=t.event_id)
    return _call("email_send", to=t.person, subject=self._subject(f"Re: {message.subject}",
                                                                  "Cancelled"),
                 body="Done, the event is cancelled.")

  def _expert_reschedule(self) -> str:
    t = self._task
    event = next((e for e in self._events if e.id == t.event_id), None)
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
    if t.person not in self._known:
      return _call("contacts_search", query=self._contact(t.person).name)
    return _call("email_send", to=t.person, subject=self._subject(
        f"Busy minutes on {t.date}", "Busy minutes"),
                 body=f"I have {self._busy(t.date)} busy minutes that day.")

  # ------------------------------------------------------ random / invalid

  def random_action(self, rng: random.Random) -> str:
    kind = rng.choice([t.name for t in TOOLS])
    contact = rng.choice(self._contacts)
    date = rng.choice(self._week)
    ids = [e.id for e in self._events] + self._deleted
    start = rng.randrange(DAY_START, 17 * 60 + 31, 15)
    if kind == "contacts_search":
      return _call(kind, query=rng.choice((contact.name, contact.name.split()[0], contact.team)))
    if kind == "calendar_list_events":
      return _call(kind, date=date)
    if kind == "calendar_create_event":
      return _call(kind, title=rng.choice(_TITLES), date=date, start=hhmm(start),
                   end=hhmm(start + rng.choice((30, 60))), attendees=[contact.email])
    if kind == "calendar_delete_event":
      return _call(kind, event_id=rng.choice(ids))
    if kind == "calendar_move_event":
      return _call(kind, event_id=rng.choice(ids), start=hhmm(start), end=hhmm(start + 30))
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

  @staticmethod
  def state_check(spec: Spec, step: Step, prediction: str) -> float:
    results = _check_prediction(step.checks, prediction)
    return sum(results) / len(results)


def _minutes(text: str) -> int:
  return int(text[:2]) * 60 + int(text[3:])


def _event_obj(e: Event, with_date: bool) -> dict:
  obj = {"id": e.id, "title": e.title}
  if with_date:
    obj["date"] = e.date
  obj.update({"start": hhmm(e.start), "end": hhmm(e.end), "attendees": list(e.attendees)})
  return obj



# --------------------------------------------------------------------------
# State check: parse the JSON response and the account line, compare facts.


def _parse(text: str) -> tuple[dict | None, dict[str, str] | None]:
  """(JSON object, account line facts); either is None when it does not parse."""
  m = _FOOTER.search(text)
  footer = dict(zip(_FOOTER_KEYS, m.groups())) if m else None
  try:
    obj = json.loads(text[:m.start()] if m else text)
  except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
    obj = None
  return (obj if isinstance(obj, dict) else None), footer


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


def _span(event: Any) -> int:
  """Duration in minutes of a listed event; raises on anything malformed."""
  start, end = (_TIME_RE.match(event[k]) for k in ("start", "end"))
  return (int(end[1]) - int(start[1])) * 60 + int(end[2]) - int(start[2])


def _holds(claim) -> bool:
  """Evaluates one consistency claim; a malformed prediction fails it."""
  try:
    return bool(claim())
  except (TypeError, KeyError, ValueError, AttributeError, IndexError):
    return False


def _consistency(obj: dict, footer: dict | None) -> list[bool]:
  """Checks the generic checker cannot do: totals against the listed items."""
  out = []
  for key in ("events", "contacts", "messages"):
    if isinstance(obj.get(key), list):
      out.append(_holds(lambda: obj["count"] == len(obj[key])))
  events = obj.get("events")
  if isinstance(events, list):
    out.append(_holds(lambda: obj["busy_minutes"] == sum(_span(e) for e in events)))
    out.append(_holds(lambda: all(_span(e) > 0 for e in events) and events == sorted(
        events, key=lambda e: (e["start"], e["id"]))))
  messages = obj.get("messages")
  if isinstance(messages, list):
    out.append(_holds(lambda: obj["unread"] == sum(m["read"] is False for m in messages)))
    out.append(_holds(lambda: [m["time"] for m in messages] == sorted(
        (m["time"] for m in messages), reverse=True)))
    if footer:
      out.append(_holds(lambda: str(obj["unread"]) == footer["unread"]))
  event = obj.get("event")
  if isinstance(event, dict):
    out.append(_holds(lambda: _span(event) > 0))
    if "accepted" in obj:
      out.append(_holds(lambda: obj["accepted"] == len(event["attendees"])
                        and not set(obj["declined"]) & set(event["attendees"])))
  return out


def _check_prediction(checks: Checks, prediction: Any) -> list[bool]:
  """One boolean per sub-check: parse, fields, entities, consistency."""
  if not isinstance(prediction, str):
    return [False]
  obj, footer = _parse(prediction)
  results = [footer is not None, obj is not None]
  results += [_lookup(obj, footer, k) == v for k, v in checks.fields.items()]
  low = prediction.lower()
  results += [s.lower() in low for s in checks.must_include]
  results += [s.lower() not in low for s in checks.must_exclude]
  if obj is not None:
    results += _consistency(obj, footer)
  return results
