"""Limits at the ingress (SPEC §10): what a request may use before it is admitted.

Modules: `admission` (a key's ceilings and counted limits: the held admission or the
400 / 429), `budgets` (what a budget's scope has spent this period, and the spend
strategies), `reservations` (a request's worst case reserved against a hard budget).
"""
