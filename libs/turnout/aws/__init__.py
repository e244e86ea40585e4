"""The AWS edge of the `bedrock` provider family: key forms, SigV4 signing and event-stream reading.

Owns nothing of a family's translation (`turnout.adapters.bedrock*` does that): only what needs
botocore, which is imported inside the functions of `sigv4` and `eventstream` (a process with
no `bedrock` provider never loads it: it costs memory in every process), and the pure form of a
Bedrock key (`keys`), which the configuration checks.
Must not import: `turnout.adapters`, services, FastAPI, arq, httpx.
"""
