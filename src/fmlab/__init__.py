"""fmlab: the helper package of the course "Pretraining Foundation Models on AWS".

Modules, one idea each (see DESIGN.md): catalog (facts), planning (FLOPs, time, cost), layout (parallel
layouts and memory per device), record (notebook figures), labs (exercise checks), widgets and plots
(notebook UI), cli (the `fmlab` command).
"""

__version__ = "0.1.0"
