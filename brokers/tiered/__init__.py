"""Tiered storage (KIP-405): closed segments copied to a remote store, read back below the local
log start. See docs/design.md, "Tiered storage"."""
