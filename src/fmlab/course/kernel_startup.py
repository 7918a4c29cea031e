"""What each notebook kernel that fmlab.course.run starts runs before its first cell (PYTHONSTARTUP, which IPython
runs in the kernel): Python's garbage collector collects less often, so the notebook's imports cost less.

A notebook imports torch, transformers' Llama, pandas and matplotlib in its first cells: a few million objects that
live as long as the kernel, and the collector, at its default thresholds (700, 10, 10), walks them again and again
while they are made. Measured on the 2-core machine (2026-11-26, fresh interpreters importing that set, 4 rounds
interleaved): 6.82 CPU s at the defaults, 5.99 at (50,000, 20, 10), 5.68 with the collector off. The collector stays
on: a notebook that makes cyclic garbage has it collected, only in larger batches. Nothing else changes, so a
notebook computes the same here as in a learner's kernel. Run as a file, not imported: it defines no names.
"""

__import__("gc").set_threshold(50_000, 20, 10)
