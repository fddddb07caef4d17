"""adbench: the importable harness behind the pipeline's timing and analysis scripts.

Layers (see DESIGN.md): spec (no framework imports) -> backends (one module per framework)
-> timing (one loop for all) -> schema/provenance (raw Parquet) -> stats/tables (analysis).
"""
