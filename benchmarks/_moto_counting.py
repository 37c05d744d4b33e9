"""``moto_server`` that logs every object it stores: one line per stored object, its
``time.time()``, ``<bucket>/<key>`` and size, tab-separated, appended to the file named
by ``$BENCH_MOTO_PUT_LOG``.

Counted where moto stores an object (``S3Backend.put_object``), which a plain PUT, the
completion of a multipart upload (its parts are not counted on their own, so an
aborted upload stores nothing) and a server-side copy all go through: the bytes written
to the bucket, whoever wrote them and whatever is deleted later.

With ``$BENCH_MOTO_REQUEST_LOG`` set, also one line per request served there (its
``time.time()``, method, path and the client's port: one port per connection), to count
what a restore asks for and over how many connections.

``python benchmarks/_moto_counting.py -H 127.0.0.1 -p <port>`` (moto's own arguments)
serves it as ``moto_server`` does, on werkzeug's server, which closes the connection
after every response. ``gunicorn -k gthread ... _moto_counting:app`` serves the same
app with keep-alive connections, as S3 does.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.s3.models import S3Backend
from moto.server import main

_LOG = os.environ.get("BENCH_MOTO_PUT_LOG")
_REQUESTS = os.environ.get("BENCH_MOTO_REQUEST_LOG")
_LOCK = threading.Lock()
_original = S3Backend.put_object


@functools.wraps(_original)
def _put_object(
    self: Any, bucket_name: str, key_name: str, value: Any, *args: Any, **kwargs: Any
) -> Any:
    stored = _original(self, bucket_name, key_name, value, *args, **kwargs)
    if _LOG:
        line = f"{time.time():.6f}\t{bucket_name}/{key_name}\t{len(value)}\n"
        with _LOCK, open(_LOG, "a") as fh:
            fh.write(line)
    return stored


S3Backend.put_object = _put_object  # type: ignore[method-assign]

_dispatch = DomainDispatcherApplication.__call__


@functools.wraps(_dispatch)
def _logged_dispatch(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
    if _REQUESTS:
        line = (
            f"{time.time():.6f}\t{environ.get('REQUEST_METHOD')}\t"
            f"{environ.get('PATH_INFO')}\t{environ.get('REMOTE_PORT')}\n"
        )
        with _LOCK, open(_REQUESTS, "a") as fh:
            fh.write(line)
    return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _logged_dispatch  # type: ignore[method-assign]

#: The app for a WSGI server of one's choice (``gunicorn ... _moto_counting:app``).
app = DomainDispatcherApplication(create_backend_app)

if __name__ == "__main__":
    sys.exit(main())
