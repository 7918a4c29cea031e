"""Planning a pretraining run (module 1): facts as data, and the arithmetic on them.

    from fmlab.plan import catalog, compute, layout
    from fmlab.plan.parallelism import ParallelConfig
    m = catalog.model("gpt-30b")                                     # a published model shape
    plan = layout.make_plan(m, 300e9, "ml.p4d.24xlarge", 16,         # memory per device, the predicted step,
                            parallel=ParallelConfig(sharding="full", activation_checkpointing="full"),
                            micro_batch=4)                           # and the days and dollars it gives
    plan.step, plan.mfu, plan.days                                   # MFU is the prediction's output
    compute.estimate_run(m, 300e9, "ml.p4d.24xlarge", 16, mfu=0.4)   # a "what if" at an MFU you choose

Files, in the order the course uses them:
- catalog.py   instances, accelerators, model shapes and published runs, each with its source and date read
- compute.py   parameters, FLOPs per token, training time, cost, MFU, the phased scaling plan; PlanError
- parallelism.py  ParallelConfig: THE parallel layout (sharding, tp, pp, activation checkpointing, ...) and its one check,
                 read by the planner, the engine (fmlab.parallel), TrainConfig and every job
- layout.py    the memory a layout needs per device, and the plan of a run (make_plan), the candidate layouts and the
               rule that chooses one (the fastest predicted step that fits with headroom)
- hardware.py  what a GPU and its links really do: measured matmul, attention and memory rates, NCCL bandwidths
- speed.py     the step-time model: compute, exposed communication per collective, bubble; MFU as its output
- published.py published runs (docs/published-runs.md) predicted against their reported throughput
- traffic.py   data parallelism in bytes: ring all-reduce, parameter server, Herring (SMDDP); published claims
- scaling.py   global batch, pipeline bubbles, 3-D layouts, hybrid-sharding traffic, EFA time against compute
- decision.py  the "should you pretrain at all?" questions and their recommendation
- reliability.py  failures at scale (a published failure rate), job MTBF, Young/Daly checkpoint intervals
- capacity.py, recovery.py  module 11: what to reserve and at what price; the recovery options in module 8's terms
- simulate.py  module 12: many runs of one plan under chance (failures, spikes, a job chain, a reservation that ends)
- scenario.py  the simulator's inputs from a plan, each read from the module that owns it
- capstone.py  module 12's briefs, the plan a learner hands in, and how it is graded

Nothing here imports torch: a plan is pure arithmetic, tested against published figures (tests/plan/test_planning.py).
"""

from fmlab.plan import catalog, compute, decision, layout, parallelism, reliability
from fmlab.plan.compute import PlanError

__all__ = ["PlanError", "catalog", "compute", "decision", "layout", "parallelism", "reliability"]
