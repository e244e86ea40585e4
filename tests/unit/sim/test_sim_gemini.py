"""The simulator speaks the Gemini API and Vertex AI: the official `google-genai` SDK talks to it
(`generate_content`, `generate_content_stream`, function calls, its `ClientError` / `ServerError`
with Google's code and status), Vertex AI through a service account whose `token_uri` is the
simulator's token endpoint, and Claude on Vertex AI by `rawPredict` / `streamRawPredict`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors, types
from google.oauth2 import service_account

from support.google_keys import service_account_info

# google-genai's async client subclasses aiohttp's ClientSession, which aiohttp warns against
pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="the weather of a city",
    parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def _client(sim_url: str, key: str = "AIza-test") -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=sim_url))


async def _log(sim_url: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as http:
        entries: list[dict[str, Any]] = (await http.get(sim_url + "/sim/log")).json()
        return entries


async def test_generate_content_answers_text_usage_and_the_model(sim_url: str) -> None:
    config = types.GenerateContentConfig(max_output_tokens=3, system_instruction="be brief")
    answer = await _client(sim_url).aio.models.generate_content(model="gem", contents="hello there", config=config)
    assert answer.text == "tok0 tok1 tok2" and answer.model_version == "gem"
    assert answer.candidates is not None and answer.candidates[0].finish_reason == types.FinishReason.STOP
    assert answer.usage_metadata is not None
    assert (answer.usage_metadata.prompt_token_count, answer.usage_metadata.candidates_token_count) == (4, 3)
    [entry] = await _log(sim_url)
    assert entry["model"] == "gem" and entry["step"] == "200" and entry["status"] == 200
    assert json.loads(entry["received"]["body"])["systemInstruction"]["parts"] == [{"text": "be brief"}]


async def test_a_stream_comes_piece_by_piece_and_ends_with_its_finish(sim_url: str) -> None:
    config = types.GenerateContentConfig(max_output_tokens=4)
    stream = await _client(sim_url).aio.models.generate_content_stream(model="gem", contents="hi", config=config)
    chunks = [chunk async for chunk in stream]
    assert "".join(c.text or "" for c in chunks) == "tok0 tok1 tok2 tok3" and len(chunks) == 5
    last = chunks[-1]
    assert last.candidates is not None and last.candidates[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata is not None and last.usage_metadata.candidates_token_count == 4


async def test_a_stream_is_framed_as_google_frames_it(sim_url: str) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 2}}
    async with httpx.AsyncClient(base_url=sim_url, headers={"x-goog-api-key": "k"}) as http:
        resp = await http.post("/v1beta/models/gem:streamGenerateContent", params={"alt": "sse"}, json=body)
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = resp.content.split(b"\r\n\r\n")
    assert events[-1] == b"" and all(e.startswith(b"data: {") for e in events[:-1]) and len(events) == 4
    assert json.loads(events[2][6:])["candidates"][0]["finishReason"] == "STOP"


TOOLS: list[types.ToolUnion] = [types.Tool(function_declarations=[WEATHER])]


async def test_a_function_declaration_gets_a_call_and_its_result_a_quote(sim_url: str) -> None:
    client = _client(sim_url)
    tools = TOOLS
    answer = await client.aio.models.generate_content(
        model="gem", contents="weather in Paris?", config=types.GenerateContentConfig(tools=tools)
    )
    assert answer.function_calls is not None
    [call] = answer.function_calls
    assert (call.name, call.args) == ("get_weather", {"city": "sim"})
    result = types.Part.from_function_response(name="get_weather", response={"temperature": "22C"})
    contents = [
        types.Content(role="user", parts=[types.Part.from_text(text="weather in Paris?")]),
        types.Content(role="model", parts=[types.Part(function_call=call)]),
        types.Content(role="user", parts=[result]),
    ]
    follow = await client.aio.models.generate_content(
        model="gem", contents=contents, config=types.GenerateContentConfig(tools=tools)
    )
    assert follow.text == 'Tool result: {"temperature":"22C"}'


async def test_mode_none_answers_text_and_a_streamed_call_is_one_whole_part(sim_url: str) -> None:
    client = _client(sim_url)
    calling = types.ToolConfig(
        function_calling_config=types.FunctionCallingConfig(mode=types.FunctionCallingConfigMode.NONE)
    )
    config = types.GenerateContentConfig(tools=TOOLS, tool_config=calling)
    answer = await client.aio.models.generate_content(model="gem", contents="hi", config=config)
    assert answer.function_calls is None and (answer.text or "").startswith("tok0")
    stream = await client.aio.models.generate_content_stream(
        model="gem",
        contents="hi",
        config=types.GenerateContentConfig(tools=TOOLS),
    )
    calls = [c for chunk in [x async for x in stream] for c in chunk.function_calls or []]
    assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "sim"})]


@pytest.mark.parametrize(
    ("model", "error", "code", "status", "words"),
    [
        ("gem~429", errors.ClientError, 429, "RESOURCE_EXHAUSTED", "Resource has been exhausted"),
        ("gem~503", errors.ServerError, 503, "UNAVAILABLE", "The model is overloaded"),
        ("gem~500", errors.ServerError, 500, "INTERNAL", "An internal error has occurred"),
        ("gem~504", errors.ServerError, 504, "DEADLINE_EXCEEDED", "Deadline expired"),
        ("gem~ctx", errors.ClientError, 400, "INVALID_ARGUMENT", "The input token count (1048577) exceeds"),
        ("gem~quota", errors.ClientError, 429, "RESOURCE_EXHAUSTED", "You exceeded your current quota"),
    ],
)
async def test_error_steps_are_googles(
    sim_url: str, model: str, error: type[errors.APIError], code: int, status: str, words: str
) -> None:
    with pytest.raises(error) as caught:
        await _client(sim_url).aio.models.generate_content(model=model, contents="x")
    assert (caught.value.code, caught.value.status) == (code, status)
    assert caught.value.message is not None and caught.value.message.startswith(words)


async def test_count_tokens_counts_the_words_of_the_texts(sim_url: str) -> None:
    counted = await _client(sim_url).aio.models.count_tokens(model="gem", contents="three words here")
    assert counted.total_tokens == 3
    async with httpx.AsyncClient(base_url=sim_url, headers={"x-goog-api-key": "k"}) as http:
        wrapped = {"generateContentRequest": {"model": "models/gem", "contents": [{"parts": [{"text": "a b"}]}]}}
        resp = await http.post("/v1beta/models/gem:countTokens", json=wrapped)
    assert resp.json() == {"totalTokens": 2}
    assert await _log(sim_url) == []  # counting is no model call


async def test_embed_content_answers_a_unit_vector_per_text(sim_url: str) -> None:
    config = types.EmbedContentConfig(output_dimensionality=8)
    answer = await _client(sim_url).aio.models.embed_content(
        model="gemini-embedding-001", contents=["a", "b"], config=config
    )
    assert answer.embeddings is not None and len(answer.embeddings) == 2
    values = [e.values or [] for e in answer.embeddings]
    assert [len(v) for v in values] == [8, 8] and values[0] != values[1]
    assert abs(sum(x * x for x in values[0]) - 1.0) < 1e-9
    [entry] = await _log(sim_url)
    assert entry["model"] == "gemini-embedding-001" and entry["status"] == 200


async def test_429ra_is_resource_exhausted_with_a_retry_info(sim_url: str) -> None:
    with pytest.raises(errors.ClientError) as caught:
        await _client(sim_url).aio.models.generate_content(model="gem~429ra20,200", contents="x")
    details = caught.value.details["error"]["details"]
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"} in details
    assert (await _client(sim_url).aio.models.generate_content(model="gem~429ra20,200", contents="x")).text


async def test_keys_are_refused_as_google_refuses_them(sim_url: str) -> None:
    with pytest.raises(errors.ClientError) as caught:
        await _client(sim_url, key="sk-sim-revoked-1").aio.models.generate_content(model="gem", contents="x")
    assert (caught.value.code, caught.value.status) == (400, "INVALID_ARGUMENT")
    assert caught.value.details["error"]["details"][0]["reason"] == "API_KEY_INVALID"
    async with httpx.AsyncClient(base_url=sim_url) as http:
        resp = await http.post("/v1beta/models/gem:generateContent", json={"contents": [{"parts": [{"text": "x"}]}]})
    assert resp.status_code == 403 and resp.json()["error"]["status"] == "PERMISSION_DENIED"


async def test_safety_steps_block_the_answer_or_the_prompt(sim_url: str) -> None:
    client = _client(sim_url)
    ended = await client.aio.models.generate_content(model="gem~safety", contents="x")
    assert ended.candidates is not None and ended.candidates[0].finish_reason == types.FinishReason.SAFETY
    assert ended.text is None
    blocked = await client.aio.models.generate_content(model="gem~policy", contents="x")
    assert blocked.prompt_feedback is not None and blocked.prompt_feedback.block_reason == types.BlockedReason.SAFETY
    assert not blocked.candidates
    stream = await client.aio.models.generate_content_stream(model="gem~cf200", contents="x")
    [only] = [chunk async for chunk in stream]
    assert only.candidates is not None and only.candidates[0].finish_reason == types.FinishReason.SAFETY


async def test_a_cut_stream_breaks_the_sdks_read(sim_url: str) -> None:
    stream = await _client(sim_url).aio.models.generate_content_stream(model="gem~cut2", contents="x")
    with pytest.raises(Exception):  # noqa: B017 - the transport's own error class
        [chunk async for chunk in stream]
    [entry] = await _log(sim_url)
    assert entry["end"] == "fault"


def test_vertex_ai_through_a_service_account_whose_token_endpoint_is_the_simulator(tmp_path: Path) -> None:
    async def serve() -> tuple[str | None, str]:
        from turnout_sim.app import start_in_background

        runner, url = await start_in_background("127.0.0.1", 0)
        try:
            return await asyncio.to_thread(_vertex_calls, url)  # google-auth refreshes synchronously
        finally:
            await runner.cleanup()

    text, streamed = asyncio.run(serve())
    assert (text, streamed) == ("tok0 tok1 tok2", "tok0 tok1")


def _vertex_client(url: str) -> genai.Client:
    """google-genai's Vertex AI client of the simulator, its service account's `token_uri` the simulator's."""
    credentials = service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
        service_account_info(url + "/token"), scopes=SCOPES
    )
    return genai.Client(
        vertexai=True,
        project="my-proj",
        location="us-central1",
        credentials=credentials,
        http_options=types.HttpOptions(base_url=url, api_version="v1"),
    )


