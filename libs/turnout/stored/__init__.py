"""The documents Turnout stores in Redis, as stored: an org's (`orgs`) and the catalog (`catalog`).

A leaf of the library below the state edge, which reads and writes them
(`turnout.state.tenant_store`, `turnout.state.catalog_store`), and the wings,
which give them meaning (`turnout.tenancy`, `turnout.catalog`): the
documents import only `core`, the configuration's types and the leaf
`turnout.vault`, so the state edge needs neither wing. Importing one module
imports nothing else of the package.
"""
