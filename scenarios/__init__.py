"""The scenario catalog: one TOML file per story and the built-in training programs they run (``programs.py``);
installed as ``mirrorlab.catalog``."""
