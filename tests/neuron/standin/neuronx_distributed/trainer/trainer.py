"""TEST DOUBLE of neuronx_distributed.trainer.trainer: NxD's config dict, a model wrapper with `run_train` and
activation checkpointing of the named module classes, and an optimizer wrapper that all-reduces data-parallel
gradients, clips them to max_grad_norm and reports `grad_norm`. Tensor and pipeline size 1 only."""

import torch
import torch.distributed as dist
import torch.utils.checkpoint

from neuronx_distributed.parallel_layers import parallel_state


def neuronx_distributed_config(tensor_parallel_size=1, pipeline_parallel_size=1, expert_parallel_size=1,
                               pipeline_config=None, optimizer_config=None, activation_checkpoint_config=None,
                               pad_model=False, sequence_parallel=False, model_init_config=None, lora_config=None,
                               mixed_precision_config=None):
    parallel_state.initialize_model_parallel(tensor_parallel_size, pipeline_parallel_size)
    optimizer_config = {"zero_one_enabled": False, "grad_clipping": True, "max_grad_norm": 1.0,
                        **(optimizer_config or {})}
    return {"tensor_parallel_size": tensor_parallel_size, "pipeline_parallel_size": pipeline_parallel_size,
            "pipeline_config": pipeline_config, "optimizer_config": optimizer_config,
            "activation_checkpoint_config": activation_checkpoint_config, "sequence_parallel": sequence_parallel}


class NxDModel(torch.nn.Module):
    def __init__(self, module, nxd_config):
        super().__init__()
        self.module = module
        self.nxd_config = nxd_config

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def run_train(self, *args, **kwargs):
        loss = self.forward(*args, **kwargs)
        loss = loss[0] if isinstance(loss, tuple) else loss
        loss.backward()
        return loss

    def state_dict(self, *args, **kwargs):
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict=True):
        return self.module.load_state_dict(state_dict, strict=strict)

    def named_parameters(self, *args, **kwargs):
        return self.module.named_parameters(*args, **kwargs)


def _apply_activation_checkpointing(model, classes):
    """Run the forward of every submodule of these classes under torch.utils.checkpoint (names unchanged)."""
    for module in model.modules():
        if isinstance(module, classes):
            plain_forward = module.forward

            def checkpointed(*args, _forward=plain_forward):
                return torch.utils.checkpoint.checkpoint(_forward, *args, use_reentrant=False)

            module.forward = checkpointed


def initialize_parallel_model(nxd_config, model_fn, *model_args, **model_kwargs):
    model = model_fn(*model_args, **model_kwargs)
    classes = nxd_config["activation_checkpoint_config"]
    if classes == "full":
        raise RuntimeError('`activation_checkpoint_config` "full" is only supported for huggingface transformers '
                           "or nxdt models (as in NxD): pass the decoder layer class")
    if classes is not None:
        _apply_activation_checkpointing(model, tuple(classes) if isinstance(classes, (list, tuple)) else (classes,))
    return NxDModel(model, nxd_config)


class NxDOptimizer(torch.optim.Optimizer):
    def __init__(self, optimizer, nxd_config):  # like NxD's, it does not call Optimizer.__init__
        self.optimizer = optimizer
        self.nxd_config = nxd_config
        self._grad_norm = None
        self.params = [p for group in self.param_groups for p in group["params"]]

    @property
    def grad_norm(self):
        return self._grad_norm

    @property
    def state(self):
        return self.optimizer.state

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def defaults(self):
        return self.optimizer.defaults

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self.optimizer.load_state_dict(state_dict)

    def zero_grad(self, set_to_none=False):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        grads = [p.grad for p in self.params if p.grad is not None]
        if dist.is_initialized() and dist.get_world_size() > 1:
            for grad in grads:
                dist.all_reduce(grad)
                grad /= dist.get_world_size()
        config = self.nxd_config["optimizer_config"]
        if config["grad_clipping"]:
            self._grad_norm = torch.nn.utils.clip_grad_norm_(self.params, config["max_grad_norm"])
        return self.optimizer.step(closure)


def initialize_parallel_optimizer(nxd_config, optimizer_class, parameters, **defaults):
    return NxDOptimizer(optimizer_class(parameters, **defaults), nxd_config)
