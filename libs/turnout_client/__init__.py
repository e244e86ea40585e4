"""Turnout's client helper: the official SDKs' view of how the gateway routed.

Plug it into `openai` / `anthropic` through `http_client=` (no monkey
patching)::

    import openai
    from turnout_client import gateway_http_client, span_hook

    client = openai.OpenAI(
        base_url="http://127.0.0.1:8080/v1", api_key="tk-...",
        http_client=gateway_http_client(on_routing=[print, span_hook], model_chain={"gpt-5": ["small"]}),
    )

Install with the `[client]` extra. This package never imports the server
side (`turnout`, the services): a test checks it.
"""

from turnout_client.chain import IdempotencyKeys, ModelChain
from turnout_client.clients import async_gateway_http_client, gateway_http_client, http_package
from turnout_client.otel import span_hook
from turnout_client.routing import GatewayRouting, parse_routing, routing_of
from turnout_client.transport import AsyncGatewayTransport, GatewayTransport, RoutingCallback

__all__ = [
    "AsyncGatewayTransport",
    "GatewayRouting",
    "GatewayTransport",
    "IdempotencyKeys",
    "ModelChain",
    "RoutingCallback",
    "async_gateway_http_client",
    "gateway_http_client",
    "http_package",
    "parse_routing",
    "routing_of",
    "span_hook",
]
