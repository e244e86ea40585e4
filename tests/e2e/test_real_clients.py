"""Real clients nobody here wrote, driven as a user drives them, against a real fleet.

Each test starts its own fleet (redis-server, the simulator, the ingress, one worker) whose
model's first offer fails (`~529` on an Anthropic provider, `~503` on an OpenAI one, `order:
priority`) and whose second serves, then runs one client:

- **Claude Code** (`claude -p`, the npm package pinned in `tests/e2e/clients`) with
  `ANTHROPIC_BASE_URL` at the gateway: its requests reach both `anthropic` providers as it
  sent them (`cache_control` blocks, `anthropic-beta`), compared with what it sent through a
  recording pass-through (`support.recording_proxy`);
- the **OpenAI Agents SDK** (`openai-agents`) running an agent with one function tool over
  chat completions, and over the Responses API when the gateway serves `POST /v1/responses`;
- the **Codex CLI** (`codex exec`) with a model provider at the gateway (`wire_api =
  "responses"`), when the gateway serves `POST /v1/responses`.

The simulator answers a request carrying tools with a call to the first tool, arguments built
from its schema (`"sim"` for a string), and a request ending with a tool result with `Tool
result: <the result>`. Nothing a client is asked to run may run: Claude Code gets only its
`Bash` tool with a deny rule for the command the simulator asks for (`sim`), and
`ENABLE_TOOL_SEARCH=false` so that `Bash` is the first tool rather than the deferred-tools
placeholder; Codex runs with its shell tools disabled (`shell_tool`, `unified_exec`), a
read-only sandbox and approval `never`. Telemetry, update checks and error reports are off by
their documented switches; every client talks to 127.0.0.1 only.

The npm clients come from `scripts/e2e-clients` (`npm ci`); without node the tests that need
them skip saying so, and in CI (`CI=true`) a missing install with node present is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from agents import (
    Agent,
    Runner,
    function_tool,
    set_default_openai_api,
    set_default_openai_client,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from support.gateway import BREAKER_OFF, Gateway, running_gateway
from support.recording_proxy import Exchange, RecordingProxy

pytestmark = pytest.mark.integration

KEY = "tk-test-real-clients-00001"
BIN = Path(__file__).resolve().parent / "clients" / "node_modules" / ".bin"
CLIENT_TIMEOUT_S = 120

CONFIG = (
    """\
providers:
  claude-a: {{kind: anthropic, base_url: "{sim}", api_key: key-claude-a}}
  claude-b: {{kind: anthropic, base_url: "{sim}", api_key: key-claude-b}}
  gpt-a:    {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-gpt-a}}
  gpt-b:    {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-gpt-b}}
models:
  cc-main:
    order: priority
    offers: [{{provider: claude-a, model: "ccm-a~529"}}, {{provider: claude-b, model: ccm-b}}]
  cc-fast:
    order: priority
    offers: [{{provider: claude-a, model: "ccf-a~529"}}, {{provider: claude-b, model: ccf-b}}]
  agent:
    order: priority
    offers: [{{provider: gpt-a, model: "ag-a~503"}}, {{provider: gpt-b, model: ag-b}}]
  agent-r:
    order: priority
    offers: [{{provider: gpt-a, model: "agr-a~503"}}, {{provider: gpt-b, model: agr-b}}]
  codex:
    order: priority
    offers: [{{provider: gpt-a, model: "cx-a~503"}}, {{provider: gpt-b, model: cx-b}}]
policy:
  retry: {{base_ms: 250, max_ms: 500}}
"""
    + BREAKER_OFF
    + """
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
"""
)
"""Every model fails on its first provider (twice: one retry, then the fallback) and is served
by its second; the breaker never opens, so every call shows the same three attempts."""

DENIED = "Permission to use Bash with command sim has been denied."
"""What Claude Code answers the simulator's `Bash` call (`command: "sim"`) with: the deny rule's words."""


@pytest.fixture
def gw() -> Iterator[Gateway]:
    """This test's own fleet: redis-server, simulator, ingress and one worker on 127.0.0.1."""
    with running_gateway(CONFIG, key=KEY) as gateway:
        yield gateway


@pytest.fixture
def proxy(gw: Gateway) -> Iterator[RecordingProxy]:
    """A recording pass-through to the ingress, for clients we cannot instrument."""
    recorder = RecordingProxy(gw.base_url)
    yield recorder
    recorder.stop()


