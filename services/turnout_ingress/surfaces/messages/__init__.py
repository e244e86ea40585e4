"""The Anthropic Messages surface: `POST /v1/messages` and the rest of its paths.

Modules: `surface` (the `Surface` the front door serves), `wire` (request, response and
error translation), `events` (OpenAI frames -> Anthropic SSE events), `native` (the
client's own request carried to a target of its family), `routes` (count_tokens, the
models list, errors on any `/v1/messages` path) and `tokens` (the token count).
"""
