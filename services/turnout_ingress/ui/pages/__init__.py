"""The dashboard's pages: one module per page, each a module-level `APIRouter`.

Modules: `activity` (requests, live), `request_detail` (one request's attempts), `providers`
(breaker state and health, live), `spend` (cost per period and the spend ledger) and
`export` (the records of an org, as a file). What they share comes through FastAPI
dependencies (`turnout_ingress.ui.deps`).
"""
