import pytest

from mdlm_wm.data import schema
from mdlm_wm.data.schema import Tool
from mdlm_wm.data.serialize import (Serializer, Transition, ablate, parse_anchors, render_tool,
                                    transitions)
from mdlm_wm.data.tokenizer import SPECIAL_TOKENS, Tokenizer, train_tokenizer
from tests.conftest import episode_dict

TEXTS = ["You are in the kitchen. A fridge (closed), a table, an apple.",
         '{"status": 200, "items": [{"id": "P104", "qty": 2}], "count": 1, "total": 25.0}',
         "[location: kitchen | holding: nothing | visible: 3]", "open(target=\"fridge\")",
         "ls: cannot access 'tmp': No such file or directory"] * 20


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
  return train_tokenizer(TEXTS, 400)


def test_special_ids_are_fixed_and_reserved(tok):
  assert tok.pad_id == 0
  assert tok.mask_id == 2 and tok.eot_id == 3
  assert len(set(tok.marker_ids.values())) == 9
  for s in SPECIAL_TOKENS:
    assert len(tok.encode(s)) == 1


@pytest.mark.parametrize("text", [
    "  two  spaces\n\nand newlines\ttab", "unicode: é 漢字 🙂 (byte fallback)",
    TEXTS[1], "", "trailing space "])
def test_decode_inverts_encode_exactly(tok, text):
  assert tok.decode(tok.encode(text)) == text


def test_tokenizer_saves_and_loads(tok, tmp_path):
  path = tmp_path / "t.model"
  tok.save(path)
  again = Tokenizer.load(path)
  assert again.encode(TEXTS[0]) == tok.encode(TEXTS[0]) and again.eot_id == tok.eot_id


def test_training_is_deterministic():
  assert train_tokenizer(TEXTS, 400).model_proto == train_tokenizer(TEXTS, 400).model_proto


def test_a_foreign_model_is_rejected(tmp_path):
  import io
  import sentencepiece as spm
  buf = io.BytesIO()
  spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXTS), model_writer=buf,
                                 vocab_size=100, minloglevel=2, hard_vocab_limit=False)
  with pytest.raises(ValueError, match="reserved tokens"):
    Tokenizer(buf.getvalue())


def _transition(history=2, s0="You are in the kitchen.", rules=("Rooms connect north.",)):
  ep = schema.episode_from_dict(episode_dict(n_steps=history + 1))
  spec = ep.spec.__class__(s0, ep.spec.task, ep.spec.tools, tuple(rules), "be terse")
  return transitions(ep.__class__(ep.id, ep.env, spec, ep.steps), history_len=history)[-1]


def test_layout_markers_in_order_and_round_trip(tok):
  ser = Serializer(tok, max_context_len=512, max_target_len=64, history_len=2)
  tr = _transition()
  out = ser.serialize(tr)
  m = tok.marker_ids
  positions = [out.context_ids.index(m[k]) for k in
               ("s0", "task", "tools", "rules", "steer", "history")]
  assert positions == sorted(positions) and out.context_ids[0] == m["s0"]
  assert out.context_ids[-1] == m["target"]
  # Two history pairs, then the current state: three <state> markers.
  assert out.context_ids.count(m["state"]) == 3
  assert out.target_ids[-1] == tok.eot_id
  assert tok.decode_target(out.target_ids) == tr.next_state
  assert tok.decode(out.context_ids).endswith(tr.state + tr.action)
  assert not out.truncation.any_cut() and out.truncation.examples == 1


def test_steer_span_covers_exactly_the_steer_tokens(tok):
  out = Serializer(tok, 512, 64).serialize(_transition())
  start, end = out.steer_span
  assert out.context_ids[start - 1] == tok.marker_ids["steer"]
  assert out.context_ids[end] == tok.marker_ids["history"]
  assert tok.decode(out.context_ids[start:end]) == "be terse"
  empty = Serializer(tok, 512, 64).serialize(_transition(), steer="")
  assert empty.steer_span[0] == empty.steer_span[1]


def test_steer_override_drops_the_steer(tok):
  ser = Serializer(tok, 512, 64)
  tr = _transition()
  full, dropped = ser.serialize(tr), ser.serialize(tr, steer="")
  assert len(full.context_ids) - len(dropped.context_ids) == len(tok.encode("be terse"))


def test_oldest_history_is_dropped_first(tok):
  tr = _transition(history=3)
  full = Serializer(tok, 10_000, 64, history_len=3).serialize(tr)
  pair = lambda k: 2 + len(tok.encode(tr.history[k][0])) + len(tok.encode(tr.history[k][1]))
  limit = len(full.context_ids) - pair(0)
  out = Serializer(tok, limit, 64, history_len=3).serialize(tr)
  assert out.truncation.history_pairs_dropped == 1 and out.truncation.context_cut == 1
  assert len(out.context_ids) <= limit
  decoded = tok.decode(out.context_ids)
  assert tr.history[0][1] not in decoded and tr.history[1][1] in decoded