def _vertex_calls(url: str) -> tuple[str | None, str]:
    client = _vertex_client(url)
    answer = client.models.generate_content(
        model="gemini-2.5-flash", contents="hi", config=types.GenerateContentConfig(max_output_tokens=3)
    )
    stream = client.models.generate_content_stream(
        model="gemini-2.5-flash", contents="hi", config=types.GenerateContentConfig(max_output_tokens=2)
    )
    return answer.text, "".join(chunk.text or "" for chunk in stream)


async def _token(http: httpx.AsyncClient, client_email: str = "sa@my-proj.iam.gserviceaccount.com") -> httpx.Response:
    header = "eyJhbGciOiJSUzI1NiJ9"
    import base64

    claims = base64.urlsafe_b64encode(json.dumps({"iss": client_email, "scope": SCOPES[0]}).encode()).decode()
    grant = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": f"{header}.{claims}.sig"}
    return await http.post("/token", data=grant)


async def test_vertex_ai_refuses_a_token_it_did_not_issue_and_a_revoked_account(sim_url: str) -> None:
    path = "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}
    async with httpx.AsyncClient(base_url=sim_url) as http:
        refused = await http.post(path, json=body, headers={"authorization": "Bearer ya29.forged"})
        revoked = await _token(http, "sk-sim-revoked@p.iam.gserviceaccount.com")
        token = (await _token(http)).json()
        served = await http.post(path, json=body, headers={"authorization": f"Bearer {token['access_token']}"})
    assert refused.status_code == 401 and refused.json()["error"]["status"] == "UNAUTHENTICATED"
    assert revoked.status_code == 400 and revoked.json()["error"] == "invalid_grant"
    assert token["expires_in"] == 3599 and token["token_type"] == "Bearer"
    assert served.status_code == 200 and served.json()["candidates"][0]["content"]["parts"][0]["text"].startswith(
        "tok0"
    )


