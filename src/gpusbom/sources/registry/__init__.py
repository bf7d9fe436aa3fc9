"""``registry:REF`` (and bare references the Docker Engine does not have): an OCI registry.

Speaks the OCI distribution API with ``requests``, with no daemon and nothing staged on
disk: manifests and configs are small JSON documents (capped), and every layer blob is
streamed once, straight from the HTTP response, through ``fsview.layer.read_layer``,
which verifies the blob digest while it reads. Layers are fetched in parallel (a few
threads; decompression and hashing release the GIL).

* References follow Docker's rules: ``ubuntu`` is ``docker.io/library/ubuntu:latest``, and
  Docker Hub's API lives at ``registry-1.docker.io``. A first component with a ``.`` or a
  ``:``, or ``localhost``, is a registry host.
* Authentication: anonymous, ``Basic``, and the bearer-token flow driven by the
  ``WWW-Authenticate`` challenge (including the OAuth2 refresh-token form when the Docker
  config holds an ``identitytoken``). Credentials come from ``RegistryOptions`` (the CLI's
  ``--username`` / ``--password-stdin``), else from the Docker config
  (``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``): ``credHelpers``, then
  ``credsStore`` (``docker-credential-NAME get``, the registry host on stdin), then ``auths``.
  Secrets never appear in messages or logs.
* TLS is verified (``REQUESTS_CA_BUNDLE`` and Docker's ``certs.d/HOST/ca.crt`` are honoured);
  ``--insecure-registry HOST`` accepts an unverified certificate or plain HTTP for HOST.
* Requests are retried with backoff on 429 / 5xx and on dropped connections; a layer whose
  connection drops mid-stream resumes with a ``Range`` request (or skips what it already
  read when the registry ignores ranges), so the layer's reader sees one unbroken stream.

The package: ``ref`` (references, hosts), ``credentials`` (options, Docker config, helpers),
``client`` (the distribution API), ``blobstream`` (a resumable layer stream), ``source``
(``RegistrySource``).
"""

from __future__ import annotations

from .blobstream import BlobStream
from .client import RegistryClient, parse_challenges
from .credentials import Credentials, RegistryOptions, Secret, docker_config_dir, load_credentials
from .ref import ImageRef, RegistryError, normalize_host
from .source import RegistrySource, RegistryStore

__all__ = [
    "BlobStream",
    "Credentials",
    "ImageRef",
    "RegistryClient",
    "RegistryError",
    "RegistryOptions",
    "RegistrySource",
    "RegistryStore",
    "Secret",
    "docker_config_dir",
    "load_credentials",
    "normalize_host",
    "parse_challenges",
]
