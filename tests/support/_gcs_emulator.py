"""``gcp-storage-emulator`` with a socket timeout on its requests and GCS's generation
preconditions (the GCS fixture runs this file instead of the emulator's own script).

The emulator serves one request at a time (a plain ``http.server.HTTPServer``). A client
that stops sending a request body halfway, as an upload cancelled mid-part may, held it,
and every request after it, until the client's connection happened to close: once a
whole suite run stalled for a quarter of an hour that way and its next tests failed.
With a timeout, a stalled read gives up after a few seconds and the emulator serves on.

The emulator ignores ``ifGenerationMatch`` (uploads, deletes) and ``generation`` (media
downloads), which real GCS honours and the storage driver's conditional writes rely on.
They are added here as GCS documents them: a precondition that does not hold is
``412 Precondition Failed`` and changes nothing; ``ifGenerationMatch=0`` holds when no
live object has the name; a download of a generation that is not the live one is 404.
Requests are served one at a time, so each check and its write are atomic, as on GCS.
"""

from __future__ import annotations

import sys
from http import HTTPStatus
from typing import Any

from gcp_storage_emulator import server
from gcp_storage_emulator.__main__ import main
from gcp_storage_emulator.exceptions import NotFound
from gcp_storage_emulator.handlers import objects

#: Seconds one read or write on a request's socket may block the emulator.
server.RequestHandler.timeout = 5


def _live_generation(storage: Any, bucket: str, name: str) -> int:
    try:
        return int(storage.get_file_obj(bucket, name)["generation"])
    except NotFound:
        return 0


def _precondition_holds(request: Any, response: Any, storage: Any, name: str | None) -> bool:
    wanted = request.query.get("ifGenerationMatch")
    if not wanted or name is None:
        return True
    if _live_generation(storage, request.params["bucket_name"], name) == int(wanted[0]):
        return True
    response.status = HTTPStatus.PRECONDITION_FAILED
    response.json({"error": {"code": 412, "message": "Precondition Failed"}})
    return False


def _upload_name(request: Any) -> str | None:
    if "name" in request.query:
        return str(request.query["name"][0])
    if isinstance(request.data, dict):  # multipart: the metadata part names it
        meta = request.data.get("meta") or {}
        return meta.get("name")
    return None


def _with_preconditions(handler: Any, name_of: Any) -> Any:
    def checked(request: Any, response: Any, storage: Any, *args: Any, **kwargs: Any) -> Any:
        if not _precondition_holds(request, response, storage, name_of(request)):
            return None
        return handler(request, response, storage, *args, **kwargs)

    return checked


def _download_of_generation(handler: Any) -> Any:
    def download(request: Any, response: Any, storage: Any, *args: Any, **kwargs: Any) -> Any:
        wanted = request.query.get("generation")
        if wanted:
            live = _live_generation(
                storage, request.params["bucket_name"], request.params["object_id"]
            )
            if live != int(wanted[0]):
                response.status = HTTPStatus.NOT_FOUND
                response.json({"error": {"code": 404, "message": "No such generation"}})
                return None
        return handler(request, response, storage, *args, **kwargs)

    return download


def _install() -> None:
    replaced = {
        objects.insert: _with_preconditions(objects.insert, _upload_name),
        objects.delete: _with_preconditions(
            objects.delete, lambda request: request.params.get("object_id")
        ),
        objects.download: _download_of_generation(objects.download),
    }
    for _, handlers in server.HANDLERS:
        for method, handler in list(handlers.items()):
            if handler in replaced:
                handlers[method] = replaced[handler]
    # Called by name elsewhere: the router's fallback for bare uploads, and the
    # metadata handler for ``alt=media``.
    objects.insert, objects.download = replaced[objects.insert], replaced[objects.download]


_install()

if __name__ == "__main__":
    sys.exit(main())
