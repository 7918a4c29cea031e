"""The notebooks' measuring room: multi-process checks that every layout of the engine (fmlab.parallel) equals one
process, the measured memory of each layout against the planner's, and the tables and figures of both.

    from fmlab.measure import views
    from fmlab.measure.launch import run_worker_task
    world = run_worker_task("suite", 4, {"parity": {"presets": ["tiny"], "layouts": [{"name": "fsdp",
                                                                                      "sharding": "full"}]}})
    views.parity_table(world)            # worst |loss diff| and |grad diff| over the ranks, per preset and layout

How to run it: `run_worker_task(task, N, args)` starts N local gloo processes with torchrun, each running
`python -m fmlab.measure.worker <task>` (tasks: parity, memory, tp_mlp, suite); rank r writes rank<r>.json, which
come back as one dict per rank. The notebook's kernel never joins a process group (the world is a subprocess).
By hand: `torchrun --nproc-per-node 4 -m fmlab.measure.worker parity --args args.json --out results/`.

Files:
- launch.py   run_worker_task: the torchrun command, its progress bar, timeout and failure excerpt (no torch)
- worker.py   the tasks a spawned world runs (python -m fmlab.measure.worker), one JSON file per rank
- parity.py   one training step under a layout against the same step on one process (reference_step,
              parallel_step, compare); make_tokens, local_rows
- state_bytes.py bytes of weights, gradients and optimizer state on a rank: measured from the local shards against
              the planner's prediction (fmlab.plan.layout)
- views.py    parity and memory tables, saved-bytes, hybrid-sharding and pipeline figures (notebooks 05 and 06)

Above the engine: this room imports fmlab.parallel, fmlab.models and fmlab.plan; nothing in the engine, the plan
or the training loop imports it. Importing `fmlab.measure` loads nothing (launch.py and views.py need no torch).
Tested by tests/parallel/test_parallel_2proc.py and test_parallel_4proc.py (and notebooks 05 and 06).
"""
