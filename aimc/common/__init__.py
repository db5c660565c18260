"""The neutral base every layer may import: configuration errors, strict config models, atomic file writes,
the figure style and its PNG + PDF save, and the package version. It imports nothing else of aimc."""
