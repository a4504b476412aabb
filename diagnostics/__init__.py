"""Cluster diagnostics: coded findings about TF_CONFIGs, environments and traces (``mirrorlab diagnose``)."""
