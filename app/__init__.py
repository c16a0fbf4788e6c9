"""Orchestrace: browse, audit and label LLM multi-agent orchestration traces."""