def _npm_client(name: str) -> Path:
    """The installed npm client `name`, or skip (no node) / fail in CI (node, but not installed)."""
    path = BIN / name
    if path.exists():
        return path
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip(f"no node/npm on PATH: {name} is not installed (scripts/e2e-clients installs it with npm ci)")
    reason = f"{path} is missing: run scripts/e2e-clients (npm ci in tests/e2e/clients)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _base_env(home: Path) -> dict[str, str]:
    """A clean environment for a client: PATH, a temporary HOME, and no proxy for 127.0.0.1
    (none of the developer's own API keys or base URLs leak in)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a client to completion (stdin closed), bounded by `CLIENT_TIMEOUT_S`."""
    return subprocess.run(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S
    )


def _serves_responses(gw: Gateway) -> None:
    """Skip unless the gateway serves `POST /v1/responses` (an empty body: no upstream is asked;
    a gateway without the route answers 404 `unknown_route`)."""
    probe = httpx.post(f"{gw.base_url}/v1/responses", json={}, headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    if probe.status_code == 404 and '"unknown_route"' in probe.text:
        pytest.skip("the gateway does not serve POST /v1/responses yet (404 unknown_route)")


def _statuses(gw: Gateway, upstream_model: str) -> list[object]:
    """The statuses of the simulator's attempts on `upstream_model`, in order."""
    return [entry["status"] for entry in gw.sim_log(upstream_model)]


def _by_request(gw: Gateway, *upstream_models: str) -> dict[str, list[dict[str, Any]]]:
    """The simulator's attempts on `upstream_models`, grouped by the gateway's request id, in order."""
    attempts = sorted((e for m in upstream_models for e in gw.sim_log(m)), key=lambda e: int(str(e["seq"])))
    grouped: dict[str, list[dict[str, Any]]] = {}
    for entry in attempts:
        grouped.setdefault(str(entry["request_id"]), []).append(entry)
    return grouped


def _cache_controls(node: object) -> list[object]:
    """Every block carrying `cache_control` in a request body, in document order."""
    if isinstance(node, dict):
        found: list[object] = [node] if "cache_control" in node else []
        return found + [block for value in node.values() for block in _cache_controls(value)]
    if isinstance(node, list):
        return [block for value in node for block in _cache_controls(value)]
    return []


def _claude_env(home: Path, base_url: str) -> dict[str, str]:
    """Claude Code pointed at `base_url` with the gateway key; every model it asks for named by a
    catalog model (main and small/fast), and its nonessential traffic off."""
    return {
        **_base_env(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_MODEL": "cc-main",
        "ANTHROPIC_DEFAULT_OPUS_MODEL": "cc-main",
        "ANTHROPIC_DEFAULT_SONNET_MODEL": "cc-main",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": "cc-fast",
        "ANTHROPIC_SMALL_FAST_MODEL": "cc-fast",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "ENABLE_TOOL_SEARCH": "false",
    }


CLAUDE_SAFETY = ["--tools", "Bash", "--disallowedTools", "Bash(sim)"]
"""Only `Bash`, and the simulator's command denied by rule: its call is refused, never run."""


def _assert_claude_code_calls(gw: Gateway, proxy: RecordingProxy) -> list[Exchange]:
    """Each `/v1/messages` call Claude Code made was served by `claude-b` after two 529s on
    `claude-a`, and every attempt's upstream received Claude Code's body (only `model`
    changed, field order kept, its `cache_control` blocks among it) and its `anthropic-beta`
    and `anthropic-version` headers as sent. Returns the calls."""
    calls = proxy.calls("/v1/messages")
    assert len(calls) == 2, [c.path for c in proxy.exchanges]  # the tool call, then the answer quoting its result
    attempts = _by_request(gw, "ccm-a~529", "ccm-b")
    assert len(attempts) == len(calls)
    for call in calls:
        assert call.status == 200
        head = call.response_headers
        assert (head["x-turnout-provider"], head["x-turnout-model"]) == ("claude-b", "ccm-b")
        assert (head["x-turnout-attempts"], head["x-turnout-fallback"]) == ("3", "1")
        sent = json.loads(call.body)
        assert sent["model"] == "cc-main" and sent["stream"] is True
        blocks = _cache_controls(sent)
        assert blocks, "Claude Code marks its system prompt and last message with cache_control"
        beta = call.headers["anthropic-beta"]
        assert "claude-code-20250219" in beta.split(",")
        served = attempts[head["x-request-id"]]
        assert [(e["model"], e["status"]) for e in served] == [("ccm-a~529", 529), ("ccm-a~529", 529), ("ccm-b", 200)]
        for entry in served:
            received = entry["received"]
            upstream = json.loads(received["body"])
            assert upstream == {**sent, "model": entry["model"]}
            assert list(upstream) == list(sent)
            assert _cache_controls(upstream) == blocks
            assert received["headers"]["anthropic-beta"] == beta
            assert received["headers"]["anthropic-version"] == call.headers["anthropic-version"]
        first, second = (json.loads(e["received"]["body"]) for e in (served[0], served[-1]))
        assert {**first, "model": "-"} == {
            **second,
            "model": "-",
        }  # the failed provider and the serving one got the same
    assert _statuses(gw, "ccm-a~529") == [529] * 4 and _statuses(gw, "ccm-b") == [200] * 2
    assert gw.sim_log("ccf-a~529") == gw.sim_log("ccf-b") == []  # `-p` asks nothing of the small/fast model
    return calls


@pytest.mark.timeout(240)
def test_claude_code_print_mode_falls_over_and_its_requests_pass_through_as_sent(
    gw: Gateway, proxy: RecordingProxy, tmp_path: Path
) -> None:
    claude = _npm_client("claude")
    work = tmp_path / "work"
    work.mkdir()
    done = _run([str(claude), "-p", "Say hello to Turnout.", *CLAUDE_SAFETY], _claude_env(tmp_path, proxy.url), work)
    assert done.returncode == 0, f"claude exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert done.stdout.strip() == f"Tool result: {DENIED}"  # the simulator quoting the refused call's result
    calls = _assert_claude_code_calls(gw, proxy)
    tool_use = json.loads(calls[1].body)["messages"][-2]["content"][0]
    assert (tool_use["type"], tool_use["name"], tool_use["input"]["command"]) == ("tool_use", "Bash", "sim")
    assert list(work.iterdir()) == []


@pytest.mark.timeout(240)
def test_claude_code_stream_json_shows_the_served_upstream_and_the_refused_tool_call(
    gw: Gateway, proxy: RecordingProxy, tmp_path: Path
) -> None:
    claude = _npm_client("claude")
    work = tmp_path / "work"
    work.mkdir()
    argv = [str(claude), "-p", "What is in this directory?", "--output-format", "stream-json", "--verbose"]
    done = _run([*argv, *CLAUDE_SAFETY], _claude_env(tmp_path, proxy.url), work)
    assert done.returncode == 0, f"claude exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    init = events[0]
    assert (init["type"], init["subtype"], init["model"], init["tools"]) == ("system", "init", "cc-main", ["Bash"])
    assistant = [e["message"] for e in events if e["type"] == "assistant"]
    assert [m["model"] for m in assistant] == ["ccm-b", "ccm-b"]  # the serving upstream's own message, relayed as is
    assert assistant[0]["content"][0]["name"] == "Bash" and assistant[0]["content"][0]["input"]["command"] == "sim"
    assert assistant[1]["content"] == [{"type": "text", "text": f"Tool result: {DENIED}"}]
    [result] = [e for e in events if e["type"] == "result"]
    assert result["is_error"] is False and result["result"] == f"Tool result: {DENIED}"
    assert [(d["tool_name"], d["tool_input"]["command"]) for d in result["permission_denials"]] == [("Bash", "sim")]
    _assert_claude_code_calls(gw, proxy)
    assert list(work.iterdir()) == []


class _Headers:
    """The `x-turnout-*` headers of every answer an `httpx2` client (the openai SDK's HTTP package) got, in order."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []

    async def hook(self, response: httpx2.Response) -> None:
        """httpx2 response hook: keep the answer's `x-turnout-*` headers."""
        self.seen.append({k: v for k, v in response.headers.items() if k.startswith("x-turnout-")})


@pytest.fixture
async def agents_client(gw: Gateway) -> AsyncIterator[tuple[AsyncOpenAI, _Headers]]:
    """The Agents SDK's default client: an `AsyncOpenAI` at the gateway with the gateway key
    (SDK retries off, answers' headers kept); tracing off. The SDK's default API is set back
    to the Responses API afterwards."""
    headers = _Headers()
    http = httpx2.AsyncClient(event_hooks={"response": [headers.hook]}, timeout=60)
    client = AsyncOpenAI(base_url=f"{gw.base_url}/v1", api_key=KEY, max_retries=0, http_client=http)
    set_default_openai_client(client, use_for_tracing=False)
    set_tracing_disabled(True)
    yield client, headers
    set_default_openai_api("responses")
    await client.close()
    await http.aclose()


async def _run_weather_agent(model: str) -> tuple[list[str], object]:
    """Run an agent with one function tool (`get_weather`) on `model`; returns the cities the
    tool was called with and the run's final output."""
    called: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        called.append(city)
        return f"sunny in {city}"

    agent = Agent(name="weather", instructions="Use the tool, then say what it said.", tools=[get_weather], model=model)
    result = await Runner.run(agent, "What is the weather in Paris?", max_turns=4)
    return called, result.final_output


async def test_agents_sdk_tool_loop_over_chat_completions_falls_over(
    gw: Gateway, agents_client: tuple[AsyncOpenAI, _Headers]
) -> None:
    _, headers = agents_client
    set_default_openai_api("chat_completions")
    called, output = await _run_weather_agent("agent")
    assert called == ["sim"]  # the simulator's argument for a string property
    assert output == "Tool result: sunny in sim"
    assert len(headers.seen) == 2  # the call, then the answer quoting the tool's result
    for head in headers.seen:
        assert (head["x-turnout-provider"], head["x-turnout-model"]) == ("gpt-b", "ag-b")
        assert (head["x-turnout-attempts"], head["x-turnout-fallback"]) == ("3", "1")
    assert _statuses(gw, "ag-a~503") == [503] * 4 and _statuses(gw, "ag-b") == [200] * 2


async def test_agents_sdk_tool_loop_over_the_responses_api_falls_over(
    gw: Gateway, agents_client: tuple[AsyncOpenAI, _Headers]
) -> None:
    _serves_responses(gw)
    _, headers = agents_client
    set_default_openai_api("responses")
    called, output = await _run_weather_agent("agent-r")
    assert called == ["sim"]
    assert output == "Tool result: sunny in sim"
    assert len(headers.seen) == 2
    assert all(head["x-turnout-provider"] == "gpt-b" for head in headers.seen)
    failed, served = _statuses(gw, "agr-a~503"), _statuses(gw, "agr-b")
    assert failed and set(failed) == {503}
    assert served == [200] * 2


CODEX_CONFIG = """\
model = "codex"
model_provider = "turnout"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.turnout]
name = "Turnout"
base_url = "{base_url}/v1"
env_key = "TURNOUT_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[features]
shell_tool = false
unified_exec = false
shell_snapshot = false

[analytics]
enabled = false

[feedback]
enabled = false
"""
"""Codex's `config.toml`: one model provider, the gateway; its shell tools off, a read-only
sandbox and no approvals asked (so none escalated); no analytics, feedback or update check."""


@pytest.mark.timeout(240)
def test_codex_exec_through_the_gateway_falls_over(gw: Gateway, proxy: RecordingProxy, tmp_path: Path) -> None:
    _serves_responses(gw)
    codex = _npm_client("codex")
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(CODEX_CONFIG.format(base_url=proxy.url))
    work = tmp_path / "work"
    work.mkdir()
    env = {**_base_env(home), "CODEX_HOME": str(home), "TURNOUT_API_KEY": KEY}
    done = _run([str(codex), "exec", "--skip-git-repo-check", "--strict-config", "Say hello to Turnout."], env, work)
    assert done.returncode == 0, f"codex exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert "Tool result:" in done.stdout  # the simulator quoting the result of the tool it called
    calls = proxy.calls("/v1/responses")
    assert len(calls) == 2  # the tool call, then the answer quoting its result
    for call in calls:
        assert call.status == 200 and call.headers["authorization"] == f"Bearer {KEY}"
        assert call.response_headers["x-turnout-provider"] == "gpt-b"
    failed, served = _statuses(gw, "cx-a~503"), _statuses(gw, "cx-b")
    assert failed and set(failed) == {503}
    assert served == [200] * 2
    assert list(work.iterdir()) == []
