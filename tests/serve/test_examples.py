"""examples/client.py and examples/langchain_tool.py against the real server."""

import importlib.util

import pytest

from examples.client import ServiceError, WorldModelClient
from examples.langchain_tool import WorldModelTool, to_langchain
from mdlm_wm.data.serialize import Transition
from tests.serve.conftest import API_KEY, replay


def test_client_step_rollout_and_session(mdlm_server, mdlm_wm, episode, spec_dict):
  client = WorldModelClient(mdlm_server.url, api_key=API_KEY)
  assert client.health()["status"] == "ok" and client.info()["objective"] == "mdlm"
  s = episode.steps[0]
  states = client.step(spec_dict, s.state, s.action, seed=3)
  assert states == mdlm_wm.generate([Transition(episode.spec, (), s.state, s.action)], seed=[3])[0]
  actions = [st.action for st in episode.steps[:2]]
  trajectories = client.rollout(spec_dict, actions, num_samples=2, seed=1)
  assert len(trajectories) == 2 and all(len(t) == 2 for t in trajectories)
  with client.session(spec_dict, seed=2) as session:
    assert session.state == episode.spec.initial_state
    states_seen = [session.step(a) for a in actions]
    assert [a for _, a in session.history()] == actions
  assert states_seen == replay(mdlm_wm, episode.spec, episode.spec.initial_state, actions, seed=2)
  with pytest.raises(ServiceError) as e:
    session.step(actions[0])
  assert e.value.status == 404


def test_client_raises_the_servers_errors(mdlm_server, spec_dict):
  with pytest.raises(ServiceError) as e:
    WorldModelClient(mdlm_server.url, api_key=API_KEY).step(spec_dict, "s", "a", num_samples=9)
  assert e.value.status == 422
  assert e.value.errors == ["num_samples: 9 exceeds the limit max_num_samples=4"]
  with pytest.raises(ServiceError) as e:
    WorldModelClient(mdlm_server.url, api_key="wrong").info()
  assert e.value.status == 401


def test_the_tool_advances_its_simulation_or_looks_ahead(mdlm_server, episode, spec_dict):
  client = WorldModelClient(mdlm_server.url, api_key=API_KEY)
  tool = WorldModelTool(client, spec_dict, seed=5)
  assert tool.args_schema["required"] == ["action"] and tool.name == "world_model"
  a0, a1 = episode.steps[0].action, episode.steps[1].action
  first = tool({"action": a0})
  assert tool.state == first and tool.history == [(episode.spec.initial_state, a0)]
  tool.run(a1)
  assert len(tool.history) == 2
  look = WorldModelTool(client, spec_dict, advance=False, seed=5)
  assert look(a0) == first and look.state == episode.spec.initial_state and look.history == []
  lc = to_langchain(tool)
  if importlib.util.find_spec("langchain_core") is None:
    assert lc is None
  else:
    assert lc.name == "world_model" and lc.description == tool.description
