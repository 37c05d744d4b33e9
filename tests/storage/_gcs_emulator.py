"""``gcp-storage-emulator`` with a socket timeout on its requests (the GCS fixture runs
this file instead of the emulator's own script).

The emulator serves one request at a time (a plain ``http.server.HTTPServer``). A client
that stops sending a request body halfway, as an upload cancelled mid-part may, held it,
and every request after it, until the client's connection happened to close: once a
whole suite run stalled for a quarter of an hour that way and its next tests failed.
With a timeout, a stalled read gives up after a few seconds and the emulator serves on.
"""

from __future__ import annotations

import sys

from gcp_storage_emulator import server
from gcp_storage_emulator.__main__ import main

#: Seconds one read or write on a request's socket may block the emulator.
server.RequestHandler.timeout = 5

if __name__ == "__main__":
    sys.exit(main())
