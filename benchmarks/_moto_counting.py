"""``moto_server`` that logs every object it stores: one line per stored object, its
``time.time()``, ``<bucket>/<key>`` and size, tab-separated, appended to the file named
by ``$BENCH_MOTO_PUT_LOG``.

Counted where moto stores an object (``S3Backend.put_object``), which a plain PUT, the
completion of a multipart upload (its parts are not counted on their own, so an
aborted upload stores nothing) and a server-side copy all go through: the bytes written
to the bucket, whoever wrote them and whatever is deleted later.

With ``$BENCH_MOTO_REQUEST_LOG`` set, also one line per request served there (its
``time.time()``, method and path), to count what a restore asks for.

``python benchmarks/_moto_counting.py -H 127.0.0.1 -p <port>`` (moto's own arguments).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from typing import Any

from moto.s3.models import S3Backend
from moto.server import main
from werkzeug.serving import WSGIRequestHandler

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

_run_wsgi = WSGIRequestHandler.run_wsgi


@functools.wraps(_run_wsgi)
def _logged_run_wsgi(self: Any) -> Any:
    if _REQUESTS:
        line = f"{time.time():.6f}\t{self.command}\t{self.path}\n"
        with _LOCK, open(_REQUESTS, "a") as fh:
            fh.write(line)
    return _run_wsgi(self)


WSGIRequestHandler.run_wsgi = _logged_run_wsgi  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
