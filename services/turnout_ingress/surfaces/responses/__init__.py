"""The OpenAI Responses surface: `POST /v1/responses` and its stored Responses.

Modules: `surface` (the `Surface` the front door serves), `request` (a Responses request
-> the canonical chat request), `params` (errors told in the Responses request's words),
`tools` (tools, tool choice and text format), `answer` (the Response object), `events`
(chat chunks -> Responses events), `native` (the client's own request carried to an
`api: responses` offer) and `routes` (stored Responses read back and deleted).
"""