async def test_claude_on_vertex_ai_by_raw_predict(sim_url: str) -> None:
    prefix = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514"
    body = {"anthropic_version": "vertex-2023-10-16", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(base_url=sim_url) as http:
        auth = {"authorization": f"Bearer {(await _token(http)).json()['access_token']}"}
        whole = await http.post(prefix + ":rawPredict", json=body, headers=auth)
        streamed = await http.post(prefix + ":streamRawPredict", json={**body, "stream": True}, headers=auth)
        unversioned = await http.post(prefix + ":rawPredict", json={**body, "anthropic_version": None}, headers=auth)
        anonymous = await http.post(prefix + ":rawPredict", json=body)
    assert whole.status_code == 200 and whole.json()["content"][0]["text"] == "tok0 tok1 tok2"
    assert whole.json()["model"] == "claude-sonnet-4@20250514"
    assert b"event: message_stop" in streamed.content
    assert unversioned.status_code == 400 and anonymous.status_code == 401


def test_vertex_ai_counts_tokens_and_embeds_as_google_genai_asks() -> None:
    """google-genai's Vertex AI client (`models.count_tokens`: `:countTokens` with the request's own
    fields; `models.embed_content` of a text-embedding model: `:predict` with `instances`) reads the
    simulator's answers, with a token from the simulator's token endpoint."""

    async def serve() -> tuple[int | None, list[int], list[float | None], int]:
        from turnout_sim.app import start_in_background

        runner, url = await start_in_background("127.0.0.1", 0)
        try:
            counted, sizes, tokens = await asyncio.to_thread(_vertex_count_and_embed, url)
            async with httpx.AsyncClient(base_url=url) as http:
                logged = len((await http.get("/sim/log")).json())
            return counted, sizes, tokens, logged
        finally:
            await runner.cleanup()

    counted, sizes, tokens, logged = asyncio.run(serve())
    assert counted == 4  # system "be brief" + "two words"
    assert sizes == [8, 8] and tokens == [2, 1]
    assert logged == 1  # the embedding is a model call; the count is not


def _vertex_count_and_embed(url: str) -> tuple[int | None, list[int], list[float | None]]:
    client = _vertex_client(url)
    config = types.CountTokensConfig(system_instruction="be brief", tools=[types.Tool(function_declarations=[WEATHER])])
    counted = client.models.count_tokens(model="gemini-2.5-flash", contents="two words", config=config)
    embedded = client.models.embed_content(
        model="text-embedding-005",
        contents=["two words", "one"],
        config=types.EmbedContentConfig(output_dimensionality=8, task_type="RETRIEVAL_QUERY"),
    )
    found = embedded.embeddings or []
    stats = [e.statistics.token_count if e.statistics else None for e in found]
    return counted.total_tokens, [len(e.values or []) for e in found], stats


async def test_claude_on_vertex_ai_counts_tokens_by_raw_predict(sim_url: str) -> None:
    path = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict"
    body = {
        "anthropic_version": "vertex-2023-10-16",
        "model": "claude-sonnet-4@20250514",
        "system": "be brief",
        "messages": [{"role": "user", "content": "three words here"}],
    }
    async with httpx.AsyncClient(base_url=sim_url) as http:
        auth = {"authorization": f"Bearer {(await _token(http)).json()['access_token']}"}
        counted = await http.post(path, json=body, headers=auth)
        unversioned = await http.post(path, json={**body, "anthropic_version": None}, headers=auth)
        anonymous = await http.post(path, json=body)
        gemini_form = await http.post(
            "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:countTokens",
            json={"generateContentRequest": {"contents": [{"parts": [{"text": "x"}]}]}},
            headers=auth,
        )
        logged = (await http.get("/sim/log")).json()
    assert counted.status_code == 200 and counted.json() == {"input_tokens": 5}
    assert unversioned.status_code == 400 and anonymous.status_code == 401
    assert gemini_form.status_code == 400 and "generateContentRequest" in gemini_form.json()["error"]["message"]
    assert logged == []


def test_turnout_sim_writes_a_key_file_whose_token_endpoint_is_the_simulator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """README "Providers: Gemini and Vertex AI": the key file a `vertex` provider on the simulator needs."""
    from turnout.rules.google_fields import check_credentials_file
    from turnout_cli.main import main

    path = tmp_path / "sa.json"
    assert main(["sim", "--port", "9199", "--write-key-file", str(path)]) == 0
    info = json.loads(path.read_text())
    assert info["type"] == "service_account" and info["token_uri"] == "http://127.0.0.1:9199/token"
    assert info["private_key"].startswith("-----BEGIN PRIVATE KEY-----") and path.stat().st_mode & 0o077 == 0
    check_credentials_file("providers.vertex.credentials_file", str(path))  # what `turnout config check` reads
    assert "token_uri http://127.0.0.1:9199/token" in capsys.readouterr().out
