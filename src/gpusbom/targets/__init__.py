"""The kinds of scan target, each a source of the pipeline's first stage (``pipeline``):
an image (``image.py``: every reference ``sources.resolve_source`` reads), a host root
(``host.py``: this machine, a mounted node root, a snapshot) and an existing SBOM
(``sbom.py``). Each is a :class:`~gpusbom.targets.base.TargetSource`: it says whether a
request names it, checks its part of the request, names the target, and opens the
:class:`~gpusbom.targets.base.View` the later stages read. The pipeline asks them in turn
(``pipeline.KINDS``) instead of branching on the input's kind.

This package's ``__init__`` imports nothing: an SBOM scan loads no image or host code.
"""
