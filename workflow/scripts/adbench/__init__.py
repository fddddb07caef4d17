"""adbench: the importable harness behind the pipeline's timing and analysis scripts.

Layers, bottom to top (docs/design.md): experiment spec and contracts -> backends -> timing
-> analysis -> presentation -> scripts. A module imports its own layer and those below it;
a timing job loads the first three alone. docs/design.md's table gives every module its
layer, and tests/test_architecture.py checks the imports against it.
"""
