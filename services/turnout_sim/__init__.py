"""turnout_sim: a fake upstream LLM provider with scripted faults.

Speaks OpenAI's Chat Completions, Embeddings and Responses wire formats and
Anthropic's Messages (JSON and SSE; tool calls, logprobs) and applies a
fault scenario chosen by the model name (`label~200,503,reset`) or the
`x-sim-scenario` header. See `scenarios` for the DSL, `app` for the server.
"""

from turnout_sim.app import create_app, run, start_in_background
from turnout_sim.clock import Clock, ManualClock
from turnout_sim.scenarios import Step, StepKind, parse_scenario

__all__ = [
    "Clock",
    "ManualClock",
    "Step",
    "StepKind",
    "create_app",
    "parse_scenario",
    "run",
    "start_in_background",
]
