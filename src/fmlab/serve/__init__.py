"""fmlab.serve: module 10, after training: evaluate the model, export it, and host it behind a real server.

    from fmlab.serve import heldout, cloze, export, server, loadtest, endpoint

heldout   held-out perplexity of every checkpoint, and the gate that decides whether the next phase starts
cloze     the repo's own lm-evaluation-harness task (tasks/): next-word cloze on held-out sentences
export    the complete Hugging Face folder (weights, config, tokenizer, generation config, model card)
server    `transformers serve` as a child process (OpenAI-compatible HTTP API on CPU), always stopped
loadtest  concurrent streaming requests: time to first token, tokens/s, p50/p95 latency
endpoint  the same model on a SageMaker real-time endpoint with the LMI container (DJL Serving + vLLM):
          CreateModel, CreateEndpointConfig, CreateEndpoint through SDK v3, validated, never sent without AWS

Data flow: checkpoints (fmlab.train) -> heldout.checkpoint_curve -> heldout.decide; the trained model ->
export.export_model -> a folder -> cloze.run_lm_eval, server.LocalServer -> loadtest.sweep; the folder's S3
copy -> endpoint.endpoint_requests; the serving plan of a 30B model is fmlab.plan.serving.
"""