def test_then_the_longest_spec_segment_is_cut(tok):
  tr = _transition(history=0, rules=["A closed container hides its contents. " * 30])
  ser = Serializer(tok, 10_000, 64, history_len=0)
  full = ser.serialize(tr)
  out = Serializer(tok, len(full.context_ids) - 50, 64, history_len=0).serialize(tr)
  assert out.truncation.rules_tokens_cut == 50
  assert out.truncation.s0_tokens_cut == 0 and out.truncation.tools_tokens_cut == 0
  assert len(out.context_ids) == len(full.context_ids) - 50


def test_state_head_is_cut_before_the_request(tok):
  tr = _transition(history=0)
  task, steer, action = (tok.encode(x) for x in (tr.spec.task, tr.spec.steer, tr.action))
  keep = 9 + len(task) + len(steer) + len(action)
  out = Serializer(tok, keep + 1, 64, history_len=0).serialize(tr)
  assert len(out.context_ids) == keep + 1
  assert out.truncation.state_tokens_cut == len(tok.encode(tr.state)) - 1
  assert out.truncation.request_tokens_cut == 0
  assert tr.spec.task in tok.decode(out.context_ids)
  # Past that, the task's tail goes first, and it is counted.
  tight = Serializer(tok, keep - 2, 64, history_len=0).serialize(tr)
  assert len(tight.context_ids) == keep - 2 and tight.truncation.request_tokens_cut == 2
  assert tok.decode(tight.context_ids).endswith(tr.action)


def test_long_target_is_cut_and_counted(tok):
  tr = Transition(_transition().spec, (), "s", "a", "You are in the kitchen. " * 20)
  out = Serializer(tok, 512, 16).serialize(tr)
  assert len(out.target_ids) == 16 and tok.eot_id not in out.target_ids
  assert out.truncation.target_cut == 1 and out.truncation.target_tokens_cut > 0


def test_too_small_vocabulary_is_a_clear_error():
  with pytest.raises(ValueError, match="byte-fallback"):
    train_tokenizer(TEXTS, 50)


def test_a_tool_schema_is_one_signature_line():
  tool = Tool("cancel_order", "Cancel a pending order.", {
      "type": "object", "required": ["order_id", "qty"],
      "properties": {"reason": {"type": "string", "enum": ["late", "mistake"]},
                     "qty": {"type": "integer", "minimum": 1},
                     "order_id": {"type": "string"},
                     "tags": {"type": "array", "items": {"type": "string"}},
                     "date": {"type": "string", "description": "YYYY-MM-DD"}}})
  # Required parameters first in their required order, then the optional ones (`?`).
  assert render_tool(tool) == ("cancel_order(order_id: str, qty: int>=1, date?: YYYY-MM-DD, "
                               "reason?: late|mistake, tags?: [str]) Cancel a pending order.")
  assert render_tool(Tool("view_cart", "Show the cart.")) == "view_cart() Show the cart."
  # The JSON schema line of models trained before the signature line.
  assert render_tool(tool, "json").startswith('cancel_order: Cancel a pending order. {"properties"')
  with pytest.raises(ValueError, match="tools_format"):
    render_tool(tool, "yaml")


def test_anchor_cuts_are_counted_per_example(tok):
  tr = _transition(history=0, rules=["A closed container hides its contents. " * 30])
  full = Serializer(tok, 10_000, 64, history_len=0).serialize(tr)
  assert full.truncation.anchors_cut == 0 and full.truncation.anchors_whole() == 1.0
  cut = Serializer(tok, len(full.context_ids) - 5, 64, history_len=0).serialize(tr)
  assert cut.truncation.anchors_cut == 1 and cut.truncation.anchors_whole() == 0.0
  # Dropping history leaves the anchors whole.
  hist = _transition(history=2)
  keep = len(Serializer(tok, 10_000, 64, history_len=2).serialize(hist).context_ids)
  dropped = Serializer(tok, keep - 2, 64, history_len=2).serialize(hist).truncation
  assert dropped.history_pairs_dropped == 1 and dropped.anchors_cut == 0


def test_an_ablated_anchor_is_never_read(tok):
  tr = _transition(history=0)
  assert tr.spec.rules and tr.spec.steer
  full = Serializer(tok, 10_000, 64, history_len=0).serialize(tr)
  out = Serializer(tok, 10_000, 64, history_len=0, ablate=("rules", "steer")).serialize(tr)
  rules = len(tok.encode("\n".join(f"- {r}" for r in tr.spec.rules)))
  steer = len(tok.encode(tr.spec.steer))
  assert len(out.context_ids) == len(full.context_ids) - rules - steer
  assert out.steer_span[0] == out.steer_span[1]  # nothing left for guidance to hide
  assert ablate(tr.spec, ["rules"]).rules == () and ablate(tr.spec, ["rules"]).task == tr.spec.task
  # A steer given at call time (guidance, the gym env) cannot bring an ablated one back.
  again = Serializer(tok, 10_000, 64, history_len=0, ablate=("rules", "steer")).serialize(
      tr, steer="go north")
  assert again.context_ids == out.context_ids
  assert parse_anchors(" tools, s0 ", "k") == ("tools", "s0") and parse_anchors("", "k") == ()
  with pytest.raises(ValueError, match=r"--ablate: unknown anchor\(s\) \['tool'\]"):
    parse_anchors("tool", "--ablate")
