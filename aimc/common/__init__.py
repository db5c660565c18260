"""The neutral base every layer may import: configuration errors, strict config models, atomic file writes
and the package version. It imports nothing else of aimc."""
