"""Rules for values an operator or a tenant writes, shared by the configuration, the catalog,
tenancy and the adapters (SPEC §6, §11).

Owns, one job per module, each refusing a value with its path named:
- `text`: strings fit for a header or a log line (ids, model names, keys, URLs);
- `ssrf`: where a tenant's custom endpoint may point (the SSRF guard and its allow-list);
- `provider_rules`: what a provider may read its key from and point at (no `TURNOUT_*`
  variable, no link-local or cloud metadata address);
- `google_fields`: the fields of a `vertex` (and `gemini`) provider.

A leaf: it imports nothing of Turnout's but `turnout.errors` and `turnout.scrub`, so every
package that writes or checks such a value can read it without an import cycle.
"""
