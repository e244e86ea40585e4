"""The serving path every client surface goes through: from the raw request to the answer.

Modules: `front_door` (the one admission pipeline of every surface's `POST`),
`validation` (size, authentication, JSON and schema), `preflight` (the plan and
health view, or why the request cannot be served), `idempotency` (`Idempotency-Key`),
`disconnect` (the work raced with the client leaving) and `streaming` (`stream: true`
served in the ingress).
"""
