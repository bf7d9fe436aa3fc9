"""gpusbom: SBOMs and supply-chain facts for GPU software stacks."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
