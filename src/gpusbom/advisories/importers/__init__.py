"""Importers: vendor and community formats -> gpusbom advisory records."""
