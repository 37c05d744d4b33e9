"""The storage suite's fixtures live in ``tests/support/servers.py`` (other layers'
tests need a bucket too); here they are made visible to every test of this folder."""

from ..support.servers import (  # noqa: F401
    aws_env,
    gcs_url,
    moto_keepalive_url,
    moto_url,
    proxy_to,
)
