"""Watch Turnout route your calls from the official SDKs.

Run the dev stack (`scripts/dev`), then:

    .venv/bin/python examples/client_routing.py

It prints the routing of each answer: which provider and model served, how
many attempts the gateway made, whether it fell back; an Anthropic SDK call;
a stream (the routing is known before the first chunk); and a client-side
model chain that takes over when a model's whole gateway chain is exhausted.
Set TURNOUT_URL / TURNOUT_KEY for another gateway.
"""

from __future__ import annotations

import os

import anthropic
import openai

from turnout_client import GatewayRouting, gateway_http_client, routing_of

BASE_URL = os.environ.get("TURNOUT_URL", "http://127.0.0.1:8080")
KEY = os.environ.get("TURNOUT_KEY", "tk-demo-local-only-0001")
HELLO = [{"role": "user", "content": "hello"}]


def show(event: GatewayRouting) -> None:
    asked = f"{event.requested_model} " if event.requested_model else ""  # known with a model chain only
    print(
        f"  [{event.status}] {asked}served by {event.provider}/{event.model} "
        f"after {event.attempts} attempt(s); fallback={event.fallback} replay={event.idempotent_replay} "
        f"chain_index={event.chain_index}"
    )


def main() -> None:
    print("OpenAI SDK, demo-gpt (its first provider always answers 503):")
    with openai.OpenAI(
        base_url=f"{BASE_URL}/v1", api_key=KEY, http_client=gateway_http_client(on_routing=show)
    ) as client:
        raw = client.chat.completions.with_raw_response.create(model="demo-gpt", messages=HELLO)  # type: ignore[arg-type]
        event = routing_of(raw)
        print("  answer:", raw.parse().choices[0].message.content, "| request id:", event and event.request_id)

        print("streaming:")
        stream = client.chat.completions.create(model="demo-gpt", messages=HELLO, stream=True)  # type: ignore[arg-type]
        print("  text:", "".join(c.choices[0].delta.content or "" for c in stream if c.choices))

    # `sim-east/demo-gpt` pins the provider that always answers 503: the gateway's chain is exhausted (502)
    chain = {"sim-east/demo-gpt": ["demo-small"]}
    with openai.OpenAI(
        base_url=f"{BASE_URL}/v1", api_key=KEY, http_client=gateway_http_client(on_routing=show, model_chain=chain)
    ) as client:
        print("client-side model chain: sim-east/demo-gpt, then demo-small:")
        answer = client.chat.completions.create(model="sim-east/demo-gpt", messages=HELLO)  # type: ignore[arg-type]
        print("  answer:", answer.choices[0].message.content)

    print("Anthropic SDK:")
    with anthropic.Anthropic(
        base_url=BASE_URL, api_key=KEY, http_client=gateway_http_client(on_routing=show)
    ) as claude:
        message = claude.messages.create(model="demo-claude", max_tokens=8, messages=HELLO)  # type: ignore[arg-type]
        print("  answer:", message.content[0].text)  # type: ignore[union-attr]


if __name__ == "__main__":
    main()
