"""Cluster diagnostics as coded findings: static TF_CONFIG and environment checks (``mirrorlab diagnose``) and
the live reachability probe (``mirrorlab preflight``), and the analysis of collective traces (``mirrorlab trace
analyze``); the catalog of codes is ``docs/diagnostics.md``."""
