"""Module 11: HyperPod, for real where it can be: a Slurm cluster that runs the course's training script.

    from fmlab.hyperpod import slurm, sources
    slurm.ensure_cluster()                  # the local two-node Slurm (requirements/slurm.sh), or why there is none
    slurm.run_with_auto_resume(spec)        # sbatch + srun torchrun, a fault, requeue, resume from the checkpoint
    sources.table()                         # auto-resume, node recovery, health agent... each with its AWS page
    eks.problems(eks.manifest(...))         # the HyperPodPyTorchJob of the same training, checked against its schema

Files: slurm.py (the batch script, sbatch/squeue/scontrol, the requeue loop and node replacement that stand in for
HyperPod's auto-resume), sources.py (HyperPod's resilience features as dated, sourced facts), eks.py (the HyperPod
training operator's job, checked against hyperpodpytorchjob.schema.json, the operator's schema transcribed with its
source), stack.py (FP8 from published runs; torchtitan's and HyperPod recipes' names for the course's flags),
tiered.py (managed tiered checkpointing: the cluster setting and the one change to the engine's save). The arithmetic of recovery
is on the ground floor (fmlab.plan.recovery); the training-plan requests in fmlab.jobs.capacity. This floor sits
beside neuron/ and serve/: it imports the environment only, and starts the training script as a command.
"""
