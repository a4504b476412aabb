"""Cluster diagnostics (``mirrorlab diagnose`` / ``preflight``): not part of this release yet."""
