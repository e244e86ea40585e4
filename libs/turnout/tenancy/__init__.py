"""Tenancy: who is calling, what their org may do, and the secrets it keeps (SPEC §6).

Owns the tenancy wing, one job per module:
- `identity`: the caller's `Identity` resolved from a gateway key;
- `orgs`: an org document's validation, clamping and routing identities
  (the document as stored is `turnout.stored.orgs`);
- `admin`: the admin API's edits of an org document, without HTTP;
- `views`: what admin reads show of an org document (secrets masked);
- `byok`: from the pure credential choice to a provider to call;
- `directory`: each process's snapshot of the tenancy store, kept fresh;
- `bootstrap`: the configuration file's `orgs:` merged into the store;
- `prune`: what the file wrote and no longer declares, removed from the store;
- `ceilings`: the operator's ceilings an org's admins cannot lift.

Secrets are sealed by the leaf `turnout.vault`; the rules for what a tenant
writes (ids, keys, URLs: `turnout.rules.text`) and where its endpoints may
point (`turnout.rules.ssrf`) are in the leaf package `turnout.rules`, which
the configuration reads too. Names are imported from their modules
(`from turnout.tenancy.identity import Identity`): importing one module of
the wing never loads the others.
"""
