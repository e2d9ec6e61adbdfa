"""The old name of agent/durable/learned_model_facts.py, kept for
agent/runtime/channel_runtime.py while that file is being split; delete this once it
imports LearnedModelFacts from there."""

from agent.durable.learned_model_facts import LearnedModelFacts as ProviderQuirks

__all__ = ["ProviderQuirks"]
