"""The dashboard's pages: one module per page, each a module-level `APIRouter`.

Modules: `activity` (requests, live), `request_detail` (one request's attempts), `providers`
(breaker state and health, live), `spend` (cost per period and the spend ledger),
`export` (the records of an org, as a file) and `settings` (a scope's routing settings, edited). What they share comes through FastAPI
dependencies (`turnout_ingress.ui.deps`).
"""
