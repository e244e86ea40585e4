"""The client surfaces the front door serves: one module or package per client API.

Modules: `registry` (`SURFACES`, the one list of the surfaces' `POST` routes), `base`
(the `Surface` seam and the canonical `Inbound`), `chat`, `completions`, `embeddings`
and `inputs` (OpenAI's), and the packages `messages` (Anthropic's Messages API) and
`responses` (OpenAI's Responses API), each with its wire translation, its events, its
native carry and its other routes.
This package imports nothing: a surface's module imports only what it needs.
"""
