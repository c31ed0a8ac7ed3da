from mdlm_wm.checks.generic import check_results, check_score, field_statements, states_field
from mdlm_wm.data.schema import Checks


def test_field_forms_that_are_stated():
  assert states_field("[location: kitchen | x: 1]", "location", "kitchen")
  assert states_field('{"status": 404, "a": 1}', "status", "404")
  assert states_field("count=3 items", "count", "3")
  assert states_field("The apple is now condition: hot.", "condition", "hot")
  assert states_field("LOCATION: Kitchen", "location", "kitchen")


def test_values_must_be_whole_tokens():
  assert not states_field("x: 3.5", "x", "3")
  assert not states_field("[cwd: /home/user/docs]", "cwd", "/home/user")
  assert not states_field("goal: 1/3", "goal", "1")
  assert not states_field("location: kitchenette", "location", "kitchen")
  assert not states_field("sublocation: kitchen", "location", "kitchen")


def test_positions_of_every_statement():
  text = "a: 1 then a: 1 again, a: 2"
  assert field_statements(text, "a", "1") == [0, 10]


def test_scores_count_each_check():
  checks = Checks(must_include=("apple",), must_exclude=("knife",), fields={"at": "fridge"})
  assert check_score(checks, "An Apple. [at: fridge]") == 1.0
  results = check_results(checks, "apple and knife [at: table]")
  assert results == {"include:apple": True, "exclude:knife": False, "field:at": False}
  assert check_score(checks, "apple and knife [at: table]") == 1 / 3
  assert check_score(Checks(), "anything") == 1.0
