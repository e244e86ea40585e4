"""The ingress's guards at the HTTP level, and the door's refusals made visible.

Modules: `http` (HTTP/1.1 hardening: header size, header and body deadlines, the
connection cap), `fd_budget` (the connection cap against the file descriptor limit,
checked at start), `methods` (`HEAD` and the `Allow` of a 405), `door` (the route
label of any path, the refusals' count and log) and `refusal_writer` (the refusal
rows, buffered and flushed to Redis).
"""
