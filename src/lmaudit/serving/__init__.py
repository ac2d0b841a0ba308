"""A model as it is served: its per-token log-probabilities from vLLM's engine or an HTTP endpoint, and the check that
proves them right before an audit reads them."""
