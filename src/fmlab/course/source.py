"""Show the package's own code in a notebook: the PyTorch calls a lesson teaches, exactly as they run.

    from fmlab.course.source import show_source
    from fmlab.parallel.fsdp import apply_fsdp
    show_source(apply_fsdp)          # highlighted source of the function the workers call

The notebooks launch their runs through the package; this lets them print the few lines that matter
(the process group, the device mesh, `DistributedDataParallel`, `fully_shard`, `parallelize_module`)
from the very file that runs, so what the learner reads cannot drift from what executes.
"""

from __future__ import annotations

import inspect
import textwrap


def source_of(*objects) -> str:
    """The source of functions, classes or methods, separated by a blank line."""
    if not objects:
        raise ValueError("source_of needs at least one function, class or method")
    return "\n\n".join(textwrap.dedent(inspect.getsource(o)).rstrip() for o in objects) + "\n"


def show_source(*objects) -> None:
    """Display `source_of(*objects)` highlighted in Jupyter (printed elsewhere)."""
    text = source_of(*objects)
    try:
        from IPython import get_ipython
        from IPython.display import Code, display
    except ImportError:
        print(text)
        return
    if get_ipython() is None:
        print(text)
    else:
        display(Code(text, language="python"))
