import numpy as np
import pytest

from mdlm_wm.data import schema
from mdlm_wm.data.delta import apply_delta, delta_of, pinned_suffix
from mdlm_wm.data.serialize import Serializer, Transition
from mdlm_wm.data.tokenizer import Tokenizer
from mdlm_wm.envs import make, run_episode
from mdlm_wm.world_model import Anchors, Samples, WorldModel

HOUSE = "You go to the sofa. [room: den | at: sofa | holding: nothing | visible: 0]"
HOUSE_NEXT = "You take the key. [room: den | at: sofa | holding: key | visible: 0]"


def test_a_status_line_lists_only_the_values_that_changed():
  d = delta_of(HOUSE_NEXT, HOUSE)
  assert d == "You take the key. [= | holding: key]"
  assert apply_delta(d, HOUSE) == HOUSE_NEXT
  assert delta_of(HOUSE, HOUSE) == "=[=]"
  assert apply_delta("You look. [=]", HOUSE) == "You look. " + HOUSE[HOUSE.index("["):]


def test_a_status_line_with_other_keys_is_written_whole():
  s1 = "You take the key. [room: den | holding: key]"
  assert delta_of(s1, HOUSE) == s1


def test_json_values_and_repeated_lines_are_written_as_same():
  s = '{"status": 200, "count": 3, "cart_count": 0}\n[total: 14 | sent: 0]'
  s1 = '{"status": 200, "items": [1, 2], "cart_count": 1}\n[total: 14 | sent: 1]'
  d = delta_of(s1, s)
  assert d == '{"status": "=", "items": [1, 2], "cart_count": 1}\n[= | sent: 1]'
  assert apply_delta(d, s) == s1
  lab, lab1 = "You wait.\nOn the stove: pot\n[time: 1]", "You look.\nOn the stove: pot\n[time: 2]"
  assert delta_of(lab1, lab) == "You look.\n=\n[= | time: 2]"
  assert apply_delta("You look.\n=\n[= | time: 2]", lab) == lab1


@pytest.mark.parametrize("s1,s", [
    # A JSON value or line that is itself "=" cannot be told from "same as s_t".
    ('{"a": "="}', '{"a": "x"}'),
    ("=\nb", "a\nb"),
    # A bracket that is no status line: a changed line, kept whole.
    ("ok [a 1 | b: 1]", "ok [a: 1 | b: 1]"),
])
def test_what_would_not_read_back_is_written_whole(s1, s):
  assert delta_of(s1, s) == s1


def test_a_status_line_with_nothing_to_compare_with_is_kept():
  assert delta_of("ok [a: 1]", "plain text") == "ok [a: 1]"
  assert apply_delta("ok [a: 1]", "plain text") == "ok [a: 1]"


def test_every_transition_of_every_environment_reads_back_exactly():
  shortened = 0
  for env in ("household", "shop", "calendar", "files", "lab"):
    for seed in range(3):
      ep, _ = run_episode(make(env), seed=seed, policy="expert")
      for st in ep.steps:
        d = delta_of(st.next_state, st.state)
        assert apply_delta(d, st.state) == st.next_state, (env, seed)
        shortened += len(d) < len(st.next_state)
  assert shortened > 50  # and the target does get shorter


def test_a_broken_delta_stays_broken():
  # A change to a key s_t lacks, and JSON that does not parse, are left in place.
  assert apply_delta("x [= | ghost: 1]", HOUSE) == "x [= | ghost: 1]"
  assert apply_delta('{"a": "=", ', '{"a": 1}') == '{"a": "=", '


def test_the_delta_serializer_writes_the_delta(tiny_corpus):
  tok = Tokenizer.load(f"{tiny_corpus}/tokenizer.model")
  ep = next(schema.iter_episodes(f"{tiny_corpus}/test.jsonl"))
  st = ep.steps[1]
  tr = Transition(ep.spec, (), st.state, st.action, st.next_state)
  whole = Serializer(tok, 512, 256, history_len=0).serialize(tr)
  delta = Serializer(tok, 512, 256, history_len=0, target="delta").serialize(tr)
  assert delta.context_ids == whole.context_ids
  assert delta.target_ids == tok.encode(delta_of(st.next_state, st.state)) + [tok.eot_id]
  with pytest.raises(ValueError, match="data.target"):
    Serializer(tok, 512, 256, target="diff")


def test_a_delta_world_model_writes_whole_states(tiny_models, tiny_corpus):
  wm = WorldModel.load(tiny_models["mdlm"])
  tok = wm.tokenizer
  ep = next(schema.iter_episodes(f"{tiny_corpus}/test.jsonl"))
  # A step whose delta differs from its next state and fits the canvas.
  st = next(s for s in ep.steps if delta_of(s.next_state, s.state) != s.next_state
            and len(tok.encode(delta_of(s.next_state, s.state))) < wm.canvas_len)
  tr = Transition(ep.spec, (), st.state, st.action)
  assert wm.sample_tokens([tr]).states_B == ()  # a whole-state model
  wm.cfg.data.target = "delta"
  samples = wm.sample_tokens([tr, tr])
  assert samples.states_B == (st.state, st.state)
  # What the sampler drew is replaced by a known delta: texts() writes the state.
  ids = tok.encode(delta_of(st.next_state, st.state)) + [tok.eot_id]
  tokens = np.full_like(samples.tokens_BGT, tok.eot_id)
  tokens[:, :, :len(ids)] = ids
  texts = wm.texts(Samples(samples.context_BC, samples.valid_BC, samples.fixed_BT, tokens,
                           samples.states_B))
  assert texts == [[st.next_state], [st.next_state]]


def test_a_pinned_status_line_is_written_as_the_delta_writes_it():
  anchor = "[room: den | at: sofa | holding: key | visible: 0]"
  assert pinned_suffix(anchor, HOUSE) == "[= | holding: key]"
  assert pinned_suffix(HOUSE[HOUSE.index("["):], HOUSE) == "[=]"
  assert apply_delta("You take the key. " + pinned_suffix(anchor, HOUSE), HOUSE).endswith(anchor)
  # Other keys, no status line in s_t, or no status line at all: as given.
  for suffix, state in (("[room: den | holding: key]", HOUSE), (anchor, "You wake up."),
                        ('"cart_count": 1, "open_orders": 0}', HOUSE)):
    assert pinned_suffix(suffix, state) == suffix


def test_a_delta_world_model_pins_a_trailing_status_line_in_delta_form(tiny_models, tiny_corpus):
  wm = WorldModel.load(tiny_models["mdlm"])
  ep = next(ep for ep in schema.iter_episodes(f"{tiny_corpus}/test.jsonl")
            if ep.env == "household")
  st = ep.steps[1]
  anchor = st.next_state[st.next_state.rindex("["):]
  wm.cfg.data.target = "delta"
  tr = Transition(ep.spec, (), st.state, st.action)
  fixed = Anchors(suffix=anchor, length=40)
  samples = wm.sample_tokens([tr], num_samples=2, anchors=[fixed])
  assert pinned_suffix(anchor, st.state).startswith("[=")  # s_t has the same keys
  pinned = wm.tokenizer.encode(pinned_suffix(anchor, st.state))
  assert (samples.fixed_BT[0, 40 - len(pinned):40] == pinned).all()
  assert all(text.endswith(anchor) for text in wm.texts(samples)[0])
