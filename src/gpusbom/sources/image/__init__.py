"""What every image source shares: media types, digests, platforms, and reading an image
out of a ``BlobStore`` (an OCI layout or a ``docker save`` tree, on disk or inside a tar).

A store answers three questions about paths relative to the layout root
("index.json", "blobs/sha256/<hex>", "<id>/layer.tar"): does it exist, give me its
bytes (small JSON only, capped), and stream it through ``read_layer``. The two readers
here (``plan_oci`` for OCI layouts, ``plan_docker`` for ``manifest.json``) turn a store
into an ``ImagePlan``; ``read_layers`` then streams the layers it lists, in order.

The package: ``oci`` (media types, digests, platforms), ``plan`` (stores and image plans),
``layers`` (reading the layers).
"""

from __future__ import annotations

from ...fsview.types import with_layer_index  # moved to fsview; kept here for sources
from .layers import (
    LayersCancelled,
    finish_layer,
    layer_processes,
    layer_workers,
    make_target,
    read_layers,
    read_layers_forked,
    read_layers_parallel,
    stream_layer,
)
from .oci import (
    CONFIG_TYPES,
    CONTAINERD_NAME,
    DOCKER_LIST,
    DOCKER_MANIFEST,
    INDEX_TYPES,
    LAYER_TYPES,
    MANIFEST_TYPES,
    MAX_JSON_BYTES,
    OCI_INDEX,
    OCI_MANIFEST,
    REF_NAME,
    OciPlatform,
    blob_path,
    check_digest,
    digest_from_name,
    host_platform,
    parse_json,
    sha256_digest,
    verify,
    wanted_platform,
)
from .plan import (
    BlobStore,
    ImageConfig,
    ImagePlan,
    LayerPlan,
    check_manifest_type,
    check_platform,
    choose_manifest,
    is_index,
    parse_config,
    plan_docker,
    plan_from_manifest,
    plan_oci,
    split_reference,
)

__all__ = [
    "BlobStore",
    "CONFIG_TYPES",
    "CONTAINERD_NAME",
    "DOCKER_LIST",
    "DOCKER_MANIFEST",
    "INDEX_TYPES",
    "ImageConfig",
    "ImagePlan",
    "LAYER_TYPES",
    "LayerPlan",
    "LayersCancelled",
    "MANIFEST_TYPES",
    "MAX_JSON_BYTES",
    "OCI_INDEX",
    "OCI_MANIFEST",
    "OciPlatform",
    "REF_NAME",
    "blob_path",
    "check_digest",
    "check_manifest_type",
    "check_platform",
    "choose_manifest",
    "digest_from_name",
    "finish_layer",
    "host_platform",
    "is_index",
    "layer_processes",
    "layer_workers",
    "make_target",
    "parse_config",
    "parse_json",
    "plan_docker",
    "plan_from_manifest",
    "plan_oci",
    "read_layers",
    "read_layers_forked",
    "read_layers_parallel",
    "sha256_digest",
    "split_reference",
    "stream_layer",
    "verify",
    "wanted_platform",
    "with_layer_index",
]
