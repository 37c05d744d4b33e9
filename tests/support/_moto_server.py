"""``moto_server`` whose conditional object writes are atomic (the S3 fixture runs this
file instead of moto's own script).

AWS documents a conditional ``PutObject`` (``If-None-Match: *``, ``If-Match``) and
``DeleteObject`` (``If-Match``) as atomic: of racing writers, one wins. moto checks the
precondition, then writes, in two steps, and serves requests in threads, so two racing
writers could both pass the check (measured: 1 round in 120 of 8 racers had two
winners). Here each object write or delete of moto's S3 runs under one lock, which
makes check and write one step, as on S3. ``app`` serves it under another WSGI server.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.s3.responses import S3Response
from moto.server import main

_WRITES = threading.Lock()


def _atomic(method: Any) -> Any:
    @functools.wraps(method)
    def serialised(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _WRITES:
            return method(self, *args, **kwargs)

    return serialised


S3Response.put_object = _atomic(S3Response.put_object)  # type: ignore[method-assign]
S3Response.delete_object = _atomic(S3Response.delete_object)  # type: ignore[method-assign]

#: The same emulator for another WSGI server: ``gunicorn ... _moto_server:app`` keeps
#: connections open between requests, as S3 does (moto's own server closes each one
#: after its response), for tests of connection reuse.
app = DomainDispatcherApplication(create_backend_app)

if __name__ == "__main__":
    sys.exit(main())
