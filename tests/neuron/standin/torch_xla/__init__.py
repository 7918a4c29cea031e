"""TEST DOUBLE of torch_xla for fmlab's tests: NOT the real package, it runs everything on the CPU.

Only what fmlab.neuron.train imports exists here (core.xla_model, distributed.xla_backend). Put the folder
tests/neuron/standin on PYTHONPATH to use it; on a Neuron machine the real torch_xla is used instead.
"""
