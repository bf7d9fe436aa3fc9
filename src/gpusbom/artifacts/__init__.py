"""Readers of model artifacts that carry compiled GPU code (Triton kernel caches, ...).

Pure functions over bytes already bounded by the caller; they raise only ``ValueError``
(:class:`gpusbom.binary.BinaryFormatError` for binaries) for bad input and never execute or
deserialize code (JSON and fixed binary headers only)."""
